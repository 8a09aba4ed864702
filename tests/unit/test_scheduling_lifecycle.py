"""A Scheduling's progress, decided from spec, status and observation alone.

Most tests run a small simulated world: one Testbed, BatchJobs whose applications come up, run for a
number of ticks and end, the BatchJob lifecycle deciding for each job, and claims granted all or nothing.
The Testbed's view of free slots lags behind: it shows executors a tick after they are placed and never
the Scheduling's own reservations, worse than a real Testbed status does. The original's
scheduling scenarios 7-12 (docs/compatibility.md#scenarios) are re-expressed on it, and its known defects
checked (docs/compatibility.md#queue-allocation, #reservations).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from esi.decisions.allocation import queue_problems
from esi.decisions.batchjob_lifecycle import (
    ApplicationPhase,
    ApplicationView,
    BatchJobObservation,
    CreateApplication,
    DeleteApplication,
    Holder,
    decide_batchjob,
)
from esi.decisions.events import Event
from esi.decisions.scheduling_lifecycle import (
    Claim,
    JobView,
    Release,
    SchedulingDecision,
    SchedulingObservation,
    TestbedView,
    decide_scheduling,
    holding,
    testbed_view,
)
from esi.decisions.wait_cycles import WaitCycle
from esi.resources.batchjob import BatchJobState, BatchJobStatus, RunOutcome
from esi.resources.meta import find_condition
from esi.resources.scheduling import JobState, SchedulingSpec, SchedulingState, SchedulingStatus
from esi.resources.testbed import TestbedStatus

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def queue(*jobs: str, testbed: str = "tb") -> SchedulingSpec:
    return SchedulingSpec.model_validate({"testbed": {"name": testbed}, "queueBased": [{"name": j} for j in jobs]})


def slots(mode: str, *jobs: tuple[str, list[int]]) -> SchedulingSpec:
    return SchedulingSpec.model_validate(
        {
            "testbed": {"name": "tb"},
            "slotBased": {"mode": mode, "jobs": [{"name": {"name": n}, "slotIds": ids} for n, ids in jobs]},
        }
    )


@dataclass
class App:
    slots: tuple[int, ...]
    age: int = 0
    finished: bool = False


@dataclass
class World:
    """A Testbed of ``size`` slots and jobs that run ``duration`` ticks once their executors are placed."""

    size: int
    durations: dict[str, int] = field(default_factory=dict)
    failing: set[str] = field(default_factory=set)
    fail_attempts: dict[str, int] = field(default_factory=dict)  # a job's runs up to this one fail
    jobs: set[str] = field(default_factory=set)
    testbed_exists: bool = True
    testbed_holder: str | None = None
    job_holders: dict[str, str] = field(default_factory=dict)
    batchjobs: dict[str, BatchJobStatus | None] = field(default_factory=dict)
    apps: dict[str, App] = field(default_factory=dict)
    schedulings: dict[str, tuple[SchedulingSpec, SchedulingStatus | None]] = field(default_factory=dict)
    shown_free: frozenset[int] = frozenset()  # what the Testbed status says: one tick behind
    tick: int = 0
    reservations: list[tuple[str, tuple[int, ...]]] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)  # every Scheduling's, in order

    def __post_init__(self) -> None:
        self.shown_free = frozenset(range(self.size))
        for job in self.jobs:
            self.batchjobs.setdefault(job, None)

    def add(self, name: str, spec: SchedulingSpec) -> None:
        self.schedulings[name] = (spec, None)

    def status(self, name: str) -> SchedulingStatus:
        status = self.schedulings[name][1]
        assert status is not None
        return status

    def occupied(self, min_age: int = 1) -> dict[int, str]:
        """Slots with an executor (placed ``min_age`` ticks ago or earlier), and whose; two in one slot fail."""
        where: dict[int, str] = {}
        for job, app in self.apps.items():
            if app.age >= min_age and not app.finished:
                for slot in app.slots:
                    assert slot not in where, f"slot {slot} used by {where[slot]} and {job}"
                    where[slot] = job
        return where

    def step(self) -> None:
        now = T0 + timedelta(seconds=self.tick)
        for name, (spec, status) in list(self.schedulings.items()):
            decision = decide_scheduling(spec, status, self.observe(), name=name, namespace="ns", generation=1, now=now)
            for action in decision.actions:
                self.act(name, action)
            self.events += decision.events
            for event in decision.events:
                if event.reason == "Reserved":
                    job = event.message.split()[1]
                    self.reservations.append(
                        (job, tuple(decision.status.jobs[[p.name for p in decision.status.jobs].index(job)].slots))
                    )
            self.schedulings[name] = (spec, decision.status)
        for job in sorted(self.jobs):
            job_decision = decide_batchjob(self.batchjobs[job], self.observe_job(job), generation=1, now=now)
            for act in job_decision.actions:
                if isinstance(act, CreateApplication) and job not in self.apps:
                    self.apps[job] = App(act.slots)
                elif isinstance(act, DeleteApplication):
                    self.apps.pop(job, None)
            self.batchjobs[job] = job_decision.status
        for job, app in self.apps.items():
            app.age += 1
            if app.age >= 2 + self.durations.get(job, 1):
                app.finished = True
        self.occupied()  # checks that no slot holds two executors
        # Worse than a real Testbed: it shows executors a tick late and never the Scheduling's reservations.
        self.shown_free = frozenset(range(self.size)) - set(self.occupied(min_age=2))
        self.tick += 1

    def observe(self) -> SchedulingObservation:
        testbed = TestbedView(frozenset(range(self.size)), self.shown_free, self.testbed_holder)
        views = {
            job: JobView(
                held_by=self.job_holders.get(job),
                scheduling=(s.scheduling if (s := self.batchjobs[job]) else None),
                state=(s.state if s else None),
                attempt=(s.attempt if s else None),
            )
            for job in self.jobs
        }
        return SchedulingObservation(testbed if self.testbed_exists else None, views)

    def observe_job(self, job: str) -> BatchJobObservation:
        holder_name = self.job_holders.get(job)
        holder = None
        if holder_name is not None:
            status = self.schedulings[holder_name][1]
            record = next((p for p in status.jobs if p.name == job), None) if status else None
            reserved = tuple(record.slots) if record and record.state != JobState.WAITING else ()
            holder = Holder(holder_name, "tb", reserved, record.attempt if record else 1)
        app = self.apps.get(job)
        if app is None:
            return BatchJobObservation(holder, None)
        n = len(app.slots)
        if app.finished:
            job_status = self.batchjobs[job]
            attempt = job_status.attempt if job_status is not None else 1
            fails = job in self.failing or attempt <= self.fail_attempts.get(job, 0)
            phase = ApplicationPhase.FAILED if fails else ApplicationPhase.SUCCEEDED
            return BatchJobObservation(holder, ApplicationView(phase))
        bound = n if app.age >= 1 else 0
        running = n if app.age >= 2 else 0
        phase = ApplicationPhase.RUNNING if running else ApplicationPhase.PENDING
        return BatchJobObservation(holder, ApplicationView(phase, n, bound, running))

    def act(self, name: str, action: Claim | Release) -> None:
        if isinstance(action, Claim):
            self.claim(name, action)
        else:
            for job in action.jobs:
                self.job_holders.pop(job, None)
            if action.testbed is not None:
                self.testbed_holder = None

    def claim(self, name: str, claim: Claim) -> None:
        holders = [self.testbed_holder, *(self.job_holders.get(j) for j in claim.jobs)]
        if all(h in (None, name) for h in holders):
            self.testbed_holder = name
            self.job_holders.update(dict.fromkeys(claim.jobs, name))

    def run(self, until: SchedulingState = SchedulingState.COMPLETED, name: str = "s", ticks: int = 200) -> None:
        for _ in range(ticks):
            self.step()
            if self.status(name).state == until:
                return
        raise AssertionError(f"not {until} after {ticks} ticks: {self.status(name).waiting_for}")

    def slots_of(self, job: str) -> list[tuple[int, ...]]:
        return [s for j, s in self.reservations if j == job]


def world(size: int, spec: SchedulingSpec, **kwargs: Any) -> World:
    jobs = {r.name for r in spec.queue_based or []} | {
        j.name.name for j in (spec.slot_based.jobs if spec.slot_based else [])
    }
    w = World(size, jobs=jobs, **kwargs)
    w.add("s", spec)
    return w


def test_both_jobs_fit_and_interleave_across_nodes() -> None:  # original 7 and 11
    w = world(4, queue("j2", "j1", "j2", "j1"))
    w.run()

    assert w.slots_of("j2") == [(0, 2)]
    assert w.slots_of("j1") == [(1, 3)]
    assert w.status("s").progress == "2/2"
    completed = find_condition(w.status("s").conditions, "Completed")
    assert completed is not None
    assert (completed.status, completed.reason) == ("True", "AllSucceeded")


def test_a_job_waits_for_slots_without_failing_or_overtaking() -> None:  # original 8
    w = world(4, queue("j1", "j1", "j1", "j2", "j2", "j2"), durations={"j1": 3})
    w.step()
    w.step()
    assert w.slots_of("j1") == [(0, 1, 2)]
    assert w.status("s").waiting_for == "slots for job j2 (it needs 3, 1 of the testbed's slots are free)"

    w.run()
    assert w.slots_of("j2") == [(0, 1, 2)]
    assert [e for e in w.events if e.reason == "Completed"] == [Event("Completed", "every job finished: 2 succeeded")]


def test_a_long_queue_on_two_nodes_runs_in_rounds() -> None:  # original 10
    w = world(4, queue("j2", "j1", "j2", "j1", "j3", "j3", "j3", "j4", "j4"))
    w.run()

    assert w.slots_of("j2") == [(0, 2)]
    assert w.slots_of("j1") == [(1, 3)]
    assert w.slots_of("j3") == [(0, 1, 2)]
    assert w.slots_of("j4") == [(0, 1)]
    order = [job for job, _ in w.reservations]
    assert order.index("j3") > max(order.index("j1"), order.index("j2"))
    assert order.index("j4") > order.index("j3")


def test_only_one_fits_on_one_node() -> None:  # original 12
    w = world(2, queue("j2", "j2", "j1", "j1"))
    w.step()
    w.step()
    assert w.slots_of("j2") == [(0, 1)]
    assert w.slots_of("j1") == []
    w.run()
    assert w.slots_of("j1") == [(0, 1)]


def test_a_to_b_to_a_on_two_free_slots_does_not_fail() -> None:  # original defect: "stays fulfilled" failure
    w = world(2, queue("a", "b", "a"))
    w.run()

    assert w.slots_of("b") == [(1,)]
    assert w.slots_of("a") == [(0, 1)]


def test_a_second_scheduling_waits_for_jobs_another_holds() -> None:  # original 9
    w = world(4, queue("j1", "j2"))
    w.jobs |= {"j3"}
    w.batchjobs["j3"] = None
    w.add("t", queue("j2", "j3"))
    w.run()

    second = w.status("t")
    assert second.state == SchedulingState.PENDING
    assert second.waiting_for == "testbed tb (held by scheduling s); job j2 (held by scheduling s) to be released"
    assert "j3" not in w.job_holders, "nothing is held by a Scheduling that cannot hold everything"


def test_a_failed_job_is_recorded_and_the_scheduling_goes_on() -> None:
    w = world(2, queue("bad", "good", "good"), failing={"bad"})
    w.run()

    states = {p.name: p.state for p in w.status("s").jobs}
    assert states == {"bad": JobState.FAILED, "good": JobState.SUCCEEDED}
    completed = find_condition(w.status("s").conditions, "Completed")
    assert completed is not None
    assert (completed.reason, completed.message) == ("JobsFailed", "failed: bad")
    completions = [e for e in w.events if e.reason == "Completed"]
    assert completions == [Event("Completed", "every job finished: 1 succeeded, 1 failed (bad)")]


def test_a_failed_job_runs_again_after_its_backoff_without_holding_up_the_others() -> None:
    spec = queue("flaky", "steady")
    w = world(1, spec, fail_attempts={"flaky": 1}, durations={"steady": 3})
    retried: list[str] = []
    for _ in range(200):
        w.step()
        status = w.status("s")
        record = next((p for p in status.jobs if p.name == "flaky"), None)
        if record is not None and record.retry_at is not None and not retried:
            retried.append(status.waiting_for or "")
            assert record.state == JobState.WAITING
            assert (record.attempt, record.slots) == (2, [])
        if status.state == SchedulingState.COMPLETED:
            break

    assert {p.name: (p.state, p.attempt) for p in w.status("s").jobs} == {
        "flaky": (JobState.SUCCEEDED, 2),
        "steady": (JobState.SUCCEEDED, 1),
    }
    # flaky's first run, then steady (which did not wait for flaky's backoff), then flaky's second run.
    assert w.reservations == [("flaky", (0,)), ("steady", (0,)), ("flaky", (0,))]
    assert retried[0].startswith("job flaky to run again (attempt 2) from "), retried
    runs = w.batchjobs["flaky"]
    assert runs is not None
    assert [(r.attempt, r.outcome) for r in runs.runs] == [(1, RunOutcome.FAILED), (2, RunOutcome.SUCCEEDED)]


def test_the_backoff_doubles_and_the_decision_says_when_to_look_again() -> None:
    spec = SchedulingSpec.model_validate(
        {"testbed": {"name": "tb"}, "queueBased": [{"name": "a"}], "retry": {"limit": 3, "backoffSeconds": 5}}
    )
    assert [spec.retry.delay(n) for n in (1, 2, 3)] == [5, 10, 20]
    w = world(1, spec, failing={"a"})
    waits: list[float] = []
    for _ in range(300):
        w.step()
        status = w.status("s")
        now = T0 + timedelta(seconds=w.tick - 1)
        decision = decide_scheduling(spec, status, w.observe(), name="s", namespace="ns", generation=1, now=now)
        if decision.decide_again_in is not None and (not waits or decision.decide_again_in > waits[-1]):
            waits.append(decision.decide_again_in)
        if status.state == SchedulingState.COMPLETED:
            break

    assert [p.attempt for p in w.status("s").jobs] == [4]
    assert w.status("s").jobs[0].state == JobState.FAILED
    assert waits == [5.0, 10.0, 20.0], "the first look-again after each failure is that failure's full backoff"


def test_strict_never_overtakes_relaxed_does() -> None:
    spec = [("a", [0, 1]), ("b", [1, 2]), ("c", [3])]
    strict = world(4, slots("strict", *spec), durations={"a": 4})
    relaxed = world(4, slots("relaxed", *spec), durations={"a": 4})
    for w in (strict, relaxed):
        w.step()
        w.step()

    assert [j for j, _ in strict.reservations] == ["a"]
    assert strict.status("s").waiting_for == "slots 1, 2 to be free for job b"
    assert [j for j, _ in relaxed.reservations] == ["a", "c"]
    strict.run()
    assert [j for j, _ in strict.reservations] == ["a", "b", "c"]


def test_jobs_appended_while_it_runs_are_scheduled_too() -> None:
    w = world(2, queue("j1"))
    w.jobs.add("j2")
    w.batchjobs["j2"] = None
    w.run()
    w.schedulings["s"] = (queue("j1", "j2", "j2"), w.status("s"))
    w.run()

    assert w.slots_of("j2") == [(0, 1)]
    assert w.slots_of("j1") == [(0,)], "a finished job does not run again"


def test_a_job_removed_before_it_started_is_let_go_and_never_runs() -> None:
    spec = queue("a", "a", "b", "b")
    observation = held({0, 1}, a=JobView(held_by="s"), b=JobView(held_by="s"))
    first = decide_scheduling(spec, None, observation, name="s", namespace="ns", generation=1, now=T0)
    assert [p.state for p in first.status.jobs] == [JobState.RESERVED, JobState.WAITING]

    edited = queue("a", "a", "c")  # b removed, c appended while a runs
    observation = held(set(), a=JobView(held_by="s"), b=JobView(held_by="s"), c=JobView())
    second = decide_scheduling(edited, first.status, observation, name="s", namespace="ns", generation=2, now=T0)

    assert [p.name for p in second.status.jobs] == ["a", "c"]
    assert second.actions == (Claim("tb", ("a", "c")), Release(("b",)))
    assert Event("Released", "b left the spec before starting") in second.events


def test_a_started_job_removed_from_the_spec_is_kept_and_held() -> None:
    spec = queue("a")
    observation = held({0, 1}, a=JobView(held_by="s"))
    first = decide_scheduling(spec, None, observation, name="s", namespace="ns", generation=1, now=T0)
    edited = queue("b")
    observation = held(set(), a=JobView(held_by="s"), b=JobView(held_by="s"))
    second = decide_scheduling(edited, first.status, observation, name="s", namespace="ns", generation=2, now=T0)

    assert [p.name for p in second.status.jobs] == ["b", "a"]
    assert not [a for a in second.actions if isinstance(a, Release)]


def test_a_testbed_without_slots_yet_is_waited_for_not_failed() -> None:
    spec = queue("a", "a")
    empty = SchedulingObservation(TestbedView(frozenset(), frozenset()), {"a": JobView()})
    decision = decide_scheduling(spec, None, empty, name="s", namespace="ns", generation=1, now=T0)

    assert (decision.status.state, decision.status.waiting_for) == (SchedulingState.PENDING, "testbed tb to have slots")
    assert decision.actions == ()


def test_a_queue_that_can_never_be_placed_fails_with_the_reason() -> None:
    w = world(4, queue("big", "big", "big", "big", "big"))
    w.step()

    status = w.status("s")
    assert status.state == SchedulingState.FAILED
    assert status.waiting_for is not None
    assert "needs 5 slots but testbed has 4" in status.waiting_for
    placeable = find_condition(status.conditions, "Placeable")
    assert placeable is not None
    assert (placeable.status, placeable.reason) == ("False", "Unplaceable")
    assert w.testbed_holder is None, "an unplaceable Scheduling holds nothing"


def test_a_job_that_can_never_run_in_the_testbeds_slots_fails_the_scheduling_before_any_attempt() -> None:
    spec = queue("small", "big", "small")
    seen = SchedulingObservation(
        TestbedView(frozenset(range(4)), frozenset(range(4))),
        {"small": JobView(), "big": JobView()},
        unrunnable={"big": "a TaskManager of 896 MiB cannot start"},
    )

    decision = decide_scheduling(spec, None, seen, name="s", namespace="ns", generation=1, now=T0)

    assert decision.status.state == SchedulingState.FAILED
    assert decision.actions == (), "it holds nothing, so no attempt starts"
    placeable = find_condition(decision.status.conditions, "Placeable")
    assert placeable is not None
    assert (placeable.status, placeable.reason) == ("False", "Unplaceable")
    assert placeable.message == "job big can never run in testbed tb's slots: a TaskManager of 896 MiB cannot start"
    assert [e.reason for e in decision.events] == ["Failed"]


@pytest.mark.parametrize(
    ("change", "waiting_for"),
    [
        (lambda w: setattr(w, "testbed_exists", False), "testbed tb to exist"),
        (lambda w: w.jobs.discard("j2"), "BatchJob j2 to exist"),
    ],
    ids=["testbed", "job"],
)
def test_missing_objects_keep_it_pending(change: Any, waiting_for: str) -> None:
    w = world(4, queue("j1", "j2"))
    change(w)
    w.step()

    assert w.status("s").state == SchedulingState.PENDING
    assert w.status("s").waiting_for == waiting_for


def test_references_to_other_namespaces_are_refused() -> None:
    spec = SchedulingSpec.model_validate(
        {"testbed": {"name": "tb", "namespace": "elsewhere"}, "queueBased": [{"name": "j"}]}
    )
    decision = decide_scheduling(
        spec, None, SchedulingObservation(None, {}), name="s", namespace="ns", generation=1, now=T0
    )

    assert decision.status.state == SchedulingState.FAILED
    assert decision.status.waiting_for is not None
    assert "elsewhere/tb" in decision.status.waiting_for


def held(free: set[int], size: int = 2, **jobs: JobView) -> SchedulingObservation:
    return SchedulingObservation(TestbedView(frozenset(range(size)), frozenset(free), "s"), jobs)


def test_a_job_waiting_for_slots_whose_room_other_pods_hold_says_so() -> None:
    crowded = SchedulingObservation(
        TestbedView(frozenset(range(3)), frozenset({0}), "s", no_room=frozenset({1, 2})), {"a": JobView(held_by="s")}
    )

    decision = decide_scheduling(queue("a", "a"), None, crowded, name="s", namespace="ns", generation=1, now=T0)

    assert decision.status.waiting_for == (
        "slots for job a (it needs 2, 1 of the testbed's slots are free; "
        "other pods hold the room of slots 1, 2 (see the testbed's slots))"
    )
    assert decision.status.jobs[0].state == JobState.WAITING


def test_deciding_again_with_a_lagging_testbed_reserves_nothing_twice() -> None:
    spec = queue("a", "b", "b")
    observation = held({0, 1}, a=JobView(held_by="s"), b=JobView(held_by="s"))
    first = decide_scheduling(spec, None, observation, name="s", namespace="ns", generation=1, now=T0)
    # The Testbed still shows slot 0 free: its status has not caught up with a's reservation.
    second = decide_scheduling(spec, first.status, observation, name="s", namespace="ns", generation=1, now=T0)

    assert [(p.name, p.state, p.slots) for p in first.status.jobs] == [
        ("a", JobState.RESERVED, [0]),
        ("b", JobState.WAITING, []),
    ]
    assert second.status == first.status, "b must not get slot 0, which a holds"
    assert second.events == ()


def test_a_batchjob_state_from_another_schedulings_run_is_not_taken_over() -> None:
    spec = queue("a")
    first = decide_scheduling(
        spec, None, held({0, 1}, a=JobView(held_by="s")), name="s", namespace="ns", generation=1, now=T0
    )
    # The BatchJob's status still describes its earlier run for scheduling t.
    stale = JobView(held_by="s", scheduling="t", state=BatchJobState.SUCCEEDED)
    second = decide_scheduling(spec, first.status, held({1}, a=stale), name="s", namespace="ns", generation=1, now=T0)

    assert second.status.jobs[0].state == JobState.RESERVED
    assert second.status.state == SchedulingState.RUNNING


def test_one_record_per_job_keeps_its_most_advanced_state() -> None:  # original 16
    spec = queue("a", "a")
    observation = held({0, 1}, a=JobView(held_by="s"))
    status = decide_scheduling(spec, None, observation, name="s", namespace="ns", generation=1, now=T0).status
    for reported in (BatchJobState.RUNNING, BatchJobState.SCHEDULED, BatchJobState.SUBMITTED):
        view = held(set(), a=JobView(held_by="s", scheduling="s", state=reported))
        status = decide_scheduling(spec, status, view, name="s", namespace="ns", generation=1, now=T0).status

    assert [(p.name, p.state, p.executors) for p in status.jobs] == [("a", JobState.RUNNING, 2)]
    assert SchedulingStatus.model_validate(status.to_json_dict()) == status


def test_the_testbed_view_takes_free_slots_from_the_slot_table() -> None:
    table = TestbedStatus.model_validate(
        {
            "slots": [
                {"id": i, "nodeName": f"n{i % 2}", "nodeId": i % 2, "position": i // 2, "state": state}
                for i, state in enumerate(["Free", "Reserved", "Occupied", "Free"])
            ]
            + [{"id": 4, "nodeName": "n0", "nodeId": 0, "position": 2, "state": "Free", "noRoom": "other pods …"}]
        }
    )

    view = testbed_view(table, "s")

    assert view == TestbedView(frozenset({0, 1, 2, 3, 4}), frozenset({0, 3}), "s", frozenset({4})), "no room in 4"
    assert testbed_view(None, None).slot_ids == frozenset()


@settings(max_examples=60, deadline=None)
@given(
    size=st.integers(1, 6),
    entries=st.lists(st.sampled_from("abcde"), min_size=1, max_size=10),
    durations=st.dictionaries(st.sampled_from("abcde"), st.integers(0, 4)),
    failing=st.sets(st.sampled_from("abcde")),
)
def test_every_placeable_queue_completes_without_double_booking(
    size: int, entries: list[str], durations: dict[str, int], failing: set[str]
) -> None:
    spec = queue(*entries)
    w = world(size, spec, durations=durations, failing=failing)
    if queue_problems(entries, frozenset(range(size))):
        w.step()
        assert w.status("s").state == SchedulingState.FAILED
        return
    w.run()  # occupied() asserts, every tick, that no slot holds two executors

    assert {p.name for p in w.status("s").jobs} == set(entries)
    runs = spec.retry.limit + 1
    for job in set(entries):
        assert len(w.slots_of(job)) == (runs if job in failing else 1), "a job runs once, a failing one until the limit"
        assert all(len(s) == entries.count(job) for s in w.slots_of(job)), "all its executors at once"


def test_a_started_job_held_up_outside_esi_is_what_the_scheduling_waits_for_and_its_stall_is_told() -> None:
    spec = queue("a", "b")
    stuck = "executor a-exec-1 unschedulable: 0/3 nodes are available: 3 node(s) were unschedulable."
    first = decide_scheduling(
        spec,
        None,
        held({0}, a=JobView(held_by="s"), b=JobView(held_by="s")),
        name="s",
        namespace="ns",
        generation=1,
        now=T0,
    )
    assert first.status.waiting_for == "slots for job b (it needs 1, 0 of the testbed's slots are free)"

    submitted = JobView(held_by="s", scheduling="s", state=BatchJobState.SUBMITTED, attempt=1, waiting_for=stuck)
    waiting = decide_scheduling(
        spec,
        first.status,
        held(set(), a=submitted, b=JobView(held_by="s")),
        name="s",
        namespace="ns",
        generation=1,
        now=T0,
    )
    assert waiting.status.waiting_for == f"job a: {stuck}", "the job holding the slots is why b waits"
    stalled_condition = find_condition(waiting.status.conditions, "Stalled")
    assert stalled_condition is not None
    assert stalled_condition.status.value == "False"

    why = f"not running 5 min after submission: {stuck}"
    stalled_view = JobView(
        held_by="s", scheduling="s", state=BatchJobState.SUBMITTED, attempt=1, waiting_for=stuck, stalled=why
    )
    observation = held(set(), a=stalled_view, b=JobView(held_by="s"))
    stalled = decide_scheduling(spec, waiting.status, observation, name="s", namespace="ns", generation=1, now=T0)
    condition = find_condition(stalled.status.conditions, "Stalled")
    assert condition is not None
    assert (condition.status.value, condition.reason, condition.message) == ("True", "JobStalled", f"job a {why}")
    assert Event("Stalled", f"job a {why}", warning=True) in stalled.events
    again = decide_scheduling(spec, stalled.status, observation, name="s", namespace="ns", generation=1, now=T0)
    assert not any(e.reason == "Stalled" for e in again.events), "told once"

    # A report about another Scheduling's run of the job is not this one's business.
    foreign = JobView(held_by="s", scheduling="t", state=BatchJobState.SUBMITTED, waiting_for=stuck, stalled=why)
    other = decide_scheduling(
        spec,
        waiting.status,
        held(set(), a=foreign, b=JobView(held_by="s")),
        name="s",
        namespace="ns",
        generation=1,
        now=T0,
    )
    assert other.status.waiting_for is not None
    assert not other.status.waiting_for.startswith("job a:")
    assert find_condition(other.status.conditions, "Stalled").status.value == "False"  # type: ignore[union-attr]


# --- cycles of Schedulings waiting on each other --------------------------------------------------------

CYCLE = WaitCycle(("s", "t"), (("s", ("job", "x"), "t"), ("t", ("job", "y"), "s")), frozenset({("job", "y")}))
TOLD = (
    "schedulings s -> t -> s wait on each other (s needs job x held by t, t needs job y held by s); "
    "s joined the cycle last and lets go of job y as soon as no run of its uses it"
)


def given_x_held_by_t(
    y: JobView, cycle: WaitCycle | None = CYCLE, free: frozenset[int] = frozenset()
) -> SchedulingObservation:
    """s holds its testbed and y, and was given job x, which t holds."""
    return SchedulingObservation(
        TestbedView(frozenset({0, 1}), frozenset(free), "s"), {"y": y, "x": JobView(held_by="t")}, cycle
    )


def decide_s(
    spec: SchedulingSpec, status: SchedulingStatus | None, observation: SchedulingObservation, at: int = 0
) -> Any:
    return decide_scheduling(
        spec, status, observation, name="s", namespace="ns", generation=1, now=T0 + timedelta(seconds=at)
    )


def test_the_scheduling_that_joined_a_cycle_last_lets_go_of_an_unstarted_job_and_is_told_once() -> None:
    waiting_y = decide_s(queue("y", "y"), None, given_x_held_by_t(JobView(held_by="s"), cycle=None)).status
    assert [p.state for p in waiting_y.jobs] == [JobState.WAITING]

    decision = decide_s(queue("y", "y", "x"), waiting_y, given_x_held_by_t(JobView(held_by="s")), at=1)

    assert decision.status.state == SchedulingState.PENDING
    assert decision.status.waiting_for == "job x (held by scheduling t) to be released"
    assert decision.actions == (Release(("y",)),)
    condition = find_condition(decision.status.conditions, "Deadlocked")
    assert condition is not None
    assert (condition.status.value, condition.reason, condition.message) == ("True", "WaitCycle", TOLD)
    assert Event("WaitCycle", TOLD, warning=True) in decision.events

    # y's hold is gone, so the cycle is too; s still waits for x and still says why it let go of y.
    after = decide_s(queue("y", "y", "x"), decision.status, given_x_held_by_t(JobView(), cycle=None), at=2)
    assert after.actions == ()
    assert not any(e.reason == "WaitCycle" for e in after.events), "told once"
    kept = find_condition(after.status.conditions, "Deadlocked")
    assert kept is not None
    assert (kept.status.value, kept.message) == ("True", TOLD)

    holding = SchedulingObservation(
        TestbedView(frozenset({0, 1}), frozenset(), "s"), {"y": JobView(held_by="s"), "x": JobView(held_by="s")}
    )
    again = decide_s(queue("y", "y", "x"), after.status, holding, at=3)
    assert again.status.state == SchedulingState.RUNNING
    assert find_condition(again.status.conditions, "Deadlocked").status.value == "False"  # type: ignore[union-attr]


def test_a_job_the_last_one_runs_is_let_go_only_once_its_run_ended_which_it_follows_while_waiting() -> None:
    reserved = decide_s(
        queue("y"), None, given_x_held_by_t(JobView(held_by="s"), cycle=None, free=frozenset({0}))
    ).status
    assert [(p.state, p.slots) for p in reserved.jobs] == [(JobState.RESERVED, [0])]
    running = JobView(held_by="s", scheduling="s", state=BatchJobState.RUNNING, attempt=1)

    in_use = decide_s(queue("y", "x"), reserved, given_x_held_by_t(running), at=1)

    assert in_use.actions == (), "a job whose run holds slots is in use"
    assert [(p.name, p.state) for p in in_use.status.jobs] == [("y", JobState.RUNNING), ("x", JobState.WAITING)]
    assert find_condition(in_use.status.conditions, "Deadlocked").status.value == "True"  # type: ignore[union-attr]

    succeeded = JobView(held_by="s", scheduling="s", state=BatchJobState.SUCCEEDED, attempt=1)
    ended = decide_s(queue("y", "x"), in_use.status, given_x_held_by_t(succeeded), at=2)

    assert [(p.name, p.state) for p in ended.status.jobs] == [("y", JobState.SUCCEEDED), ("x", JobState.WAITING)]
    assert ended.actions == (Release(("y",)),)
    assert Event("JobSucceeded", "job y succeeded") in ended.events


def test_the_testbed_is_let_go_when_the_cycle_needs_it_and_no_job_uses_slots() -> None:
    cycle = WaitCycle(
        ("s", "t"), (("s", ("job", "x"), "t"), ("t", ("testbed", "tb"), "s")), frozenset({("testbed", "tb")})
    )
    waiting_y = decide_s(queue("y"), None, given_x_held_by_t(JobView(held_by="s"), cycle=None)).status

    decision = decide_s(queue("y", "x"), waiting_y, given_x_held_by_t(JobView(held_by="s"), cycle=cycle), at=1)

    assert decision.actions == (Release((), "tb"),)


def test_a_member_of_a_cycle_that_did_not_join_it_last_keeps_what_it_holds() -> None:
    waiting_y = decide_s(queue("y"), None, given_x_held_by_t(JobView(held_by="s"), cycle=None)).status
    cycle = WaitCycle(("t", "s"), (("t", ("job", "y"), "s"), ("s", ("job", "x"), "t")), frozenset({("job", "x")}))

    decision = decide_s(queue("y", "x"), waiting_y, given_x_held_by_t(JobView(held_by="s"), cycle=cycle), at=1)

    assert decision.actions == ()
    assert find_condition(decision.status.conditions, "Deadlocked").status.value == "False"  # type: ignore[union-attr]


def test_a_claim_taken_is_decided_again_at_once_into_reserved_slots() -> None:
    spec = queue("a", "a", "b")
    seen = SchedulingObservation(
        TestbedView(frozenset(range(4)), frozenset(range(4))), {"a": JobView(), "b": JobView(), "c": JobView("t")}
    )

    def decide(observation: SchedulingObservation) -> SchedulingDecision:
        return decide_scheduling(spec, None, observation, name="s", namespace="ns", generation=1, now=T0)

    first = decide(seen)
    assert first.actions == (Claim("tb", ("a", "b")),)
    assert first.status.state == SchedulingState.PENDING

    held = holding(seen, Claim("tb", ("a", "b")), "s")
    assert held.testbed == TestbedView(frozenset(range(4)), frozenset(range(4)), "s")
    assert {job: view.held_by for job, view in held.jobs.items()} == {"a": "s", "b": "s", "c": "t"}
    again = decide(held)
    assert again.actions == ()
    assert again.status.state == SchedulingState.RUNNING
    assert {p.name: (p.state, tuple(p.slots)) for p in again.status.jobs} == {
        "a": (JobState.RESERVED, (0, 1)),
        "b": (JobState.RESERVED, (2,)),
    }
    assert [e.reason for e in again.events].count("Reserved") == 2
