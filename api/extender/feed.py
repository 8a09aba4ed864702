"""Keeps the extender's ``SlotIndex`` in step with the cluster, from watches alone (design rules 4 and 7).

Two streams, each a LIST followed by a WATCH from the list's resourceVersion, cluster-wide:

* Testbeds: the slot table each one publishes in its status;
* pods labelled with a Testbed (``esi.tu-berlin.de/testbed``) and a role: ghost pods give each slot the UID
  of the pod to evict; executor pods that end (deleted, Succeeded, Failed) release the slot they were given.

Three layers, so that everything but the network is tested without a cluster:

* ``api.extender.slot_index.indexed_slots`` — pure: a slot table and a Testbed's ghost pods → the index's slots;
* ``IndexView`` — plain, synchronous: what has been seen so far; writes every change through to the index;
* ``IndexFeed`` — the async shell: list, watch, relist after ``410 Gone`` at once and after any other error
  with capped exponential backoff; it never gives up and never lets an error out of its task.

A relist is the repair for anything missed while not watching: Testbeds that vanished leave the index,
ghosts that vanished lose their slot, and every executor holding a slot since before the list that is no
longer listed as unfinished is forgotten.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Collection, Iterable, Mapping
from typing import Any, Final

import httpx2
from lightkube import ALL_NS, ApiError, AsyncClient, KubeConfig
from lightkube.core.client import LabelSelector
from lightkube.generic_resource import GenericNamespacedResource
from lightkube.operators import exists, in_
from lightkube.resources.core_v1 import Pod
from lightkube.types import PatchType
from pydantic import TypeAdapter, ValidationError

from api.extender.slot_index import GhostPod, SlotIndex, indexed_slots
from esi.decisions.testbed_lifecycle import FINISHED_PHASES
from esi.objects.names import ROLE_EXECUTOR, ROLE_GHOST, ROLE_LABEL, SLOT_LABEL, TESTBED_LABEL
from esi.resources.testbed import Slot
from kube.resources import TestbedResource
from kube.watch import follow

__all__ = ["IndexFeed", "IndexView", "feeding", "status_slots"]

log = logging.getLogger(__name__)

TestbedKey = tuple[str, str]  # (namespace, name)

LIST_CHUNK: Final = 500
_SLOTS: Final = TypeAdapter(tuple[Slot, ...])
_ESI_PODS: Final[LabelSelector] = {TESTBED_LABEL: exists(), ROLE_LABEL: in_([ROLE_GHOST, ROLE_EXECUTOR])}


def status_slots(status: Mapping[str, Any] | None) -> tuple[Slot, ...]:
    """The slot table of a Testbed status as the API server returns it (none yet: empty).

    Raises ``pydantic.ValidationError`` when it is not a slot table esi wrote.
    """
    return _SLOTS.validate_python((status or {}).get("slots") or ())


class IndexView:
    """What has been seen of Testbeds and their pods; every change goes straight into the ``SlotIndex``."""

    def __init__(self, index: SlotIndex) -> None:
        self._index = index
        self._testbeds: dict[TestbedKey, tuple[Slot, ...] | None] = {}  # None: a status esi cannot read
        self._ghosts: dict[TestbedKey, dict[str, GhostPod]] = {}  # by ghost pod name, per Testbed

    # --- Testbeds ---------------------------------------------------------------------------------------

    def testbed_changed(self, namespace: str, name: str, status: Mapping[str, Any] | None) -> None:
        key = (namespace, name)
        slots = _readable_slots(key, status)
        if key in self._testbeds and self._testbeds[key] == slots:
            return
        self._testbeds[key] = slots
        self._publish(key)

    def testbed_deleted(self, namespace: str, name: str) -> None:
        self._testbeds.pop((namespace, name), None)
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
        key, name, uid, role, phase = facts
        if role == ROLE_GHOST and self._ghosts.get(key, {}).get(name) != (ghost := _ghost(pod, uid)):
            self._ghosts.setdefault(key, {})[name] = ghost
            self._publish(key)
        elif role == ROLE_EXECUTOR and phase in FINISHED_PHASES:
            self._index.forget_pod(uid)
        elif role == ROLE_EXECUTOR:
            self._restore(pod, key, uid)

    def pod_deleted(self, pod: Pod) -> None:
        facts = _pod_facts(pod)
        if facts is None:
            return
        key, name, uid, role, _ = facts
        ghosts = self._ghosts.get(key, {})
        known = ghosts.get(name)
        if role == ROLE_GHOST and known is not None and known.uid == uid:  # not a newer ghost of the same name
            del ghosts[name]
            if not ghosts:
                del self._ghosts[key]
            self._publish(key)
        elif role == ROLE_EXECUTOR:
            self._index.forget_pod(uid)

    def pods_listed(self, pods: Iterable[Pod], bound_before: Collection[str]) -> None:
        """The complete set of esi's pods. ``bound_before``: pods holding a slot before the list was asked for.

        Those pods existed when the list was taken, so one of them that is not listed unfinished has ended.
        """
        ghosts: dict[TestbedKey, dict[str, GhostPod]] = {}
        running: set[str] = set()
        for pod in pods:
            facts = _pod_facts(pod)
            if facts is None:
                continue
            key, name, uid, role, phase = facts
            if role == ROLE_GHOST:
                ghosts.setdefault(key, {})[name] = _ghost(pod, uid)
            elif phase not in FINISHED_PHASES:
                running.add(uid)
                self._restore(pod, key, uid)
        for uid in set(bound_before) - running:
            self._index.forget_pod(uid)
        changed = [key for key in self._ghosts.keys() | ghosts.keys() if self._ghosts.get(key) != ghosts.get(key)]
        self._ghosts = ghosts
        for key in changed:
            self._publish(key)

    def _restore(self, pod: Pod, key: TestbedKey, uid: str) -> None:
        """An executor's recorded slot (its label) is its binding, also for an extender that restarted."""
        slot = ((pod.metadata.labels or {}) if pod.metadata else {}).get(SLOT_LABEL, "")
        if slot.isdigit() and not self._index.restore(uid, key[0], key[1], int(slot)):
            log.warning(
                "pod %s/%s claims slot %s of testbed %s, which another pod holds",
                key[0],
                pod.metadata.name if pod.metadata else "?",
                slot,
                key[1],
            )

    def _publish(self, key: TestbedKey) -> None:
        if key not in self._testbeds:  # ghosts of a Testbed not seen yet wait for it
            return
        slots = self._testbeds[key]
        if slots is None:
            self._index.remove_testbed(*key)
        else:
            self._index.replace_testbed(*key, indexed_slots(slots, self._ghosts.get(key, {})))


