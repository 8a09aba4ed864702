"""What a kubelet's admission would have said of the pods KWOK ran.

KWOK runs whatever is bound to its nodes; a kubelet first admits a pod: it refuses one whose requests do not fit
beside those of the pods it admitted before on its node and that have neither finished nor gone
(``Failed``, reason ``OutOfcpu``/``OutOfmemory``/``OutOfpods``). ``AdmissionLedger`` keeps that account over
the versions of pods in the API server's order; ``KubeletAdmission`` feeds it every pod of the cluster from a
watch, so that a test's own namespace can be checked for pods a kubelet would have refused (the ``namespace``
fixture does so after every test). Real nodes are left to their kubelets.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lightkube import ApiError, Client, KubeConfig
from lightkube.resources.core_v1 import Node, Pod

from esi.objects.ghosts import pod_requests
from esi.resources.quantity import Quantity, QuantityError
from infra.local_cluster import KWOK_NODE_ANNOTATION, LocalCluster
from tests.integration.kube import Watcher

FINISHED = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True)
class Room:
    """What a node lets its pods ask for, in the kubelet's units: cpu in millicores, memory in bytes, pods."""

    cpu: int
    memory: int
    pods: int


@dataclass(frozen=True)
class Refusal:
    """A pod a kubelet would have refused, in the kubelet's words."""

    namespace: str
    pod: str
    node: str
    reason: str
    message: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.pod} on {self.node}: {self.reason}: {self.message}"


@dataclass
class _Admitted:
    cpu: int = 0
    memory: int = 0
    pods: dict[str, tuple[int, int]] = field(default_factory=dict)  # uid → (cpu, memory)


class AdmissionLedger:
    """The kubelet's admission over pod versions in the API server's order, for the nodes ``room_of`` gives room
    for (None: a node this ledger leaves alone). A pod is judged once, when it is first seen bound; one refused
    stays out of the account."""

    def __init__(self, room_of: Callable[[str], Room | None]) -> None:
        self._room_of = room_of
        self._nodes: dict[str, _Admitted] = {}
        self._judged: dict[str, str | None] = {}  # uid → the node it was admitted to, None: refused or not ours

    def known(self, pod: Mapping[str, Any]) -> None:
        """A pod that was bound before this ledger could judge it (a listing): admitted as it is."""
        uid, node = _uid_and_node(pod)
        if uid in self._judged or node is None or _finished(pod):
            return
        if self._room_of(node) is not None:
            self._admit(uid, node, pod)
        else:
            self._judged[uid] = None

    def seen(self, pod: Mapping[str, Any]) -> Refusal | None:
        """One version of a pod: judged when it is first seen bound; its room freed once it has finished."""
        uid, node = _uid_and_node(pod)
        if uid in self._judged:
            if _finished(pod):
                self._free(uid)
            return None
        if node is None or _finished(pod):
            return None
        room = self._room_of(node)
        if room is None:
            self._judged[uid] = None
            return None
        refusal = self._refusal(pod, node, room)
        if refusal is None:
            self._admit(uid, node, pod)
        else:
            self._judged[uid] = None
        return refusal

    def gone(self, pod: Mapping[str, Any]) -> None:
        uid, _ = _uid_and_node(pod)
        self._free(uid)
        self._judged.pop(uid, None)

    def _refusal(self, pod: Mapping[str, Any], node: str, room: Room) -> Refusal | None:
        admitted = self._nodes.get(node, _Admitted())
        cpu, memory = _requests(pod)
        # The kubelet's order: the pod count, then each resource; its message names the first one short.
        for resource, requested, used, capacity in (
            ("pods", 1, len(admitted.pods), room.pods),
            ("cpu", cpu, admitted.cpu, room.cpu),
            ("memory", memory, admitted.memory, room.memory),
        ):
            if requested and used + requested > capacity:
                return Refusal(
                    pod["metadata"].get("namespace", ""),
                    pod["metadata"]["name"],
                    node,
                    f"OutOf{resource}",
                    f"Pod was rejected: Node didn't have enough resource: {resource}, requested: {requested}, "
                    f"used: {used}, capacity: {capacity}",
                )
        return None

    def _admit(self, uid: str, node: str, pod: Mapping[str, Any]) -> None:
        cpu, memory = _requests(pod)
        admitted = self._nodes.setdefault(node, _Admitted())
        admitted.pods[uid] = (cpu, memory)
        admitted.cpu += cpu
        admitted.memory += memory
        self._judged[uid] = node

    def _free(self, uid: str) -> None:
        node = self._judged.get(uid)
        if node is None:
            return
        admitted = self._nodes[node]
        cpu, memory = admitted.pods.pop(uid, (0, 0))
        admitted.cpu -= cpu
        admitted.memory -= memory
        self._judged[uid] = None


