"""Keeps the extender's ``SlotIndex`` in step with the cluster, from watches alone.

The index is memory rebuilt from watches, never authoritative (docs/design.md#extender-decisions-from-memory,
docs/design.md#level-triggered-reconcilers).

Two streams, each a LIST followed by a WATCH from the list's resourceVersion, cluster-wide:

* Testbeds: the slot table each one publishes in its status, read with esi's Testbed model. The stream is a
  ``kube.watch.Stream``: the feed's own, or in ``python -m api`` the process's one, which also feeds the
  API's cache;
* pods labelled with a Testbed (``esi.tu-berlin.de/testbed``) and a role: ghost pods give each slot the UID
  of the pod to evict; executor pods bring back the slot recorded on them (after a restart), are known as
  waiting for a slot while unbound, and release their slot when deleted, or when finished once their kubelet
  has let go of them (``room_held_until``).

Three layers, so that everything but the network is tested without a cluster:

* ``api.extender.slot_index.indexed_slots`` — pure: a slot table and a Testbed's ghost pods → the index's slots;
* ``IndexView`` — plain, synchronous: what has been seen so far; writes every change through to the index;
* ``IndexFeed`` — the async shell: list, watch, relist after ``410 Gone`` at once and after any other error
  with capped exponential backoff (``kube.watch``); it never gives up and never lets an error out of its
  task.

A relist is the repair for anything missed while not watching: Testbeds that vanished leave the index,
ghosts that vanished lose their slot, and every executor holding a slot since before the list that is no
longer listed as unfinished is forgotten.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Collection, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Final

import httpx2
from lightkube import ALL_NS, ApiError, AsyncClient, KubeConfig
from lightkube.core.client import LabelSelector
from lightkube.operators import exists, in_
from lightkube.resources.core_v1 import Pod
from lightkube.types import PatchType
from pydantic import ValidationError

from api.extender.slot_index import GhostPod, SlotIndex, indexed_slots
from esi.decisions.testbed_lifecycle import FINISHED_PHASES, room_held_until
from esi.objects.names import (
    JOB_LABEL,
    ROLE_EXECUTOR,
    ROLE_GHOST,
    ROLE_LABEL,
    SLOT_ANNOTATION,
    TESTBED_LABEL,
    is_executor,
    slot_of,
    testbed_of,
)
from esi.objects.pod_status import last_container_end
from esi.resources.testbed import Slot, TestbedStatus
from kube.errors import Refusal, refusal
from kube.resources import TestbedResource
from kube.watch import LIST_CHUNK, Stream, follow

__all__ = ["IndexFeed", "IndexView", "TestbedSlots", "feeding", "status_slots"]

log = logging.getLogger(__name__)

TestbedKey = tuple[str, str]  # (namespace, name)

_ESI_PODS: Final[LabelSelector] = {TESTBED_LABEL: exists(), ROLE_LABEL: in_([ROLE_GHOST, ROLE_EXECUTOR])}


def status_slots(status: Mapping[str, Any] | None) -> tuple[Slot, ...]:
    """The slot table of a Testbed status as the API server returns it (none yet: empty).

    Raises ``pydantic.ValidationError`` when it is not a status esi wrote.
    """
    return tuple(TestbedStatus.model_validate(status).slots) if status else ()


class IndexView:
    """What has been seen of Testbeds and their pods; every change goes straight into the ``SlotIndex``."""

    def __init__(self, index: SlotIndex) -> None:
        self._index = index
        self._testbeds: dict[TestbedKey, dict[int, Slot] | None] = {}  # slot table by id; None: not readable
        self._named: dict[TestbedKey, dict[str, int]] = {}  # the slot id each pod name in a table is given
        self._ghosts: dict[TestbedKey, dict[str, GhostPod]] = {}  # by ghost pod name, per Testbed

    # --- Testbeds ---------------------------------------------------------------------------------------

    def testbed_changed(self, namespace: str, name: str, status: Mapping[str, Any] | None) -> None:
        key = (namespace, name)
        slots = _readable_slots(key, status)
        rows = None if slots is None else {slot.id: slot for slot in slots}
        if key in self._testbeds and self._testbeds[key] == rows:
            return
        self._testbeds[key] = rows
        self._named[key] = {slot.pod: slot.id for slot in slots or () if slot.pod}
        self._publish(key)

    def testbed_deleted(self, namespace: str, name: str) -> None:
        self._testbeds.pop((namespace, name), None)
        self._named.pop((namespace, name), None)
        self._index.remove_testbed(namespace, name)

    def testbeds_listed(self, testbeds: Iterable[tuple[str, str, Mapping[str, Any] | None]]) -> None:
        """The complete set of Testbeds: the ones not listed any more are gone."""
        listed = {(namespace, name): status for namespace, name, status in testbeds}
        for namespace, name in self._testbeds.keys() - listed.keys():
            self.testbed_deleted(namespace, name)
        for (namespace, name), status in listed.items():
            self.testbed_changed(namespace, name, status)

    # --- pods -------------------------------------------------------------------------------------------

    def pod_changed(self, pod: Pod) -> None:
        facts = _pod_facts(pod)
        if facts is None:
            return
        key, name, uid, executor, phase = facts
        before = self._ghosts.get(key, {}).get(name)
        if not executor and before != (ghost := _ghost(pod, uid)):
            self._ghosts.setdefault(key, {})[name] = ghost
            self._publish_ghost(key, name, before, ghost)
        elif executor:
            self._restore(pod, key, uid, _room_held_until(pod, phase))

    def pod_deleted(self, pod: Pod) -> None:
        facts = _pod_facts(pod)
        if facts is None:
            return
        key, name, uid, executor, _ = facts
        ghosts = self._ghosts.get(key, {})
        known = ghosts.get(name)
        if not executor and known is not None and known.uid == uid:  # not a newer ghost of the same name
            del ghosts[name]
            if not ghosts:
                del self._ghosts[key]
            self._publish_ghost(key, name, known, None)
        elif executor:
            self._index.forget_pod(uid)

    def pods_listed(self, pods: Iterable[Pod], bound_before: Collection[str]) -> None:
        """The complete set of esi's pods. ``bound_before``: pods holding a slot before the list was asked for.

        Those pods existed when the list was taken, so one of them that is not listed is gone.
        """
        ghosts: dict[TestbedKey, dict[str, GhostPod]] = {}
        running: set[str] = set()
        waiting: set[str] = set()
        for pod in pods:
            facts = _pod_facts(pod)
            if facts is None:
                continue
            key, name, uid, executor, phase = facts
            if not executor:
                ghosts.setdefault(key, {})[name] = _ghost(pod, uid)
                continue
            running.add(uid)
            if _waiting(pod):
                waiting.add(uid)
            self._restore(pod, key, uid, _room_held_until(pod, phase))
        for uid in set(bound_before) - running:
            self._index.forget_pod(uid)
        self._index.pods_read(waiting)
        changed = [key for key in self._ghosts.keys() | ghosts.keys() if self._ghosts.get(key) != ghosts.get(key)]
        self._ghosts = ghosts
        for key in changed:
            self._publish(key)

    def _restore(self, pod: Pod, key: TestbedKey, uid: str, released_at: datetime | None) -> None:
        """An executor's recorded slot (its annotation) is its binding, also for an extender that restarted, until
        ``released_at`` if it is finished; an executor without one that is not bound yet waits for a slot."""
        slot = slot_of(_annotations(pod))
        if slot is None:
            if released_at is not None:
                self._index.release_at(uid, released_at)
            elif _waiting(pod):
                self._index.executor_waiting(uid, key[0], key[1], _labels(pod).get(JOB_LABEL, ""), _name(pod))
            return
        if not self._index.restore(uid, key[0], key[1], slot, released_at):
            log.warning(
                "pod %s/%s claims slot %s of testbed %s, which another pod holds",
                key[0],
                pod.metadata.name if pod.metadata else "?",
                slot,
                key[1],
            )

    def _publish_ghost(self, key: TestbedKey, name: str, before: GhostPod | None, after: GhostPod | None) -> None:
        """Ghost ``name`` changed from ``before`` to ``after`` (None: none): only the slots it was or is said to
        hold are joined again (``indexed_slots``), with the ghosts that can be theirs — a slot's ghost is the
        one its table row names, or the one carrying its slot id, and ghosts are named after their slot."""
        rows = self._testbeds.get(key)
        if rows is None:  # not seen yet, or not readable
            self._publish(key)
            return
        ids = {g.slot for g in (before, after) if g is not None and g.slot is not None}
        if (named := self._named[key].get(name)) is not None:
            ids.add(named)
        affected = [rows[i] for i in sorted(ids) if i in rows]
        ghosts = self._ghosts.get(key, {})
        candidates = {n: ghosts[n] for n in {name, *(row.pod for row in affected if row.pod)} if n in ghosts}
        self._index.update_slots(*key, indexed_slots(affected, candidates))

    def _publish(self, key: TestbedKey) -> None:
        if key not in self._testbeds:  # ghosts of a Testbed not seen yet wait for it
            return
        rows = self._testbeds[key]
        if rows is None:
            self._index.remove_testbed(*key)
        else:
            self._index.replace_testbed(*key, indexed_slots(rows.values(), self._ghosts.get(key, {})))


def _readable_slots(key: TestbedKey, status: Mapping[str, Any] | None) -> tuple[Slot, ...] | None:
    try:
        return status_slots(status)
    except ValidationError as err:
        log.warning("testbed %s/%s: its status holds no readable slot table, no executor gets a slot: %s", *key, err)
        return None


def _labels(pod: Pod) -> dict[str, str]:
    return (pod.metadata.labels or {}) if pod.metadata else {}


def _name(pod: Pod) -> str:
    return (pod.metadata.name or "") if pod.metadata else ""


def _waiting(pod: Pod) -> bool:
    """An executor pod waiting for the scheduler: not bound, no slot recorded, not going away, not finished."""
    unbound = pod.spec is None or not pod.spec.nodeName
    going = pod.metadata is None or pod.metadata.deletionTimestamp is not None
    finished = pod.status is not None and pod.status.phase in FINISHED_PHASES
    return unbound and not going and not finished and slot_of(_annotations(pod)) is None


def _annotations(pod: Pod) -> dict[str, str]:
    return (pod.metadata.annotations or {}) if pod.metadata else {}


def _room_held_until(pod: Pod, phase: str | None) -> datetime | None:
    """When a finished executor lets go of its slot (``room_held_until``); None while it holds it."""
    if phase not in FINISHED_PHASES:
        return None
    terminating = pod.metadata is not None and pod.metadata.deletionTimestamp is not None
    status = pod.status.to_dict() if pod.status else None
    return room_held_until(phase, terminating, last_container_end(status))


def _ghost(pod: Pod, uid: str) -> GhostPod:
    return GhostPod(uid, slot_of(_annotations(pod)), pod.spec.nodeName if pod.spec else None)


def _pod_facts(pod: Pod) -> tuple[TestbedKey, str, str, bool, str | None] | None:
    """(Testbed, pod name, uid, whether an executor (else a ghost), phase) of one of esi's pods; None for
    anything else."""
    meta = pod.metadata
    if meta is None or not meta.name or not meta.namespace or not meta.uid:
        return None
    labels = meta.labels or {}
    testbed = testbed_of(labels)
    if not testbed:
        return None
    return (meta.namespace, testbed), meta.name, meta.uid, is_executor(labels), pod.status.phase if pod.status else None


class TestbedSlots:
    """A consumer of a Testbed stream (``kube.watch.Consumer``): each Testbed's slot table into the view."""

    def __init__(self, view: IndexView) -> None:
        self._view = view

    def listed(self, objects: Sequence[Mapping[str, Any]]) -> None:
        self._view.testbeds_listed(_testbed_entry(testbed) for testbed in objects)

    def observed(self, obj: Mapping[str, Any]) -> None:
        self._view.testbed_changed(*_testbed_entry(obj))

    def deleted(self, obj: Mapping[str, Any]) -> None:
        namespace, name, _ = _testbed_entry(obj)
        self._view.testbed_deleted(namespace, name)


