"""The pods of a SparkApplication or FlinkDeployment, built as the real operators build them, and read back.

**Spark** (kubeflow Spark operator without its mutating webhook + Spark's Kubernetes backend). The driver pod
``<app>-driver`` is controlled by the SparkApplication; the driver then asks for the executors
``<app>-<id>-exec-<n>``, n = 1..instances and, for each executor lost, the next n (Spark never reuses an id),
each owned by the application and controlled by the driver pod (so deleting the application removes the
driver and the executors: the garbage collector follows the owner references). ``<id>`` is the first 16 hex
digits of the application's uid, so a restarted simulator finds the executors it created instead of making
new ones (Spark's are random and the time, after the name the program gives itself: esi depends on neither).
Labels: ``spark-role`` (driver/executor), ``spark-app-selector`` (the application id), ``spark-app-name``,
``spark-version`` (``spec.sparkVersion``), ``sparkoperator.k8s.io/app-name``, ``…/launched-by-spark-operator``,
``…/submission-id``, ``…/mutated-by-spark-operator`` on a pod without a template, on executors
``spark-exec-id`` and ``spark-exec-resourceprofile-id``; under them the template's labels, then the
application's own ``metadata.labels`` (except Kueue's ``kueue.x-k8s.io/``), then ``spec.<role>.labels``
(never overriding the operator's): the operator copies the application's labels onto the driver *and* every
executor. ``spec.<role>.template`` is the pod's base; scheduler, priority class, affinity and tolerations come
only from it (the fields of ``spec.<role>`` reach a pod only through the webhook), node selectors from
``spec.nodeSelector`` and Spark's ``spark.kubernetes.[<role>.]node.selector.*``. Sizes as Spark makes them:
cpu request ``coreRequest`` else ``cores`` (default 1), cpu limit ``coreLimit``; memory request = limit =
``memory`` (default 1g) + ``memoryOverhead``, the overhead defaulting to max(384 MiB, 10% of the memory)
(``spec.memoryOverheadFactor`` changes the 10%). A field left out of ``spec.<role>`` is taken from the
matching ``sparkConf`` key (``spark.executor.instances``, ``spark.executor.memory``, ...), as Spark does.

**Flink** (Apache Flink Kubernetes operator, native Kubernetes, application mode). The JobManager runs in the
Deployment ``<app>`` (one replica; owned, not controlled, by the FlinkDeployment, as Flink's client creates it
from the operator's owner-reference setting), whose ReplicaSet makes its pod. TaskManagers
``<app>-taskmanager-1-<n>`` (Flink's ``<cluster>-taskmanager-<attempt>-<n>`` of a first JobManager) are
controlled by that Deployment, so deleting the FlinkDeployment removes all of them. Labels ``app``,
``component`` (jobmanager/taskmanager) and ``type=flink-native-kubernetes`` (the Deployment's selector) over the
pod template's. ``spec.<component>.podTemplate`` is merged over ``spec.podTemplate`` as the operator merges them
(``esi.objects.flink_pod_templates``) and gives labels, annotations, scheduler, priority class, affinity, node
selector, tolerations, volumes, and the settings of the pod's container (its ``flink-main-container``: volume
mounts, env, …). Requests = limits = ``spec.<component>.resource`` (cpu cores, memory in Flink units or as a
quantity). TaskManagers: ``taskManager.replicas``, else ceil(job.parallelism / ``taskmanager.numberOfTaskSlots``).

Every pod: one container, ``restartPolicy: Never`` (the JobManager's: ``Always``, a Deployment's only policy),
``terminationGracePeriodSeconds: 0``, and the label ``sim.esi.tu-berlin.de/app-uid`` by which the simulator
finds the pods of an application (the JobManager's Deployment carries it too). The builders are pure and raise
``SpecError`` for a spec no operator could run.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Final

from esi.objects.flink_pod_templates import merge_arrays_by_name, merged_pod_templates
from esi.objects.names import JOB_LABEL
from esi.objects.owners import owner_reference
from esi.resources.flink_cluster import FLINK_IMAGE, FLINK_MAIN_CONTAINER
from sim.crds import FLINK, SPARK, ApplicationType
from sim.names import APP_UID_LABEL
from sim.units import MIB, SpecError, cpu_quantity, flink_bytes, memory_quantity, spark_mib

__all__ = [
    "SPARK_APP_SELECTOR_LABEL",
    "AppRef",
    "DeploymentView",
    "NodeExecutor",
    "PodRole",
    "PodView",
    "deployment_view",
    "ended_pod_status",
    "executor_placement",
    "flink_jobmanager_deployment",
    "flink_taskmanager_count",
    "flink_taskmanager_name",
    "flink_taskmanager_number",
    "flink_taskmanager_pod",
    "node_executor",
    "pod_view",
    "required_nodes",
    "spark_application_id",
    "spark_driver_name",
    "spark_driver_pod",
    "spark_executor_count",
    "spark_executor_name",
    "spark_executor_number",
    "spark_executor_pod",
]

SPARK_ROLE_LABEL: Final = "spark-role"
SPARK_APP_NAME_LABEL: Final = "sparkoperator.k8s.io/app-name"
SPARK_APP_SELECTOR_LABEL: Final = "spark-app-selector"
SPARK_LAUNCHED_LABEL: Final = "sparkoperator.k8s.io/launched-by-spark-operator"
SPARK_EXEC_ID_LABEL: Final = "spark-exec-id"
SPARK_RESOURCE_PROFILE_LABEL: Final = "spark-exec-resourceprofile-id"
SPARK_PROGRAM_NAME_LABEL: Final = "spark-app-name"  # Spark's: the name the program runs under
SPARK_VERSION_LABEL: Final = "spark-version"
SPARK_SUBMISSION_LABEL: Final = "sparkoperator.k8s.io/submission-id"
SPARK_MUTATED_LABEL: Final = "sparkoperator.k8s.io/mutated-by-spark-operator"
FLINK_APP_LABEL: Final = "app"
FLINK_COMPONENT_LABEL: Final = "component"
FLINK_TYPE_LABEL: Final = "type"
FLINK_NATIVE_TYPE: Final = "flink-native-kubernetes"

SPARK_IMAGE: Final = "apache/spark:3.5.3"
_KUEUE_LABEL_PREFIX: Final = "kueue.x-k8s.io/"  # the operator leaves these on the application alone
_SPARK_MIN_OVERHEAD_MIB: Final = 384
_SPARK_OVERHEAD_FACTOR: Final = 0.1
_FLINK_SLOTS_KEY: Final = "taskmanager.numberOfTaskSlots"
_FLINK_DEFAULT_MEMORY: Final = {"jobmanager": "1600m", "taskmanager": "1728m"}  # Flink's default process sizes
_FINISHED: Final = ("Succeeded", "Failed")


class PodRole(StrEnum):
    DRIVER = "driver"
    EXECUTOR = "executor"
    JOBMANAGER = "jobmanager"
    TASKMANAGER = "taskmanager"

    @property
    def is_executor(self) -> bool:
        """Executors and TaskManagers: the pods that go into slots and whose neighbours slow a job down."""
        return self in (PodRole.EXECUTOR, PodRole.TASKMANAGER)


@dataclass(frozen=True)
class AppRef:
    """Who an application is: what its pods are named after and owned by."""

    type: ApplicationType
    namespace: str
    name: str
    uid: str

    @classmethod
    def of(cls, app: Mapping[str, Any]) -> AppRef:
        metadata = app.get("metadata") or {}
        type_ = SPARK if app.get("kind") == SPARK.kind else FLINK
        return cls(type_, metadata.get("namespace") or "", metadata["name"], metadata["uid"])

    @property
    def uid_hex(self) -> str:
        return self.uid.replace("-", "").lower()

    def owner_reference(self) -> dict[str, Any]:
        return owner_reference(self.type.api_version, self.type.kind, self.name, self.uid)


@dataclass(frozen=True)
class PodView:
    """A simulated pod as the simulator reasons about it."""

    name: str
    uid: str
    app_uid: str
    role: PodRole
    job: str  # the job the workload model knows it by: its esi job label, else its application's name
    phase: str = "Pending"
    node: str | None = None
    terminating: bool = False
    containers: tuple[tuple[str, str], ...] = ()  # (name, image)

    @property
    def running(self) -> bool:
        return self.phase == "Running" and self.node is not None and not self.terminating

    @property
    def ended(self) -> bool:
        return self.phase in _FINISHED


@dataclass(frozen=True)
class NodeExecutor:
    """An executor (or TaskManager) bound to a node: whose it is, for the co-location of other runs."""

    app_uid: str
    job: str


# --- Spark ----------------------------------------------------------------------------------------------


def spark_driver_name(app_name: str) -> str:
    return f"{app_name}-driver"


def spark_application_id(ref: AppRef) -> str:
    """The id Spark gives the application (``spark.app.id``): ``spark-`` and 32 hex digits."""
    return f"spark-{ref.uid_hex}"


def spark_executor_name(app: Mapping[str, Any], number: int) -> str:
    """Executor ``number``'s pod name: Spark's ``<prefix>-exec-<id>``, the prefix from the uid (see above)."""
    ref = AppRef.of(app)
    return f"{ref.name}-{ref.uid_hex[:16]}-exec-{number}"


def spark_executor_number(app: Mapping[str, Any], name: str) -> int | None:
    """The executor id in the pod name ``name`` (None if it is not one of ``app``'s executor names)."""
    prefix = spark_executor_name(app, 0).removesuffix("0")
    number = name.removeprefix(prefix)
    return int(number) if name.startswith(prefix) and number.isdigit() else None


def spark_driver_pod(app: Mapping[str, Any]) -> dict[str, Any]:
    ref = AppRef.of(app)
    labels = {SPARK_ROLE_LABEL: "driver"}
    return _spark_pod(app, "driver", spark_driver_name(ref.name), labels, [ref.owner_reference()])


def spark_executor_pod(app: Mapping[str, Any], number: int, driver: PodView) -> dict[str, Any]:
    """Executor ``number`` (1-based), owned by the application (the operator's template) and controlled by the
    driver pod (Spark)."""
    ref = AppRef.of(app)
    name = spark_executor_name(app, number)
    labels = {SPARK_ROLE_LABEL: "executor", SPARK_EXEC_ID_LABEL: str(number), SPARK_RESOURCE_PROFILE_LABEL: "0"}
    owners: list[dict[str, Any]] = [
        {"apiVersion": ref.type.api_version, "kind": ref.type.kind, "name": ref.name, "uid": ref.uid},
        {"apiVersion": "v1", "kind": "Pod", "name": driver.name, "uid": driver.uid, "controller": True},
    ]
    return _spark_pod(app, "executor", name, labels, owners)


def spark_executor_count(app: Mapping[str, Any]) -> int:
    """How many executors the application asks for (``spec.executor.instances``, else Spark's setting, else 1)."""
    spec = app.get("spec") or {}
    value = _spark_setting(spec, "executor", "instances", "spark.executor.instances")
    try:
        count = int(str(1 if value is None else value))
    except ValueError:
        count = -1
    if count < 0:
        raise SpecError(f"spec.executor.instances is {value!r}, not a number of executors")
    return count


def _spark_setting(spec: Mapping[str, Any], role: str, field: str, conf_key: str) -> Any:
    """A driver/executor field, else the sparkConf key Spark reads for it (the field wins, as in the operator)."""
    value = (spec.get(role) or {}).get(field)
    return value if value is not None else (spec.get("sparkConf") or {}).get(conf_key)


def _spark_pod(
    app: Mapping[str, Any], role: str, name: str, role_labels: Mapping[str, str], owners: list[dict[str, Any]]
) -> dict[str, Any]:
    """A driver or executor pod as spark-submit and the driver make it from what the operator passes them
    without its mutating webhook: the role's template, labels, annotations, account and sizes; scheduler,
    priority, affinity and tolerations only from the template; node selectors from ``spec.nodeSelector`` and
    the Spark configuration."""
    ref = AppRef.of(app)
    spec = app.get("spec") or {}
    conf = spec.get("sparkConf") or {}
    pod_spec = spec.get(role) or {}
    template = pod_spec.get("template") or {}
    app_labels = (app.get("metadata") or {}).get("labels") or {}
    operator_labels = {
        SPARK_APP_NAME_LABEL: ref.name,
        SPARK_LAUNCHED_LABEL: "true",
        SPARK_SUBMISSION_LABEL: ref.uid,  # the simulator's submission id (status.submissionID)
        **({SPARK_MUTATED_LABEL: "true"} if not template else {}),  # the webhook's to mutate
    }
    spark_labels = {
        SPARK_APP_SELECTOR_LABEL: spark_application_id(ref),
        SPARK_PROGRAM_NAME_LABEL: _kubernetes_name(ref.name),
        **({SPARK_VERSION_LABEL: str(spec["sparkVersion"])} if spec.get("sparkVersion") else {}),
        **role_labels,
    }
    labels = {
        **((template.get("metadata") or {}).get("labels") or {}),
        **{key: value for key, value in app_labels.items() if not key.startswith(_KUEUE_LABEL_PREFIX)},
        **(pod_spec.get("labels") or {}),
        **operator_labels,
        **spark_labels,
        APP_UID_LABEL: ref.uid,
    }
    annotations = {**((template.get("metadata") or {}).get("annotations") or {}), **(pod_spec.get("annotations") or {})}
    scheduler = conf.get(f"spark.kubernetes.{role}.scheduler.name") or conf.get("spark.kubernetes.scheduler.name")
    placement = {"schedulerName": scheduler, "serviceAccountName": pod_spec.get("serviceAccount")}
    container = {
        "name": f"spark-kubernetes-{role}",
        "image": pod_spec.get("image") or spec.get("image") or SPARK_IMAGE,
        "resources": _spark_resources(spec, role),
    }
    node_selector = {
        **(spec.get("nodeSelector") or {}),
        **_conf_map(conf, "spark.kubernetes.node.selector."),
        **_conf_map(conf, f"spark.kubernetes.{role}.node.selector."),
    }
    pod_body = _pod_spec(template.get("spec") or {}, placement, node_selector, container)
    return _pod(ref.namespace, name, labels=labels, annotations=annotations, owners=owners, spec=pod_body)


def _conf_map(conf: Mapping[str, Any], prefix: str) -> dict[str, str]:
    """The Spark settings ``<prefix><key>`` as a map of key to value."""
    return {key.removeprefix(prefix): str(value) for key, value in conf.items() if key.startswith(prefix)}


def _kubernetes_name(name: str) -> str:
    """``name`` as Spark makes a label value of an application name: lower case, [a-z0-9-] only, 63 at most."""
    return re.sub(r"[^a-z0-9-]", "-", name.lower())[:63]


def _spark_resources(spec: Mapping[str, Any], role: str) -> dict[str, dict[str, str]]:
    def setting(field: str, conf_key: str) -> Any:
        return _spark_setting(spec, role, field, conf_key)

    cores = setting("cores", f"spark.{role}.cores")
    request = setting("coreRequest", f"spark.kubernetes.{role}.request.cores") or cores or 1
    limit = setting("coreLimit", f"spark.kubernetes.{role}.limit.cores")
    memory = spark_mib(setting("memory", f"spark.{role}.memory") or "1g", f"spec.{role}.memory")
    overhead_setting = setting("memoryOverhead", f"spark.{role}.memoryOverhead")
    if overhead_setting is not None:
        overhead = spark_mib(overhead_setting, f"spec.{role}.memoryOverhead")
    else:
        factor = _overhead_factor(spec, role)
        overhead = max(_SPARK_MIN_OVERHEAD_MIB, int(factor * memory))
    pod_memory = str(memory_quantity((memory + overhead) * MIB))
    requests = {"cpu": str(cpu_quantity(request, f"spec.{role}.coreRequest")), "memory": pod_memory}
    limits = {"memory": pod_memory}
    if limit is not None:
        limits["cpu"] = str(cpu_quantity(limit, f"spec.{role}.coreLimit"))
    return {"requests": requests, "limits": limits}


def _overhead_factor(spec: Mapping[str, Any], role: str) -> float:
    conf = spec.get("sparkConf") or {}
    value = spec.get("memoryOverheadFactor") or conf.get(f"spark.{role}.memoryOverheadFactor")
    if value is None:
        return _SPARK_OVERHEAD_FACTOR
    try:
        factor = float(value)
    except ValueError:
        factor = math.nan
    if not (math.isfinite(factor) and factor >= 0):
        raise SpecError(f"spec.memoryOverheadFactor is {value!r}, not a non-negative number")
    return factor


# --- Flink ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeploymentView:
    """The JobManager's Deployment of a FlinkDeployment, as the simulator reasons about it."""

    name: str
    uid: str
    app_uid: str
    terminating: bool = False


def deployment_view(deployment: Mapping[str, Any]) -> DeploymentView | None:
    """A simulated JobManager Deployment as ``DeploymentView``; None for one the simulator did not create."""
    metadata = deployment.get("metadata") or {}
    app_uid = (metadata.get("labels") or {}).get(APP_UID_LABEL)
    if not app_uid:
        return None
    return DeploymentView(
        metadata["name"], metadata.get("uid") or "", app_uid, metadata.get("deletionTimestamp") is not None
    )


def flink_taskmanager_name(app_name: str, number: int) -> str:
    """TaskManager ``number``'s pod name: Flink's ``<cluster>-taskmanager-<attempt>-<n>`` of a first JobManager."""
    return f"{app_name}-taskmanager-1-{number}"


def flink_taskmanager_number(app_name: str, name: str) -> int | None:
    """The number in the TaskManager pod name ``name`` (None if it is not one of ``app_name``'s)."""
    prefix = flink_taskmanager_name(app_name, 0).removesuffix("0")
    number = name.removeprefix(prefix)
    return int(number) if name.startswith(prefix) and number.isdigit() else None


def flink_jobmanager_deployment(app: Mapping[str, Any]) -> dict[str, Any]:
    """The JobManager's Deployment ``<app>``: one replica, owned (not controlled) by the FlinkDeployment, as
    Flink's client creates it with the operator's ``kubernetes.jobmanager.owner.reference``."""
    ref = AppRef.of(app)
    owner = {**ref.owner_reference(), "controller": False, "blockOwnerDeletion": True}
    pod = _flink_pod(app, "jobmanager", ref.name, owner)
    template_metadata = {key: pod["metadata"][key] for key in ("labels", "annotations") if key in pod["metadata"]}
    pod["spec"]["restartPolicy"] = "Always"  # the only policy a Deployment takes
    labels = _flink_labels(ref, "jobmanager")
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": ref.name,
            "namespace": ref.namespace,
            "labels": {**labels, APP_UID_LABEL: ref.uid},
            "ownerReferences": [owner],
        },
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": template_metadata, "spec": pod["spec"]},
        },
    }


