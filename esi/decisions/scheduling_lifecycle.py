"""A Scheduling's progress as one pure function: (spec, status, what is observed now) -> (status, actions).

The Scheduling reconciler observes its Testbed (slot ids, which slots are free, who holds it) and its
BatchJobs (who holds each, and each one's state); ``decide_scheduling`` returns the next status and the
actions to take. The status is the durable record of every decision: when slots are chosen for a job they
are written into ``status.jobs[].slots`` at once, and every other reader (the BatchJob reconciler, the
Testbed reconciler, the extender, the API) takes them as reserved from that moment. There is no separate
confirmation round and no timeout waiting for a Testbed to catch up
(docs/design.md#reservations-recorded-at-decision-time).

::

    Pending ──holds testbed and all jobs──▶ Running ──every job finished──▶ Completed
       ▲ (the testbed or a job is missing or held by another Scheduling)
    Failed: the spec can never be placed on this testbed (a job needs more slots than there are, a slot
            that does not exist, a queue that would deadlock); changing the spec re-evaluates it.

The reconciler decides again at once on the holds it has just taken (``holding``): a Scheduling whose holds are
free goes from nothing to Running in one status write.

A job that fails does not stop the Scheduling: its run is recorded as failed and the others go on.
Jobs appended to the spec while it runs are scheduled too (online scheduling); jobs removed from the
spec before they started are dropped, those that started are kept in the record. While it waits to hold
what it needs, the jobs it started are still followed. When Schedulings wait on each other in a cycle
(``esi.decisions.wait_cycles``), the one that joined the cycle last is told (condition ``Deadlocked``) and
lets go of what the others need that it does not use: jobs that hold no slots for it, and its Testbed when
none of its jobs does.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from esi.decisions.allocation import Allocation, queue_allocations, queue_problems, slot_allocations, slot_problems
from esi.decisions.events import Event
from esi.decisions.wait_cycles import Held, WaitCycle
from esi.resources.batchjob import BatchJobState
from esi.resources.meta import ConditionStatus, find_condition, set_conditions
from esi.resources.scheduling import (
    JobProgress,
    JobState,
    RetryPolicy,
    SchedulingSpec,
    SchedulingState,
    SchedulingStatus,
)
from esi.resources.testbed import SlotState, TestbedStatus

__all__ = [
    "Claim",
    "JobView",
    "Release",
    "SchedulingDecision",
    "SchedulingObservation",
    "TestbedView",
    "decide_scheduling",
    "holding",
    "needs",
    "spec_problems",
    "testbed_view",
    "unrunnable_problem",
    "waiting_since",
]

# Slot ids named in a waiting message; the rest are counted.
_SHOWN_SLOTS = 12

# How far a job got; a report never moves a job back (one record per job, always its most advanced state).
_RANK = {
    JobState.WAITING: 0,
    JobState.RESERVED: 1,
    JobState.SUBMITTED: 2,
    JobState.RUNNING: 3,
    JobState.SUCCEEDED: 4,
    JobState.FAILED: 4,
}
_FROM_BATCHJOB = {
    BatchJobState.SUBMITTED: JobState.SUBMITTED,
    BatchJobState.SCHEDULED: JobState.SUBMITTED,
    BatchJobState.RUNNING: JobState.RUNNING,
    BatchJobState.SUCCEEDED: JobState.SUCCEEDED,
    BatchJobState.FAILED: JobState.FAILED,
}


@dataclass(frozen=True)
class TestbedView:
    __test__ = False  # not a pytest test class, despite the name

    slot_ids: frozenset[int]
    free: frozenset[int]  # slots nobody has reserved, with their room (no other pods hold it)
    held_by: str | None = None
    no_room: frozenset[int] = frozenset()  # slots whose room other pods on their nodes hold


def testbed_view(status: TestbedStatus | None, held_by: str | None) -> TestbedView:
    """What a Scheduling needs of its Testbed, from the Testbed's published slot table."""
    slots = status.slots if status is not None else []
    free = frozenset(s.id for s in slots if s.state == SlotState.FREE and s.no_room is None)
    no_room = frozenset(s.id for s in slots if s.no_room is not None)
    return TestbedView(frozenset(s.id for s in slots), free, held_by, no_room)


