"""Real nodes (``infra.local_cluster.real_node``): a kubelet with its own containerd joins the session's cluster.

One real node is shared by the tests of the session (started once, under a lock, by the first worker; the
cluster's deletion deletes it); it is tainted, so only pods that name it (``nodeName``) run there.
Deleting a node is tested on a node of its own.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube import Client
from lightkube.codecs import from_dict
from lightkube.models.core_v1 import Capabilities, PodSecurityContext, SecurityContext
from lightkube.resources.core_v1 import Node, NodeStatus, Pod
from lightkube.types import PatchType

from esi.objects.slot_resource import SLOT_RESOURCE, advertised_slots, requesting_a_slot
from infra import images
from infra.images.esi import esi_image
from infra.images.flink import FLINK_HOME, WORD_COUNT_CLASS, flink_home, flink_image, word_count_jar
from infra.images.java_runtime import FLINK_UID, host_java_home
from infra.images.spark import spark_version
from infra.local_cluster import LocalCluster, process_alive
from infra.local_cluster.real_node import RealNode, RealNodeSpec, pod_api_server_url, unavailable_reason
from infra.stacks import processes
from infra.stacks.second_scheduler import scheduler_image
from infra.stacks.spark_operator import chart_dir, operator_image
from infra.stacks.spark_operator import unavailable_reason as spark_operator_unavailable
from infra.toolchain import load_pins
from infra.toolchain.commands import exclusive
from tests.integration.admission import KubeletAdmission
from tests.integration.conftest import AddNodes
from tests.integration.kube import (
    get_or_none,
    made_again_while_behind,
    phase_of,
    pod,
    wait_for,
    while_the_watch_was_lost,
)
from tests.integration.real_stack import example_flink_rbac

if (reason := unavailable_reason()) is not None:
    pytest.skip(reason, allow_module_level=True)

REAL_TAINT = "esi.test/real-node=true:NoSchedule"
CGROUPS = Path("/sys/fs/cgroup")


@pytest.fixture(scope="session")
def real_node(cluster: LocalCluster) -> RealNode:
    """The session's shared real node (cpu 1, memory 2Gi), with the pause and busybox images."""
    node = RealNode(
        cluster,
        RealNodeSpec("real-shared", cpu="1", memory="2Gi", labels={"esi.test/pool": "real"}, taints=(REAL_TAINT,)),
    )
    with exclusive(cluster.directory / "real-node.lock"):
        node.start()
        images.import_image(images.busybox_image(), node.containerd_socket)
    return node


def pinned_pod(name: str, namespace: str, node: RealNode, image: str, **container: Any) -> Any:
    """A pod bound to ``node`` by name (the kubelet alone decides whether it runs), tolerating the taint."""
    spec = {
        "nodeName": node.name,
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 0,
        "tolerations": [{"key": "esi.test/real-node", "operator": "Exists"}],
        "containers": [{"name": "main", "image": image, **container}],
    }
    manifest = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": spec}
    return from_dict(manifest)


def small_pause_pod(name: str, namespace: str, node: RealNode) -> Any:
    """A pause container's pod bound to ``node``, asking for little."""
    resources = {"cpu": "50m", "memory": "16Mi"}
    image = images.pause_image().reference
    return pinned_pod(name, namespace, node, image, resources={"requests": resources, "limits": resources})


def test_a_real_node_joins_beside_kwok_nodes(real_node: RealNode, client: Client) -> None:
    node = client.get(Node, real_node.name)
    assert node.status is not None
    assert node.metadata is not None
    ready = {c.type: c.status for c in node.status.conditions or []}["Ready"]
    assert ready == "True"
    assert node.status.nodeInfo is not None
    assert node.status.nodeInfo.containerRuntimeVersion.startswith("containerd://")
    allocatable = node.status.allocatable or {}
    assert (allocatable["cpu"], allocatable["memory"]) == ("1", "2Gi")
    assert (node.metadata.labels or {})["type"] == "real"
    kwok_nodes = [n for n in client.list(Node) if n.metadata and (n.metadata.labels or {}).get("type") == "kwok"]
    assert kwok_nodes, "the session's KWOK nodes are in the same cluster"


