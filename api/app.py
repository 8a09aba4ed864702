"""The esi HTTP application: the scheduler extender now; the external scheduler API joins it later."""

from __future__ import annotations

from fastapi import FastAPI

from api import extender
from esi.slot_index import SlotIndex

__all__ = ["create_app"]


def create_app(index: SlotIndex | None = None) -> FastAPI:
    """The application, answering extender calls from ``index`` (a new, empty one by default)."""
    app = FastAPI(title="esi", summary="External Scheduler Interface for Kubernetes")
    app.state.slot_index = index or SlotIndex()
    app.include_router(extender.router)

    @app.get("/healthz", tags=["health"])
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    return app
