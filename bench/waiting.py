"""Waiting in a benchmark: until a probe gives something, or give up, naming what was waited for."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["wait_until"]

T = TypeVar("T")


def wait_until(what: str, probe: Callable[[], T | None], timeout: float, interval: float = 0.5) -> T:
    """The first truthy value of ``probe``, asked every ``interval`` seconds; after ``timeout`` seconds the benchmark
    ends, saying it gave up waiting for ``what``."""
    deadline = time.monotonic() + timeout
    while not (value := probe()):
        if time.monotonic() > deadline:
            raise SystemExit(f"gave up after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)
    return value
