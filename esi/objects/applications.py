"""A BatchJob's application: the SparkApplication or FlinkDeployment esi creates for one run, read back.

``application_manifest`` builds the application for a run in the slots a Scheduling reserved. Only the
executors (Spark executors, Flink TaskManagers) go into slots; for them esi decides, and a user's own
values give way:

* one executor per slot, each requesting and limited to exactly the slot size (what the Testbed and the
  extender compare), in the units the real operator turns into pod requests;
* required node affinity to the nodes of the slots, by the Testbed's node label and by name, ANDed into every
  term the user wrote (terms are ORed, so each must carry it; one term per node, as the API server takes one name
  per field requirement); the user's preferred terms, pod affinity and anti-affinity stay. By name, because
  kube-scheduler then considers only those nodes for an executor (its NodeAffinity PreFilter narrows a cycle to
  the names every required term lists under ``metadata.name``); by label alone, it would filter every node of the
  cluster for each executor. The extender binds an executor only on its slot's node, which is the name the
  Testbed's table gave it;
* the second scheduler and the executor priority class, so an executor may take a ghost's place;
* the Testbed's tolerations, after the user's (so an executor goes wherever its slot's ghost is);
* labels naming the role, the Testbed, the BatchJob and the attempt (the user's other labels stay);
* a fixed executor count: no dynamic allocation (Spark); no autoscaler, and exactly one TaskManager per slot
  kept by Flink's own resource manager for the whole run (Flink);
* an executor Flink or Spark can start in its slot's memory, or the run is refused with the reason.

The application itself names its job, Testbed and attempt in annotations, not labels: the Spark operator
copies an application's labels onto all its pods (docs/design.md#applications-and-their-pods). Drivers and
JobManagers are scheduled normally and are left as the user wrote them: the executor priority class goes on
executors only (docs/compatibility.md#applications). A driver's or JobManager's ServiceAccount, which esi does
not create, is required by the BatchJob's model (docs/design.md#spark-drivers-account). Everything else the
user wrote is kept unchanged.

``application_view`` reads an application and its pods back into the ``ApplicationView`` that
``decide_batchjob`` works on. The functions are pure: they copy, never change their input, and raise
``ApplicationError`` (a ``ValueError``) for a job that cannot be sized to its slots, naming the field.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from esi.decisions.batchjob_lifecycle import ApplicationPhase, ApplicationView
from esi.objects.flink_memory import (
    MemoryConfigError,
    fitted_task_manager,
    job_manager_heap,
    memory_size,
    smallest_task_manager,
    unmodelled_memory_keys,
    user_memory_settings,
)
from esi.objects.flink_pod_templates import merge_arrays_by_name, merged_pod_templates
from esi.objects.names import (
    ATTEMPT_ANNOTATION,
    ATTEMPT_LABEL,
    EXECUTOR_PRIORITY_CLASS,
    JOB_ANNOTATION,
    JOB_LABEL,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    ROLE_EXECUTOR,
    ROLE_LABEL,
    SCHEDULER_NAME,
    TESTBED_ANNOTATION,
    TESTBED_LABEL,
    is_executor,
)
from esi.objects.owners import owner_reference
from esi.objects.pod_status import scheduler_refusal
from esi.resources.batchjob import BatchJob
from esi.resources.flink_cluster import FLINK_MAIN_CONTAINER
from esi.resources.meta import API_VERSION
from esi.resources.quantity import Quantity, parse_quantity
from esi.resources.testbed import Slot, TestbedSpec, Toleration

__all__ = [
    "FLINK",
    "SPARK",
    "ApplicationError",
    "ApplicationKind",
    "SlotAssignment",
    "application_kind",
    "application_manifest",
    "application_pod_selector",
    "application_view",
    "is_executor_pod",
    "run_problem",
    "slot_assignment",
    "slot_node_affinity",
]

_MIB: Final = 2**20
# Spark's own default executor memory overhead: 10% of the heap, at least 384 MiB.
_SPARK_MIN_OVERHEAD_MIB: Final = 384
# Spark refuses to start an executor whose heap is below 1.5 x its 300 MiB reserved memory.
_SPARK_MIN_HEAP_MIB: Final = 450
_FLINK_SLOTS_KEY: Final = "taskmanager.numberOfTaskSlots"
_FLINK_JOB_MANAGER_RESOURCE: Final = {"cpu": 0.2, "memory": "1024m"}
# Flink settings that keep a run's TaskManagers fixed (``_flink_spec``). The autoscaler would change their
# number (both keys: the operator renamed it).
_FLINK_PINNED_CONF: Final = {
    "kubernetes.taskmanager.cpu.limit-factor": "1.0",
    "kubernetes.taskmanager.memory.limit-factor": "1.0",
    "job.autoscaler.enabled": "false",
    "kubernetes.operator.job.autoscaler.enabled": "false",
    "execution.batch.adaptive.auto-parallelism.enabled": "false",
    "execution.batch.speculative.enabled": "false",
}


class ApplicationError(ValueError):
    """A BatchJob whose application cannot be built for its slots, or an application esi cannot read."""


@dataclass(frozen=True)
class ApplicationKind:
    """One kind of application esi runs: its API resource and how its operator labels the pods."""

    group: str
    version: str
    kind: str
    plural: str
    pod_label: str  # set to the application's name on all of its pods
    executor_label: tuple[str, str]  # (key, value) that marks the executor pods among them

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


SPARK: Final = ApplicationKind(
    group="sparkoperator.k8s.io",
    version="v1beta2",
    kind="SparkApplication",
    plural="sparkapplications",
    pod_label="sparkoperator.k8s.io/app-name",
    executor_label=("spark-role", "executor"),
)
FLINK: Final = ApplicationKind(
    group="flink.apache.org",
    version="v1beta1",
    kind="FlinkDeployment",
    plural="flinkdeployments",
    pod_label="app",
    executor_label=("component", "taskmanager"),
)
_KINDS: Final = (SPARK, FLINK)


@dataclass(frozen=True)
class SlotAssignment:
    """Where one run of a job goes: the slots reserved for it and what the Testbed says about them."""

    testbed: str  # the Testbed's name
    node_label: str  # the Testbed's spec.nodeLabel
    node_ids: tuple[str, ...]  # values of that label on the nodes that hold the slots
    node_names: tuple[str, ...]  # and those nodes' names
    slots: tuple[int, ...]  # the reserved slot ids; one executor per slot
    cpu: Quantity  # the slot size
    memory: Quantity
    attempt: int = 1  # which attempt of the job in its Scheduling this run is
    tolerations: tuple[Toleration, ...] = ()  # the Testbed's


def slot_assignment(
    testbed: str, spec: TestbedSpec, table: Sequence[Slot], slots: tuple[int, ...], attempt: int
) -> SlotAssignment | str:
    """Where a run in ``slots`` of Testbed ``testbed`` (its ``spec`` and slot ``table``) goes; or, while the table
    does not list them all, why that is not known yet."""
    by_id = {slot.id: slot for slot in table}
    unknown = [i for i in slots if i not in by_id]
    if unknown:
        return f"testbed {testbed} has no slots {', '.join(map(str, unknown))} (yet)"
    return SlotAssignment(
        testbed=testbed,
        node_label=spec.node_label,
        node_ids=tuple(sorted({str(by_id[i].node_id) for i in slots})),
        node_names=tuple(sorted({by_id[i].node_name for i in slots})),
        slots=slots,
        cpu=spec.resources_per_slot.cpu,
        memory=spec.resources_per_slot.memory,
        attempt=attempt,
        tolerations=tuple(spec.tolerations or ()),
    )


def application_kind(source: BatchJob | Mapping[str, Any]) -> ApplicationKind:
    """The kind of application of a BatchJob, or of an application object read from the API server."""
    if isinstance(source, BatchJob):
        return SPARK if source.spec.spark_spec is not None else FLINK
    kind, api_version = source.get("kind"), source.get("apiVersion")
    for known in _KINDS:
        if kind == known.kind and (api_version is None or str(api_version).split("/")[0] == known.group):
            return known
    raise ApplicationError(f"{kind} {api_version} is not an application esi runs (SparkApplication, FlinkDeployment)")


def application_pod_selector(kind: ApplicationKind, name: str) -> dict[str, str]:
    """Labels that select every pod (driver or JobManager, and executors) of the application ``name``."""
    return {kind.pod_label: name}


def is_executor_pod(pod: Mapping[str, Any]) -> bool:
    """Whether one of an application's pods is an executor (a Spark executor or a Flink TaskManager): by esi's
    labels, or by its operator's, which mark the executors of an application whatever its pod template says."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    marks = (kind.executor_label for kind in _KINDS)
    return is_executor(labels) or any(labels.get(key) == value for key, value in marks)


