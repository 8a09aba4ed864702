"""Flink WordCount for real, end to end: esi's stand-in for the Flink operator submits with Flink's own client,
the real JobManager's resource manager creates the TaskManagers, and esi's second scheduler and extender put
each into its reserved slot on a real node, in place of a real ghost.

A cluster of its own: esi's CRDs and priority classes, the simulator's FlinkDeployment CRD (the operator's
own is not served here; the stand-in writes the operator's status fields), esi's reconcilers, API (with the
extender) and second scheduler, the Flink stand-in for one namespace, and one real node (2 cpu, 3.5Gi: two
500m / 1Gi slots and the JobManager) labelled for a Testbed, with the Flink image imported.

The BatchJob is what a user of the local cluster writes: the image, the JobManager's account (the examples'
``flink`` with its Role) and size, and the job. Everything else — one TaskManager per slot, sized to it,
placed into it, the TaskManager count pinned — is esi's.

The tests share the module's cluster: they are one xdist group.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Pod

from esi.objects.names import ROLE_EXECUTOR, ROLE_LABEL, SLOT_LABEL
from infra.flink_image import FLINK_HOME, WORD_COUNT_CLASS, flink_image, word_count_jar
from infra.flink_standin import start_standin
from infra.flink_standin import unavailable_reason as standin_unavailable
from infra.local_cluster import LocalCluster
from infra.real_node import RealNode, RealNodeSpec
from infra.real_node import unavailable_reason as real_nodes_unavailable
from sim.crds import application_crds
from tests.integration.kube import create_in, get_or_none, wait_for
from tests.integration.real_stack import (
    PodHistory,
    RealStack,
    esi_with_a_real_node,
    example_flink_rbac,
    real_ghosts,
    status_in,
)
from tests.manifests import batchjob_manifest, scheduling_manifest, testbed_manifest

if (reason := real_nodes_unavailable() or standin_unavailable()) is not None:
    pytest.skip(f"Flink on a real node: {reason}", allow_module_level=True)

pytestmark = pytest.mark.xdist_group("real-flink")

NAMESPACE = "flink-jobs"
NODE = "real-flink"
NODE_LABEL = "esi.test/real-flink-testbed"
SLOT = {"cpu": "500m", "memory": "1Gi"}


RealFlink = RealStack


def _stand_in_for(namespace: str) -> Callable[[LocalCluster], None]:
    """The FlinkDeployment CRD (and the simulator's SparkApplication one), the examples' account for
    JobManagers, and the stand-in for ``namespace``."""

    def start(cluster: LocalCluster) -> None:
        crds = {"apiVersion": "v1", "kind": "List", "items": application_crds()}
        cluster.kubectl("apply", "-f", "-", input_text=json.dumps(crds))
        cluster.wait_for_crds([c["metadata"]["name"] for c in application_crds()])
        cluster.kubectl("apply", "-f", "-", input_text=json.dumps(example_flink_rbac(namespace)))
        start_standin(cluster, [namespace])

    return start


@pytest.fixture(scope="module")
def real_flink(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealFlink]:
    cluster = LocalCluster("real-flink", workdir=tmp_path_factory.mktemp("real-flink") / "kwok")
    node = RealNodeSpec(NODE, cpu="2", memory="3584Mi", labels={NODE_LABEL: "0"})
    with esi_with_a_real_node(cluster, NAMESPACE, node, flink_image, _stand_in_for(NAMESPACE)) as stack:
        yield stack


@pytest.fixture
def history(real_flink: RealFlink) -> Iterator[PodHistory]:
    watcher = PodHistory(real_flink.cluster, NAMESPACE)
    yield watcher
    watcher.stop()


def status(flink: RealFlink, kind: str, name: str) -> dict[str, Any]:
    return status_in(flink.cluster, NAMESPACE, kind, name)


def word_count_job(flink: RealFlink, name: str, *args: str) -> dict[str, Any]:
    """A Flink BatchJob as a user of the local cluster writes it: Flink's WordCount example in the Flink image."""
    spec = {
        "image": flink.image,
        "imagePullPolicy": "Never",  # imported into the node: no registry is reachable
        "serviceAccount": "flink",
        "jobManager": {"resource": {"cpu": 0.5, "memory": "1024m"}},
        "job": {
            "jarURI": f"local://{FLINK_HOME}/{word_count_jar()}",
            "entryClass": WORD_COUNT_CLASS,
            "args": list(args),
            "upgradeMode": "stateless",
        },
    }
    manifest: dict[str, Any] = batchjob_manifest(sparkSpec=None, flinkSpec=spec) | {"metadata": {"name": name}}
    return manifest


def scheduling(name: str, jobs: list[str]) -> dict[str, Any]:
    manifest = scheduling_manifest(testbed={"name": "tb"}, queueBased=[{"name": j} for j in jobs])
    body: dict[str, Any] = manifest | {"metadata": {"name": name}}
    return body


def free_testbed(flink: RealFlink) -> dict[int, str]:
    """The Testbed ``tb`` (two slots on the real node), created if need be, once no Scheduling holds it and both
    slots hold running ghosts."""
    if not status(flink, "testbed", "tb"):
        manifest = testbed_manifest(nodeLabel=NODE_LABEL, slotsPerNode=2, resourcesPerSlot=SLOT)
        create_in(flink.cluster, NAMESPACE, manifest | {"metadata": {"name": "tb"}})
    wait_for("no Scheduling holding the Testbed", lambda: not status(flink, "testbed", "tb").get("scheduling"), 120)
    return wait_for("the Testbed Ready with two running ghosts", lambda: real_ghosts(flink, NAMESPACE), timeout=120)


class TaskManagerLogs:
    """What the TaskManagers of an application printed, kept while they run (their logs go with their pods)."""

    def __init__(self, node: RealNode, application: str) -> None:
        self.node, self.application = node, application
        self.logs: dict[str, str] = {}

    def read(self) -> None:
        for path in self.node.pod_logs.glob(f"{NAMESPACE}_{self.application}-taskmanager-*/*/*.log"):
            try:
                self.logs[str(path.relative_to(self.node.pod_logs))] = path.read_text(errors="replace")
            except OSError:
                continue  # removed with its pod meanwhile

    def counts(self) -> dict[str, int]:
        """WordCount's printed (word,count) pairs: the highest count of each word."""
        counts: dict[str, int] = {}
        for text in self.logs.values():
            for word, count in re.findall(r"\((\w+),(\d+)\)", text):
                counts[word] = max(counts.get(word, 0), int(count))
        return counts


def test_word_count_runs_in_its_slots_on_a_real_node(
    real_flink: RealFlink, history: PodHistory, record_property: Callable[[str, object], None]
) -> None:
    flink, cluster = real_flink, real_flink.cluster
    ghosts = free_testbed(flink)

    create_in(cluster, NAMESPACE, word_count_job(flink, "wordcount", "--execution-mode", "BATCH"))
    start = time.monotonic()
    create_in(cluster, NAMESPACE, scheduling("wc", ["wordcount", "wordcount"]))
    logs = TaskManagerLogs(flink.node, "wordcount")

    def completed() -> bool:
        logs.read()
        return status(flink, "scheduling", "wc").get("state") == "Completed"

    wait_for("the Scheduling to complete", completed, timeout=360)

    job = status(flink, "batchjob", "wordcount")
    assert job["state"] == "Succeeded", job.get("message")
    (run,) = job["runs"]
    assert (run["outcome"], sorted(run["slots"]), run["nodes"]) == ("Succeeded", [0, 1], [NODE])

    task_managers = history.with_role(ROLE_EXECUTOR)
    assert sorted(task_managers) == ["wordcount-taskmanager-1-1", "wordcount-taskmanager-1-2"], (
        "one TaskManager per slot, made by Flink's resource manager, none replaced"
    )
    assert {life.node for life in task_managers.values()} == {NODE}
    assert sorted(int(life.labels[SLOT_LABEL]) for life in task_managers.values()) == [0, 1], "one in each slot"
    assert all(life.running for life in task_managers.values()), "each ran"
    assert history.refused() == {}, "the kubelet admitted every pod"
    assert not any("OOMKilled" in life.reasons for life in history.pods.values()), history.pods
    counts = logs.counts()
    assert counts.get("be", 0) >= 2, f"WordCount's output in the TaskManagers' logs: {counts}"

    # The run is recorded, and its application cluster is gone: the JobManager and TaskManagers are deleted,
    # the slots hold new ghosts, running again.
    wait_for(
        "the JobManager's Deployment to be deleted",
        lambda: get_or_none(flink.client, Deployment, "wordcount", NAMESPACE) is None,
        timeout=120,
    )
    returned = wait_for("real ghosts back in both slots", lambda: real_ghosts(flink, NAMESPACE), timeout=120)
    assert set(returned.values()).isdisjoint(ghosts.values()), "each ghost was evicted for a TaskManager"

    jobmanager = next(
        life
        for name, life in history.pods.items()
        if name.startswith("wordcount-") and life.labels.get("component") == "jobmanager"
    )
    created = min(life.created for life in task_managers.values())
    placed = max(life.running or 0 for life in task_managers.values())
    record_property(
        "figure",
        f"  Scheduling created -> both TaskManagers running in their slots: {placed - start:.1f} s\n"
        f"    of which stand-in + Flink's client until the JobManager pod exists: {jobmanager.created - start:.1f} s,\n"
        f"    JobManager pod created -> TaskManager pods created (JVM start, job submitted inside): "
        f"{created - jobmanager.created:.1f} s,\n"
        f"    TaskManager pods created -> running (second scheduler, extender, ghost eviction, kubelet): "
        f"{placed - created:.1f} s",
    )
    cluster.kubectl("delete", "scheduling", "wc", "-n", NAMESPACE)


def test_a_killed_taskmanager_of_a_streaming_job_is_replaced_into_its_slot(
    real_flink: RealFlink, history: PodHistory
) -> None:
    flink, cluster = real_flink, real_flink.cluster
    free_testbed(flink)
    # WordCount reading a directory and watching it for new files: a streaming job that runs until stopped.
    job = word_count_job(flink, "streaming", "--input", f"{FLINK_HOME}/conf", "--discovery-interval", "5s")
    # Without checkpoints a Flink job is not restarted when a TaskManager goes; this one is, as a user would set.
    job["spec"]["flinkSpec"]["flinkConfiguration"] = {
        "restart-strategy.type": "fixed-delay",
        "restart-strategy.fixed-delay.attempts": "5",
        "restart-strategy.fixed-delay.delay": "2 s",
    }
    create_in(cluster, NAMESPACE, job)
    create_in(cluster, NAMESPACE, scheduling("stream", ["streaming", "streaming"]))

    def running_in_slots() -> dict[str, int] | None:
        """The running TaskManagers by name, with their slots, once both slots hold one and the job runs."""
        if status(flink, "flinkdeployment", "streaming").get("jobStatus", {}).get("state") != "RUNNING":
            return None
        running = {}
        for pod in flink.client.list(Pod, namespace=NAMESPACE, labels={ROLE_LABEL: ROLE_EXECUTOR}):
            assert pod.metadata is not None
            assert pod.status is not None
            labels = pod.metadata.labels or {}
            live = pod.status.phase == "Running" and pod.metadata.deletionTimestamp is None
            if live and str(pod.metadata.name).startswith("streaming-") and SLOT_LABEL in labels:
                running[str(pod.metadata.name)] = int(labels[SLOT_LABEL])
        return running if sorted(running.values()) == [0, 1] else None

    before = wait_for("the streaming job running in both slots", running_in_slots, timeout=240)
    victim, slot = sorted(before.items())[0]
    cluster.kubectl("delete", "pod", victim, "-n", NAMESPACE, "--grace-period=0", "--force", "--wait=false")

    def replaced() -> dict[str, int] | None:
        now = running_in_slots()
        return now if now is not None and victim not in now else None

    after = wait_for("a replacement TaskManager running in the freed slot", replaced, timeout=240)
    (replacement,) = set(after) - set(before)
    assert after[replacement] == slot, f"{replacement} went to slot {after[replacement]}, not {victim}'s {slot}"
    assert replacement.startswith("streaming-taskmanager-"), "Flink's resource manager made it"
    assert history.pods[replacement].node == NODE
    assert history.refused() == {}, "the kubelet admitted every pod"
    assert status(flink, "batchjob", "streaming")["state"] == "Running"

    # Stopping the Scheduling ends the run: the application cluster goes and the slots get their ghosts back.
    cluster.kubectl("delete", "scheduling", "stream", "-n", NAMESPACE, "--wait=false")
    wait_for(
        "the JobManager's Deployment to be deleted",
        lambda: get_or_none(flink.client, Deployment, "streaming", NAMESPACE) is None,
        timeout=120,
    )
    wait_for("real ghosts back in both slots", lambda: real_ghosts(flink, NAMESPACE), timeout=120)
