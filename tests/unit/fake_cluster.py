"""A scripted API server for the shells that list and watch (``kube.watch``): what each list and watch of a kind
answers, and the calls it was asked."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from typing import Any

__all__ = ["FakeCluster", "FakeListing", "Listing", "Watching"]

Listing = tuple[list[Any], str] | Exception
Watching = list[tuple[str, Any]] | Exception


class FakeListing:
    def __init__(self, items: list[Any], version: str) -> None:
        self.items, self.resourceVersion = items, version

    async def __aiter__(self) -> AsyncIterator[Any]:
        for item in self.items:
            yield item


class FakeCluster:
    """Scripted answers per kind: each list takes the next listing (the last one repeats); each watch takes
    the next batch of events, ending with an exception or else staying open. Calls are recorded."""

    def __init__(self, lists: dict[type, list[Listing]], watches: dict[type, list[Watching]]) -> None:
        self._lists = {kind: deque(script) for kind, script in lists.items()}
        self._watches = {kind: deque(script) for kind, script in watches.items()}
        self.calls: list[tuple[str, str, str | None]] = []

    def list(self, kind: type, **_: Any) -> FakeListing:
        self.calls.append(("list", kind.__name__, None))
        script = self._lists[kind]
        listing = script.popleft() if len(script) > 1 else script[0]
        if isinstance(listing, Exception):
            raise listing
        return FakeListing(*listing)

    async def watch(self, kind: type, *, resource_version: str, **_: Any) -> AsyncIterator[tuple[str, Any]]:
        self.calls.append(("watch", kind.__name__, resource_version))
        script = self._watches[kind]
        events = script.popleft() if script else []
        if isinstance(events, Exception):
            raise events
        for event in events:
            yield event
        await asyncio.Event().wait()  # open until cancelled

    def count(self, verb: str, kind: str) -> int:
        return sum(1 for v, k, _ in self.calls if (v, k) == (verb, kind))
