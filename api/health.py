"""``/healthz`` and ``/readyz``, the probes both of ``python -m api``'s applications answer (open, no token)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from fastapi import FastAPI
from fastapi.responses import JSONResponse

from esi.wire.rest import ApiError

__all__ = ["install"]


def install(app: FastAPI, unready: Callable[[], Sequence[str]]) -> None:
    """Liveness, and readiness once ``unready()`` names nothing the app serves from that is still being listed."""

    @app.get("/healthz", tags=["operations"], summary="Liveness: the process answers")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", tags=["operations"], summary="Readiness: everything it serves from has been listed")
    async def readyz() -> JSONResponse:
        missing = unready()
        if missing:
            body = ApiError(message=f"still listing: {', '.join(missing)}").model_dump(mode="json")
            return JSONResponse({"detail": body}, status_code=503)
        return JSONResponse({"status": "ready"})