# --- building -----------------------------------------------------------------------------------------------


def application_manifest(job: BatchJob, assignment: SlotAssignment, *, namespace: str, uid: str) -> dict[str, Any]:
    """The SparkApplication or FlinkDeployment that runs ``job`` in the slots of ``assignment``.

    Named like the BatchJob and owned by it (``uid`` is its metadata.uid), so deleting the BatchJob
    deletes the application. See the module docstring for what esi sets; ``_spark_spec`` and
    ``_flink_spec`` say how for each operator.
    """
    name = job.metadata.name
    if not assignment.slots:
        raise ApplicationError(f"BatchJob {name}: no slots assigned; an application needs at least one executor")
    if not assignment.node_ids:
        raise ApplicationError(f"BatchJob {name}: no nodes assigned for slots {list(assignment.slots)}")
    kind = application_kind(job)
    executor = _ExecutorSettings.of(job, assignment)
    if job.spec.spark_spec is not None:
        spec = _spark_spec(job.spec.spark_spec.to_json_dict(), executor, assignment)
    else:
        assert job.spec.flink_spec is not None  # a BatchJob holds exactly one of them
        spec = _flink_spec(job.spec.flink_spec.to_json_dict(), executor, assignment, name)
    return {
        "apiVersion": kind.api_version,
        "kind": kind.kind,
        "metadata": {
            "name": name,
            "namespace": namespace,
            # The operators' pods may carry the application's labels (the Spark operator copies them onto the
            # driver and executors), so which run this is goes into annotations (esi.objects.names).
            "labels": {MANAGED_BY_LABEL: MANAGED_BY},
            "annotations": {
                JOB_ANNOTATION: name,
                TESTBED_ANNOTATION: assignment.testbed,
                ATTEMPT_ANNOTATION: str(assignment.attempt),
            },
            "ownerReferences": [owner_reference(API_VERSION, "BatchJob", name, uid)],
        },
        "spec": spec,
    }


