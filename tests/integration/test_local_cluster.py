"""The local cluster library on a cluster of its own: create with labelled nodes, stop and start without
losing state, delete without leaving a process behind."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from infra.local_cluster import CONTROLLER_MANAGER_QPS, ClusterError, LocalCluster, NodeSpec, process_alive
from tests.integration.kube import wait_for


def processes_mentioning(text: str) -> list[int]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if text in cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                found.append(int(cmdline.parent.name))
        except OSError:
            continue  # the process ended while we looked
    return found


def test_create_stop_start_delete(tmp_path: Path, unique: str) -> None:
    cluster = LocalCluster(f"life-{unique}", workdir=tmp_path / "kwok")
    try:
        cluster.create([NodeSpec("a", cpu="3", memory="5Gi", labels={"esi.test/role": "worker"}), NodeSpec("b")])

        nodes = json.loads(cluster.kubectl("get", "nodes", "-o", "json"))["items"]
        by_name = {n["metadata"]["name"]: n for n in nodes}
        assert set(by_name) == {"a", "b"}
        assert by_name["a"]["metadata"]["labels"]["esi.test/role"] == "worker"
        assert by_name["a"]["status"]["allocatable"]["cpu"] == "3"
        assert by_name["a"]["status"]["allocatable"]["memory"] == "5Gi"
        assert set(cluster.component_logs()) >= {"etcd", "kube-apiserver", "kube-scheduler", "kwok-controller"}
        rate = f"--kube-api-qps={CONTROLLER_MANAGER_QPS} "
        ours = set(processes_mentioning(str(cluster.directory)))
        managers = set(processes_mentioning("kube-controller-manager")) & ours
        assert managers, "no controller manager of the cluster runs"
        assert managers <= set(processes_mentioning(rate)), "the controller manager's client is not given its rate"

        cluster.kubectl("create", "configmap", "kept", "--from-literal=k=v")
        helpers = [cluster.start_process("helper", ["sleep", "600"])]
        with cluster.stopped():
            assert not cluster.serving()
            assert not cluster.process_running("helper")
        assert cluster.serving()
        assert json.loads(cluster.kubectl("get", "configmap", "kept", "-o", "json"))["data"] == {"k": "v"}

        helpers.append(cluster.start_process("helper", ["sleep", "600"]))
    finally:
        cluster.delete()

    assert not cluster.directory.exists()
    assert not set(helpers) & set(processes_mentioning("sleep 600")), "a process it started still runs"
    assert processes_mentioning(str(cluster.directory)) == [], "a process of the deleted cluster still runs"


def test_a_cluster_created_while_another_is_down_takes_none_of_its_ports(tmp_path: Path, unique: str) -> None:
    down = LocalCluster(f"down-{unique}", workdir=tmp_path / "kwok")
    created = LocalCluster(f"new-{unique}", workdir=tmp_path / "kwok")
    try:
        down.create()
        with down.control_plane_down():
            assert not down.serving()
            created.create()
        assert down.serving()
        assert created.serving()
        shared = set(down._control_plane_ports().values()) & set(created._control_plane_ports().values())
        assert shared == set()
    finally:
        created.delete()
        down.delete()


def test_a_restarted_kwok_plays_its_nodes_kubelets_again_within_a_short_node_lease(tmp_path: Path, unique: str) -> None:
    # kwokctl's own leases (200 s, renewed every 50 s) keep a KWOK controller started afresh off its nodes for
    # minutes: it takes a node over only once the lease of the one before it expired.
    cluster = LocalCluster(f"lease-{unique}", workdir=tmp_path / "kwok", node_lease_seconds=5)
    try:
        cluster.create([NodeSpec("a")])
        cluster.restart_control_plane()
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"nodeName": "a", "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
        }
        cluster.kubectl("create", "-f", "-", input_text=json.dumps(pod))
        cluster.kubectl("wait", "pod/p", "--for=jsonpath={.status.phase}=Running", "--timeout=60s", timeout=90)
    finally:
        cluster.delete()


def test_a_control_plane_whose_api_server_stalled_past_a_lease_still_schedules_and_runs_its_controllers(
    tmp_path: Path, unique: str
) -> None:
    """An API server that does not answer for 20 s (a busy machine) leaves the scheduler and the controller manager
    running: with a Lease to renew, each would exit for good after 10 s without an answer, and a Deployment made
    afterwards would get no pod, or a pod never bound."""
    cluster = LocalCluster(f"stall-{unique}", workdir=tmp_path / "kwok")
    try:
        cluster.create([NodeSpec("a")])
        with cluster.paused("kube-apiserver"):
            time.sleep(20)

        cluster.kubectl("create", "deployment", "after", "--image=registry.k8s.io/pause:3.10")
        cluster.kubectl("rollout", "status", "deployment/after", "--timeout=60s", timeout=90)
        pods = json.loads(cluster.kubectl("get", "pods", "-l", "app=after", "-o", "json"))["items"]
        assert [(p["spec"].get("nodeName"), p["status"]["phase"]) for p in pods] == [("a", "Running")]
        assert cluster.exited_components() == []
    finally:
        cluster.delete()


def test_components_that_exited_are_started_again_as_kwokctl_started_them(tmp_path: Path, unique: str) -> None:
    cluster = LocalCluster(f"exited-{unique}", workdir=tmp_path / "kwok")
    try:
        cluster.create([NodeSpec("a")])
        pids = [
            int((cluster.directory / "pids" / f"{name}.pid").read_text())
            for name in ("kube-scheduler", "kube-controller-manager")
        ]
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        wait_for("both to exit", lambda: not any(process_alive(pid) for pid in pids))
        assert cluster.exited_components() == ["kube-controller-manager", "kube-scheduler"]

        assert cluster.start_exited_components() == ["kube-controller-manager", "kube-scheduler"]

        assert cluster.exited_components() == []
        cluster.kubectl("create", "deployment", "after", "--image=registry.k8s.io/pause:3.10")
        cluster.kubectl("rollout", "status", "deployment/after", "--timeout=60s", timeout=90)
        ours = set(processes_mentioning(str(cluster.directory)))
        assert set(processes_mentioning(f"--kube-api-qps={CONTROLLER_MANAGER_QPS} ")) & ours, "started with its flags"
    finally:
        cluster.delete()

    assert processes_mentioning(str(cluster.directory)) == [], "a component started again outlived the cluster"


def test_a_control_plane_whose_port_another_process_took_says_so_at_start(tmp_path: Path, unique: str) -> None:
    cluster = LocalCluster(f"taken-{unique}", workdir=tmp_path / "kwok")
    try:
        cluster.create()
        port = cluster._control_plane_ports()["kube-apiserver/https"]
        # While it is down its ports are held by a listening socket each (here, in this process), so no cluster
        # another pytest worker creates meanwhile takes one; on leaving, it starts on them.
        with cluster.control_plane_down(), pytest.raises(ClusterError) as refused:
            cluster.start(timeout=30)
        assert "cannot start: another process listens on its port" in str(refused.value)
        assert f"{port} (kube-apiserver/https)" in str(refused.value)
        assert cluster.serving()
    finally:
        cluster.delete()