def _testbed_entry(testbed: Mapping[str, Any]) -> tuple[str, str, Mapping[str, Any] | None]:
    metadata = testbed.get("metadata") or {}
    namespace, name = metadata.get("namespace"), metadata.get("name")
    if not namespace or not name:
        raise ValueError(f"a Testbed without namespace or name: {testbed}")
    status: Mapping[str, Any] | None = testbed.get("status")
    return namespace, name, status


class IndexFeed:
    """Follows Testbeds and esi's pods cluster-wide and feeds an ``IndexView``; ``run`` ends only if cancelled.

    ``testbed_stream``: a Testbed stream the process runs for more than the index, to be told Testbeds by
    instead of following them itself.
    """

    def __init__(
        self,
        client: AsyncClient,
        index: SlotIndex,
        *,
        testbed_stream: Stream | None = None,
        min_backoff: float = 0.5,
        max_backoff: float = 30.0,
    ) -> None:
        self._client = client
        self._index = index
        self._view = IndexView(index)
        self._own_testbeds = testbed_stream is None
        self._testbeds = Stream("testbeds", TestbedResource) if testbed_stream is None else testbed_stream
        self._testbeds.tell(TestbedSlots(self._view))
        self._min_backoff = min_backoff
        self._max_backoff = max_backoff

    @property
    def client(self) -> AsyncClient:
        return self._client

    async def record_binding(self, namespace: str, pod: str, slot: int) -> None:
        """Record on an executor pod the slot the extender gave it, before a preemption evicts the slot's ghost
        (the bind verb records it on the Binding instead)."""
        try:
            await self._client.patch(
                Pod,
                pod,
                {"metadata": {"annotations": {SLOT_ANNOTATION: str(slot)}}},
                namespace=namespace,
                patch_type=PatchType.MERGE,
            )
        except ApiError as err:
            if refusal(err) is not Refusal.NOT_FOUND:  # a pod that is gone needs no record
                log.warning("could not record slot %s on pod %s/%s: %s", slot, namespace, pod, err.status.message)
        except httpx2.HTTPError as err:  # lightkube speaks httpx2
            log.warning("could not record slot %s on pod %s/%s: %s", slot, namespace, pod, err)

    async def run(self) -> None:
        backoff = {"min_backoff": self._min_backoff, "max_backoff": self._max_backoff}
        async with asyncio.TaskGroup() as streams:
            if self._own_testbeds:
                streams.create_task(self._testbeds.run(self._client, **backoff))
            streams.create_task(follow("esi pods", self._list_pods, self._watch_pods, **backoff))

    async def _list_pods(self) -> str:
        bound_before = self._index.bound_pods()  # before the list is asked for: see IndexView.pods_listed
        listing = self._client.list(Pod, namespace=ALL_NS, labels=_ESI_PODS, chunk_size=LIST_CHUNK)
        pods = [pod async for pod in listing]
        self._view.pods_listed(pods, bound_before)
        return listing.resourceVersion

    async def _watch_pods(self, version: str) -> None:
        async for event, pod in self._client.watch(Pod, namespace=ALL_NS, labels=_ESI_PODS, resource_version=version):
            if event == "DELETED":
                self._view.pod_deleted(pod)
            elif event in ("ADDED", "MODIFIED"):
                self._view.pod_changed(pod)


@contextlib.asynccontextmanager
async def feeding(
    index: SlotIndex, config: KubeConfig, testbed_stream: Stream | None = None
) -> AsyncIterator[IndexFeed]:
    """Feeds ``index`` from the cluster of ``config`` while the context is open; ``testbed_stream``: see
    ``IndexFeed``."""
    client = AsyncClient(config=config)
    feed = IndexFeed(client, index, testbed_stream=testbed_stream)
    task = asyncio.create_task(feed.run(), name="esi-index-feed")
    try:
        yield feed
    finally:
        task.cancel()
        await asyncio.wait([task])  # not awaited: that would swallow a cancellation of the caller
        await client.close()