def run_problem(job: BatchJob, testbed: str, spec: TestbedSpec) -> str | None:
    """Why no run of ``job`` could start in the slots of Testbed ``testbed`` (its ``spec``), whichever it is given;
    None when a run can. The application is built as for a run, in one slot standing for all of them (every slot
    has the Testbed's size, and no check depends on which slots or how many), so that a Scheduling is refused for
    what would otherwise fail each of the job's attempts as it starts."""
    assignment = SlotAssignment(
        testbed=testbed,
        node_label=spec.node_label,
        node_ids=("0",),
        node_names=("node-0",),
        slots=(0,),
        cpu=spec.resources_per_slot.cpu,
        memory=spec.resources_per_slot.memory,
        tolerations=tuple(spec.tolerations or ()),
    )
    try:
        application_manifest(job, assignment, namespace="", uid="")
    except ApplicationError as err:
        return str(err)
    return None


@dataclass(frozen=True)
class _ExecutorSettings:
    """What every executor pod of a run gets, whichever operator creates it."""

    labels: dict[str, str]
    node_label: str
    node_ids: tuple[str, ...]
    node_names: tuple[str, ...]
    memory_mib: int
    cpu: Quantity
    tolerations: tuple[dict[str, Any], ...] = ()

    @classmethod
    def of(cls, job: BatchJob, assignment: SlotAssignment) -> _ExecutorSettings:
        return cls(
            labels={
                ROLE_LABEL: ROLE_EXECUTOR,
                TESTBED_LABEL: assignment.testbed,
                JOB_LABEL: job.metadata.name,
                ATTEMPT_LABEL: str(assignment.attempt),
            },
            node_label=assignment.node_label,
            node_ids=assignment.node_ids,
            node_names=assignment.node_names,
            memory_mib=_whole_mib(job.metadata.name, assignment),
            cpu=assignment.cpu,
            tolerations=tuple(t.to_json_dict() for t in assignment.tolerations),
        )

    def pod_template(
        self,
        template: Mapping[str, Any] | None,
        user_affinity: Mapping[str, Any] | None,
        user_tolerations: Sequence[Mapping[str, Any]] | None,
    ) -> dict[str, Any]:
        """A Pod template with esi's labels, node affinity, tolerations, scheduler and priority merged into
        ``template``."""
        pod = copy.deepcopy(dict(template or {}))
        pod["metadata"] = metadata = pod.get("metadata") or {}
        metadata["labels"] = {**(metadata.get("labels") or {}), **self.labels}
        pod["spec"] = spec = pod.get("spec") or {}
        spec["affinity"] = self.affinity(user_affinity)
        if self.tolerations:
            spec["tolerations"] = self.tolerations_after(user_tolerations)
        spec["schedulerName"] = SCHEDULER_NAME
        spec["priorityClassName"] = EXECUTOR_PRIORITY_CLASS
        return pod

    def tolerations_after(self, user: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
        """``user``'s tolerations, then the Testbed's that ``user`` does not have already."""
        tolerations = [copy.deepcopy(dict(t)) for t in user or ()]
        return tolerations + [dict(t) for t in self.tolerations if t not in tolerations]

    def affinity(self, user: Mapping[str, Any] | None) -> dict[str, Any]:
        return slot_node_affinity(user, node_label=self.node_label, node_ids=self.node_ids, node_names=self.node_names)


def slot_node_affinity(
    user: Mapping[str, Any] | None, *, node_label: str, node_ids: Sequence[str], node_names: Sequence[str]
) -> dict[str, Any]:
    """``user``'s affinity with the slots' nodes required — by the Testbed's ``node_label`` having one of ``node_ids``,
    and by name. Each required term of the user's becomes one term per node, the name in ``matchFields``: the API
    server allows a single name per field requirement, and terms are ORed."""
    by_label = {"key": node_label, "operator": "In", "values": sorted(set(node_ids))}
    affinity = copy.deepcopy(dict(user or {}))
    affinity["nodeAffinity"] = node_affinity = affinity.get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms = required.get("nodeSelectorTerms") or [{}]
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
        **required,
        "nodeSelectorTerms": [
            {
                **copy.deepcopy(term),
                "matchExpressions": [*copy.deepcopy(term.get("matchExpressions") or []), copy.deepcopy(by_label)],
                "matchFields": [
                    *copy.deepcopy(term.get("matchFields") or []),
                    {"key": "metadata.name", "operator": "In", "values": [name]},
                ],
            }
            for term in terms
            for name in sorted(set(node_names))
        ],
    }
    return affinity


