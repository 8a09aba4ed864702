"""Extender latency: filter and preempt at 100 and 1,000 nodes, bind at 1,000, over HTTP as kube-scheduler calls them.

``python -m bench.extender [--requests N] [--no-bind]``. Serves esi's FastAPI app with uvicorn on loopback and sends
the upstream wire format over one keep-alive connection, as kube-scheduler does (nodeCacheCapable: node
names, victims by UID). Each executor pod is new, so every filter call assigns a slot (the slow path) and
every preempt call answers for a bound pod. The executors are all of one job, whose slots are all of the
Testbed's: by default every slot is given (4,000 at 1,000 nodes), the last executor's after all the others.
Two times per request: the round trip as the caller sees it — from a bare HTTP/1.1 client over a socket, a few
microseconds of its own per request, as Go's client (request bodies encoded beforehand) — and the handler's
time inside the server, from the request reaching the app to its answer's last byte handed back (routing,
parsing, the decision, the answer; without uvicorn's HTTP parsing). The baseline in the same run is a pod esi
does not manage (a pass-through): the ratio shows what slot assignment adds to bare request handling.

Bind (unless ``--no-bind``) needs an API server: a fresh local control plane (no nodes, nothing else of esi
running, so this is the verb's floor on a quiet cluster), the app binding through it as ``python -m api`` does,
its index the same 1,000 nodes x 4 slots with a real ghost pod behind each slot the run binds into. An executor
is filtered (its slot given, not timed) and then bound: the slot's ghost deleted (UID precondition, no grace
period), then the executor bound with its slot on the Binding. Baseline, alternating with it request by request:
the bind of a pod esi does not manage, the binding alone — what kube-scheduler's own binder sends. Beside them,
the API server's own time for the two writes the verb sends — a binding, a pod's deletion with no grace period —
from a bare TLS client (``bench.apiserver.BareApi``): the floor under any bind that deletes a ghost and binds. The
pods are made for no running scheduler and bound to node names no kubelet serves, so nothing else writes to them.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import tempfile
import time
import urllib.parse
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

from lightkube import KubeConfig

from api.extender.app import create_extender_app
from api.extender.slot_index import IndexedSlot, SlotIndex
from api.threaded import serve_in_thread
from bench.apiserver import BareApi
from esi.objects.names import JOB_LABEL, ROLE_EXECUTOR, ROLE_LABEL, TESTBED_LABEL
from esi.resources.testbed import SlotState
from infra.local_cluster import LocalCluster

SLOTS_PER_NODE = 4


def _index(nodes: int, ghosts: dict[int, tuple[str, str]] | None = None) -> SlotIndex:
    """A Testbed ``tb`` of ``nodes`` x 4 slots, all reserved for job ``job``; slot ``id``'s ghost is
    ``ghosts[id]`` (name, UID) where given, else a made-up UID."""
    index = SlotIndex()
    slots = []
    for position in range(SLOTS_PER_NODE):
        for n in range(nodes):
            slot_id = position * nodes + n
            name, uid = (ghosts or {}).get(slot_id, (None, f"g-{n}-{position}"))
            slots.append(
                IndexedSlot(slot_id, f"node-{n}", SlotState.RESERVED, job="job", ghost_uid=uid, ghost_name=name)
            )
    index.replace_testbed("bench", "tb", slots)
    return index


def _pod(i: int, managed: bool) -> dict[str, Any]:
    labels = {ROLE_LABEL: ROLE_EXECUTOR, TESTBED_LABEL: "tb", JOB_LABEL: "job"} if managed else {}
    return {
        "metadata": {"name": f"p{i}", "namespace": "bench", "uid": f"u{i}", "labels": labels},
        "spec": {"schedulerName": "esi-scheduler"},
    }


def _percentiles(samples: list[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(samples, n=100)
    return cuts[49] * 1000, cuts[98] * 1000


Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class TimedApp:
    """ASGI: ``app``, recording each HTTP request's time from reaching the app to its answer's last byte being
    handed to the server."""

    def __init__(self, app: Callable[[Message, Receive, Send], Awaitable[None]]) -> None:
        self._app = app
        self.samples: list[float] = []

    async def __call__(self, scope: Message, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        started = time.perf_counter()

        async def timed(message: Message) -> None:
            # Recorded before it is handed on: the caller's answer cannot overtake its sample.
            if message["type"] == "http.response.body" and not message.get("more_body"):
                self.samples.append(time.perf_counter() - started)
            await send(message)

        await self._app(scope, receive, timed)


class Connection:
    """One keep-alive HTTP/1.1 connection that POSTs JSON and reads the answer, with nothing else in between."""

    def __init__(self, url: str) -> None:
        target = urllib.parse.urlsplit(url)
        self._host = f"{target.hostname}:{target.port}"
        self._socket = socket.create_connection((target.hostname, target.port))
        self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # Go's net/http sets it too
        self._answers = self._socket.makefile("rb")

    def close(self) -> None:
        self._answers.close()
        self._socket.close()

    def post(self, path: str, body: bytes) -> bytes:
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {self._host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        self._socket.sendall(head.encode() + body)
        status = self._answers.readline().split()
        length = 0
        while (line := self._answers.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        answer = self._answers.read(length)
        if len(status) < 2 or status[1] != b"200":
            raise SystemExit(f"POST {path}: {b' '.join(status).decode()}: {answer[:200]!r}")
        return answer


def _measure(
    connection: Connection, timed: TimedApp, path: str, bodies: list[dict[str, Any]]
) -> tuple[list[float], list[float]]:
    """Round trips and handler times of POSTing ``bodies`` to ``path``, one after another, each encoded before its
    clock starts (all of them first would idle the connection past the server's keep-alive timeout: 4,000
    preemption bodies of 1,000 nodes are 240 MB of JSON)."""
    trips, handled = [], []
    for body in bodies:
        _, trip, handler = _timed_post(connection, timed, path, json.dumps(body).encode())
        trips.append(trip)
        handled += handler
    return trips, handled


def _timed_post(connection: Connection, timed: TimedApp, path: str, body: bytes) -> tuple[bytes, float, list[float]]:
    """POST ``body`` (encoded beforehand): the answer, its round trip, and the handler's time (one sample)."""
    timed.samples.clear()
    started = time.perf_counter()
    answer = connection.post(path, body)
    return answer, time.perf_counter() - started, list(timed.samples)


