"""Manifests of the three esi resources, valid and invalid, shared by the model tests (pydantic) and the
API-server tests (the generated CRDs): both must accept the valid ones and reject each invalid one at the
same field."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from esi.resources.batchjob import DRIVER_ACCOUNT_CONF, BatchJob
from esi.resources.flink_cluster import REFUSALS
from esi.resources.scheduling import Scheduling
from esi.resources.testbed import Testbed

API_VERSION = "esi.tu-berlin.de/v1alpha1"


MODELS: dict[str, type[BaseModel]] = {"BatchJob": BatchJob, "Testbed": Testbed, "Scheduling": Scheduling}


def read(manifest: dict[str, Any]) -> BaseModel:
    """A manifest (or a stored object) as esi's model of its kind reads it."""
    return MODELS[manifest["kind"]].model_validate(manifest)


def without_nones(value: Any) -> Any:
    """The manifest as a user would write it: keys the builders set to None (to drop a default) left out."""
    if isinstance(value, dict):
        return {k: without_nones(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nones(v) for v in value]
    return value


def testbed_manifest(**spec: Any) -> dict[str, Any]:
    body = {"nodeLabel": "tuberlin.de/node-with-slots-profiler", "slotsPerNode": 2,
            "resourcesPerSlot": {"cpu": "700m", "memory": "896Mi"}} | spec  # fmt: skip
    manifest: dict[str, Any] = without_nones(
        {"apiVersion": API_VERSION, "kind": "Testbed", "metadata": {"name": "profiler-testbed"}, "spec": body}
    )
    return manifest


SPARK = {
    "type": "Scala",
    "image": "spark-webcrawler:latest",
    "imagePullPolicy": "Always",
    "mainClass": "com.example.webcrawler.WebCrawlerApplication",
    "mainApplicationFile": "local:///opt/spark/webcrawler.jar",
    "arguments": ["Web_crawler", "10000", "Kubernetes"],
    # esi refuses a driver without an account; every namespace has this one (a simulated driver needs no rights).
    "driver": {"serviceAccount": "default"},
}
FLINK_MANAGED_FRACTION = "taskmanager.memory.managed.fraction"
# The user's own managed memory, less than Flink's default: esi keeps it as written (in the thesis' 896 MiB slots
# it leaves a larger task heap than esi's fitting of the default would).
FLINK_CONFIGURATION: dict[str, str] = {FLINK_MANAGED_FRACTION: "0.1"}
FLINK = {
    "image": "flink:1.20",
    "flinkVersion": "v1_20",
    "serviceAccount": "flink",
    "jobManager": {"resource": {"cpu": 1, "memory": "1024m"}},
    "job": {"jarURI": "local:///opt/flink/examples/WordCount.jar", "parallelism": 2, "upgradeMode": "stateless"},
    "flinkConfiguration": FLINK_CONFIGURATION,
}
ORIGINAL_FLINK = {"jarFile": "./examples/batch/WordCount.jar", "className": "WordCount"}  # a FlinkCluster's job
# A value of each field of the original's Flink job shape that esi refuses, by field.
REFUSED_ORIGINAL_FLINK_FIELDS: dict[str, Any] = {
    "pyFile": "./examples/python/table/word_count.py",
    "pyFiles": "./deps.zip",
    "pyModule": "word_count",
    "autoSavepointSeconds": 300,
    "savepointGeneration": 2,
    "takeSavepointOnUpdate": False,
    "maxStateAgeToRestoreSeconds": 600,
    "cancelRequested": True,
    "cleanupPolicy": {"afterJobSucceeds": "KeepCluster"},
    "resources": {"limits": {"cpu": "1"}},
    "mode": "Blocking",
    "noLoggingToStdout": True,
}


def batchjob_manifest(**spec: Any) -> dict[str, Any]:
    body = {"sparkSpec": copy.deepcopy(SPARK)} | spec
    manifest: dict[str, Any] = without_nones(
        {"apiVersion": API_VERSION, "kind": "BatchJob", "metadata": {"name": "spark-crawler"}, "spec": body}
    )
    return manifest


def scheduling_manifest(**spec: Any) -> dict[str, Any]:
    queue = [{"name": "spark-crawler"}, {"name": "batchjob-spark", "namespace": "default"}]
    body = {"testbed": {"name": "profiler-testbed", "namespace": "default"}, "queueBased": queue} | spec
    manifest: dict[str, Any] = without_nones(
        {"apiVersion": API_VERSION, "kind": "Scheduling", "metadata": {"name": "sched"}, "spec": body}
    )
    return manifest


def slot_based(*jobs: tuple[str, list[int]], mode: str = "strict") -> dict[str, Any]:
    return {"mode": mode, "jobs": [{"name": {"name": n}, "slotIds": ids} for n, ids in jobs]}


VALID: dict[str, dict[str, Any]] = {
    "testbed from the thesis": testbed_manifest(),
    "testbed with integer quantities": testbed_manifest(resourcesPerSlot={"cpu": 2, "memory": 1073741824}),
    "spark batchjob with the external scheduler's notes": batchjob_manifest(
        externalScheduler={"profiler": [{"flink-wordcount": "24 (16)", "spark-pi": "27 (16)"}]}
    ),
    "testbed on dedicated nodes": testbed_manifest(
        tolerations=[
            {"key": "dedicated", "operator": "Equal", "value": "esi", "effect": "NoSchedule"},
            {"key": "dedicated", "value": "esi", "effect": "NoExecute", "tolerationSeconds": 60},
            {"operator": "Exists", "effect": "PreferNoSchedule"},
        ]
    ),
    "flink batchjob": batchjob_manifest(sparkSpec=None, flinkSpec=copy.deepcopy(FLINK)),
    "spark batchjob naming its driver's account in sparkConf": batchjob_manifest(
        sparkSpec={k: v for k, v in SPARK.items() if k != "driver"} | {"sparkConf": {DRIVER_ACCOUNT_CONF: "spark"}}
    ),
    "spark batchjob with off-heap memory disabled, on spark 10": batchjob_manifest(
        sparkSpec=SPARK | {"sparkConf": {"spark.memory.offHeap.enabled": "false"}, "sparkVersion": "10.0"}
    ),
    "spark batchjob whose executor has no sidecars": batchjob_manifest(
        sparkSpec=SPARK | {"executor": {"sidecars": [], "cores": 1}}
    ),
    "original flink job, given esi's account": batchjob_manifest(sparkSpec=None, flinkSpec=ORIGINAL_FLINK),
    "queue-based scheduling from the thesis": scheduling_manifest(),
    "slot-based scheduling, original upper-case mode": scheduling_manifest(
        queueBased=None, slotBased=slot_based(("a", [0, 2]), ("b", [1]), mode="STRICT")
    ),
    "slot-based scheduling, relaxed": scheduling_manifest(
        queueBased=None, slotBased=slot_based(("a", [3]), mode="relaxed")
    ),
}


@dataclass(frozen=True)
class Invalid:
    manifest: dict[str, Any]
    field: str  # where both the API server and pydantic must report it, API-server style: spec.jobs[0].slotIds
    message: str  # a fragment of the API server's message


def _without(manifest: dict[str, Any], *path: str) -> dict[str, Any]:
    out = copy.deepcopy(manifest)
    target = out
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    return out


INVALID: dict[str, Invalid] = {
    "batchjob without an application": Invalid(
        batchjob_manifest(sparkSpec=None), "spec", "set exactly one of sparkSpec or flinkSpec"
    ),
    "batchjob with both applications": Invalid(
        batchjob_manifest(flinkSpec=copy.deepcopy(FLINK)), "spec", "set exactly one of sparkSpec or flinkSpec"
    ),
    "spark spec without its main file": Invalid(
        _without(batchjob_manifest(), "spec", "sparkSpec", "mainApplicationFile"),
        "spec.sparkSpec.mainApplicationFile",
        "Required value",
    ),
    "flink spec without a job": Invalid(
        batchjob_manifest(sparkSpec=None, flinkSpec={"image": "flink:1.20"}),
        "spec.flinkSpec",
        "set exactly one of job (the FlinkDeployment's) or jarFile",
    ),
    "flink spec with a job and the original's jarFile": Invalid(
        batchjob_manifest(sparkSpec=None, flinkSpec=FLINK | {"jarFile": "./examples/streaming/WordCount.jar"}),
        "spec.flinkSpec",
        "set exactly one of job (the FlinkDeployment's) or jarFile",
    ),
    "flink spec with a job and the original's className": Invalid(
        batchjob_manifest(sparkSpec=None, flinkSpec=FLINK | {"className": "WordCount"}),
        "spec.flinkSpec",
        "go with jarFile, not with job: in the FlinkDeployment shape write job.entryClass",
    ),
    "original flink job in python": Invalid(
        batchjob_manifest(sparkSpec=None, flinkSpec={"pyFile": "./examples/python/table/word_count.py"}),
        "spec.flinkSpec",
        "Python jobs are not translated from the original ESI's job shape",
    ),
    "original flink job restarted from a savepoint on failure": Invalid(
        batchjob_manifest(sparkSpec=None, flinkSpec=ORIGINAL_FLINK | {"restartPolicy": "FromSavepointOnFailure"}),
        "spec.flinkSpec.restartPolicy",
        "a failed run is retried as a new application, per the Scheduling's spec.retry",
    ),
    **{
        f"original flink job with {field}": Invalid(
            batchjob_manifest(sparkSpec=None, flinkSpec=ORIGINAL_FLINK | {field: value}),
            f"spec.flinkSpec.{field}",
            REFUSALS[field],
        )
        for field, value in REFUSED_ORIGINAL_FLINK_FIELDS.items()
    },
    "spark driver without an account": Invalid(
        batchjob_manifest(sparkSpec=SPARK | {"driver": {"cores": 1}}),
        "spec.sparkSpec.driver.serviceAccount",
        "set driver.serviceAccount (e.g. driver: {serviceAccount: spark})",
    ),
    "spark driver with an empty account, and no account in sparkConf": Invalid(
        batchjob_manifest(sparkSpec=SPARK | {"driver": {"serviceAccount": ""}, "sparkConf": {DRIVER_ACCOUNT_CONF: ""}}),
        "spec.sparkSpec.driver.serviceAccount",
        "the Spark driver creates its executors as that account",
    ),
    "spark application without a driver": Invalid(
        _without(batchjob_manifest(), "spec", "sparkSpec", "driver"),
        "spec.sparkSpec.driver.serviceAccount",
        "set driver.serviceAccount",
    ),
    "spark executors given pyspark memory beyond their slot": Invalid(
        batchjob_manifest(sparkSpec=SPARK | {"sparkConf": {"spark.executor.pyspark.memory": "512m"}}),
        "spec.sparkSpec.sparkConf",
        "make Spark add memory to each executor pod beyond its slot size",
    ),
    "spark executors given off-heap memory beyond their slot": Invalid(
        batchjob_manifest(
            sparkSpec=SPARK
            | {"sparkConf": {"spark.memory.offHeap.enabled": " TRUE", "spark.memory.offHeap.size": "1g"}}
        ),
        "spec.sparkSpec.sparkConf",
        "make Spark add memory to each executor pod beyond its slot size",
    ),
    "spark 2, which reads no pod template": Invalid(
        batchjob_manifest(sparkSpec=SPARK | {"sparkVersion": "v2.4.8"}),
        "spec.sparkSpec.sparkVersion",
        "use Spark 3 or later",
    ),
    **{
        f"spark executor with {field}": Invalid(
            batchjob_manifest(sparkSpec=SPARK | {"executor": {field: value}}),
            f"spec.sparkSpec.executor.{field}",
            "a slot is sized for the executor alone",
        )
        for field, value in {
            "gpu": {"name": "nvidia.com/gpu", "quantity": 1},
            "sidecars": [{"name": "log", "image": "busybox"}],
            "initContainers": [{"name": "fetch", "image": "busybox"}],
        }.items()
    },
    "flink job manager without an account": Invalid(
        _without(
            batchjob_manifest(sparkSpec=None, flinkSpec=copy.deepcopy(FLINK)), "spec", "flinkSpec", "serviceAccount"
        ),
        "spec.flinkSpec.serviceAccount",
        "set serviceAccount (e.g. serviceAccount: flink)",
    ),
    "original flink job with an empty account": Invalid(
        batchjob_manifest(sparkSpec=None, flinkSpec=ORIGINAL_FLINK | {"serviceAccount": ""}),
        "spec.flinkSpec.serviceAccount",
        "the JobManager creates its TaskManagers as that account",
    ),
    "external scheduler notes that are not string maps": Invalid(
        batchjob_manifest(externalScheduler={"profiler": ["just a string"]}),
        "spec.externalScheduler.profiler[0]",
        "must be of type object",
    ),
    "testbed without slots": Invalid(
        testbed_manifest(slotsPerNode=0), "spec.slotsPerNode", "greater than or equal to 1"
    ),
    "testbed with zero cpu per slot": Invalid(
        testbed_manifest(resourcesPerSlot={"cpu": "0", "memory": "1Gi"}),
        "spec.resourcesPerSlot.cpu",
        "cpu must be positive",
    ),
    "testbed with negative memory per slot": Invalid(
        testbed_manifest(resourcesPerSlot={"cpu": "1", "memory": "-1Gi"}),
        "spec.resourcesPerSlot.memory",
        "memory must be positive",
    ),
    "testbed with memory that is not a quantity": Invalid(
        testbed_manifest(resourcesPerSlot={"cpu": "1", "memory": "lots"}),
        "spec.resourcesPerSlot.memory",
        "should match",
    ),
    "testbed toleration with a value for any value": Invalid(
        testbed_manifest(tolerations=[{"key": "dedicated", "operator": "Exists", "value": "esi"}]),
        "spec.tolerations[0].value",
        "value must be empty when operator is Exists",
    ),
    "testbed toleration of every key by value": Invalid(
        testbed_manifest(tolerations=[{"value": "esi", "effect": "NoSchedule"}]),
        "spec.tolerations[0].operator",
        "operator must be Exists when key is empty",
    ),
    "testbed toleration of an unknown effect": Invalid(
        testbed_manifest(tolerations=[{"key": "dedicated", "effect": "NoRun"}]),
        "spec.tolerations[0].effect",
        "NoSchedule",
    ),
    "testbed label key with a space": Invalid(testbed_manifest(nodeLabel="my label"), "spec.nodeLabel", "should match"),
    "testbed without slot size": Invalid(
        _without(testbed_manifest(), "spec", "resourcesPerSlot"), "spec.resourcesPerSlot", "Required value"
    ),
    "scheduling with both strategies": Invalid(
        scheduling_manifest(slotBased=slot_based(("a", [0]))), "spec", "set exactly one of queueBased or slotBased"
    ),
    "scheduling with no strategy": Invalid(
        scheduling_manifest(queueBased=None), "spec", "set exactly one of queueBased or slotBased"
    ),
    "scheduling naming its testbed both as testbed and as the original's slots": Invalid(
        scheduling_manifest(slots={"name": "profiler-testbed"}), "spec", "set exactly one of testbed or slots"
    ),
    "scheduling without a testbed": Invalid(
        scheduling_manifest(testbed=None), "spec", "set exactly one of testbed or slots"
    ),
    "scheduling with an empty queue": Invalid(
        scheduling_manifest(queueBased=[]), "spec.queueBased", "at least 1 items"
    ),
    "slot list naming a slot twice": Invalid(
        scheduling_manifest(queueBased=None, slotBased=slot_based(("a", [0, 1, 0]))),
        "spec.slotBased.jobs[0].slotIds[2]",
        "Duplicate value",
    ),
    "slot list with a negative slot id": Invalid(
        scheduling_manifest(queueBased=None, slotBased=slot_based(("a", [-1]))),
        "spec.slotBased.jobs[0].slotIds[0]",
        "greater than or equal to 0",
    ),
    "slot list naming a job twice": Invalid(
        scheduling_manifest(queueBased=None, slotBased=slot_based(("a", [0]), ("a", [1]))),
        "spec.slotBased.jobs",
        "each job may appear only once",
    ),
    "slot list with an unknown mode": Invalid(
        scheduling_manifest(queueBased=None, slotBased=slot_based(("a", [0]), mode="sideways")),
        "spec.slotBased.mode",
        "Unsupported value",
    ),
    "scheduling naming a testbed by no object's name": Invalid(
        scheduling_manifest(testbed={"name": "../x"}), "spec.testbed.name", "should match"
    ),
    "scheduling naming a testbed in no namespace's name": Invalid(
        scheduling_manifest(testbed={"name": "tb", "namespace": "Jobs_1"}), "spec.testbed.namespace", "should match"
    ),
    "queue naming a job by no object's name": Invalid(
        scheduling_manifest(queueBased=[{"name": "a"}, {"name": "word count"}]),
        "spec.queueBased[1].name",
        "should match",
    ),
    "slot list naming a job by no object's name": Invalid(
        scheduling_manifest(queueBased=None, slotBased=slot_based(("a\nb", [0]))),
        "spec.slotBased.jobs[0].name.name",
        "should match",
    ),
    "slot list job without slots": Invalid(
        scheduling_manifest(queueBased=None, slotBased=slot_based(("a", []))),
        "spec.slotBased.jobs[0].slotIds",
        "at least 1 items",
    ),
}
