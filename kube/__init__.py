"""lightkube classes for esi's custom resources, shared by the shells that talk to the API server
(``operators/`` and ``api/``); ``esi/`` itself stays free of any Kubernetes client."""

from __future__ import annotations

from lightkube.generic_resource import create_namespaced_resource

from esi.meta import GROUP, VERSION

__all__ = ["TestbedResource"]

TestbedResource = create_namespaced_resource(GROUP, VERSION, "Testbed", "testbeds")
