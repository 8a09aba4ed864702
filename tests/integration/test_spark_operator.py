"""The real kubeflow Spark operator (``infra.stacks.spark_operator``) on a cluster of its own, handling the
SparkApplication esi builds for a BatchJob.

A cluster of its own, not the session's: the session installs the simulated operator's permissive
SparkApplication CRD under the same name as the real one, and ``python -m sim`` handles applications in every
namespace there. The cluster has no nodes, so the driver pod spark-submit creates stays Pending — what is
checked is what the operator and Spark put into it, and into the executors' pod template and configuration.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from lightkube import Client, KubeConfig
from lightkube.generic_resource import create_namespaced_resource
from lightkube.resources.core_v1 import ConfigMap, Pod

from esi.objects.applications import SPARK, SlotAssignment, application_manifest
from esi.objects.names import (
    EXECUTOR_PRIORITY_CLASS,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    ROLE_LABEL,
    SCHEDULER_NAME,
    TESTBED_LABEL,
)
from esi.resources.batchjob import BatchJob
from esi.resources.quantity import Quantity
from infra.images.spark import EXAMPLES_JAR, SPARK_PI_CLASS, spark_version
from infra.local_cluster import LocalCluster
from infra.stacks.spark_operator import DRIVER_SERVICE_ACCOUNT, driver_rbac, start_operator, unavailable_reason
from tests.integration.kube import get_or_none, namespace_manifest, wait_for
from tests.manifests import batchjob_manifest

NAMESPACE = "spark-jobs"
SparkApplication = create_namespaced_resource(SPARK.group, SPARK.version, SPARK.kind, SPARK.plural)


pytestmark = pytest.mark.skipif(bool(unavailable_reason()), reason=f"real Spark operator: {unavailable_reason()}")


@pytest.fixture(scope="module")
def operator_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = LocalCluster("spark-operator", workdir=tmp_path_factory.mktemp("spark-operator") / "kwok")
    try:
        cluster.create()
        cluster.kubectl("create", "-f", "-", input_text=json.dumps(namespace_manifest(NAMESPACE).to_dict()))
        rbac = {"apiVersion": "v1", "kind": "List", "items": driver_rbac(NAMESPACE)}
        cluster.kubectl("apply", "-f", "-", input_text=json.dumps(rbac))
        start_operator(cluster, [NAMESPACE])
        yield cluster
    finally:
        cluster.delete()


@pytest.fixture(scope="module")
def operator_client(operator_cluster: LocalCluster) -> Iterator[Client]:
    api = Client(config=KubeConfig.from_file(operator_cluster.kubeconfig), field_manager="esi-tests")
    yield api
    api.close()


SLOTS = SlotAssignment(
    testbed="real-testbed",
    node_label="esi.test/real-node",
    node_ids=("0", "1"),
    node_names=("real-node-a", "real-node-b"),
    slots=(0, 1),
    cpu=Quantity("1"),
    memory=Quantity("1Gi"),
)
EXECUTOR_TEMPLATE = {
    "metadata": {"labels": {"team": "a"}},
    "spec": {"containers": [{"name": "spark-kubernetes-executor"}]},
}


def sparkpi_application(name: str) -> dict[str, Any]:
    """The SparkApplication esi's BatchJob reconciler makes for a SparkPi job in two slots (no owner: no BatchJob)."""
    spec = {
        "type": "Scala",
        "mode": "cluster",
        "sparkVersion": spark_version(),
        "image": "esi.local/spark:test",
        "imagePullPolicy": "Never",
        "mainClass": SPARK_PI_CLASS,
        "mainApplicationFile": f"local:///opt/spark/{EXAMPLES_JAR}",
        "arguments": ["4"],
        "driver": {"serviceAccount": DRIVER_SERVICE_ACCOUNT, "cores": 1, "memory": "512m"},
        "executor": {"template": copy.deepcopy(EXECUTOR_TEMPLATE)},
    }
    manifest = batchjob_manifest(sparkSpec=spec)
    manifest["metadata"]["name"] = name
    job = BatchJob.model_validate(manifest)
    app = application_manifest(job, SLOTS, namespace=NAMESPACE, uid="no-batchjob")
    del app["metadata"]["ownerReferences"]
    return app


