"""The pods the simulated operators create: names, labels, owners and exact requests, as the real ones make them.

The application builders here are shared with the other simulator tests.
"""

from __future__ import annotations

from typing import Any

import pytest

from esi.resources.quantity import Quantity
from sim.names import APP_UID_LABEL
from sim.pods import (
    DeploymentView,
    NodeExecutor,
    PodRole,
    PodView,
    deployment_view,
    flink_jobmanager_deployment,
    flink_taskmanager_count,
    flink_taskmanager_name,
    flink_taskmanager_number,
    flink_taskmanager_pod,
    node_executor,
    pod_view,
    spark_driver_pod,
    spark_executor_count,
    spark_executor_number,
    spark_executor_pod,
)
from sim.units import SpecError, flink_bytes, spark_mib
from tests.unit.operator_objects import (
    AFFINITY,
    ESI_LABELS,
    FLINK_UID,
    SPARK_UID,
    esi_executor,
    flink_app,
    replica_pod,
    spark_app,
)


def running_view(manifest: dict[str, Any], node: str = "n0") -> PodView:
    """The pod of ``manifest`` once created, bound to ``node`` and running."""
    view = pod_view({**manifest, "metadata": {**manifest["metadata"], "uid": f"uid-{manifest['metadata']['name']}"}})
    assert view is not None
    return PodView(**{**view.__dict__, "phase": "Running", "node": node})


def resources(pod: dict[str, Any]) -> dict[str, dict[str, str]]:
    (container,) = pod["spec"]["containers"]
    result: dict[str, dict[str, str]] = container["resources"]
    return result


# --- Spark ------------------------------------------------------------------------------------------------


def test_the_spark_driver_is_owned_by_its_application_and_scheduled_normally() -> None:
    driver = {"cores": 1, "memory": "512m", "labels": {"team": "a"}, "nodeSelector": {"only": "the webhook's"}}
    app = spark_app(driver=driver, executor=esi_executor(), sparkVersion="4.0.1")

    pod = spark_driver_pod(app)

    assert pod["metadata"]["name"] == "wordcount-driver"
    assert pod["metadata"]["namespace"] == "ns"
    assert pod["metadata"]["labels"] == {
        "team": "a",
        "spark-role": "driver",
        "spark-app-selector": "spark-9f44a280477d48279bd10f0fb82ecfb4",
        "spark-app-name": "wordcount",
        "spark-version": "4.0.1",
        "sparkoperator.k8s.io/app-name": "wordcount",
        "sparkoperator.k8s.io/launched-by-spark-operator": "true",
        "sparkoperator.k8s.io/submission-id": SPARK_UID,
        "sparkoperator.k8s.io/mutated-by-spark-operator": "true",  # no template: left to the webhook
        APP_UID_LABEL: SPARK_UID,
    }
    assert "nodeSelector" not in pod["spec"], "spec.driver.nodeSelector reaches a pod only through the webhook"
    (owner,) = pod["metadata"]["ownerReferences"]
    assert owner == {
        "apiVersion": "sparkoperator.k8s.io/v1beta2",
        "kind": "SparkApplication",
        "name": "wordcount",
        "uid": SPARK_UID,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    # 512 MiB heap + the default overhead of max(384 MiB, 10%); no cpu limit unless coreLimit says so.
    assert resources(pod) == {"requests": {"cpu": "1", "memory": "896Mi"}, "limits": {"memory": "896Mi"}}
    assert "schedulerName" not in pod["spec"]
    assert "priorityClassName" not in pod["spec"]
    assert pod["spec"]["restartPolicy"] == "Never"


def test_the_applications_own_labels_go_onto_the_driver_and_every_executor_as_the_operator_copies_them() -> None:
    app_labels = {"team": "a", "kueue.x-k8s.io/queue-name": "q", "spark-role": "not-this"}
    app = spark_app(labels=app_labels, driver={"labels": {"team": "driver's"}}, executor=esi_executor())

    driver = spark_driver_pod(app)
    executor = spark_executor_pod(app, 1, running_view(driver))

    assert driver["metadata"]["labels"]["team"] == "driver's"  # spec.driver.labels go over the application's
    assert executor["metadata"]["labels"]["team"] == "a"
    for pod, role in ((driver, "driver"), (executor, "executor")):
        assert "kueue.x-k8s.io/queue-name" not in pod["metadata"]["labels"]
        assert pod["metadata"]["labels"]["spark-role"] == role


def test_spark_executors_request_exactly_what_esi_sized_them_to_and_carry_its_labels() -> None:
    executor = esi_executor(tolerations=[{"operator": "Exists"}])
    executor["template"]["spec"]["tolerations"] = [{"operator": "Exists"}]
    app = spark_app(executor=executor, nodeSelector={"disk": "ssd"})
    driver = running_view(spark_driver_pod(app))

    pods = [spark_executor_pod(app, n, driver) for n in (1, 2)]

    assert [p["metadata"]["name"] for p in pods] == [
        "wordcount-9f44a280477d4827-exec-1",
        "wordcount-9f44a280477d4827-exec-2",
    ]
    assert [spark_executor_number(app, p["metadata"]["name"]) for p in pods] == [1, 2]
    assert spark_executor_number(app, "wordcount-driver") is None
    for number, pod in enumerate(pods, start=1):
        labels = pod["metadata"]["labels"]
        assert labels.items() >= ESI_LABELS.items()
        assert labels["spark-role"] == "executor"
        assert labels["spark-exec-id"] == str(number)
        assert labels["sparkoperator.k8s.io/app-name"] == "wordcount"
        assert labels["spark-app-selector"] == "spark-9f44a280477d48279bd10f0fb82ecfb4"
        assert labels["spark-exec-resourceprofile-id"] == "0"
        assert "sparkoperator.k8s.io/mutated-by-spark-operator" not in labels, "esi's template leaves nothing to it"
        assert pod["metadata"]["ownerReferences"] == [
            {
                "apiVersion": "sparkoperator.k8s.io/v1beta2",
                "kind": "SparkApplication",
                "name": "wordcount",
                "uid": SPARK_UID,
            },
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": "wordcount-driver",
                "uid": "uid-wordcount-driver",
                "controller": True,
            },
        ]
        assert resources(pod) == {
            "requests": {"cpu": "700m", "memory": "896Mi"},
            "limits": {"cpu": "700m", "memory": "896Mi"},
        }
        spec = pod["spec"]
        assert spec["schedulerName"] == "esi-scheduler"
        assert spec["priorityClassName"] == "esi-executor"
        assert spec["affinity"] == AFFINITY
        assert spec["nodeSelector"] == {"disk": "ssd"}
        assert spec["tolerations"] == [{"operator": "Exists"}]
        assert spec["restartPolicy"] == "Never"


