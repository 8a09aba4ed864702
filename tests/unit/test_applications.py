"""The applications esi creates for a run (sized, placed and labelled for their slots), and how they read back.

Executor sizes are checked the way the real operators turn them into pod requests (``spark_executor_pod`` and
``flink_taskmanager_pod`` below, written from Spark's and the Flink operator's rules, not from esi's code).
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from esi.decisions.batchjob_lifecycle import ApplicationPhase, ApplicationView
from esi.objects.applications import (
    FLINK,
    SPARK,
    ApplicationError,
    SlotAssignment,
    application_kind,
    application_manifest,
    application_pod_selector,
    application_view,
    is_executor_pod,
    run_problem,
    slot_assignment,
)
from esi.objects.flink_memory import smallest_task_manager
from esi.objects.ghosts import pod_view
from esi.objects.names import (
    ATTEMPT_ANNOTATION,
    ATTEMPT_LABEL,
    EXECUTOR_PRIORITY_CLASS,
    JOB_ANNOTATION,
    JOB_LABEL,
    ROLE_EXECUTOR,
    ROLE_LABEL,
    SCHEDULER_NAME,
    TESTBED_ANNOTATION,
    TESTBED_LABEL,
    testbed_of,
)
from esi.resources.batchjob import BatchJob
from esi.resources.quantity import Quantity
from esi.resources.testbed import Slot, SlotState, TestbedSpec, Toleration
from sim import pods as simulated
from tests import manifests

NODE_LABEL = "tuberlin.de/node-with-slots-profiler"
THESIS_SLOTS = SlotAssignment(
    testbed="profiler-testbed",
    node_label=NODE_LABEL,
    node_ids=("1", "0", "1"),
    node_names=("node-b", "node-a", "node-b"),
    slots=(0, 2, 3),
    cpu=Quantity("700m"),
    memory=Quantity("896Mi"),
)
MiB = 2**20


def spark_job(**spark: Any) -> BatchJob:
    """The thesis' Spark BatchJob, with ``spark`` merged into its sparkSpec."""
    return BatchJob.model_validate(manifests.batchjob_manifest(sparkSpec={**copy.deepcopy(manifests.SPARK), **spark}))


def flink_job(**flink: Any) -> BatchJob:
    """The Flink BatchJob of the model tests, with ``flink`` merged into its flinkSpec (None drops a key)."""
    spec = {**copy.deepcopy(manifests.FLINK), **flink}
    return BatchJob.model_validate(manifests.batchjob_manifest(sparkSpec=None, flinkSpec=manifests.without_nones(spec)))


def build(job: BatchJob, assignment: SlotAssignment = THESIS_SLOTS) -> dict[str, Any]:
    return application_manifest(job, assignment, namespace="team-a", uid="uid-of-the-batchjob")


def slots(cpu: str, memory: str, **changes: Any) -> SlotAssignment:
    fields: dict[str, Any] = {
        "testbed": "tb",
        "node_label": NODE_LABEL,
        "node_ids": ("0",),
        "node_names": ("node-a",),
        "slots": (0, 1),
        "cpu": Quantity(cpu),
        "memory": Quantity(memory),
    } | changes
    return SlotAssignment(**fields)


# --- what the real operators make of a manifest ---------------------------------------------------------------

_SPARK_SIZE = re.compile(r"^([0-9]+)([kmgt]?)b?$")


