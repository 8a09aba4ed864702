"""BatchJob: a recurring Spark or Flink application, the external scheduler's notes on it, and its runs.

The spec embeds the application's own spec — a SparkApplication (``sparkoperator.k8s.io/v1beta2``) or a
FlinkDeployment (``flink.apache.org/v1beta1``) — of which only the fields esi reads or overrides are typed
here; everything else is kept as written and handed to the application's operator unchanged. esi decides
the executors' count, size, placement and scheduler; what a user writes there is replaced. A ``flinkSpec``
in the original ESI's shape (a FlinkCluster's job, with ``jarFile``) is read as the FlinkDeployment spec it
translates to (``esi.resources.flink_cluster``).

Nothing in the spec is written by esi: which Scheduling holds the job and which slots it was given are
recorded elsewhere (the Scheduling's status), and ``status`` is written by the BatchJob reconciler alone.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Final, Literal

from pydantic import ConfigDict, Field, model_validator

from esi.resources.flink_cluster import FlinkClusterJob, flink_deployment_spec, shape_rules
from esi.resources.meta import API_VERSION, MAX_NAME_LENGTH, EsiModel, ObjectMeta, ReconciledStatus, field_refusal

__all__ = [
    "ACTIVE_STATES",
    "DRIVER_ACCOUNT_CONF",
    "MAX_EXTERNAL_SCHEDULER_BYTES",
    "MAX_REASON",
    "MAX_RUNS",
    "BatchJob",
    "BatchJobSpec",
    "BatchJobState",
    "BatchJobStatus",
    "FlinkDeploymentSpec",
    "FlinkJobSpec",
    "RunOutcome",
    "RunRecord",
    "SparkApplicationSpec",
    "SparkPodSpec",
]

# How much externalScheduler data esi writes onto a BatchJob, as JSON: a third of what the API server stores in
# one object (1.5 MiB), so that the job's spec and run history still fit beside it.
MAX_EXTERNAL_SCHEDULER_BYTES: Final = 512 * 1024
MAX_RUNS = 50  # run history kept per BatchJob (oldest dropped first; every run is also a Run of its own)
_NAMESPACED_NAME_LENGTH = 63 + 1 + MAX_NAME_LENGTH  # namespace/name

# A job whose driver or JobManager has no account to create its executors with can never run: it is refused
# when written, by the CRD (CEL) and by the model alike (docs/design.md#spark-drivers-account).
DRIVER_ACCOUNT_CONF: Final = "spark.kubernetes.authenticate.driver.serviceAccountName"
_NO_DRIVER_ACCOUNT: Final = (
    "set driver.serviceAccount (e.g. driver: {serviceAccount: spark}) to a ServiceAccount bound to a Role that "
    "may create pods, services, config maps and persistent volume claims: the Spark driver creates its executors "
    "as that account, and the namespace's default account may not (docs/design.md#spark-drivers-account; "
    "examples/manifests/serviceaccount.yaml has one)"
)
_NO_JOB_MANAGER_ACCOUNT: Final = (
    "set serviceAccount (e.g. serviceAccount: flink) to a ServiceAccount bound to a Role that may create pods, "
    "config maps and its own Deployment: the JobManager creates its TaskManagers as that account, and the Flink "
    "operator refuses a FlinkDeployment without one (docs/design.md#flink-taskmanagers; examples/manifests/"
    "serviceaccount.yaml has one); a flinkSpec in the original ESI's shape (jarFile) gets flink"
)


# What makes a Spark executor pod larger than any slot, whatever the slot: refused when the BatchJob is written,
# by the CRD (CEL) and by the model alike (what depends on the slot is refused when a Scheduling names the job).
_PYSPARK_MEMORY_CONF: Final = "spark.executor.pyspark.memory"
_OFF_HEAP_CONF: Final = "spark.memory.offHeap.enabled"
_EXTRA_MEMORY: Final = (
    f"{_PYSPARK_MEMORY_CONF} and {_OFF_HEAP_CONF}=true make Spark add memory to each executor pod beyond its "
    "slot size; esi sizes executors to their slot, so leave them out"
)
# Executor fields the operator's webhook turns into more than the slot: more containers, or more resources.
_EXECUTOR_EXTRAS: Final = {
    "gpu": "a GPU limit on the executor container",
    "sidecars": "containers beside the executor, whose requests add to the pod's",
    "initContainers": "init containers, whose requests and limits can raise the pod's",
}
# Before Spark 3.0, which first reads the pod template esi places executors with.
_OLD_SPARK_VERSION: Final = r"^v*0*[0-2]([.]|$)"  # a character class: CEL strings have no \.
_OLD_SPARK: Final = "esi places executors through a pod template, which Spark reads from 3.0 on; use Spark 3 or later"


def _extra_memory_conf(conf: Mapping[str, str]) -> list[str]:
    """The keys of ``conf`` (a sparkConf) that make Spark add memory to each executor pod beyond its slot."""
    return [
        key
        for key in (_PYSPARK_MEMORY_CONF, _OFF_HEAP_CONF)
        if key in conf and (key != _OFF_HEAP_CONF or conf[key].strip().lower() == "true")
    ]


def _extra_rule(field: str) -> dict[str, str]:
    return {
        "rule": f"!has(self.executor) || !has(self.executor.{field})"
        + ("" if field == "gpu" else f" || size(self.executor.{field}) == 0"),
        "message": f"the operator would give each executor {_EXECUTOR_EXTRAS[field]}, and a slot is sized for "
        "the executor alone; leave it out",
        "fieldPath": f".executor.{field}",
    }


class OpenModel(EsiModel):
    """An embedded third-party spec: known fields typed, unknown ones kept (and preserved by the API server)."""

    model_config = ConfigDict(extra="allow")


class SparkPodSpec(OpenModel):
    """The parts of a SparkApplication driver/executor spec esi reads or sets."""

    cores: int | None = Field(default=None, ge=1)
    core_request: str | None = None
    core_limit: str | None = None
    memory: str | None = None
    memory_overhead: str | None = None
    instances: int | None = Field(default=None, ge=0, description="Executors only; set by esi from the slots.")
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    service_account: str | None = None
    scheduler_name: str | None = None
    priority_class_name: str | None = None
    gpu: dict[str, Any] | None = None
    sidecars: list[dict[str, Any]] | None = None
    init_containers: list[dict[str, Any]] | None = None


class SparkApplicationSpec(OpenModel):
    """A SparkApplication ``sparkoperator.k8s.io/v1beta2`` spec."""

    cel_rules: ClassVar = (
        {
            "rule": "(has(self.driver) && has(self.driver.serviceAccount) && self.driver.serviceAccount != '') || "
            f"(has(self.sparkConf) && '{DRIVER_ACCOUNT_CONF}' in self.sparkConf && "
            f"self.sparkConf['{DRIVER_ACCOUNT_CONF}'] != '')",
            "message": _NO_DRIVER_ACCOUNT,
            "fieldPath": ".driver.serviceAccount",
        },
        {
            "rule": f"!has(self.sparkConf) || (!('{_PYSPARK_MEMORY_CONF}' in self.sparkConf) && "
            f"(!('{_OFF_HEAP_CONF}' in self.sparkConf) || "
            f"self.sparkConf['{_OFF_HEAP_CONF}'].trim().lowerAscii() != 'true'))",
            "message": _EXTRA_MEMORY,
            "fieldPath": ".sparkConf",
        },
        {
            "rule": f"!has(self.sparkVersion) || !self.sparkVersion.matches('{_OLD_SPARK_VERSION}')",
            "message": _OLD_SPARK,
            "fieldPath": ".sparkVersion",
        },
        *(_extra_rule(field) for field in _EXECUTOR_EXTRAS),
    )

    type: str = Field(description="Scala, Java, Python or R.")
    main_application_file: str = Field(min_length=1)
    mode: str | None = None
    image: str | None = None
    main_class: str | None = None
    arguments: list[str] | None = None
    spark_version: str | None = Field(default=None, max_length=64)
    spark_conf: dict[str, str] | None = None
    driver: SparkPodSpec | None = None
    executor: SparkPodSpec | None = None

    @model_validator(mode="after")
    def _driver_has_an_account(self) -> SparkApplicationSpec:
        if (self.driver and self.driver.service_account) or (self.spark_conf or {}).get(DRIVER_ACCOUNT_CONF):
            return self
        raise field_refusal(type(self), ("driver", "serviceAccount"), _NO_DRIVER_ACCOUNT)

    @model_validator(mode="after")
    def _executors_fit_a_slot(self) -> SparkApplicationSpec:
        if _extra_memory_conf(self.spark_conf or {}):
            raise field_refusal(type(self), ("sparkConf",), _EXTRA_MEMORY, self.spark_conf)
        if self.spark_version is not None and re.match(_OLD_SPARK_VERSION, self.spark_version):
            raise field_refusal(type(self), ("sparkVersion",), _OLD_SPARK, self.spark_version)
        executor = self.executor.model_dump(by_alias=True, exclude_none=True) if self.executor else {}
        for field, rule in ((f, _extra_rule(f)) for f in _EXECUTOR_EXTRAS):
            if field in executor and (field == "gpu" or executor[field]):
                raise field_refusal(type(self), ("executor", field), rule["message"], executor[field])
        return self


class FlinkJobSpec(OpenModel):
    jar_uri: str = Field(alias="jarURI", min_length=1)
    entry_class: str | None = None
    args: list[str] | None = None
    parallelism: int | None = Field(default=None, ge=1)
    upgrade_mode: str | None = None


class FlinkDeploymentSpec(OpenModel):
    """A FlinkDeployment ``flink.apache.org/v1beta1`` spec, in application mode (it must run a job).

    A manifest may write the original ESI's shape instead (``FlinkClusterJob``: ``jarFile`` and the rest of a
    FlinkCluster's job); it is translated as it is read, so the model always holds a FlinkDeployment spec.
    """

    other_shape: ClassVar = FlinkClusterJob
    optional_in_schema: ClassVar = ("job",)
    cel_rules: ClassVar = (
        *shape_rules(),
        {
            "rule": "has(self.serviceAccount) ? self.serviceAccount != '' : has(self.jarFile)",
            "message": _NO_JOB_MANAGER_ACCOUNT,
            "fieldPath": ".serviceAccount",
        },
    )

    job: FlinkJobSpec
    image: str | None = None
    flink_version: str | None = None
    flink_configuration: dict[str, str] | None = None
    service_account: str | None = None
    job_manager: dict[str, Any] | None = None
    task_manager: dict[str, Any] | None = None
    mode: str | None = Field(default=None, description="How the cluster is deployed: native or standalone.")

    @model_validator(mode="before")
    @classmethod
    def _from_the_original_shape(cls, data: Any) -> Any:
        return flink_deployment_spec(data) if isinstance(data, Mapping) else data

    @model_validator(mode="after")
    def _job_manager_has_an_account(self) -> FlinkDeploymentSpec:
        if not self.service_account:  # the original's shape was given one as it was read
            raise field_refusal(type(self), ("serviceAccount",), _NO_JOB_MANAGER_ACCOUNT, self.service_account)
        return self


class BatchJobSpec(EsiModel):
    cel_rules: ClassVar = (
        {"rule": "has(self.sparkSpec) != has(self.flinkSpec)", "message": "set exactly one of sparkSpec or flinkSpec"},
    )

    spark_spec: SparkApplicationSpec | None = Field(default=None, description="The Spark application to run.")
    flink_spec: FlinkDeploymentSpec | None = Field(
        default=None,
        description="The Flink application to run: a FlinkDeployment spec, or the original ESI's FlinkCluster job.",
    )
    external_scheduler: dict[str, list[dict[str, str]]] | None = Field(
        default=None,
        description="Free-form notes of the external scheduler (e.g. measured co-location runtimes); esi keeps them.",
    )

    @model_validator(mode="after")
    def _exactly_one_application(self) -> BatchJobSpec:
        if (self.spark_spec is None) == (self.flink_spec is None):
            raise ValueError("set exactly one of sparkSpec or flinkSpec")
        return self


class BatchJobState(StrEnum):
    READY = "Ready"  # not held by any Scheduling
    QUEUED = "Queued"  # held by a Scheduling, waiting for slots
    SUBMITTED = "Submitted"  # application created, executors not all placed yet
    SCHEDULED = "Scheduled"  # every executor is bound to its slot
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    RELEASING = "Releasing"  # released by its Scheduling; the application and its pods are being removed

    @property
    def active(self) -> bool:
        """A run is under way: its application was created and has not ended (Submitted, Scheduled, Running)."""
        return self in ACTIVE_STATES

    @property
    def finished(self) -> bool:
        return self in (BatchJobState.SUCCEEDED, BatchJobState.FAILED)


ACTIVE_STATES: Final = (BatchJobState.SUBMITTED, BatchJobState.SCHEDULED, BatchJobState.RUNNING)
"""The states of a run under way, in the order it reaches them."""


class RunOutcome(StrEnum):
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    CANCELLED = "Cancelled"  # released or deleted while it ran


MAX_REASON: Final = 1024  # characters of a run's reason; a longer one is cut


class RunRecord(EsiModel):
    """One run of the job: when, where, next to whom, and how it ended (open while ``end`` is absent)."""

    scheduling: str = Field(min_length=1, max_length=253)
    attempt: int = Field(default=1, ge=1, description="Which run of the job in that Scheduling.")
    testbed: str = Field(min_length=1, max_length=253)
    slots: list[int] = Field(max_length=4096, json_schema_extra={"x-kubernetes-list-type": "set"})
    submitted: datetime | None = Field(default=None, description="When its application was created.")
    nodes: list[Annotated[str, Field(max_length=MAX_NAME_LENGTH)]] = Field(default_factory=list, max_length=4096)
    colocated_jobs: list[Annotated[str, Field(max_length=_NAMESPACED_NAME_LENGTH)]] = Field(
        default_factory=list, max_length=4096, description="The jobs it ran next to: a name, or namespace/name."
    )
    start: datetime
    end: datetime | None = None
    outcome: RunOutcome | None = None
    reason: str | None = Field(
        default=None,
        max_length=MAX_REASON,
        description="Why it failed or was cancelled, in a sentence; absent otherwise.",
    )
    incomplete: str | None = Field(
        default=None,
        description="What this record could not learn, and why (its nodes, and so its co-located jobs, when "
        "neither its executors nor its Testbed's slot table were there to tell); absent when complete.",
    )


class BatchJobStatus(ReconciledStatus):
    state: BatchJobState = BatchJobState.READY
    scheduling: str | None = Field(default=None, description="The Scheduling that holds the job.")
    message: str | None = Field(default=None, description="What it is doing or waiting for, in a sentence.")
    waiting_for: str | None = Field(
        default=None,
        description="What holds its run up, in the scheduler's or kubelet's words: a pod of its application "
        "not placed or not started. Absent when nothing does.",
    )
    submitted_at: datetime | None = Field(default=None, description="When the current application was created.")
    attempt: int = Field(default=1, ge=1, description="Which run (for its Scheduling) the state is about.")
    runs: list[RunRecord] = Field(default_factory=list, max_length=MAX_RUNS)
    run_count: int = Field(default=0, ge=0, description="Runs ever recorded (the history keeps the latest).")
    kept_runs: int = Field(
        default=0,
        ge=0,
        description="Runs kept as Run objects: every run up to this one (counting all the job's runs) has its Run.",
    )

    def numbered_runs(self) -> list[tuple[int, RunRecord]]:
        """The runs of the history, each with its ordinal: which run of the job it is, counting all its runs
        (1 the first) — also those the history no longer keeps."""
        return list(enumerate(self.runs, start=self.run_count - len(self.runs) + 1))


class BatchJob(EsiModel):
    """A whole BatchJob object, as written in a manifest or returned by the API server."""

    api_version: Literal["esi.tu-berlin.de/v1alpha1"] = API_VERSION
    kind: Literal["BatchJob"] = "BatchJob"
    metadata: ObjectMeta
    spec: BatchJobSpec
    status: BatchJobStatus | None = None
