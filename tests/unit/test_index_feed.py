"""The extender's index follows Testbed statuses and esi's pods: the slot table joined with ghost UIDs, slots
released when executors end, a relist repairing what was missed, and a feed that lists, watches from the
list's version, lists again after 410 Gone and keeps going through errors — or is told Testbeds by the
process's one Testbed stream, which also feeds the API's cache."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lightkube import ApiError, AsyncClient
from lightkube.models.core_v1 import PodSpec
from lightkube.models.meta_v1 import ObjectMeta, Status
from lightkube.resources.core_v1 import Pod
from pydantic import ValidationError

from api.cache import ResourceCache
from api.extender.feed import IndexFeed, IndexView, status_slots
from api.extender.slot_index import GhostPod, IndexedSlot, SlotIndex, indexed_slots
from esi.decisions.testbed_lifecycle import KUBELET_STOP_SECONDS
from esi.objects.names import ROLE_GHOST, ROLE_LABEL, SLOT_ANNOTATION, TESTBED_LABEL
from esi.resources.testbed import Slot, SlotState
from kube.resources import TestbedResource
from kube.watch import Stream, streaming
from tests import builders, virtual_time
from tests.builders import filter_args, status_slot, stored
from tests.cancellation import assert_caller_stays_cancelled
from tests.manifests import testbed_manifest
from tests.unit.fake_cluster import FakeCluster

# Testbed tb on n0/n1: slot 0 free, slot 1 reserved for job j, both still held by their ghosts.
STATUS = {"state": "InUse", "slots": [status_slot(0, 0, pod="g-0"), status_slot(1, 1, "Reserved", job="j", pod="g-1")]}


def ghost(name: str, uid: str, testbed: str = "tb", namespace: str = "ns") -> Pod:
    labels = {ROLE_LABEL: ROLE_GHOST, TESTBED_LABEL: testbed}
    slot = {SLOT_ANNOTATION: name.rsplit("-", 1)[-1]}
    return Pod(metadata=ObjectMeta(name=name, namespace=namespace, uid=uid, labels=labels, annotations=slot))


def executor_pod(name: str, phase: str = "Running", job: str = "j") -> Pod:
    return cast(Pod, Pod.from_dict(builders.executor_pod(name, job) | {"status": {"phase": phase}}))


def victims(index: SlotIndex) -> dict[int, str | None]:
    slots = index.slots("ns", "tb")
    assert slots is not None, "the index does not know testbed tb"
    return {s.id: s.ghost_uid for s in slots}


def gives(index: SlotIndex, pod: str) -> int | None:
    """The slot the extender gives executor ``pod`` of job j now (None: refused)."""
    index.filter(filter_args(builders.executor_pod(pod)))
    bound = index.slot_of(f"uid-{pod}")
    return None if bound is None else bound[2]


# --- the pure join --------------------------------------------------------------------------------------


def test_each_slot_gets_the_uid_of_its_ghost() -> None:
    table = [
        Slot.model_validate(s)
        for s in [
            status_slot(0, 0, pod="g-0"),
            status_slot(1, 1, "Reserved", job="j", pod="g-1"),
            status_slot(2, 0, "Occupied", job="k", pod="exec-k-1"),  # an executor, not a ghost: nothing to evict
            status_slot(3, 1, "Reserved", job="j", pod="g-3"),  # its ghost is not known (yet)
            status_slot(4, 0),  # the table names no ghost yet, but the ghost pod labelled slot 4 on n0 exists
            status_slot(5, 1),  # a ghost labelled slot 5 exists, but on another node: not this slot's
            status_slot(6, 0, noRoom="other pods on node n0 request 1 cpu"),  # no ghost: other pods hold its room
        ]
    ]
    ghosts = {
        "g-0": GhostPod("u0", 0, "n0"),
        "g-1": GhostPod("u1", 1, "n1"),
        "g-9": GhostPod("u9", 9, "n1"),
        "g-4": GhostPod("u4", 4, "n0"),
        "g-5": GhostPod("u5", 5, "n0"),
        "g-2": GhostPod("u2", 2, "n0"),  # an old ghost of the occupied slot: never its victim
    }

    assert indexed_slots(table, ghosts) == [
        IndexedSlot(0, "n0", SlotState.FREE, ghost_uid="u0", ghost_name="g-0"),
        IndexedSlot(1, "n1", SlotState.RESERVED, job="j", ghost_uid="u1", ghost_name="g-1"),
        IndexedSlot(2, "n0", SlotState.OCCUPIED, job="k"),
        IndexedSlot(3, "n1", SlotState.RESERVED, job="j"),
        IndexedSlot(4, "n0", SlotState.FREE, ghost_uid="u4", ghost_name="g-4"),
        IndexedSlot(5, "n1", SlotState.FREE),
        IndexedSlot(6, "n0", SlotState.FREE, no_room="other pods on node n0 request 1 cpu"),
    ]


@pytest.mark.parametrize("status", [None, {}, {"state": "Pending"}, {"slots": []}], ids=str)
def test_a_testbed_without_a_slot_table_has_no_slots(status: dict[str, Any] | None) -> None:
    assert status_slots(status) == ()


def test_a_slot_table_esi_did_not_write_is_refused() -> None:
    with pytest.raises(ValidationError, match=r"nodeName"):
        status_slots({"slots": [{"id": 0, "state": "Free"}]})


# --- the view ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("testbed_first", [True, False], ids=["testbed first", "ghosts first"])
def test_a_testbed_and_its_ghosts_meet_in_either_order(testbed_first: bool) -> None:
    index = SlotIndex()
    view = IndexView(index)
    events: list[Callable[[], None]] = [
        lambda: view.pod_changed(ghost("g-0", "u0")),
        lambda: view.pod_changed(ghost("g-1", "u1")),
        lambda: view.pod_changed(ghost("g-1", "other", testbed="tb2")),  # another Testbed's ghost
        lambda: view.pod_changed(ghost("g-1", "other", namespace="ns2")),  # tb of another namespace
    ]
    events.insert(0 if testbed_first else len(events), lambda: view.testbed_changed("ns", "tb", STATUS))

    for event in events:
        event()

    assert victims(index) == {0: "u0", 1: "u1"}
    assert gives(index, "e1") == 1


def test_a_ghost_that_is_gone_is_no_victim_any_more() -> None:
    index = SlotIndex()
    view = IndexView(index)
    view.testbed_changed("ns", "tb", STATUS)
    view.pod_changed(ghost("g-0", "u0"))
    view.pod_changed(ghost("g-1", "u1"))

    view.pod_deleted(ghost("g-1", "u1"))
    view.pod_changed(ghost("g-0", "u0-new"))  # recreated under the same name
    view.pod_deleted(ghost("g-0", "u0"))  # the old one's deletion, seen late, must not hide the new one

    assert victims(index) == {0: "u0-new", 1: None}


def test_a_deleted_testbed_gives_no_slots() -> None:
    index = SlotIndex()
    view = IndexView(index)
    view.testbed_changed("ns", "tb", STATUS)

    view.testbed_deleted("ns", "tb")

    assert index.slots("ns", "tb") is None
    assert index.filter(filter_args(builders.executor_pod("e1"))).error


def test_a_status_change_reaches_the_index() -> None:
    index = SlotIndex()
    view = IndexView(index)
    view.testbed_changed("ns", "tb", STATUS)
    assert gives(index, "e1") == 1

    view.testbed_changed("ns", "tb", {"slots": [*STATUS["slots"], status_slot(2, 0, "Reserved", job="j", pod="g-2")]})

    assert gives(index, "e2") == 2


def test_an_unreadable_status_makes_the_testbed_unknown(caplog: pytest.LogCaptureFixture) -> None:
    index = SlotIndex()
    view = IndexView(index)
    view.testbed_changed("ns", "tb", STATUS)

    with caplog.at_level(logging.WARNING):
        view.testbed_changed("ns", "tb", {"slots": [{"id": 0, "state": "Nonsense"}]})

    assert index.slots("ns", "tb") is None
    assert "testbed ns/tb" in caplog.text


@pytest.mark.parametrize("ending", ["deleted", "Succeeded", "Failed"])
def test_an_executor_that_ends_releases_its_slot(ending: str) -> None:
    index = SlotIndex()
    view = IndexView(index)
    view.testbed_changed("ns", "tb", STATUS)
    assert gives(index, "e1") == 1

    if ending == "deleted":
        view.pod_deleted(executor_pod("e1"))
    else:
        view.pod_changed(executor_pod("e1", phase=ending))

    assert index.slot_of("uid-e1") is None
    assert gives(index, "e2") == 1


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def finished_pod(name: str, ended: datetime, *, deleted: bool = False) -> Pod:
    """Executor ``name`` of job j, Failed, its container ended at ``ended`` (``deleted``: being deleted)."""
    pod = builders.executor_pod(name, "j") | {
        "status": {
            "phase": "Failed",
            "containerStatuses": [
                {
                    "name": "executor",
                    "image": "spark",
                    "imageID": "",
                    "ready": False,
                    "restartCount": 0,
                    "state": {"terminated": {"exitCode": 1, "finishedAt": ended.isoformat()}},
                }
            ],
        }
    }
    if deleted:
        pod["metadata"] = pod["metadata"] | {"deletionTimestamp": ended.isoformat()}
    return cast(Pod, Pod.from_dict(pod))


def e1_in_slot_1(clock: Clock) -> tuple[SlotIndex, IndexView]:
    index = SlotIndex(clock)
    view = IndexView(index)
    view.testbed_changed("ns", "tb", STATUS)
    assert gives(index, "e1") == 1
    return index, view


def test_a_finished_executor_holds_its_slot_until_its_kubelet_has_let_go_of_it() -> None:
    """Given again at once, the slot's next pod could meet a kubelet still counting the finished one."""
    clock = Clock()
    index, view = e1_in_slot_1(clock)

    view.pod_changed(finished_pod("e1", ended=clock.now))
    assert gives(index, "e2") is None
    answer = index.filter(filter_args(builders.executor_pod("e2")))
    assert answer.error is not None
    assert "still be stopping" in answer.error

    clock.now += timedelta(seconds=KUBELET_STOP_SECONDS)
    assert gives(index, "e2") == 1


