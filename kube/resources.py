"""lightkube classes for esi's custom resources, shared by the shells that talk to the API server
(``operators/`` and ``api/``); ``esi/`` itself stays free of any Kubernetes client."""

from __future__ import annotations

from lightkube.generic_resource import create_namespaced_resource

from esi.resources.meta import GROUP, VERSION

__all__ = ["BatchJobResource", "SchedulingResource", "TestbedResource"]

TestbedResource = create_namespaced_resource(GROUP, VERSION, "Testbed", "testbeds")
BatchJobResource = create_namespaced_resource(GROUP, VERSION, "BatchJob", "batchjobs")
SchedulingResource = create_namespaced_resource(GROUP, VERSION, "Scheduling", "schedulings")
