"""The BatchJob lifecycle as one pure function: (status, what is observed now) -> (new status, actions).

The BatchJob reconciler observes who holds the job (a Scheduling, and the slots that Scheduling reserved
for it) and the job's application (SparkApplication or FlinkDeployment) with its executor pods; it calls
``decide_batchjob``, performs the returned actions and writes the returned status. Level-triggered: the
decision depends only on the last status and the current observation, so running it twice, late, or after
a crash converges to the same place (docs/design.md#level-triggered-reconcilers).

::

    Ready ──held──▶ Queued ──slots reserved──▶ Submitted ──executors bound──▶ Scheduled ──running──▶ Running
                                                   │ (completion or failure may be seen from any of these) │
                                                   └────────────────▶ Succeeded | Failed ◀─────────────────┘
    any state ──released (no holder, or another holder)──▶ Releasing ──application and pods gone──▶ Ready

Runs (docs/compatibility.md#runs):

* A job runs at most once per holding Scheduling. An application that disappears once its executors were
  placed (deleted by hand, TTL) ends the run as Failed. Before that (Submitted) it is simply created
  again: a fresh application may not be visible yet.
* A run that completes without Running ever being observed (short jobs, a restart) is still recorded,
  starting at submission.
* Releasing closes an open run as Cancelled.
* A run's record is built from what lasts, not only from pods that may be gone after a crash: its nodes are
  its executors' nodes, else the nodes of its slots in the Testbed's table; its co-located jobs are those
  with executors on its nodes while it is open and those whose recorded runs overlap it there, added to
  each time the job is decided while it is held (a job recorded later is still found). A record whose
  nodes cannot be learned says so in ``incomplete``, never an empty list that reads as "alone".
* A run's record is final once a later run follows it, or its Scheduling no longer holds the job. Each final
  record becomes a Run object (``KeepRun``; docs/design.md#runs), decided on the status as it was written —
  so the Run holds exactly what the history holds — and the status counts the runs so kept
  (``keptRuns``): a Run lost to a crash between the two writes is created again, and a kept record is
  never changed (a Scheduling of the same name holding the job again does not add to it).
* A BatchJob being deleted learns nothing more: every run of its history not yet kept is kept before it goes
  (``runs_to_keep_when_deleted``), an open run closed as Cancelled.

Waits explain themselves: ``waitingFor`` carries the scheduler's or kubelet's words on a pod of the run that
is not placed or not started, and a run that is still not Running ``stalled_after`` its submission gets the
condition ``Stalled`` (with that reason) and a Warning Event; it goes back to False once the run runs or ends.
A run still not Running after its holder's ``start_timeout`` fails with that reason and its application is
deleted, so the executors waiting in the run's slots go and the slots get their ghosts back; its Scheduling
retries it per its retry policy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from esi.decisions.events import Event
from esi.resources.batchjob import (
    ACTIVE_STATES,
    MAX_REASON,
    MAX_RUNS,
    BatchJobState,
    BatchJobStatus,
    RunOutcome,
    RunRecord,
)
from esi.resources.meta import ConditionStatus, set_conditions
from esi.resources.testbed import Slot

__all__ = [
    "DELETED_WHILE_RUNNING",
    "STALLED_AFTER",
    "ApplicationPhase",
    "ApplicationView",
    "BatchJobDecision",
    "BatchJobObservation",
    "CreateApplication",
    "DeleteApplication",
    "Holder",
    "KeepRun",
    "Neighbour",
    "decide_batchjob",
    "decide_unbuildable",
    "neighbours_on",
    "runs_to_keep",
    "runs_to_keep_when_deleted",
    "slot_nodes",
    "slots_listed",
]


STALLED_AFTER = timedelta(minutes=5)
"""How long a run may wait, from submission, to be Running before it is ``Stalled`` (unless told otherwise)."""
# The states in which a run waits to be Running; only these can be Stalled.
_STARTING = (BatchJobState.SUBMITTED, BatchJobState.SCHEDULED)


@dataclass(frozen=True)
class Holder:
    """The Scheduling that holds the job, and the slots it reserved for it (none yet: still waiting)."""

    scheduling: str
    testbed: str
    slots: tuple[int, ...] = ()
    attempt: int = 1  # the Scheduling's run of the job the slots are for; a higher one means "run again"
    start_timeout: timedelta | None = None  # a run not Running this long after submission fails; None: never


class ApplicationPhase(StrEnum):
    """An application's state, mapped from the Spark or Flink operator's own words."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