def test_a_finished_executor_being_deleted_holds_its_slot_until_it_is_gone() -> None:
    clock = Clock()
    index, view = e1_in_slot_1(clock)

    view.pod_changed(finished_pod("e1", ended=clock.now, deleted=True))
    clock.now += timedelta(hours=1)
    view.pods_listed([finished_pod("e1", ended=clock.now, deleted=True)], index.bound_pods())
    assert gives(index, "e2") is None

    view.pod_deleted(finished_pod("e1", ended=clock.now, deleted=True))
    assert gives(index, "e2") == 1


@pytest.mark.parametrize("phase", ["Pending", "Running"])
def test_an_executor_that_has_not_ended_keeps_its_slot(phase: str) -> None:
    index = SlotIndex()
    view = IndexView(index)
    view.testbed_changed("ns", "tb", STATUS)
    assert gives(index, "e1") == 1

    view.pod_changed(executor_pod("e1", phase=phase))

    assert index.slot_of("uid-e1") == ("ns", "tb", 1)
    assert gives(index, "e2") is None


def test_a_relist_drops_testbeds_that_went_away_unseen() -> None:
    index = SlotIndex()
    view = IndexView(index)
    view.testbed_changed("ns", "tb", STATUS)
    view.testbed_changed("ns", "old", STATUS)

    view.testbeds_listed([("ns", "tb", STATUS), ("ns", "new", STATUS)])

    assert index.slots("ns", "old") is None
    assert index.slots("ns", "tb") is not None
    assert index.slots("ns", "new") is not None


