"""What a kubelet's admission would have said of the pods KWOK ran.

A kubelet first admits a pod: it refuses one whose requests do not fit beside those of the pods it admitted
before on its node and that have neither finished nor gone (``Failed``, reason
``OutOfcpu``/``OutOfmemory``/``OutOfpods``). The toolchain's KWOK does so too; this account is kept beside it,
from a watch of its own, so that a test is held to admission whatever KWOK did, and is checked against the real
kubelet as KWOK is (test_real_nodes). ``AdmissionLedger`` keeps that account over
the versions of pods in the API server's order; ``KubeletAdmission`` feeds it every pod of the cluster from a
watch, so that a test's own namespace can be checked for pods a kubelet would have refused (the ``namespace``
fixture does so after every test). Real nodes are left to their kubelets.
"""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx2
import yaml

from esi.decisions.testbed_lifecycle import Resources
from esi.objects.ghosts import node_view, pod_requests
from esi.resources.quantity import Quantity
from infra.local_cluster import KWOK_NODE_ANNOTATION, LocalCluster

FINISHED = frozenset({"Succeeded", "Failed"})
_RETRIED = frozenset({429, *range(500, 600)})  # the API server busy or failing: asked again


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
        self._listed_before = False

    def listed(self, pods: Sequence[Mapping[str, Any]]) -> list[Refusal]:
        """Every pod there is, as a listing found them; what a kubelet would have refused of them. A pod not among
        them is gone. At the first listing a bound pod is admitted as it is: what its kubelet said before this
        ledger began is not known here. At a later one (the watch lost its place) the pods are taken oldest
        first, as the kubelet takes the pods of a listing it has not seen: one not judged yet is judged now."""
        there = {_uid_and_node(pod)[0] for pod in pods}
        for uid in [uid for uid in self._judged if uid not in there]:
            self._free(uid)
            del self._judged[uid]
        if self._listed_before:
            oldest_first = sorted(pods, key=lambda pod: str(pod["metadata"].get("creationTimestamp", "")))
            return [refusal for pod in oldest_first if (refusal := self.seen(pod)) is not None]
        self._listed_before = True
        for pod in pods:
            uid, node = _uid_and_node(pod)
            if uid in self._judged or node is None or _finished(pod):
                continue
            if self._room_of(node) is not None:
                self._admit(uid, node, pod)
            else:
                self._judged[uid] = None
        return []

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


def room_of_node(node: Mapping[str, Any]) -> Room | None:
    """A KWOK node's room; None for any other node (a real node's kubelet admits its pods itself)."""
    if (node["metadata"].get("annotations") or {}).get(KWOK_NODE_ANNOTATION) != "fake":
        return None
    allocatable = node_view(node, Resources(Quantity(0), Quantity(0))).allocatable
    pods = Quantity(str(((node.get("status") or {}).get("allocatable") or {}).get("pods", 0)))
    return Room(allocatable.cpu.millis, allocatable.memory.value, pods.value)


class KubeletAdmission:
    """Every pod of the cluster through an ``AdmissionLedger``, from a LIST and WATCH of its own (on a thread,
    read as the plain JSON the API server sends: no typed models are built there, whose first building is not
    safe beside the test's own); ``refused_in`` tells what a kubelet would have refused in a namespace."""

    def __init__(self, cluster: LocalCluster) -> None:
        config = yaml.safe_load(cluster.kubeconfig.read_text())
        server, user = config["clusters"][0]["cluster"], config["users"][0]["user"]
        tls = ssl.create_default_context(cafile=server["certificate-authority"])
        tls.load_cert_chain(user["client-certificate"], user["client-key"])
        self._http = httpx2.Client(base_url=server["server"], verify=tls, timeout=httpx2.Timeout(30))
        self._lock = threading.Lock()
        self._rooms: dict[str, Room | None] = {}
        self._ledger = AdmissionLedger(self._room)
        self._refusals: dict[str, list[Refusal]] = {}
        self._expected: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._follow, name="kubelet-admission", daemon=True)
        self._thread.start()

    def _room(self, node: str) -> Room | None:
        if node not in self._rooms:
            answer = self._http.get(f"/api/v1/nodes/{node}")
            if answer.status_code == 404:
                return None  # not there (yet): asked again next time
            answer.raise_for_status()
            self._rooms[node] = room_of_node(answer.json())
        return self._rooms[node]

    def _follow(self) -> None:
        # Short watches, each resuming where the last ended; a version too old to resume from (410) means a
        # fresh listing, which replaces the account.
        version: str | None = None
        while not self._stop.is_set():
            try:
                if version is None:
                    listing = self._http.get("/api/v1/pods").raise_for_status().json()
                    with self._lock:
                        for refusal in self._ledger.listed(listing["items"]):
                            self._refusals.setdefault(refusal.namespace, []).append(refusal)
                    version = listing["metadata"]["resourceVersion"]
                version = self._watch(version)
            except (httpx2.TransportError, httpx2.HTTPStatusError) as err:
                # Cut short, the API server away or busy (5xx, 429): resume where it ended, a moment later; a
                # version too old (410) as the answer's status: list again. Closed by stop: end. Any other
                # refusal is a mistake here.
                code = err.response.status_code if isinstance(err, httpx2.HTTPStatusError) else None
                if code == 410:
                    version = None
                    continue
                if code is not None and code not in _RETRIED:
                    raise
                if self._stop.wait(0.5):
                    return
            except Exception:
                if self._stop.is_set():
                    return
                raise

    def _watch(self, version: str) -> str | None:
        """One watch from ``version``; the version it ended at (None: gone, list again)."""
        params = {"watch": "1", "resourceVersion": version, "timeoutSeconds": "5", "allowWatchBookmarks": "true"}
        with self._http.stream("GET", "/api/v1/pods", params=params, timeout=httpx2.Timeout(30)) as answer:
            answer.raise_for_status()
            for line in answer.iter_lines():
                if not line:
                    continue
                event = json.loads(line)
                pod = event["object"]
                if event["type"] == "ERROR":
                    if pod.get("code") == 410:
                        return None
                    raise RuntimeError(f"watching pods: {pod.get('message')}")
                version = pod["metadata"]["resourceVersion"]
                if event["type"] == "BOOKMARK":
                    continue
                with self._lock:
                    if event["type"] == "DELETED":
                        self._ledger.gone(pod)
                    elif (refusal := self._ledger.seen(pod)) is not None:
                        self._refusals.setdefault(refusal.namespace, []).append(refusal)
                if self._stop.is_set():
                    break
        return version

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
        self._stop.set()
        self._http.close()
        self._thread.join(timeout=15)
        assert not self._thread.is_alive(), "the kubelet admission's watch did not stop"
