"""Manifests written for the original ESI, which esi takes as they are: its example manifests (Testbeds, Spark
and Flink BatchJobs, a queue and a slot-list Scheduling) and the listings of the thesis that describes it,
each with what esi reads it as. Rewritten here from their description, names and values as the original used
them; namespace lines aside (the tests put each object in a namespace of their own).

The thesis printed the API group ``batchjob.gcr.io/v1alpha1``, an older name the original's own code never
installed; its CRDs, and esi's, are ``esi.tu-berlin.de/v1alpha1``, which these manifests use.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from tests.manifests import API_VERSION, SPARK

__all__ = [
    "ORIGINAL",
    "WORDCOUNT_CLASS",
    "WORDCOUNT_DEPLOYMENT",
    "Original",
    "original_flink_job",
    "original_queue_scheduling",
]


@dataclass(frozen=True)
class Original:
    manifest: dict[str, Any]
    reads_as: dict[str, Any] = field(default_factory=dict)
    """Fields of the spec as esi's model reads them (what esi runs); the others are read as written."""


def _object(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": {"name": name}, "spec": spec}


def _refs(*names: str, namespace: str | None = "default") -> list[dict[str, str]]:
    return [{"name": name} | ({"namespace": namespace} if namespace else {}) for name in names]


def _testbed(name: str, label: str, slots_per_node: int, cpu: str, memory: str) -> dict[str, Any]:
    spec = {"slotsPerNode": slots_per_node, "nodeLabel": label, "resourcesPerSlot": {"cpu": cpu, "memory": memory}}
    return _object("Testbed", name, spec)


def _spark_pi(iterations: str) -> dict[str, Any]:
    """The original's SparkPi job: Spark 3.1.1's examples, /tmp of the node mounted into driver and executors."""
    mount = [{"name": "test-volume", "mountPath": "/tmp"}]  # noqa: S108 (the node's /tmp, as the original mounted it)
    labels = {"version": "3.1.1"}
    return {
        "type": "Scala",
        "mode": "cluster",
        "image": "gcr.io/spark-operator/spark:v3.1.1",
        "imagePullPolicy": "Always",
        "mainClass": "org.apache.spark.examples.SparkPi",
        "mainApplicationFile": "local:///opt/spark/examples/jars/spark-examples_2.12-3.1.1.jar",
        "arguments": [iterations],
        "sparkVersion": "3.1.1",
        "restartPolicy": {"type": "Never"},
        "volumes": [{"name": "test-volume", "hostPath": {"path": "/tmp", "type": "Directory"}}],  # noqa: S108
        "driver": {
            "cores": 1,
            "coreRequest": "100m",
            "memory": "512m",
            "labels": labels,
            # The Spark operator's account as the original's Helm release "esi" named it.
            "serviceAccount": "esi-spark-operator",
            "volumeMounts": mount,
        },
        "executor": {"labels": labels, "volumeMounts": mount},
    }


WORDCOUNT_CLASS = "org.apache.flink.streaming.examples.wordcount.WordCount"


def original_flink_job(name: str, **notes: str) -> dict[str, Any]:
    """A BatchJob running Flink's streaming WordCount in the original's shape (a FlinkCluster's job), with the
    profiling scheduler's notes (partner → "<seconds> (<samples>)") when given."""
    flink = {
        "jarFile": "./examples/streaming/WordCount.jar",
        "className": WORDCOUNT_CLASS,
        "args": ["--input", "./README.txt"],
    }
    spec: dict[str, Any] = {"flinkSpec": flink}
    if notes:
        spec["externalScheduler"] = {"profiler": [dict(notes)]}
    return _object("BatchJob", name, spec)


WORDCOUNT_DEPLOYMENT = {
    "job": {
        "jarURI": "local:///opt/flink/examples/streaming/WordCount.jar",
        "entryClass": WORDCOUNT_CLASS,
        "args": ["--input", "./README.txt"],
        "upgradeMode": "stateless",
    },
    "image": "flink:1.20",
    "flinkVersion": "v1_20",
    "serviceAccount": "flink",
}
"""The FlinkDeployment spec esi runs for the original's WordCount job."""


def original_queue_scheduling(name: str, testbed: dict[str, str], queue: list[dict[str, str]]) -> dict[str, Any]:
    """A queue-based Scheduling naming its Testbed ``slots``, as the original's examples did."""
    return _object("Scheduling", name, {"slots": testbed, "queueBased": queue})


_BATCHJOB_SLOTS = {"name": "batchjob-slots", "namespace": "default"}

ORIGINAL: dict[str, Original] = {
    "example testbed batchjob-slots": Original(
        _testbed("batchjob-slots", "tuberlin.de/node-with-slots", 4, "200m", "896Mi")
    ),
    "example testbed profiler-slots": Original(
        _testbed("profiler-slots", "tuberlin.de/node-with-slots-profiler", 2, "200m", "896Mi")
    ),
    "example spark batchjob: SparkPi with a hostPath volume": Original(
        _object("BatchJob", "batchjob-sample3", {"sparkSpec": _spark_pi("100000")})
    ),
    "example flink batchjob in the FlinkCluster job shape, with profiler notes": Original(
        original_flink_job(
            "batchjob-flink3",
            **{"batchjob-flink2": "24 (16)", "batchjob-flink3": "23 (16)", "spark-crawler": "34 (8)"},
        ),
        {"flinkSpec": WORDCOUNT_DEPLOYMENT},
    ),
    "example flink batchjob in the FlinkCluster job shape": Original(
        original_flink_job("batchjob-flink"), {"flinkSpec": WORDCOUNT_DEPLOYMENT}
    ),
    "example queue-based scheduling: spec.slots, repeated job references": Original(
        original_queue_scheduling(
            "test-scheduling",
            _BATCHJOB_SLOTS,
            _refs(
                *["batchjob-sample"] * 2, *["batchjob-flink"] * 2, *["batchjob-flink2"] * 4, *["batchjob-flink3"] * 2
            ),
        ),
        {"testbed": _BATCHJOB_SLOTS},
    ),
    "example slot-based scheduling: spec.slots, mode strict": Original(
        _object(
            "Scheduling",
            "scheduling",
            {
                "slots": _BATCHJOB_SLOTS,
                "slotBased": {
                    "mode": "strict",
                    "jobs": [
                        {"name": {"name": "batchjob-sample", "namespace": "default"}, "slotIds": [0, 1]},
                        {"name": {"name": "batchjob-flink", "namespace": "default"}, "slotIds": [0, 1]},
                    ],
                },
            },
        ),
        {"testbed": _BATCHJOB_SLOTS},
    ),
    "thesis listing 4.1: spark batchjob with the profiler's notes": Original(
        _object(
            "BatchJob",
            "spark-crawler",
            {
                "externalScheduler": {
                    "profiler": [{"flink-wordcount": "24 (16)", "spark-pi": "27 (16)", "batchjob-sample3": "31 (8)"}]
                },
                "sparkSpec": copy.deepcopy(SPARK),  # the thesis' web crawler
            },
        )
    ),
    "thesis listing 4.2: testbed": Original(
        _testbed("profiler-testbed", "tuberlin.de/node-with-slots-profiler", 2, "700m", "896Mi")
    ),
    "thesis listing 4.3: queue-based scheduling naming its testbed": Original(
        _object(
            "Scheduling",
            "profiler-scheduling-0",
            {
                "queueBased": _refs("spark-crawler", "batchjob-spark", "batchjob-spark", "spark-crawler"),
                "testbed": {"name": "profiler-testbed", "namespace": "default"},
            },
        ),
        {"testbed": {"name": "profiler-testbed", "namespace": "default"}},
    ),
    "thesis draft listing: queue-based scheduling, spec.slots with a name only": Original(
        original_queue_scheduling(
            "profiler-scheduling-0",
            {"name": "profiler-slots"},
            _refs("spark-crawler", "spark-crawler", "batchjob-spark", "batchjob-spark"),
        ),
        {"testbed": {"name": "profiler-slots"}},
    ),
}