def test_an_explicit_zero_overhead_makes_the_pod_exactly_the_heap() -> None:
    app = spark_app(executor={"instances": 1, "cores": 1, "memory": "1024m", "memoryOverhead": "0m"})

    pod = spark_executor_pod(app, 1, running_view(spark_driver_pod(app)))

    memory = resources(pod)["requests"]["memory"]
    assert memory == "1Gi"
    assert Quantity(memory) == Quantity(2**30)


@pytest.mark.parametrize(
    ("memory", "extra", "expected"),
    [
        pytest.param("2g", {}, "2432Mi", id="small heap: the 384 MiB floor"),
        pytest.param("4g", {}, "4505Mi", id="large heap: 10 percent, rounded down"),
        pytest.param("4g", {"memoryOverheadFactor": "0.4"}, "5734Mi", id="the application's overhead factor"),
        pytest.param("1024k", {}, "385Mi", id="KiB"),
    ],
)
def test_the_default_memory_overhead_is_sparks(memory: str, extra: dict[str, Any], expected: str) -> None:
    app = spark_app(executor={"memory": memory}, **extra)

    pod = spark_executor_pod(app, 1, running_view(spark_driver_pod(app)))

    assert resources(pod)["requests"]["memory"] == expected


def test_spark_conf_fills_in_what_the_fields_leave_out_and_the_fields_win() -> None:
    conf = {
        "spark.executor.instances": "3",
        "spark.executor.memory": "2g",
        "spark.executor.cores": "4",
        "spark.kubernetes.executor.scheduler.name": "from-conf",
        "spark.kubernetes.node.selector.disk": "ssd",
        "spark.kubernetes.executor.node.selector.zone": "a",
        "spark.kubernetes.driver.node.selector.zone": "b",
    }
    app = spark_app(sparkConf=conf, executor={"cores": 2})

    pod = spark_executor_pod(app, 1, running_view(spark_driver_pod(app)))

    assert spark_executor_count(app) == 3
    assert resources(pod)["requests"] == {"cpu": "2", "memory": "2432Mi"}
    assert pod["spec"]["schedulerName"] == "from-conf"
    assert pod["spec"]["nodeSelector"] == {"disk": "ssd", "zone": "a"}