def _whole_mib(job: str, assignment: SlotAssignment) -> int:
    """The slot memory in MiB; both operators size executor memory in whole MiB, so it must be one."""
    amount = assignment.memory.amount
    if amount != amount.to_integral_value() or int(amount) % _MIB:
        raise ApplicationError(
            f"BatchJob {job}: resourcesPerSlot.memory of testbed {assignment.testbed} is {assignment.memory} "
            f"({amount} bytes), not a whole number of MiB; Spark and Flink size executor memory in whole MiB, "
            "so their executors could never request exactly the slot (use e.g. 896Mi or 3Gi)"
        )
    return int(amount) // _MIB


# Spark executor settings esi decides: set in sparkConf too where the user put them there, so that no
# operator version's order of --conf arguments can let the user's value win.
_SPARK_EXECUTOR_CONF: Final = {
    "instances": "spark.executor.instances",
    "cores": "spark.executor.cores",
    "coreRequest": "spark.kubernetes.executor.request.cores",
    "coreLimit": "spark.kubernetes.executor.limit.cores",
    "memory": "spark.executor.memory",
    "memoryOverhead": "spark.executor.memoryOverhead",
}
# Spark puts spark.executor.resource.<name>.amount (GPUs, FPGAs) on each executor pod as a limit.
_SPARK_EXECUTOR_RESOURCE_CONF: Final = re.compile(r"spark\.executor\.resource\.[^.]+\.amount")
# The operator names the container Spark builds the executor in (spark.kubernetes.executor.podTemplateContainerName).
_SPARK_EXECUTOR_CONTAINER: Final = "spark-kubernetes-executor"
# Resources a template's executor container may name: Spark sets cpu and memory over them (esi's sizes);
# ephemeral storage is no part of a slot.
_SPARK_TEMPLATE_RESOURCES: Final = frozenset({"cpu", "memory", "ephemeral-storage"})