def test_a_pinned_pod_runs_a_real_container(real_node: RealNode, client: Client, namespace: str) -> None:
    pause = images.pause_image().reference
    resources = {"cpu": "100m", "memory": "16Mi"}
    client.create(
        pinned_pod("pause", namespace, real_node, pause, resources={"requests": resources, "limits": resources})
    )
    running = wait_for("the pause pod to run", phase_of(client, "pause", namespace, "Running", "Failed"))
    assert running.status.phase == "Running", running.status
    container_id = running.status.containerStatuses[0].containerID
    assert container_id.startswith("containerd://")
    tasks = [images.CTR, "-a", str(real_node.containerd_socket), "-n", images.CRI_NAMESPACE, "tasks", "ls"]
    listed = subprocess.run(tasks, capture_output=True, text=True, check=True).stdout
    assert container_id.removeprefix("containerd://") in listed, "containerd runs the pod's container"


def test_an_alias_follows_the_image_it_was_last_given(real_node: RealNode) -> None:
    ctr = [images.CTR, "-a", str(real_node.containerd_socket), "-n", images.CRI_NAMESPACE]

    def digest(reference: str) -> str:
        listed = subprocess.run([*ctr, "images", "ls"], capture_output=True, text=True, check=True).stdout
        rows = [line.split() for line in listed.splitlines()[1:]]
        return next(row[2] for row in rows if row[0] == reference)

    alias = f"{images.REGISTRY}/alias-test:1"
    for image in (images.pause_image(), images.busybox_image()):
        images.alias_image(image, alias, real_node.containerd_socket)
        assert digest(alias) == digest(image.reference), f"{alias} stands for {image.reference}"


def test_the_kubelet_refuses_a_pod_larger_than_the_node(real_node: RealNode, client: Client, namespace: str) -> None:
    pause = images.pause_image().reference
    client.create(pinned_pod("too-big", namespace, real_node, pause, resources={"requests": {"cpu": "2"}}))
    refused = wait_for("the kubelet's admission", phase_of(client, "too-big", namespace, "Failed", "Running"))
    assert (refused.status.phase, refused.status.reason) == ("Failed", "OutOfcpu")


def test_kwok_refuses_what_the_real_kubelet_refuses(
    real_node: RealNode, client: Client, namespace: str, add_nodes: AddNodes, kubelet_admission: KubeletAdmission
) -> None:
    """KWOK (its admission patch) refuses, in the kubelet's words (the pod's status and the Event
    ``kubelet_admission`` reads), the pod the real kubelet refuses: the same pod, too big for a node as big as the
    real one."""
    kubelet_admission.expect_refusals(namespace)
    (kwok_node,) = add_nodes(1, cpu="1", memory="2Gi")
    resources = {"cpu": "1500m", "memory": "64Mi"}
    client.create(
        pinned_pod("too-big", namespace, real_node, images.pause_image().reference, resources={"requests": resources})
    )
    client.create(pod("too-big-kwok", namespace, cpu=resources["cpu"], memory=resources["memory"], node_name=kwok_node))

    refused = wait_for("the kubelet's admission", phase_of(client, "too-big", namespace, "Failed", "Running"))
    (judged,) = wait_for("KWOK's pod to be judged", lambda: kubelet_admission.refused_in(namespace))

    assert (refused.status.phase, refused.status.reason) == ("Failed", "OutOfcpu")
    assert (judged.pod, judged.reason) == ("too-big-kwok", refused.status.reason)
    used = re.compile(r"used: \d+")  # the real node runs other tests' pods too
    assert used.sub("used: …", judged.message) == used.sub("used: …", refused.status.message)
    by_kwok = wait_for("KWOK's admission", phase_of(client, "too-big-kwok", namespace, "Failed", "Running"))
    assert (by_kwok.status.phase, by_kwok.status.reason) == ("Failed", refused.status.reason)
    assert used.sub("used: …", str(by_kwok.status.message)) == used.sub("used: …", refused.status.message)


