"""Scheduling: the external scheduler's decision — a Testbed and either a queue of jobs or explicit slots.

``queueBased``: job references in order; a job named k times needs k executors (k slots); entries map in
order onto the free slots, and a job starts only when all its executors can (gang). ``slotBased``: each job
names its slot ids; ``strict`` starts jobs in order without overtaking, ``relaxed`` starts any job whose
slots are all free. (``esi.decisions.allocation`` decides; this module only describes.)

A Scheduling holds its Testbed and its jobs exclusively while it lives. The slots it gives a job are
recorded in its status the moment they are decided, so every reader sees them reserved at once.

Manifests written for the original ESI name the Testbed ``slots`` (its old name of ``testbed``); the model
reads it as ``testbed``, and readers of a raw spec (index handlers, the policy pack) ask ``testbed_field``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum
from typing import Any, ClassVar, Final, Literal

from pydantic import Field, field_validator, model_validator

from esi.resources.meta import API_VERSION, EsiModel, ObjectMeta, ObjectReference, ReconciledStatus

__all__ = [
    "MAX_QUEUE",
    "MAX_SLOT_IDS",
    "MAX_SLOT_JOBS",
    "JobProgress",
    "JobState",
    "RetryPolicy",
    "Scheduling",
    "SchedulingSpec",
    "SchedulingState",
    "SchedulingStatus",
    "SlotBased",
    "SlotJob",
    "SlotMode",
    "distinct_slot_ids",
    "testbed_field",
    "testbed_name",
]

MAX_QUEUE = 4096
# The CEL rule that keeps slotBased job names distinct compares every pair; the API server refuses a CRD
# whose worst-case rule cost is too high, and 256 jobs is what fits its budget.
MAX_SLOT_JOBS = 256
MAX_SLOT_IDS: Final = 4096  # of one job


class SlotMode(StrEnum):
    """How jobs of a slot list may overtake each other."""

    STRICT = "strict"
    """Jobs start in list order: a job whose slots are busy holds back every job after it."""
    RELAXED = "relaxed"
    """Any job whose slots are all free starts, even ahead of earlier jobs that still wait."""


def distinct_slot_ids(ids: list[int]) -> list[int]:
    """A job's slot ids, which are non-negative and distinct (one executor per slot); else ``ValueError``."""
    if any(i < 0 for i in ids):
        raise ValueError("slot ids are non-negative")
    if len(set(ids)) != len(ids):
        raise ValueError(f"slot ids must be distinct, got {ids}")
    return ids


class SlotJob(EsiModel):
    name: ObjectReference = Field(description="The BatchJob.")
    slot_ids: list[int] = Field(
        min_length=1,
        max_length=MAX_SLOT_IDS,
        description="Global ids of the slots its executors go to; one executor per slot.",
        json_schema_extra={"x-kubernetes-list-type": "set", "items": {"type": "integer", "minimum": 0}},
    )

    _distinct_non_negative = field_validator("slot_ids")(distinct_slot_ids)


class SlotBased(EsiModel):
    cel_rules: ClassVar = (
        {
            "rule": "self.jobs.all(a, self.jobs.exists_one(b, b.name.name == a.name.name))",
            "message": "each job may appear only once in slotBased.jobs",
            "fieldPath": ".jobs",
        },
    )

    mode: SlotMode = Field(
        default=SlotMode.STRICT,
        description="strict: jobs start in order, none overtakes; relaxed: any job whose slots are free starts.",
        json_schema_extra={"enum": ["strict", "relaxed", "STRICT", "RELAXED"]},
    )
    jobs: list[SlotJob] = Field(min_length=1, max_length=MAX_SLOT_JOBS)

    @field_validator("mode", mode="before")
    @classmethod
    def _accept_upper_case(cls, mode: Any) -> Any:
        # The original's REST clients spell modes in upper case; both spellings are accepted
        # (docs/compatibility.md#manifests).
        return mode.lower() if isinstance(mode, str) else mode

    @field_validator("jobs")
    @classmethod
    def _distinct_jobs(cls, jobs: list[SlotJob]) -> list[SlotJob]:
        names = [j.name.name for j in jobs]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"each job may appear only once, repeated: {', '.join(repeated)}")
        return jobs


class RetryPolicy(EsiModel):
    """How often a failed job runs again, and after how long, before it is recorded as failed; and how long a
    run may take to start before it counts as failed."""

    limit: int = Field(default=2, ge=0, le=10, description="Runs after the first failure; 0: never retry.")
    backoff_seconds: int = Field(
        default=10, ge=1, le=3600, description="Wait before the first retry; doubled before each further one."
    )
    start_timeout_seconds: int = Field(
        default=600,
        ge=10,
        le=86400,
        description="A run not Running this long after its application was created fails, with what held it "
        "up as the reason; its application goes and its slots get their ghosts back, and it is retried as "
        "any failed run.",
    )

    def delay(self, failures: int) -> int:
        """Seconds to wait after the ``failures``-th failed run."""
        return int(self.backoff_seconds * 2 ** max(failures - 1, 0))


_TESTBED_OR_SLOTS: Final = "set exactly one of testbed or slots (the original ESI's name of testbed)"


