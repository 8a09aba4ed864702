"""Facts every component reads the same way: which job states hold slots, which pod is an executor, which slot a
pod carries, the API version the models spell, and how severe each decided Event is."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, get_args

import pytest

from esi.decisions.batchjob_lifecycle import (
    ApplicationPhase,
    ApplicationView,
    BatchJobObservation,
    Holder,
    decide_batchjob,
)
from esi.decisions.events import Event
from esi.decisions.scheduling_lifecycle import SchedulingObservation, TestbedView, decide_scheduling
from esi.decisions.testbed_lifecycle import NodeView, Resources, TestbedObservation, decide_testbed
from esi.objects.names import (
    ROLE_EXECUTOR,
    ROLE_GHOST,
    ROLE_LABEL,
    SLOT_ANNOTATION,
    TESTBED_LABEL,
    is_executor,
    slot_of,
    testbed_of,
)
from esi.resources.batchjob import BatchJob, BatchJobState
from esi.resources.meta import API_VERSION, GROUP, VERSION, PodRole, state_named
from esi.resources.quantity import Quantity
from esi.resources.scheduling import JobState, Scheduling, SchedulingSpec, SchedulingState
from esi.resources.testbed import Testbed, TestbedSpec, TestbedState

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize("model", [Testbed, BatchJob, Scheduling])
def test_the_models_spell_the_api_version_esi_serves(model: Any) -> None:
    assert f"{GROUP}/{VERSION}" == API_VERSION
    assert get_args(model.model_fields["api_version"].annotation) == (API_VERSION,)


def test_a_job_holds_its_slots_from_their_reservation_until_it_finishes() -> None:
    assert {s for s in JobState if s.holds_slots} == {JobState.RESERVED, JobState.SUBMITTED, JobState.RUNNING}
    assert {s for s in JobState if s.allocated} == set(JobState) - {JobState.WAITING}
    assert {s for s in JobState if s.queued} == {JobState.WAITING, JobState.RESERVED}
    assert {s for s in JobState if s.finished} == {JobState.SUCCEEDED, JobState.FAILED}


def test_a_batchjob_run_is_under_way_from_submission_until_it_ends() -> None:
    active = {BatchJobState.SUBMITTED, BatchJobState.SCHEDULED, BatchJobState.RUNNING}
    assert {s for s in BatchJobState if s.active} == active
    assert {s for s in BatchJobState if s.finished} == {BatchJobState.SUCCEEDED, BatchJobState.FAILED}


@pytest.mark.parametrize(
    ("states", "value", "state"),
    [
        (JobState, "Reserved", JobState.RESERVED),
        (JobState, "Running", JobState.RUNNING),
        (JobState, "", None),
        (JobState, None, None),
        (JobState, "reserved", None),
        (JobState, "Queued", None),
        (BatchJobState, "Queued", BatchJobState.QUEUED),
        (BatchJobState, 3, None),
    ],
    ids=["reserved", "running", "empty", "absent", "other-case", "another-kinds-state", "batchjob", "not-a-string"],
)
def test_a_raw_status_field_reads_as_a_state_or_none(states: Any, value: object, state: object) -> None:
    assert state_named(states, value) == state


@pytest.mark.parametrize(
    ("labels", "executor"),
    [
        ({ROLE_LABEL: ROLE_EXECUTOR}, True),
        ({ROLE_LABEL: ROLE_GHOST}, False),
        ({}, False),
        ({"role": "executor"}, False),
    ],
    ids=["executor", "ghost", "unlabelled", "foreign-label"],
)
def test_an_executor_is_what_esi_labels_one(labels: dict[str, str], executor: bool) -> None:
    assert is_executor(labels) is executor


def test_the_role_label_says_each_pod_role_and_only_a_ghost_or_an_executor_belongs_to_a_testbed() -> None:
    assert {ROLE_GHOST, ROLE_EXECUTOR} == {role.value for role in PodRole}
    for role in PodRole:
        labels = {ROLE_LABEL: role.value, TESTBED_LABEL: "tb"}
        assert testbed_of(labels) == "tb"
        assert is_executor(labels) is (role == PodRole.EXECUTOR)
    assert testbed_of({ROLE_LABEL: "driver", TESTBED_LABEL: "tb"}) is None


@pytest.mark.parametrize(
    ("value", "slot"),
    [("0", 0), ("17", 17), ("", None), ("-1", None), ("1.5", None), ("x", None), ("²", None), ("٣", None)],
)
def test_a_slot_annotation_reads_as_a_slot_id_or_none(value: str, slot: int | None) -> None:
    assert slot_of({SLOT_ANNOTATION: value}) == slot


def test_an_events_type_is_its_severity() -> None:
    assert Event("Ready", "fine").type == "Normal"
    assert Event("SlotShared", "two in one slot", warning=True).type == "Warning"


# --- the severity of each decided Event: a Warning when something is wrong, only then ---------------------


def test_a_testbeds_problems_are_warnings_its_state_changes_are_not() -> None:
    spec = TestbedSpec.model_validate(
        {"nodeLabel": "l", "slotsPerNode": 1, "resourcesPerSlot": {"cpu": "1", "memory": "1Gi"}}
    )
    nodes = [NodeView("a", {"l": "one"}, Resources(Quantity("4"), Quantity("8Gi")))]

    decision = decide_testbed(spec, None, TestbedObservation(nodes, []), generation=1, now=T0)

    assert decision.status.state == TestbedState.DEGRADED
    assert {(e.reason, e.type) for e in decision.events} == {("Degraded", "Normal"), ("NodeLabelInvalid", "Warning")}


def test_a_scheduling_that_fails_warns() -> None:
    spec = SchedulingSpec.model_validate({"testbed": {"name": "tb"}, "queueBased": [{"name": "j"}] * 3})
    observation = SchedulingObservation(TestbedView(frozenset({0, 1}), frozenset({0, 1})), {})

    decision = decide_scheduling(spec, None, observation, name="s", namespace="ns", generation=1, now=T0)

    assert decision.status.state == SchedulingState.FAILED
    assert [e.type for e in decision.events] == ["Warning"]


@pytest.mark.parametrize(
    ("phase", "warned"), [(ApplicationPhase.FAILED, True), (ApplicationPhase.SUCCEEDED, False)], ids=["failed", "done"]
)
def test_a_batchjob_warns_when_its_run_fails(phase: ApplicationPhase, warned: bool) -> None:
    observation = BatchJobObservation(Holder("s", "tb", (0,)), ApplicationView(phase))

    decision = decide_batchjob(None, observation, generation=1, now=T0)

    assert [e.warning for e in decision.events] == [warned]