def test_the_kubelet_deletes_only_the_pod_it_ran(real_node: RealNode, client: Client, namespace: str) -> None:
    """A pod deleted and made again under the same name while the kubelet was behind runs, the old one's
    deletion leaving it alone (test_control_plane: the same with KWOK)."""
    manifest = small_pause_pod("again", namespace, real_node)

    uid, current = made_again_while_behind(client, manifest, manifest, real_node.kubelet_paused, seen_running=True)

    assert current is not None, "the kubelet deleted the pod made again"
    assert (current.metadata.uid, current.metadata.deletionTimestamp) == (uid, None)
    assert current.status.phase == "Running"


def test_the_kubelet_gives_a_pod_made_again_none_of_the_old_ones_status(
    real_node: RealNode, client: Client, namespace: str
) -> None:
    """A pod bound to the real node, deleted and made again unbound while the kubelet was behind, stays Pending
    (test_control_plane: the same with KWOK)."""
    first = small_pause_pod("again", namespace, real_node)
    unbound = copy.deepcopy(first)
    unbound.spec.nodeName = None
    unbound.spec.nodeSelector = {"esi.test/nowhere": "x"}

    uid, current = made_again_while_behind(client, first, unbound, real_node.kubelet_paused, seen_running=False)

    assert current is not None
    assert current.metadata.uid == uid
    assert (current.status.phase, current.status.hostIP, current.status.podIP) == ("Pending", None, None)


def test_the_kubelet_after_a_lost_watch_frees_the_room_of_a_pod_gone_and_judges_the_new_pods_oldest_first(
    tmp_path: Path, unique: str
) -> None:
    """test_control_plane's test_kwok_after_a_lost_watch_…, with a real kubelet: the API server crashes and comes
    back without the pods' history from where the kubelet was, a pod of the kubelet's is deleted and two pods each
    needing its room are made meanwhile; the older runs, the newer is refused. A cluster of its own: its API
    server crashes."""
    cluster = LocalCluster(f"relist-real-{unique}", workdir=tmp_path / "kwok")
    try:
        cluster.create()
        node = RealNode(cluster, RealNodeSpec(f"relist-{unique}", cpu="1", memory="1Gi"))
        node.start()
        pause = images.pause_image().reference
        resources = {"requests": {"cpu": "600m", "memory": "64Mi"}}

        lost = while_the_watch_was_lost(
            cluster, lambda name: pinned_pod(name, "default", node, pause, resources=resources), node.kubelet_paused
        )

        assert (lost.older, lost.newer) == (("Running", None), ("Failed", "OutOfcpu"))
    finally:
        cluster.delete()


def test_a_pod_on_a_real_node_reaches_the_api_server(
    real_node: RealNode, cluster: LocalCluster, client: Client, namespace: str
) -> None:
    url = pod_api_server_url(cluster)
    # From the host: the address pods use is one the serving certificate names, under the cluster CA.
    host, port = url.removeprefix("https://").rsplit(":", 1)
    context = ssl.create_default_context(cafile=str(cluster.directory / "pki" / "ca.crt"))
    with socket.create_connection((host, int(port)), timeout=10) as raw, context.wrap_socket(raw, server_hostname=host):
        pass
    # From the pod network: the service account's token gets the API server's answer.
    bearer = "Authorization: Bearer $(cat /var/run/secrets/kubernetes.io/serviceaccount/token)"
    command = f'wget -q -O - --no-check-certificate --header "{bearer}" {url}/version'
    client.create(pinned_pod("reach", namespace, real_node, images.busybox_image().reference, args=[command]))
    done = wait_for("the pod's request", phase_of(client, "reach", namespace, "Succeeded", "Failed"))
    logs = "".join(p.read_text() for p in real_node.pod_logs.glob(f"{namespace}_reach_*/main/*.log"))
    assert done.status.phase == "Succeeded", logs
    assert '"gitVersion": "v' in logs