@dataclass(frozen=True)
class JobView:
    held_by: str | None = None  # the Scheduling holding the BatchJob
    scheduling: str | None = None  # the Scheduling its status (state) refers to
    state: BatchJobState | None = None
    message: str | None = None
    attempt: int | None = None  # the run its state is about
    waiting_for: str | None = None  # what holds its run up, as the scheduler or kubelet said
    stalled: str = ""  # why its run is Stalled (its condition's message); "" when it is not


@dataclass(frozen=True)
class SchedulingObservation:
    testbed: TestbedView | None  # None: the Testbed does not exist
    jobs: Mapping[str, JobView]  # by BatchJob name; a name that is missing does not exist
    cycle: WaitCycle | None = None  # the cycle of waits the Scheduling is part of
    # Why no run of a job could start in the testbed's slots (esi.objects.applications.run_problem), by job name;
    # a job not in it can run there, or is not known yet.
    unrunnable: Mapping[str, str] = field(default_factory=dict)


def holding(observation: SchedulingObservation, claim: Claim, name: str) -> SchedulingObservation:
    """What Scheduling ``name`` observes once its ``claim`` is taken: the testbed and the claimed jobs held by
    it. The reconciler decides again on this at once, rather than after its own holds come back to it as
    events: one status write, and the slots reserved a round trip sooner."""
    testbed = None if observation.testbed is None else replace(observation.testbed, held_by=name)
    jobs = {job: replace(view, held_by=name) if job in claim.jobs else view for job, view in observation.jobs.items()}
    return replace(observation, testbed=testbed, jobs=jobs)


def needs(spec: SchedulingSpec) -> frozenset[Held]:
    """What a Scheduling must hold to place its jobs: its Testbed and every job of its spec."""
    return frozenset({("testbed", spec.testbed.name), *(("job", job) for job in _demand(spec))})


def waiting_since(status: SchedulingStatus | None) -> datetime | None:
    """When the Scheduling began to wait for what it needs (its Holding condition turned False); None when it
    holds everything, or has no such record."""
    holding = find_condition(status.conditions, "Holding") if status is not None else None
    if holding is None or holding.status != ConditionStatus.FALSE:
        return None
    return holding.last_transition_time


@dataclass(frozen=True)
class Claim:
    """Hold the testbed and all these jobs, all or nothing (the reconciler rolls back a partial claim)."""

    testbed: str
    jobs: tuple[str, ...]


@dataclass(frozen=True)
class Release:
    """Let go of these jobs, and of the testbed if named (the reconciler deletes their holds): jobs that left the
    spec before they started, or what others in a cycle of waits need."""

    jobs: tuple[str, ...]
    testbed: str | None = None


@dataclass(frozen=True)
class SchedulingDecision:
    status: SchedulingStatus
    actions: tuple[Claim | Release, ...] = ()
    events: tuple[Event, ...] = field(default=())
    decide_again_in: float | None = None  # seconds until a failed job's backoff ends, if one waits


def decide_scheduling(
    spec: SchedulingSpec,
    status: SchedulingStatus | None,
    observation: SchedulingObservation,
    *,
    name: str,
    namespace: str,
    generation: int | None,
    now: datetime,
) -> SchedulingDecision:
    """The next status of the Scheduling ``namespace/name`` and the claim to make, if any."""
    current = status or SchedulingStatus()
    verdict = _decide(spec, current, observation, name=name, namespace=namespace, now=now)
    return _render(verdict, current, testbed=spec.testbed.name, generation=generation, now=now)


@dataclass(frozen=True)
class _Verdict:
    """What one decision changes, before it is written as a status."""

    state: SchedulingState
    waiting_for: str | None
    jobs: list[JobProgress]
    problems: list[str]  # why the spec can never be placed (state Failed)
    actions: list[Claim | Release]
    events: list[Event]  # besides the change of state, which rendering tells
    stalled: str = ""  # which of its jobs' runs are Stalled, and why; "" when none is
    deadlocked: str = ""  # the cycle of waits it let go of things for; "" when none