def _readable_slots(key: TestbedKey, status: Mapping[str, Any] | None) -> tuple[Slot, ...] | None:
    try:
        return status_slots(status)
    except ValidationError as err:
        log.warning("testbed %s/%s: its status holds no readable slot table, no executor gets a slot: %s", *key, err)
        return None


def _ghost(pod: Pod, uid: str) -> GhostPod:
    slot = ((pod.metadata.labels or {}) if pod.metadata else {}).get(SLOT_LABEL, "")
    return GhostPod(uid, int(slot) if slot.isdigit() else None, pod.spec.nodeName if pod.spec else None)


def _pod_facts(pod: Pod) -> tuple[TestbedKey, str, str, str, str | None] | None:
    """(Testbed, pod name, uid, role, phase) of one of esi's pods; None for anything else."""
    meta = pod.metadata
    if meta is None or not meta.name or not meta.namespace or not meta.uid:
        return None
    labels = meta.labels or {}
    testbed, role = labels.get(TESTBED_LABEL), labels.get(ROLE_LABEL)
    if not testbed or role not in (ROLE_GHOST, ROLE_EXECUTOR):
        return None
    return (meta.namespace, testbed), meta.name, meta.uid, role, pod.status.phase if pod.status else None


class IndexFeed:
    """Follows Testbeds and esi's pods cluster-wide and feeds an ``IndexView``; ``run`` ends only if cancelled."""

    def __init__(
        self, client: AsyncClient, index: SlotIndex, *, min_backoff: float = 0.5, max_backoff: float = 30.0
    ) -> None:
        self._client = client
        self._index = index
        self._view = IndexView(index)
        self._min_backoff = min_backoff
        self._max_backoff = max_backoff

    async def record_binding(self, namespace: str, pod: str, slot: int) -> None:
        """Label an executor pod with the slot the extender gave it (once per pod, before the answer)."""
        try:
            await self._client.patch(
                Pod,
                pod,
                {"metadata": {"labels": {SLOT_LABEL: str(slot)}}},
                namespace=namespace,
                patch_type=PatchType.MERGE,
            )
        except ApiError as err:
            if err.status.code != 404:  # a pod that is gone needs no record
                log.warning("could not record slot %s on pod %s/%s: %s", slot, namespace, pod, err.status.message)
        except httpx2.HTTPError as err:  # lightkube speaks httpx2
            log.warning("could not record slot %s on pod %s/%s: %s", slot, namespace, pod, err)

    async def run(self) -> None:
        async with asyncio.TaskGroup() as streams:
            for what, relist, watch in (
                ("testbeds", self._list_testbeds, self._watch_testbeds),
                ("esi pods", self._list_pods, self._watch_pods),
            ):
                backoff = {"min_backoff": self._min_backoff, "max_backoff": self._max_backoff}
                streams.create_task(follow(what, relist, watch, **backoff))

    async def _list_testbeds(self) -> str:
        listing = self._client.list(TestbedResource, namespace=ALL_NS, chunk_size=LIST_CHUNK)
        testbeds = [_testbed_entry(testbed) async for testbed in listing]
        self._view.testbeds_listed(testbeds)
        return listing.resourceVersion

    async def _watch_testbeds(self, version: str) -> None:
        async for event, testbed in self._client.watch(TestbedResource, namespace=ALL_NS, resource_version=version):
            namespace, name, status = _testbed_entry(testbed)
            if event == "DELETED":
                self._view.testbed_deleted(namespace, name)
            elif event in ("ADDED", "MODIFIED"):
                self._view.testbed_changed(namespace, name, status)

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


def _testbed_entry(testbed: GenericNamespacedResource) -> tuple[str, str, Mapping[str, Any] | None]:
    meta = testbed.metadata
    if meta is None or meta.namespace is None or meta.name is None:
        raise ValueError(f"a Testbed without namespace or name: {dict(testbed)}")
    status: Mapping[str, Any] | None = testbed.get("status")
    return meta.namespace, meta.name, status


@contextlib.asynccontextmanager
async def feeding(index: SlotIndex, config: KubeConfig) -> AsyncIterator[IndexFeed]:
    """Feeds ``index`` from the cluster of ``config`` while the context is open."""
    client = AsyncClient(config=config)
    feed = IndexFeed(client, index)
    task = asyncio.create_task(feed.run(), name="esi-index-feed")
    try:
        yield feed
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await client.close()
