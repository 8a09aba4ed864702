"""The BatchJob lifecycle, decided from status and observation alone (the original's scenarios 1-2
re-expressed for this design, and its defects checked as fixed: docs/compatibility.md#runs)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import pytest

from esi.decisions.batchjob_lifecycle import (
    ApplicationPhase,
    ApplicationView,
    BatchJobDecision,
    BatchJobObservation,
    CreateApplication,
    DeleteApplication,
    Holder,
    Neighbour,
    decide_batchjob,
    slot_nodes,
    slots_listed,
)
from esi.decisions.events import Event
from esi.resources.batchjob import MAX_RUNS, BatchJobState, BatchJobStatus, RunOutcome
from esi.resources.meta import find_condition
from esi.resources.testbed import Slot, SlotState

T0 = datetime(2026, 1, 1, tzinfo=UTC)
HOLDER = Holder("sched-a", "tb", (0, 2))
QUEUED = Holder("sched-a", "tb")


def app(phase: ApplicationPhase, bound: int = 0, running: int = 0, nodes: tuple[str, ...] = ()) -> ApplicationView:
    return ApplicationView(
        phase, executors=max(bound, running), executors_bound=bound, executors_running=running, nodes=nodes
    )


def run(observations: Sequence[BatchJobObservation], status: BatchJobStatus | None = None) -> list[BatchJobDecision]:
    """Decide once per observation, a minute apart, feeding each status into the next decision."""
    decisions = []
    for i, observation in enumerate(observations):
        decision = decide_batchjob(status, observation, generation=1, now=T0 + timedelta(minutes=i))
        decisions.append(decision)
        status = decision.status
    return decisions


def states(decisions: Sequence[BatchJobDecision]) -> list[str]:
    return [d.status.state.value for d in decisions]


def test_spark_happy_path_from_ready_to_ready_again() -> None:
    decisions = run(
        [
            BatchJobObservation(None, None),
            BatchJobObservation(QUEUED, None),
            BatchJobObservation(HOLDER, None),
            BatchJobObservation(HOLDER, app(ApplicationPhase.PENDING)),
            BatchJobObservation(HOLDER, app(ApplicationPhase.PENDING, bound=2)),
            BatchJobObservation(
                HOLDER,
                app(ApplicationPhase.RUNNING, bound=2, running=2, nodes=("n0", "n0")),
                neighbours=(Neighbour("other", "n0"),),
            ),
            BatchJobObservation(HOLDER, app(ApplicationPhase.SUCCEEDED, bound=2, running=2)),
            BatchJobObservation(None, app(ApplicationPhase.SUCCEEDED)),
            BatchJobObservation(None, None, leftover_pods=1),
            BatchJobObservation(None, None),
        ]
    )

    assert states(decisions) == [
        "Ready",
        "Queued",
        "Submitted",
        "Submitted",
        "Scheduled",
        "Running",
        "Succeeded",
        "Releasing",
        "Releasing",
        "Ready",
    ]
    assert [d.actions for d in decisions] == [
        (),
        (),
        (CreateApplication("tb", (0, 2)),),
        (),
        (),
        (),
        (),
        (DeleteApplication(),),
        (),
        (),
    ]
    (record,) = decisions[-1].status.runs
    assert (record.scheduling, record.testbed, record.slots, record.nodes) == ("sched-a", "tb", [0, 2], ["n0"])
    assert record.colocated_jobs == ["other"]
    assert (record.start, record.end, record.outcome) == (
        T0 + timedelta(minutes=5),
        T0 + timedelta(minutes=6),
        RunOutcome.SUCCEEDED,
    )
    assert decisions[-1].status.scheduling is None
    assert decisions[-1].status.run_count == 1


def test_the_application_waits_until_the_testbed_lists_the_reserved_slots_as_the_jobs() -> None:
    decisions = run([BatchJobObservation(HOLDER, None, slots_listed=False), BatchJobObservation(HOLDER, None)])

    assert states(decisions) == ["Queued", "Submitted"]
    assert [d.actions for d in decisions] == [(), (CreateApplication("tb", (0, 2)),)]
    assert decisions[0].status.message == "slots 0, 2 reserved; waiting for testbed tb to list them as this job's"


def test_a_flink_application_is_deleted_once_its_run_is_recorded_and_the_job_stays_succeeded() -> None:
    def flink(phase: ApplicationPhase, running: int = 0) -> ApplicationView:
        return replace(app(phase, bound=running, running=running, nodes=("n0",) * running), lingers=True)

    decisions = run(
        [
            BatchJobObservation(HOLDER, None),
            BatchJobObservation(HOLDER, flink(ApplicationPhase.RUNNING, running=2)),
            BatchJobObservation(HOLDER, flink(ApplicationPhase.SUCCEEDED, running=2)),
            BatchJobObservation(HOLDER, flink(ApplicationPhase.SUCCEEDED, running=2)),  # the delete not seen yet
            BatchJobObservation(HOLDER, None),
            BatchJobObservation(None, None),
        ]
    )

    assert states(decisions) == ["Submitted", "Running", "Succeeded", "Succeeded", "Succeeded", "Ready"]
    assert [d.actions for d in decisions] == [
        (CreateApplication("tb", (0, 2)),),
        (),
        (DeleteApplication(),),
        (DeleteApplication(),),
        (),
        (),
    ]
    (record,) = decisions[-1].status.runs
    assert (record.outcome, record.nodes, record.end) == (RunOutcome.SUCCEEDED, ["n0"], T0 + timedelta(minutes=2))


@dataclass(frozen=True)
class Transitions:
    """Observations decided one after the other, and what each decision must be."""

    observations: tuple[BatchJobObservation, ...]
    states: tuple[str, ...]
    actions: tuple[tuple[CreateApplication | DeleteApplication, ...], ...]
    outcomes: tuple[RunOutcome, ...] = ()  # of the runs recorded at the end
    scheduling: str = "sched-a"  # the holder recorded at the end


CREATE = (CreateApplication("tb", (0, 2)),)
DELETE = (DeleteApplication(),)
RUNNING = app(ApplicationPhase.RUNNING, bound=2, running=2)

TRANSITIONS = {
    "an-application-is-not-running-until-every-executor-runs": Transitions(
        (
            BatchJobObservation(HOLDER, None),
            BatchJobObservation(HOLDER, app(ApplicationPhase.RUNNING, bound=2, running=1)),
        ),
        ("Submitted", "Scheduled"),
        (CREATE, ()),
    ),
    "a-submitted-application-not-visible-yet-is-created-again-not-failed": Transitions(
        (BatchJobObservation(HOLDER, None), BatchJobObservation(HOLDER, None)),
        ("Submitted", "Submitted"),
        (CREATE, CREATE),
    ),
    "an-application-deleted-while-running-is-a-failed-run-not-a-silent-rerun": Transitions(
        (
            BatchJobObservation(HOLDER, None),
            BatchJobObservation(HOLDER, RUNNING),
            BatchJobObservation(HOLDER, None),
            BatchJobObservation(HOLDER, None),
        ),
        ("Submitted", "Running", "Failed", "Failed"),
        (CREATE, (), (), ()),
        (RunOutcome.FAILED,),
    ),
    "release-while-running-cancels-the-run-and-removes-the-application": Transitions(
        (BatchJobObservation(HOLDER, None), BatchJobObservation(HOLDER, RUNNING), BatchJobObservation(None, RUNNING)),
        ("Submitted", "Running", "Releasing"),
        (CREATE, (), DELETE),
        (RunOutcome.CANCELLED,),
    ),
    "a-new-holder-waits-until-the-old-application-is-gone": Transitions(
        (
            BatchJobObservation(HOLDER, None),
            BatchJobObservation(Holder("sched-b", "tb", (1,)), app(ApplicationPhase.PENDING)),
            BatchJobObservation(Holder("sched-b", "tb", (1,)), None),
        ),
        ("Submitted", "Releasing", "Submitted"),
        (CREATE, DELETE, (CreateApplication("tb", (1,)),)),
        scheduling="sched-b",
    ),
    "a-finished-job-does-not-run-again-for-the-same-scheduling": Transitions(
        (
            BatchJobObservation(HOLDER, None),
            BatchJobObservation(HOLDER, app(ApplicationPhase.SUCCEEDED)),
            BatchJobObservation(HOLDER, None),
        ),
        ("Submitted", "Succeeded", "Succeeded"),
        (CREATE, (), ()),
        (RunOutcome.SUCCEEDED,),
    ),
}


@pytest.mark.parametrize("case", TRANSITIONS.values(), ids=TRANSITIONS.keys())
def test_transitions(case: Transitions) -> None:
    decisions = run(case.observations)

    assert states(decisions) == list(case.states)
    assert [d.actions for d in decisions] == list(case.actions)
    assert [r.outcome for r in decisions[-1].status.runs] == list(case.outcomes)
    assert decisions[-1].status.scheduling == case.scheduling


def test_completion_seen_straight_from_submitted_is_still_a_run() -> None:
    decisions = run(
        [
            BatchJobObservation(HOLDER, None),
            BatchJobObservation(HOLDER, app(ApplicationPhase.SUCCEEDED)),
        ]
    )

    assert states(decisions) == ["Submitted", "Succeeded"]
    (record,) = decisions[-1].status.runs
    assert record.start == T0, "the run starts at submission when Running was never observed"
    assert record.outcome == RunOutcome.SUCCEEDED


def test_a_driver_without_a_node_is_why_no_executor_is_placed() -> None:
    waiting = ApplicationView(ApplicationPhase.PENDING, waiting_for="driver j-driver unschedulable: 0/4 nodes fit")
    decisions = run([BatchJobObservation(HOLDER, None), BatchJobObservation(HOLDER, waiting)])

    assert decisions[-1].status.state == BatchJobState.SUBMITTED
    assert decisions[-1].status.message == "0 of 2 executors placed; driver j-driver unschedulable: 0/4 nodes fit"
    assert decisions[-1].status.waiting_for == "driver j-driver unschedulable: 0/4 nodes fit"


def test_an_application_failure_fails_the_job_with_the_operators_words() -> None:
    failed = ApplicationView(ApplicationPhase.FAILED, message="driver exited with code 1")
    decisions = run(
        [BatchJobObservation(HOLDER, None), BatchJobObservation(HOLDER, failed), BatchJobObservation(HOLDER, failed)]
    )

    assert decisions[-1].status.state == BatchJobState.FAILED
    assert decisions[-1].status.message == "driver exited with code 1", "the reason stays while the job is held"
    assert decisions[-1].status.runs[-1].outcome == RunOutcome.FAILED
    assert decisions[-1].status.runs[-1].reason == "driver exited with code 1", "the run keeps why it failed"


def test_a_cancelled_run_says_who_let_it_go_and_a_succeeded_one_gives_no_reason() -> None:
    cancelled = run(TRANSITIONS["release-while-running-cancels-the-run-and-removes-the-application"].observations)
    succeeded = run(TRANSITIONS["a-finished-job-does-not-run-again-for-the-same-scheduling"].observations)

    assert cancelled[-1].status.runs[-1].reason == "scheduling sched-a let the job go while it ran"
    assert succeeded[-1].status.runs[-1].reason is None


def test_a_retry_removes_the_failed_application_first_then_runs_again() -> None:
    failed = ApplicationView(ApplicationPhase.FAILED, message="executor lost")
    retry_waiting = Holder("sched-a", "tb", (), attempt=2)  # the Scheduling records run 2, slots not yet chosen
    retry = Holder("sched-a", "tb", (1, 3), attempt=2)
    decisions = run(
        [
            BatchJobObservation(HOLDER, None),
            BatchJobObservation(HOLDER, failed),
            BatchJobObservation(retry_waiting, failed, leftover_pods=1),
            BatchJobObservation(retry_waiting, None, leftover_pods=1),
            BatchJobObservation(retry_waiting, None),
            BatchJobObservation(retry, None),
            BatchJobObservation(retry, app(ApplicationPhase.SUCCEEDED)),
        ]
    )

    assert states(decisions) == ["Submitted", "Failed", "Failed", "Failed", "Queued", "Submitted", "Succeeded"]
    assert [d.status.attempt for d in decisions] == [1, 1, 1, 1, 2, 2, 2]
    assert decisions[2].actions == (DeleteApplication(),)
    assert decisions[3].actions == (), "nothing is created while pods of the failed run remain"
    assert decisions[5].actions == (CreateApplication("tb", (1, 3), attempt=2),)
    history = decisions[-1].status.runs
    assert [(r.attempt, r.slots, r.outcome) for r in history] == [
        (1, [0, 2], RunOutcome.FAILED),
        (2, [1, 3], RunOutcome.SUCCEEDED),
    ]


def test_an_application_found_without_a_recorded_submission_is_adopted() -> None:
    # The reconciler created it, then crashed before writing the status.
    (decision,) = run(
        [BatchJobObservation(HOLDER, app(ApplicationPhase.PENDING))],
        BatchJobStatus(state=BatchJobState.QUEUED, scheduling="sched-a"),
    )

    assert decision.status.state == BatchJobState.SUBMITTED
    assert decision.actions == ()


@pytest.mark.parametrize(
    "observation",
    [
        BatchJobObservation(None, None),
        BatchJobObservation(QUEUED, None),
        BatchJobObservation(HOLDER, app(ApplicationPhase.RUNNING, bound=2, running=2)),
        BatchJobObservation(None, app(ApplicationPhase.PENDING)),
    ],
    ids=["ready", "queued", "running", "releasing"],
)
def test_deciding_again_on_the_same_observation_changes_nothing(observation: BatchJobObservation) -> None:
    _, second = run([observation, observation])
    third = decide_batchjob(second.status, observation, generation=1, now=T0 + timedelta(minutes=1))

    assert third.status == second.status
    assert second.events == ()


def test_state_changes_are_events_and_conditions() -> None:
    decisions = run(
        [
            BatchJobObservation(HOLDER, None),
            BatchJobObservation(HOLDER, app(ApplicationPhase.FAILED)),
        ]
    )

    assert decisions[0].events == (Event("Submitted", "application created for slots 0, 2 of testbed tb"),)
    status = decisions[-1].status
    held, finished = find_condition(status.conditions, "Held"), find_condition(status.conditions, "Finished")
    assert held is not None
    assert finished is not None
    assert (held.status, held.reason) == ("True", "HeldByScheduling")
    assert (finished.status, finished.reason, finished.observed_generation) == ("True", "Failed", 1)
    assert held.last_transition_time == T0, "a condition's transition time moves only when its status does"


def test_the_run_history_is_bounded_but_counts_every_run() -> None:
    status = None
    for i in range(MAX_RUNS + 5):
        holder = Holder(f"sched-{i}", "tb", (0,))
        for observation in (
            BatchJobObservation(holder, None),
            BatchJobObservation(holder, app(ApplicationPhase.SUCCEEDED)),
            BatchJobObservation(None, None),
        ):
            status = decide_batchjob(status, observation, generation=1, now=T0).status

    assert status is not None
    assert len(status.runs) == MAX_RUNS
    assert status.run_count == MAX_RUNS + 5
    assert status.runs[-1].scheduling == f"sched-{MAX_RUNS + 4}"


STUCK = "executor j-exec-1 unschedulable: 0/3 nodes are available: 3 node(s) had untolerated taint(s)."


def decide_at(minutes: float, status: BatchJobStatus | None, application: ApplicationView | None) -> BatchJobDecision:
    return decide_batchjob(
        status,
        BatchJobObservation(HOLDER, application),
        generation=1,
        now=T0 + timedelta(minutes=minutes),
        stalled_after=timedelta(minutes=5),
    )


def stalled(decision: BatchJobDecision) -> tuple[str, str]:
    condition = find_condition(decision.status.conditions, "Stalled")
    assert condition is not None
    return condition.status.value, condition.message


def test_a_run_not_running_in_time_is_stalled_with_the_schedulers_words_once() -> None:
    waiting = ApplicationView(ApplicationPhase.PENDING, executors=2, waiting_for=STUCK)
    submitted = decide_at(0, None, None)
    assert submitted.decide_again_in == 300.0, "looked at again when the wait becomes a stall"

    early = decide_at(4, submitted.status, waiting)
    assert early.status.waiting_for == STUCK
    assert early.status.message == f"0 of 2 executors placed; {STUCK}"
    assert stalled(early) == ("False", "")
    assert early.decide_again_in == 60.0
    assert not any(e.reason == "Stalled" for e in early.events)

    late = decide_at(5, early.status, waiting)
    assert stalled(late) == ("True", f"not running 5 min after submission: {STUCK}")
    assert late.events == (Event("Stalled", f"not running 5 min after submission: {STUCK}", warning=True),)
    assert late.decide_again_in is None
    assert late.status.state == BatchJobState.SUBMITTED, "a stall changes no state: the wait may still end"

    again = decide_at(6, late.status, waiting)
    assert stalled(again)[0] == "True"
    assert again.events == (), "told once"

    running = decide_at(7, again.status, app(ApplicationPhase.RUNNING, bound=2, running=2))
    assert stalled(running) == ("False", "")
    assert running.status.waiting_for is None
    assert running.status.message == "running with 2 executors"


def test_a_stall_without_a_reason_from_the_cluster_says_what_esi_sees() -> None:
    placed = ApplicationView(ApplicationPhase.PENDING, executors=2, executors_bound=2)
    submitted = decide_at(0, None, None)
    late = decide_at(10, submitted.status, placed)

    assert late.status.state == BatchJobState.SCHEDULED
    assert stalled(late) == (
        "True",
        "not running 5 min after submission: all 2 executors placed, waiting for them to run",
    )


def test_waiting_for_slots_in_a_queue_is_no_stall_and_the_reason_goes_with_the_run() -> None:
    queued = decide_batchjob(None, BatchJobObservation(QUEUED, None), generation=1, now=T0)
    later = decide_batchjob(queued.status, BatchJobObservation(QUEUED, None), generation=1, now=T0 + timedelta(hours=1))
    assert stalled(later) == ("False", "")
    assert later.decide_again_in is None

    waiting = ApplicationView(ApplicationPhase.PENDING, executors=2, waiting_for=STUCK)
    stuck = decide_at(1, decide_at(0, None, None).status, waiting)
    released = decide_batchjob(stuck.status, BatchJobObservation(None, None), generation=1, now=T0)
    assert released.status.waiting_for is None
    assert stalled(released)[0] == "False"


def test_a_run_not_running_by_its_start_timeout_fails_with_the_reason_and_gives_its_slots_back() -> None:
    holder = Holder("sched-a", "tb", (0, 2), start_timeout=timedelta(minutes=10))
    waiting = ApplicationView(ApplicationPhase.PENDING, executors=2, waiting_for=STUCK)
    submitted = decide_batchjob(None, BatchJobObservation(holder, None), generation=1, now=T0)
    assert submitted.decide_again_in == 300.0, "first the stall"

    def at(minutes: float, status: BatchJobStatus) -> BatchJobDecision:
        return decide_batchjob(
            status, BatchJobObservation(holder, waiting), generation=1, now=T0 + timedelta(minutes=minutes)
        )

    stalled = at(6, submitted.status)
    assert stalled.status.state == BatchJobState.SUBMITTED
    assert stalled.decide_again_in == 240.0, "then the timeout"

    timed_out = at(10, stalled.status)
    why = f"not running 10 min after submission: {STUCK}"
    assert (timed_out.status.state, timed_out.status.message) == (BatchJobState.FAILED, why)
    assert timed_out.actions == (DeleteApplication(),), "its executors go, and its slots get their ghosts back"
    (run,) = timed_out.status.runs
    assert (run.outcome, run.start, run.end) == (RunOutcome.FAILED, T0, T0 + timedelta(minutes=10))
    assert Event("Failed", why, warning=True) in timed_out.events
    assert timed_out.decide_again_in is None

    without_timeout = decide_batchjob(
        stalled.status, BatchJobObservation(HOLDER, waiting), generation=1, now=T0 + timedelta(hours=5)
    )
    assert without_timeout.status.state == BatchJobState.SUBMITTED


def row(slot_id: int, node: str, job: str | None = "wordcount") -> Slot:
    """A row of the Testbed's slot table: ``slot_id`` on ``node``, reserved for ``job``."""
    return Slot(id=slot_id, node_name=node, node_id=0, position=0, state=SlotState.RESERVED, job=job)


@pytest.mark.parametrize(
    ("rows", "listed", "nodes"),
    [
        ([row(0, "n1"), row(3, "n0"), row(4, "n1")], True, ("n0", "n1")),
        ([row(0, "n1"), row(3, "n0", job="pagerank")], False, ("n0", "n1")),
        ([row(0, "n1"), None], False, ()),
        ([], True, ()),
    ],
    ids=["all the jobs", "one of another job", "one not listed", "no slots"],
)
def test_a_holders_slots_are_the_jobs_and_on_their_nodes_only_once_the_table_lists_them_all(
    rows: list[Slot | None], listed: bool, nodes: tuple[str, ...]
) -> None:
    assert slots_listed("wordcount", rows) is listed
    assert slot_nodes(rows) == nodes
