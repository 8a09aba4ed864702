"""The external scheduler's view: the original ESI's JSON shapes, from and to esi's resources.

Schedulers written for the original read these shapes and state names, so the wire keeps them: Testbed
states ``INITIAL``/``SUCCESS``/``RUNNING``/``ERROR``, slot states ``FREE``/``RESERVED``/``OCCUPIED``,
BatchJob states ``ReadyState`` … ``CompletedState``, Scheduling states ``AcquireState`` …
``CompletedState`` and per-job ``Acquiring`` … ``Completed``. Each resource has two views (``View``): the
original's fields exactly (``Original*``, the default on the wire), and esi's, which adds esi's own words
(``namespace``, ``esiState``, ``waitingFor``, ``message``, …) for the clients that ask
(docs/compatibility.md#views, #state-names). ``External*`` is esi's view; the original's is the same object
written with fewer fields (``view_json``). People read esi's names (``esiState``; a slot's and a job entry's
``esi_state``, from ``ESI_STATE_NAMES``), as kubectl shows them; the original's stay on the wire.

A Testbed without slots yet is an empty ``slotsByNode`` (docs/compatibility.md#rest-api); a run that
failed is ``successful: false`` and a job whose last run failed is ``FailedSubmissionState``. Pure: models
in, models out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Final, Literal, Self

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError, field_validator, model_validator

from esi.decisions.node_choice import NodeChoice
from esi.resources.batchjob import BatchJob, BatchJobState, RunOutcome, RunRecord
from esi.resources.meta import Condition, EsiModel, ObjectName, ObjectReference
from esi.resources.scheduling import (
    MAX_QUEUE,
    MAX_SLOT_IDS,
    MAX_SLOT_JOBS,
    JobState,
    Scheduling,
    SchedulingState,
    SchedulingStatus,
    distinct_slot_ids,
)
from esi.resources.testbed import MAX_SLOTS, Slot, SlotState, Testbed, TestbedState

__all__ = [
    "ESI_STATE_NAMES",
    "ApiError",
    "ErrorBody",
    "ExternalBatchJob",
    "ExternalScheduledEvent",
    "ExternalScheduling",
    "ExternalSlot",
    "ExternalSlots",
    "ExternalSlotsJob",
    "ExternalTestbed",
    "FieldProblem",
    "JobStatusEntry",
    "JobSummary",
    "OriginalBatchJob",
    "OriginalScheduledEvent",
    "OriginalScheduling",
    "OriginalSlot",
    "OriginalTestbed",
    "Overview",
    "ResourceModification",
    "SchedulingSubmission",
    "SchedulingSummary",
    "SubmittedSlots",
    "SubmittedSlotsJob",
    "TestbedNode",
    "TestbedNodes",
    "TestbedNodesRequest",
    "TestbedSummary",
    "View",
    "external_batchjob",
    "external_scheduling",
    "external_testbed",
    "field_problems",
    "overview",
    "scheduling_spec",
    "testbed_nodes",
    "view_json",
]

_TESTBED_STATES = {
    TestbedState.PENDING: "INITIAL",
    TestbedState.READY: "SUCCESS",
    TestbedState.IN_USE: "RUNNING",
    TestbedState.DEGRADED: "ERROR",
}
_SLOT_STATES = {SlotState.FREE: "FREE", SlotState.RESERVED: "RESERVED", SlotState.OCCUPIED: "OCCUPIED"}
_BATCHJOB_STATES = {
    BatchJobState.READY: "ReadyState",
    BatchJobState.QUEUED: "InQueueState",
    BatchJobState.SUBMITTED: "SubmittedState",
    BatchJobState.SCHEDULED: "ScheduledState",
    BatchJobState.RUNNING: "RunningState",
    BatchJobState.SUCCEEDED: "CompletedState",
    BatchJobState.FAILED: "FailedSubmissionState",
    BatchJobState.RELEASING: "PendingDeletion",
}
_JOB_STATES = {
    JobState.RESERVED: "Submitted",
    JobState.SUBMITTED: "Submitted",
    JobState.RUNNING: "Scheduled",
    JobState.SUCCEEDED: "Completed",
    JobState.FAILED: "Completed",
}
# A waiting job's name: InQueue once its Scheduling holds the Testbed and its jobs, Acquiring before.
_WAITING_HELD, _WAITING_ACQUIRING = "InQueue", "Acquiring"


def _esi_names(states: Iterable[tuple[StrEnum, str]]) -> dict[str, str]:
    """esi's name for each of the original's names: the esi state written so. Where several are (a job's
    ``Submitted`` is esi's Reserved or Submitted, its ``Completed`` Succeeded or Failed), the wire does not say
    which, and the name is kept: it is esi's word too (``Submitted``; ``Completed``, as esi calls a Scheduling
    whose jobs have all run)."""
    shared: dict[str, set[str]] = {}
    for state, wire in states:
        shared.setdefault(wire, set()).add(state.value)
    return {wire: next(iter(names)) if len(names) == 1 else wire for wire, names in shared.items()}


# What people are shown for the states a slot and a job entry have only in the original's names (Testbeds,
# BatchJobs and Schedulings carry esi's own in ``esiState``), each in the order of a slot's or job's life: the
# CLI, the UI (``/ui/states.js``) and ``esi_state`` of ``OriginalSlot`` and ``JobStatusEntry`` read them here.
ESI_STATE_NAMES: Final[Mapping[Literal["slot", "job"], Mapping[str, str]]] = {
    "slot": _esi_names(_SLOT_STATES.items()),
    "job": _esi_names(
        [(JobState.WAITING, _WAITING_ACQUIRING), (JobState.WAITING, _WAITING_HELD), *_JOB_STATES.items()]
    ),
}


class View(StrEnum):
    """Which shape an answer or STOMP message has.

    ``original``: exactly the original ESI's fields, so clients that map them strictly (as its Java client's
    STOMP handler did) read them; the default. ``esi``: the same plus esi's own fields (``namespace``,
    ``esiState``, ``waitingFor``, ``message``, ``conditions``, ``heldBy``, a run's ``attempt``, ``slots``,
    ``nodes``, ``colocatedJobs`` and ``incomplete``, a slot's ``noRoom``), for clients that ask: esi's client,
    CLI and UI (docs/compatibility.md#views).
    """

    ORIGINAL = "original"
    ESI = "esi"


class _Wire(EsiModel):
    """A response shape: the original's field names (camelCase), every field written, even when null.
    Fields a newer server adds are ignored when read, so older clients keep working."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class OriginalSlot(_Wire):
    """A slot in the original's shape."""

    state: str
    pod_name: str | None = None
    pod_u_id: str | None = Field(default=None, description="Not tracked by esi; always null.")
    node_name: str
    node_id: int
    slot_position_on_node: int
    position: int
    reserved_for: str | None = Field(default=None, description="The job the slot is reserved for or used by.")

    @property
    def esi_state(self) -> str:
        """The slot's state in esi's words (``Free``, ``Reserved``, ``Occupied``)."""
        return ESI_STATE_NAMES["slot"].get(self.state, self.state)


class ExternalSlot(OriginalSlot):
    """A slot in esi's view: the original's fields and esi's."""

    no_room: str | None = Field(default=None, description=Slot.model_fields["no_room"].description)


class OriginalTestbed(_Wire):
    """A Testbed in the original's shape."""

    name: str
    state: str
    number_of_nodes: int
    number_of_slots_per_node: int
    slots_by_node: Mapping[str, Sequence[OriginalSlot]]


class ExternalTestbed(OriginalTestbed):
    """A Testbed in esi's view: the original's fields and esi's."""

    namespace: str
    esi_state: str
    slots_by_node: Mapping[str, Sequence[ExternalSlot]]
    held_by: str | None = None
    message: str | None = None
    conditions: list[Condition] = Field(default_factory=list)


class OriginalScheduledEvent(_Wire):
    """One run in the original's shape."""

    start: datetime
    stop: datetime | None = None
    successful: bool | None = None
    scheduling: ObjectReference


class ExternalScheduledEvent(OriginalScheduledEvent):
    """One run in esi's view: the original's fields and esi's."""

    attempt: int
    testbed: str | None = Field(default=None, description="The Testbed it ran on.")
    slots: list[int]
    nodes: list[str]
    colocated_jobs: list[str]
    outcome: RunOutcome | None = Field(default=None, description="How it ended; absent while it runs.")
    reason: str | None = Field(default=None, description=RunRecord.model_fields["reason"].description)
    incomplete: str | None = None


class OriginalBatchJob(_Wire):
    """A BatchJob in the original's shape."""

    name: str
    state: str | None = None
    external_scheduler: dict[str, list[dict[str, str]]] | None = None
    scheduled_events: Sequence[OriginalScheduledEvent] = Field(default_factory=list)


class ExternalBatchJob(OriginalBatchJob):
    """A BatchJob in esi's view: the original's fields and esi's."""

    namespace: str | None = None
    esi_state: str | None = None
    scheduled_events: Sequence[ExternalScheduledEvent] = Field(default_factory=list)
    message: str | None = None
    waiting_for: str | None = None
    conditions: list[Condition] = Field(default_factory=list)


class JobStatusEntry(_Wire):
    name: str
    state: str

    @property
    def esi_state(self) -> str:
        """The job's state in esi's words (``Waiting``, ``Submitted``, ``Running``, ``Completed``)."""
        return ESI_STATE_NAMES["job"].get(self.state, self.state)


class ExternalSlotsJob(EsiModel):
    name: str = Field(min_length=1, description="The BatchJob.")
    slots: list[int] = Field(min_length=1, description="Its slot ids, one executor each.")


class SubmittedSlotsJob(ExternalSlotsJob):
    """A job of a submission's slot lists: its name an object name, its slot ids distinct and non-negative
    integers (``true`` is no slot id)."""

    name: ObjectName = Field(description="The BatchJob.")
    slots: list[Annotated[int, Field(strict=True, ge=0)]] = Field(
        min_length=1,
        max_length=MAX_SLOT_IDS,
        description="Its slot ids, distinct, one executor each.",
        json_schema_extra={"uniqueItems": True},
    )

    _distinct = field_validator("slots")(distinct_slot_ids)


class ExternalSlots(EsiModel):
    mode: Literal["STRICT", "RELAXED", "strict", "relaxed"] = Field(
        description="STRICT: in order, none overtakes; RELAXED: any job whose slots are free starts."
    )
    jobs: Sequence[ExternalSlotsJob] = Field(min_length=1)


class SubmittedSlots(ExternalSlots):
    jobs: list[SubmittedSlotsJob] = Field(min_length=1, max_length=MAX_SLOT_JOBS, description="Each job once.")


class _Strategy(EsiModel):
    """A Scheduling's Testbed and exactly one of a queue or slot lists, as the original's clients write them."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    name: str = Field(min_length=1, max_length=253)
    test_bed: str = Field(min_length=1, max_length=253, description="The Testbed's name.")
    queue: list[str] | None = Field(default=None, description="Job names in order; k times = k executors.")
    slots: ExternalSlots | None = None

    @field_validator("name", "test_bed")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value

    @model_validator(mode="after")
    def _exactly_one_strategy(self) -> Self:
        if (self.queue is None) == (self.slots is None):
            raise ValueError("set exactly one of queue or slots")
        return self


# A Scheduling manifest's names for what the submission names otherwise: its name here, and what it holds.
_MANIFEST_NAMES: Final = {
    "testbed": ("testBed", "the Testbed's name"),
    "queueBased": ("queue", "the jobs' names, in order"),
    "slotBased": ("slots", "{mode, jobs: [{name, slots}]}"),
}


class SchedulingSubmission(_Strategy):
    """``POST /external/schedulings``: what the original's clients send. They send every field of the
    Scheduling they hold, nulls included, and what they read back: ``state``, ``jobStatus`` and any other
    field are accepted and ignored. A Scheduling manifest, or a body written with a manifest's names, is
    refused with the names this shape has."""

    model_config = ConfigDict(
        extra="ignore",
        frozen=True,
        json_schema_extra={
            "oneOf": [
                {"required": ["queue"], "properties": {"queue": {"type": "array"}}},
                {"required": ["slots"], "properties": {"slots": {"type": "object"}}},
            ]
        },
    )

    # What the server takes: every reference an object name, so that the Scheduling can ever find it.
    name: ObjectName
    test_bed: ObjectName = Field(description="The Testbed's name.")
    queue: list[ObjectName] | None = Field(
        default=None, min_length=1, max_length=MAX_QUEUE, description="Job names in order; k times = k executors."
    )
    slots: SubmittedSlots | None = None
    state: Any = Field(default=None, description="Read-only: ignored when sent.")
    job_status: Any = Field(default=None, description="Read-only: ignored when sent.")

    @model_validator(mode="before")
    @classmethod
    def _not_a_manifest(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        if "spec" in data and ("kind" in data or "apiVersion" in data):
            raise ValueError(
                "this is a Scheduling manifest: send {name, testBed, queue | slots} instead (its metadata.name, "
                "spec.testbed.name and the jobs' names), or submit the manifest with esi submit"
            )
        renamed = [
            f"{manifest_name} is a manifest's name: here it is {name} ({what})"
            for manifest_name, (name, what) in _MANIFEST_NAMES.items()
            if manifest_name in data and name not in data
        ]
        if renamed:
            raise ValueError("; ".join(renamed))
        return data


class OriginalScheduling(_Strategy):
    """A Scheduling in the original's shape (esi always writes ``state``; one built to be submitted has none)."""

    state: str | None = None
    job_status: list[JobStatusEntry] = Field(default_factory=list)


class ExternalScheduling(OriginalScheduling):
    """A Scheduling in esi's view: the original's fields and esi's."""

    namespace: str | None = None
    esi_state: str | None = None
    waiting_for: str | None = None
    conditions: list[Condition] = Field(default_factory=list)


class ResourceModification(_Wire):
    """A STOMP message: what happened (``ADDED``, ``MODIFIED``, ``DELETED``) to a resource."""

    action: Literal["ADDED", "MODIFIED", "DELETED", "ERROR"]
    resource: Any


class TestbedNodesRequest(EsiModel):
    """``POST /external/testbeds/{name}/nodes``: set the Testbed up on this many nodes (esi's own route)."""

    count: int = Field(ge=1, le=MAX_SLOTS, description="How many nodes the Testbed is to have.")
    dry_run: bool = Field(default=False, description="Only answer the choice; label no node.")


class TestbedNode(_Wire):
    """A node chosen for a Testbed."""

    name: str
    node_id: int = Field(description="Its id: the value of the Testbed's node label on it.")
    free_cpu: str = Field(description="The cpu its pods leave unrequested, the Testbed's own not counted.")
    free_memory: str = Field(description="The memory its pods leave unrequested, the Testbed's own not counted.")
    room: int = Field(description="Whole slots of the Testbed's size that room holds (it gets slotsPerNode).")
    labelled: bool = Field(description="Its label is written now (false: it carried it with this id already).")


class TestbedNodes(_Wire):
    """The Testbed's nodes after ``POST /external/testbeds/{name}/nodes`` (with ``dryRun``: as they would be)."""

    testbed: str
    namespace: str
    node_label: str
    dry_run: bool
    nodes: list[TestbedNode] = Field(description="Ordered by node id.")
    unlabelled: list[str] = Field(default_factory=list, description="Nodes of the Testbed that lose its label.")


def testbed_nodes(testbed: Testbed, choice: NodeChoice, *, dry_run: bool) -> TestbedNodes:
    return TestbedNodes(
        testbed=testbed.metadata.name,
        namespace=testbed.metadata.namespace or "",
        node_label=testbed.spec.node_label,
        dry_run=dry_run,
        nodes=[
            TestbedNode(
                name=node.name,
                node_id=node.node_id,
                free_cpu=str(node.free.cpu),
                free_memory=str(node.free.memory),
                room=node.room,
                labelled=not node.kept,
            )
            for node in choice.chosen
        ],
        unlabelled=list(choice.remove_labels),
    )


_ORIGINAL_SHAPES: Final[dict[type[EsiModel], TypeAdapter[Any]]] = {
    ExternalTestbed: TypeAdapter(OriginalTestbed),
    ExternalBatchJob: TypeAdapter(OriginalBatchJob),
    ExternalScheduling: TypeAdapter(OriginalScheduling),
}


def view_json(resource: ExternalTestbed | ExternalBatchJob | ExternalScheduling, view: View) -> bytes:
    """One resource's JSON in the view asked for: all of esi's view, or only the original's fields of it."""
    if view is View.ESI:
        return resource.model_dump_json().encode()
    return bytes(_ORIGINAL_SHAPES[type(resource)].dump_json(resource))


def external_testbed(testbed: Testbed) -> ExternalTestbed:
    status = testbed.status
    slots = status.slots if status is not None else []
    by_node: dict[str, list[ExternalSlot]] = {}
    for slot in sorted(slots, key=lambda s: s.id):
        by_node.setdefault(slot.node_name, []).append(
            ExternalSlot(
                state=_SLOT_STATES[slot.state],
                pod_name=slot.pod,
                node_name=slot.node_name,
                node_id=slot.node_id,
                slot_position_on_node=slot.position,
                position=slot.id,
                reserved_for=slot.job,
                no_room=slot.no_room,
            )
        )
    state = status.state if status is not None else TestbedState.PENDING
    return ExternalTestbed(
        name=testbed.metadata.name,
        namespace=testbed.metadata.namespace or "",
        state=_TESTBED_STATES[state],
        esi_state=state.value,
        number_of_nodes=len(by_node),
        number_of_slots_per_node=testbed.spec.slots_per_node,
        slots_by_node=by_node,
        held_by=status.scheduling if status is not None else None,
        message=status.message if status is not None else None,
        conditions=list(status.conditions) if status is not None else [],
    )


def _event(run: RunRecord, namespace: str | None) -> ExternalScheduledEvent:
    return ExternalScheduledEvent(
        start=run.start,
        stop=run.end,
        successful=None if run.outcome is None else run.outcome.value == "Succeeded",
        scheduling=ObjectReference(name=run.scheduling, namespace=namespace),
        attempt=run.attempt,
        testbed=run.testbed,
        slots=run.slots,
        nodes=run.nodes,
        colocated_jobs=run.colocated_jobs,
        outcome=run.outcome,
        reason=run.reason,
        incomplete=run.incomplete,
    )


def external_batchjob(job: BatchJob) -> ExternalBatchJob:
    status = job.status
    namespace = job.metadata.namespace
    return ExternalBatchJob(
        name=job.metadata.name,
        namespace=namespace,
        state=_BATCHJOB_STATES[status.state] if status is not None else "ReadyState",
        esi_state=status.state.value if status is not None else BatchJobState.READY.value,
        external_scheduler=job.spec.external_scheduler,
        scheduled_events=[_event(run, namespace) for run in (status.runs if status is not None else [])],
        message=status.message if status is not None else None,
        waiting_for=status.waiting_for if status is not None else None,
        conditions=list(status.conditions) if status is not None else [],
    )


def _scheduling_state(status: SchedulingStatus) -> str:
    if status.state == SchedulingState.RUNNING:
        waiting = any(p.state == JobState.WAITING for p in status.jobs)
        return "SubmissionState" if waiting else "AwaitingCompletionState"
    return {
        SchedulingState.PENDING: "AcquireState",
        SchedulingState.COMPLETED: "CompletedState",
        SchedulingState.FAILED: "FailedState",
    }[status.state]


def external_scheduling(scheduling: Scheduling) -> ExternalScheduling:
    spec, status = scheduling.spec, scheduling.status
    holding = status is not None and status.state != SchedulingState.PENDING
    job_status = [
        JobStatusEntry(
            name=p.name,
            state=_JOB_STATES.get(p.state, _WAITING_HELD if holding else _WAITING_ACQUIRING),
        )
        for p in (status.jobs if status is not None else [])
    ]
    slots = None
    if spec.slot_based is not None:
        slots = ExternalSlots(
            mode="STRICT" if spec.slot_based.mode.value == "strict" else "RELAXED",
            jobs=[ExternalSlotsJob(name=j.name.name, slots=list(j.slot_ids)) for j in spec.slot_based.jobs],
        )
    return ExternalScheduling(
        name=scheduling.metadata.name,
        namespace=scheduling.metadata.namespace,
        state=_scheduling_state(status) if status is not None else "AcquireState",
        esi_state=(status.state if status is not None else SchedulingState.PENDING).value,
        job_status=job_status,
        test_bed=spec.testbed.name,
        queue=[ref.name for ref in spec.queue_based] if spec.queue_based is not None else None,
        slots=slots,
        waiting_for=status.waiting_for if status is not None else None,
        conditions=list(status.conditions) if status is not None else [],
    )


def scheduling_spec(request: SchedulingSubmission) -> dict[str, Any]:
    """The Scheduling ``spec`` (as a manifest writes it) for a request in the original's shape."""
    spec: dict[str, Any] = {"testbed": {"name": request.test_bed}}
    if request.queue is not None:
        spec["queueBased"] = [{"name": name} for name in request.queue]
    else:
        assert request.slots is not None  # the model validates exactly one strategy
        spec["slotBased"] = {
            "mode": request.slots.mode.lower(),
            "jobs": [{"name": {"name": j.name}, "slotIds": j.slots} for j in request.slots.jobs],
        }
    return spec


class FieldProblem(_Wire):
    field: str = Field(description="Where, dotted: e.g. slots.jobs.0.slots, or (body).")
    problem: str


class ApiError(_Wire):
    """What every refusal of the API carries in ``detail``: a sentence, and per-field problems if any."""

    message: str
    errors: list[FieldProblem] = Field(default_factory=list)


class ErrorBody(_Wire):
    """The body of every refusal, of the API and of the extender."""

    detail: ApiError


def field_problems(
    errors: ValidationError | Iterable[Mapping[str, Any]], *, prefix: str = "", skip: int = 0, whole: str = "(body)"
) -> list[FieldProblem]:
    """pydantic's errors (a ``ValidationError`` or its ``errors()``) as field problems, in their order.

    A field is its dotted location with the first ``skip`` parts dropped (FastAPI's ``body``) and ``prefix``
    put before it; an error about the whole of what was validated is at ``prefix`` without its trailing dot,
    or at ``whole`` when there is no prefix.
    """
    problems = []
    for error in errors.errors() if isinstance(errors, ValidationError) else errors:
        location = ".".join(str(part) for part in tuple(error.get("loc", ()))[skip:])
        field = prefix + location if location else prefix.rstrip(".") or whole
        problems.append(FieldProblem(field=field, problem=str(error.get("msg", "invalid"))))
    return problems


class TestbedSummary(_Wire):
    name: str
    state: str
    esi_state: str
    nodes: int
    slots: int
    free: int
    reserved: int
    occupied: int
    held_by: str | None = None


class JobSummary(_Wire):
    name: str
    state: str
    esi_state: str
    held_by: str | None = None
    runs: int = Field(description="Runs ever recorded.")
    last_run_successful: bool | None = None


class SchedulingSummary(_Wire):
    name: str
    state: str
    esi_state: str
    test_bed: str
    progress: str | None = Field(default=None, description="Finished jobs / all jobs, e.g. 2/5.")
    waiting_for: str | None = None


class Overview(_Wire):
    """One namespace at a glance: what ``esi overview`` shows."""

    namespace: str
    testbeds: list[TestbedSummary]
    jobs: list[JobSummary]
    schedulings: list[SchedulingSummary]


def _testbed_summary(testbed: Testbed) -> TestbedSummary:
    view = external_testbed(testbed)
    slots = [slot for node in view.slots_by_node.values() for slot in node]
    return TestbedSummary(
        name=view.name,
        state=view.state,
        esi_state=view.esi_state,
        nodes=view.number_of_nodes,
        slots=len(slots),
        free=sum(s.state == "FREE" for s in slots),
        reserved=sum(s.state == "RESERVED" for s in slots),
        occupied=sum(s.state == "OCCUPIED" for s in slots),
        held_by=view.held_by,
    )


def _job_summary(job: BatchJob) -> JobSummary:
    status = job.status
    last = status.runs[-1] if status is not None and status.runs else None
    return JobSummary(
        name=job.metadata.name,
        state=_BATCHJOB_STATES[status.state] if status is not None else "ReadyState",
        esi_state=(status.state if status is not None else BatchJobState.READY).value,
        held_by=status.scheduling if status is not None else None,
        runs=status.run_count if status is not None else 0,
        last_run_successful=None if last is None or last.outcome is None else last.outcome.value == "Succeeded",
    )


def _scheduling_summary(scheduling: Scheduling) -> SchedulingSummary:
    view = external_scheduling(scheduling)
    return SchedulingSummary(
        name=view.name,
        state=view.state or "AcquireState",
        esi_state=view.esi_state or SchedulingState.PENDING.value,
        test_bed=view.test_bed,
        progress=scheduling.status.progress if scheduling.status is not None else None,
        waiting_for=view.waiting_for,
    )


def overview(
    namespace: str, testbeds: Iterable[Testbed], jobs: Iterable[BatchJob], schedulings: Iterable[Scheduling]
) -> Overview:
    """Summaries of one namespace's Testbeds, BatchJobs and Schedulings, each sorted by name."""
    return Overview(
        namespace=namespace,
        testbeds=[_testbed_summary(t) for t in sorted(testbeds, key=lambda t: t.metadata.name)],
        jobs=[_job_summary(j) for j in sorted(jobs, key=lambda j: j.metadata.name)],
        schedulings=[_scheduling_summary(s) for s in sorted(schedulings, key=lambda s: s.metadata.name)],
    )
