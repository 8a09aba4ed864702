"""The two HTTP applications of ``python -m api``, served on two listeners of one process.

* ``create_api_app`` — for external schedulers and people: REST under ``/external``, STOMP over WebSocket at
  ``/scheduler``, OpenAPI at ``/docs``, the Manual Scheduler web UI at ``/ui/``; a bearer token on all the
  data. Health (``/healthz``, ``/readyz``), ``/metrics`` and the UI's static files are open.
* ``create_extender_app`` — for the second kube-scheduler only: ``/extender/filter`` and
  ``/extender/preempt``. kube-scheduler cannot send a bearer token to an extender, so this listener is kept
  apart: on the loopback interface locally, reachable only from the scheduler's pod in a cluster.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from lightkube import AsyncClient, KubeConfig

from api import external, problems, ui
from api.auth import Authenticator, Principal
from api.cache import ResourceCache, following
from api.extender import routes as extender
from api.extender.feed import feeding
from api.extender.slot_index import SlotIndex
from api.metrics import API_LATENCY, CACHE_COLLECTOR, EXTENDER_LATENCY, measure, metrics_route
from api.notifications import notifier
from api.stomp import Broker
from api.stomp import router as stomp_router

__all__ = ["create_api_app", "create_extender_app"]

DESCRIPTION = """
The External Scheduler Interface: see the cluster as **Testbeds** (slots reserved on labelled nodes),
**BatchJobs** (recurring Spark/Flink applications with a run history) and **Schedulings** (a queue of jobs,
or explicit job → slot lists) and submit Schedulings — in the JSON shapes of the original ESI, so
schedulers written for it run unchanged.

* Every `/external` route and the STOMP endpoint need `Authorization: Bearer <token>`.
* `?namespace=` picks the namespace (the server's default when left out).
* Live updates: STOMP 1.2 over WebSocket at `/scheduler`; subscribe to `/topic/testbeds`, `/topic/jobs`,
  `/topic/schedulings` (`{action, resource: <name>}`) or `/topic/<kind>/<name>`
  (`{action, resource: <the object's view>}`); an optional `namespace` header on SUBSCRIBE.
"""


def _health(app: FastAPI, ready: Callable[[], Sequence[str]]) -> None:
    @app.get("/healthz", tags=["operations"], summary="Liveness: the process answers")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", tags=["operations"], summary="Readiness: everything it serves from has been listed")
    async def readyz() -> JSONResponse:
        missing = ready()
        if missing:
            return problems.problem_response(503, f"still listing: {', '.join(missing)}")
        return JSONResponse({"status": "ready"})


def create_extender_app(index: SlotIndex | None = None, *, kube_config: KubeConfig | None = None) -> FastAPI:
    """The extender, answering from ``index`` (a new, empty one by default).

    With ``kube_config``, the app's lifespan keeps ``index`` in step with that cluster's Testbeds and pods
    (``api.extender.feed``); without, the index holds what the caller puts in (unit tests).
    """
    slot_index = index or SlotIndex()
    app = FastAPI(
        title="esi scheduler extender",
        summary="kube-scheduler extender verbs for esi's second scheduler",
        lifespan=_feeding(slot_index, kube_config) if kube_config is not None else None,
    )
    app.state.slot_index = slot_index
    app.include_router(extender.router)
    measure(app, EXTENDER_LATENCY)
    _health(app, lambda: [])
    return app


def _feeding(index: SlotIndex, config: KubeConfig) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with feeding(index, config) as feed:
            app.state.index_feed = feed
            app.state.binding_recorder = feed.record_binding
            yield

    return lifespan


def create_api_app(
    authenticator: Authenticator,
    *,
    namespace: str = "default",
    cache: ResourceCache | None = None,
    kube_config: KubeConfig | None = None,
    kube: AsyncClient | None = None,
    stomp_buffer: int = 1000,
    closing: Sequence[Callable[[], Awaitable[None]]] = (),
) -> FastAPI:
    """The external scheduler API of one cluster.

    With ``kube_config``, the lifespan opens a Kubernetes client and keeps the cache following the cluster;
    otherwise reads answer from ``cache`` as the caller fills it and writes go to ``kube`` (tests).
    ``closing``: what to await when the app shuts down, on its event loop (e.g. the authenticator's client).
    """
    resources = cache or ResourceCache()
    broker = Broker(default_namespace=namespace, buffer_limit=stomp_buffer)
    resources.listen(notifier(broker))
    app = FastAPI(
        title="esi",
        summary="External Scheduler Interface for Kubernetes",
        description=DESCRIPTION,
        version="1",
        lifespan=_following(resources, broker, kube_config, closing)
        if kube_config is not None
        else _closing(broker, closing),
    )
    app.state.cache = resources
    app.state.kube = kube
    app.state.namespace = namespace
    app.state.authenticator = authenticator
    app.state.broker = broker
    problems.install(app)
    app.include_router(external.router)

    async def authenticate(token: str | None) -> Principal:
        return await authenticator.authenticate(token)

    app.include_router(stomp_router(broker, authenticate, authenticator.authorize))
    _health(app, resources.unsynced)
    metrics_route(app)
    ui.install(app)
    measure(app, API_LATENCY, log=True)
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
    cache: ResourceCache, broker: Broker, config: KubeConfig, closing: Sequence[Callable[[], Awaitable[None]]]
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        client = AsyncClient(config=config, field_manager="esi-api")
        app.state.kube = client
        async with _closing(broker, [*closing, client.close])(app), following(cache, client):
            yield

    return lifespan