def spark_mib(text: str) -> int:
    """Spark's reading of executor memory settings: a number with k, m, g or t; MiB without a unit."""
    match = _SPARK_SIZE.fullmatch(text.strip().lower())
    assert match, text
    number, unit = int(match[1]), match[2] or "m"
    return {"k": number // 1024, "m": number, "g": number * 1024, "t": number * 1024**2}[unit]


def spark_executor_pod(executor: Mapping[str, Any]) -> tuple[dict[str, Quantity], dict[str, Quantity]]:
    """(requests, limits) of the pod Spark builds for an executor spec of the Spark operator."""
    heap = spark_mib(executor["memory"])
    overhead = spark_mib(executor["memoryOverhead"]) if "memoryOverhead" in executor else max(384, heap // 10)
    memory = Quantity(f"{heap + overhead}Mi")
    requests = {"cpu": Quantity(executor.get("coreRequest", executor.get("cores", 1))), "memory": memory}
    limits = {"memory": memory} | ({"cpu": Quantity(executor["coreLimit"])} if "coreLimit" in executor else {})
    return requests, limits


def flink_mib(text: str) -> int:
    """Flink's MemorySize for the "<n>m" / "<n>g" forms: m is MiB."""
    match = re.fullmatch(r"([0-9]+)\s*(m|mb|g|gb)", text.strip().lower())
    assert match, text
    return int(match[1]) * (1024 if match[2].startswith("g") else 1)


def flink_taskmanager_pod(spec: Mapping[str, Any]) -> tuple[dict[str, Quantity], dict[str, Quantity]]:
    """(requests, limits) of a TaskManager pod of the Flink operator (native mode)."""
    resource = spec["taskManager"]["resource"]
    conf = spec.get("flinkConfiguration", {})
    cpu_factor = float(conf.get("kubernetes.taskmanager.cpu.limit-factor", "1.0"))
    memory_factor = float(conf.get("kubernetes.taskmanager.memory.limit-factor", "1.0"))
    cpu, mib = float(resource["cpu"]), flink_mib(resource["memory"])
    requests = {"cpu": Quantity(str(cpu)), "memory": Quantity(f"{mib}Mi")}
    limits = {"cpu": Quantity(str(cpu * cpu_factor)), "memory": Quantity(f"{int(mib * memory_factor)}Mi")}
    return requests, limits


def slot_size(assignment: SlotAssignment) -> dict[str, Quantity]:
    return {"cpu": assignment.cpu, "memory": assignment.memory}


# --- building: sizes ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cpu", "memory"),
    [("700m", "896Mi"), ("750m", "3Gi"), ("750m", "6Gi"), ("2", "8Gi"), ("2500m", "1536Mi"), ("1", "600Mi")],
)
def test_spark_executors_request_and_are_limited_to_exactly_their_slot(cpu: str, memory: str) -> None:
    assignment = slots(cpu, memory)

    executor = build(spark_job(), assignment)["spec"]["executor"]

    requests, limits = spark_executor_pod(executor)
    assert requests == limits == slot_size(assignment)
    assert executor["instances"] == 2
    assert executor["cores"] == max(1, -(-Quantity(cpu).millis // 1000))  # task threads: the slot's cpus, rounded up


def test_spark_keeps_its_own_default_overhead_where_the_slot_allows_it() -> None:
    thesis = build(spark_job(), slots("750m", "3Gi"))["spec"]["executor"]
    large = build(spark_job(), slots("4", "16Gi"))["spec"]["executor"]

    assert (thesis["memory"], thesis["memoryOverhead"]) == ("2688m", "384m")
    heap, overhead = spark_mib(large["memory"]), spark_mib(large["memoryOverhead"])
    assert heap + overhead == 16 * 1024
    assert overhead >= max(384, heap / 10)
    assert overhead < max(384, heap / 10) + 2  # and hardly more than Spark itself would take


def test_spark_executors_in_small_slots_keep_the_heap_spark_needs_to_start() -> None:
    executor = build(spark_job(), slots("500m", "600Mi"))["spec"]["executor"]

    heap, overhead = spark_mib(executor["memory"]), spark_mib(executor["memoryOverhead"])
    assert (heap, overhead) == (450, 150)


@pytest.mark.parametrize(("cpu", "memory"), [("700m", "896Mi"), ("750m", "3Gi"), ("2", "8Gi"), ("250m", "1536Mi")])
def test_flink_taskmanagers_request_and_are_limited_to_exactly_their_slot(cpu: str, memory: str) -> None:
    assignment = slots(cpu, memory)

    spec = build(flink_job(), assignment)["spec"]

    requests, limits = flink_taskmanager_pod(spec)
    assert requests == limits == slot_size(assignment)
    assert spec["taskManager"]["replicas"] == 2


@settings(max_examples=60, deadline=None)
@given(
    cpu_millis=st.integers(min_value=1, max_value=64_000),
    memory_mib=st.integers(min_value=1, max_value=512 * 1024),
    executors=st.integers(min_value=1, max_value=12),
)
def test_every_slot_size_gives_executors_of_exactly_that_size(cpu_millis: int, memory_mib: int, executors: int) -> None:
    assignment = slots(f"{cpu_millis}m", f"{memory_mib}Mi", slots=tuple(range(executors)))

    executor = build(spark_job(), assignment)["spec"]["executor"]

    assert spark_executor_pod(executor)[0] == spark_executor_pod(executor)[1] == slot_size(assignment)
    heap, overhead = spark_mib(executor["memory"]), spark_mib(executor["memoryOverhead"])
    assert heap >= 1
    if memory_mib >= 11:
        assert overhead * 10 >= heap  # the JVM always keeps at least Spark's 10% headroom
    assert executor["instances"] == executors
    if memory_mib * MiB < smallest_task_manager(manifests.FLINK_CONFIGURATION):
        with pytest.raises(ApplicationError, match="cannot start"):
            build(flink_job(), assignment)
        return
    flink = build(flink_job(), assignment)["spec"]
    assert flink_taskmanager_pod(flink)[0] == flink_taskmanager_pod(flink)[1] == slot_size(assignment)
    assert flink["taskManager"]["replicas"] == executors
    assert flink["job"]["parallelism"] == executors


@pytest.mark.parametrize("memory", ["1G", "1000Mi", "1.5Mi", "896Mi", "3Gi"])
@pytest.mark.parametrize("job", [spark_job(), flink_job()], ids=["spark", "flink"])
def test_slot_memory_must_be_whole_mib(job: BatchJob, memory: str) -> None:
    assignment = slots("1", memory)
    if Quantity(memory).value % MiB == 0:
        build(job, assignment)
        return

    with pytest.raises(ApplicationError, match=r"resourcesPerSlot\.memory") as error:
        build(job, assignment)

    assert str(Quantity(memory)) in str(error.value)


def test_flink_refuses_a_cpu_size_it_cannot_read_exactly() -> None:
    with pytest.raises(ApplicationError, match=r"resourcesPerSlot\.cpu"):
        build(flink_job(), slots("123456789.123456789", "1Gi"))


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        pytest.param(
            {"sparkConf": {"spark.executor.resource.gpu.amount": "1"}},
            'sparkConf["spark.executor.resource.gpu.amount"]',
            id="spark resource",
        ),
        pytest.param(
            {"executor": {"template": {"spec": {"containers": [{"name": "executor"}, {"name": "log"}]}}}},
            "executor.template.spec.containers",
            id="template sidecar",
        ),
        pytest.param(
            {"executor": {"template": {"spec": {"initContainers": [{"name": "fetch"}]}}}},
            "executor.template.spec.initContainers",
            id="template init container",
        ),
        pytest.param(
            {"executor": {"template": {"spec": {"resources": {"requests": {"cpu": "4"}}}}}},
            "executor.template.spec.resources",
            id="template pod resources",
        ),
        pytest.param(
            {"executor": {"template": {"spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}},
            "executor.template.spec.containers[0].resources.limits names nvidia.com/gpu",
            id="template container gpu",
        ),
    ],
)
def test_what_would_make_an_executor_pod_differ_from_its_slot_is_refused_naming_the_field(
    spec: dict[str, Any], field: str
) -> None:
    with pytest.raises(ApplicationError, match=re.escape(f"spec.sparkSpec.{field}")):
        build(spark_job(**spec))


def test_sizes_the_user_gave_the_executor_give_way_to_the_slot() -> None:
    """Spark makes requests and limits from these fields, the webhook a memory limit from memoryLimit."""
    job = spark_job(
        executor={"coreRequest": "3", "coreLimit": "4", "memoryLimit": "8g"},
        sparkConf={"spark.kubernetes.executor.limit.cores": "4", "spark.kubernetes.executor.request.cores": "3"},
    )

    spec = build(job)["spec"]

    executor = spec["executor"]
    assert "memoryLimit" not in executor
    requests, limits = spark_executor_pod(executor)
    assert requests == limits == slot_size(THESIS_SLOTS)
    conf = spec["sparkConf"]
    assert conf["spark.kubernetes.executor.limit.cores"] == conf["spark.kubernetes.executor.request.cores"] == "700m"


def test_an_executor_template_with_only_cpu_memory_and_storage_for_its_container_is_fine() -> None:
    resources = {"requests": {"cpu": "9", "ephemeral-storage": "1Gi"}, "limits": {"memory": "9Gi"}}
    template = {"spec": {"containers": [{"name": "spark-kubernetes-executor", "resources": resources}]}}

    executor = build(spark_job(sparkVersion="3.5.3", executor={"template": template}))["spec"]["executor"]

    assert executor["template"]["spec"]["containers"] == template["spec"]["containers"]  # Spark sets cpu, memory


def test_a_spark_driver_may_name_its_service_account_in_the_spark_conf_too() -> None:
    conf = {"spark.kubernetes.authenticate.driver.serviceAccountName": "spark"}

    spec = build(spark_job(driver={}, sparkConf=conf))["spec"]

    assert spec["driver"] == {}
    assert spec["sparkConf"]["spark.kubernetes.authenticate.driver.serviceAccountName"] == "spark"


def test_spark_off_heap_memory_that_is_disabled_is_fine() -> None:
    spec = build(spark_job(sparkConf={"spark.memory.offHeap.enabled": "false"}))["spec"]

    assert spec["sparkConf"]["spark.memory.offHeap.enabled"] == "false"


def test_another_batch_scheduler_is_refused() -> None:
    with pytest.raises(ApplicationError, match="batchScheduler"):
        build(spark_job(batchScheduler="volcano"))


# --- building: placement, labels, what stays the user's -------------------------------------------------------

USER_AFFINITY: dict[str, Any] = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]},
                {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["broken-node"]}]},
            ]
        },
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 10, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}}
        ],
    },
    "podAntiAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 5, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname"}}
        ]
    },
}
SLOT_NODES = {"key": NODE_LABEL, "operator": "In", "values": ["0", "1"]}
NODE_A = {"key": "metadata.name", "operator": "In", "values": ["node-a"]}
NODE_B = {"key": "metadata.name", "operator": "In", "values": ["node-b"]}
# One term per slot node: the API server takes one name per field requirement.
SLOT_NODE_TERMS = [
    {"matchExpressions": [SLOT_NODES], "matchFields": [NODE_A]},
    {"matchExpressions": [SLOT_NODES], "matchFields": [NODE_B]},
]
DISK = {"key": "disk", "operator": "In", "values": ["ssd"]}
NOT_BROKEN = {"key": "metadata.name", "operator": "NotIn", "values": ["broken-node"]}