def test_the_flink_image_runs_flinks_word_count_on_a_real_node(
    real_node: RealNode, client: Client, namespace: str
) -> None:
    image = flink_image()
    images.import_image(image, real_node.containerd_socket)
    jar = f"{FLINK_HOME}/{word_count_jar()}"
    # In the pod itself: Flink's own client runs the job on a local mini cluster, through the image's entry point.
    command = f"flink run --target local -c {WORD_COUNT_CLASS} {jar} --execution-mode BATCH"
    manifest = pinned_pod("wordcount", namespace, real_node, image.reference, args=["bash", "-c", command])
    manifest.spec.securityContext = PodSecurityContext(runAsUser=FLINK_UID)  # as Flink's own image runs
    client.create(manifest)

    done = wait_for("WordCount to end", phase_of(client, "wordcount", namespace, "Succeeded", "Failed"), timeout=300)
    logs = "".join(p.read_text() for p in real_node.pod_logs.glob(f"{namespace}_wordcount_*/main/*.log"))
    assert done.status.phase == "Succeeded", logs[-3000:]
    assert "Job has been submitted with JobID" in logs, logs[-3000:]
    counts = dict(re.findall(r"\((\w+),(\d+)\)", logs))
    # Hamlet's "To be, or not to be,--that is the question", WordCount's own input.
    assert int(counts["be"]) >= 2, logs[-3000:]
    assert "question" in counts, logs[-3000:]


def as_its_user_read_only(pod: Pod) -> Pod:
    """``pod`` as the cluster stack's pods run: the image's own (non-root) user, a read-only root filesystem, no
    capabilities, no privilege escalation."""
    assert pod.spec is not None
    pod.spec.securityContext = PodSecurityContext(runAsNonRoot=True)
    pod.spec.containers[0].securityContext = SecurityContext(
        readOnlyRootFilesystem=True, allowPrivilegeEscalation=False, capabilities=Capabilities(drop=["ALL"])
    )
    return pod


def test_esis_image_runs_esis_processes_on_a_real_node_as_its_user_on_a_read_only_root(
    real_node: RealNode, client: Client, namespace: str
) -> None:
    image = esi_image()
    images.import_image(image, real_node.containerd_socket)
    # What the cluster stack's pods run, as they run it: no shell, the image's user, nothing written to its root.
    helps = {p.module: p.command("python", ["--help"]) for p in (processes.API, processes.OPERATORS)}
    script = (
        "import subprocess\n"
        f"for process, command in {helps!r}.items():\n"
        "    done = subprocess.run(command, capture_output=True, text=True)\n"
        "    print(process, done.returncode, done.stdout.splitlines()[:1], done.stderr[-500:])\n"
        "import esi, kube, lightkube, kopf, fastapi, uvicorn\n"
        "print('imported', esi.__file__, kube.__file__)\n"
    )
    client.create(
        as_its_user_read_only(
            pinned_pod("esi", namespace, real_node, image.reference, command=["python", "-c", script])
        )
    )

    done = wait_for("esi's processes to answer", phase_of(client, "esi", namespace, "Succeeded", "Failed"), 120)
    logs = "".join(p.read_text() for p in real_node.pod_logs.glob(f"{namespace}_esi_*/main/*.log"))
    assert done.status.phase == "Succeeded", logs
    assert "api 0 ['usage: python -m api" in logs, logs
    assert "operators 0 ['usage: python -m operators" in logs, logs
    assert "/usr/local/lib/python3.11/dist-packages/esi/__init__.py /app/kube/__init__.py" in logs, logs
    assert image.archive.stat().st_size < 200 * 2**20, "Debian's Python, esi and its pinned dependencies only"