def test_a_spark_pod_template_is_the_base_and_what_only_the_webhook_applies_stays_out() -> None:
    template = {
        "metadata": {"labels": {"from-template": "yes", "spark-role": "not-this"}},
        "spec": {"priorityClassName": "template-class", "hostNetwork": False},
    }
    webhooks = {"priorityClassName": "field-class", "affinity": AFFINITY, "tolerations": [{"operator": "Exists"}]}
    app = spark_app(executor={"template": template, **webhooks})

    pod = spark_executor_pod(app, 1, running_view(spark_driver_pod(app)))

    assert pod["metadata"]["labels"]["from-template"] == "yes"
    assert pod["metadata"]["labels"]["spark-role"] == "executor"
    assert pod["spec"]["priorityClassName"] == "template-class"
    assert "affinity" not in pod["spec"]
    assert "tolerations" not in pod["spec"]
    assert pod["spec"]["hostNetwork"] is False


@pytest.mark.parametrize(
    ("text", "mib"),
    [("512m", 512), ("2g", 2048), ("2G", 2048), ("1024k", 1), ("1536mb", 1536), ("1t", 2**20), ("2048", 2048)],
)
def test_spark_memory_units(text: str, mib: int) -> None:
    assert spark_mib(text, "spec.executor.memory") == mib


@pytest.mark.parametrize("text", ["lots", "1.5g", "2Gi", "-1g"])
def test_a_spark_memory_size_spark_refuses_is_refused_naming_the_field(text: str) -> None:
    with pytest.raises(SpecError, match=r"spec\.executor\.memory"):
        spark_executor_pod(spark_app(executor={"memory": text}), 1, running_view(spark_driver_pod(spark_app())))


# --- Flink ------------------------------------------------------------------------------------------------


def test_the_flink_jobmanager_runs_in_a_deployment_owned_by_its_flink_deployment() -> None:
    app = flink_app(jobManager={"resource": {"cpu": 0.5, "memory": "1024m"}})

    deployment = flink_jobmanager_deployment(app)

    flink_labels = {"app": "wordcount-flink", "component": "jobmanager", "type": "flink-native-kubernetes"}
    assert deployment["metadata"]["name"] == "wordcount-flink"
    assert deployment["metadata"]["labels"] == {**flink_labels, APP_UID_LABEL: FLINK_UID}
    assert deployment["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "flink.apache.org/v1beta1",
            "kind": "FlinkDeployment",
            "name": "wordcount-flink",
            "uid": FLINK_UID,
            "controller": False,
            "blockOwnerDeletion": True,
        }
    ]
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["selector"] == {"matchLabels": flink_labels}
    pod = replica_pod(deployment)
    assert pod["metadata"]["labels"] == {**flink_labels, APP_UID_LABEL: FLINK_UID}
    assert resources(pod) == {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "500m", "memory": "1Gi"}}
    assert pod["spec"]["restartPolicy"] == "Always"
    assert "schedulerName" not in pod["spec"]
    view = pod_view(pod)
    assert view is not None
    assert view.role is PodRole.JOBMANAGER
    assert deployment_view({**deployment, "metadata": {**deployment["metadata"], "uid": "d1"}}) == DeploymentView(
        "wordcount-flink", "d1", FLINK_UID
    )
    assert deployment_view({"metadata": {"name": "someone-elses"}}) is None