# USER_AFFINITY with each of its two required terms split into one per slot node, requiring the node by label and
# by name; the rest as the user wrote it.
USER_AFFINITY_IN_SLOTS: dict[str, Any] = copy.deepcopy(USER_AFFINITY)
USER_AFFINITY_IN_SLOTS["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] = [
    {"matchExpressions": [DISK, SLOT_NODES], "matchFields": [NODE_A]},
    {"matchExpressions": [DISK, SLOT_NODES], "matchFields": [NODE_B]},
    {"matchExpressions": [SLOT_NODES], "matchFields": [NOT_BROKEN, NODE_A]},
    {"matchExpressions": [SLOT_NODES], "matchFields": [NOT_BROKEN, NODE_B]},
]


def test_the_application_is_named_annotated_and_owned_like_its_batchjob() -> None:
    for job in (spark_job(), flink_job()):
        metadata = build(job, slots("1", "1Gi", attempt=3, testbed="tb-7"))["metadata"]

        assert metadata["name"] == job.metadata.name
        assert metadata["namespace"] == "team-a"
        assert metadata["labels"] == {"app.kubernetes.io/managed-by": "esi"}
        assert metadata["annotations"] == {
            JOB_ANNOTATION: job.metadata.name,
            TESTBED_ANNOTATION: "tb-7",
            ATTEMPT_ANNOTATION: "3",
        }
        assert metadata["ownerReferences"] == [
            {
                "apiVersion": "esi.tu-berlin.de/v1alpha1",
                "kind": "BatchJob",
                "name": job.metadata.name,
                "uid": "uid-of-the-batchjob",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]


def test_a_spark_driver_as_the_real_operator_labels_it_is_neither_a_testbed_pod_nor_an_executor() -> None:
    """The Spark operator copies the application's labels onto the driver and the executors: whatever esi puts
    there, the driver must not count as its Testbed's (its requests are other work on the node) nor take a slot."""
    application = build(spark_job())
    application["metadata"]["uid"] = "uid-of-the-application"
    driver = simulated.spark_driver_pod(application)
    driver_view = simulated.pod_view({**driver, "metadata": {**driver["metadata"], "uid": "uid-of-the-driver"}})
    assert driver_view is not None
    executor = simulated.spark_executor_pod(application, 1, driver_view)

    assert testbed_of(driver["metadata"]["labels"]) is None
    assert pod_view(driver) is None
    assert not is_executor_pod(driver)
    assert testbed_of(executor["metadata"]["labels"]) == THESIS_SLOTS.testbed
    assert is_executor_pod(executor)


def test_kinds_and_api_versions() -> None:
    spark, flink = build(spark_job()), build(flink_job())

    assert (spark["apiVersion"], spark["kind"]) == ("sparkoperator.k8s.io/v1beta2", "SparkApplication")
    assert (flink["apiVersion"], flink["kind"]) == ("flink.apache.org/v1beta1", "FlinkDeployment")
    assert application_kind(spark_job()) is SPARK
    assert application_kind(flink) is FLINK
    assert (SPARK.plural, FLINK.plural) == ("sparkapplications", "flinkdeployments")
    assert application_pod_selector(SPARK, "j") == {"sparkoperator.k8s.io/app-name": "j"}
    assert application_pod_selector(FLINK, "j") == {"app": "j"}
    with pytest.raises(ApplicationError, match="Deployment"):
        application_kind({"apiVersion": "apps/v1", "kind": "Deployment"})


def test_spark_executors_are_placed_in_the_slot_nodes_and_keep_the_users_labels_and_affinity() -> None:
    job = spark_job(executor={"labels": {"team": "crawler", ROLE_LABEL: "mine"}, "affinity": USER_AFFINITY})

    executor = build(job)["spec"]["executor"]

    assert executor["labels"] == {
        "team": "crawler",
        ROLE_LABEL: ROLE_EXECUTOR,
        TESTBED_LABEL: "profiler-testbed",
        JOB_LABEL: "spark-crawler",
        ATTEMPT_LABEL: "1",
    }
    assert executor["affinity"] == USER_AFFINITY_IN_SLOTS
    assert executor["schedulerName"] == SCHEDULER_NAME
    assert executor["priorityClassName"] == EXECUTOR_PRIORITY_CLASS


def test_without_user_affinity_one_term_requires_the_slot_nodes() -> None:
    executor = build(spark_job())["spec"]["executor"]

    assert executor["affinity"] == {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": SLOT_NODE_TERMS}}
    }


def test_spark_executor_pod_template_gets_the_placement_too() -> None:
    template: dict[str, Any] = {
        "metadata": {"labels": {"team": "crawler"}},
        "spec": {"containers": [{"name": "spark-kubernetes-executor"}], "affinity": USER_AFFINITY},
    }
    executor = build(spark_job(sparkVersion="3.5.1", executor={"template": template}))["spec"]["executor"]

    pod = executor["template"]
    assert (
        pod["metadata"]["labels"].items()
        >= {"team": "crawler", ROLE_LABEL: ROLE_EXECUTOR, JOB_LABEL: "spark-crawler"}.items()
    )
    assert pod["spec"]["affinity"] == USER_AFFINITY_IN_SLOTS
    assert pod["spec"]["containers"] == template["spec"]["containers"]
    assert (pod["spec"]["schedulerName"], pod["spec"]["priorityClassName"]) == (SCHEDULER_NAME, EXECUTOR_PRIORITY_CLASS)


def test_spark_executors_get_their_placement_from_a_pod_template_without_the_operators_webhook() -> None:
    """The webhook applies the executor fields only where it runs; Spark builds every executor from the template."""
    executor = build(spark_job(executor={"labels": {"team": "crawler"}}))["spec"]["executor"]

    pod = executor["template"]
    assert pod["metadata"]["labels"] == {
        ROLE_LABEL: ROLE_EXECUTOR,
        TESTBED_LABEL: "profiler-testbed",
        JOB_LABEL: "spark-crawler",
        ATTEMPT_LABEL: "1",
    }
    assert pod["spec"]["affinity"] == executor["affinity"]
    assert pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
        "nodeSelectorTerms": SLOT_NODE_TERMS
    }
    assert (pod["spec"]["schedulerName"], pod["spec"]["priorityClassName"]) == (SCHEDULER_NAME, EXECUTOR_PRIORITY_CLASS)
    assert pod["spec"]["containers"] == [{"name": "spark-kubernetes-executor"}]  # the one the operator names
    assert set(pod) == {"metadata", "spec"}  # a PodTemplateSpec, as the operator's CRD types it


