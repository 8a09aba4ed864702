"""What the simulated operators do next for one application: a pure function of what is observed now.

``decide(observation, settings)`` looks at an application (its spec, status and annotations) and its pods
and returns the actions that move it on — pods to create, delete or end, annotations and a status to
write — and when to look again. All state lives in the objects: the status the real operator would write,
and the run's plan in annotations (``sim.names``). Deciding twice, or after a restart, gives the same
actions, and every write the shell makes is conditional on the application's resourceVersion, so a
decision taken on an outdated view is refused rather than applied.

**SparkApplication** (``applicationState.state``): "" -> SUBMITTED (driver pod created) -> RUNNING (driver
running; executors created) -> SUCCEEDING or FAILING (the driver ended) -> COMPLETED or FAILED (with
``errorMessage``); SUBMISSION_FAILED when the spec cannot become pods. Also ``driverInfo.podName``,
``executorState`` (per executor pod: PENDING, RUNNING, COMPLETED, FAILED; UNKNOWN for one deleted while the
application runs), ``sparkApplicationId``, ``submissionID``, ``submissionAttempts``, ``executionAttempts``,
``lastSubmissionAttemptTime``, ``terminationTime``. At the end the executors are deleted (as the driver does)
and the driver pod's phase becomes Succeeded or Failed; the driver stays. An executor lost (its pod deleted,
or failed) is replaced by one with the next id, as Spark's driver does; more failed executors than
``spark.executor.maxNumFailures`` (default twice the executors, at least 3) fail the application.

**FlinkDeployment** (the fields and values the operator writes): ``lifecycleState`` CREATED -> DEPLOYED (the
JobManager's Deployment created) -> STABLE (job running, then finished), or FAILED; ``jobManagerDeploymentStatus``
DEPLOYING -> DEPLOYED_NOT_READY -> READY (its pod runs); ``jobStatus`` {state RECONCILING -> RUNNING (the
JobManager runs; jobName, jobId and startTime with it) -> FINISHED | FAILED, updateTime (epoch milliseconds, as
the operator writes them)}; ``error`` (the operator's JSON form) on failure. The TaskManagers are asked for once
the JobManager runs; the JobManager and TaskManagers stay after the job ends, until the FlinkDeployment is
deleted (the operator's ``execution.shutdown-on-application-finish: false``); a JobManager Deployment deleted
before the job ended is deployed again.

**Start-up**: the executors (TaskManagers) are created no earlier than the application's first sight (its creation,
as the watch brings it within milliseconds; ``creationTimestamp`` has whole seconds only) plus its job's start-up
next to the neighbours known then (``sim.runtime`` has the rule). Both moments are kept in annotations; until the
executors exist, every step decides the due moment again for the neighbours known now, never earlier than recorded
(so a partner created a moment later extends it at the latest when the application wakes up for it); a model
without start-ups creates them at once.

**A run** starts when every executor (TaskManager) runs. It lasts the workload model's duration for its job
next to the jobs of other applications' executors on the same nodes at that moment; that plan is written as
annotations before anything else, so it survives restarts. A job whose executors arrive on those nodes later
slows the rest of the run down: what is left of its work then takes the model's time next to every neighbour
so far (``SimSettings.replan``). One that leaves does not speed it up again — the co-location table holds
runtimes of runs with that neighbour, the way a profiler measures them, whichever of the two started first.
A run fails instead of completing when the application's attempt (label ``esi.tu-berlin.de/attempt``,
default 1) is at most the ``spark.esi.sim.failAttempts`` (sparkConf) / ``esi.sim.fail-attempts``
(flinkConfiguration) setting, or by chance (``failure_rate``, drawn once per application from ``seed`` and
its uid). With ``runtime_jitter``, each application also runs at a pace of its own (normally distributed
around the model's, drawn the same way), as measured runs vary. A lost executor (its pod deleted, or failed) is
replaced under a new name, as Spark's driver and Flink's resource manager do; a Spark run goes on with the
replacement, a Flink run only when the job restarts after failures (``restart-strategy.type``, or checkpointing
on), else the job fails ("TaskManager lost"). Executors of applications whose run is over do not slow others down.
"""

from __future__ import annotations