def test_flink_taskmanagers_merge_their_template_over_the_common_one() -> None:
    common = {
        "metadata": {"labels": {"team": "a", "tier": "common"}},
        "spec": {"schedulerName": "common-scheduler", "nodeSelector": {"disk": "hdd"}, "serviceAccountName": "flink"},
    }
    own = {
        "metadata": {"labels": {**ESI_LABELS, "tier": "taskmanager"}},
        "spec": {
            "schedulerName": "esi-scheduler",
            "priorityClassName": "esi-executor",
            "affinity": AFFINITY,
            "tolerations": [{"operator": "Exists"}],
        },
    }
    app = flink_app(
        podTemplate=common,
        taskManager={"replicas": 2, "resource": {"cpu": 0.7, "memory": "896m"}, "podTemplate": own},
    )
    deployment = DeploymentView("wordcount-flink", "d1", FLINK_UID)

    pods = [flink_taskmanager_pod(app, n, deployment) for n in (1, 2)]

    assert [p["metadata"]["name"] for p in pods] == [
        "wordcount-flink-taskmanager-1-1",
        "wordcount-flink-taskmanager-1-2",
    ]
    for pod in pods:
        labels = pod["metadata"]["labels"]
        assert labels.items() >= {**ESI_LABELS, "team": "a", "tier": "taskmanager"}.items()
        assert (labels["app"], labels["component"], labels["type"]) == (
            "wordcount-flink",
            "taskmanager",
            "flink-native-kubernetes",
        )
        (owner,) = pod["metadata"]["ownerReferences"]
        assert owner == {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": "wordcount-flink",
            "uid": "d1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
        assert resources(pod) == {
            "requests": {"cpu": "700m", "memory": "896Mi"},
            "limits": {"cpu": "700m", "memory": "896Mi"},
        }
        spec = pod["spec"]
        assert spec["schedulerName"] == "esi-scheduler"
        assert spec["priorityClassName"] == "esi-executor"
        assert spec["affinity"] == AFFINITY
        assert spec["nodeSelector"] == {"disk": "hdd"}
        assert spec["tolerations"] == [{"operator": "Exists"}]
        assert spec["serviceAccountName"] == "flink"
        assert spec["restartPolicy"] == "Never"


def test_taskmanager_names_and_numbers() -> None:
    assert flink_taskmanager_name("wc", 12) == "wc-taskmanager-1-12"
    assert flink_taskmanager_number("wc", "wc-taskmanager-1-12") == 12
    assert flink_taskmanager_number("wc", "wc-2-taskmanager-1-12") is None
    assert flink_taskmanager_number("wc", "wc-taskmanager-1-x") is None


@pytest.mark.parametrize(
    ("task_manager", "configuration", "job", "count"),
    [
        pytest.param({"replicas": 3}, {"taskmanager.numberOfTaskSlots": "4"}, {"parallelism": 8}, 3, id="replicas"),
        pytest.param({}, {"taskmanager.numberOfTaskSlots": "2"}, {"parallelism": 3}, 2, id="parallelism / slots"),
        pytest.param({}, {}, {"parallelism": 3}, 3, id="one slot each by default"),
        pytest.param({}, {}, {}, 1, id="parallelism 1 by default"),
    ],
)
def test_how_many_taskmanagers(
    task_manager: dict[str, Any], configuration: dict[str, str], job: dict[str, Any], count: int
) -> None:
    app = flink_app(taskManager=task_manager, flinkConfiguration=configuration, job={"jarURI": "x", **job})

    assert flink_taskmanager_count(app) == count


@pytest.mark.parametrize(
    ("text", "size"),
    [("1024m", 2**30), ("1g", 2**30), ("1G", 2**30), ("512 mb", 2**29), ("1Gi", 2**30), ("1536Mi", 1536 * 2**20),
     ("1073741824", 2**30), ("2e9", 2 * 10**9)],
)  # fmt: skip
def test_flink_memory_in_flink_units_or_as_a_quantity(text: str, size: int) -> None:
    assert flink_bytes(text, "spec.taskManager.resource.memory") == size


def test_a_flink_spec_flink_refuses_is_refused_naming_the_field() -> None:
    app = flink_app(taskManager={"resource": {"cpu": 1, "memory": "lots"}})

    with pytest.raises(SpecError, match=r"spec\.taskManager\.resource\.memory"):
        flink_taskmanager_pod(app, 1, DeploymentView("wordcount-flink", "d1", FLINK_UID))
    with pytest.raises(SpecError, match=r"spec\.jobManager\.resource\.cpu"):
        flink_jobmanager_deployment(flink_app(jobManager={"resource": {"cpu": "many"}}))
    with pytest.raises(SpecError, match=r"spec\.job\.parallelism"):
        flink_taskmanager_count(flink_app(job={"jarURI": "x", "parallelism": 0}))


# --- reading back --------------------------------------------------------------------------------------------


def test_reading_a_simulated_pod_back() -> None:
    app = spark_app(executor=esi_executor(), labels={"app.kubernetes.io/managed-by": "esi"})
    manifest = spark_executor_pod(app, 1, running_view(spark_driver_pod(app)))
    manifest["metadata"] |= {"uid": "u1", "deletionTimestamp": "2026-01-01T00:00:00Z"}
    manifest |= {"status": {"phase": "Running"}}
    manifest["spec"]["nodeName"] = "n3"

    view = pod_view(manifest)

    assert view == PodView(
        name="wordcount-9f44a280477d4827-exec-1",
        uid="u1",
        app_uid=SPARK_UID,
        role=PodRole.EXECUTOR,
        job="batchjob-spark",
        phase="Running",
        node="n3",
        terminating=True,
        containers=(("spark-kubernetes-executor", "apache/spark:3.5.3"),),
    )
    assert node_executor(view) is None  # being deleted: no longer a neighbour


def test_a_pod_without_an_esi_job_label_is_known_by_its_application() -> None:
    app = flink_app(taskManager={"replicas": 1})
    pod = running_view(flink_taskmanager_pod(app, 1, DeploymentView("wordcount-flink", "d1", FLINK_UID)), node="n1")

    assert pod.job == "wordcount-flink"
    assert node_executor(pod) == ("n1", NodeExecutor(pod.app_uid, "wordcount-flink"))
    jobmanager = running_view(replica_pod(flink_jobmanager_deployment(app)))
    assert node_executor(jobmanager) is None  # JobManagers are no executors
    assert pod_view({"metadata": {"name": "other", "labels": {"app": "x"}}}) is None
