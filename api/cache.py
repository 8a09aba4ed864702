"""The API's picture of the cluster: Testbeds, BatchJobs and Schedulings of every namespace, from watches.

REST answers and STOMP notifications come from here, never from a LIST per request; the cache is rebuilt
from watches and never authoritative (docs/design.md#level-triggered-reconcilers). Two layers, so that
everything but the network is tested without a cluster:

* ``Store`` / ``ResourceCache`` — plain and synchronous: what has been seen of each kind, as validated esi
  models, and a ``Change`` to every listener whenever an object appears, changes or goes;
* ``following`` — the async shell: one LIST + WATCH stream per kind (``kube.watch.Stream``: relist after
  410 or errors), cluster-wide. The Testbed stream of ``python -m api`` is the process's one, shared with
  the extender's index: the store is then told by it instead (``elsewhere``).

A write made through the API is put into the cache at once (``Store.observed`` with the object the API
server returned, ``Store.deleted`` after a DELETE), so a client reads its own writes; the watch event of the
same version changes nothing. An object being deleted (``deletionTimestamp`` set, finalizers still to run) is
gone for the cache's readers: it can only go, and the original's shapes have no word for "going".
An older version never replaces a newer one. An object that does not validate against esi's models (a
status written by another version of esi) is left out with a warning, not served half-understood.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Collection, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Generic, Literal, TypeVar

from lightkube import AsyncClient
from pydantic import ValidationError

from esi.resources.batchjob import BatchJob
from esi.resources.scheduling import Scheduling
from esi.resources.testbed import Testbed
from esi.wire.rest import field_problems
from kube.resources import BatchJobResource, SchedulingResource, TestbedResource
from kube.watch import Stream, streaming

__all__ = ["Action", "Change", "Key", "Kind", "Listener", "ResourceCache", "Store", "following", "stream_of"]

log = logging.getLogger(__name__)

Kind = Literal["testbeds", "jobs", "schedulings"]  # the original's words, as in its STOMP topics
Action = Literal["ADDED", "MODIFIED", "DELETED"]
Model = TypeVar("Model", Testbed, BatchJob, Scheduling)
Key = tuple[str, str]  # (namespace, name)

MEMO_LIMIT: Final = 1024


@dataclass(frozen=True)
class Change:
    """Something happened to one object; ``resource`` is its latest version (the last one seen, if deleted)."""

    kind: Kind
    action: Action
    resource: Testbed | BatchJob | Scheduling

    @property
    def namespace(self) -> str:
        return self.resource.metadata.namespace or ""

    @property
    def name(self) -> str:
        return self.resource.metadata.name


Listener = Callable[[Change], None]


def _version(resource: Testbed | BatchJob | Scheduling) -> int | None:
    value = resource.metadata.resource_version
    return int(value) if value is not None and value.isdigit() else None


class Store(Generic[Model]):
    """The objects of one kind, by namespace and name."""

    def __init__(self, kind: Kind, model: type[Model], listeners: list[Listener]) -> None:
        self.kind: Final = kind
        self._model: type[Model] = model
        self._objects: dict[Key, Model] = {}
        self._listeners = listeners
        self.synced = False  # a complete list has been seen

    def get(self, namespace: str, name: str) -> Model | None:
        return self._objects.get((namespace, name))

    def in_namespace(self, namespace: str) -> list[Model]:
        return sorted((o for (ns, _), o in self._objects.items() if ns == namespace), key=lambda o: o.metadata.name)

    def everything(self) -> list[Model]:
        return list(self._objects.values())

    def observed(self, raw: Mapping[str, Any]) -> Model | None:
        """An object as the API server sent it (watch event, or the answer to a write); returns the cache's
        object for it — this one validated, or the newer version the cache already holds — or None if it
        does not validate."""
        if (raw.get("metadata") or {}).get("deletionTimestamp"):
            self.deleted(raw)  # being deleted: gone for the API's readers, as after the API's own DELETE
            return None
        resource = self._validated(raw)
        if resource is None:
            return None
        key = (resource.metadata.namespace or "", resource.metadata.name)
        known = self._objects.get(key)
        if known is not None:
            old, new = _version(known), _version(resource)
            if old is not None and new is not None and new <= old:
                return known  # the cache already holds this version or a newer one
        self._objects[key] = resource
        self._tell(Change(self.kind, "ADDED" if known is None else "MODIFIED", resource))
        return resource

    def deleted(self, raw: Mapping[str, Any]) -> None:
        metadata = raw.get("metadata") or {}
        key = (str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))
        known = self._objects.pop(key, None)
        if known is not None:
            self._tell(Change(self.kind, "DELETED", known))

    def listed(self, raws: Iterable[Mapping[str, Any]]) -> None:
        """The complete set of this kind: what is not in it any more is gone."""
        seen: set[Key] = set()
        for raw in raws:
            self.observed(raw)
            metadata = raw.get("metadata") or {}
            seen.add((str(metadata.get("namespace") or ""), str(metadata.get("name") or "")))
        for key in self._objects.keys() - seen:
            self._tell(Change(self.kind, "DELETED", self._objects.pop(key)))
        self.synced = True

    def _validated(self, raw: Mapping[str, Any]) -> Model | None:
        try:
            resource: Model = self._model.model_validate(raw)
        except ValidationError as err:
            metadata = raw.get("metadata") or {}
            first = field_problems(err, whole="(object)")[0]
            log.warning(
                "%s %s/%s is left out: it does not read as esi's %s (%d problems, first: %s at %s)",
                self.kind,
                metadata.get("namespace"),
                metadata.get("name"),
                self._model.__name__,
                err.error_count(),
                first.problem,
                first.field,
            )
            return None
        return resource

    def _tell(self, change: Change) -> None:
        for listener in self._listeners:
            try:
                listener(change)
            except Exception:  # a listener's bug must not stop the cache from following the cluster
                log.exception(
                    "a listener failed on %s %s %s/%s", change.action, change.kind, change.namespace, change.name
                )


class ResourceCache:
    """Testbeds, BatchJobs and Schedulings as last seen; ``listen`` to be told of every change.

    ``memo`` keeps answers computed from the cache (a namespace's overview, serialised) until the next change,
    so a busy endpoint costs a dictionary lookup between changes, not a rendering per request.
    """

    def __init__(self) -> None:
        self._memo: dict[Hashable, bytes] = {}
        self._listeners: list[Listener] = [lambda _: self._memo.clear()]
        self.testbeds = Store("testbeds", Testbed, self._listeners)
        self.jobs = Store("jobs", BatchJob, self._listeners)
        self.schedulings = Store("schedulings", Scheduling, self._listeners)

    def listen(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def memo(self, key: Hashable, render: Callable[[], bytes]) -> bytes:
        """``render()``'s answer, computed once per state of the cache."""
        answer = self._memo.get(key)
        if answer is None:
            if len(self._memo) >= MEMO_LIMIT:  # many namespaces asked about between two changes: start over
                self._memo.clear()
            answer = self._memo[key] = render()
        return answer

    @property
    def stores(self) -> tuple[Store[Testbed], Store[BatchJob], Store[Scheduling]]:
        return self.testbeds, self.jobs, self.schedulings

    @property
    def synced(self) -> bool:
        return all(store.synced for store in self.stores)

    def unsynced(self) -> list[Kind]:
        return [store.kind for store in self.stores if not store.synced]


_RESOURCES: Final = {"testbeds": TestbedResource, "jobs": BatchJobResource, "schedulings": SchedulingResource}


def stream_of(store: Store[Any]) -> Stream:
    """A stream of the store's kind, cluster-wide, with the store as its first consumer."""
    stream = Stream(store.kind, _RESOURCES[store.kind])
    stream.tell(store)
    return stream


@contextlib.asynccontextmanager
async def following(
    cache: ResourceCache, client: AsyncClient, *, elsewhere: Collection[Kind] = ()
) -> AsyncIterator[ResourceCache]:
    """Keeps ``cache`` in step with the cluster of ``client`` while the context is open; the kinds in
    ``elsewhere`` come from streams the process runs for more than the cache (``Stream.tell`` their store)."""
    async with streaming([stream_of(store) for store in cache.stores if store.kind not in elsewhere], client):
        yield cache
