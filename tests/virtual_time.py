"""An asyncio event loop on a virtual clock, for tests of code that keeps time by its running loop.

esi's daemons, work queues and waits take time only from the running event loop: ``loop.time()``, its timers
(``call_later``, ``asyncio.sleep``, ``asyncio.wait_for``, ``asyncio.timeout``). The loop is their clock, and a
test injects one by running them on ``VirtualClockLoop`` (what Kueue's injected clock is to a Go controller;
kopf's own tests do the same with ``looptime``): its clock stands still while anything is ready to run and,
when nothing is, jumps to the next timer at once. A wait of 30 s takes no time, the times a test reads are
exact, and a busy machine changes neither. Code that waits for a thread, a process or a socket must not run on
it: with nothing scheduled it would wait forever, so the loop fails instead.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["VirtualClockLoop", "run"]

T = TypeVar("T")


class _Selector(selectors.DefaultSelector):
    """Polls without blocking; what would have been a blocking wait moves the loop's clock on instead."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(0)
        if ready or timeout == 0:
            return ready
        if timeout is None:
            raise RuntimeError("the virtual clock's loop has nothing to run and no timer: it would wait forever")
        self.now += timeout
        return ready


class VirtualClockLoop(asyncio.SelectorEventLoop):
    """An event loop whose ``time()`` starts at 0 and moves only from one timer to the next."""

    def __init__(self) -> None:
        self._clock = _Selector()
        super().__init__(self._clock)

    def time(self) -> float:
        return self._clock.now


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on a ``VirtualClockLoop``."""
    with asyncio.Runner(loop_factory=VirtualClockLoop) as runner:
        return runner.run(main)
