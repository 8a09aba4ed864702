"""The original's external JSON shapes (docs/compatibility.md#json-shapes), built from esi's resources and read back."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from esi.resources.batchjob import BatchJob
from esi.resources.scheduling import Scheduling, SchedulingSpec
from esi.resources.testbed import Testbed
from esi.wire.rest import (
    SchedulingSubmission,
    View,
    external_batchjob,
    external_scheduling,
    external_testbed,
    scheduling_spec,
    view_json,
)
from tests.builders import status_slot
from tests.manifests import batchjob_manifest, scheduling_manifest, slot_based, testbed_manifest

T0 = datetime(2026, 1, 1, tzinfo=UTC)
# A slot's fields in the original's JSON, every one written (docs/compatibility.md#json-shapes).
ORIGINAL_SLOT_FIELDS = (
    "state", "podName", "podUId", "nodeName", "nodeId", "slotPositionOnNode", "position", "reservedFor"
)  # fmt: skip


def with_meta(manifest: dict[str, Any], status: dict[str, Any] | None = None) -> dict[str, Any]:
    manifest = manifest | {"metadata": manifest["metadata"] | {"namespace": "ns"}}
    return manifest | ({"status": status} if status is not None else {})


def test_a_testbed_in_the_originals_shape_with_slots_by_node() -> None:
    status = {
        "state": "InUse",
        "slots": [status_slot(0, 0, "Free", pod="g0"), status_slot(1, 1, "Occupied", pod="e1", job="wc"),
                  status_slot(2, 0, "Free", noRoom="node n0 has 1 cpu and 1Gi memory: room for 1 of its 2 slots"),
                  status_slot(3, 1, "Reserved", job="wc")],
        "scheduling": "s",
    }  # fmt: skip
    view = external_testbed(Testbed.model_validate(with_meta(testbed_manifest(), status)))
    wire = view.model_dump(mode="json")

    assert (wire["state"], wire["esiState"], wire["numberOfNodes"], wire["numberOfSlotsPerNode"]) == (
        "RUNNING",
        "InUse",
        2,
        2,
    )
    assert [s["position"] for s in wire["slotsByNode"]["n0"]] == [0, 2]
    assert wire["slotsByNode"]["n1"][0] == {
        "state": "OCCUPIED",
        "podName": "e1",
        "podUId": None,
        "nodeName": "n1",
        "nodeId": 1,
        "slotPositionOnNode": 0,
        "position": 1,
        "reservedFor": "wc",
        "noRoom": None,
    }
    assert wire["slotsByNode"]["n0"][1]["noRoom"] == "node n0 has 1 cpu and 1Gi memory: room for 1 of its 2 slots"
    assert wire["heldBy"] == "s"
    assert [s.esi_state for s in view.slots_by_node["n1"]] == ["Occupied", "Reserved"], "esi's words for people"
    original = json.loads(view_json(view, View.ORIGINAL))
    assert [sorted(s) for s in original["slotsByNode"]["n0"]] == [sorted(ORIGINAL_SLOT_FIELDS)] * 2, "only its fields"


def test_a_testbed_without_slots_yet_is_empty_not_an_error() -> None:  # the original answered 500
    view = external_testbed(Testbed.model_validate(with_meta(testbed_manifest())))

    assert (view.state, view.number_of_nodes, view.slots_by_node) == ("INITIAL", 0, {})


def test_a_batchjob_with_its_runs_as_scheduled_events() -> None:
    runs = [
        {"scheduling": "s", "testbed": "tb", "slots": [0, 2], "nodes": ["n0"], "colocatedJobs": ["x"],
         "start": "2026-01-01T00:00:00Z", "end": "2026-01-01T00:01:00Z", "outcome": "Succeeded"},
        {"scheduling": "t", "attempt": 2, "testbed": "tb", "slots": [1], "start": "2026-01-01T01:00:00Z",
         "end": "2026-01-01T01:00:09Z", "outcome": "Cancelled", "reason": "scheduling t let the job go while it ran"},
        {"scheduling": "t", "attempt": 3, "testbed": "tb", "slots": [1], "start": "2026-01-01T02:00:00Z"},
    ]  # fmt: skip
    notes = {"profiler": [{"other": "12 (3)"}]}
    manifest = with_meta(batchjob_manifest(externalScheduler=notes), {"state": "Running", "runs": runs})
    wire = external_batchjob(BatchJob.model_validate(manifest)).model_dump(mode="json")

    assert (wire["name"], wire["state"], wire["esiState"]) == ("spark-crawler", "RunningState", "Running")
    assert wire["externalScheduler"] == notes
    first, second, third = wire["scheduledEvents"]
    assert (first["successful"], first["stop"], first["scheduling"]) == (
        True,
        "2026-01-01T00:01:00Z",
        {"name": "s", "namespace": "ns"},
    )
    assert (second["successful"], second["outcome"], second["reason"]) == (
        False,
        "Cancelled",
        "scheduling t let the job go while it ran",
    )
    assert (third["successful"], third["stop"], third["attempt"], third["outcome"]) == (None, None, 3, None), "running"
    assert (first["colocatedJobs"], first["testbed"], first["reason"]) == (["x"], "tb", None)


@pytest.mark.parametrize(
    ("esi_state", "jobs", "original"),
    [
        ("Pending", [], "AcquireState"),
        ("Running", [{"name": "a", "executors": 1, "state": "Waiting"}], "SubmissionState"),
        ("Running", [{"name": "a", "executors": 1, "state": "Running", "slots": [0]}], "AwaitingCompletionState"),
        ("Completed", [{"name": "a", "executors": 1, "state": "Succeeded", "slots": [0]}], "CompletedState"),
        ("Failed", [], "FailedState"),
    ],
)
def test_scheduling_states_in_the_originals_words(esi_state: str, jobs: list[dict[str, Any]], original: str) -> None:
    manifest = with_meta(scheduling_manifest(), {"state": esi_state, "jobs": jobs})
    view = external_scheduling(Scheduling.model_validate(manifest))

    assert (view.state, view.esi_state) == (original, esi_state)


def test_a_scheduling_reads_back_as_queue_or_slots_and_per_job_states() -> None:
    jobs = [
        {"name": "a", "executors": 2, "state": "Running", "slots": [0, 1]},
        {"name": "b", "executors": 1, "state": "Waiting"},
    ]
    queue = with_meta(scheduling_manifest(queueBased=[{"name": "a"}, {"name": "a"}, {"name": "b"}]))
    view = external_scheduling(Scheduling.model_validate(queue | {"status": {"state": "Running", "jobs": jobs}}))
    assert (view.test_bed, view.queue, view.slots) == ("profiler-testbed", ["a", "a", "b"], None)
    assert [(e.name, e.state) for e in view.job_status] == [("a", "Scheduled"), ("b", "InQueue")]
    assert [e.esi_state for e in view.job_status] == ["Running", "Waiting"], "esi's words for people"

    slots = with_meta(scheduling_manifest(queueBased=None, slotBased=slot_based(("a", [0, 2]), mode="relaxed")))
    wire = external_scheduling(Scheduling.model_validate(slots)).model_dump(mode="json")
    assert (wire["queue"], wire["slots"]) == (None, {"mode": "RELAXED", "jobs": [{"name": "a", "slots": [0, 2]}]})


@pytest.mark.parametrize("mode", ["STRICT", "strict", "RELAXED", "relaxed"])
def test_a_request_in_the_originals_shape_becomes_a_valid_spec(mode: str) -> None:
    request = SchedulingSubmission.model_validate(
        {"name": "s", "testBed": "tb", "state": "ignored", "jobStatus": [{"name": "x", "state": "Completed"}],
         "slots": {"mode": mode, "jobs": [{"name": "a", "slots": [0, 1]}]}}
    )  # fmt: skip
    spec = SchedulingSpec.model_validate(scheduling_spec(request))

    assert spec.slot_based is not None
    assert spec.slot_based.mode.value == mode.lower()
    queue = SchedulingSubmission.model_validate({"name": "s", "testBed": "tb", "queue": ["a", "a"]})
    assert [r.name for r in SchedulingSpec.model_validate(scheduling_spec(queue)).queue_based or []] == ["a", "a"]


@pytest.mark.parametrize(
    "sent",
    [
        # The original's client sends every field of its object, nulls included.
        {"name": "s", "state": None, "jobStatus": None, "testBed": "tb", "queue": ["a", "b"], "slots": None},
        # ... or sends back what it read, esi's own fields among them if it read esi's view.
        {"name": "s", "state": "AcquireState", "jobStatus": [{"name": "a", "state": "InQueue"}], "testBed": "tb",
         "queue": ["a", "b"], "slots": None, "namespace": "ns", "esiState": "Pending", "waitingFor": None},
        {"name": "s", "testBed": "tb", "queue": ["a", "b"]},
    ],
    ids=["nulls", "read back", "least"],
)  # fmt: skip
def test_a_request_may_carry_nulls_and_read_only_fields_which_are_ignored(sent: dict[str, Any]) -> None:
    spec = scheduling_spec(SchedulingSubmission.model_validate(sent))

    assert spec == {"testbed": {"name": "tb"}, "queueBased": [{"name": "a"}, {"name": "b"}]}


ONE_JOB = {"jobs": [{"name": "a", "slots": [0]}]}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"testBed": "tb", "queue": ["a"]}, "name"),
        ({"name": " ", "testBed": "tb", "queue": ["a"]}, "name"),
        ({"name": "s", "queue": ["a"]}, "testBed"),
        ({"name": "s", "testBed": "tb"}, ""),
        ({"name": "s", "testBed": "tb", "queue": ["a"], "slots": {"mode": "STRICT"} | ONE_JOB}, ""),
        ({"name": "s", "testBed": "tb", "slots": {"mode": "SOMETIMES"} | ONE_JOB}, "slots.mode"),
        ({"name": "s", "testBed": "tb", "slots": {"mode": "STRICT", "jobs": []}}, "slots.jobs"),
        ({"name": "s", "testBed": "tb", "slots": {"mode": "STRICT", "jobs": [{"name": "a", "slots": []}]}},
         "slots.jobs.0.slots"),
    ],
)  # fmt: skip
def test_an_invalid_request_is_refused_at_its_field(body: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as refused:
        SchedulingSubmission.model_validate(body)

    fields = {".".join(str(p) for p in e["loc"]) for e in refused.value.errors()}
    assert field in fields, fields


def test_views_carry_the_status_conditions() -> None:
    condition = {"type": "Completed", "status": "True", "reason": "AllSucceeded", "message": "2 of 2 jobs succeeded",
                 "lastTransitionTime": "2026-01-01T00:00:00Z"}  # fmt: skip
    scheduling = Scheduling.model_validate(
        with_meta(scheduling_manifest(), {"state": "Completed", "conditions": [condition]})
    )

    wire = external_scheduling(scheduling).model_dump(mode="json")

    assert [(c["type"], c["reason"]) for c in wire["conditions"]] == [("Completed", "AllSucceeded")]
