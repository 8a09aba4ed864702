"""What tests on real nodes share: a cluster of their own with esi and one real node (``esi_with_a_real_node``),
every pod's life as watched (created, first running, node, reasons), objects' status, the examples' account
for Flink's JobManagers, and the simulator beside the real operator with what a run showed on each side
(``simulator_beside``, ``Side``, ``Run``, ``pod_shape``)."""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import yaml
from lightkube import Client, KubeConfig
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Pod

from esi.objects.names import ROLE_GHOST, ROLE_LABEL, SCHEDULER_NAME, SLOT_ANNOTATION, slot_of
from infra import images, toolchain
from infra.local_cluster import LocalCluster, NodeSpec
from infra.local_cluster.real_node import RealNode, RealNodeSpec
from infra.stacks import processes
from infra.stacks.second_scheduler import SecondScheduler, SecondSchedulerSettings
from sim.names import APP_UID_LABEL
from tests.integration.conftest import ensure_operators, esi_api, install_esi_crds, install_priority_classes
from tests.integration.kube import Watcher, create_in, ensure_process, namespace_manifest, wait_for
from tests.manifests import testbed_manifest


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
    """What was seen of one pod: when it appeared and first ran (monotonic), where, in which slot, and every
    reason it had."""

    labels: dict[str, str]
    created: float
    running: float | None = None
    node: str | None = None
    slot: int | None = None
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
        life.slot = slot_of(pod.metadata.annotations or {}) if life.slot is None else life.slot
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
        """Pods other than ghosts the kubelet refused to admit, with its reasons.

        Ghosts are left out: a ghost the Testbed makes on a view that lacks the executor just bound into its
        slot is refused by the kubelet (the executor came first), and the Testbed makes it again once the slot
        is free (once seen under the loaded suite). Executors, drivers and JobManagers are never to be
        refused."""
        return {
            name: life.reasons & ADMISSION_REFUSALS
            for name, life in self.pods.items()
            if life.reasons & ADMISSION_REFUSALS and life.labels.get(ROLE_LABEL) != ROLE_GHOST
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
        running[int((ghost.metadata.annotations or {})[SLOT_ANNOTATION])] = str(ghost.metadata.uid)
    return running if len(running) == free else None


# --- the simulator beside the real thing ------------------------------------------------------------------

# Labels only the simulator puts on its objects: how it finds an application's pods (a real operator asks
# Spark or Flink).
SIM_ONLY_LABELS = frozenset({APP_UID_LABEL})
HEX = re.compile(r"[0-9a-f]{8,}(?:-[0-9a-f]{4,})*")


def simulator_beside(cluster: LocalCluster, namespace: str, node: NodeSpec, runtime: float) -> None:
    """``python -m sim`` for ``namespace`` (created), its simulated runs lasting ``runtime`` seconds for a job the
    co-location table does not know, and the KWOK node ``node``."""
    create_in(cluster, namespace, namespace_manifest(namespace).to_dict())
    cluster.add_nodes([node])
    arguments = [f"--namespace={namespace}", f"--default-runtime={runtime:g}"]
    ensure_process(
        cluster,
        processes.SIM,
        lambda port: processes.sim_command(
            sys.executable, kubeconfig=cluster.kubeconfig, liveness=processes.SIM.live_url(port), more=arguments
        ),
        name=f"{processes.SIM.name}-{namespace}",
    )


@dataclass(frozen=True)
class Side:
    """One of the two runs compared: its namespace, the node its Testbed's slots are on and the node's label."""

    namespace: str
    node: str
    node_label: str

    def normalized(self, value: Any) -> Any:
        """``value`` with what differs between the two sides by construction (namespace, node, label, ids and
        uids) replaced by placeholders."""
        text = json.dumps(value, sort_keys=True)
        for actual, placeholder in (
            (self.namespace, "<namespace>"),
            (self.node_label, "<label>"),
            (self.node, "<node>"),
        ):
            text = text.replace(actual, placeholder)
        return json.loads(HEX.sub("<hex>", text))


def ensure_testbed(cluster: LocalCluster, side: Side, slot: dict[str, str]) -> None:
    """Testbed ``tb`` of two ``slot``-sized slots on the side's node, Ready with both slots free and held by no
    Scheduling."""
    if not cluster.kubectl("get", "-n", side.namespace, "testbed", "tb", "--ignore-not-found", "-o", "name"):
        testbed = testbed_manifest(nodeLabel=side.node_label, slotsPerNode=2, resourcesPerSlot=slot)
        create_in(cluster, side.namespace, testbed | {"metadata": {"name": "tb"}})

    def ready() -> bool:
        table = status_in(cluster, side.namespace, "testbed", "tb")
        free = table.get("counts", {}).get("free") == 2
        return table.get("state") == "Ready" and free and not table.get("scheduling")

    wait_for(f"the Testbed in {side.namespace} Ready, both slots free, not held", ready, timeout=90)


class Run:
    """What one side showed of a run: every pod and Deployment as first seen (as created), the pods that ran and
    their slots, and the application's ``state`` each time it changed."""

    def __init__(self, cluster: LocalCluster, side: Side, application: Any, state: Callable[[Any], Any]) -> None:
        self.side = side
        self.first_seen: dict[str, dict[str, Any]] = {}
        self.deployments: dict[str, dict[str, Any]] = {}
        self.slot: dict[str, str] = {}
        self.running: set[str] = set()
        self.states: list[Any] = []
        self.status: dict[str, Any] = {}
        self._state = state
        self._watchers = [
            _Calls(cluster, side.namespace, Pod, self._pod),
            _Calls(cluster, side.namespace, application, self._app),
            _Calls(cluster, side.namespace, Deployment, self._deployment),
        ]

    def _pod(self, pod: Any) -> None:
        body = pod.to_dict()
        name = body["metadata"]["name"]
        self.first_seen.setdefault(name, body)
        if slot := (body["metadata"].get("annotations") or {}).get(SLOT_ANNOTATION):
            self.slot[name] = slot
        if (body.get("status") or {}).get("phase") == "Running":
            self.running.add(name)

    def _app(self, app: Any) -> None:
        self.status = app.to_dict().get("status") or {}
        state = self._state(self.status)
        if not self.states or self.states[-1] != state:
            self.states.append(state)

    def _deployment(self, deployment: Any) -> None:
        body = deployment.to_dict()
        self.deployments.setdefault(body["metadata"]["name"], body)

    def pods(self, label: str, value: str) -> dict[str, dict[str, Any]]:
        """The pods seen whose ``label`` is ``value``, in the order they appeared."""
        return {
            name: body
            for name, body in self.first_seen.items()
            if (body["metadata"].get("labels") or {}).get(label) == value
        }

    def stop(self) -> None:
        for watcher in self._watchers:
            watcher.stop()


class _Calls(Watcher[Any]):
    def __init__(self, cluster: LocalCluster, namespace: str, kind: Any, call: Callable[[Any], None]) -> None:
        self._call = call
        super().__init__(cluster, namespace, kind)

    def note(self, obj: Any) -> None:
        self._call(obj)


def owners_shape(metadata: dict[str, Any]) -> list[dict[str, Any]]:
    """An object's owner references without the uids (they differ by construction)."""
    return [{k: v for k, v in ref.items() if k != "uid"} for ref in metadata.get("ownerReferences") or []]


def pod_shape(side: Side, pod: dict[str, Any]) -> Any:
    """What esi depends on in a pod, normalized (``Side.normalized``)."""
    metadata, spec = pod["metadata"], pod["spec"]
    labels = {k: v for k, v in (metadata.get("labels") or {}).items() if k not in SIM_ONLY_LABELS}
    return side.normalized(
        {
            "name": metadata["name"],
            "labels": labels,
            "owners": owners_shape(metadata),
            "resources": spec["containers"][0].get("resources"),
            "schedulerName": spec.get("schedulerName"),
            "priorityClassName": spec.get("priorityClassName"),
            "affinity": spec.get("affinity"),
            "tolerations": spec.get("tolerations"),
            "nodeSelector": spec.get("nodeSelector"),
        }
    )