def test_a_relist_forgets_executors_that_ended_unseen_and_replaces_the_ghosts() -> None:
    index = SlotIndex()
    view = IndexView(index)
    two_reserved = {
        "slots": [status_slot(1, 1, "Reserved", job="j", pod="g-1"), status_slot(3, 1, "Reserved", job="j", pod="g-3")]
    }
    view.testbed_changed("ns", "tb", two_reserved)
    view.pod_changed(ghost("g-1", "u1"))
    view.pod_changed(ghost("g-3", "u3"))
    assert (gives(index, "gone"), gives(index, "done")) == (1, 3)
    bound_before = index.bound_pods()
    view.testbed_changed(
        "ns", "tb", {"slots": [*two_reserved["slots"], status_slot(5, 1, "Reserved", job="j", pod="g-5")]}
    )
    assert gives(index, "late") == 5  # bound after the list was asked for: not the list's business

    listed = [executor_pod("done", phase="Succeeded"), ghost("g-3", "u3-new"), ghost("g-5", "u5")]
    view.pods_listed(listed, bound_before)

    assert (index.slot_of("uid-gone"), index.slot_of("uid-done")) == (None, None)
    assert index.slot_of("uid-late") == ("ns", "tb", 5)
    assert victims(index) == {1: None, 3: "u3-new", 5: "u5"}


def test_an_unbound_executor_listed_or_seen_waits_for_a_slot_until_it_is_bound() -> None:
    index = SlotIndex()
    view = IndexView(index)
    view.testbed_changed("ns", "tb", STATUS)
    view.pods_listed([executor_pod("e1", phase="Pending")], index.bound_pods())
    view.pod_changed(executor_pod("e2", phase="Pending"))

    assert index.plan_binding("uid-e1", "n1").slot == 1, "what a restarted extender binds it to"
    assert "no slot of testbed tb is reserved for job j" in index.plan_binding("uid-e2", "n1").error
    bound = executor_pod("e1", phase="Running")
    assert bound.metadata is not None
    bound.metadata.annotations = {SLOT_ANNOTATION: "1"}
    view.pod_changed(bound)
    assert index.slot_of("uid-e1") == ("ns", "tb", 1)