def _decide(
    spec: SchedulingSpec,
    current: SchedulingStatus,
    observation: SchedulingObservation,
    *,
    name: str,
    namespace: str,
    now: datetime,
) -> _Verdict:
    """What changes: the job records, the state and what it waits for, the holds to take or let go."""
    demand = _demand(spec)
    jobs = _progress(current.jobs, demand, now)
    problems = spec_problems(spec, observation.testbed, namespace, observation.unrunnable)
    events: list[Event] = []
    actions: list[Claim | Release] = []
    waiting_for: str | None
    stalled = ""
    testbed = observation.testbed
    deadlocked = ""
    waiting = _waiting_to_hold(spec, observation, demand, problems, name)
    if waiting is not None:
        state, waiting_for = waiting
        jobs, events = _follow_jobs(jobs, observation.jobs, name, spec.retry, now)
        deadlocked = _deadlocked(current, observation.cycle, name)
        letting_go = _let_go(observation.cycle, jobs, observation, spec.testbed.name, name)
        if letting_go is not None:
            actions.append(letting_go)
    elif not _holds_all(observation, demand, name):
        actions.append(Claim(spec.testbed.name, tuple(demand)))
        state, waiting_for = SchedulingState.PENDING, f"its hold on testbed {spec.testbed.name} and its jobs"
    else:
        assert testbed is not None  # _waiting_to_hold waits for it
        jobs, events = _run_jobs(spec, jobs, testbed, observation.jobs, name=name, now=now)
        state, waiting_for = _running(spec, jobs, testbed, observation.jobs, name)
        stalled = _stalled(jobs, observation.jobs, name)
    release = _release(observation, demand, jobs, name)
    if release is not None:
        actions.append(release)
        events.append(Event("Released", f"{_names(release.jobs)} left the spec before starting"))
    return _Verdict(state, waiting_for, jobs, problems, actions, events, stalled, deadlocked)


def _deadlocked(current: SchedulingStatus, cycle: WaitCycle | None, name: str) -> str:
    """Why this waiting Scheduling let go of things (it joined a cycle of waits last), until it holds all again."""
    if cycle is not None and cycle.last == name:
        wanted, it = _things(sorted(cycle.wanted)), "it" if len(cycle.wanted) == 1 else "them"
        return f"{cycle}; {name} joined the cycle last and lets go of {wanted} as soon as no run of its uses {it}"
    told = find_condition(current.conditions, "Deadlocked")
    return told.message if told is not None and told.status == ConditionStatus.TRUE else ""


def _let_go(
    cycle: WaitCycle | None,
    jobs: Sequence[JobProgress],
    observation: SchedulingObservation,
    testbed: str,
    name: str,
) -> Release | None:
    """What the Scheduling that joined a cycle last lets go of: what the others need that it holds and does not
    use (a job of its that holds no slots; its testbed while none of its jobs holds slots)."""
    if cycle is None or cycle.last != name:
        return None
    using = {p.name for p in jobs if p.state.holds_slots}
    held = {job for job, view in observation.jobs.items() if view.held_by == name}
    free = tuple(sorted(job for kind, job in cycle.wanted if kind == "job" and job in held and job not in using))
    holds_testbed = observation.testbed is not None and observation.testbed.held_by == name
    drop_testbed = ("testbed", testbed) in cycle.wanted and holds_testbed and not using
    if not free and not drop_testbed:
        return None
    return Release(free, testbed if drop_testbed else None)


def _things(items: Sequence[Held]) -> str:
    return ", ".join(f"{kind} {name}" for kind, name in items)


def spec_problems(
    spec: SchedulingSpec, testbed: TestbedView | None, namespace: str, unrunnable: Mapping[str, str] | None = None
) -> list[str]:
    """Why the spec can never be placed on this testbed (none: it can, or the testbed is not known yet); with
    ``unrunnable`` (why no run of a job could start in the testbed's slots, by job), also the jobs it names that
    could never run there.

    The Scheduling reconciler fails a Scheduling for these; the API refuses a submission, and the policy pack
    a stack, for them."""
    problems = _reference_problems(spec, namespace)
    if testbed is not None and testbed.slot_ids:  # a Testbed without slots yet may still grow: wait
        problems += _allocation_problems(spec, testbed.slot_ids)
    why = unrunnable or {}
    problems += [unrunnable_problem(job, spec.testbed.name, why[job]) for job in _demand(spec) if job in why]
    return problems


