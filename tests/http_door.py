"""A small HTTP server on a free loopback port that stands in for the API server's door in unit tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from aiohttp import web

__all__ = ["door"]


@asynccontextmanager
async def door(handle: Callable[[web.Request], Awaitable[web.Response]]) -> AsyncIterator[str]:
    """Serves every request with ``handle`` while open; yields the server's URL."""
    app = web.Application()
    app.router.add_route("*", "/{path:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()
