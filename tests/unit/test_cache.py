"""The API's watch cache and the STOMP notifications made from its changes, without a cluster."""

from __future__ import annotations

import json
from typing import Any

from api.cache import MEMO_LIMIT, Change, ResourceCache
from api.notifications import notifier
from esi.wire.rest import View
from tests.builders import stored
from tests.manifests import batchjob_manifest, scheduling_manifest, testbed_manifest


class Recorder:
    def __init__(self) -> None:
        self.changes: list[tuple[str, str, str]] = []
        self.published: list[tuple[str, str, Any]] = []
        self.published_esi: list[tuple[str, str, Any]] = []

    def __call__(self, change: Change) -> None:
        self.changes.append((change.kind, change.action, change.name))

    def publish(self, destination: str, body: bytes, namespace: str, view: View = View.ORIGINAL) -> None:
        if view is View.ORIGINAL:
            self.published.append((namespace, destination, json.loads(body)))
        else:
            self.published_esi.append((namespace, destination, json.loads(body)))


def test_objects_are_added_changed_and_deleted_with_one_change_each() -> None:
    cache, seen = ResourceCache(), Recorder()
    cache.listen(seen)

    cache.testbeds.observed(stored(testbed_manifest(), "tb", 1))
    cache.testbeds.observed(stored(testbed_manifest(slotsPerNode=3), "tb", 2))
    cache.testbeds.deleted(stored(testbed_manifest(), "tb", 3))

    assert seen.changes == [("testbeds", "ADDED", "tb"), ("testbeds", "MODIFIED", "tb"), ("testbeds", "DELETED", "tb")]
    assert cache.testbeds.get("ns", "tb") is None


def test_an_object_being_deleted_is_gone_for_readers_and_does_not_come_back() -> None:
    cache, seen = ResourceCache(), Recorder()
    cache.listen(seen)
    cache.schedulings.observed(stored(scheduling_manifest(), "s", 1))
    going = stored(scheduling_manifest(), "s", 2)
    going["metadata"] |= {"deletionTimestamp": "2026-11-28T19:00:00Z", "finalizers": ["esi.tu-berlin.de/release"]}

    cache.schedulings.observed(going)  # the API's own DELETE, or the watch after someone else's
    cache.schedulings.observed(going | {"metadata": going["metadata"] | {"resourceVersion": "3"}})

    assert cache.schedulings.get("ns", "s") is None
    assert seen.changes == [("schedulings", "ADDED", "s"), ("schedulings", "DELETED", "s")]


def test_an_older_version_never_replaces_a_newer_one() -> None:
    cache = ResourceCache()
    cache.jobs.observed(stored(batchjob_manifest(), "j", 7, state="Running"))  # e.g. the answer to a write

    lagging = cache.jobs.observed(stored(batchjob_manifest(), "j", 5, state="Ready"))  # the watch lagging
    same = cache.jobs.observed(stored(batchjob_manifest(), "j", 7, state="Running"))

    job = cache.jobs.get("ns", "j")
    assert job is not None
    assert job.status is not None
    assert job.status.state.value == "Running"
    assert same is job
    assert lagging is job, "an older version answers with the newer one the cache holds"


def test_a_list_is_the_whole_truth_and_marks_the_kind_synced() -> None:
    cache, seen = ResourceCache(), Recorder()
    cache.schedulings.observed(stored(scheduling_manifest(), "gone", 1))
    cache.listen(seen)
    assert cache.unsynced() == ["testbeds", "jobs", "schedulings"]

    cache.schedulings.listed([stored(scheduling_manifest(), "kept", 2)])

    assert [s.metadata.name for s in cache.schedulings.in_namespace("ns")] == ["kept"]
    assert seen.changes == [("schedulings", "ADDED", "kept"), ("schedulings", "DELETED", "gone")]
    assert cache.unsynced() == ["testbeds", "jobs"]