def test_a_relist_keeps_executors_that_still_run() -> None:
    index = SlotIndex()
    view = IndexView(index)
    view.testbed_changed("ns", "tb", STATUS)
    assert gives(index, "e1") == 1

    view.pods_listed([executor_pod("e1", phase="Running")], index.bound_pods())

    assert index.slot_of("uid-e1") == ("ns", "tb", 1)


# --- the feed: list, then watch from the list's version ----------------------------------------------------


def served_testbed(name: str, status: dict[str, Any] | None = STATUS) -> Any:
    return TestbedResource(metadata=ObjectMeta(name=name, namespace="ns"), spec={}, status=status)


def feed_until(cluster: FakeCluster, index: SlotIndex, done: Callable[[], bool]) -> None:
    """Run a feed on ``cluster`` until ``done()`` holds (at most 5 s), then stop it."""
    feed = IndexFeed(cast(AsyncClient, cluster), index, min_backoff=0.001, max_backoff=0.01)
    virtual_time.run(running_until(feed, done))


async def running_until(feed: IndexFeed, done: Callable[[], bool]) -> None:
    task = asyncio.create_task(feed.run())
    try:
        async with asyncio.timeout(5):
            while not done():
                assert not task.done(), f"the feed stopped by itself: {task}"
                await asyncio.sleep(0.001)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def gone() -> ApiError:
    return ApiError(status=Status(code=410, reason="Expired", message="too old resource version: 10 (20)"))


def victims_of(index: SlotIndex, name: str) -> dict[int, str | None] | None:
    slots = index.slots("ns", name)
    return None if slots is None else {s.id: s.ghost_uid for s in slots}


def test_the_feed_watches_from_the_version_of_its_list() -> None:
    index = SlotIndex()
    cluster = FakeCluster(
        lists={TestbedResource: [([served_testbed("tb")], "10")], Pod: [([ghost("g-0", "u0")], "11")]},
        watches={
            TestbedResource: [[("ADDED", served_testbed("tb2")), ("DELETED", served_testbed("tb"))]],
            Pod: [[("ADDED", ghost("g-1", "u1", testbed="tb2"))]],
        },
    )

    feed_until(
        cluster, index, lambda: index.slots("ns", "tb") is None and victims_of(index, "tb2") == {0: None, 1: "u1"}
    )

    assert ("watch", "Testbed", "10") in cluster.calls
    assert ("watch", "Pod", "11") in cluster.calls


def test_the_feed_lists_again_when_its_watch_expired(caplog: pytest.LogCaptureFixture) -> None:
    index = SlotIndex()
    cluster = FakeCluster(
        lists={TestbedResource: [([served_testbed("tb")], "10"), ([], "30")], Pod: [([], "11")]},
        watches={TestbedResource: [gone()], Pod: []},
    )

    with caplog.at_level(logging.INFO):
        feed_until(cluster, index, lambda: cluster.count("watch", "Testbed") == 2)

    assert index.slots("ns", "tb") is None, "the relist did not drop the Testbed deleted while not watching"
    assert ("watch", "Testbed", "30") in cluster.calls
    assert "410 Gone" in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], "a routine expiry is no warning"


@pytest.mark.parametrize(
    "failure",
    [
        ApiError(status=Status(code=404, message="the server could not find the requested resource")),
        ApiError(status=Status(code=403, message="forbidden")),
        ConnectionResetError("connection reset by peer"),
    ],
    ids=["CRD not installed", "forbidden", "connection lost"],
)
def test_the_feed_keeps_trying_through_errors(failure: Exception, caplog: pytest.LogCaptureFixture) -> None:
    index = SlotIndex()
    cluster = FakeCluster(
        lists={TestbedResource: [failure, failure, ([served_testbed("tb")], "10")], Pod: [([], "11")]},
        watches={TestbedResource: [failure], Pod: [failure]},
    )

    with caplog.at_level(logging.WARNING):
        feed_until(cluster, index, lambda: index.slots("ns", "tb") is not None and cluster.count("list", "Pod") >= 2)

    assert cluster.count("list", "Testbed") >= 3
    assert "listing again" in caplog.text


# --- one Testbed stream for the whole process ---------------------------------------------------------------


def full_testbed(name: str, version: int) -> Any:
    return TestbedResource.from_dict(stored(testbed_manifest(), name, version) | {"status": STATUS})


