"""A check that more than one test module makes: a caller cancelled inside an async context manager still ends
cancelled once the context has closed. A cleanup that awaits a task it cancelled, suppressing CancelledError,
swallows the caller's cancellation too: the caller runs on, and asyncio.run, after Ctrl-C, waits for it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import pytest


def assert_caller_stays_cancelled(context: Callable[[], AbstractAsyncContextManager[object]]) -> None:
    """Enter ``context()`` in a task that cancels itself inside it; the task must end cancelled."""

    async def caller() -> str:
        async with context():
            current = asyncio.current_task()
            assert current is not None
            current.cancel()
        return "ran on after its cancellation"

    async def run() -> None:
        async with asyncio.timeout(10):
            await asyncio.create_task(caller())

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(run())
