"""The reconcilers' caches of pods: one LIST + WATCH of every pod of the cluster, followed outside kopf.

kopf takes each event of an object it watches through its handler machinery — causes, handler states, one
call per index and handler, every pod of the cluster whether esi's or not —, about 0.8 ms of CPU per pod event
with the reconcilers' eight pod handlers. Pods are followed here once (``kube.watch.Stream``): each event is
read into every ``PodIndex`` and then told to every hook, in one pass.

A ``PodIndex`` holds what a kopf index holds: per key, one value from each pod that gives that key one. The
reconcilers decide only once the first list is in (``Pods.wait_listed``), as kopf starts them only once its own
indexes are filled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Hashable, Iterator, Mapping, Sequence
from typing import Any, Generic, TypeVar

import kopf
from lightkube import AsyncClient

from kube.resources import PodObjects
from kube.watch import Stream

__all__ = ["PODS", "PodIndex", "Pods", "RawPod", "labels_of", "namespace_of"]

RawPod = Mapping[str, Any]  # as the API server sent it
PodKey = tuple[str, str]  # (namespace, name)
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

# Told each pod after the indexes took it in (and, when a relist replaced the whole set, None: any pod may have
# changed), with kopf's indexes as kopf passes them to a handler.
Hook = Callable[[RawPod | None, Mapping[str, Any]], None]


def namespace_of(pod: RawPod) -> str:
    return str(pod["metadata"].get("namespace") or "")


def labels_of(pod: RawPod) -> Mapping[str, str]:
    labels: Mapping[str, str] = pod["metadata"].get("labels") or {}
    return labels


class PodIndex(Mapping[K, Collection[V]], Generic[K, V]):
    """Per key, the values that pods gave it (one per pod); ``contributes`` answers a pod's keys and values,
    ``{}`` for a pod that is no part of the index."""

    def __init__(self, contributes: Callable[[RawPod], Mapping[K, V]]) -> None:
        self.contributes = contributes
        self._values: dict[K, dict[PodKey, V]] = {}
        self._keys: dict[PodKey, tuple[K, ...]] = {}

    def put(self, pod: RawPod) -> None:
        """Take in ``pod`` as it is now, in place of what it gave before."""
        key = _key(pod)
        self.drop(key)
        given = self.contributes(pod)
        for index_key, value in given.items():
            self._values.setdefault(index_key, {})[key] = value
        if given:
            self._keys[key] = tuple(given)

    def drop(self, key: PodKey) -> None:
        for index_key in self._keys.pop(key, ()):
            values = self._values[index_key]
            del values[key]
            if not values:
                del self._values[index_key]

    def clear(self) -> None:
        self._values.clear()
        self._keys.clear()

    def __getitem__(self, key: K) -> Collection[V]:
        return self._values[key].values()

    def __iter__(self) -> Iterator[K]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


class Pods:
    """Every pod of the cluster, read into the indexes and told to the hooks registered before it runs."""

    def __init__(self) -> None:
        self._indexes: list[PodIndex[Any, Any]] = []
        self._hooks: list[Hook] = []
        self._kopf_indexes: Mapping[str, Any] = {}
        self._listed: asyncio.Event | None = None

    def index(self, contributes: Callable[[RawPod], Mapping[K, V]]) -> PodIndex[K, V]:
        """Decorator: a ``PodIndex`` filled by the function, in the function's place."""
        found = PodIndex(contributes)
        self._indexes.append(found)
        return found

    def on_change(self, hook: Hook) -> Hook:
        """Decorator: ``hook`` is told every pod event (see ``Hook``)."""
        self._hooks.append(hook)
        return hook

    async def follow(self, client: AsyncClient, kopf_indexes: Mapping[str, Any]) -> None:
        """LIST + WATCH every pod until cancelled (``kube.watch.follow``: a relist repairs any failure)."""
        self._kopf_indexes = kopf_indexes
        stream = Stream("pods", PodObjects)
        stream.tell(self)
        await stream.run(client)

    async def wait_listed(self, stopped: kopf.DaemonStopped) -> bool:
        """Whether the pods are listed (the caches are complete); False when ``stopped`` came first."""
        listed = self._listed_event()
        if listed.is_set():
            return True

        async def stop() -> None:
            await stopped.wait()

        waits = [asyncio.create_task(listed.wait()), asyncio.create_task(stop())]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()
        return listed.is_set()

    def _listed_event(self) -> asyncio.Event:
        if self._listed is None:  # made in the running loop (the one the operator and its tests run)
            self._listed = asyncio.Event()
        return self._listed

    # kube.watch.Consumer

    def listed(self, objects: Sequence[Mapping[str, Any]]) -> None:
        for found in self._indexes:
            found.clear()
            for pod in objects:
                found.put(pod)
        self._listed_event().set()
        self._tell(None)

    def observed(self, obj: Mapping[str, Any]) -> None:
        for found in self._indexes:
            found.put(obj)
        self._tell(obj)

    def deleted(self, obj: Mapping[str, Any]) -> None:
        key = _key(obj)
        for found in self._indexes:
            found.drop(key)
        self._tell(obj)

    def _tell(self, pod: RawPod | None) -> None:
        for hook in self._hooks:
            hook(pod, self._kopf_indexes)


def _key(pod: RawPod) -> PodKey:
    return namespace_of(pod), str(pod["metadata"]["name"])


PODS = Pods()


@kopf.on.startup()
async def _follow_pods(memo: kopf.Memo, **kopf_indexes: Any) -> None:
    client = AsyncClient()
    memo.pods_client = client
    memo.pods_followed = asyncio.create_task(PODS.follow(client, kopf_indexes), name="esi-pods")


@kopf.on.cleanup()
async def _stop_following_pods(memo: kopf.Memo, **_: Any) -> None:
    memo.pods_followed.cancel()
    await asyncio.wait([memo.pods_followed])  # not awaited: that would swallow a cancellation of this handler
    await memo.pods_client.close()