def _spark_memory_split(slot_mib: int) -> tuple[int, int]:
    """(heap, overhead) in MiB for a Spark executor whose pod must request exactly ``slot_mib``.

    Spark makes the pod request heap (``spark.executor.memory``) + overhead (``memoryOverhead``). The
    overhead is Spark's own default — max(384 MiB, 10% of the heap) — wherever the slot is large enough
    (834 MiB and up). In smaller slots the 384 MiB floor gives way so that the heap keeps the 450 MiB Spark
    needs to start, but the overhead never drops below 10% of the heap (the JVM's non-heap memory must fit
    somewhere), nor leaves the heap without a MiB.
    """
    overhead = max(-(-slot_mib // 11), min(_SPARK_MIN_OVERHEAD_MIB, slot_mib - _SPARK_MIN_HEAP_MIB))
    overhead = min(overhead, slot_mib - 1)
    return slot_mib - overhead, overhead


def _spark_spec(spec: dict[str, Any], executor: _ExecutorSettings, assignment: SlotAssignment) -> dict[str, Any]:
    """The SparkApplication spec: the user's, with the executors sized, placed and counted by esi.

    How the Spark operator and Spark turn the executor fields into the pod's requests: cpu request =
    ``coreRequest`` (else ``cores``), cpu limit = ``coreLimit``, memory request = limit = ``memory`` +
    ``memoryOverhead`` in MiB (Spark's "m"). esi sets ``cores`` (task threads) to the slot cpu rounded up,
    ``coreRequest`` = ``coreLimit`` = the slot cpu, and splits the slot memory by ``_spark_memory_split``.
    A user's ``memoryLimit`` gives way too (Spark limits the memory to the request, the slot).

    Labels, affinity, tolerations, scheduler and priority go into ``executor.template``, always (the user's template, if
    any, merged): the operator hands it to Spark (``spark.kubernetes.executor.podTemplateFile``, operator 2.1+,
    Spark 3.0+), so executors get them without the operator's mutating webhook, which may be off or not
    watching the namespace. They go on the executor fields as well, with the same values, because the
    webhook, where it runs, applies those over the template (an affinity field replaces the pod's). The
    user's affinity (tolerations) is the field's, else the template's. What would make an executor pod larger than its
    slot is refused, naming the field (``_refuse_spark_extras``).

    ``restartPolicy`` is forced to Never: esi retries a failed run at the Scheduling level, with fresh slots;
    an operator restart would run again in slots that may no longer be reserved for the job.
    """
    _refuse_spark_extras(spec)
    if spec.get("batchScheduler"):
        raise ApplicationError(
            f"spec.sparkSpec.batchScheduler is {spec['batchScheduler']!r}: esi's scheduler places the executors, "
            "so another batch scheduler cannot; leave it out"
        )
    heap, overhead = _spark_memory_split(executor.memory_mib)
    cpu = str(executor.cpu)
    sizes: dict[str, Any] = {
        "instances": len(assignment.slots),
        "cores": max(1, executor.cpu.value),
        "coreRequest": cpu,
        "coreLimit": cpu,
        "memory": f"{heap}m",
        "memoryOverhead": f"{overhead}m",
    }
    pod = spec.get("executor") or {}
    pod.update(sizes)
    pod.pop("memoryLimit", None)
    template = pod.get("template") or {}
    user_affinity = pod.get("affinity") or (template.get("spec") or {}).get("affinity")
    user_tolerations = pod.get("tolerations") or (template.get("spec") or {}).get("tolerations")
    pod["labels"] = {**(pod.get("labels") or {}), **executor.labels}
    pod["affinity"] = executor.affinity(user_affinity)
    if executor.tolerations:
        pod["tolerations"] = executor.tolerations_after(user_tolerations)
    pod["schedulerName"] = SCHEDULER_NAME
    pod["priorityClassName"] = EXECUTOR_PRIORITY_CLASS
    pod["template"] = executor.pod_template(template, user_affinity, user_tolerations)
    pod["template"]["spec"].setdefault("containers", [{"name": _SPARK_EXECUTOR_CONTAINER}])
    spec["executor"] = pod
    spec.setdefault("driver", {})  # required by the SparkApplication CRD; empty means Spark's defaults

    conf = spec.get("sparkConf") or {}
    for field, key in _SPARK_EXECUTOR_CONF.items():
        if key in conf:
            conf[key] = str(sizes[field])
    conf["spark.dynamicAllocation.enabled"] = "false"
    # Where Spark builds executors from a pod template, it takes the scheduler from this (Spark 3.3+).
    conf["spark.kubernetes.executor.scheduler.name"] = SCHEDULER_NAME
    spec["sparkConf"] = conf
    spec["dynamicAllocation"] = {**(spec.get("dynamicAllocation") or {}), "enabled": False}
    spec["restartPolicy"] = {"type": "Never"}
    return spec


def _refuse_spark_extras(spec: Mapping[str, Any]) -> None:
    """Raise ``ApplicationError`` for a setting that would make an executor pod request or be limited to more
    than its slot, naming it: extra resources, and the executor template's extra containers or resources (the
    BatchJob's own rules refuse extra memory, the executor's sidecars, init containers and GPU when it is
    written)."""
    conf = spec.get("sparkConf") or {}
    for key, value in conf.items():
        if _SPARK_EXECUTOR_RESOURCE_CONF.fullmatch(key):
            raise ApplicationError(
                f'spec.sparkSpec.sparkConf["{key}"] is {value!r}: Spark adds that resource to each executor pod, '
                "and a slot has only cpu and memory; leave it out"
            )
    executor = spec.get("executor") or {}
    template_spec = (executor.get("template") or {}).get("spec") or {}
    where = "spec.sparkSpec.executor.template.spec"
    containers = template_spec.get("containers") or []
    if len(containers) > 1:
        listed = ", ".join(str(c.get("name")) for c in containers)
        raise ApplicationError(
            f"{where}.containers has {len(containers)} containers ({listed}): Spark runs the executor in one of "
            "them and keeps the others beside it, whose requests add to the pod's; give only the executor's"
        )
    for field in ("initContainers", "resources", "overhead"):
        if template_spec.get(field):
            raise ApplicationError(
                f"{where}.{field} is set: it would make the executor pod request more than its slot; leave it out"
            )
    resources = (containers[0].get("resources") or {}) if containers else {}
    for kind in ("requests", "limits"):
        others = sorted(set(resources.get(kind) or {}) - _SPARK_TEMPLATE_RESOURCES)
        if others:
            raise ApplicationError(
                f"{where}.containers[0].resources.{kind} names {', '.join(others)}: a slot has only cpu and "
                "memory (which esi sets); leave the others out"
            )


def _flink_spec(
    spec: dict[str, Any], executor: _ExecutorSettings, assignment: SlotAssignment, job: str
) -> dict[str, Any]:
    """The FlinkDeployment spec: the user's, with the TaskManagers sized, placed and counted by esi.

    The Flink operator makes a TaskManager pod request ``taskManager.resource.cpu`` cores and
    ``taskManager.resource.memory`` (Flink's "m" is MiB), limited to the same because esi pins both limit
    factors to 1; Flink must be able to split that memory (``esi.objects.flink_memory``): where the user left
    managed memory at Flink's default, esi sets ``taskmanager.memory.managed.size`` so that it can
    (``fitted_task_manager``), and what the user's own settings make impossible is refused here rather than
    failing in its pods.

    In native mode Flink's resource manager, inside the JobManager, starts TaskManagers as the job asks for
    slots and stops idle ones; ``taskManager.replicas`` does not fix their number. esi pins it: the job's
    parallelism is the slots x ``taskmanager.numberOfTaskSlots`` (the user's, else 1), and the resource
    manager keeps exactly that many task slots (``slotmanager.number-of-slots.min`` = ``max``), so one
    TaskManager per slot exists for the whole run and a lost one is replaced into the slot it leaves. A batch
    job's parallelism is not decided from its data (adaptive parallelism off), and no speculative copies run
    (speculative execution, which would also block nodes, off). ``job.parallelism`` and ``replicas`` say so
    too, for the operator and for readers.

    Pod templates are resolved here as the operator resolves them (``esi.objects.flink_pod_templates``):
    each component gets ``spec.podTemplate`` with its own template merged over it, and ``spec.podTemplate``
    is dropped, so the operator takes each as it is. The TaskManagers' carries esi's placement; what would
    make a TaskManager pod larger than its slot is refused, naming the field. The JobManager keeps the
    user's settings, with a default size where the user gave none; a size Flink cannot start is refused.
    """
    cpu = float(executor.cpu.amount)
    if Quantity(cpu) != executor.cpu:
        raise ApplicationError(
            f"BatchJob {job}: resourcesPerSlot.cpu of testbed {assignment.testbed} is {executor.cpu}, which Flink "
            f"cannot take exactly: it reads TaskManager cpu as a floating-point number ({cpu!r})"
        )
    conf = spec.get("flinkConfiguration") or {}
    task_slots = _flink_task_slots(conf.get(_FLINK_SLOTS_KEY, "1"))
    replicas = len(assignment.slots)
    parallelism = replicas * task_slots
    conf.update(_flink_memory(conf, executor.memory_mib, spec.get("jobManager") or {}, job, assignment.testbed))
    conf[_FLINK_SLOTS_KEY] = conf.get(_FLINK_SLOTS_KEY, "1")
    conf.update(_FLINK_PINNED_CONF)
    conf["parallelism.default"] = str(parallelism)
    conf["slotmanager.number-of-slots.min"] = conf["slotmanager.number-of-slots.max"] = str(parallelism)
    spec["flinkConfiguration"] = conf

    by_name = merge_arrays_by_name(conf)
    common = spec.pop("podTemplate", None)
    task_manager = spec.get("taskManager") or {}
    if task_manager.get("resources"):
        raise ApplicationError(
            "spec.flinkSpec.taskManager.resources is set: the operator sizes TaskManagers from it before "
            "taskManager.resource, which esi sets to the slot size; leave it out"
        )
    task_manager["resource"] = {
        **(task_manager.get("resource") or {}),
        "cpu": cpu,
        "memory": f"{executor.memory_mib}m",
    }
    task_manager["replicas"] = replicas
    template = merged_pod_templates(common, task_manager.get("podTemplate"), by_name=by_name) or {}
    _refuse_flink_extras(template)
    template_spec = template.get("spec") or {}
    task_manager["podTemplate"] = {"apiVersion": "v1", "kind": "Pod"} | executor.pod_template(
        template, template_spec.get("affinity"), template_spec.get("tolerations")
    )
    spec["taskManager"] = task_manager

    job_manager = spec.get("jobManager") or {}
    job_manager["resource"] = {**_FLINK_JOB_MANAGER_RESOURCE, **(job_manager.get("resource") or {})}
    job_manager_template = merged_pod_templates(common, job_manager.get("podTemplate"), by_name=by_name)
    if job_manager_template is not None:
        job_manager["podTemplate"] = job_manager_template
    spec["jobManager"] = job_manager
    spec["job"] = {**spec["job"], "parallelism": parallelism}
    return spec


def _flink_memory(
    conf: Mapping[str, Any], task_manager_mib: int, job_manager: Mapping[str, Any], job: str, testbed: str
) -> dict[str, str]:
    """The memory settings esi adds so that a TaskManager starts in the slot (``fitted_task_manager``; none where
    Flink's own split fits). Raises ``ApplicationError`` unless it can, and the JobManager can as sized: naming
    the user's own memory settings where they are what makes it impossible."""
    where = "spec.flinkSpec.flinkConfiguration"
    for key in unmodelled_memory_keys(conf):
        raise ApplicationError(
            f"{where}[\"{key}\"] is set: esi sizes Flink's processes from their resources (a TaskManager's is its "
            "slot), and Flink splits that size by its fractions; leave it out and adjust the fractions instead"
        )
    try:
        settings = dict(fitted_task_manager(task_manager_mib * _MIB, conf).settings)
    except MemoryConfigError as err:
        own = ", ".join(f'{where}["{key}"] ({value!r})' for key, value in user_memory_settings(conf).items())
        lower = f"lower or leave out {own}, which esi keeps as written" if own else ""
        try:
            remedy = f"a Testbed for this job needs slots of at least {smallest_task_manager(conf) // _MIB} MiB"
            remedy += f"; or {lower}" if lower else ""
        except MemoryConfigError:
            remedy = f"no slot is large enough: {lower}" if lower else "no slot is large enough"
        raise ApplicationError(
            f"BatchJob {job}: resourcesPerSlot.memory of testbed {testbed} is {task_manager_mib} MiB, and {err}; "
            + remedy
        ) from err
    memory = (job_manager.get("resource") or {}).get("memory", _FLINK_JOB_MANAGER_RESOURCE["memory"])
    try:
        job_manager_heap(_flink_resource_memory(memory), conf)
    except MemoryConfigError as err:
        raise ApplicationError(f"spec.flinkSpec.jobManager.resource.memory is {memory!r}: {err}") from err
    return settings


def _flink_resource_memory(memory: object) -> int:
    """Bytes of a FlinkDeployment's ``resource.memory``: Flink's MemorySize ("2048m", "2g"), else a Kubernetes
    quantity ("2Gi"), as the operator reads it."""
    try:
        return memory_size(memory, "resource.memory")
    except MemoryConfigError:
        try:
            return int(parse_quantity(memory).amount)
        except ValueError:
            raise MemoryConfigError(f"{memory!r} is not a memory size (e.g. 2048m, 2g or 2Gi)") from None


def _refuse_flink_extras(template: Mapping[str, Any]) -> None:
    """Raise ``ApplicationError`` for a part of the TaskManagers' pod template that makes a TaskManager pod
    request more than its slot: containers beside Flink's, init containers, pod-level resources or overhead."""
    where = "spec.flinkSpec.taskManager.podTemplate.spec (merged over spec.flinkSpec.podTemplate)"
    spec = template.get("spec") or {}
    others = [str(c.get("name")) for c in spec.get("containers") or [] if c.get("name") != FLINK_MAIN_CONTAINER]
    if others:
        raise ApplicationError(
            f"{where}.containers has {', '.join(others)} beside {FLINK_MAIN_CONTAINER}: Flink keeps them as "
            "sidecars, whose requests add to the TaskManager pod's and outgrow its slot; give only "
            f"{FLINK_MAIN_CONTAINER} (by position, the operator merges the first container of each template into one)"
        )
    for field in ("initContainers", "resources", "overhead"):
        if spec.get(field):
            raise ApplicationError(
                f"{where}.{field} is set: it would make the TaskManager pod request more than its slot; leave it out"
            )


def _flink_task_slots(value: object) -> int:
    try:
        slots = int(str(value).strip())
    except ValueError:
        slots = 0
    if slots < 1:
        raise ApplicationError(
            f'spec.flinkSpec.flinkConfiguration["{_FLINK_SLOTS_KEY}"] is {value!r}, not a positive integer'
        )
    return slots


# --- reading back -------------------------------------------------------------------------------------------


def application_view(
    application: Mapping[str, Any] | None, pods: Sequence[Mapping[str, Any]]
) -> ApplicationView | None:
    """What ``decide_batchjob`` needs to know of an application: its phase, its executors, what holds it up.

    ``pods`` are the application's pods (``application_pod_selector``). A pod being deleted counts for
    nothing, and a pod that has ended (Succeeded, Failed) is not counted as an executor, bound or running —
    its replacement is what matters — but its node still counts among the run's nodes. None when there is
    no application.
    """
    if application is None:
        return None
    kind = application_kind(application)
    status = application.get("status") or {}
    phase, message = _STATUS_READERS[kind.kind](status)
    executors = bound = running = 0
    nodes: set[str] = set()
    live = [pod for pod in pods if not (pod.get("metadata") or {}).get("deletionTimestamp")]
    for pod in live:
        if not is_executor_pod(pod):
            continue
        node = (pod.get("spec") or {}).get("nodeName")
        pod_phase = (pod.get("status") or {}).get("phase") or "Pending"
        if node:
            nodes.add(node)
        if pod_phase in ("Succeeded", "Failed"):
            continue
        executors += 1
        bound += bool(node)
        running += pod_phase == "Running"
    return ApplicationView(
        phase,
        executors=executors,
        executors_bound=bound,
        executors_running=running,
        nodes=tuple(sorted(nodes)),
        message=message,
        waiting_for=_waiting_for(live),
        lingers=kind is FLINK,
    )


def _waiting_for(pods: Sequence[Mapping[str, Any]]) -> str:
    """What holds up the application's pods, in the scheduler's or kubelet's words: the first pod told of
    (its driver or JobManager before its executors, else by name), and how many more; "" when none is held up.

    A pod the scheduler has nominated a node for is on its way (for an executor, its slot's ghost is being
    evicted), so its "unschedulable" is not news."""
    ordered = sorted(pods, key=lambda pod: (is_executor_pod(pod), (pod.get("metadata") or {}).get("name") or ""))
    held_up = [told for told in map(_held_up, ordered) if told]
    if not held_up:
        return ""
    more = len(held_up) - 1
    return held_up[0] + (f" (and {more} more pod{'s' if more > 1 else ''})" if more else "")


# Container waiting reasons of a pod that is starting normally.
_STARTING: Final = frozenset({"ContainerCreating", "PodInitializing"})


def _held_up(pod: Mapping[str, Any]) -> str:
    """Why ``pod`` is not placed (its PodScheduled condition) or not started (a container's waiting reason),
    naming it by its role; "" when it is placed and starting, running or ended."""
    status = pod.get("status") or {}
    if status.get("phase") not in (None, "Pending"):
        return ""
    name = f"{_role(pod)} {(pod.get('metadata') or {}).get('name')}"
    if not (pod.get("spec") or {}).get("nodeName"):
        refusal = scheduler_refusal(pod)
        return "" if refusal is None else f"{name} unschedulable: {refusal}"
    for container in [*(status.get("initContainerStatuses") or ()), *(status.get("containerStatuses") or ())]:
        waiting = (container.get("state") or {}).get("waiting") or {}
        reason = waiting.get("reason")
        if reason and reason not in _STARTING:
            detail = f" ({waiting['message']})" if waiting.get("message") else ""
            return f"{name} not started: {reason}{detail}"
    return ""


def _role(pod: Mapping[str, Any]) -> str:
    """A pod's part in its application, in its operator's words."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    if labels.get("component") == "jobmanager":
        return "JobManager"
    if labels.get("component") == "taskmanager":
        return "TaskManager"
    if labels.get("spark-role") in ("driver", "executor"):
        return str(labels["spark-role"])
    return "executor" if is_executor_pod(pod) else "pod"


_SPARK_PHASES: Final = {
    "COMPLETED": ApplicationPhase.SUCCEEDED,
    "FAILED": ApplicationPhase.FAILED,
    "SUBMISSION_FAILED": ApplicationPhase.FAILED,
    "FAILING": ApplicationPhase.FAILED,
    "RUNNING": ApplicationPhase.RUNNING,
    # The driver has succeeded and its executors are going: still running until COMPLETED.
    "SUCCEEDING": ApplicationPhase.RUNNING,
}
_FLINK_PHASES: Final = {
    "FINISHED": ApplicationPhase.SUCCEEDED,
    "FAILED": ApplicationPhase.FAILED,
    # A cancelled job never finishes; waiting for it would hold the slots forever.
    "CANCELED": ApplicationPhase.FAILED,
    "RUNNING": ApplicationPhase.RUNNING,
}


def _spark_status(status: Mapping[str, Any]) -> tuple[ApplicationPhase, str]:
    state = status.get("applicationState") or {}
    phase = _SPARK_PHASES.get(str(state.get("state") or ""), ApplicationPhase.PENDING)
    return phase, str(state.get("errorMessage") or "")


def _flink_status(status: Mapping[str, Any]) -> tuple[ApplicationPhase, str]:
    job = status.get("jobStatus") or {}
    phase = _FLINK_PHASES.get(str(job.get("state") or "").upper(), ApplicationPhase.PENDING)
    if str(status.get("lifecycleState") or "").upper() == "FAILED":
        phase = ApplicationPhase.FAILED
    message = _flink_error(status.get("error")) or str(job.get("message") or "")
    if phase == ApplicationPhase.FAILED and not message and str(job.get("state") or "").upper() == "CANCELED":
        message = "the Flink job was cancelled"
    return phase, message


def _flink_error(error: object) -> str:
    """The message of the Flink operator's ``status.error``: JSON with a ``message``, or plain text."""
    if not error:
        return ""
    try:
        parsed = json.loads(str(error))
    except ValueError:
        return str(error)
    if isinstance(parsed, dict) and parsed.get("message"):
        return str(parsed["message"])
    return str(error)


_STATUS_READERS: Final[dict[str, Callable[[Mapping[str, Any]], tuple[ApplicationPhase, str]]]] = {
    SPARK.kind: _spark_status,
    FLINK.kind: _flink_status,
}