def unrunnable_problem(job: str, testbed: str, why: str) -> str:
    """The problem of a Scheduling naming ``job``, no run of which could start in ``testbed``'s slots (``why``)."""
    return f"job {job} can never run in testbed {testbed}'s slots: {why}"


def _waiting_to_hold(
    spec: SchedulingSpec,
    observation: SchedulingObservation,
    demand: Mapping[str, int],
    problems: Sequence[str],
    name: str,
) -> tuple[SchedulingState, str] | None:
    """Why the Scheduling cannot hold its testbed and jobs yet, and what it waits for; None: it can."""
    testbed = observation.testbed
    missing = [j for j in demand if j not in observation.jobs]
    blockers = _blockers(spec, observation, name)
    if problems:
        return SchedulingState.FAILED, "a spec that can be placed: " + "; ".join(problems)
    if testbed is None:
        return SchedulingState.PENDING, f"testbed {spec.testbed.name} to exist"
    if not testbed.slot_ids:
        return SchedulingState.PENDING, f"testbed {spec.testbed.name} to have slots"
    if missing:
        return SchedulingState.PENDING, f"BatchJob{_plural(missing)} {_names(missing)} to exist"
    if blockers:
        return SchedulingState.PENDING, "; ".join(blockers) + " to be released"
    return None


def _holds_all(observation: SchedulingObservation, demand: Mapping[str, int], name: str) -> bool:
    """Whether Scheduling ``name`` holds its testbed and every job it needs."""
    testbed, jobs = observation.testbed, observation.jobs
    return testbed is not None and testbed.held_by == name and all(jobs[j].held_by == name for j in demand)


def _run_jobs(
    spec: SchedulingSpec,
    jobs: Sequence[JobProgress],
    testbed: TestbedView,
    views: Mapping[str, JobView],
    *,
    name: str,
    now: datetime,
) -> tuple[list[JobProgress], list[Event]]:
    """Holding everything: follow the started jobs, then allocate slots to the jobs that can start now."""
    followed, events = _follow_jobs(jobs, views, name, spec.retry, now)
    allocations = _place(spec, followed, testbed, now)
    events += [Event("Reserved", f"job {p.job} gets slot{_plural(p.slots)} {_ids(p.slots)}") for p in allocations]
    return [_reserve(p, allocations, now) for p in followed], events


def _running(
    spec: SchedulingSpec, jobs: Sequence[JobProgress], testbed: TestbedView, views: Mapping[str, JobView], name: str
) -> tuple[SchedulingState, str | None]:
    """Completed once every job finished; until then Running, and what it waits for."""
    if all(p.state.finished for p in jobs):
        return SchedulingState.COMPLETED, None
    return SchedulingState.RUNNING, _held_up(jobs, views, name) or _waiting_for(jobs, testbed, spec, name)


def _started_views(jobs: Sequence[JobProgress], views: Mapping[str, JobView], name: str) -> list[tuple[str, JobView]]:
    """The BatchJob views of this Scheduling's jobs that hold slots, reporting on the run it gave them."""
    started = []
    for record in jobs:
        view = views.get(record.name)
        if (
            record.state.holds_slots
            and view is not None
            and view.scheduling == name
            and view.attempt in (None, record.attempt)
        ):
            started.append((record.name, view))
    return started


def _held_up(jobs: Sequence[JobProgress], views: Mapping[str, JobView], name: str) -> str:
    """A started job whose run something outside esi holds up (a pod not placed or not started), and what."""
    held = [f"job {job}: {view.waiting_for}" for job, view in _started_views(jobs, views, name) if view.waiting_for]
    return _first_and_count(held, "job")


