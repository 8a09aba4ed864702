"""lightkube classes for esi's custom resources, shared by the shells that talk to the API server
(``operators/`` and ``api/``), ``plain`` to read what lightkube returns as the API server sent it, and where
pods reach the API server; ``esi/`` itself stays free of any Kubernetes client."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from lightkube.generic_resource import (
    GenericGlobalResource,
    GenericNamespacedResource,
    create_api_info,
    create_namespaced_resource,
)

from esi.resources.meta import GROUP, VERSION

__all__ = [
    "API_SERVER_SLICE",
    "BatchJobResource",
    "NodeObjects",
    "PodObjects",
    "RunResource",
    "SchedulingResource",
    "TestbedResource",
    "api_server_for_pods",
    "plain",
]

TestbedResource = create_namespaced_resource(GROUP, VERSION, "Testbed", "testbeds")
BatchJobResource = create_namespaced_resource(GROUP, VERSION, "BatchJob", "batchjobs")
SchedulingResource = create_namespaced_resource(GROUP, VERSION, "Scheduling", "schedulings")
RunResource = create_namespaced_resource(GROUP, VERSION, "Run", "runs")


class PodObjects(GenericNamespacedResource):
    """Pods read as the plain dicts the API server sent, not decoded into lightkube's ``Pod`` model: for
    following every pod of a cluster. Not registered as lightkube's class for v1 Pods
    (``create_namespaced_resource`` would register it, and ``lightkube.codecs.from_dict`` would then answer it
    for every pod manifest)."""

    _api_info = create_api_info("", "v1", "Pod", "pods")


class NodeObjects(GenericGlobalResource):
    """Nodes read as the plain dicts the API server sent (as ``PodObjects``), and patched by name."""

    _api_info = create_api_info("", "v1", "Node", "nodes")


def plain(item: GenericNamespacedResource | GenericGlobalResource) -> dict[str, Any]:
    """An object lightkube returned, as the plain JSON-like dict the API server sent."""
    plain: dict[str, Any] = item.to_dict()  # type: ignore[no-untyped-call]  # lightkube leaves it untyped
    return plain


API_SERVER_SLICE: Final = ("default", "kubernetes")  # the EndpointSlice of the `kubernetes` Service: namespace, name


def api_server_for_pods(endpoint_slice: Mapping[str, Any]) -> str:
    """``https://ADDRESS:PORT`` of the API server as pods reach it without a Service proxy: the address and
    port of the ``kubernetes`` Service's EndpointSlice (the API server's advertised address, named in its
    serving certificate). ValueError when the slice has none."""
    endpoints = endpoint_slice.get("endpoints") or []
    ports = endpoint_slice.get("ports") or []
    addresses = (endpoints[0].get("addresses") or []) if endpoints else []
    if not addresses or not ports or not ports[0].get("port"):
        raise ValueError("the kubernetes EndpointSlice names no address and port of the API server")
    address = str(addresses[0])
    host = f"[{address}]" if ":" in address else address
    return f"https://{host}:{ports[0]['port']}"
