"""Extender latency: filter and preempt at 100 and 1,000 nodes, over HTTP as kube-scheduler calls them.

``python -m bench.extender [--requests N]``. Serves esi's FastAPI app with uvicorn on loopback and sends
the upstream wire format with a keep-alive httpx client, as kube-scheduler does (nodeCacheCapable: node
names, victims by UID). Each executor pod is new, so every filter call assigns a slot (the slow path) and
every preempt call answers for a bound pod. The baseline in the same run is a pod esi does not manage (a
pass-through): the ratio shows what slot assignment adds to bare request handling.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import time
from typing import Any

import httpx

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


def _measure(client: httpx.Client, path: str, bodies: list[dict[str, Any]]) -> list[float]:
    samples = []
    for body in bodies:
        started = time.perf_counter()
        response = client.post(path, json=body)
        samples.append(time.perf_counter() - started)
        response.raise_for_status()
    return samples


def run(nodes: int, requests: int) -> None:
    index = _index(nodes)
    names = [f"node-{n}" for n in range(nodes)]
    victims = {n: {"Pods": [{"UID": f"g-{n.split('-')[1]}-0"}], "NumPDBViolations": 0} for n in names}
    # Go's net/http (kube-scheduler) sets TCP_NODELAY on its side too.
    transport = httpx.HTTPTransport(socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
    with serve_in_thread(create_extender_app(index)) as url, httpx.Client(base_url=url, transport=transport) as client:
        _measure(
            client, "/extender/filter", [{"Pod": _pod(-i - 1, False), "NodeNames": names} for i in range(50)]
        )  # warm-up
        rows = []
        for label, managed in (("pass-through (baseline)", False), ("executor", True)):
            start = 0 if managed else 10**6
            filters = [{"Pod": _pod(start + i, managed), "NodeNames": names} for i in range(requests)]
            preempts = [{"Pod": _pod(start + i, managed), "NodeNameToMetaVictims": victims} for i in range(requests)]
            rows.append(
                (
                    label,
                    _measure(client, "/extender/filter", filters),
                    _measure(client, "/extender/preempt", preempts),
                )
            )
    base_filter = _percentiles(rows[0][1])[0]
    base_preempt = _percentiles(rows[0][2])[0]
    print(f"\n{nodes} nodes x {SLOTS_PER_NODE} slots, {requests} requests per verb")
    print(f"  {'pod':<24} {'filter p50':>11} {'p99':>8} {'preempt p50':>12} {'p99':>8}   ratio p50 vs baseline")
    for label, filters_s, preempts_s in rows:
        f50, f99 = _percentiles(filters_s)
        p50, p99 = _percentiles(preempts_s)
        print(
            f"  {label:<24} {f50:>9.2f}ms {f99:>6.2f}ms {p50:>10.2f}ms {p99:>6.2f}ms   "
            f"filter x{f50 / base_filter:.2f}, preempt x{p50 / base_preempt:.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.extender", description=__doc__)
    parser.add_argument("--requests", type=int, default=1000, help="requests per verb and pod kind (default 1000)")
    args = parser.parse_args()
    for nodes in (100, 1000):
        run(nodes, min(args.requests, nodes * SLOTS_PER_NODE))


if __name__ == "__main__":
    main()
