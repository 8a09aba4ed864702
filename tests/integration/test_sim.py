"""The simulated Spark and Flink operators on a real control plane: applications run, end and fail as the real
operators' would, their pods are placed by the default kube-scheduler and run by KWOK, deleting an
application removes its pods through the garbage collector, and a namespace's co-location table (a ConfigMap) sets
its jobs' runtimes from the next run on."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

import pytest
from lightkube import Client
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import ConfigMap, Event, Pod

from esi.objects.names import ATTEMPT_ANNOTATION, JOB_LABEL, ROLE_LABEL, TESTBED_LABEL
from esi.results.calibration import TABLE_CONFIGMAP, table_configmap
from infra.local_cluster import LocalCluster
from sim.lifecycle import RunPlan
from sim.names import ENDS_AT_ANNOTATION
from tests.integration.conftest import AddNodes
from tests.integration.kube import create_in, wait_for
from tests.integration.sim_fixtures import (  # noqa: F401 (fixtures)
    DEFAULT_RUNTIME,
    TIME_SCALE,
    FlinkDeployment,
    SparkApplication,
    esi_sim,
    sim_crds,
    sim_garbage_collected,
)

SHARED = {"esi.test/pool": "shared"}  # the session's ordinary nodes; other tests' nodes stay untouched
EXECUTOR_LABELS = {ROLE_LABEL: "executor", TESTBED_LABEL: "tb", JOB_LABEL: "wordcount"}


def spark_manifest(name: str, *, job: str = "wordcount", conf: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "sparkoperator.k8s.io/v1beta2",
        "kind": "SparkApplication",
        "metadata": {"name": name, "annotations": {ATTEMPT_ANNOTATION: "1"}},
        "spec": {
            "type": "Scala",
            "mainApplicationFile": "local:///opt/spark/examples/wordcount.jar",
            "sparkConf": conf or {},
            "nodeSelector": SHARED,
            "driver": {"cores": 1, "memory": "512m"},
            "executor": {
                "instances": 2,
                "cores": 1,
                "memory": "1024m",
                "memoryOverhead": "0m",
                "labels": {**EXECUTOR_LABELS, JOB_LABEL: job},
            },
        },
    }


def flink_manifest(name: str, *, conf: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "flink.apache.org/v1beta1",
        "kind": "FlinkDeployment",
        "metadata": {"name": name},
        "spec": {
            "job": {"jarURI": "local:///opt/flink/examples/WordCount.jar", "parallelism": 2},
            "flinkConfiguration": {"taskmanager.numberOfTaskSlots": "1", **(conf or {})},
            "podTemplate": {"spec": {"nodeSelector": SHARED}},
            "jobManager": {"resource": {"cpu": 0.5, "memory": "1024m"}},
            "taskManager": {
                "resource": {"cpu": 0.7, "memory": "896m"},
                "podTemplate": {"metadata": {"labels": EXECUTOR_LABELS}},
            },
        },
    }


def pods(client: Client, namespace: str, **labels: str) -> list[Any]:
    selector: dict[str, Any] = dict(labels)
    return list(client.list(Pod, namespace=namespace, labels=selector))


def application(client: Client, resource: Any, namespace: str, name: str) -> dict[str, Any]:
    """The application as plain data (lightkube's generic resources are dicts underneath)."""
    return dict(client.get(resource, name, namespace=namespace))


def spark_state(client: Client, namespace: str, name: str) -> str:
    status = application(client, SparkApplication, namespace, name).get("status") or {}
    return str((status.get("applicationState") or {}).get("state", ""))


def flink_status(client: Client, namespace: str, name: str) -> dict[str, Any]:
    status: dict[str, Any] = application(client, FlinkDeployment, namespace, name).get("status") or {}
    return status


def test_a_spark_application_runs_its_executors_and_completes(
    esi_sim: LocalCluster,  # noqa: F811
    client: Client,
    namespace: str,
) -> None:
    create_in(esi_sim, namespace, spark_manifest("wordcount"))

    executors = wait_for(
        "both executors to run",
        lambda: (
            [p for p in pods(client, namespace, **{"spark-role": "executor"}) if p.status.phase == "Running"]
            if len(pods(client, namespace, **{"spark-role": "executor"})) == 2
            else None
        ),
        timeout=30,
    )
    for pod in executors:
        assert re.fullmatch(r"wordcount-[0-9a-f]{16}-exec-[12]", pod.metadata.name)
        assert pod.metadata.labels.items() >= EXECUTOR_LABELS.items()
        owners = {(o.kind, o.name, bool(o.controller)) for o in pod.metadata.ownerReferences}
        assert owners == {("SparkApplication", "wordcount", False), ("Pod", "wordcount-driver", True)}
        (container,) = pod.spec.containers
        assert container.resources.requests == {"cpu": "1", "memory": "1Gi"}
        assert container.resources.limits == {"memory": "1Gi"}
        assert pod.spec.schedulerName == "default-scheduler"
        assert pod.spec.nodeName.startswith("shared-")

    wait_for("COMPLETED", lambda: spark_state(client, namespace, "wordcount") == "COMPLETED", timeout=30)

    app = application(client, SparkApplication, namespace, "wordcount")
    assert ENDS_AT_ANNOTATION in app["metadata"]["annotations"]
    assert set(app["status"]["executorState"].values()) == {"COMPLETED"}
    assert app["status"]["driverInfo"] == {"podName": "wordcount-driver"}
    wait_for("the executors to go", lambda: not pods(client, namespace, **{"spark-role": "executor"}), timeout=30)
    (driver,) = pods(client, namespace, **{"spark-role": "driver"})
    assert driver.status.phase == "Succeeded"


def test_a_flink_deployment_runs_its_taskmanagers_and_finishes(
    esi_sim: LocalCluster,  # noqa: F811
    sim_garbage_collected: LocalCluster,  # noqa: F811
    client: Client,
    namespace: str,
) -> None:
    create_in(esi_sim, namespace, flink_manifest("wordcount-flink"))

    taskmanagers = wait_for(
        "two TaskManagers",
        lambda: found if len(found := pods(client, namespace, component="taskmanager")) == 2 else None,
        timeout=30,
    )
    for pod in taskmanagers:
        assert pod.metadata.labels.items() >= {**EXECUTOR_LABELS, "app": "wordcount-flink"}.items()
        (container,) = pod.spec.containers
        assert container.resources.requests == {"cpu": "700m", "memory": "896Mi"}
        assert container.resources.limits == {"cpu": "700m", "memory": "896Mi"}

    wait_for(
        "FINISHED",
        lambda: flink_status(client, namespace, "wordcount-flink").get("jobStatus", {}).get("state") == "FINISHED",
        timeout=30,
    )
    status = flink_status(client, namespace, "wordcount-flink")
    assert (status["lifecycleState"], status["jobManagerDeploymentStatus"]) == ("STABLE", "READY")
    # As the operator leaves it: the application cluster stays until the FlinkDeployment is deleted.
    deployment = client.get(Deployment, "wordcount-flink", namespace=namespace)
    assert deployment.status is not None
    assert deployment.status.readyReplicas == 1
    assert len(pods(client, namespace, app="wordcount-flink")) == 3
    client.delete(FlinkDeployment, "wordcount-flink", namespace=namespace)
    wait_for("every pod to go", lambda: not pods(client, namespace, app="wordcount-flink"), timeout=30)


@pytest.mark.parametrize("kind", ["spark", "flink"])
def test_an_injected_failure_ends_the_application_failed(
    esi_sim: LocalCluster,  # noqa: F811
    client: Client,
    namespace: str,
    kind: str,
) -> None:
    if kind == "spark":
        create_in(esi_sim, namespace, spark_manifest("doomed", conf={"spark.esi.sim.failAttempts": "1"}))
        wait_for("FAILED", lambda: spark_state(client, namespace, "doomed") == "FAILED", timeout=30)
        app = application(client, SparkApplication, namespace, "doomed")
        assert "simulated failure: attempt 1" in app["status"]["applicationState"]["errorMessage"]
        wait_for("the executors to go", lambda: not pods(client, namespace, **{"spark-role": "executor"}), timeout=30)
        (driver,) = pods(client, namespace, **{"spark-role": "driver"})
        assert driver.status.phase == "Failed"
    else:
        create_in(esi_sim, namespace, flink_manifest("doomed", conf={"esi.sim.fail-attempts": "1"}))
        wait_for(
            "FAILED", lambda: flink_status(client, namespace, "doomed").get("lifecycleState") == "FAILED", timeout=30
        )
        status = flink_status(client, namespace, "doomed")
        assert status["jobStatus"]["state"] == "FAILED"
        assert "simulated failure: attempt 1" in status["error"]


def test_deleting_a_running_application_removes_its_pods(
    esi_sim: LocalCluster,  # noqa: F811
    sim_garbage_collected: LocalCluster,  # noqa: F811
    client: Client,
    namespace: str,
) -> None:
    # batchjob-sample3 runs 444 s alone in the thesis' table: seconds here, long enough to delete it running.
    create_in(esi_sim, namespace, spark_manifest("long", job="batchjob-sample3"))
    wait_for("RUNNING", lambda: spark_state(client, namespace, "long") == "RUNNING", timeout=30)
    wait_for("both executors", lambda: len(pods(client, namespace, **{"spark-role": "executor"})) == 2, timeout=30)

    client.delete(SparkApplication, "long", namespace=namespace)

    wait_for("the driver and the executors to go", lambda: not pods(client, namespace), timeout=30)


def test_a_job_arriving_next_to_a_running_one_slows_the_rest_of_its_run_down(
    esi_sim: LocalCluster,  # noqa: F811
    client: Client,
    namespace: str,
    unique: str,
    add_nodes: AddNodes,
) -> None:
    add_nodes(1, cpu="8", memory="16Gi")
    own_node = {"esi.test/pool": unique}

    def on_own_node(manifest: dict[str, Any]) -> dict[str, Any]:
        manifest["spec"]["nodeSelector"] = own_node
        return manifest

    def plan(name: str) -> RunPlan | None:
        return RunPlan.of(application(client, SparkApplication, namespace, name)["metadata"].get("annotations") or {})

    # The thesis' table: batchjob-sample3 runs 444 s at best (its mildest neighbour), 493 s next to
    # spark-crawler; x TIME_SCALE 0.01.
    create_in(esi_sim, namespace, on_own_node(spark_manifest("first", job="batchjob-sample3")))
    alone = wait_for("the first run to start", lambda: plan("first"), timeout=30)
    assert alone.colocated == ()
    assert alone.ends_at - alone.started_at == timedelta(seconds=4.44)

    create_in(esi_sim, namespace, on_own_node(spark_manifest("second", job="spark-crawler")))
    slowed = wait_for("the first run to be replanned", lambda: p if (p := plan("first")) and p.colocated else None)

    assert slowed.colocated == ("spark-crawler",)
    assert slowed.started_at == alone.started_at
    assert alone.ends_at < slowed.ends_at < alone.started_at + timedelta(seconds=4.93)
    wait_for("COMPLETED", lambda: spark_state(client, namespace, "first") == "COMPLETED", timeout=30)


def test_a_namespaces_table_sets_its_jobs_runtimes_and_follows_its_changes_without_a_restart(
    esi_sim: LocalCluster,  # noqa: F811
    client: Client,
    namespace: str,
    unique: str,
    add_nodes: AddNodes,
) -> None:
    add_nodes(1, cpu="8", memory="16Gi")  # a node of its own: the runs meet no other test's job

    def apply(table: str) -> Event:
        """The table applied as `esi calibrate -o configmap | kubectl apply -f -` does; once the simulator has read
        it, the Event it posted about this version."""
        esi_sim.kubectl("apply", "-f", "-", input_text=json.dumps(table_configmap(table, namespace)))
        metadata = client.get(ConfigMap, TABLE_CONFIGMAP, namespace=namespace).metadata
        version = metadata.resourceVersion if metadata is not None else None
        return wait_for(
            f"the simulator to read version {version} of the table",
            lambda: next((e for e in table_events() if f"(resourceVersion {version})" in (e.message or "")), None),
            timeout=30,
        )

    def table_events() -> list[Event]:
        return list(client.list(Event, namespace=namespace, fields={"involvedObject.name": TABLE_CONFIGMAP}))

    def run(name: str) -> timedelta:
        """How long the simulator planned the run of job `calibrated` in application ``name`` to take."""
        manifest = spark_manifest(name, job="calibrated")
        manifest["spec"]["nodeSelector"] = {"esi.test/pool": unique}
        create_in(esi_sim, namespace, manifest)
        wait_for(f"{name} to complete", lambda: spark_state(client, namespace, name) == "COMPLETED", timeout=30)
        annotations = application(client, SparkApplication, namespace, name)["metadata"]["annotations"]
        plan = RunPlan.of(annotations)
        assert plan is not None
        assert plan.colocated == ()
        return plan.ends_at - plan.started_at

    header = "job,colocated_with,mean_runtime_s,samples,stdev_s\n"
    used = apply(header + "calibrated,-,300,4,12.5\n")  # x TIME_SCALE 0.01: 3 s
    assert used.reason == "ColocationTableInUse"
    assert run("first") == timedelta(seconds=3)

    apply(header + "calibrated,-,150,6,3\n")
    assert run("second") == timedelta(seconds=1.5)

    refused = apply(header + "calibrated,-,soon,6,3\n")
    assert (refused.type, refused.reason) == ("Warning", "ColocationTableRefused")
    assert "key colocation.csv, line 2, field mean_runtime_s" in (refused.message or "")
    assert run("third") == timedelta(seconds=1.5)  # the table before stays

    # The deletion reaches the simulator through its watch long before the next run's executors run.
    client.delete(ConfigMap, TABLE_CONFIGMAP, namespace=namespace)
    assert run("fourth") == timedelta(seconds=DEFAULT_RUNTIME * TIME_SCALE)