def flink_taskmanager_count(app: Mapping[str, Any]) -> int:
    """How many TaskManagers the job asks for: ``taskManager.replicas``, else ceil(parallelism / task slots)."""
    spec = app.get("spec") or {}
    replicas = (spec.get("taskManager") or {}).get("replicas")
    if replicas is not None:
        return _positive_int(replicas, "spec.taskManager.replicas")
    parallelism = _positive_int((spec.get("job") or {}).get("parallelism", 1), "spec.job.parallelism")
    slots_text = (spec.get("flinkConfiguration") or {}).get(_FLINK_SLOTS_KEY, 1)
    slots = _positive_int(slots_text, f'spec.flinkConfiguration["{_FLINK_SLOTS_KEY}"]')
    return -(-parallelism // slots)


def flink_taskmanager_pod(app: Mapping[str, Any], number: int, deployment: DeploymentView) -> dict[str, Any]:
    """TaskManager ``number``, controlled by the JobManager's Deployment (as Flink's resource manager sets it)."""
    name = flink_taskmanager_name(AppRef.of(app).name, number)
    owner = owner_reference("apps/v1", "Deployment", deployment.name, deployment.uid)
    return _flink_pod(app, "taskmanager", name, owner)


def _positive_int(value: object, field: str) -> int:
    try:
        number = int(str(value).strip())
    except ValueError:
        number = 0
    if number < 1 or isinstance(value, bool):
        raise SpecError(f"{field} is {value!r}, not a positive integer")
    return number


def _flink_labels(ref: AppRef, component: str) -> dict[str, str]:
    return {FLINK_APP_LABEL: ref.name, FLINK_COMPONENT_LABEL: component, FLINK_TYPE_LABEL: FLINK_NATIVE_TYPE}


def _flink_pod(app: Mapping[str, Any], component: str, name: str, owner: dict[str, Any]) -> dict[str, Any]:
    ref = AppRef.of(app)
    spec = app.get("spec") or {}
    field = "jobManager" if component == "jobmanager" else "taskManager"
    settings = spec.get(field) or {}
    conf = spec.get("flinkConfiguration") or {}
    template = (
        merged_pod_templates(spec.get("podTemplate"), settings.get("podTemplate"), by_name=merge_arrays_by_name(conf))
        or {}
    )
    metadata = template.get("metadata") or {}
    labels = {**(metadata.get("labels") or {}), **_flink_labels(ref, component), APP_UID_LABEL: ref.uid}
    resource = settings.get("resource") or {}
    cpu = str(cpu_quantity(resource.get("cpu", 1.0), f"spec.{field}.resource.cpu"))
    memory_setting = resource.get("memory", _FLINK_DEFAULT_MEMORY[component])
    memory = str(memory_quantity(flink_bytes(memory_setting, f"spec.{field}.resource.memory")))
    sizes = {"cpu": cpu, "memory": memory}
    template_spec = template.get("spec") or {}
    # Flink builds its container over the template's of the same name (volume mounts, env, ...).
    containers: list[dict[str, Any]] = template_spec.get("containers") or []
    main = next((c for c in containers if c.get("name") == FLINK_MAIN_CONTAINER), {})
    container = {
        **copy.deepcopy(main),
        "name": FLINK_MAIN_CONTAINER,
        "image": spec.get("image") or FLINK_IMAGE,
        "resources": {"requests": dict(sizes), "limits": dict(sizes)},
    }
    placement = {"serviceAccountName": template_spec.get("serviceAccountName") or spec.get("serviceAccount")}
    pod_body = _pod_spec(template_spec, placement, template_spec.get("nodeSelector") or {}, container)
    annotations = dict(metadata.get("annotations") or {})
    return _pod(ref.namespace, name, labels=labels, annotations=annotations, owners=[owner], spec=pod_body)


# --- common -----------------------------------------------------------------------------------------------


def _pod_spec(
    template_spec: Mapping[str, Any],
    placement: Mapping[str, Any],
    node_selector: Mapping[str, str],
    container: dict[str, Any],
) -> dict[str, Any]:
    """The template's pod spec with the given placement fields (those not None) and the one container."""
    spec = copy.deepcopy(dict(template_spec))
    spec.update({key: copy.deepcopy(value) for key, value in placement.items() if value is not None})
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    spec["containers"] = [container]
    spec["restartPolicy"] = "Never"
    spec["terminationGracePeriodSeconds"] = 0
    return spec


def _pod(
    namespace: str,
    name: str,
    *,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    owners: list[dict[str, Any]],
    spec: dict[str, Any],
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": dict(labels)}
    if annotations:
        metadata["annotations"] = dict(annotations)
    metadata["ownerReferences"] = owners
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


# --- reading back ---------------------------------------------------------------------------------------


def pod_view(pod: Mapping[str, Any]) -> PodView | None:
    """A simulated pod as ``PodView``; None for a pod the simulator did not create."""
    metadata = pod.get("metadata") or {}
    labels = metadata.get("labels") or {}
    app_uid = labels.get(APP_UID_LABEL)
    role = _role(labels)
    if not app_uid or role is None:
        return None
    spec = pod.get("spec") or {}
    app_name = labels.get(SPARK_APP_NAME_LABEL) or labels.get(FLINK_APP_LABEL) or ""
    return PodView(
        name=metadata["name"],
        uid=metadata.get("uid") or "",
        app_uid=app_uid,
        role=role,
        job=labels.get(JOB_LABEL) or app_name,
        phase=(pod.get("status") or {}).get("phase") or "Pending",
        node=spec.get("nodeName") or None,
        terminating=metadata.get("deletionTimestamp") is not None,
        containers=tuple((c.get("name", ""), c.get("image", "")) for c in spec.get("containers") or ()),
    )


def executor_placement(app: Mapping[str, Any]) -> tuple[str, frozenset[str]] | None:
    """The job of the application's executors (TaskManagers), for the workload model, and the nodes they must go to
    by name (``required_nodes``), known from the spec before any pod exists; None when the spec cannot become an
    executor (its submission fails then)."""
    ref = AppRef.of(app)
    try:
        if ref.type == SPARK:
            head = PodView(spark_driver_name(ref.name), "", ref.uid, PodRole.DRIVER, ref.name)
            manifest = spark_executor_pod(app, 1, head)
        else:
            manifest = flink_taskmanager_pod(app, 1, DeploymentView(ref.name, "", ref.uid))
    except SpecError:
        return None
    view = pod_view(manifest)
    return None if view is None else (view.job, required_nodes(manifest))


def required_nodes(pod: Mapping[str, Any]) -> frozenset[str]:
    """The nodes a pod must go to by name: those its required node affinity's terms name in ``matchFields`` (esi
    names the nodes of an executor's slots so); empty when it names none."""
    affinity = ((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}
    terms = (affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or ()
    return frozenset(
        name
        for term in terms
        for field in term.get("matchFields") or ()
        if field.get("key") == "metadata.name" and field.get("operator") == "In"
        for name in field.get("values") or ()
    )


def _role(labels: Mapping[str, str]) -> PodRole | None:
    spark_role = labels.get(SPARK_ROLE_LABEL)
    if spark_role in ("driver", "executor"):
        return PodRole(spark_role)
    if labels.get(FLINK_TYPE_LABEL) == FLINK_NATIVE_TYPE and labels.get(FLINK_COMPONENT_LABEL) in (
        "jobmanager",
        "taskmanager",
    ):
        return PodRole(labels[FLINK_COMPONENT_LABEL])
    return None


def node_executor(view: PodView) -> tuple[str, NodeExecutor] | None:
    """(node, executor) for an executor that holds its node now: bound, not ended, not being deleted."""
    if not view.role.is_executor or view.node is None or view.ended or view.terminating:
        return None
    return view.node, NodeExecutor(view.app_uid, view.job)


def ended_pod_status(view: PodView, *, succeeded: bool, message: str, now: datetime) -> dict[str, Any]:
    """The status of a pod whose program exited (0 when ``succeeded``, else 1): what a kubelet would write."""
    time = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    reason = "Completed" if succeeded else "Error"
    terminated: dict[str, Any] = {"exitCode": 0 if succeeded else 1, "reason": reason, "finishedAt": time}
    if message:
        terminated["message"] = message
    not_ready = {"status": "False", "reason": "PodCompleted" if succeeded else "PodFailed", "lastTransitionTime": time}
    return {
        "phase": "Succeeded" if succeeded else "Failed",
        "conditions": [{"type": "Ready", **not_ready}, {"type": "ContainersReady", **not_ready}],
        "containerStatuses": [
            {
                "name": name,
                "image": image,
                "imageID": "",
                "ready": False,
                "started": False,
                "restartCount": 0,
                "state": {"terminated": dict(terminated)},
            }
            for name, image in view.containers
        ],
    }
