"""The Pulumi program of esi (``pulumi up`` at the repository root runs it).

One program, two kinds of stack (``esi:mode``, default: the stack's name):

* ``local`` — what ``make up`` runs: a local control plane with KWOK nodes, and esi's components as
  supervised local processes (``infra.stacks.local``);
* ``cluster`` — an existing cluster named by a kubeconfig: esi's components as Deployments with
  least-privilege RBAC, and the Spark and Flink operators as Helm releases (``infra.stacks.cluster``).

Either way, the Testbeds, BatchJobs and Schedulings committed under ``manifests/`` (``esi:manifests``) are
applied last, server-side, exactly as committed (``infra.stacks.gitops``).
"""

from __future__ import annotations

from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s

from infra.stacks.cluster import ClusterEsi, ClusterEsiArgs, ConfigError
from infra.stacks.gitops import Manifests
from infra.stacks.local import LocalEsi, LocalEsiArgs
from infra.toolchain import REPO_ROOT

config = pulumi.Config("esi")
mode = config.get("mode") or pulumi.get_stack()


def local() -> tuple[pulumi.ComponentResource, k8s.Provider]:
    esi = LocalEsi("esi", LocalEsiArgs.from_config(config))
    pulumi.export("kubeconfig", esi.kubeconfig)
    pulumi.export("apiUrl", esi.api_url)
    pulumi.export("apiToken", pulumi.Output.secret(esi.api_token))
    pulumi.export("docsUrl", esi.docs_url)
    pulumi.export("uiUrl", esi.ui_url)
    pulumi.export("realNamespace", esi.real_namespace)
    pulumi.export("sparkImage", esi.spark_image)
    pulumi.export("flinkImage", esi.flink_image)
    return esi, esi.provider


def cluster() -> tuple[pulumi.ComponentResource, k8s.Provider]:
    esi = ClusterEsi("esi", ClusterEsiArgs.from_config(config))
    pulumi.export("namespace", esi.namespace)
    pulumi.export("apiService", esi.api_service)
    return esi, esi.provider


if mode not in ("local", "cluster"):
    raise ConfigError(f"esi:mode must be 'local' or 'cluster', not {mode!r} (stack {pulumi.get_stack()!r})")
esi, provider = local() if mode == "local" else cluster()

manifests = Manifests(
    "manifests",
    directory=str(REPO_ROOT / Path(config.get("manifests") or "manifests")),  # relative: to the repository
    # where Testbeds, BatchJobs and Schedulings live when a manifest names no namespace (not esi's own)
    default_namespace=(config.get("apiNamespace") if mode == "cluster" else config.get("namespace")) or "default",
    provider=provider,
    opts=pulumi.ResourceOptions(depends_on=[esi]),
)
pulumi.export("manifests", manifests.applied)