def test_one_testbed_stream_feeds_the_cache_and_a_feed_that_joins_later() -> None:
    index, cache = SlotIndex(), ResourceCache()
    stream = Stream("testbeds", TestbedResource, joinable=True)
    stream.tell(cache.testbeds)  # as create_api_app does, before the process starts the stream
    cluster = FakeCluster(
        lists={TestbedResource: [([full_testbed("tb", 1)], "10")], Pod: [([ghost("g-0", "u0")], "11")]},
        watches={TestbedResource: [[("ADDED", full_testbed("tb2", 2))]], Pod: []},
    )
    client = cast(AsyncClient, cluster)

    async def run() -> None:
        async with streaming([stream], client, min_backoff=0.001, max_backoff=0.01):
            async with asyncio.timeout(5):
                while cache.testbeds.get("ns", "tb2") is None:
                    await asyncio.sleep(0.001)
            feed = IndexFeed(client, index, testbed_stream=stream, min_backoff=0.001, max_backoff=0.01)
            await running_until(
                feed, lambda: victims_of(index, "tb") == {0: "u0", 1: None} and index.slots("ns", "tb2") is not None
            )

    virtual_time.run(run())

    assert cluster.count("list", "Testbed") == 1, "the feed listed Testbeds itself"
    assert cluster.count("watch", "Testbed") == 1, "the feed watched Testbeds itself"
    assert [t.metadata.name for t in cache.testbeds.in_namespace("ns")] == ["tb", "tb2"]


def test_a_stream_that_is_not_joinable_refuses_a_consumer_once_it_has_listed() -> None:
    early, late = ResourceCache(), ResourceCache()
    stream = Stream("testbeds", TestbedResource)
    stream.tell(early.testbeds)
    cluster = FakeCluster(lists={TestbedResource: [([full_testbed("tb", 1)], "10")]}, watches={TestbedResource: []})

    async def run() -> None:
        async with streaming([stream], cast(AsyncClient, cluster), min_backoff=0.001, max_backoff=0.01):
            async with asyncio.timeout(5):
                while early.testbeds.get("ns", "tb") is None:
                    await asyncio.sleep(0.001)
            with pytest.raises(RuntimeError, match="not joinable"):
                stream.tell(late.testbeds)

    virtual_time.run(run())

    assert late.testbeds.get("ns", "tb") is None


def test_a_caller_cancelled_while_its_streams_stop_ends_cancelled() -> None:
    cluster = FakeCluster(lists={TestbedResource: [([full_testbed("tb", 1)], "10")]}, watches={TestbedResource: []})
    assert_caller_stays_cancelled(lambda: streaming([Stream("testbeds", TestbedResource)], cast(AsyncClient, cluster)))


# A table of six slots on n0/n1: some rows name their ghost, one names its executor, one names nobody.
TABLE = {
    "state": "InUse",
    "slots": [
        status_slot(0, 0, pod="tb-ghost-0"),
        status_slot(1, 1, "Reserved", job="j", pod="tb-ghost-1"),
        status_slot(2, 0, "Occupied", job="j", pod="exec-a"),
        status_slot(3, 1, "Reserved", job="k"),
        status_slot(4, 0),
        status_slot(5, 1, pod="tb-ghost-5"),
    ],
}
GhostEvent = tuple[bool, int, int, bool]  # (deleted, slot id, pod generation, on the slot's node)


def placed_ghost(slot: int, generation: int, on_its_node: bool) -> Pod:
    pod = ghost(f"tb-ghost-{slot}", f"u{slot}-{generation}")
    pod.spec = PodSpec(containers=[], nodeName=f"n{slot % 2 if on_its_node else (slot + 1) % 2}")
    return pod


@given(st.lists(st.tuples(st.booleans(), st.integers(0, 6), st.integers(0, 2), st.booleans()), max_size=25))
def test_a_ghost_event_joins_again_only_its_slots_and_agrees_with_a_full_join(events: list[GhostEvent]) -> None:
    index, listed = SlotIndex(), SlotIndex()
    view = IndexView(index)
    view.testbed_changed("ns", "tb", TABLE)
    current: dict[int, Pod] = {}
    for deleted, slot, generation, on_its_node in events:
        pod = placed_ghost(slot, generation, on_its_node)
        if deleted:
            view.pod_deleted(pod)
            if slot in current and current[slot].metadata.uid == pod.metadata.uid:  # type: ignore[union-attr]
                del current[slot]
        else:
            view.pod_changed(pod)
            current[slot] = pod
    full = IndexView(listed)
    full.testbed_changed("ns", "tb", TABLE)
    full.pods_listed(current.values(), frozenset())

    assert index.slots("ns", "tb") == listed.slots("ns", "tb")
