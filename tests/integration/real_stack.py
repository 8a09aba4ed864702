"""What tests on real nodes share: a cluster of their own with esi and one real node (``esi_with_a_real_node``),
every pod's life as watched (created, first running, node, reasons), objects' status, and the examples'
account for Flink's JobManagers."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import yaml
from lightkube import Client, KubeConfig
from lightkube.resources.core_v1 import Pod

from esi.objects.names import ROLE_GHOST, ROLE_LABEL, SCHEDULER_NAME, SLOT_LABEL
from infra import images, toolchain
from infra.local_cluster import LocalCluster
from infra.real_node import RealNode, RealNodeSpec
from infra.second_scheduler import SecondScheduler, SecondSchedulerSettings
from tests.integration.conftest import ensure_operators, esi_api, install_esi_crds, install_priority_classes
from tests.integration.kube import Watcher, create_in, namespace_manifest


@dataclass(frozen=True)
class RealStack:
    """The cluster, its real node, a client, and the image the node holds."""

    cluster: LocalCluster
    node: RealNode
    client: Client
    image: str


@contextmanager
def esi_with_a_real_node(
    cluster: LocalCluster,
    namespace: str,
    node: RealNodeSpec,
    image: Callable[[], images.BuiltImage],
    before_esi: Callable[[LocalCluster], None],
) -> Iterator[RealStack]:
    """Create ``cluster`` with esi's CRDs and priority classes and ``namespace``, call ``before_esi`` (the
    application operator, its CRDs and accounts: kopf looks for the kinds it handles when it starts), start
    esi's reconcilers, API and second scheduler, then the real node with ``image`` imported. Deleted afterwards
    unless ESI_KEEP_CLUSTER is set."""
    client: Client | None = None
    try:
        cluster.create()
        install_esi_crds(cluster)
        install_priority_classes(cluster)
        create_in(cluster, namespace, namespace_manifest(namespace).to_dict())
        before_esi(cluster)
        ensure_operators(cluster)
        api = esi_api(cluster)
        SecondScheduler(cluster, SecondSchedulerSettings(SCHEDULER_NAME, api.extender_url)).start()
        real_node = RealNode(cluster, node)
        real_node.start()
        built = image()
        images.import_image(built, real_node.containerd_socket)
        client = Client(config=KubeConfig.from_file(cluster.kubeconfig), field_manager="esi-tests")
        yield RealStack(cluster, real_node, client, built.reference)
    finally:
        if client is not None:
            client.close()
        if os.environ.get("ESI_KEEP_CLUSTER"):
            print(f"kept the cluster {cluster.name} in {cluster.directory}")
        else:
            cluster.delete()


# What the kubelet says of a pod it refuses to run (its admission), as the pod's status.reason.
ADMISSION_REFUSALS = frozenset({"OutOfcpu", "OutOfmemory", "OutOfpods", "UnexpectedAdmissionError"})


@dataclass
class PodLife:
    """What was seen of one pod: when it appeared and first ran (monotonic), where, and every reason it had."""

    labels: dict[str, str]
    created: float
    running: float | None = None
    node: str | None = None
    reasons: set[str] = field(default_factory=set)


class PodHistory(Watcher[Pod]):
    """Every pod of the namespace as it was seen over time, by name."""

    def __init__(self, cluster: LocalCluster, namespace: str) -> None:
        self.pods: dict[str, PodLife] = {}
        super().__init__(cluster, namespace, Pod)

    def note(self, pod: Pod) -> None:
        if pod.metadata is None or pod.spec is None or pod.status is None:
            return
        now = time.monotonic()
        life = self.pods.setdefault(str(pod.metadata.name), PodLife(dict(pod.metadata.labels or {}), now))
        life.labels.update(pod.metadata.labels or {})
        life.node = pod.spec.nodeName or life.node
        if pod.status.reason:
            life.reasons.add(pod.status.reason)
        for container in pod.status.containerStatuses or []:
            for state in (container.state, container.lastState):
                if state is not None and state.terminated is not None and state.terminated.reason:
                    life.reasons.add(state.terminated.reason)
        if pod.status.phase == "Running" and life.running is None:
            life.running = now

    def with_role(self, role: str) -> dict[str, PodLife]:
        return {name: life for name, life in self.pods.items() if life.labels.get(ROLE_LABEL) == role}

    def refused(self) -> dict[str, set[str]]:
        """Pods the kubelet refused to admit, with its reasons."""
        return {
            name: life.reasons & ADMISSION_REFUSALS
            for name, life in self.pods.items()
            if life.reasons & ADMISSION_REFUSALS
        }


def status_in(cluster: LocalCluster, namespace: str, kind: str, name: str) -> dict[str, Any]:
    out = cluster.kubectl("get", "-n", namespace, kind, name, "-o", "json", "--ignore-not-found")
    found: dict[str, Any] = (json.loads(out).get("status") or {}) if out.strip() else {}
    return found


def example_flink_rbac(namespace: str) -> dict[str, Any]:
    """The ServiceAccount ``flink`` with its Role and binding, as the examples give it (examples/manifests), in
    ``namespace``: the real Flink runs check that it is what Flink's JobManager needs in native mode."""
    examples = toolchain.REPO_ROOT / "examples" / "manifests" / "serviceaccount.yaml"
    flink = [
        d for d in yaml.safe_load_all(examples.read_text()) if d["metadata"]["name"] in ("flink", "flink-jobmanager")
    ]
    items = [{**d, "metadata": {**d["metadata"], "namespace": namespace}} for d in flink]
    return {"apiVersion": "v1", "kind": "List", "items": items}


def real_ghosts(stack: RealStack, namespace: str, testbed: str = "tb") -> dict[int, str] | None:
    """The Testbed's ghosts by slot (their uids), once it is Ready with every slot free and each ghost is a
    pause container running on the real node; else None."""
    table = status_in(stack.cluster, namespace, "testbed", testbed)
    counts = table.get("counts") or {}
    free = counts.get("free")
    if table.get("state") != "Ready" or not free or free != counts.get("slots"):
        return None
    running: dict[int, str] = {}
    for ghost in stack.client.list(Pod, namespace=namespace, labels={ROLE_LABEL: ROLE_GHOST}):
        assert ghost.metadata is not None
        assert ghost.spec is not None
        assert ghost.status is not None
        containers = ghost.status.containerStatuses or []
        state = containers[0].state if containers else None
        if ghost.metadata.deletionTimestamp or state is None or state.running is None:
            continue
        assert ghost.spec.nodeName == stack.node.name
        assert (containers[0].containerID or "").startswith("containerd://"), containers[0]
        running[int((ghost.metadata.labels or {})[SLOT_LABEL])] = str(ghost.metadata.uid)
    return running if len(running) == free else None
