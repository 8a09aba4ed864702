"""esi: the External Scheduler Interface — its pure core, its wire formats and its Python client.

The rooms, innermost first (``make lint`` checks that each imports only the ones before it):

* ``esi.resources`` — pydantic models of the three custom resources (Testbed, BatchJob, Scheduling), what
  they share (API group, conditions, quantities) and the CRDs generated from them.
* ``esi.decisions`` — pure decisions: where a Testbed's slots are, which jobs get which slots next, and the
  three lifecycles (``(status, observation) -> decision``).
* ``esi.objects`` — the Kubernetes objects esi creates, built as plain manifests and read back: ghost pods,
  applications, holds, priority classes, and the labels on them.
* ``esi.wire`` — what crosses the network to external schedulers: the REST bodies and STOMP frames.
* ``esi.client`` — the Python client for scheduler authors (REST + STOMP) and the ``esi`` CLI.

Everything but ``esi.client`` is pure: no network, no Kubernetes client, no kopf, no FastAPI.
"""