def test_the_spark_operators_image_runs_its_controller_and_spark_submit_on_a_real_node(
    real_node: RealNode, client: Client, namespace: str
) -> None:
    if (reason := spark_operator_unavailable()) is not None:
        pytest.skip(reason)
    image = operator_image()
    images.import_image(image, real_node.containerd_socket)
    # The image's own entry point (tini, the controller) with the arguments a pod gives it, as the chart's do.
    client.create(pinned_pod("controller", namespace, real_node, image.reference, args=["version", "--short"]))
    # What the controller runs to submit an application: Spark's own spark-submit, on the image's Java.
    submit = pinned_pod("submit", namespace, real_node, image.reference, command=["spark-submit", "--version"])
    client.create(submit)

    for name, expected in (("controller", "Spark Operator Version: v2.4.0"), ("submit", f"version {spark_version()}")):
        done = wait_for(f"{name} to end", phase_of(client, name, namespace, "Succeeded", "Failed"), 120)
        logs = "".join(p.read_text() for p in real_node.pod_logs.glob(f"{namespace}_{name}_*/main/*.log"))
        assert done.status.phase == "Succeeded", logs[-2000:]
        assert expected in logs, logs[-2000:]
    chart = yaml.safe_load((chart_dir() / "Chart.yaml").read_text())
    assert (chart["name"], chart["version"], chart["appVersion"]) == ("spark-operator", "2.4.0", "2.4.0")
    assert (chart_dir() / "templates").is_dir(), "the release's own chart, from the module's sources"


def test_the_schedulers_image_runs_kube_scheduler_on_a_real_node_as_nonroot_on_a_read_only_root(
    real_node: RealNode, client: Client, namespace: str
) -> None:
    image = scheduler_image()
    images.import_image(image, real_node.containerd_socket)
    client.create(
        as_its_user_read_only(pinned_pod("scheduler", namespace, real_node, image.reference, args=["--version"]))
    )

    done = wait_for("kube-scheduler --version", phase_of(client, "scheduler", namespace, "Succeeded", "Failed"), 60)
    logs = "".join(p.read_text() for p in real_node.pod_logs.glob(f"{namespace}_scheduler_*/main/*.log"))
    assert done.status.phase == "Succeeded", logs
    assert f"Kubernetes v{load_pins()['kubernetes']}" in logs, logs


FLINK_CLUSTER = "wc"