def test_the_users_executor_affinity_field_goes_into_the_template_as_the_webhook_would_apply_it() -> None:
    other: dict[str, Any] = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}}
    job = spark_job(executor={"affinity": USER_AFFINITY, "template": {"spec": {"affinity": other}}})

    executor = build(job)["spec"]["executor"]

    assert executor["affinity"] == executor["template"]["spec"]["affinity"] == USER_AFFINITY_IN_SLOTS


def test_the_spark_driver_is_left_as_the_user_wrote_it() -> None:
    driver = {
        "cores": 1,
        "memory": "2g",
        "labels": {"version": "3.5"},
        "serviceAccount": "spark",
        "affinity": USER_AFFINITY,
    }
    job = spark_job(driver=driver, sparkConf={"spark.ui.enabled": "false"})

    spec = build(job)["spec"]

    assert spec["driver"] == driver
    assert "batchSchedulerOptions" not in spec  # the original put the executor priority class there: on the driver too
    assert spec["sparkConf"]["spark.ui.enabled"] == "false"
    assert spec["mainApplicationFile"] == manifests.SPARK["mainApplicationFile"]
    assert spec["arguments"] == manifests.SPARK["arguments"]


def test_a_spark_run_has_exactly_its_executors_and_is_not_restarted_by_the_operator() -> None:
    job = spark_job(
        dynamicAllocation={"enabled": True, "maxExecutors": 10},
        restartPolicy={"type": "OnFailure", "onFailureRetries": 3},
        sparkConf={
            "spark.executor.instances": "7",
            "spark.executor.memory": "4g",
            "spark.dynamicAllocation.enabled": "true",
        },
        executor={"instances": 7, "cores": 4, "memory": "4g", "memoryOverhead": "1g", "coreLimit": "4"},
    )

    spec = build(job)["spec"]

    assert spec["dynamicAllocation"]["enabled"] is False
    assert spec["restartPolicy"] == {"type": "Never"}
    executor = spec["executor"]
    assert executor["instances"] == 3
    assert spark_executor_pod(executor)[0] == slot_size(THESIS_SLOTS)
    conf = spec["sparkConf"]
    assert conf["spark.dynamicAllocation.enabled"] == "false"
    assert (conf["spark.executor.instances"], conf["spark.executor.memory"]) == ("3", executor["memory"])
    assert conf["spark.kubernetes.executor.scheduler.name"] == SCHEDULER_NAME


