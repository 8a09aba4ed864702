"""The Pulumi program of esi (``pulumi up`` at the repository root runs it).

One program, two kinds of stack (``esi:mode``, default: the stack's name):

* ``local`` — what ``make up`` runs: a local control plane with KWOK nodes, and esi's components as
  supervised local processes (``infra.local_stack``);
* ``cluster`` — an existing cluster named by a kubeconfig: esi's components as Deployments with
  least-privilege RBAC, and the Spark and Flink operators as Helm releases (``infra.cluster_stack``).

Either way, the Testbeds, BatchJobs and Schedulings committed under ``manifests/`` (``esi:manifests``) are
applied last, server-side, exactly as committed (``infra.gitops``).
"""

from __future__ import annotations

from pathlib import Path

import pulumi

from infra.gitops import Manifests
from infra.toolchain import REPO_ROOT

config = pulumi.Config("esi")
mode = config.get("mode") or pulumi.get_stack()

if mode == "local":
    from infra.local_stack import LocalEsi, LocalEsiArgs

    esi = LocalEsi("esi", LocalEsiArgs.from_config(config))
    pulumi.export("kubeconfig", esi.kubeconfig)
    pulumi.export("apiUrl", esi.api_url)
    pulumi.export("apiToken", pulumi.Output.secret(esi.api_token))
    pulumi.export("docsUrl", esi.docs_url)
elif mode == "cluster":
    from infra.cluster_stack import ClusterEsi, ClusterEsiArgs

    esi = ClusterEsi("esi", ClusterEsiArgs.from_config(config))
    pulumi.export("namespace", esi.namespace)
    pulumi.export("apiService", esi.api_service)
else:
    raise ValueError(f"esi:mode must be 'local' or 'cluster', not {mode!r} (stack {pulumi.get_stack()!r})")

manifests = Manifests(
    "manifests",
    directory=str(REPO_ROOT / Path(config.get("manifests") or "manifests")),  # relative: to the repository
    default_namespace=config.get("namespace") or "default",
    provider=esi.provider,
    opts=pulumi.ResourceOptions(depends_on=[esi]),
)
pulumi.export("manifests", manifests.applied)