@dataclass(frozen=True)
class ApplicationView:
    phase: ApplicationPhase
    executors: int = 0  # executor pods that exist
    executors_bound: int = 0  # of those, the ones with a node
    executors_running: int = 0
    nodes: tuple[str, ...] = ()  # the executors' nodes
    message: str = ""  # the operator's words on a failure
    waiting_for: str = ""  # why a pod of it is not placed or not started, as the scheduler or kubelet said
    # Its pods outlive its job (a Flink application cluster keeps its JobManager, and TaskManagers in their
    # slots, until it is deleted): it is deleted as soon as its run is recorded.
    lingers: bool = False


@dataclass(frozen=True)
class Neighbour:
    """Another job on a node: executors of it running there now (no times), or one of its runs recorded
    there (``start``, and ``end`` once it ended)."""

    job: str  # as a run's colocatedJobs names it: the name, or namespace/name from another namespace
    node: str
    start: datetime | None = None
    end: datetime | None = None

    def meets(self, start: datetime, end: datetime | None) -> bool:
        """Whether it was on its node during [start, end) (``end`` None: a run still open)."""
        if self.start is None:
            return end is None  # running there now: only a run that is open now meets it
        return (end is None or self.start < end) and (self.end is None or self.end > start)


@dataclass(frozen=True)
class BatchJobObservation:
    holder: Holder | None
    application: ApplicationView | None  # None: no application object exists
    leftover_pods: int = 0  # pods of the job's application that are still there (terminating)
    slot_nodes: tuple[str, ...] = ()  # the nodes of the holder's slots, from its Testbed's slot table
    neighbours: tuple[Neighbour, ...] = ()  # other jobs on the nodes of the job's runs
    # Whether the Testbed's slot table lists every one of the holder's slots as the job's: the extender gives an
    # executor only such a slot, so the application (and its executors) waits for it.
    slots_listed: bool = True


def slots_listed(job: str, rows: Sequence[Slot | None]) -> bool:
    """Whether the Testbed's slot table lists each of the holder's slots (their ``rows``, None where it lists
    none) as ``job``'s: only then does the extender give the job's executors those slots."""
    return all(row is not None and row.job == job for row in rows)


def slot_nodes(rows: Sequence[Slot | None]) -> tuple[str, ...]:
    """The nodes of the holder's slots (their ``rows`` in the Testbed's slot table); () when it does not list
    them all."""
    nodes = [row.node_name if row is not None else None for row in rows]
    return tuple(sorted({n for n in nodes if n})) if nodes and all(nodes) else ()


@dataclass(frozen=True)
class CreateApplication:
    testbed: str
    slots: tuple[int, ...]
    attempt: int = 1


@dataclass(frozen=True)
class DeleteApplication:
    pass


@dataclass(frozen=True)
class KeepRun:
    """Keep run ``ordinal`` (which run of the job, counting all its runs) as a Run object: ``record`` is final."""

    ordinal: int
    record: RunRecord


Action = CreateApplication | DeleteApplication | KeepRun


def _last_run_final(status: BatchJobStatus) -> bool:
    """Whether the record of the history's last run is final: kept as a Run already, or its Scheduling no longer
    holds the job (while it does, the jobs that met the run may still be added)."""
    last = status.runs[-1]
    return status.scheduling != last.scheduling or status.run_count <= status.kept_runs