import copy
import itertools
import json
import random
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from esi.decisions.events import Event
from esi.objects.names import ATTEMPT_ANNOTATION
from sim.crds import SPARK
from sim.names import (
    COLOCATED_ANNOTATION,
    ENDS_AT_ANNOTATION,
    EXECUTORS_AT_ANNOTATION,
    FAILURE_ANNOTATION,
    FLINK_FAIL_ATTEMPTS,
    SEEN_AT_ANNOTATION,
    SPARK_FAIL_ATTEMPTS,
    STARTED_AT_ANNOTATION,
    TASKMANAGERS_ANNOTATION,
)
from sim.pods import (
    AppRef,
    DeploymentView,
    NodeExecutor,
    PodRole,
    PodView,
    executor_placement,
    flink_jobmanager_deployment,
    flink_taskmanager_count,
    flink_taskmanager_name,
    flink_taskmanager_number,
    flink_taskmanager_pod,
    spark_application_id,
    spark_driver_name,
    spark_driver_pod,
    spark_executor_count,
    spark_executor_name,
    spark_executor_number,
    spark_executor_pod,
)
from sim.runtime import InterferenceModel
from sim.units import SpecError

__all__ = [
    "Action",
    "Annotate",
    "CreateDeployment",
    "CreatePod",
    "Decision",
    "DeletePod",
    "EndPod",
    "Observation",
    "RunPlan",
    "SimSettings",
    "WriteStatus",
    "decide",
    "is_over",
    "rejected",
]

SPARK_TERMINAL: Final = ("COMPLETED", "FAILED", "SUBMISSION_FAILED")
SPARK_ENDING: Final = {"SUCCEEDING": "COMPLETED", "FAILING": "FAILED"}  # the driver ended -> what follows
FLINK_TERMINAL_JOB: Final = ("FINISHED", "FAILED")
# Flink's restart strategies (``restart-strategy.type``) that restart a job whose TaskManager was lost.
_FLINK_RESTARTING: Final = frozenset(
    {"fixed-delay", "fixeddelay", "failure-rate", "failurerate", "exponential-delay", "exponentialdelay"}
)


# --- what the shell does ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CreatePod:
    manifest: dict[str, Any]


@dataclass(frozen=True)
class CreateDeployment:
    manifest: dict[str, Any]


@dataclass(frozen=True)
class DeletePod:
    name: str


@dataclass(frozen=True)
class EndPod:
    """Set a pod's phase as its program's exit would (through the pods/status subresource)."""

    pod: PodView
    succeeded: bool
    message: str


@dataclass(frozen=True)
class Annotate:
    annotations: dict[str, str]


@dataclass(frozen=True)
class WriteStatus:
    status: dict[str, Any]


Action = CreateDeployment | CreatePod | DeletePod | EndPod | Annotate | WriteStatus


@dataclass(frozen=True)
class Decision:
    """Actions in the order to take them (objects first, then annotations, then status), events to post once
    they are done, and when to decide again at the latest (None: only when something changes)."""

    actions: tuple[Action, ...] = ()
    events: tuple[Event, ...] = ()
    wake_at: datetime | None = None


# --- what it decides on -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Observation:
    app: Mapping[str, Any]  # the application as the API server returned it
    pods: Sequence[PodView]  # the pods labelled with its uid
    node_executors: Mapping[str, Iterable[NodeExecutor]]  # every node's executors, of all applications
    now: datetime
    deployments: Sequence[DeploymentView] = ()  # a FlinkDeployment's JobManager Deployment(s)
    over: Callable[[str], bool] = lambda uid: False  # whether the application of this uid is over (is_over)
    # every node's executors to be: the applications whose executors are bound for it (required node affinity)
    node_placements: Mapping[str, Iterable[NodeExecutor]] = field(default_factory=dict)


@dataclass(frozen=True)
class RunPlan:
    """When a run started and ends, next to whom, and whether (why) it fails; kept in annotations."""

    started_at: datetime
    ends_at: datetime
    colocated: tuple[str, ...] = ()
    failure: str | None = None

    def annotations(self) -> dict[str, str]:
        written = {
            STARTED_AT_ANNOTATION: self.started_at.isoformat(),
            ENDS_AT_ANNOTATION: self.ends_at.isoformat(),
            COLOCATED_ANNOTATION: ",".join(self.colocated),
        }
        return written | ({FAILURE_ANNOTATION: self.failure} if self.failure is not None else {})

    @classmethod
    def of(cls, annotations: Mapping[str, str]) -> RunPlan | None:
        """The plan recorded on an application; None before its run started (or if the record is unreadable)."""
        try:
            started = datetime.fromisoformat(annotations[STARTED_AT_ANNOTATION])
            ends = datetime.fromisoformat(annotations[ENDS_AT_ANNOTATION])
        except (KeyError, ValueError):
            return None
        colocated = tuple(job for job in annotations.get(COLOCATED_ANNOTATION, "").split(",") if job)
        return cls(started, ends, colocated, annotations.get(FAILURE_ANNOTATION))


