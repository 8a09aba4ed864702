"""The pure parts of the Spark image and the real Spark operator: the image's entry point (run with a stand-in
java), the driver's RBAC and the controller's command line and environment."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from infra.images.spark import ENTRYPOINT
from infra.stacks.spark_operator import SparkOperatorError, driver_rbac, operator_argv, operator_env, spark_defaults


def run_entrypoint(tmp_path: Path, args: list[str], env: dict[str, str]) -> list[str]:
    """The command the entry point ends in, one argument a line (the stand-in java and echo print them)."""
    script = tmp_path / "entrypoint.sh"
    script.write_text(ENTRYPOINT)
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text('#!/bin/sh\nprintf "%s\\n" java "$@"\n')
    java.chmod(0o755)
    base = {"PATH": os.environ["PATH"], "JAVA_HOME": str(tmp_path / "jdk"), "SPARK_HOME": "/opt/spark"}
    done = subprocess.run(["bash", script, *args], env=base | env, capture_output=True, text=True, check=True)
    return done.stdout.splitlines()


EXECUTOR_ENV = {
    "SPARK_DRIVER_URL": "spark://CoarseGrainedScheduler@10.88.0.5:7078",
    "SPARK_EXECUTOR_ID": "3",
    "SPARK_EXECUTOR_CORES": "1",
    "SPARK_EXECUTOR_MEMORY": "640m",
    "SPARK_APPLICATION_ID": "spark-app-1",
    "SPARK_EXECUTOR_POD_IP": "10.88.0.7",
    "SPARK_EXECUTOR_POD_NAME": "pi-exec-3",
    "SPARK_RESOURCE_PROFILE_ID": "0",
    "SPARK_JAVA_OPT_10": "-Dlast=1",
    "SPARK_JAVA_OPT_2": "-Dsecond=1",
    "SPARK_JAVA_OPT_0": "-Dfirst=1",
}


def test_an_executor_runs_the_kubernetes_backend_with_its_options_in_order(tmp_path: Path) -> None:
    command = run_entrypoint(tmp_path, ["executor"], EXECUTOR_ENV | {"SPARK_CLASSPATH": "/extra.jar"})

    assert command[:6] == ["java", "-Dfirst=1", "-Dsecond=1", "-Dlast=1", "-Xms640m", "-Xmx640m"]
    assert command[6:8] == ["-cp", "/opt/spark/conf:/extra.jar:/opt/spark/jars/*"]
    assert command[8] == "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend"
    flags = dict(zip(command[9::2], command[10::2], strict=True))
    assert flags == {
        "--driver-url": "spark://CoarseGrainedScheduler@10.88.0.5:7078",
        "--executor-id": "3",
        "--cores": "1",
        "--app-id": "spark-app-1",
        "--hostname": "10.88.0.7",
        "--resourceProfileId": "0",
        "--podName": "pi-exec-3",
    }


def test_a_driver_runs_spark_submit_in_client_mode_bound_to_and_reached_at_its_pod_address(tmp_path: Path) -> None:
    spark_home = tmp_path / "spark"
    submit = spark_home / "bin" / "spark-submit"
    submit.parent.mkdir(parents=True)
    submit.write_text('#!/bin/sh\nprintf "%s\\n" spark-submit "$@"\n')
    submit.chmod(0o755)

    command = run_entrypoint(
        tmp_path,
        ["driver", "--properties-file", "/opt/spark/conf/spark.properties", "--class", "Pi", "local:///pi.jar"],
        {"SPARK_HOME": str(spark_home), "SPARK_DRIVER_BIND_ADDRESS": "10.88.0.5"},
    )

    assert command == [
        "spark-submit",
        "--conf",
        "spark.driver.bindAddress=10.88.0.5",
        # Executors connect to the driver's IP: a cluster without DNS cannot resolve the driver's Service.
        "--conf",
        "spark.driver.host=10.88.0.5",
        "--deploy-mode",
        "client",
        "--properties-file",
        "/opt/spark/conf/spark.properties",
        "--class",
        "Pi",
        "local:///pi.jar",
    ]


def test_any_other_command_runs_as_given(tmp_path: Path) -> None:
    assert run_entrypoint(tmp_path, ["echo", "hello"], {}) == ["hello"]


def test_a_driver_may_manage_exactly_its_executors_objects_in_its_namespace() -> None:
    account, role, binding = driver_rbac("jobs")

    assert (account["kind"], account["metadata"]) == ("ServiceAccount", {"name": "spark-driver", "namespace": "jobs"})
    assert role["kind"] == "Role"
    assert role["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["pods", "services", "configmaps", "persistentvolumeclaims"],
            "verbs": ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"],
        }
    ]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "spark-driver", "namespace": "jobs"}]
    assert binding["roleRef"]["name"] == "spark-driver"


def test_the_operator_manages_only_the_namespaces_it_is_given() -> None:
    argv = operator_argv(Path("/bin/op"), ["a", "b"], kubeconfig=Path("/k.yaml"), health_port=9000)

    assert argv[:3] == ["/bin/op", "controller", "start"]
    assert "--namespaces=a,b" in argv
    assert "--health-probe-bind-address=127.0.0.1:9000" in argv
    with pytest.raises(SparkOperatorError, match="namespaces"):
        operator_argv(Path("/bin/op"), [], kubeconfig=Path("/k.yaml"), health_port=9000)
    with pytest.raises(SparkOperatorError, match="namespaces"):
        operator_argv(Path("/bin/op"), [""], kubeconfig=Path("/k.yaml"), health_port=9000)


def test_spark_submit_is_pointed_at_the_clusters_api_server() -> None:
    env = operator_env(
        {"PATH": "/usr/bin"},
        server="https://127.0.0.1:36443",
        kubeconfig=Path("/k.yaml"),
        spark=Path("/spark"),
        java_home=Path("/jvm"),
        conf=Path("/conf"),
    )

    assert (env["KUBERNETES_SERVICE_HOST"], env["KUBERNETES_SERVICE_PORT"]) == ("127.0.0.1", "36443")
    assert (env["SPARK_HOME"], env["KUBECONFIG"], env["PATH"]) == ("/spark", "/k.yaml", "/jvm/bin:/usr/bin")
    assert env["SPARK_CONF_DIR"] == "/conf"
    with pytest.raises(SparkOperatorError, match="https"):
        operator_env(
            {},
            server="http://127.0.0.1:8080",
            kubeconfig=Path("/k"),
            spark=Path("/s"),
            java_home=Path("/j"),
            conf=Path("/c"),
        )


def test_drivers_on_a_local_cluster_are_told_where_pods_reach_the_api_server() -> None:
    assert spark_defaults("https://10.1.2.3:6443") == "spark.kubernetes.driver.master https://10.1.2.3:6443\n"