def runs_to_keep(status: BatchJobStatus) -> tuple[KeepRun, ...]:
    """The runs of ``status`` whose records are final and not yet kept as Runs, oldest first."""
    numbered = status.numbered_runs()
    if numbered and not _last_run_final(status):
        numbered = numbered[:-1]
    return tuple(KeepRun(ordinal, run) for ordinal, run in numbered if ordinal > status.kept_runs)


DELETED_WHILE_RUNNING = "its BatchJob was deleted while it ran"  # the reason of a run its job's deletion ends


def runs_to_keep_when_deleted(status: BatchJobStatus | None, *, now: datetime) -> tuple[KeepRun, ...]:
    """The runs to keep before a BatchJob being deleted goes, oldest first: every run of its history not yet kept,
    the last one too (nothing more is learned of a job being deleted) — closed as Cancelled at ``now`` if it is
    still open."""
    if status is None or not status.runs:
        return ()
    runs = status.runs
    if runs[-1].end is None:
        closed = runs[-1].model_copy(
            update={"end": now, "outcome": RunOutcome.CANCELLED, "reason": DELETED_WHILE_RUNNING}
        )
        runs = [*runs[:-1], closed]
    numbered = status.model_copy(update={"runs": runs}).numbered_runs()
    return tuple(KeepRun(ordinal, run) for ordinal, run in numbered if ordinal > status.kept_runs)


@dataclass(frozen=True)
class BatchJobDecision:
    status: BatchJobStatus
    actions: tuple[Action, ...] = ()
    events: tuple[Event, ...] = field(default=())  # for Kubernetes Events
    decide_again_in: float | None = None  # seconds until the run counts as stalled or times out, while it may


def decide_batchjob(
    status: BatchJobStatus | None,
    observation: BatchJobObservation,
    *,
    generation: int | None,
    now: datetime,
    stalled_after: timedelta = STALLED_AFTER,
    keeps_runs: bool = True,
) -> BatchJobDecision:
    """The next status of a BatchJob and what to do to get there; ``keeps_runs``: whether final records become
    Runs (not when the operators keep none: ``--keep-runs 0``)."""
    current = status or BatchJobStatus()
    records = runs_to_keep(current) if keeps_runs else ()
    if records:
        current = current.model_copy(update={"kept_runs": records[-1].ordinal})
    step = _Step(current, observation, now, stalled_after, keeps_runs=keeps_runs)
    step.actions.extend(records)
    holder = observation.holder
    if current.scheduling is not None and (holder is None or holder.scheduling != current.scheduling):
        step.release()
    if step.status.state != BatchJobState.RELEASING and holder is not None:
        step.follow(holder)
    return step.result(generation)


