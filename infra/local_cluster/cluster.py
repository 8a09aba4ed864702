"""The local cluster as a whole: its control plane with KWOK nodes, its real nodes and their Services and DNS.

``LocalCluster`` is a ``ControlPlane`` whose ``stop`` and ``delete`` also end what builds on the control plane:
its kube-proxy and CoreDNS (``infra.local_cluster.network``) and its real nodes
(``infra.local_cluster.real_node``). Both of those import only the control plane, so nothing imports this module
but the users of the whole cluster.
"""

from __future__ import annotations

from infra.local_cluster.control_plane import ControlPlane
from infra.local_cluster.network import ClusterNetwork
from infra.local_cluster.real_node import real_nodes_of

__all__ = ["LocalCluster"]


class LocalCluster(ControlPlane):
    """One named local cluster. Creating an existing cluster is an error; deleting a missing one is not."""

    def stop(self) -> None:
        """Stop its processes, keeping its state (etcd data, certificates) for ``start``; its Services' iptables
        rules go with its kube-proxy."""
        ClusterNetwork(self).stop()
        super().stop()

    def delete(self) -> None:
        """Stop every process of the cluster (second schedulers included), delete its real nodes, remove its
        Services' iptables rules and its files."""
        for node in real_nodes_of(self):  # first: draining them needs the API server
            node.delete()
        ClusterNetwork(self).stop()
        super().delete()