@dataclass(frozen=True)
class SimSettings:
    """The workload model and the chance of a random failure (drawn from ``seed`` and the uid)."""

    model: InterferenceModel = field(default_factory=InterferenceModel)
    failure_rate: float = 0.0
    seed: int = 0
    runtime_jitter: float = 0.0  # relative standard deviation of a run's time around the model's

    def plan(self, app: Mapping[str, Any], job: str, colocated: Iterable[str], now: datetime) -> RunPlan:
        others = tuple(sorted(set(colocated)))
        return RunPlan(now, now + self._duration(app, job, others), others, self._failure(app))

    def replan(
        self, app: Mapping[str, Any], run: RunPlan, job: str, colocated: Iterable[str], now: datetime
    ) -> RunPlan:
        """``run`` once ``colocated`` are its neighbours from ``now`` on: the share of its work still left
        takes that share of the model's duration next to them (the same plan if they are its neighbours)."""
        others = tuple(sorted(set(colocated)))
        if others == run.colocated or now >= run.ends_at:
            return run
        before = self._duration(app, job, run.colocated)
        left = min(max((run.ends_at - now) / before, 0.0), 1.0) if before > timedelta(0) else 0.0
        return replace(run, ends_at=now + self._duration(app, job, others) * left, colocated=others)

    def _duration(self, app: Mapping[str, Any], job: str, colocated: tuple[str, ...]) -> timedelta:
        """The model's duration, times this application's pace when runs vary (drawn once per application,
        from ``seed`` and its uid, so a restarted simulator draws the same)."""
        duration = self.model.duration(job, colocated)
        if self.runtime_jitter <= 0:
            return duration
        pace = random.Random(f"{self.seed}:{AppRef.of(app).uid}:pace").gauss(1.0, self.runtime_jitter)  # noqa: S311
        return duration * max(pace, 0.1)

    def _failure(self, app: Mapping[str, Any]) -> str | None:
        ref = AppRef.of(app)
        attempt = _attempt(app)
        spec = app.get("spec") or {}
        conf, key = (
            (spec.get("sparkConf"), SPARK_FAIL_ATTEMPTS)
            if ref.type == SPARK
            else (spec.get("flinkConfiguration"), FLINK_FAIL_ATTEMPTS)
        )
        fail_attempts = _int_or((conf or {}).get(key), 0)
        if attempt <= fail_attempts:
            return f"simulated failure: attempt {attempt}, and {key} fails attempts up to {fail_attempts}"
        if self.failure_rate > 0 and random.Random(f"{self.seed}:{ref.uid}").random() < self.failure_rate:  # noqa: S311
            return f"simulated random failure (failure rate {self.failure_rate:g})"
        return None


def _attempt(app: Mapping[str, Any]) -> int:
    annotations = (app.get("metadata") or {}).get("annotations") or {}
    return max(1, _int_or(annotations.get(ATTEMPT_ANNOTATION), 1))


def _int_or(value: object, default: int) -> int:
    try:
        return int(str(value).strip()) if value is not None else default
    except ValueError:
        return default


# --- deciding -------------------------------------------------------------------------------------------


def decide(observation: Observation, settings: SimSettings) -> Decision:
    """The next step of the application in ``observation`` (see the module docstring)."""
    step = _Step(observation)
    if AppRef.of(observation.app).type == SPARK:
        _spark(step, settings)
    else:
        _flink(step, settings)
    return step.decision()


def rejected(observation: Observation, message: str) -> Decision:
    """The application failed because the API server refused one of its pods (``message`` says why)."""
    step = _Step(observation)
    if AppRef.of(observation.app).type == SPARK:
        if step.status.get("applicationState", {}).get("state", "") == "":
            _spark_submission_failed(step, message)
        else:
            _spark_finish(step, message)
    else:
        _flink_finish(step, message)
    return step.decision()