def test_flink_taskmanagers_are_placed_labelled_and_scheduled_by_esi() -> None:
    user_template: dict[str, Any] = {
        "metadata": {"labels": {"team": "wordcount"}, "annotations": {"note": "kept"}},
        "spec": {"containers": [{"name": "flink-main-container", "env": [{"name": "A", "value": "1"}]}]},
    }
    common_template = {"spec": {"affinity": USER_AFFINITY, "tolerations": [{"key": "batch", "operator": "Exists"}]}}
    job = flink_job(taskManager={"podTemplate": user_template}, podTemplate=common_template)

    spec = build(job)["spec"]

    pod = spec["taskManager"]["podTemplate"]
    assert (pod["apiVersion"], pod["kind"]) == ("v1", "Pod")
    assert pod["metadata"]["labels"] == {
        "team": "wordcount",
        ROLE_LABEL: ROLE_EXECUTOR,
        TESTBED_LABEL: "profiler-testbed",
        JOB_LABEL: "spark-crawler",
        ATTEMPT_LABEL: "1",
    }
    assert pod["metadata"]["annotations"] == {"note": "kept"}
    assert pod["spec"]["containers"] == user_template["spec"]["containers"]
    # The operator merges spec.podTemplate under the TaskManager's: the user's affinity there must survive ours.
    assert pod["spec"]["affinity"] == USER_AFFINITY_IN_SLOTS
    assert (pod["spec"]["schedulerName"], pod["spec"]["priorityClassName"]) == (SCHEDULER_NAME, EXECUTOR_PRIORITY_CLASS)
    # Resolved for the operator: each component's template is whole, the common one is gone.
    assert "podTemplate" not in spec
    assert spec["jobManager"]["podTemplate"] == common_template


@pytest.mark.parametrize(("task_slots", "parallelism"), [(None, 3), ("1", 3), ("2", 6), (" 4 ", 12)])
def test_flink_parallelism_fills_exactly_the_taskmanagers(task_slots: str | None, parallelism: int) -> None:
    conf = {"state.backend": "rocksdb"} | ({} if task_slots is None else {"taskmanager.numberOfTaskSlots": task_slots})
    job = flink_job(flinkConfiguration=manifests.FLINK_CONFIGURATION | conf)

    spec = build(job)["spec"]

    assert spec["taskManager"]["replicas"] == 3
    assert spec["job"]["parallelism"] == parallelism
    assert spec["flinkConfiguration"]["taskmanager.numberOfTaskSlots"] == (task_slots or "1")
    # Flink's resource manager keeps exactly the task slots of one TaskManager per slot, no more, no fewer.
    assert spec["flinkConfiguration"]["slotmanager.number-of-slots.min"] == str(parallelism)
    assert spec["flinkConfiguration"]["slotmanager.number-of-slots.max"] == str(parallelism)
    assert spec["flinkConfiguration"]["parallelism.default"] == str(parallelism)
    assert spec["flinkConfiguration"]["state.backend"] == "rocksdb"
    assert spec["job"]["jarURI"] == "local:///opt/flink/examples/WordCount.jar"


@pytest.mark.parametrize("task_slots", ["0", "two", "-1"])
def test_flink_task_slots_must_be_a_positive_integer(task_slots: str) -> None:
    with pytest.raises(ApplicationError, match=r"taskmanager\.numberOfTaskSlots"):
        build(flink_job(flinkConfiguration={"taskmanager.numberOfTaskSlots": task_slots}))


def test_flink_job_manager_is_the_users_with_a_default_size() -> None:
    default = build(flink_job(jobManager=None))["spec"]["jobManager"]
    partial = build(flink_job(jobManager={"replicas": 1, "resource": {"memory": "2048m"}}))["spec"]["jobManager"]
    own = build(flink_job())["spec"]["jobManager"]

    assert default == {"resource": {"cpu": 0.2, "memory": "1024m"}}
    assert partial == {"replicas": 1, "resource": {"cpu": 0.2, "memory": "2048m"}}
    assert own == manifests.FLINK["jobManager"]
    assert "schedulerName" not in str(own)


def test_the_batchjob_is_never_changed() -> None:
    spark = spark_job(
        executor={
            "labels": {"team": "a"},
            "affinity": USER_AFFINITY,
            "template": {"spec": {"affinity": USER_AFFINITY}},
        },
        sparkConf={"spark.executor.memory": "4g"},
        dynamicAllocation={"enabled": True},
    )
    flink = flink_job(
        taskManager={"resource": {"cpu": 4, "memory": "8g"}, "podTemplate": {"spec": {"affinity": USER_AFFINITY}}},
        flinkConfiguration={"taskmanager.numberOfTaskSlots": "2", manifests.FLINK_MANAGED_FRACTION: "0.1"},
        podTemplate={"spec": {"affinity": USER_AFFINITY}},
    )
    before = [spark.model_dump(), flink.model_dump()]

    first = [build(spark), build(flink)]
    second = [build(spark), build(flink)]

    assert [spark.model_dump(), flink.model_dump()] == before
    assert first == second


def test_a_run_needs_slots() -> None:
    with pytest.raises(ApplicationError, match="no slots"):
        build(spark_job(), slots("1", "1Gi", slots=()))


# --- reading back ---------------------------------------------------------------------------------------------


