"""The esi HTTP application: the scheduler extender now; the external scheduler API joins it later."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager

from fastapi import FastAPI
from lightkube import KubeConfig

from api import extender
from api.index_feed import feeding
from esi.slot_index import SlotIndex

__all__ = ["create_app"]


def create_app(index: SlotIndex | None = None, *, kube_config: KubeConfig | None = None) -> FastAPI:
    """The application, answering extender calls from ``index`` (a new, empty one by default).

    With ``kube_config``, the app's lifespan keeps ``index`` in step with that cluster's Testbeds and pods
    (``api.index_feed``); without, the index holds what the caller puts in (unit tests).
    """
    slot_index = index or SlotIndex()
    app = FastAPI(
        title="esi",
        summary="External Scheduler Interface for Kubernetes",
        lifespan=_following(slot_index, kube_config) if kube_config is not None else None,
    )
    app.state.slot_index = slot_index
    app.include_router(extender.router)

    @app.get("/healthz", tags=["health"])
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    return app


def _following(index: SlotIndex, config: KubeConfig) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with feeding(index, config) as feed:
            app.state.index_feed = feed
            app.state.binding_recorder = feed.record_binding
            yield

    return lifespan