def test_real_flink_runs_word_count_in_native_kubernetes_application_mode_on_a_real_node(
    cluster: LocalCluster, client: Client, namespace: str, tmp_path: Path
) -> None:
    """By hand, what esi's stand-in for the Flink operator is to do: Flink's own client starts a JobManager in
    native Kubernetes application mode, whose resource manager creates the TaskManager, and the job runs.

    What a cluster without DNS and kube-proxy needs: the API server's pod-reachable address in the pods'
    ``KUBERNETES_SERVICE_HOST``/``PORT``; Kubernetes high availability, whose leader ConfigMaps carry the
    JobManager's pod IP (there is no DNS for its Service name); and no reverse lookup of a TaskManager's IP,
    which blocks the JobManager for longer than the TaskManager keeps its offered slot."""
    node = RealNode(cluster, RealNodeSpec(f"real-{uuid.uuid4().hex[:6]}", cpu="2", memory="3Gi", taints=(REAL_TAINT,)))
    node.start()
    try:
        image = flink_image()
        images.import_image(image, node.containerd_socket)
        cluster.kubectl("apply", "-f", "-", input_text=json.dumps(example_flink_rbac(namespace)))
        host, port = pod_api_server_url(cluster).removeprefix("https://").rsplit(":", 1)
        env = [{"name": "KUBERNETES_SERVICE_HOST", "value": host}, {"name": "KUBERNETES_SERVICE_PORT", "value": port}]
        template = {
            "apiVersion": "v1",
            "kind": "Pod",
            "spec": {
                "nodeName": node.name,
                "tolerations": [{"key": "esi.test/real-node", "operator": "Exists"}],
                "containers": [{"name": "flink-main-container", "env": env}],
            },
        }
        (tmp_path / "pod-template.yaml").write_text(json.dumps(template))
        home = flink_home()
        shutil.copytree(home / "conf", tmp_path / "conf")
        settings = {
            "kubernetes.cluster-id": FLINK_CLUSTER,
            "kubernetes.namespace": namespace,
            "kubernetes.config.file": str(cluster.kubeconfig),
            "kubernetes.container.image.ref": image.reference,
            "kubernetes.container.image.pull-policy": "Never",
            "kubernetes.service-account": "flink",
            "kubernetes.rest-service.exposed.type": "ClusterIP",
            "kubernetes.pod-template-file.default": str(tmp_path / "pod-template.yaml"),
            "kubernetes.jobmanager.cpu.amount": "0.5",
            "kubernetes.taskmanager.cpu.amount": "0.5",
            "jobmanager.memory.process.size": "1024m",
            "taskmanager.memory.process.size": "1024m",
            "high-availability.type": "kubernetes",
            "high-availability.storageDir": "file:///tmp/flink-ha",
            "jobmanager.retrieve-taskmanager-hostname": "false",
            "execution.shutdown-on-application-finish": "false",
        }
        submit = [str(home / "bin" / "flink"), "run", "--target", "kubernetes-application"]
        submit += [f"-D{key}={value}" for key, value in settings.items()]
        submit += ["-c", WORD_COUNT_CLASS, f"local://{FLINK_HOME}/{word_count_jar()}", "--execution-mode", "BATCH"]
        client_env = os.environ | {
            "JAVA_HOME": str(host_java_home()),
            "FLINK_CONF_DIR": str(tmp_path / "conf"),
            "FLINK_LOG_DIR": str(tmp_path),
        }
        subprocess.run(submit, env=client_env, check=True, capture_output=True, text=True, timeout=120)

        def log_of(pod_prefix: str) -> str:
            return "".join(p.read_text() for p in node.pod_logs.glob(f"{namespace}_{pod_prefix}*/*/*.log"))

        def ended() -> str | None:
            log = log_of(f"{FLINK_CLUSTER}-")
            return (
                log
                if re.search(r"Job WordCount \(\w+\) switched from state RUNNING to (FINISHED|FAILED)", log)
                else None
            )

        log = wait_for("WordCount to end", ended, timeout=240)
        assert "switched from state RUNNING to FINISHED" in log, log[-3000:]
        task_manager = client.get(Pod, f"{FLINK_CLUSTER}-taskmanager-1-1", namespace=namespace)
        assert task_manager.spec is not None
        assert task_manager.spec.nodeName == node.name
        assert [(o.kind, o.name) for o in task_manager.metadata.ownerReferences or []] == [  # type: ignore[union-attr]
            ("Deployment", FLINK_CLUSTER)
        ], "Flink's resource manager made it, owned by the JobManager's Deployment"
        counts = dict(re.findall(r"\((\w+),(\d+)\)", log_of(f"{FLINK_CLUSTER}-taskmanager-")))
        assert int(counts["be"]) >= 2, counts
    finally:
        node.stop()
        node.delete()


def _node_processes(node: RealNode) -> tuple[set[int], set[Path]]:
    """The node's processes (in its cgroups, or serving its containerd) and its shims' sockets."""
    pids = {int(p.read_text()) for p in (node.cluster.directory / "processes").glob(f"{node.name}-*.pid")}
    for procs in (CGROUPS / "pids" / node.cgroup_root.lstrip("/")).rglob("cgroup.procs"):
        pids.update(int(pid) for pid in procs.read_text().split())
    sockets = set()
    for proc in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            argv = (proc / "cmdline").read_bytes().decode().split("\0")
            if proc.name.isdigit() and str(node.containerd_socket) in argv:
                pids.add(int(proc.name))
                # containerd 1.6 names a shim's socket after its address, namespace and container id.
                key = f"{node.containerd_socket}/k8s.io/{argv[argv.index('-id') + 1]}"
                sockets.add(Path("/run/containerd/s") / hashlib.sha256(key.encode()).hexdigest())
    return pids, sockets


def _leftovers(node: RealNode, pids: set[int], sockets: set[Path]) -> dict[str, list[str]]:
    mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    cgroup = node.cgroup_root.lstrip("/")
    links = Path("/sys/class/net")
    return {
        "processes": [str(pid) for pid in sorted(pids) if process_alive(pid)],
        "mounts": [m for m in mounts if m.startswith((str(node.directory), str(node.short_dir)))],
        "cgroups": [str(h / cgroup) for h in CGROUPS.iterdir() if (h / cgroup).exists()],
        "links": [
            link.name for link in links.iterdir() if node.bridge in (link.name, (link / "master").resolve().name)
        ],
        "pid files": [p.name for p in (node.cluster.directory / "processes").glob(f"{node.name}-*.pid")],
        "cni results": [p.name for p in Path("/var/lib/cni/results").glob(f"esi-{node.id}-*")],
        "files": [str(p) for p in (node.directory, node.short_dir, *sockets) if p.exists()],
    }