def run(nodes: int, requests: int) -> None:
    index = _index(nodes)
    names = [f"node-{n}" for n in range(nodes)]
    victims = {n: {"Pods": [{"UID": f"g-{n.split('-')[1]}-0"}], "NumPDBViolations": 0} for n in names}
    timed = TimedApp(create_extender_app(index))
    rows = []
    with serve_in_thread(timed) as url:
        connection = Connection(url)
        try:
            warm_up = [{"Pod": _pod(-i - 1, False), "NodeNames": names} for i in range(50)]
            _measure(connection, timed, "/extender/filter", warm_up)
            for label, managed in (("pass-through (baseline)", False), ("executor", True)):
                start = 0 if managed else 10**6
                filters = [{"Pod": _pod(start + i, managed), "NodeNames": names} for i in range(requests)]
                preempts = [
                    {"Pod": _pod(start + i, managed), "NodeNameToMetaVictims": victims} for i in range(requests)
                ]
                rows.append(
                    (
                        label,
                        _measure(connection, timed, "/extender/filter", filters),
                        _measure(connection, timed, "/extender/preempt", preempts),
                    )
                )
        finally:
            connection.close()
    base_filter = _percentiles(rows[0][1][0])[0]
    base_preempt = _percentiles(rows[0][2][0])[0]
    print(
        f"\n{nodes} nodes x {SLOTS_PER_NODE} slots, {requests} requests per verb (milliseconds: round trip / handler)"
    )
    print(f"  {'pod':<24} {'filter p50':>15} {'p99':>13} {'preempt p50':>15} {'p99':>15}   round trip p50 vs baseline")
    for label, (filter_trips, filter_handler), (preempt_trips, preempt_handler) in rows:
        (f50, f99), (fh50, fh99) = _percentiles(filter_trips), _percentiles(filter_handler)
        (p50, p99), (ph50, ph99) = _percentiles(preempt_trips), _percentiles(preempt_handler)
        print(
            f"  {label:<24} {f50:>7.2f} / {fh50:<5.2f} {f99:>6.2f} / {fh99:<5.2f} {p50:>7.2f} / {ph50:<5.2f}"
            f" {p99:>7.2f} / {ph99:<5.2f}   filter x{f50 / base_filter:.2f}, preempt x{p50 / base_preempt:.2f}"
        )


