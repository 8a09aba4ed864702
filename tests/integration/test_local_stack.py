"""The local stack end to end, as ``make up`` runs it: from nothing, ``pulumi up`` of this repository's program
brings up a control plane with KWOK nodes and esi's processes; a queue Scheduling committed to the manifests
directory runs to completion after the next ``up``; removing its file removes it; ``pulumi destroy`` leaves
no process and no file behind, also with a Scheduling made outside the stack still there.

Where this machine can run real nodes, the stack has one, and the repository's own manifests for namespace
``real`` (its Testbed, three Spark BatchJobs and a Flink WordCount) run for real on it: the real Spark operator
and the Flink stand-in act there, the simulator does not.

The stack is the test's own: its own cluster name, work directory, ports, manifests directory and Pulumi
state, all under the test's temporary directory, next to (not instead of) the session's cluster.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import yaml

from esi.client import EsiClient
from esi.objects.names import SCHEDULER_NAME
from infra import toolchain
from infra.local_cluster import LocalCluster, free_port, process_alive
from infra.local_cluster.real_node import RealNode, unavailable_reason
from infra.stacks import processes, pulumi_local
from infra.stacks.local import real_node_specs, real_nodes_refused
from infra.stacks.stack import POLICY_PACK
from tests.integration.kube import wait_for

TESTBED = {
    "apiVersion": "esi.tu-berlin.de/v1alpha1",
    "kind": "Testbed",
    "metadata": {"name": "e2e"},
    "spec": {"nodeLabel": "esi.e2e/slots", "slotsPerNode": 2, "resourcesPerSlot": {"cpu": "1", "memory": "1Gi"}},
}
REAL = "real"  # the namespace of jobs on real nodes (esi:realNamespace's default)
SPARK = {"type": "Scala", "sparkVersion": "3.5.0", "image": "spark:3.5.0", "mainApplicationFile": "local:///x.jar",
         "driver": {"serviceAccount": "default"}}  # fmt: skip
SCHEDULING = {
    "apiVersion": "esi.tu-berlin.de/v1alpha1",
    "kind": "Scheduling",
    "metadata": {"name": "committed"},
    "spec": {"testbed": {"name": "e2e"}, "queueBased": [{"name": "batchjob-spark"}, {"name": "spark-crawler"}]},
}


def batchjob(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "esi.tu-berlin.de/v1alpha1",
        "kind": "BatchJob",
        "metadata": {"name": name},
        "spec": {"sparkSpec": SPARK},
    }


def kill_the_second_scheduler(cluster: LocalCluster) -> None:
    """SIGKILL the second kube-scheduler (its supervisor's child); return once the supervisor started a new one."""
    component = f"scheduler-{SCHEDULER_NAME}"
    (killed,) = cluster.children_of(component)
    os.kill(killed, signal.SIGKILL)
    wait_for(
        "the second scheduler started again",
        lambda: [p for p in cluster.children_of(component) if p != killed],
    )


def kill_the_clusters_scheduler(cluster: LocalCluster) -> None:
    """SIGKILL the control plane's kube-scheduler, which nothing starts again; return once it is gone."""
    killed = int((cluster.directory / "pids" / "kube-scheduler.pid").read_text())
    os.kill(killed, signal.SIGKILL)
    wait_for("the cluster's kube-scheduler to exit", lambda: not process_alive(killed))


def real_namespace_manifests() -> list[dict[str, Any]]:
    """The repository's committed manifests for namespace ``real``, as committed."""
    documents = []
    for path in sorted((toolchain.REPO_ROOT / "manifests").glob("*.yaml")):
        documents += [d for d in yaml.safe_load_all(path.read_text()) if d and d["metadata"].get("namespace") == REAL]
    return documents


def run_on_the_real_node(esi: EsiClient, cluster: LocalCluster, node: RealNode) -> None:
    """A queue of the committed real jobs on the committed real Testbed: all complete, each ran on the node."""
    jobs = sorted(d["metadata"]["name"] for d in real_namespace_manifests() if d["kind"] == "BatchJob")
    assert len(jobs) == 4, jobs
    esi.submit_queue("all", REAL, jobs)
    done = esi.wait_for_scheduling("all", timeout=900)
    assert {j.name: j.state for j in done.job_status} == dict.fromkeys(jobs, "Completed")
    for job in jobs:
        status = json.loads(cluster.kubectl("get", "batchjob", job, "-n", REAL, "-o", "json"))["status"]
        run = status["runs"][-1]
        assert (run["outcome"], run["nodes"]) == ("Succeeded", [node.name]), run
    logs = "".join(p.read_text(errors="replace") for p in node.pod_logs.rglob("*.log"))
    for output in ("Pi is roughly 3.1", "Groups: ", "Weights' norm: "):
        assert output in logs, f"a Spark driver's output {output!r}"
    sim_log = (cluster.logs_dir / f"{processes.SIM.name}.log").read_text(errors="replace")
    assert f"{REAL}/" not in sim_log, "the simulator acted in the namespace of the real operators"


def test_pulumi_up_runs_a_committed_scheduling_and_destroy_leaves_nothing(tmp_path: Path, unique: str) -> None:
    workdir, manifests = tmp_path / "kwok", tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "testbed.yaml").write_text(yaml.safe_dump(TESTBED))
    (manifests / "jobs.yaml").write_text(yaml.safe_dump_all([batchjob("batchjob-spark"), batchjob("spark-crawler")]))
    real_nodes = 0 if unavailable_reason() or real_nodes_refused(1) else 1
    if real_nodes:
        (manifests / "real.yaml").write_text(yaml.safe_dump_all(real_namespace_manifests()))
    name = f"e2e-{unique}"
    config: dict[str, Any] = {
        "esi:mode": "local",
        "esi:cluster": name,
        "esi:workdir": str(workdir),
        "esi:manifests": str(manifests),
        "esi:apiPort": str(free_port()),
        "esi:extenderPort": str(free_port()),
        "esi:operatorsLivenessPort": str(free_port()),
        "esi:simLivenessPort": str(free_port()),
        "esi:sparkOperatorHealthPort": str(free_port()),
        "esi:flinkStandInHealthPort": str(free_port()),
        "esi:simArgs": ["--time-scale", "0.01"],
        "esi:nodes": [
            {"name": f"{name}-{i}", "cpu": "4", "memory": "8Gi", "labels": {"esi.e2e/slots": str(i)}} for i in range(2)
        ],
        # A real node too, where this machine can run one: it comes and goes with the stack.
        "esi:realNodes": str(real_nodes),
    }
    real = [RealNode(LocalCluster(name, workdir), spec) for spec in real_node_specs(int(config["esi:realNodes"]))]
    config_file = tmp_path / "Pulumi.e2e.yaml"
    config_file.write_text(json.dumps({"config": config}))
    env = pulumi_local.environment(home=tmp_path / "pulumi-home", backend=tmp_path / "state")
    pulumi_local.ensure_kubernetes_plugin(env, cwd=toolchain.REPO_ROOT)

    def pulumi(*args: str) -> str:
        # As `make up` runs it: with the policy pack (a committed Scheduling is checked before it is applied).
        policies = ["--policy-pack", str(POLICY_PACK)] if args[0] in ("up", "preview") else []
        return pulumi_local.run(
            [*args, *policies, "--stack", name, "--config-file", str(config_file)],
            cwd=toolchain.REPO_ROOT,
            env=env,
            timeout=600,
        )

    cluster = LocalCluster(name, workdir)
    pulumi_local.run(["stack", "init", name], cwd=toolchain.REPO_ROOT, env=env)
    try:
        pulumi("up", "--yes", "--skip-preview")
        printed = pulumi_local.run(
            ["stack", "output", "--json", "--show-secrets", "--stack", name], cwd=toolchain.REPO_ROOT, env=env
        )
        outputs = json.loads(printed)
        assert outputs["kubeconfig"] == str(cluster.kubeconfig)
        esi = EsiClient(outputs["apiUrl"], token=outputs["apiToken"], namespace="default")
        with esi:
            wait_for("the committed Testbed in the API", lambda: esi.overview().testbeds, timeout=60)

            # A component of the control plane that exited is started again by the next `pulumi up`.
            kill_the_clusters_scheduler(cluster)
            (manifests / "scheduling.yaml").write_text(yaml.safe_dump(SCHEDULING))
            assert "Scheduling:default/committed" in pulumi("preview", "--diff")
            pulumi("up", "--yes", "--skip-preview")
            assert cluster.exited_components() == []
            done = esi.wait_for_scheduling("committed", timeout=180)
            assert {j.name: j.state for j in done.job_status} == {
                "batchjob-spark": "Completed",
                "spark-crawler": "Completed",
            }

            (manifests / "scheduling.yaml").unlink()
            pulumi("up", "--yes", "--skip-preview")
            wait_for("the Scheduling to be gone", lambda: not esi.schedulings(), timeout=60)

            # The second scheduler is supervised like the other components: killed, it is started again, and
            # the next Scheduling's executors are placed.
            kill_the_second_scheduler(cluster)

            # Submitted through the API, not part of the stack: its finalizer, which only the operators
            # remove, must not keep `pulumi destroy` waiting for the CRD's deletion.
            esi.submit_queue("outside", "e2e", ["batchjob-spark"])
            esi.wait_for_scheduling("outside", timeout=180)
        if real:
            with EsiClient(outputs["apiUrl"], token=outputs["apiToken"], namespace=REAL) as in_real:
                run_on_the_real_node(in_real, cluster, real[0])

        for node in real:
            assert node.running(), f"real node {node.name} is not running"
        pids = [int(p.read_text()) for p in (cluster.directory / "processes").glob("*.pid")]
        assert len(pids) == 4 + 4 * len(real), (
            "operators, API, simulator, second scheduler; kubelet, containerd; Spark operator, Flink stand-in"
        )
    finally:
        pulumi("destroy", "--yes", "--skip-preview")
        # `stack init` keeps the stack's secrets salt in Pulumi.<stack>.yaml beside Pulumi.yaml: not the repo's
        (toolchain.REPO_ROOT / f"Pulumi.{name}.yaml").unlink(missing_ok=True)

    assert_nothing_left(pids, real, cluster, workdir)


def assert_nothing_left(pids: list[int], real: list[RealNode], cluster: LocalCluster, workdir: Path) -> None:
    assert not [pid for pid in pids if process_alive(pid)], "a process outlived pulumi destroy"
    mounts = Path("/proc/mounts").read_text()
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
    for node in real:
        assert str(node.short_dir) not in mounts, f"a mount of real node {node.name} outlived pulumi destroy"
        assert f" {node.bridge}:" not in links, f"the bridge of real node {node.name} outlived pulumi destroy"
    assert not cluster.directory.exists()
    assert not workdir.exists() or not any(workdir.iterdir()), f"left behind: {list(workdir.iterdir())}"