def test_an_object_esi_cannot_read_is_left_out_not_half_served() -> None:
    cache = ResourceCache()
    broken = stored(testbed_manifest(), "tb", 1)
    broken["spec"]["slotsPerNode"] = "many"

    assert cache.testbeds.observed(broken) is None
    assert cache.testbeds.get("ns", "tb") is None


def test_namespaces_are_kept_apart() -> None:
    cache = ResourceCache()
    cache.testbeds.observed(stored(testbed_manifest(), "tb", 1, namespace="a"))
    cache.testbeds.observed(stored(testbed_manifest(), "tb", 2, namespace="b"))

    assert [t.metadata.namespace for t in cache.testbeds.in_namespace("a")] == ["a"]
    assert cache.testbeds.get("c", "tb") is None


def test_each_change_goes_to_the_list_topic_by_name_and_to_the_objects_topic_in_full() -> None:
    cache, out = ResourceCache(), Recorder()
    cache.listen(notifier(out))

    cache.schedulings.observed(stored(scheduling_manifest(), "s", 1))

    assert out.published[0] == ("ns", "/topic/schedulings", {"action": "ADDED", "resource": "s"})
    namespace, destination, payload = out.published[1]
    assert (namespace, destination, payload["action"]) == ("ns", "/topic/schedulings/s", "ADDED")
    assert payload["resource"]["name"] == "s"
    assert payload["resource"]["testBed"] == "profiler-testbed"
    assert payload["resource"]["state"] == "AcquireState"


def test_a_write_the_external_view_does_not_show_is_not_announced() -> None:
    cache, out = ResourceCache(), Recorder()
    cache.listen(notifier(out))
    cache.jobs.observed(stored(batchjob_manifest(), "j", 1))
    before = len(out.published)

    cache.jobs.observed(stored(batchjob_manifest(), "j", 2, observedGeneration=3))  # not part of the view
    assert len(out.published) == before
    cache.jobs.observed(stored(batchjob_manifest(), "j", 3, state="Queued"))
    assert [(d, p["action"]) for _, d, p in out.published[before:]] == [
        ("/topic/jobs", "MODIFIED"),
        ("/topic/jobs/j", "MODIFIED"),
    ]
    cache.jobs.deleted(stored(batchjob_manifest(), "j", 4))
    assert out.published[-1][2]["action"] == "DELETED"


def test_each_view_hears_only_of_the_changes_it_shows() -> None:
    cache, out = ResourceCache(), Recorder()
    cache.listen(notifier(out))
    cache.schedulings.observed(stored(scheduling_manifest(), "s", 1))
    original, rich = len(out.published), len(out.published_esi)

    # waitingFor is esi's alone: the original's shape does not change
    cache.schedulings.observed(stored(scheduling_manifest(), "s", 2, waitingFor="slots for job a"))

    assert len(out.published) == original
    assert [(d, p["action"]) for _, d, p in out.published_esi[rich:]] == [
        ("/topic/schedulings", "MODIFIED"),
        ("/topic/schedulings/s", "MODIFIED"),
    ]
    assert out.published_esi[-1][2]["resource"]["waitingFor"] == "slots for job a"
    assert set(out.published[1][2]["resource"]) == {"name", "state", "jobStatus", "testBed", "queue", "slots"}


def test_a_memoised_answer_lasts_until_the_next_change() -> None:
    cache = ResourceCache()
    renders: list[int] = []

    def render() -> bytes:
        renders.append(len(cache.jobs.in_namespace("ns")))
        return str(renders[-1]).encode()

    assert cache.memo("jobs", render) == b"0"
    assert cache.memo("jobs", render) == b"0"
    cache.jobs.observed(stored(batchjob_manifest(), "j", 1))
    assert cache.memo("jobs", render) == b"1"
    assert renders == [0, 1]


def test_the_memo_stays_bounded_however_many_keys_are_asked_for() -> None:
    cache = ResourceCache()
    for key in range(MEMO_LIMIT + 10):
        cache.memo(key, lambda: b"x")

    assert len(cache._memo) <= MEMO_LIMIT