class _Step:
    """One decision being assembled: the status it changes, the pods, and what to do."""

    def __init__(self, observation: Observation) -> None:
        self.obs = observation
        self.app = observation.app
        self.ref = AppRef.of(observation.app)
        self.now = observation.now
        self.original = copy.deepcopy(dict(self.app.get("status") or {}))
        self.status = copy.deepcopy(self.original)
        self.pods = {pod.name: pod for pod in observation.pods}
        self.recorded: Mapping[str, str] = (self.app.get("metadata") or {}).get("annotations") or {}
        self.run = RunPlan.of(self.recorded)
        self.pod_actions: list[Action] = []
        self.annotations: dict[str, str] = {}
        self.events: list[Event] = []
        self.wake_at: datetime | None = None

    def role(self, role: PodRole) -> list[PodView]:
        return [pod for pod in self.pods.values() if pod.role == role]

    def create(self, manifest: dict[str, Any]) -> None:
        if manifest["metadata"]["name"] not in self.pods:
            self.pod_actions.append(CreatePod(manifest))

    def delete(self, pods: Iterable[PodView]) -> None:
        self.pod_actions.extend(DeletePod(pod.name) for pod in pods if not pod.terminating)

    def end(self, pod: PodView | None, *, succeeded: bool, message: str) -> None:
        if pod is not None and not pod.ended and not pod.terminating:
            self.pod_actions.append(EndPod(pod, succeeded, message))

    def event(self, reason: str, message: str, *, warning: bool = False) -> None:
        self.events.append(Event(reason, message, warning=warning))

    def start_run(self, settings: SimSettings, executors: Sequence[PodView]) -> RunPlan:
        """Plan the run that starts now: its job next to the other jobs on its executors' nodes."""
        plan = settings.plan(self.app, self._job(executors), self._neighbours(executors), self.now)
        self.annotations.update(plan.annotations())
        self.run = plan
        return plan

    def plan_startup(self, settings: SimSettings) -> None:
        """On first sight of the application, where the model has start-ups: that moment, and when its executors are
        due (recorded)."""
        if SEEN_AT_ANNOTATION in self.recorded or not settings.model.startups:
            return
        self.annotations[SEEN_AT_ANNOTATION] = self.now.isoformat()
        self._startup_due(settings, self.now, _moment(self.recorded.get(EXECUTORS_AT_ANNOTATION)))

    def executors_due(self, settings: SimSettings) -> bool:
        """Whether the executors may be created now: once the start-up is over (decided again for the neighbours
        known now while none exists); until then, wake up then."""
        due = _moment(self.recorded.get(EXECUTORS_AT_ANNOTATION))
        seen = _moment(self.recorded.get(SEEN_AT_ANNOTATION))
        if seen is not None and self.run is None and not any(pod.role.is_executor for pod in self.pods.values()):
            due = self._startup_due(settings, seen, due)
        if due is not None and self.now < due:
            self.wake_at = due
            return False
        return True

    def _startup_due(self, settings: SimSettings, seen: datetime, recorded: datetime | None) -> datetime | None:
        """When the executors are due: ``seen`` plus the job's start-up next to the jobs of other applications on (or
        bound for) the nodes they are bound for, never earlier than ``recorded`` (recorded when it moves)."""
        placement = executor_placement(self.app)
        if placement is None:
            return recorded
        job, nodes = placement
        due = seen + settings.model.startup_delay(job, self._neighbours_on(nodes, self.obs.node_placements))
        if due <= (recorded or seen):
            return recorded
        self.annotations[EXECUTORS_AT_ANNOTATION] = due.isoformat()
        return due

    def slow_down_for_arrivals(self, settings: SimSettings, executors: Sequence[PodView]) -> None:
        """The run in progress, replanned if jobs arrived on its executors' nodes since it was planned."""
        if self.run is None or self.now >= self.run.ends_at:
            return
        arrived = self._neighbours(executors) - set(self.run.colocated)
        if arrived:
            neighbours = {*self.run.colocated, *arrived}
            self.run = settings.replan(self.app, self.run, self._job(executors), neighbours, self.now)
            self.annotations.update(self.run.annotations())

    def _job(self, executors: Sequence[PodView]) -> str:
        return executors[0].job if executors else self.ref.name

    def _neighbours(self, executors: Sequence[PodView]) -> set[str]:
        """The jobs of other applications' executors on the nodes of ``executors``."""
        return self._neighbours_on({pod.node for pod in executors if pod.node is not None})

    def _neighbours_on(self, nodes: Collection[str], *more: Mapping[str, Iterable[NodeExecutor]]) -> set[str]:
        """The jobs of other applications' executors on ``nodes`` (and in ``more`` there) whose runs are not over."""
        return {
            executor.job
            for by_node in (self.obs.node_executors, *more)
            for node in nodes
            for executor in by_node.get(node, ())
            if executor.app_uid != self.ref.uid and not self.obs.over(executor.app_uid)
        }

    def decision(self) -> Decision:
        actions = list(self.pod_actions)
        if self.annotations:
            actions.append(Annotate(self.annotations))
        if self.status != self.original:
            actions.append(WriteStatus(self.status))
        if self.run is not None and self.now < self.run.ends_at:
            self.wake_at = min(self.run.ends_at, self.wake_at or self.run.ends_at)
        return Decision(tuple(actions), tuple(self.events), self.wake_at)