def test_delete_leaves_nothing_behind(cluster: LocalCluster, client: Client, namespace: str) -> None:
    node = RealNode(
        cluster, RealNodeSpec(f"real-{uuid.uuid4().hex[:6]}", cpu="500m", memory="256Mi", taints=(REAL_TAINT,))
    )
    node.start()
    client.create(pinned_pod("pause", namespace, node, images.pause_image().reference))
    wait_for("the pause pod to run", phase_of(client, "pause", namespace, "Running"))
    pids, sockets = _node_processes(node)
    assert len(pids) >= 4, "kubelet, containerd, a shim, the sandbox's and the container's pause"
    assert sockets, "the shim's socket"
    assert all(socket.exists() for socket in sockets)
    # The hard way: the kubelet is gone (nothing drains the node) while its container still runs.
    node.stop()
    node.delete()
    left = _leftovers(node, pids, sockets)
    assert left == {key: [] for key in left}
    assert get_or_none(client, Node, node.name) is None


def test_an_advertised_extended_resource_is_counted_by_the_kubelet_and_survives_status_updates_and_restarts(
    cluster: LocalCluster, client: Client, namespace: str
) -> None:
    """The slot resource of one scheduler for both (docs/design.md#one-scheduler-for-both) on a real kubelet: the
    node's status advertises two slots (as the Testbed reconciler would), the kubelet admits two pods asking for
    one each and refuses a third, and the advertised slots stay through the kubelet's own status updates and a
    restart of the kubelet and containerd."""
    node = RealNode(
        cluster, RealNodeSpec(f"real-{uuid.uuid4().hex[:6]}", cpu="500m", memory="256Mi", taints=(REAL_TAINT,))
    )
    node.start()
    try:
        client.patch(NodeStatus, node.name, advertised_slots(2), patch_type=PatchType.MERGE)

        def slots() -> str | None:
            status = client.get(Node, node.name).status
            return (status.allocatable or {}).get(SLOT_RESOURCE) if status is not None else None

        assert wait_for("the slots advertised", slots) == "2"
        pause = images.pause_image().reference
        one_slot = requesting_a_slot({"requests": {"cpu": "10m", "memory": "16Mi"}})
        for name in ("first", "second", "third"):
            client.create(pinned_pod(name, namespace, node, pause, resources=one_slot))
            wait_for(f"{name} to be admitted or refused", phase_of(client, name, namespace, "Running", "Failed"))
        phases = {n: client.get(Pod, n, namespace=namespace).status for n in ("first", "second", "third")}
        assert [(s.phase, s.reason) for s in phases.values() if s is not None] == [
            ("Running", None),
            ("Running", None),
            ("Failed", f"OutOf{SLOT_RESOURCE}"),
        ]

        # The kubelet writes its node's status when it changes: a new image is one such change.
        images.import_image(images.busybox_image(), node.containerd_socket)
        busybox = images.busybox_image().reference

        def status_with_busybox() -> bool:
            status = client.get(Node, node.name).status
            return status is not None and any(busybox in (i.names or []) for i in status.images or [])

        wait_for("the kubelet to write the node's status with the new image", status_with_busybox, timeout=60)
        assert slots() == "2", "a status update by the kubelet keeps the advertised slots"

        restarted = datetime.now(UTC).replace(microsecond=0)
        node.stop()
        node.start()

        def status_since_restart() -> bool:
            status = client.get(Node, node.name).status
            beats = [c.lastHeartbeatTime for c in (status.conditions or []) if c.type == "Ready"] if status else []
            return any(beat is not None and beat >= restarted for beat in beats)

        wait_for("the restarted kubelet to write the node's status", status_since_restart, timeout=60)
        assert slots() == "2", "the kubelet's restart keeps the advertised slots"
    finally:
        node.delete()
