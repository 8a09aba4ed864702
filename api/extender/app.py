"""The extender's HTTP application: ``POST /extender/filter``, ``/extender/bind`` and ``/extender/preempt`` for
the second kube-scheduler, with health and no bearer token.

kube-scheduler cannot send a bearer token to an extender, so ``python -m api`` serves this app on a listener
of its own: on the loopback interface locally, reachable only from the scheduler's pod in a cluster.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager

from fastapi import FastAPI
from lightkube import KubeConfig

from api import health
from api.door import EXTENDER_BODY_LIMIT, guard
from api.extender import routes
from api.extender.binder import SlotBinder
from api.extender.feed import feeding
from api.extender.slot_index import SlotIndex
from api.metrics import EXTENDER_LATENCY, measure
from kube.pod_writes import PodWrites
from kube.watch import Stream

__all__ = ["create_extender_app"]


def create_extender_app(
    index: SlotIndex | None = None,
    *,
    kube_config: KubeConfig | None = None,
    testbed_stream: Stream | None = None,
    feed: bool = True,
) -> FastAPI:
    """The extender, answering from ``index`` (a new, empty one by default).

    With ``kube_config``, the app binds pods in that cluster and its lifespan keeps ``index`` in step with the
    cluster's Testbeds and pods (``api.extender.feed``; not with ``feed=False``: the index then holds what the
    caller puts in, ``SlotIndex.pods_read`` included, as without ``kube_config``). ``testbed_stream``: the
    process's Testbed stream, which the process runs, to be told Testbeds by instead of following them itself.
    """
    slot_index = index or SlotIndex()
    lifespan = None
    if kube_config is not None:
        lifespan = _feeding(slot_index, kube_config, testbed_stream) if feed else _binding(slot_index, kube_config)
    app = FastAPI(
        title="esi scheduler extender",
        summary="kube-scheduler extender verbs for esi's second scheduler",
        lifespan=lifespan,
    )
    app.state.slot_index = slot_index
    app.state.recordings = set()  # slot records being written (routes._record_ghostless_binding)
    app.include_router(routes.router)
    routes.describe(app)
    measure(app, EXTENDER_LATENCY)
    guard(app, EXTENDER_BODY_LIMIT)
    health.install(app, lambda: [])
    return app


def _feeding(
    index: SlotIndex, config: KubeConfig, testbed_stream: Stream | None
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with PodWrites(config) as writes, feeding(index, config, testbed_stream) as feed:
            app.state.index_feed = feed
            app.state.binding_recorder = feed.record_binding
            app.state.binder = SlotBinder(writes, index)
            yield

    return lifespan


def _binding(index: SlotIndex, config: KubeConfig) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with PodWrites(config) as writes:
            app.state.binder = SlotBinder(writes, index)
            yield

    return lifespan