def _moment(text: object) -> datetime | None:
    """An ISO 8601 time (a recorded annotation, a creationTimestamp); None if absent or unreadable."""
    try:
        moment = datetime.fromisoformat(str(text)) if text else None
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC) if moment is not None and moment.tzinfo is None else moment


def _time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _millis(moment: datetime) -> str:
    return str(int(moment.timestamp() * 1000))


def _head_problem(pod: PodView | None, what: str, *, was_running: bool) -> str | None:
    """Why the driver (JobManager) ``pod`` ends the application; None while it is fine or not there yet."""
    if pod is None or pod.terminating:
        return f"{what} was deleted" if was_running else None
    if pod.phase == "Failed":
        return f"{what} failed"
    return f"{what} ended" if pod.ended else None


def _lost(pods: Sequence[PodView], expected: Sequence[str], *, started: bool, what: str) -> str | None:
    """The first expected executor that failed, or (once the run started) is gone or going; None if none."""
    by_name = {pod.name: pod for pod in pods}
    for name in expected:
        pod = by_name.get(name)
        if pod is not None and pod.phase == "Failed":
            return f"{what} lost: {name} failed"
        if started and (pod is None or pod.terminating or pod.ended):
            return f"{what} lost: {name} was deleted"
    return None


def _all_running(pods: Sequence[PodView], expected: Sequence[str]) -> bool:
    by_name = {pod.name: pod for pod in pods}
    return all(name in by_name and by_name[name].running for name in expected)


# --- Spark ----------------------------------------------------------------------------------------------

_EXECUTOR_STATES: Final = {"Pending": "PENDING", "Running": "RUNNING", "Succeeded": "COMPLETED", "Failed": "FAILED"}


def _spark(step: _Step, settings: SimSettings) -> None:
    state = step.status.get("applicationState", {}).get("state", "")
    driver = step.pods.get(spark_driver_name(step.ref.name))
    if state in SPARK_TERMINAL:
        # Done: whatever still runs goes (a crash between the pod actions and the status write left it).
        step.delete(step.role(PodRole.EXECUTOR))
        message = step.status["applicationState"].get("errorMessage", "")
        step.end(driver, succeeded=state == "COMPLETED", message=message)
    elif state in SPARK_ENDING:
        _spark_terminate(step, driver, SPARK_ENDING[state])
    elif step.run is not None and step.now >= step.run.ends_at:
        _spark_finish(step, step.run.failure)
    elif state == "":
        step.plan_startup(settings)
        _spark_submit(step, driver)
    else:
        _spark_run(step, settings, driver, running_before=state == "RUNNING")


