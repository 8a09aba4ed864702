"""The external scheduler API under ``/external``: the original ESI's routes and JSON shapes, one module per
resource, each with its own ``router``.

What it keeps and what it answers differently: docs/compatibility.md#rest-routes and #rest-api.

=============================  ==========================================================================
``api.routes.overview``        ``GET /external/overview``: one namespace at a glance
``api.routes.testbeds``        ``GET /external/testbeds``, ``/testbeds/{name}``; ``POST /testbeds/{name}/nodes``
``api.routes.batchjobs``       ``GET /external/jobs``, ``/jobs/{name}``; ``PUT /external/jobs``
``api.routes.schedulings``     ``GET``/``POST /external/schedulings``; ``GET``/``DELETE /schedulings/{name}``
``api.routes.runs``            ``GET /external/runs``: the run table, filtered and paged, JSON or CSV (esi's own)
``api.routes.answers``         how they answer: JSON rendered once, in the view asked for
=============================  ==========================================================================

Reads come from the watch cache (``api.cache``; the run table from ``api.runs``) — only the rare
``POST /testbeds/{name}/nodes`` lists nodes and pods from the API server —, writes go to the API server and their
answer is put into the cache at once. Every route is authorized (a caller without a token is ``system:anonymous``):
what the caller may do is decided per namespace and resource (``api.auth``, checked by ``api.dependencies.may``).
Refusals have one shape (``api.problems``): 404 for what does not exist (also on DELETE), 409 for conflicts, 422
with field-level problems. Lists are rendered once per state of the cache (``ResourceCache.memo``) and sent as they
are; runs once per row until a run it met changes (``esi.results.table.RenderedRuns``).
"""

__all__: list[str] = []
