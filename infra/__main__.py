"""The Pulumi program of esi (``pulumi up`` at the repository root runs it).

So far it only prepares the namespace esi's components will live in, on the cluster named by the
``esi:kubeconfig`` config value (default: the local cluster ``make up`` creates). The components, CRDs,
priority classes, second scheduler and GitOps manifests join it as they are built.
"""

import pulumi
import pulumi_kubernetes as k8s

from infra.local_cluster import LocalCluster

config = pulumi.Config("esi")
kubeconfig = config.get("kubeconfig") or str(LocalCluster("esi").kubeconfig)
provider = k8s.Provider("cluster", kubeconfig=kubeconfig)
namespace = k8s.core.v1.Namespace(
    "esi-system", metadata={"name": "esi-system"}, opts=pulumi.ResourceOptions(provider=provider)
)
pulumi.export("namespace", namespace.metadata["name"])
