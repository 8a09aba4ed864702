"""Following a kind of object from the API server: LIST, then WATCH from the list's resourceVersion, forever.

A relist is the repair for anything missed while not watching, so every failure ends in one: at once after
``410 Gone`` (the watch fell too far behind), after capped exponential backoff for anything else. ``follow``
never gives up and never lets an error out; it ends only when cancelled.

``Stream`` is ``follow`` for one kind cluster-wide with any number of consumers: a process that needs the
same kind in two places (the API's cache and the extender's index both read Testbeds) watches it once.
``PiecewiseStream`` tells each listed object as its chunk arrives, for kinds too many to hold twice (the API's
100,000 Runs a namespace): a list never sits whole in memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, Final, Protocol

from lightkube import ALL_NS, ApiError, AsyncClient
from lightkube.generic_resource import GenericNamespacedResource

from kube.errors import Refusal, refusal
from kube.resources import plain

__all__ = ["LIST_CHUNK", "Consumer", "PiecewiseConsumer", "PiecewiseStream", "Stream", "follow", "streaming"]

LIST_CHUNK: Final = 500

log = logging.getLogger(__name__)


async def follow(
    what: str,
    relist: Callable[[], Awaitable[str]],
    watch: Callable[[str], Awaitable[None]],
    *,
    min_backoff: float = 0.5,
    max_backoff: float = 30.0,
) -> None:
    """``relist()`` returns the list's resourceVersion, ``watch(version)`` follows from there."""
    loop = asyncio.get_running_loop()
    delay = min_backoff
    while True:
        started = loop.time()
        try:
            await watch(await relist())
        except ApiError as err:
            if refusal(err) is Refusal.GONE:
                log.info("%s: watch expired (410 Gone), listing again", what)
                continue
            log.warning(
                "%s: the API server refused (%s %s), listing again in %.1fs",
                what,
                err.status.code,
                err.status.message,
                delay,
            )
        except Exception as err:  # any other failure: the next list repairs what was missed
            log.warning(
                "%s: %s: %s, listing again in %.1fs",
                what,
                type(err).__name__,
                err,
                delay,
                exc_info=log.isEnabledFor(logging.DEBUG),
            )
        else:  # not expected: lightkube renews a watch the server closed
            log.warning("%s: the watch ended, listing again in %.1fs", what, delay)
        if loop.time() - started > max_backoff:  # it worked for a while: start over gently
            delay = min_backoff
        await asyncio.sleep(delay)
        delay = min(2 * delay, max_backoff)


class Consumer(Protocol):
    """Told what a ``Stream`` sees, each object as the plain dict the API server sent."""

    def listed(self, objects: Sequence[Mapping[str, Any]]) -> None:
        """The complete set of the kind: what is not in it is gone."""

    def observed(self, obj: Mapping[str, Any]) -> object:
        """An object appeared or changed."""

    def deleted(self, obj: Mapping[str, Any]) -> None:
        """An object went (its last version)."""


class Stream:
    """One LIST + WATCH of one kind, cluster-wide, told to every consumer; ``run`` ends only if cancelled.

    Consumers are told before the stream runs. Only a ``joinable`` stream takes a consumer while it runs: it
    keeps what it has seen, to tell a consumer that joins the complete set at once (as after a list), then
    every change like the others. Any other stream keeps nothing: its consumers hold their own view, and a
    copy here would double it.
    """

    def __init__(self, what: str, resource: type[GenericNamespacedResource], *, joinable: bool = False) -> None:
        self.what: Final = what
        self._resource = resource
        self._consumers: list[Consumer] = []
        self._listed = False
        self._seen: dict[tuple[str, str], Mapping[str, Any]] | None = {} if joinable else None

    def tell(self, consumer: Consumer) -> None:
        if self._listed and self._seen is None:
            raise RuntimeError(f"the {self.what} stream is running and not joinable: tell consumers before it runs")
        self._consumers.append(consumer)
        if self._listed and self._seen is not None:
            consumer.listed(list(self._seen.values()))

    async def _relist(self, client: AsyncClient) -> str:
        listing = client.list(self._resource, namespace=ALL_NS, chunk_size=LIST_CHUNK)
        objects = [plain(item) async for item in listing]
        if self._seen is not None:
            self._seen = {_key(obj): obj for obj in objects}
        self._listed = True
        for consumer in self._consumers:
            consumer.listed(objects)
        return listing.resourceVersion

    async def run(self, client: AsyncClient, *, min_backoff: float = 0.5, max_backoff: float = 30.0) -> None:
        async def relist() -> str:
            return await self._relist(client)

        async def watch(version: str) -> None:
            item: GenericNamespacedResource
            async for event, item in client.watch(self._resource, namespace=ALL_NS, resource_version=version):
                if event in ("ADDED", "MODIFIED", "DELETED"):
                    self._tell(event, plain(item))

        await follow(self.what, relist, watch, min_backoff=min_backoff, max_backoff=max_backoff)

    def _tell(self, event: str, obj: Mapping[str, Any]) -> None:
        if self._seen is not None and event == "DELETED":
            self._seen.pop(_key(obj), None)
        elif self._seen is not None:
            self._seen[_key(obj)] = obj
        for consumer in self._consumers:
            if event == "DELETED":
                consumer.deleted(obj)
            else:
                consumer.observed(obj)


class PiecewiseConsumer(Consumer, Protocol):
    """A consumer told a list object by object (``observed``), then which objects it held."""

    def relisted(self, keys: AbstractSet[tuple[str, str]]) -> None:
        """The list just told is complete: what is not among ``keys`` (namespace, name) is gone."""


class PiecewiseStream(Stream):
    """A ``Stream`` whose list reaches its consumers one object at a time, as the chunks of the list arrive;
    not joinable."""

    def __init__(self, what: str, resource: type[GenericNamespacedResource]) -> None:
        super().__init__(what, resource)
        self._piecewise: list[PiecewiseConsumer] = []

    def tell(self, consumer: PiecewiseConsumer) -> None:  # type: ignore[override]  # needs the narrower consumer
        super().tell(consumer)
        self._piecewise.append(consumer)

    async def _relist(self, client: AsyncClient) -> str:
        listing = client.list(self._resource, namespace=ALL_NS, chunk_size=LIST_CHUNK)
        keys: set[tuple[str, str]] = set()
        async for item in listing:
            obj = plain(item)
            keys.add(_key(obj))
            for consumer in self._piecewise:
                consumer.observed(obj)
        self._listed = True
        for consumer in self._piecewise:
            consumer.relisted(keys)
        return listing.resourceVersion


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    metadata = obj.get("metadata") or {}
    return str(metadata.get("namespace") or ""), str(metadata.get("name") or "")


@contextlib.asynccontextmanager
async def streaming(streams: Iterable[Stream], client: AsyncClient, **backoff: float) -> AsyncIterator[None]:
    """Runs ``streams`` on ``client`` while the context is open (``backoff``: ``Stream.run``'s)."""
    tasks = [asyncio.create_task(s.run(client, **backoff), name=f"esi-stream-{s.what}") for s in streams]
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)  # not awaited: that would swallow a cancellation of the caller