def test_the_operator_submits_esis_application_and_spark_creates_its_driver(
    operator_cluster: LocalCluster, operator_client: Client
) -> None:
    # Created as esi's reconciler would: the real CRD's schema accepts what esi builds.
    operator_cluster.kubectl("create", "-f", "-", input_text=json.dumps(sparkpi_application("sparkpi")))

    def state() -> str | None:
        current = get_or_none(operator_client, SparkApplication, "sparkpi", NAMESPACE)
        status = dict(current or {}).get("status") or {}
        return (status.get("applicationState") or {}).get("state")

    assert wait_for("the application to be submitted", lambda: state() in {"SUBMITTED", "RUNNING"} or None, 120)
    driver = wait_for("the driver pod", lambda: get_or_none(operator_client, Pod, "sparkpi-driver", NAMESPACE))

    labels = driver.metadata.labels
    assert labels["spark-role"] == "driver"
    assert labels["sparkoperator.k8s.io/app-name"] == "sparkpi"
    assert labels["sparkoperator.k8s.io/launched-by-spark-operator"] == "true"
    # The application's own labels reach the driver too; esi puts no testbed label there, so a Testbed does not
    # count the driver among its executors.
    assert labels[MANAGED_BY_LABEL] == MANAGED_BY
    assert TESTBED_LABEL not in labels
    assert ROLE_LABEL not in labels
    assert driver.spec.schedulerName == "default-scheduler"
    assert driver.spec.serviceAccountName == DRIVER_SERVICE_ACCOUNT
    assert driver.spec.containers[0].image == "esi.local/spark:test"
    assert driver.spec.containers[0].args[0] == "driver"

    conf = _driver_configuration(operator_client, driver)
    assert conf["spark.kubernetes.executor.scheduler.name"] == SCHEDULER_NAME
    assert conf["spark.executor.instances"] == "2"
    assert conf["spark.kubernetes.executor.request.cores"] == conf["spark.kubernetes.executor.limit.cores"] == "1"
    assert conf[f"spark.kubernetes.executor.label.{TESTBED_LABEL}"] == "real-testbed"
    assert conf["spark.dynamicAllocation.enabled"] == "false"

    template = _executor_template(operator_client, driver)
    assert template["spec"]["priorityClassName"] == EXECUTOR_PRIORITY_CLASS
    terms = template["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    # By label, and by name in one term per node, which lets kube-scheduler consider only these nodes: Spark keeps
    # the field requirements.
    by_label = {"key": "esi.test/real-node", "operator": "In", "values": ["0", "1"]}
    assert terms["nodeSelectorTerms"] == [
        {"matchExpressions": [by_label], "matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
        for node in ("real-node-a", "real-node-b")
    ]


def _mounted_config_maps(client: Client, pod: Any) -> list[dict[str, str]]:
    names = [v.configMap.name for v in pod.spec.volumes or () if v.configMap is not None]
    return [client.get(ConfigMap, name, namespace=NAMESPACE).data or {} for name in names]


def _driver_configuration(client: Client, driver: Any) -> dict[str, str]:
    """The Spark configuration spark-submit handed the driver (its mounted spark.properties)."""
    for data in _mounted_config_maps(client, driver):
        if "spark.properties" in data:
            lines = (line.split("=", 1) for line in data["spark.properties"].splitlines() if "=" in line)
            return {key.strip(): value.strip().replace("\\:", ":").replace("\\=", "=") for key, value in lines}
    raise AssertionError("the driver mounts no spark.properties")


def _executor_template(client: Client, driver: Any) -> dict[str, Any]:
    """The executor pod template spark-submit handed the driver (a ConfigMap it mounts)."""
    for data in _mounted_config_maps(client, driver):
        for key, text in data.items():
            if "podspec" in key:
                loaded = yaml.safe_load(text)
                if isinstance(loaded, dict) and "spec" in loaded:
                    return loaded
    raise AssertionError("the driver mounts no executor pod template")
