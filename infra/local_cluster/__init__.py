"""The local cluster: a real Kubernetes control plane on this machine, its nodes and its local processes.

Its rooms, lowest first: ``control_plane`` (kwokctl's etcd, API server, controller manager and scheduler, the
KWOK nodes, ports and local processes), ``real_node`` (kubelets with a containerd each), ``network`` (kube-proxy
and CoreDNS for the real nodes), ``cluster`` (``LocalCluster``: all of them, stopped and deleted together);
``supervise`` keeps one local component running. ``python -m infra.local_cluster up|down|status`` runs one.
"""

from infra.local_cluster.cluster import LocalCluster
from infra.local_cluster.control_plane import (
    CONTROLLER_MANAGER_QPS,
    DEFAULT_WORKDIR,
    KWOK_NODE_ANNOTATION,
    ClusterError,
    NodeSpec,
    free_port,
    node_manifest,
    process_alive,
)

__all__ = [
    "CONTROLLER_MANAGER_QPS",
    "DEFAULT_WORKDIR",
    "KWOK_NODE_ANNOTATION",
    "ClusterError",
    "LocalCluster",
    "NodeSpec",
    "free_port",
    "node_manifest",
    "process_alive",
]