def _stalled(jobs: Sequence[JobProgress], views: Mapping[str, JobView], name: str) -> str:
    stalled = [f"job {job} {view.stalled}" for job, view in _started_views(jobs, views, name) if view.stalled]
    return _first_and_count(stalled, "job")


def _first_and_count(told: Sequence[str], what: str) -> str:
    if len(told) <= 1:
        return "".join(told)
    more = len(told) - 1
    return f"{told[0]} (and {more} more {what}{'s' if more > 1 else ''})"


def _release(
    observation: SchedulingObservation, demand: Mapping[str, int], jobs: Sequence[JobProgress], name: str
) -> Release | None:
    """The jobs this Scheduling holds that are neither in its spec nor in its record (they left before starting)."""
    kept = set(demand) | {p.name for p in jobs}
    dropped = tuple(sorted(j for j, view in observation.jobs.items() if view.held_by == name and j not in kept))
    return Release(dropped) if dropped else None


def _render(
    verdict: _Verdict, current: SchedulingStatus, *, testbed: str, generation: int | None, now: datetime
) -> SchedulingDecision:
    """The decision as the status to write, with its conditions, and the Events to tell."""
    state, jobs = verdict.state, verdict.jobs
    events = list(verdict.events)
    if state != current.state:
        told = _outcome(jobs) if state == SchedulingState.COMPLETED else verdict.waiting_for or state.value
        events.insert(0, Event(state.value, told, warning=state == SchedulingState.FAILED))
    if verdict.stalled and not any(
        c.type == "Stalled" and c.status == ConditionStatus.TRUE for c in current.conditions
    ):
        events.append(Event("Stalled", verdict.stalled, warning=True))
    if verdict.deadlocked and not any(
        c.type == "Deadlocked" and c.status == ConditionStatus.TRUE for c in current.conditions
    ):
        events.append(Event("WaitCycle", verdict.deadlocked, warning=True))
    finished = sum(p.state.finished for p in jobs)
    updated = current.model_copy(
        update={
            "state": state,
            "testbed": testbed,
            "waiting_for": verdict.waiting_for,
            "jobs": jobs,
            "progress": f"{finished}/{len(jobs)}",
            "observed_generation": generation,
        }
    )
    updated = _conditions(
        updated,
        verdict.problems,
        verdict.stalled,
        verdict.deadlocked,
        state=state,
        testbed=testbed,
        generation=generation,
        now=now,
    )
    return SchedulingDecision(updated, tuple(verdict.actions), tuple(events), _next_backoff(jobs, now))


def _next_backoff(jobs: Sequence[JobProgress], now: datetime) -> float | None:
    """Seconds until the first failed job's backoff ends; None when no job waits one out."""
    backoffs = [(p.retry_at - now).total_seconds() for p in jobs if _backing_off(p, now) and p.retry_at is not None]
    return min(backoffs, default=None)


def _backing_off(record: JobProgress, now: datetime) -> bool:
    """A failed job waiting out its backoff before it may be placed again."""
    return record.state == JobState.WAITING and record.retry_at is not None and record.retry_at > now


def _demand(spec: SchedulingSpec) -> dict[str, int]:
    """Executors per job, in the order jobs first appear."""
    if spec.queue_based is not None:
        return dict(Counter(ref.name for ref in spec.queue_based))
    assert spec.slot_based is not None  # the spec validates exactly one strategy
    return {job.name.name: len(job.slot_ids) for job in spec.slot_based.jobs}


def _progress(previous: Sequence[JobProgress], demand: Mapping[str, int], now: datetime) -> list[JobProgress]:
    """The job records for the spec as it is now: started jobs kept even if removed, new ones appended."""
    by_name = {p.name: p for p in previous}
    records = []
    for name, executors in demand.items():
        record = by_name.get(name)
        if record is None:
            record = JobProgress(name=name, executors=executors, queued_at=now)
        elif record.state == JobState.WAITING and record.executors != executors:
            record = record.model_copy(update={"executors": executors})
        records.append(record)
    records += [p for p in previous if p.name not in demand and p.state.allocated]
    return records