def pod(
    role: tuple[str, str],
    node: str | None = None,
    phase: str = "Pending",
    *,
    terminating: bool = False,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": f"p-{node}-{phase}", "labels": dict([role])}
    if terminating:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": metadata, "spec": {"nodeName": node} if node else {}, "status": {"phase": phase}}


SPARK_EXECUTOR = ("spark-role", "executor")
SPARK_DRIVER = ("spark-role", "driver")
TASKMANAGER = ("component", "taskmanager")
JOBMANAGER = ("component", "jobmanager")


def spark_app(state: str | None, error: str = "") -> dict[str, Any]:
    status = {} if state is None else {"applicationState": {"state": state, "errorMessage": error}}
    return {"apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "SparkApplication", "status": status}


def flink_app(job_state: str | None, lifecycle: str | None = None, error: str | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if job_state is not None:
        status["jobStatus"] = {"state": job_state}
    if lifecycle is not None:
        status["lifecycleState"] = lifecycle
    if error is not None:
        status["error"] = error
    return {"apiVersion": "flink.apache.org/v1beta1", "kind": "FlinkDeployment", "status": status}


@pytest.mark.parametrize(
    ("state", "phase"),
    [
        (None, ApplicationPhase.PENDING),
        ("", ApplicationPhase.PENDING),
        ("SUBMITTED", ApplicationPhase.PENDING),
        ("PENDING_RERUN", ApplicationPhase.PENDING),
        ("INVALIDATING", ApplicationPhase.PENDING),
        ("UNKNOWN", ApplicationPhase.PENDING),
        ("RUNNING", ApplicationPhase.RUNNING),
        ("SUCCEEDING", ApplicationPhase.RUNNING),
        ("COMPLETED", ApplicationPhase.SUCCEEDED),
        ("FAILED", ApplicationPhase.FAILED),
        ("SUBMISSION_FAILED", ApplicationPhase.FAILED),
        ("FAILING", ApplicationPhase.FAILED),
    ],
)
def test_spark_states(state: str | None, phase: ApplicationPhase) -> None:
    view = application_view(spark_app(state), [])

    assert view == ApplicationView(phase)


@pytest.mark.parametrize(
    ("job_state", "lifecycle", "phase"),
    [
        (None, None, ApplicationPhase.PENDING),
        ("CREATED", "DEPLOYED", ApplicationPhase.PENDING),
        ("INITIALIZING", "DEPLOYED", ApplicationPhase.PENDING),
        ("RECONCILING", "DEPLOYED", ApplicationPhase.PENDING),
        ("RESTARTING", "STABLE", ApplicationPhase.PENDING),
        ("RUNNING", "STABLE", ApplicationPhase.RUNNING),
        ("FINISHED", "STABLE", ApplicationPhase.SUCCEEDED),
        ("FAILED", "FAILED", ApplicationPhase.FAILED),
        ("FAILED", "STABLE", ApplicationPhase.FAILED),
        (None, "FAILED", ApplicationPhase.FAILED),  # the JobManager never came up
        ("CANCELED", "STABLE", ApplicationPhase.FAILED),
    ],
)
def test_flink_states(job_state: str | None, lifecycle: str | None, phase: ApplicationPhase) -> None:
    view = application_view(flink_app(job_state, lifecycle), [])

    assert view is not None
    assert view.phase == phase


def test_failure_messages() -> None:
    spark = application_view(spark_app("FAILED", "driver pod failed: OOMKilled"), [])
    flink_json = application_view(
        flink_app("FAILED", "FAILED", '{"type":"org.apache.flink.X","message":"Job failed: boom","throwableList":[]}'),
        [],
    )
    flink_text = application_view(flink_app(None, "FAILED", "plain words"), [])

    assert spark is not None
    assert spark.message == "driver pod failed: OOMKilled"
    assert flink_json is not None
    assert flink_json.message == "Job failed: boom"
    assert flink_text is not None
    assert flink_text.message == "plain words"


def test_no_application_reads_as_none() -> None:
    assert application_view(None, [pod(SPARK_EXECUTOR, "n0", "Running")]) is None


@pytest.mark.parametrize(
    ("application", "executor", "other"),
    [(spark_app("RUNNING"), SPARK_EXECUTOR, SPARK_DRIVER), (flink_app("RUNNING"), TASKMANAGER, JOBMANAGER)],
    ids=["spark", "flink"],
)
def test_only_live_executor_pods_count(
    application: dict[str, Any], executor: tuple[str, str], other: tuple[str, str]
) -> None:
    pods = [
        pod(other, "n9", "Running"),  # driver / JobManager: scheduled normally, not an executor
        pod(executor, "n1", "Running"),
        pod(executor, "n0", "Running"),
        pod(executor, "n1", "Pending"),  # bound, starting
        pod(executor),  # not bound yet
        pod(executor, "n2", "Running", terminating=True),  # being deleted: counts for nothing
        pod(executor, "n3", "Failed"),  # ended: its replacement counts, its node stays in the record
    ]

    view = application_view(application, pods)

    assert view == ApplicationView(
        ApplicationPhase.RUNNING,
        executors=4,
        executors_bound=3,
        executors_running=2,
        nodes=("n0", "n1", "n3"),
        lingers=application["kind"] == "FlinkDeployment",  # its pods outlive its job
    )


def unschedulable(
    role: tuple[str, str], message: str = "0/4 nodes are available: 4 Insufficient memory."
) -> dict[str, Any]:
    waiting = pod(role)
    waiting["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
    ]
    return waiting


@pytest.mark.parametrize(
    ("application", "executor", "other", "roles"),
    [
        (spark_app("SUBMITTED"), SPARK_EXECUTOR, SPARK_DRIVER, ("driver", "executor")),
        (flink_app(None, "DEPLOYED"), TASKMANAGER, JOBMANAGER, ("JobManager", "TaskManager")),
    ],
    ids=["spark", "flink"],
)
def test_a_pod_the_scheduler_cannot_place_is_told_with_its_words(
    application: dict[str, Any], executor: tuple[str, str], other: tuple[str, str], roles: tuple[str, str]
) -> None:
    view = application_view(application, [unschedulable(other)])
    assert view is not None
    assert view.waiting_for == (
        f"{roles[0]} p-None-Pending unschedulable: 0/4 nodes are available: 4 Insufficient memory."
    )

    placed = pod(other, "n0", "Pending")
    placed["status"]["conditions"] = [{"type": "PodScheduled", "status": "True"}]
    stuck = application_view(application, [placed, unschedulable(executor, "1 node(s) had untolerated taint(s)")])
    assert stuck is not None
    assert stuck.waiting_for == f"{roles[1]} p-None-Pending unschedulable: 1 node(s) had untolerated taint(s)"

    # An executor the scheduler nominated a node for is on its way: a ghost is being evicted for it.
    nominated = unschedulable(executor, "0/4 nodes are available: preemption: ...")
    nominated["status"]["nominatedNodeName"] = "n1"
    quiet = application_view(application, [placed, nominated])
    assert quiet is not None
    assert (quiet.waiting_for, quiet.executors) == ("", 1)


def test_the_driver_is_told_of_before_its_executors_and_the_rest_are_counted() -> None:
    executors = [unschedulable(SPARK_EXECUTOR, "taints") for _ in range(2)]
    for n, executor in enumerate(executors):
        executor["metadata"]["name"] = f"exec-{2 - n}"
    driver = unschedulable(SPARK_DRIVER, "no node fits")
    driver["metadata"]["name"] = "the-driver"

    view = application_view(spark_app("SUBMITTED"), [*executors, driver])
    assert view is not None
    assert view.waiting_for == "driver the-driver unschedulable: no node fits (and 2 more pods)"

    view = application_view(spark_app("SUBMITTED"), executors)
    assert view is not None
    assert view.waiting_for == "executor exec-1 unschedulable: taints (and 1 more pod)"


def starting(waiting: dict[str, str], *, init: bool = False) -> dict[str, Any]:
    started = pod(SPARK_EXECUTOR, "n0", "Pending")
    started["status"]["initContainerStatuses" if init else "containerStatuses"] = [{"state": {"waiting": waiting}}]
    return started


def test_a_placed_pod_the_kubelet_does_not_start_is_told_with_its_words() -> None:
    pulling = starting({"reason": "ImagePullBackOff", "message": 'Back-off pulling image "spark:nope"'})
    view = application_view(spark_app("RUNNING"), [pulling])
    assert view is not None
    assert (
        view.waiting_for == 'executor p-n0-Pending not started: ImagePullBackOff (Back-off pulling image "spark:nope")'
    )

    config = application_view(spark_app("RUNNING"), [starting({"reason": "CreateContainerConfigError"}, init=True)])
    assert config is not None
    assert config.waiting_for == "executor p-n0-Pending not started: CreateContainerConfigError"


@pytest.mark.parametrize("reason", ["ContainerCreating", "PodInitializing"])
def test_a_pod_starting_as_usual_holds_nothing_up(reason: str) -> None:
    view = application_view(spark_app("RUNNING"), [starting({"reason": reason}), pod(SPARK_EXECUTOR, "n1", "Running")])
    assert view is not None
    assert view.waiting_for == ""


def test_executor_pods_are_known_by_their_operators_labels_or_by_esis() -> None:
    assert is_executor_pod(pod(SPARK_EXECUTOR))
    assert is_executor_pod(pod(TASKMANAGER))
    assert is_executor_pod(pod((ROLE_LABEL, ROLE_EXECUTOR)))
    assert not is_executor_pod(pod(SPARK_DRIVER))
    assert not is_executor_pod(pod(JOBMANAGER))
    assert not is_executor_pod({"metadata": {"name": "bare"}})


def test_the_manifest_reads_back_as_its_kind() -> None:
    flink = flink_job()
    for job in (spark_job(), flink):
        manifest = build(job)

        assert application_kind(manifest) is application_kind(job)
        assert application_view(manifest, []) == ApplicationView(ApplicationPhase.PENDING, lingers=job is flink)


DEDICATED = (
    Toleration.model_validate({"key": "dedicated", "value": "esi", "effect": "NoSchedule"}),
    Toleration.model_validate({"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}),
)
TOLERATIONS = [t.to_json_dict() for t in DEDICATED]
USERS_TOLERATION = {"key": "gpu", "operator": "Exists"}


def test_spark_executors_tolerate_the_testbeds_taints_after_the_users_and_the_driver_is_left_alone() -> None:
    on_dedicated_nodes = dataclasses.replace(THESIS_SLOTS, tolerations=DEDICATED)
    job = spark_job(executor={"tolerations": [USERS_TOLERATION, TOLERATIONS[0]]})

    spec = build(job, on_dedicated_nodes)["spec"]

    executor = spec["executor"]
    assert executor["tolerations"] == [USERS_TOLERATION, *TOLERATIONS], "each once, the user's first"
    assert executor["template"]["spec"]["tolerations"] == executor["tolerations"], "the template is what Spark uses"
    assert "tolerations" not in spec["driver"]

    plain = build(spark_job(), THESIS_SLOTS)["spec"]["executor"]
    assert "tolerations" not in plain
    assert "tolerations" not in plain["template"]["spec"]


def test_flink_taskmanagers_tolerate_the_testbeds_taints_after_those_their_pod_template_would_have() -> None:
    on_dedicated_nodes = dataclasses.replace(THESIS_SLOTS, tolerations=DEDICATED)
    common_template = {"spec": {"tolerations": [USERS_TOLERATION]}}
    job = flink_job(podTemplate=common_template)

    spec = build(job, on_dedicated_nodes)["spec"]

    assert spec["taskManager"]["podTemplate"]["spec"]["tolerations"] == [USERS_TOLERATION, *TOLERATIONS]
    assert spec["jobManager"]["podTemplate"] == common_template, "the JobManager's share, untouched"


# --- Flink: what a TaskManager needs to start and stay in its slot ------------------------------------------------


def test_flink_with_default_memory_settings_is_fitted_to_the_slot_down_to_the_smallest_flink_starts() -> None:
    defaults = flink_job(flinkConfiguration=None)

    thesis = build(defaults, slots("1", "896Mi"))["spec"]["flinkConfiguration"]
    build(defaults, slots("1", "771Mi"))
    with pytest.raises(ApplicationError) as error:
        build(defaults, slots("1", "770Mi"))

    assert (
        thesis["taskmanager.memory.managed.size"] == "64m"
    )  # and a 64 MiB task heap (tests/unit/test_flink_memory.py)
    assert "resourcesPerSlot.memory of testbed tb is 770 MiB" in str(error.value)
    assert str(error.value).endswith("a Testbed for this job needs slots of at least 771 MiB")
    large = build(defaults, slots("1", "2Gi"))["spec"]["flinkConfiguration"]
    assert not any(key.startswith("taskmanager.memory.") for key in large), "Flink's own split where it leaves a heap"


def test_flink_keeps_the_users_memory_settings_and_refuses_naming_them_what_they_make_impossible() -> None:
    kept = build(flink_job(), slots("1", "896Mi"))["spec"]["flinkConfiguration"]
    greedy = flink_job(flinkConfiguration={"taskmanager.memory.managed.fraction": "0.9"})
    with pytest.raises(ApplicationError) as error:
        build(greedy, slots("1", "4Gi"))

    assert "taskmanager.memory.managed.size" not in kept
    assert (
        kept["taskmanager.memory.managed.fraction"] == manifests.FLINK_CONFIGURATION[manifests.FLINK_MANAGED_FRACTION]
    )
    assert (
        "lower or leave out spec.flinkSpec.flinkConfiguration[\"taskmanager.memory.managed.fraction\"] ('0.9')"
        in str(error.value)
    )


@pytest.mark.parametrize(
    "key", ["taskmanager.memory.flink.size", "taskmanager.memory.task.heap.size", "jobmanager.memory.heap.size"]
)
def test_flink_refuses_memory_settings_that_size_a_process_another_way(key: str) -> None:
    conf = manifests.FLINK_CONFIGURATION | {key: "512m"}
    with pytest.raises(ApplicationError, match=re.escape(f'flinkConfiguration["{key}"] is set')):
        build(flink_job(flinkConfiguration=conf))


@pytest.mark.parametrize(("memory", "refused"), [("576m", True), ("577m", False), ("1Gi", False), ("0.5Gi", True)])
def test_flink_refuses_a_jobmanager_too_small_to_start(memory: str, refused: bool) -> None:
    job = flink_job(jobManager={"resource": {"cpu": 1, "memory": memory}})
    if not refused:
        build(job)
        return
    with pytest.raises(ApplicationError, match=r"jobManager\.resource\.memory is .* cannot start"):
        build(job)


@pytest.mark.parametrize(
    ("template", "field"),
    [
        ({"containers": [{"name": "flink-main-container"}, {"name": "log-shipper"}]}, "containers has log-shipper"),
        ({"initContainers": [{"name": "fetch", "image": "busybox"}]}, "initContainers is set"),
        ({"overhead": {"memory": "64Mi"}}, "overhead is set"),
    ],
)
def test_flink_refuses_taskmanager_templates_that_outgrow_the_slot(template: dict[str, Any], field: str) -> None:
    with pytest.raises(ApplicationError, match=re.escape(field)):
        build(flink_job(taskManager={"podTemplate": {"spec": template}}))
    with pytest.raises(ApplicationError, match=re.escape(field)):
        build(flink_job(podTemplate={"spec": template}))  # the common template reaches TaskManagers too


def test_flink_refuses_taskmanager_resources_which_the_operator_prefers_to_the_slot_size() -> None:
    with pytest.raises(ApplicationError, match=r"taskManager\.resources is set"):
        build(flink_job(taskManager={"resources": {"requests": {"cpu": "4", "memory": "8Gi"}}}))


def test_flink_taskmanager_templates_are_merged_as_the_operator_merges_them() -> None:
    common = {"spec": {"tolerations": [{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}]}}
    own = {"spec": {"tolerations": [{"key": "c", "operator": "Exists", "effect": "NoSchedule"}]}}

    spec = build(flink_job(podTemplate=common, taskManager={"podTemplate": own}))["spec"]

    # By position: the TaskManager's first toleration is merged into the common first, the common second stays.
    assert spec["taskManager"]["podTemplate"]["spec"]["tolerations"] == [
        {"key": "c", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "b", "operator": "Exists"},
    ]
    assert spec["jobManager"]["podTemplate"] == common


def test_flink_runs_are_pinned_to_their_taskmanagers_whatever_the_user_wrote() -> None:
    conf = manifests.FLINK_CONFIGURATION | {
        "execution.batch.speculative.enabled": "true",
        "execution.batch.adaptive.auto-parallelism.enabled": "true",
        "slotmanager.number-of-slots.max": "100",
        "parallelism.default": "64",
    }

    built = build(flink_job(flinkConfiguration=conf))["spec"]["flinkConfiguration"]

    assert built["execution.batch.speculative.enabled"] == "false"
    assert built["execution.batch.adaptive.auto-parallelism.enabled"] == "false"
    assert built["slotmanager.number-of-slots.min"] == built["slotmanager.number-of-slots.max"] == "3"
    assert built["parallelism.default"] == "3"


# --- where a run goes: its slots in the Testbed's slot table ---------------------------------------------------


def test_a_runs_slots_are_assigned_from_the_testbeds_spec_and_slot_table_once_it_lists_them_all() -> None:
    spec = TestbedSpec.model_validate(manifests.testbed_manifest()["spec"])
    table = [
        Slot(id=i, node_name=f"node-{'ab'[i % 2]}", node_id=i % 2, position=i // 2, state=SlotState.RESERVED)
        for i in range(4)
    ]

    assert slot_assignment("profiler-testbed", spec, table[:2], (0, 2, 3), 1) == (
        "testbed profiler-testbed has no slots 2, 3 (yet)"
    )
    assert slot_assignment("profiler-testbed", spec, table, (0, 2, 3), 2) == dataclasses.replace(
        THESIS_SLOTS, node_ids=("0", "1"), node_names=("node-a", "node-b"), attempt=2
    )


# --- whether a job can run in a Testbed's slots at all ---------------------------------------------------------


@pytest.mark.parametrize(
    ("job", "slot", "problem"),
    [
        (spark_job(), {"cpu": "700m", "memory": "896Mi"}, None),
        (flink_job(), {"cpu": "700m", "memory": "896Mi"}, None),
        (spark_job(), {"cpu": "1", "memory": "1000000000"}, "not a whole number of MiB"),
        (
            flink_job(flinkConfiguration={"taskmanager.memory.managed.fraction": "0.9"}),
            {"cpu": "1", "memory": "1Gi"},
            "taskmanager.memory.managed.fraction",
        ),
        (spark_job(batchScheduler="volcano"), {"cpu": "1", "memory": "1Gi"}, "spec.sparkSpec.batchScheduler"),
    ],
    ids=["spark fits", "flink fits", "slot not in whole MiB", "flink's own fractions leave no task heap", "job alone"],
)
def test_a_job_that_can_never_run_in_a_testbeds_slots_says_why_as_its_start_would(
    job: BatchJob, slot: dict[str, str], problem: str | None
) -> None:
    spec = TestbedSpec.model_validate({"nodeLabel": NODE_LABEL, "slotsPerNode": 2, "resourcesPerSlot": slot})

    found = run_problem(job, "tb", spec)

    assert (found is None) == (problem is None), found
    assert problem is None or (found is not None and problem in found)