class _Step:
    """One decision in the making: the status so far, the actions and the events it causes."""

    def __init__(
        self,
        status: BatchJobStatus,
        observation: BatchJobObservation,
        now: datetime,
        stalled_after: timedelta,
        *,
        keeps_runs: bool,
    ) -> None:
        self.keeps_runs = keeps_runs
        self.start = status
        self.status = status
        self.observation = observation
        self.now = now
        self.stalled_after = stalled_after
        self.actions: list[Action] = []

    def update(self, **changes: object) -> None:
        self.status = self.status.model_copy(update=changes)

    def release(self) -> None:
        """The holding Scheduling let go (or another took over): remove the application, then be Ready."""
        self._complete_last_run()
        self._close_run(RunOutcome.CANCELLED, f"scheduling {self.status.scheduling} let the job go while it ran")
        if self.observation.application is not None or self.observation.leftover_pods:
            if self.observation.application is not None:
                self.actions.append(DeleteApplication())
            self.update(
                state=BatchJobState.RELEASING,
                message=f"removing the application of scheduling {self.status.scheduling}",
            )
            return
        self.update(state=BatchJobState.READY, scheduling=None, submitted_at=None, message="not held by any Scheduling")

    def follow(self, holder: Holder) -> None:
        """Held by ``holder``: create the application once slots are reserved, then track it."""
        self._complete_last_run()
        application = self.observation.application
        if self.status.scheduling != holder.scheduling:
            self.update(
                state=BatchJobState.QUEUED, scheduling=holder.scheduling, submitted_at=None, attempt=holder.attempt
            )
        elif holder.attempt > self.status.attempt:
            # The Scheduling runs the job again after a failure: first the last run's application must go.
            if application is not None or self.observation.leftover_pods:
                if application is not None:
                    self.actions.append(DeleteApplication())
                self.update(
                    message=f"removing the application of run {self.status.attempt} before run {holder.attempt}"
                )
                return
            self._close_run(
                RunOutcome.FAILED, f"scheduling {holder.scheduling} ran the job again (run {holder.attempt})"
            )
            self.update(state=BatchJobState.QUEUED, attempt=holder.attempt, submitted_at=None)
        state = self.status.state
        if state.finished:
            self._release_lingering(application)
            return  # held until its Scheduling lets go; the message keeps saying how it ended
        if application is None:
            self._without_application(holder)
        else:
            self._with_application(holder, application)
        if self.status.state.finished:
            self._release_lingering(application)
        since = self._waiting_since()
        if since is not None and holder.start_timeout is not None and self.now - since >= holder.start_timeout:
            why = self.status.waiting_for or self.status.message or "no reason given"
            if application is not None:  # its executors give their slots back now, retried or not
                self.actions.append(DeleteApplication())
            self._finish(
                BatchJobState.FAILED,
                RunOutcome.FAILED,
                f"not running {_duration(holder.start_timeout)} after submission: {why}",
            )

    def _release_lingering(self, application: ApplicationView | None) -> None:
        if application is not None and application.lingers:
            self.actions.append(DeleteApplication())

    def _without_application(self, holder: Holder) -> None:
        if self.status.state in (BatchJobState.SCHEDULED, BatchJobState.RUNNING):
            self._finish(BatchJobState.FAILED, RunOutcome.FAILED, "the application disappeared while it ran")
        elif holder.slots and not self.observation.slots_listed:
            slots = ", ".join(map(str, holder.slots))
            self.update(
                state=BatchJobState.QUEUED,
                message=f"slots {slots} reserved; waiting for testbed {holder.testbed} to list them as this job's",
            )
        elif holder.slots:
            # Also when Submitted: a just-created application may not be visible yet, and creating it again
            # is harmless (it already exists, or it never ran).
            self.actions.append(CreateApplication(holder.testbed, holder.slots, holder.attempt))
            slots = ", ".join(map(str, holder.slots))
            self.update(
                state=BatchJobState.SUBMITTED,
                submitted_at=self.now,
                message=f"application created for slots {slots} of testbed {holder.testbed}",
            )
        else:
            self.update(state=BatchJobState.QUEUED, message=f"waiting for slots from scheduling {holder.scheduling}")

    def _with_application(self, holder: Holder, application: ApplicationView) -> None:
        if not self.status.state.active:  # created before a crash kept us from recording it
            self.update(state=BatchJobState.SUBMITTED, submitted_at=self.status.submitted_at or self.now)
        if application.phase == ApplicationPhase.FAILED:
            self._finish(BatchJobState.FAILED, RunOutcome.FAILED, application.message or "the application failed")
            return
        if application.phase == ApplicationPhase.SUCCEEDED:
            self._finish(BatchJobState.SUCCEEDED, RunOutcome.SUCCEEDED, "the application succeeded")
            return
        expected = len(holder.slots) or application.executors
        reached = BatchJobState.SUBMITTED
        if expected and application.executors_bound >= expected:
            reached = BatchJobState.SCHEDULED
        if application.phase == ApplicationPhase.RUNNING and expected and application.executors_running >= expected:
            reached = BatchJobState.RUNNING
        # An executor restarting does not take a job back from Running to Scheduled.
        if ACTIVE_STATES.index(reached) > ACTIVE_STATES.index(self.status.state):
            self.update(state=reached)
        messages = {
            BatchJobState.SUBMITTED: f"{application.executors_bound} of {expected} executors placed",
            BatchJobState.SCHEDULED: f"all {expected} executors placed, waiting for them to run",
            BatchJobState.RUNNING: f"running with {expected} executors",
        }
        waiting_for = application.waiting_for
        message = messages[self.status.state]
        self.update(message=f"{message}; {waiting_for}" if waiting_for else message, waiting_for=waiting_for or None)
        if self.status.state == BatchJobState.RUNNING:
            self._open_run(holder, application)

    def _run_open(self) -> bool:
        return bool(self.status.runs) and self.status.runs[-1].end is None

    def _append_run(self, holder: Holder, nodes: tuple[str, ...], start: datetime) -> None:
        run = RunRecord(
            scheduling=holder.scheduling,
            attempt=self.status.attempt,
            testbed=holder.testbed,
            slots=list(holder.slots),
            submitted=self.status.submitted_at,
            start=start,
        )
        self.update(runs=[*self.status.runs, run][-MAX_RUNS:], run_count=self.status.run_count + 1)
        self._complete_last_run(nodes)

    def _complete_last_run(self, executor_nodes: tuple[str, ...] = ()) -> None:
        """Add to the last run's record what is known now: its nodes (its executors', else its slots'), and
        the jobs that met it there. Only while its record is not final."""
        if not self.status.runs or _last_run_final(self.status):
            return
        run = self.status.runs[-1]
        holder = self.observation.holder
        slot_nodes = self.observation.slot_nodes if holder is not None and holder.scheduling == run.scheduling else ()
        nodes = sorted({*run.nodes, *executor_nodes} or set(slot_nodes))
        met = {n.job for n in self.observation.neighbours if n.node in nodes and n.meets(run.start, run.end)}
        incomplete = None
        if not nodes:
            incomplete = (
                f"nodes unknown: its executors were gone and testbed {run.testbed} does not list slots "
                f"{', '.join(map(str, run.slots))}; so are the jobs it ran next to"
            )
        completed = run.model_copy(
            update={"nodes": nodes, "colocated_jobs": sorted({*run.colocated_jobs, *met}), "incomplete": incomplete}
        )
        if completed != run:
            self.update(runs=[*self.status.runs[:-1], completed])

    def _open_run(self, holder: Holder, application: ApplicationView) -> None:
        if not self._run_open():
            self._append_run(holder, application.nodes, self.now)

    def _close_run(self, outcome: RunOutcome, reason: str | None) -> None:
        if self._run_open():
            self._complete_last_run()
            reason = reason[:MAX_REASON] if reason is not None else None
            closed = self.status.runs[-1].model_copy(update={"end": self.now, "outcome": outcome, "reason": reason})
            self.update(runs=[*self.status.runs[:-1], closed])

    def _finish(self, state: BatchJobState, outcome: RunOutcome, message: str) -> None:
        holder = self.observation.holder
        if not self._run_open() and holder is not None:
            # Finished without Running ever being seen (a short job, a restart): still a run, from submission.
            nodes = self.observation.application.nodes if self.observation.application else ()
            self._append_run(holder, nodes, self.status.submitted_at or self.now)
        self._close_run(outcome, None if outcome == RunOutcome.SUCCEEDED else message)
        self.update(state=state, message=message)

    def result(self, generation: int | None) -> BatchJobDecision:
        if not self.status.state.active:
            self.update(waiting_for=None)
        status = self.status
        held = status.scheduling is not None and status.state != BatchJobState.RELEASING
        finished = status.state.finished
        message = status.message or ""
        stalled = self._stalled()
        conditions = set_conditions(
            status.conditions,
            (
                ("Held", held, "HeldByScheduling" if held else "NotHeld", message),
                ("Finished", finished, status.state.value if finished else "NotFinished", message if finished else ""),
                ("Stalled", bool(stalled), "WaitingTooLong" if stalled else "NotStalled", stalled),
            ),
            now=self.now,
            observed_generation=generation,
        )
        status = status.model_copy(update={"conditions": conditions, "observed_generation": generation})
        events: list[Event] = []
        if status.state != self.start.state:
            told = status.message or status.state.value
            events.append(Event(status.state.value, told, warning=status.state == BatchJobState.FAILED))
        if stalled and not _condition_holds(self.start, "Stalled"):
            events.append(Event("Stalled", stalled, warning=True))
        again = self._until_stalled()
        if self.keeps_runs and runs_to_keep(status):  # kept as Runs on the next decision, made on the status as written
            again = 0.0
        return BatchJobDecision(status, tuple(self.actions), tuple(events), again)

    def _waiting_since(self) -> datetime | None:
        """When the run began waiting to be Running (its submission), while it waits."""
        return self.status.submitted_at if self.status.state in _STARTING else None

    def _stalled(self) -> str:
        """Why the run counts as stalled, in a sentence; "" when it does not."""
        since = self._waiting_since()
        if since is None or self.now - since < self.stalled_after:
            return ""
        why = self.status.waiting_for or self.status.message or "no reason given"
        return f"not running {_duration(self.stalled_after)} after submission: {why}"

    def _until_stalled(self) -> float | None:
        """Seconds until the waiting run becomes Stalled, or times out; None when it waits for neither."""
        since = self._waiting_since()
        if since is None:
            return None
        holder = self.observation.holder
        deadlines = [] if self._stalled() else [since + self.stalled_after]
        if holder is not None and holder.start_timeout is not None:
            deadlines.append(since + holder.start_timeout)
        return min(((d - self.now).total_seconds() for d in deadlines), default=None)