def _spark_run(step: _Step, settings: SimSettings, driver: PodView | None, *, running_before: bool) -> None:
    """SUBMITTED or RUNNING: the executors come once the driver runs, the run starts once they all do."""
    try:
        count = spark_executor_count(step.app)
    except SpecError as err:
        _spark_finish(step, str(err))
        return
    problem = _head_problem(driver, f"driver pod {spark_driver_name(step.ref.name)}", was_running=running_before)
    if problem is not None:
        _spark_finish(step, problem)
        return
    if driver is None:
        _spark_submit(step, driver)  # not seen yet, or gone before it ran: submit (again)
        return
    if not driver.running:
        return  # pending, or being deleted before it ran (then submitted again once gone)
    if not running_before:
        step.status["applicationState"] = {"state": "RUNNING"}
        step.event("SparkApplicationRunning", f"SparkApplication {step.ref.name} is running")
    executors = {pod.name: pod for pod in step.role(PodRole.EXECUTOR)}
    seen = {
        **step.status.get("executorState", {}),
        **{pod.name: _EXECUTOR_STATES.get(pod.phase, "UNKNOWN") for pod in executors.values()},
    }
    lost = _lost_executors(seen, executors)
    step.status["executorState"] = seen | lost
    failed = sum(1 for state in lost.values() if state == "FAILED")
    if failed > (limit := _max_executor_failures(step.app, count)):
        _spark_finish(
            step, f"executor lost: {failed} executors failed, more than spark.executor.maxNumFailures ({limit})"
        )
        return
    step.delete(executors[name] for name in lost if name in executors)  # Spark removes a lost executor's pod
    wanted = _wanted_executors(step.app, count, lost)
    if not step.executors_due(settings):
        return
    for number, name in wanted.items():
        if name not in executors:
            step.create(spark_executor_pod(step.app, number, driver))
    live = [executors[name] for name in wanted.values() if name in executors]
    if step.run is None and len(live) == len(wanted) and all(pod.running for pod in live):
        step.start_run(settings, live)
    else:
        step.slow_down_for_arrivals(settings, live)


def _lost_executors(seen: Mapping[str, str], executors: Mapping[str, PodView]) -> dict[str, str]:
    """The executors seen before that are gone, going or ended, each with the state it is left in: FAILED or
    COMPLETED as its pod ended, else UNKNOWN (deleted while the application runs)."""
    lost = {}
    for name, state in seen.items():
        pod = executors.get(name)
        if pod is None or pod.terminating or pod.ended:
            lost[name] = state if state in ("FAILED", "COMPLETED") else "UNKNOWN"
    return lost


def _wanted_executors(app: Mapping[str, Any], count: int, lost: Mapping[str, str]) -> dict[int, str]:
    """The executors that should exist, by id: the first ``count`` ids no lost executor had."""
    gone = {spark_executor_number(app, name) for name in lost}
    numbers = (n for n in itertools.count(1) if n not in gone)
    return {n: spark_executor_name(app, n) for n in itertools.islice(numbers, count)}


def _max_executor_failures(app: Mapping[str, Any], count: int) -> int:
    """``spark.executor.maxNumFailures``, else Spark's default: twice the executors, at least 3."""
    conf = (app.get("spec") or {}).get("sparkConf") or {}
    return _int_or(conf.get("spark.executor.maxNumFailures"), max(3, 2 * count))


def _spark_submit(step: _Step, driver: PodView | None) -> None:
    try:
        manifest = spark_driver_pod(step.app)
    except SpecError as err:
        _spark_submission_failed(step, str(err))
        return
    if driver is None:
        step.create(manifest)
    if step.status.get("applicationState", {}).get("state", "") == "":
        step.status.update(
            {
                "sparkApplicationId": spark_application_id(step.ref),
                "submissionID": step.ref.uid,
                "lastSubmissionAttemptTime": _time(step.now),
                "submissionAttempts": 1,
                "executionAttempts": 1,
                "driverInfo": {"podName": manifest["metadata"]["name"]},
                "applicationState": {"state": "SUBMITTED"},
            }
        )
        step.event("SparkApplicationSubmitted", f"SparkApplication {step.ref.name} was submitted")


def _spark_submission_failed(step: _Step, message: str) -> None:
    step.status.update(
        {
            "applicationState": {"state": "SUBMISSION_FAILED", "errorMessage": message},
            "lastSubmissionAttemptTime": _time(step.now),
            "submissionAttempts": 1,
            "terminationTime": _time(step.now),
        }
    )
    step.event("SparkApplicationSubmissionFailed", f"SparkApplication {step.ref.name}: {message}", warning=True)


