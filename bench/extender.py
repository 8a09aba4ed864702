"""Extender latency: filter and preempt at 100 and 1,000 nodes, over HTTP as kube-scheduler calls them.

``python -m bench.extender [--requests N]``. Serves esi's FastAPI app with uvicorn on loopback and sends
the upstream wire format over one keep-alive connection, as kube-scheduler does (nodeCacheCapable: node
names, victims by UID). Each executor pod is new, so every filter call assigns a slot (the slow path) and
every preempt call answers for a bound pod. Two times per request: the round trip as the caller sees it —
from a bare HTTP/1.1 client over a socket, a few microseconds of its own per request, as Go's client
(request bodies encoded beforehand) — and the handler's time inside the server, from the request reaching
the app to its answer's last byte handed back (routing, parsing, the decision, the answer; without uvicorn's
HTTP parsing). The baseline in the same run is a pod esi does not manage (a pass-through): the ratio shows what slot
assignment adds to bare request handling.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import time
import urllib.parse
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from api.extender.app import create_extender_app
from api.extender.slot_index import IndexedSlot, SlotIndex
from api.threaded import serve_in_thread
from esi.objects.names import JOB_LABEL, ROLE_EXECUTOR, ROLE_LABEL, TESTBED_LABEL
from esi.resources.testbed import SlotState

SLOTS_PER_NODE = 4


def _index(nodes: int) -> SlotIndex:
    index = SlotIndex()
    slots = [
        IndexedSlot(position * nodes + n, f"node-{n}", SlotState.RESERVED, job="job", ghost_uid=f"g-{n}-{position}")
        for position in range(SLOTS_PER_NODE)
        for n in range(nodes)
    ]
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
    """Round trips and handler times of POSTing ``bodies`` to ``path``, one after another."""
    encoded = [json.dumps(body).encode() for body in bodies]
    timed.samples.clear()
    samples = []
    for body in encoded:
        started = time.perf_counter()
        connection.post(path, body)
        samples.append(time.perf_counter() - started)
    return samples, list(timed.samples)


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


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.extender", description=__doc__)
    parser.add_argument("--requests", type=int, default=1000, help="requests per verb and pod kind (default 1000)")
    args = parser.parse_args()
    for nodes in (100, 1000):
        run(nodes, min(args.requests, nodes * SLOTS_PER_NODE))


if __name__ == "__main__":
    main()