def _reference_problems(spec: SchedulingSpec, namespace: str) -> list[str]:
    refs = [spec.testbed]
    if spec.queue_based is not None:
        refs += spec.queue_based
    if spec.slot_based is not None:
        refs += [job.name for job in spec.slot_based.jobs]
    foreign = sorted({f"{r.namespace}/{r.name}" for r in refs if r.namespace not in (None, namespace)})
    if not foreign:
        return []
    return [f"references outside namespace {namespace} are not supported: {', '.join(foreign)}"]


def _allocation_problems(spec: SchedulingSpec, slot_ids: frozenset[int]) -> list[str]:
    if spec.queue_based is not None:
        return queue_problems([r.name for r in spec.queue_based], slot_ids)
    assert spec.slot_based is not None
    return slot_problems([(j.name.name, j.slot_ids) for j in spec.slot_based.jobs], slot_ids)


def _blockers(spec: SchedulingSpec, observation: SchedulingObservation, name: str) -> list[str]:
    """What another Scheduling holds: the testbed and the jobs this one needs."""
    held = []
    if observation.testbed is not None and observation.testbed.held_by not in (None, name):
        held.append(f"testbed {spec.testbed.name} (held by scheduling {observation.testbed.held_by})")
    for job in _demand(spec):
        view = observation.jobs.get(job)
        if view is not None and view.held_by not in (None, name):
            held.append(f"job {job} (held by scheduling {view.held_by})")
    return held


def _follow_jobs(
    jobs: Sequence[JobProgress], views: Mapping[str, JobView], name: str, retry: RetryPolicy, now: datetime
) -> tuple[list[JobProgress], list[Event]]:
    """Take over what each started job's BatchJob reports (only reports about this Scheduling's current run).

    A failed run within the retry limit sends the job back to waiting, without slots, until its backoff
    is over; past the limit the job is recorded as failed. Either way the other jobs go on.
    """
    followed: list[JobProgress] = []
    events: list[Event] = []
    for record in jobs:
        view = views.get(record.name)
        reported = _FROM_BATCHJOB.get(view.state) if view is not None and view.state is not None else None
        if (
            not record.state.holds_slots
            or view is None
            or view.scheduling != name
            or view.attempt not in (None, record.attempt)
            or reported is None
            or _RANK[reported] <= _RANK[record.state]
        ):
            followed.append(record)
            continue
        if reported == JobState.FAILED and record.attempt <= retry.limit:
            delay = retry.delay(record.attempt)
            followed.append(
                record.model_copy(
                    update={
                        "state": JobState.WAITING,
                        "attempt": record.attempt + 1,
                        "slots": [],
                        "reserved_at": None,
                        "started_at": None,
                        "retry_at": now + timedelta(seconds=delay),
                        "message": view.message,
                    }
                )
            )
            events.append(
                Event(
                    "JobRetrying",
                    f"job {record.name} failed ({view.message or 'no reason given'}); "
                    f"attempt {record.attempt + 1} of {retry.limit + 1} in {delay}s",
                )
            )
            continue
        changes: dict[str, object] = {"state": reported}
        if reported == JobState.RUNNING and record.started_at is None:
            changes["started_at"] = now
        if reported.finished:
            changes["finished_at"] = now
            changes["message"] = view.message
            events.append(Event(f"Job{reported.value}", f"job {record.name} {reported.value.lower()}"))
        followed.append(record.model_copy(update=changes))
    return followed, events


def _reserved_slots(jobs: Sequence[JobProgress]) -> set[int]:
    return {slot for p in jobs if p.state.holds_slots for slot in p.slots}


def _place(spec: SchedulingSpec, jobs: Sequence[JobProgress], testbed: TestbedView, now: datetime) -> list[Allocation]:
    # Slots this Scheduling reserved may still look free on the Testbed (its status lags); never twice.
    free = testbed.free - _reserved_slots(jobs)
    # A job waiting out its backoff is left out for now, like a started one: it does not hold up the others.
    started = {p.name for p in jobs if p.state.allocated or _backing_off(p, now)}
    if spec.queue_based is not None:
        return queue_allocations([r.name for r in spec.queue_based], started, free)
    assert spec.slot_based is not None
    slot_jobs = [(j.name.name, j.slot_ids) for j in spec.slot_based.jobs]
    return slot_allocations(slot_jobs, spec.slot_based.mode, started, free)


