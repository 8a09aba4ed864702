"""The extender's HTTP application: ``POST /extender/filter`` and ``/extender/preempt`` for the second
kube-scheduler, with health and no bearer token.

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
from api.extender import routes
from api.extender.feed import feeding
from api.extender.slot_index import SlotIndex
from api.metrics import EXTENDER_LATENCY, measure
from kube.watch import Stream

__all__ = ["create_extender_app"]


def create_extender_app(
    index: SlotIndex | None = None, *, kube_config: KubeConfig | None = None, testbed_stream: Stream | None = None
) -> FastAPI:
    """The extender, answering from ``index`` (a new, empty one by default).

    With ``kube_config``, the app's lifespan keeps ``index`` in step with that cluster's Testbeds and pods
    (``api.extender.feed``); without, the index holds what the caller puts in (unit tests). ``testbed_stream``: the
    process's Testbed stream, which the process runs, to be told Testbeds by instead of following them itself.
    """
    slot_index = index or SlotIndex()
    app = FastAPI(
        title="esi scheduler extender",
        summary="kube-scheduler extender verbs for esi's second scheduler",
        lifespan=_feeding(slot_index, kube_config, testbed_stream) if kube_config is not None else None,
    )
    app.state.slot_index = slot_index
    app.include_router(routes.router)
    measure(app, EXTENDER_LATENCY)
    health.install(app, lambda: [])
    return app


def _feeding(
    index: SlotIndex, config: KubeConfig, testbed_stream: Stream | None
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with feeding(index, config, testbed_stream) as feed:
            app.state.index_feed = feed
            app.state.binding_recorder = feed.record_binding
            yield

    return lifespan
