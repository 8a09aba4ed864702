"""lightkube classes for esi's custom resources, shared by the shells that talk to the API server
(``operators/`` and ``api/``), and ``plain`` to read what lightkube returns as the API server sent it;
``esi/`` itself stays free of any Kubernetes client."""

from __future__ import annotations

from typing import Any

from lightkube.generic_resource import GenericGlobalResource, GenericNamespacedResource, create_namespaced_resource

from esi.resources.meta import GROUP, VERSION

__all__ = ["BatchJobResource", "SchedulingResource", "TestbedResource", "plain"]

TestbedResource = create_namespaced_resource(GROUP, VERSION, "Testbed", "testbeds")
BatchJobResource = create_namespaced_resource(GROUP, VERSION, "BatchJob", "batchjobs")
SchedulingResource = create_namespaced_resource(GROUP, VERSION, "Scheduling", "schedulings")


def plain(item: GenericNamespacedResource | GenericGlobalResource) -> dict[str, Any]:
    """An object lightkube returned, as the plain JSON-like dict the API server sent."""
    plain: dict[str, Any] = item.to_dict()  # type: ignore[no-untyped-call]  # lightkube leaves it untyped
    return plain