def _uid_and_node(pod: Mapping[str, Any]) -> tuple[str, str | None]:
    return str(pod["metadata"]["uid"]), (pod.get("spec") or {}).get("nodeName") or None


def _finished(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in FINISHED


def _requests(pod: Mapping[str, Any]) -> tuple[int, int]:
    """A pod's cpu (millicores) and memory (bytes) requests: its containers' (the tests' pods have no init
    containers and no overhead, which the kubelet would count too)."""
    requests = pod_requests(pod)
    return requests.cpu.millis, requests.memory.value


def _quantity(value: Any) -> Quantity:
    try:
        return Quantity(value)
    except (QuantityError, TypeError):
        return Quantity(0)


def room_of_node(node: Mapping[str, Any]) -> Room | None:
    """A KWOK node's room; None for any other node (a real node's kubelet admits its pods itself)."""
    if (node["metadata"].get("annotations") or {}).get(KWOK_NODE_ANNOTATION) != "fake":
        return None
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    return Room(
        _quantity(allocatable.get("cpu", 0)).millis,
        _quantity(allocatable.get("memory", 0)).value,
        _quantity(allocatable.get("pods", 0)).value,
    )


class KubeletAdmission(Watcher[Pod]):
    """Every pod of the cluster through an ``AdmissionLedger``, from a watch of its own; ``refused_in`` tells
    what a kubelet would have refused in a namespace."""

    def __init__(self, cluster: LocalCluster) -> None:
        self._lock = threading.Lock()
        self._rooms: dict[str, Room | None] = {}
        self._nodes = Client(config=KubeConfig.from_file(cluster.kubeconfig))
        self._ledger = AdmissionLedger(self._room)
        self._refusals: dict[str, list[Refusal]] = {}
        self._expected: set[str] = set()
        super().__init__(cluster, "*", Pod)

    def _room(self, node: str) -> Room | None:
        if node not in self._rooms:
            try:
                self._rooms[node] = room_of_node(self._nodes.get(Node, node).to_dict())
            except ApiError as err:
                if err.status.code != 404:
                    raise
                return None  # not there (yet): asked again next time
        return self._rooms[node]

    def listed(self, objects: list[Pod]) -> None:
        with self._lock:
            for obj in objects:
                self._ledger.known(obj.to_dict())

    def note(self, obj: Pod) -> None:
        with self._lock:
            refusal = self._ledger.seen(obj.to_dict())
            if refusal is not None:
                self._refusals.setdefault(refusal.namespace, []).append(refusal)

    def deleted(self, obj: Pod) -> None:
        with self._lock:
            self._ledger.gone(obj.to_dict())

    def refused_in(self, namespace: str) -> list[Refusal]:
        """The pods of ``namespace`` a kubelet would have refused so far."""
        with self._lock:
            return list(self._refusals.get(namespace, ()))

    def expect_refusals(self, namespace: str) -> None:
        """``namespace``'s refusals are what its test measures: ``unexpected_in`` leaves them out."""
        with self._lock:
            self._expected.add(namespace)

    def unexpected_in(self, namespace: str) -> list[Refusal]:
        """What ``refused_in`` says, unless ``namespace``'s test expects refusals."""
        with self._lock:
            return [] if namespace in self._expected else list(self._refusals.get(namespace, ()))

    def stop(self) -> None:
        super().stop()
        self._nodes.close()