def _reserve(record: JobProgress, allocations: Sequence[Allocation], now: datetime) -> JobProgress:
    allocation = next((p for p in allocations if p.job == record.name), None)
    if allocation is None:
        return record
    return record.model_copy(
        update={"state": JobState.RESERVED, "slots": list(allocation.slots), "reserved_at": now, "retry_at": None}
    )


def _waiting_for(jobs: Sequence[JobProgress], testbed: TestbedView, spec: SchedulingSpec, name: str) -> str:
    waiting = [p for p in jobs if p.state == JobState.WAITING]
    if not waiting:
        active = [p.name for p in jobs if not p.state.finished]
        return f"job{'s' if len(active) > 1 else ''} {_names(active)} to finish"
    first = waiting[0]
    if first.retry_at is not None:
        return f"job {first.name} to run again (attempt {first.attempt}) from {first.retry_at:%H:%M:%S}"
    free = len(testbed.free - _reserved_slots(jobs))
    crowded = _crowded(sorted(testbed.no_room))
    if spec.slot_based is not None:
        wanted = next(j.slot_ids for j in spec.slot_based.jobs if j.name.name == first.name)
        return f"slots {_ids(sorted(wanted))} to be free for job {first.name}{crowded}"
    return f"slots for job {first.name} (it needs {first.executors}, {free} of the testbed's slots are free{crowded})"


def _conditions(
    status: SchedulingStatus,
    problems: Sequence[str],
    stalled: str,
    deadlocked: str,
    *,
    state: SchedulingState,
    testbed: str,
    generation: int | None,
    now: datetime,
) -> SchedulingStatus:
    conditions = list(status.conditions)
    holds = state in (SchedulingState.RUNNING, SchedulingState.COMPLETED)
    failed_jobs = [p.name for p in status.jobs if p.state == JobState.FAILED]
    settings = (
        ("Placeable", not problems, "Placeable" if not problems else "Unplaceable", "; ".join(problems)),
        (
            "Holding",
            holds,
            "HoldsTestbedAndJobs" if holds else "NotHolding",
            f"holds testbed {testbed} and {len(status.jobs)} jobs" if holds else (status.waiting_for or ""),
        ),
        (
            "Completed",
            state == SchedulingState.COMPLETED,
            ("JobsFailed" if failed_jobs else "AllSucceeded") if state == SchedulingState.COMPLETED else "NotCompleted",
            f"failed: {_names(failed_jobs)}" if failed_jobs else "",
        ),
        ("Stalled", bool(stalled), "JobStalled" if stalled else "NotStalled", stalled),
        ("Deadlocked", bool(deadlocked), "WaitCycle" if deadlocked else "NoWaitCycle", deadlocked),
    )
    conditions = set_conditions(conditions, settings, now=now, observed_generation=generation)
    return status.model_copy(update={"conditions": conditions})


def _outcome(jobs: Sequence[JobProgress]) -> str:
    failed = [p.name for p in jobs if p.state == JobState.FAILED]
    told = f"every job finished: {len(jobs) - len(failed)} succeeded"
    return told + (f", {len(failed)} failed ({_names(failed)})" if failed else "")


def _names(names: Sequence[str]) -> str:
    return ", ".join(names)


def _crowded(no_room: Sequence[int]) -> str:
    """What holds up a wait besides: slots whose room other pods hold (the Testbed's slots say how much)."""
    if not no_room:
        return ""
    shown = _ids(no_room[:_SHOWN_SLOTS]) + (
        f" and {len(no_room) - _SHOWN_SLOTS} more" if no_room[_SHOWN_SLOTS:] else ""
    )
    return f"; other pods hold the room of slot{_plural(no_room)} {shown} (see the testbed's slots)"


def _ids(ids: Sequence[int]) -> str:
    return ", ".join(map(str, ids))


def _plural(items: Sequence[object]) -> str:
    return "s" if len(items) > 1 else ""