def _spark_finish(step: _Step, failure: str | None) -> None:
    """The driver exits: executors deleted, driver Succeeded/Failed, SUCCEEDING/FAILING."""
    succeeded = failure is None
    step.delete(step.role(PodRole.EXECUTOR))
    step.end(step.pods.get(spark_driver_name(step.ref.name)), succeeded=succeeded, message=failure or "")
    ending = "SUCCEEDING" if succeeded else "FAILING"
    step.status["applicationState"] = {"state": ending} if succeeded else {"state": ending, "errorMessage": failure}
    step.status["terminationTime"] = _time(step.now)


def _spark_terminate(step: _Step, driver: PodView | None, ended: str) -> None:
    """SUCCEEDING/FAILING -> COMPLETED/FAILED: what still runs goes; every executor seen ends in that state,
    but one lost on the way is FAILED unless it completed (as the real operator records a deleted one)."""
    succeeded = ended == "COMPLETED"
    failure = step.status["applicationState"].get("errorMessage")
    executors = step.role(PodRole.EXECUTOR)
    step.delete(executors)
    step.end(driver, succeeded=succeeded, message=failure or "")
    states = step.status.get("executorState", {})
    step.status["executorState"] = {
        **{name: ended for name in (*states, *(pod.name for pod in executors))},
        **{name: "FAILED" for name, state in states.items() if state in ("UNKNOWN", "FAILED")},
        **{name: state for name, state in states.items() if state == "COMPLETED"},
    }
    step.status["applicationState"] = {"state": ended} if succeeded else {"state": ended, "errorMessage": failure}
    if succeeded:
        step.event("SparkApplicationCompleted", f"SparkApplication {step.ref.name} completed")
    else:
        step.event("SparkApplicationFailed", f"SparkApplication {step.ref.name} failed: {failure}", warning=True)


# --- Flink ----------------------------------------------------------------------------------------------


def _flink(step: _Step, settings: SimSettings) -> None:
    lifecycle = step.status.get("lifecycleState", "")
    if _flink_over(step.status):
        return  # the application cluster stays until the FlinkDeployment is deleted, as the operator leaves it
    deployment = next((d for d in step.obs.deployments if not d.terminating), None)
    if step.run is not None and step.now >= step.run.ends_at:
        _flink_finish(step, step.run.failure)
    elif lifecycle == "":
        step.plan_startup(settings)
        step.status.update(
            {
                "lifecycleState": "CREATED",
                "jobManagerDeploymentStatus": "DEPLOYING",
                "jobStatus": _job_state(step, "RECONCILING"),
            }
        )
    elif lifecycle == "CREATED" or deployment is None:
        _flink_deploy(step)  # not seen yet, or deleted before its job ended: deploy (again)
    else:
        _flink_run(step, settings, deployment)


def _flink_over(status: Mapping[str, Any]) -> bool:
    return status.get("jobStatus", {}).get("state") in FLINK_TERMINAL_JOB or status.get("lifecycleState") == "FAILED"


def _flink_deploy(step: _Step) -> None:
    try:
        manifest = flink_jobmanager_deployment(step.app)
    except SpecError as err:
        _flink_finish(step, str(err))
        return
    step.pod_actions.append(CreateDeployment(manifest))
    if step.status.get("lifecycleState") != "DEPLOYED":
        step.status.update(
            {
                "lifecycleState": "DEPLOYED",
                "jobManagerDeploymentStatus": "DEPLOYING",
                "jobStatus": _job_state(step, "RECONCILING"),
            }
        )
        step.event("Submit", f"deploying the application cluster of {step.ref.name}")