def _condition_holds(status: BatchJobStatus, type_: str) -> bool:
    return any(c.type == type_ and c.status == ConditionStatus.TRUE for c in status.conditions)


def _duration(span: timedelta) -> str:
    """``span`` as people say it: 90 s, 5 min, 2 h (whole units, the largest that fits)."""
    seconds = int(span.total_seconds())
    for unit, size in (("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


def neighbours_on(
    job: tuple[str, str],
    nodes: Iterable[str],
    executors_on_nodes: Mapping[str, Iterable[tuple[str, str]]],
    runs_on_nodes: Mapping[str, Iterable[tuple[tuple[str, str], datetime, datetime | None]]],
) -> tuple[Neighbour, ...]:
    """The other jobs on ``nodes``: those with unfinished executors there (``executors_on_nodes``: per node,
    the (namespace, job) of each) and those with runs recorded there (``runs_on_nodes``: per node, the
    (namespace, job), start and end of each). A job in ``job``'s own namespace is named by its name, one in
    another namespace as ``namespace/name``."""
    namespace = job[0]

    def named(other: tuple[str, str]) -> str:
        return other[1] if other[0] == namespace else f"{other[0]}/{other[1]}"

    found: set[Neighbour] = set()
    for node in set(nodes):
        found |= {Neighbour(named(o), node) for o in executors_on_nodes.get(node, ()) if o != job}
        found |= {Neighbour(named(o), node, start, end) for o, start, end in runs_on_nodes.get(node, ()) if o != job}
    return tuple(sorted(found, key=lambda n: (n.node, n.job, n.start or datetime.min.replace(tzinfo=UTC))))


def decide_unbuildable(
    decided: BatchJobDecision,
    observation: BatchJobObservation,
    why: str,
    *,
    generation: int | None,
    now: datetime,
    keeps_runs: bool = True,
) -> BatchJobDecision:
    """``decided`` asked to create the application, and it cannot be built (``why``, e.g. a slot size the
    application cannot be given exactly): the run fails at submission, as if the application's operator had
    reported it Failed — recorded as a failed run (the Scheduling may run the job again)."""
    failed = ApplicationView(ApplicationPhase.FAILED, message=f"cannot build the application: {why}")
    return decide_batchjob(
        decided.status, replace(observation, application=failed), generation=generation, now=now, keeps_runs=keeps_runs
    )
