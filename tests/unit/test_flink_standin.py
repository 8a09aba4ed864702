"""The Flink stand-in's pure parts: a FlinkDeployment as Flink's client gets it (as the operator's
FlinkConfigBuilder builds it), the status it reports from what it observes; and its health endpoint."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from flink_standin.__main__ import parse
from flink_standin.health import HealthEndpoint, answer, serve
from flink_standin.status import Observation, decide
from flink_standin.submission import LocalCluster, SubmissionError, submission
from kube.resources import api_server_for_pods

LOCAL = LocalCluster(kubeconfig="/home/me/kubeconfig.yaml", api_host="10.0.0.1", api_port=6443)
API_ENV = [
    {"name": "KUBERNETES_SERVICE_HOST", "value": "10.0.0.1"},
    {"name": "KUBERNETES_SERVICE_PORT", "value": "6443"},
]


def deployment(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "image": "esi.local/flink:2.3.0",
        "serviceAccount": "flink",
        "flinkConfiguration": {"taskmanager.numberOfTaskSlots": "2"},
        "jobManager": {"resource": {"cpu": 0.5, "memory": "1024m"}},
        "taskManager": {"resource": {"cpu": 0.5, "memory": "1Gi"}, "replicas": 3},
        "job": {"jarURI": "local:///opt/flink/wc.jar", "entryClass": "WordCount", "args": ["--x", "1"]},
    }
    return {
        "apiVersion": "flink.apache.org/v1beta1",
        "kind": "FlinkDeployment",
        "metadata": {"name": "wc", "namespace": "jobs", "uid": "u-1"},
        "spec": base | spec,
    }


def test_a_flinkdeployment_becomes_the_configuration_the_operator_would_give_flinks_client() -> None:
    conf = submission(deployment(), LOCAL).configuration

    assert conf["kubernetes.cluster-id"] == "wc"
    assert conf["kubernetes.namespace"] == "jobs"
    assert conf["kubernetes.container.image.ref"] == "esi.local/flink:2.3.0"
    assert conf["kubernetes.service-account"] == "flink"
    assert conf["kubernetes.jobmanager.cpu.amount"] == conf["kubernetes.taskmanager.cpu.amount"] == "0.5"
    assert conf["jobmanager.memory.process.size"] == "1024m"
    assert conf["taskmanager.memory.process.size"] == f"{2**30}b"  # a Kubernetes quantity, in bytes
    assert conf["parallelism.default"] == "6", "replicas x task slots, whatever job.parallelism says"
    assert conf["execution.shutdown-on-application-finish"] == "false"
    assert conf["pipeline.jars"] == "local:///opt/flink/wc.jar"
    assert conf["kubernetes.rest-service.exposed.type"] == "ClusterIP"
    assert conf["kubernetes.jobmanager.owner.reference"] == (
        "apiVersion:flink.apache.org/v1beta1,kind:FlinkDeployment,name:wc,uid:u-1,controller:false,"
        "blockOwnerDeletion:true"
    )
    # What the local cluster needs: Kubernetes HA (the JobManager's address without DNS), no reverse lookups.
    assert conf["high-availability.type"] == "kubernetes"
    assert conf["high-availability.cluster-id"] == "wc"
    assert conf["jobmanager.retrieve-taskmanager-hostname"] == "false"
    assert conf["kubernetes.config.file"] == "/home/me/kubeconfig.yaml"


def test_the_users_configuration_stays_where_the_operator_leaves_it() -> None:
    conf = submission(
        deployment(flinkConfiguration={"kubernetes.rest-service.exposed.type": "NodePort", "state.backend": "rocksdb"}),
        LOCAL,
    ).configuration
    assert conf["kubernetes.rest-service.exposed.type"] == "NodePort"
    assert conf["state.backend"] == "rocksdb"
    assert conf["execution.target"] == "kubernetes-application"


def test_without_replicas_the_jobs_parallelism_counts() -> None:
    spec = deployment()
    del spec["spec"]["taskManager"]["replicas"]
    spec["spec"]["job"]["parallelism"] = 5
    assert submission(spec, LOCAL).configuration["parallelism.default"] == "5"


def test_templates_are_merged_as_the_operator_merges_them_and_reach_the_api_server() -> None:
    common = {"spec": {"tolerations": [{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}]}}
    own = {"spec": {"tolerations": [{"key": "c", "operator": "Exists"}]}}
    spec = deployment(podTemplate=common, taskManager={"podTemplate": own, "replicas": 1})

    prepared = submission(spec, LOCAL)

    task_manager = prepared.taskmanager_template["spec"]
    assert task_manager["tolerations"] == [{"key": "c", "operator": "Exists"}, {"key": "b", "operator": "Exists"}]
    assert task_manager["containers"] == [{"name": "flink-main-container", "env": API_ENV}]
    assert prepared.jobmanager_template["spec"]["tolerations"] == common["spec"]["tolerations"]


def test_the_client_command_line() -> None:
    argv = submission(deployment(), LOCAL).argv("/opt/flink/bin/flink", "/w/jm.json", "/w/tm.json")

    assert argv[:4] == ["/opt/flink/bin/flink", "run", "--target", "kubernetes-application"]
    assert "-Dkubernetes.pod-template-file.taskmanager=/w/tm.json" in argv
    assert argv[-5:] == ["-c", "WordCount", "local:///opt/flink/wc.jar", "--x", "1"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"job": {"upgradeMode": "stateless"}}, "spec.job.jarURI"),
        ({"mode": "standalone"}, "spec.mode"),
        ({"taskManager": {"resources": {"requests": {"cpu": "1"}}}}, "spec.taskManager.resources"),
        ({"jobManager": {"resource": {"memory": "lots"}}}, "spec.jobManager.resource.memory"),
    ],
)
def test_what_the_stand_in_cannot_run_is_refused_naming_the_field(change: dict[str, Any], field: str) -> None:
    with pytest.raises(SubmissionError, match=field.replace(".", r"\.")):
        submission(deployment(**change), LOCAL)


# --- status ---------------------------------------------------------------------------------------------------

NOW = 1_700_000_000_000


def test_a_new_deployment_is_submitted_once() -> None:
    first = decide(None, Observation(), NOW)
    assert first.submit
    assert first.status["lifecycleState"] == "CREATED"
    submitting = decide(first.status, Observation(submitting=True), NOW + 1)
    assert not submitting.submit
    assert submitting.status["lifecycleState"] == "DEPLOYED"
    assert submitting.status["jobStatus"]["state"] == "RECONCILING"


def test_a_failed_submission_fails_the_deployment_with_the_clients_words_and_is_not_retried() -> None:
    failed = decide({"lifecycleState": "DEPLOYED"}, Observation(submit_error="IllegalConfigurationException: x"), NOW)
    assert not failed.submit
    assert failed.status["lifecycleState"] == "FAILED"
    assert json.loads(failed.status["error"])["message"] == "IllegalConfigurationException: x"


def jm_pod(ready: bool = True, waiting: str | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": [{"type": "Ready", "status": str(ready)}], "podIP": "10.1.0.5"}
    if waiting:
        status["containerStatuses"] = [{"name": "flink-main-container", "state": {"waiting": {"reason": waiting}}}]
    return {"status": status}


def test_the_job_states_come_from_the_jobmanagers_rest_api() -> None:
    job = {"jid": "j1", "name": "WordCount", "state": "RUNNING", "start-time": 5, "last-modification": 6}
    starting = decide({}, Observation(deployment=True, jobmanager_pods=[jm_pod(ready=False)]), NOW)
    running = decide(starting.status, Observation(deployment=True, jobmanager_pods=[jm_pod()], jobs=[job]), NOW)
    finished = decide(
        running.status,
        Observation(
            deployment=True, jobmanager_pods=[jm_pod()], jobs=[job | {"state": "FINISHED", "last-modification": 9}]
        ),
        NOW,
    )

    assert starting.status["jobManagerDeploymentStatus"] == "DEPLOYED_NOT_READY"
    assert (running.status["lifecycleState"], running.status["jobStatus"]["state"]) == ("STABLE", "RUNNING")
    assert running.status["jobStatus"] | {} == {
        "jobName": "WordCount",
        "jobId": "j1",
        "state": "RUNNING",
        "startTime": "5",
        "updateTime": "6",
    }
    assert finished.status["jobStatus"]["state"] == "FINISHED"
    assert finished.status["jobStatus"]["updateTime"] == "9"
    gone = decide(finished.status, Observation(), NOW)
    assert not gone.submit, "an ended job is not deployed again"
    assert gone.status["jobStatus"]["state"] == "FINISHED"
    assert gone.status["jobManagerDeploymentStatus"] == "MISSING"


def test_a_failed_job_fails_with_its_root_exception() -> None:
    job = {"jid": "j1", "name": "WordCount", "state": "FAILED", "start-time": 5}
    failed = decide({}, Observation(deployment=True, jobs=[job], failure="java.lang.RuntimeException: boom"), NOW)
    assert failed.status["lifecycleState"] == "FAILED"
    assert json.loads(failed.status["error"])["message"] == "java.lang.RuntimeException: boom"


def test_a_jobmanager_that_cannot_start_fails_the_deployment() -> None:
    broken = decide({}, Observation(deployment=True, jobmanager_pods=[jm_pod(False, "ErrImagePull")]), NOW)
    assert broken.status["jobManagerDeploymentStatus"] == "ERROR"
    assert "ErrImagePull" in json.loads(broken.status["error"])["message"]


def test_a_jobmanager_deployment_lost_before_its_job_ended_is_deployed_again() -> None:
    running = {"lifecycleState": "STABLE", "jobStatus": {"state": "RUNNING"}}
    again = decide(running, Observation(), NOW)
    assert again.submit


def test_the_command_line_says_what_is_wrong(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse(
            [
                "--kubeconfig",
                "k",
                "--namespace",
                "n",
                "--flink-home",
                str(tmp_path),
                "--java-home",
                str(tmp_path),
                "--workdir",
                str(tmp_path),
                "--pod-api-server",
                "http://x:1",
            ]
        )
    assert "expected https://HOST:PORT" in capsys.readouterr().err


def test_the_health_endpoint_answers_ready_only_once_the_namespaces_were_read() -> None:
    assert answer("GET /healthz HTTP/1.1", "/healthz", ready=True).startswith(b"HTTP/1.1 200 OK\r\n")
    assert answer("GET /healthz?x=1 HTTP/1.1", "/healthz", ready=False).startswith(b"HTTP/1.1 503 ")
    assert answer("GET /other HTTP/1.1", "/healthz", ready=True).startswith(b"HTTP/1.1 404 ")
    assert answer("POST /healthz HTTP/1.1", "/healthz", ready=True).startswith(b"HTTP/1.1 404 ")
    assert answer("HEAD /healthz HTTP/1.1", "/healthz", ready=True).endswith(b"\r\n\r\n")
    assert HealthEndpoint.parse("http://127.0.0.1:8094/healthz") == HealthEndpoint("127.0.0.1", 8094, "/healthz")
    with pytest.raises(ValueError, match="expected http://HOST:PORT/PATH"):
        HealthEndpoint.parse("127.0.0.1:8094")


def test_the_health_endpoint_serves_what_ready_says_at_each_request() -> None:
    async def scenario() -> list[int]:
        state = {"read": False}
        server = await serve(HealthEndpoint("127.0.0.1", 0, "/healthz"), lambda: state["read"])
        port = server.sockets[0].getsockname()[1]
        codes = []
        async with httpx.AsyncClient() as http:
            for read in (False, True):
                state["read"] = read
                codes.append((await http.get(f"http://127.0.0.1:{port}/healthz")).status_code)
        server.close()
        await server.wait_closed()
        return codes

    assert asyncio.run(scenario()) == [503, 200]


def test_the_health_option_is_parsed(tmp_path: Any) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "flink").write_text("")
    common = ["--kubeconfig", "k", "--namespace", "n", "--flink-home", str(tmp_path), "--java-home", str(tmp_path)]
    settings = parse(
        [*common, "--workdir", str(tmp_path), "--pod-api-server", "https://x:1", "--health", "http://h:2/hz"]
    )
    assert settings.health == HealthEndpoint("h", 2, "/hz")


def test_pods_reach_the_api_server_at_the_address_of_the_kubernetes_endpointslice() -> None:
    endpoint_slice = {"endpoints": [{"addresses": ["10.1.2.3"]}], "ports": [{"name": "https", "port": 6443}]}
    assert api_server_for_pods(endpoint_slice) == "https://10.1.2.3:6443"
    v6 = {"endpoints": [{"addresses": ["fd00::1"]}], "ports": [{"port": 443}]}
    assert api_server_for_pods(v6) == "https://[fd00::1]:443"
    with pytest.raises(ValueError, match="names no address"):
        api_server_for_pods({"endpoints": None, "ports": [{"port": 443}]})