def _flink_run(step: _Step, settings: SimSettings, deployment: DeploymentView) -> None:
    """Deployed: the job runs once the JobManager does, and asks for its TaskManagers; the run starts once they
    all run. A TaskManager lost is replaced under the next number, as Flink's resource manager does; once the run
    started, the job survives the loss only with a restart strategy."""
    try:
        count = flink_taskmanager_count(step.app)
    except SpecError as err:
        _flink_finish(step, str(err))
        return
    jobmanager = next((pod for pod in step.role(PodRole.JOBMANAGER) if pod.running), None)
    readiness = "READY" if jobmanager is not None else "DEPLOYED_NOT_READY"
    if step.status.get("jobManagerDeploymentStatus") != readiness:
        step.status["jobManagerDeploymentStatus"] = readiness
        if jobmanager is not None:
            step.event("JobManagerReady", f"the JobManager of {step.ref.name} is ready")
    if jobmanager is None:
        return
    if step.status.get("jobStatus", {}).get("state") != "RUNNING":
        step.status["lifecycleState"] = "STABLE"
        step.status["jobStatus"] = {
            **_job_state(step, "RUNNING"),
            "jobName": step.ref.name,
            "jobId": step.ref.uid_hex,
            "startTime": _millis(step.now),
        }
        step.event("JobStatusChanged", f"the job of {step.ref.name} is RUNNING")
    taskmanagers = {pod.name: pod for pod in step.role(PodRole.TASKMANAGER)}
    seen = _seen_taskmanagers(step, taskmanagers)
    lost = {
        number: name
        for number in seen
        if (pod := taskmanagers.get(name := flink_taskmanager_name(step.ref.name, number))) is None
        or pod.terminating
        or pod.ended
    }
    if lost and step.run is not None and not _flink_restarts(step.app):
        _, name = min(lost.items())
        _flink_finish(step, f"TaskManager lost: {name} {_how_lost(taskmanagers.get(name))}")
        return
    step.delete(taskmanagers[name] for name in lost.values() if name in taskmanagers)
    numbers = (n for n in itertools.count(1) if n not in lost)
    wanted = {flink_taskmanager_name(step.ref.name, n): n for n in itertools.islice(numbers, count)}
    if not step.executors_due(settings):
        return
    for name, number in wanted.items():
        if name not in taskmanagers:
            step.create(flink_taskmanager_pod(step.app, number, deployment))
    live = [taskmanagers[name] for name in wanted if name in taskmanagers]
    if step.run is None and len(live) == count and all(pod.running for pod in live):
        step.start_run(settings, live)
    else:
        step.slow_down_for_arrivals(settings, live)


def _seen_taskmanagers(step: _Step, taskmanagers: Mapping[str, PodView]) -> set[int]:
    """The numbers of every TaskManager seen so far (recorded in an annotation: a lost one is never reused)."""
    recorded = step.recorded.get(TASKMANAGERS_ANNOTATION, "")
    seen = {int(n) for n in recorded.split(",") if n.strip().isdigit()}
    visible = {n for name in taskmanagers if (n := flink_taskmanager_number(step.ref.name, name)) is not None}
    if not visible <= seen:
        seen |= visible
        step.annotations[TASKMANAGERS_ANNOTATION] = ",".join(map(str, sorted(seen)))
    return seen


def _how_lost(pod: PodView | None) -> str:
    return "failed" if pod is not None and pod.phase == "Failed" else "was deleted"


def _flink_restarts(app: Mapping[str, Any]) -> bool:
    """Whether Flink restarts the job after a failure: a restart strategy set, or (unset) checkpointing on."""
    conf = (app.get("spec") or {}).get("flinkConfiguration") or {}
    strategy = str(conf.get("restart-strategy.type") or conf.get("restart-strategy") or "").strip().lower()
    if strategy:
        return strategy in _FLINK_RESTARTING
    return bool(conf.get("execution.checkpointing.interval"))


def _job_state(step: _Step, state: str) -> dict[str, Any]:
    return {**step.status.get("jobStatus", {}), "state": state, "updateTime": _millis(step.now)}


def _flink_finish(step: _Step, failure: str | None) -> None:
    """The job ends, FINISHED or FAILED; its JobManager and TaskManagers stay (the operator keeps the cluster
    of a finished application until the FlinkDeployment is deleted)."""
    state = "FINISHED" if failure is None else "FAILED"
    step.status["jobStatus"] = _job_state(step, state)
    if failure is None:
        step.status["lifecycleState"] = "STABLE"
        step.event("JobStatusChanged", f"the job of {step.ref.name} is FINISHED")
    else:
        step.status["lifecycleState"] = "FAILED"
        step.status["error"] = json.dumps({"type": "org.apache.flink.runtime.JobException", "message": failure})
        step.event("JobStatusChanged", f"the job of {step.ref.name} FAILED: {failure}", warning=True)


def is_over(app: Mapping[str, Any]) -> bool:
    """Whether an application's run is over (its executors, if any are left, do no work)."""
    status = app.get("status") or {}
    if AppRef.of(app).type == SPARK:
        state = status.get("applicationState", {}).get("state", "")
        return state in SPARK_TERMINAL or state in SPARK_ENDING
    return _flink_over(status)