class SchedulingSpec(EsiModel):
    cel_rules: ClassVar = (
        {"rule": "has(self.testbed) != has(self.slots)", "message": _TESTBED_OR_SLOTS},
        {
            "rule": "has(self.queueBased) != has(self.slotBased)",
            "message": "set exactly one of queueBased or slotBased",
        },
    )
    optional_in_schema: ClassVar = ("testbed",)

    testbed: ObjectReference = Field(description="The Testbed whose slots the jobs run in.")
    slots: ObjectReference | None = Field(
        default=None,
        exclude=True,
        description="The original ESI's name of testbed, accepted in its place; read as testbed.",
    )
    queue_based: list[ObjectReference] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_QUEUE,
        description="Jobs in order; a job named k times runs with k executors.",
    )
    slot_based: SlotBased | None = None
    retry: RetryPolicy = Field(default_factory=RetryPolicy, description="Retries of a job whose run failed.")

    @model_validator(mode="before")
    @classmethod
    def _testbed_from_slots(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        named = [field for field in ("testbed", "slots") if data.get(field) is not None]
        if len(named) != 1:
            raise ValueError(_TESTBED_OR_SLOTS)
        rest = {key: value for key, value in data.items() if key != "slots"}
        return rest if named == ["testbed"] else {**rest, "testbed": data["slots"]}

    @model_validator(mode="after")
    def _exactly_one_strategy(self) -> SchedulingSpec:
        if (self.queue_based is None) == (self.slot_based is None):
            raise ValueError("set exactly one of queueBased or slotBased")
        return self


def testbed_field(spec: Mapping[str, Any]) -> str:
    """The field of a raw Scheduling spec that names its Testbed: ``testbed``, or ``slots`` where a manifest
    written for the original ESI uses that name instead."""
    return "slots" if spec.get("testbed") is None and spec.get("slots") is not None else "testbed"


def testbed_name(spec: Mapping[str, Any]) -> str:
    """The name of the Testbed a raw Scheduling spec names; "" when it names none."""
    reference = spec.get(testbed_field(spec))
    name = reference.get("name") if isinstance(reference, Mapping) else None
    return name if isinstance(name, str) else ""


class SchedulingState(StrEnum):
    PENDING = "Pending"  # waiting to hold its Testbed and all its jobs
    RUNNING = "Running"  # holds them; jobs are being placed or run
    COMPLETED = "Completed"  # every job has run (each job's outcome is in status.jobs)
    FAILED = "Failed"  # cannot proceed as written (see its conditions); fixing the spec resumes it


class JobState(StrEnum):
    WAITING = "Waiting"  # for its slots
    RESERVED = "Reserved"  # slots decided and recorded; the application is being created
    SUBMITTED = "Submitted"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"

    @property
    def holds_slots(self) -> bool:
        """Its slots are taken: reserved for it, or its executors are in them (Reserved, Submitted, Running).

        Every reader of a Scheduling's record counts these slots as reserved: the Scheduling when it allocates
        more, the Testbed reconciler in its slot table, the BatchJob reconciler when it follows the job.
        """
        return self in _HOLDING_SLOTS

    @property
    def allocated(self) -> bool:
        """Slots were allocated to its current run (anything but Waiting); a finished job's record keeps them."""
        return self != JobState.WAITING

    @property
    def queued(self) -> bool:
        """Not started yet: waiting for slots, or given slots but its application not created yet."""
        return self in (JobState.WAITING, JobState.RESERVED)

    @property
    def finished(self) -> bool:
        return self in (JobState.SUCCEEDED, JobState.FAILED)


_HOLDING_SLOTS: Final = frozenset({JobState.RESERVED, JobState.SUBMITTED, JobState.RUNNING})


class JobProgress(EsiModel):
    """One job of the Scheduling: its slots once decided, and when it reached each step."""

    name: str = Field(min_length=1, max_length=253)
    state: JobState = JobState.WAITING
    executors: int = Field(ge=1, description="Slots the job needs.")
    slots: list[int] = Field(default_factory=list, max_length=4096, json_schema_extra={"x-kubernetes-list-type": "set"})
    attempt: int = Field(default=1, ge=1, description="Which run of the job this is (retries count up).")
    retry_at: datetime | None = Field(default=None, description="A failed job waits until then to run again.")
    message: str | None = Field(default=None, description="Why the last run failed, if it did.")
    queued_at: datetime | None = None
    reserved_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None


class SchedulingStatus(ReconciledStatus):
    state: SchedulingState = SchedulingState.PENDING
    testbed: str | None = Field(
        default=None, description="The Testbed's name, whichever field of the spec names it (for kubectl get)."
    )
    waiting_for: str | None = Field(default=None, description="What the Scheduling waits for, in a sentence.")
    progress: str | None = Field(default=None, description="Finished jobs / all jobs, e.g. 2/5.")
    jobs: list[JobProgress] = Field(
        default_factory=list,
        max_length=MAX_QUEUE,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )


class Scheduling(EsiModel):
    """A whole Scheduling object, as written in a manifest or returned by the API server."""

    api_version: Literal["esi.tu-berlin.de/v1alpha1"] = API_VERSION
    kind: Literal["Scheduling"] = "Scheduling"
    metadata: ObjectMeta
    spec: SchedulingSpec
    status: SchedulingStatus | None = None
