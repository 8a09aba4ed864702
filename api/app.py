"""The external scheduler API's HTTP application, for external schedulers and people.

REST under ``/external`` (``api.routes``, one module per resource), STOMP over WebSocket at ``/scheduler``,
OpenAPI at ``/docs``, the Manual Scheduler web UI at ``/ui/``; all the data authorized (``api.auth``). Health
(``/healthz``, ``/readyz``), ``/metrics`` and the UI's static files are open. ``python -m api`` serves it
beside the extender's application (``api.extender.app``), on a listener of its own.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager

from fastapi import FastAPI
from lightkube import AsyncClient, KubeConfig

from api import health, problems, ui
from api.auth import Authenticator, Principal
from api.cache import Kind, ResourceCache, following
from api.door import API_BODY_LIMIT, guard
from api.metrics import API_LATENCY, CACHE_COLLECTOR, measure, metrics_route
from api.notifications import notifier
from api.routes import batchjobs, overview, runs, schedulings, testbeds
from api.runs import RunStore, run_stream
from api.stomp import Broker
from api.stomp import router as stomp_router
from kube.watch import Stream, streaming

__all__ = ["create_api_app"]

DESCRIPTION = """
The External Scheduler Interface: see the cluster as **Testbeds** (slots reserved on labelled nodes),
**BatchJobs** (recurring Spark/Flink applications with a run history) and **Schedulings** (a queue of jobs,
or explicit job → slot lists) and submit Schedulings — in the JSON shapes of the original ESI, so
schedulers written for it run unchanged.

* Every `/external` route and the STOMP endpoint are authorized: send `Authorization: Bearer <token>`; a
  caller without one is `system:anonymous`, who may do what RBAC (or the server's setting) allows.
* `?namespace=` picks the namespace (the server's default when left out).
* A request body may be at most 2 MiB (more than the API server stores in one object); a larger one is a 413.
* `?view=esi` adds esi's own fields (`namespace`, `esiState`, `waitingFor`, …) to the original's, which are
  all an answer has by default.
* `GET /external/runs`: every finished run as a table (job, Scheduling, Testbed, slots, nodes, the jobs it met and
  for how long, times, outcome), filtered and paged, as JSON or CSV (esi's own route).
* Live updates: STOMP 1.2 over WebSocket at `/scheduler`; subscribe to `/topic/testbeds`, `/topic/jobs`,
  `/topic/schedulings` (`{action, resource: <name>}`) or `/topic/<kind>/<name>`
  (`{action, resource: <the object's view>}`); optional `namespace` and `view` headers on SUBSCRIBE.
"""


def create_api_app(
    authenticator: Authenticator,
    *,
    namespace: str = "default",
    cache: ResourceCache | None = None,
    run_store: RunStore | None = None,
    kube_config: KubeConfig | None = None,
    kube: AsyncClient | None = None,
    stomp_buffer: int = 1000,
    closing: Sequence[Callable[[], Awaitable[None]]] = (),
    testbed_stream: Stream | None = None,
) -> FastAPI:
    """The external scheduler API of one cluster.

    With ``kube_config``, the lifespan opens a Kubernetes client and keeps the cache following the cluster;
    otherwise reads answer from ``cache`` and ``run_store`` as the caller fills them and writes go to ``kube``
    (tests).
    ``closing``: what to await when the app shuts down, on its event loop (e.g. the authenticator's client).
    ``testbed_stream``: the process's Testbed stream, which the process runs; the cache is told Testbeds by it
    instead of following them itself.
    """
    resources = cache or ResourceCache()
    run_rows = run_store or RunStore()
    elsewhere: tuple[Kind, ...] = ()
    if testbed_stream is not None:
        testbed_stream.tell(resources.testbeds)
        elsewhere = ("testbeds",)
    broker = Broker(default_namespace=namespace, buffer_limit=stomp_buffer)
    resources.listen(notifier(broker))
    app = FastAPI(
        title="esi",
        summary="External Scheduler Interface for Kubernetes",
        description=DESCRIPTION,
        version="1",
        lifespan=_following(resources, broker, kube_config, closing, elsewhere)
        if kube_config is not None
        else _closing(broker, closing),
    )
    app.state.cache = resources
    app.state.runs = run_rows
    app.state.kube = kube
    app.state.namespace = namespace
    app.state.authenticator = authenticator
    app.state.broker = broker
    problems.install(app)
    for resource in (overview, testbeds, batchjobs, schedulings, runs):
        app.include_router(resource.router)

    async def authenticate(token: str | None) -> Principal:
        return await authenticator.authenticate(token)

    app.include_router(stomp_router(broker, authenticate, authenticator.authorize))
    health.install(app, resources.unsynced)
    metrics_route(app)
    ui.install(app)
    measure(app, API_LATENCY, log=True)
    guard(app, API_BODY_LIMIT)
    CACHE_COLLECTOR.cache = resources  # one API app per process in operation; tests make many
    return app


def _closing(
    broker: Broker, closing: Sequence[Callable[[], Awaitable[None]]]
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await broker.close()
            for close in closing:
                await close()

    return lifespan


def _following(
    cache: ResourceCache,
    broker: Broker,
    config: KubeConfig,
    closing: Sequence[Callable[[], Awaitable[None]]],
    elsewhere: Sequence[Kind],
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        client = AsyncClient(config=config, field_manager="esi-api")
        app.state.kube = client
        async with (
            _closing(broker, [*closing, client.close])(app),
            following(cache, client, elsewhere=elsewhere),
            streaming([run_stream(app.state.runs)], client),  # the run table, beside the cache
        ):
            yield

    return lifespan