def _made(cluster: LocalCluster, pods: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Create ``pods`` (for no running scheduler) in namespace ``bench``; the API server's objects by name."""
    items = [
        {"apiVersion": "v1", "kind": "Pod", **pod, "spec": {**pod["spec"], "containers": [{"name": "c", "image": "x"}]}}
        for pod in pods
    ]
    listing = json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    cluster.kubectl("create", "-f", "-", input_text=listing, timeout=600)
    return _pods(cluster)


def _pods(cluster: LocalCluster) -> dict[str, dict[str, Any]]:
    """The pods of namespace ``bench`` as the API server has them, by name."""
    listed = json.loads(cluster.kubectl("get", "pods", "-n", "bench", "-o", "json", timeout=120))["items"]
    return {pod["metadata"]["name"]: pod for pod in listed}


def _bound(cluster: LocalCluster) -> tuple[dict[str, str], int]:
    """The namespace's pods: node of each bound one by name, and how many ghosts are left."""
    pods = _pods(cluster)
    nodes = {name: pod["spec"]["nodeName"] for name, pod in pods.items() if pod["spec"].get("nodeName")}
    return nodes, sum(1 for name in pods if name.startswith("ghost-"))


def _bind_pods(cluster: LocalCluster, requests: int) -> dict[str, dict[str, Any]]:
    """The pods a bind run needs, ``requests`` of each kind, as the API server made them: ghosts and executors
    of Testbed ``tb``'s job ``job``, pods esi does not manage (``plain``), and pods the bare client binds
    (``bare``) and deletes (``bare-ghost``)."""
    cluster.kubectl("create", "namespace", "bench")
    executor = {ROLE_LABEL: ROLE_EXECUTOR, TESTBED_LABEL: "tb", JOB_LABEL: "job"}
    return _made(
        cluster,
        [
            {
                "metadata": {"name": f"{kind}-{i}", "namespace": "bench", "labels": labels},
                "spec": {"schedulerName": "none"},
            }
            for kind, labels in (("ghost", {}), ("executor", executor), ("plain", {}), ("bare", {}), ("bare-ghost", {}))
            for i in range(requests)
        ],
    )


def _bind_trials(
    cluster: LocalCluster, nodes: int, requests: int, made: dict[str, dict[str, Any]]
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Round trips of each kind of bind and bare write, one after another, alternating request by request; and
    the extender's handler times of its binds."""
    # The executors are given the lowest free slots, 0, 1, ...: each one's ghost is a real pod.
    index = _index(nodes, {i: (f"ghost-{i}", made[f"ghost-{i}"]["metadata"]["uid"]) for i in range(requests)})
    index.pods_read(())
    timed = TimedApp(create_extender_app(index, kube_config=KubeConfig.from_file(cluster.kubeconfig), feed=False))
    names = [f"node-{n}" for n in range(nodes)]
    pods = "/api/v1/namespaces/bench/pods"
    trips: dict[str, list[float]] = {kind: [] for kind in ("executor", "plain", "binding", "deletion")}
    handled: dict[str, list[float]] = {"executor": [], "plain": []}
    with serve_in_thread(timed, lifespan="on") as url:
        connection, bare = Connection(url), BareApi(cluster)
        try:
            for i in range(requests):
                executor = made[f"executor-{i}"]
                connection.post("/extender/filter", json.dumps({"Pod": executor, "NodeNames": names}).encode())
                for kind, pod, node in (("executor", executor, f"node-{i}"), ("plain", made[f"plain-{i}"], "node-0")):
                    meta = pod["metadata"]
                    body = {"PodName": meta["name"], "PodNamespace": "bench", "PodUID": meta["uid"], "Node": node}
                    answer, trip, handler = _timed_post(connection, timed, "/extender/bind", json.dumps(body).encode())
                    trips[kind].append(trip)
                    handled[kind] += handler
                    if error := json.loads(answer).get("Error"):
                        raise SystemExit(f"bind {meta['name']}: {error}")
                binding = {"kind": "Binding", "metadata": {"name": f"bare-{i}"}, "target": {"name": "node-0"}}
                deletion = {"kind": "DeleteOptions", "gracePeriodSeconds": 0}
                for kind, method, path, request in (
                    ("binding", "POST", f"{pods}/bare-{i}/binding", binding),
                    ("deletion", "DELETE", f"{pods}/bare-ghost-{i}", deletion),
                ):
                    started = time.perf_counter()
                    bare.send(method, path, {"apiVersion": "v1", **request})
                    trips[kind].append(time.perf_counter() - started)
        finally:
            connection.close()
            bare.close()
    return trips, handled


def run_bind(nodes: int, requests: int) -> None:
    """Bind into slots at ``nodes`` nodes against a real API server, beside the binding alone (see the module)."""
    if requests > nodes:
        raise ValueError("one executor per node: at most as many requests as nodes")
    cluster = LocalCluster("bench-extender", Path(tempfile.mkdtemp(prefix="esi-bench-")))
    try:
        cluster.create()
        trips, handled = _bind_trials(cluster, nodes, requests, _bind_pods(cluster, requests))
        bound, ghosts_left = _bound(cluster)
    finally:
        cluster.delete()
    wrong = [i for i in range(requests) if bound.get(f"executor-{i}") != f"node-{i}"]
    if wrong or ghosts_left or sum(1 for name in bound if name.startswith(("plain-", "bare-"))) != 2 * requests:
        raise SystemExit(f"bind: {len(wrong)} executors not on their slot's node, {ghosts_left} ghosts left")
    print(
        f"\nbind at {nodes} nodes x {SLOTS_PER_NODE} slots, {requests} requests per pod kind, a quiet local API server "
        "(milliseconds: round trip / handler)"
    )
    print(f"  {'pod':<40} {'bind p50':>15} {'p99':>15}   round trip p50 vs baseline")
    base = _percentiles(trips["plain"])[0]
    for kind, label in (
        ("plain", "not esi's: the binding alone (baseline)"),
        ("executor", "executor: ghost deleted, then bound"),
    ):
        (b50, b99), (h50, h99) = _percentiles(trips[kind]), _percentiles(handled[kind])
        print(f"  {label:<40} {b50:>7.2f} / {h50:<6.2f} {b99:>7.2f} / {h99:<6.2f}   x{b50 / base:.2f}")
    print("  the API server alone, the same writes from a bare TLS client (milliseconds, round trip):")
    for kind, label in (("binding", "a binding"), ("deletion", "a pod's deletion, no grace period")):
        p50, p99 = _percentiles(trips[kind])
        print(f"  {label:<40} {p50:>7.2f} {p99:>15.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.extender", description=__doc__)
    parser.add_argument(
        "--requests",
        type=int,
        default=4000,
        help="requests per verb and pod kind, at most one per slot for filter and preempt and one per node for bind "
        "(default 4000: every slot of each Testbed, 1,000 binds)",
    )
    parser.add_argument("--no-bind", action="store_true", help="skip bind, which starts a local control plane")
    args = parser.parse_args()
    for nodes in (100, 1000):
        run(nodes, min(args.requests, nodes * SLOTS_PER_NODE))
    if not args.no_bind:
        run_bind(1000, min(args.requests, 1000))


if __name__ == "__main__":
    main()
