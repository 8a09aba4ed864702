"""Latency of the API's overview endpoint at increasing request rates, against a populated local stack.

``python -m bench.api [--testbeds 5] [--nodes-per-testbed 4] [--jobs 100] [--schedulings 40]
[--rates 100,250,500] [--seconds 5] [--warmup 2]``. A fresh local stack (``bench.stack``: reconcilers, API,
extender, second scheduler) holding that many Testbeds (2 slots per node), BatchJobs and Schedulings (queues
of 5 jobs on Testbeds that do not exist, so they stay pending and keep their size). Then, per rate, an
open-loop load — requests sent on a fixed schedule whether or not earlier ones have been answered, so a slow
server shows as latency instead of hiding it (no coordinated omission) — of ``GET /external/overview`` with
the bearer token, and in the same run the same load on ``GET /healthz`` (no token, no cache) as baseline;
before the first, ``--warmup`` seconds of both, not measured (the first requests open connections and warm
caches, and would otherwise weigh on the first rate alone).

The generator is a bare HTTP/1.1 client over keep-alive connections (a full client library spends more per
request than the server does, and would be the first to fall behind); each latency counts from when its request
was due; a request whose idle connection the server had closed (uvicorn's keep-alive timeout) is sent again on
a new one, as HTTP clients do, and counted. Prints per rate: achieved rate, p50/p99 of both, the ratio, and how
late the generator sent its requests (p99) — it shares the cores with the cluster and the API, so where that is
high, the figures say as much about the machine as about esi. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from bench.stack import local_stack
from esi.resources.meta import API_VERSION
from infra.local_cluster import NodeSpec
from infra.stacks import processes

NAMESPACE = "default"
TESTBED_LABEL = "esi.bench/testbed"


def _parser() -> argparse.ArgumentParser:
    cli = argparse.ArgumentParser(prog="python -m bench.api", description=__doc__.split("\n\n")[0])
    cli.add_argument("--testbeds", type=int, default=5)
    cli.add_argument("--nodes-per-testbed", type=int, default=4)
    cli.add_argument("--jobs", type=int, default=100)
    cli.add_argument("--schedulings", type=int, default=40)
    cli.add_argument("--rates", default="100,250,500", help="requests per second, comma-separated")
    cli.add_argument("--seconds", type=float, default=5, help="length of each load step")
    cli.add_argument(
        "--warmup", type=float, default=2, help="seconds of both loads at the first rate before any is measured"
    )
    return cli


def _populate(api: httpx.Client, cluster: Any, args: argparse.Namespace) -> None:
    items: list[dict[str, Any]] = []
    for t in range(args.testbeds):
        items.append(
            {
                "apiVersion": API_VERSION,
                "kind": "Testbed",
                "metadata": {"name": f"tb-{t}", "namespace": NAMESPACE},
                "spec": {
                    "nodeLabel": f"{TESTBED_LABEL}-{t}",
                    "slotsPerNode": 2,
                    "resourcesPerSlot": {"cpu": "1", "memory": "1Gi"},
                },
            }
        )
    for j in range(args.jobs):
        spark = {
            "type": "Scala",
            "image": "spark:3.5.0",
            "mainApplicationFile": "local:///x.jar",
            "driver": {"serviceAccount": "default"},
        }
        notes = {"profiler": [{f"job-{k}": "40 (3)" for k in range(10)}]}
        items.append(
            {
                "apiVersion": API_VERSION,
                "kind": "BatchJob",
                "metadata": {"name": f"job-{j}", "namespace": NAMESPACE},
                "spec": {"sparkSpec": spark, "externalScheduler": notes},
            }
        )
    cluster.kubectl("apply", "--server-side", "-f", "-", input_text=_as_list(items))
    # Schedulings through the API, as a scheduler would submit them.
    for s in range(args.schedulings):
        queue = [f"job-{(s * 5 + k) % args.jobs}" for k in range(5)]
        answer = api.post("/external/schedulings", json={"name": f"s-{s}", "testBed": f"nowhere-{s}", "queue": queue})
        answer.raise_for_status()
    deadline = time.monotonic() + 300
    while True:
        overview = api.get("/external/overview").json()
        slots = sum(t["slots"] for t in overview["testbeds"])
        if slots == 2 * args.testbeds * args.nodes_per_testbed and len(overview["jobs"]) == args.jobs:
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"the stack did not settle: {slots} slots, {len(overview['jobs'])} jobs")
        time.sleep(1)
    print(
        f"overview: {len(overview['testbeds'])} testbeds ({slots} slots), {len(overview['jobs'])} jobs, "
        f"{len(overview['schedulings'])} schedulings; {len(api.get('/external/overview').content) / 1024:.0f} KiB",
        flush=True,
    )


def _as_list(items: list[dict[str, Any]]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": items})


@dataclass
class Load:
    """One open-loop step: latencies (s, from each request's scheduled time), errors, requests sent again on a new
    connection because the server had closed their idle one, achieved rate, and how late the generator itself
    sent its requests (s; a late generator would otherwise pass for a slow server)."""

    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    reconnects: int = 0
    achieved: float = 0.0
    late: list[float] = field(default_factory=list)


async def _answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> list[bytes]:
    """Sends ``request``; the status line's words once the whole answer is read, none if the server had closed the
    connection."""
    writer.write(request)
    status = (await reader.readline()).split()
    if not status:
        return status
    length = 0
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    await reader.readexactly(length)
    return status


async def _load(url: str, headers: dict[str, str], rate: float, seconds: float) -> Load:
    """Open loop: request i is due at start + i/rate and leaves then on an idle keep-alive connection (a new
    one if none is idle), whether or not earlier ones were answered; its latency counts from when it was due.
    A bare HTTP/1.1 client over asyncio streams: a few microseconds per request, so the generator keeps its
    schedule where a full HTTP client library would itself become the bottleneck on a shared machine."""
    target = urllib.parse.urlsplit(url)
    host, port = target.hostname or "127.0.0.1", target.port or 80
    lines = [f"GET {target.path} HTTP/1.1", f"Host: {host}:{port}", *(f"{k}: {v}" for k, v in headers.items())]
    request = ("\r\n".join(lines) + "\r\n\r\n").encode()
    idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    opened: list[asyncio.StreamWriter] = []
    load = Load()

    async def connection() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await asyncio.open_connection(host, port)
        opened.append(writer)
        return reader, writer

    async def one(due: float) -> None:
        load.late.append(time.perf_counter() - due)
        try:
            reused = bool(idle)
            reader, writer = idle.pop() if reused else await connection()
            try:
                status = await _answer(reader, writer, request)
            except (ConnectionResetError, BrokenPipeError):
                if not reused:
                    raise
                status = []
            if not status and reused:  # the server closed it while idle (keep-alive timeout): sent again, as clients do
                load.reconnects += 1
                writer.close()
                reader, writer = await connection()
                status = await _answer(reader, writer, request)
        except (OSError, asyncio.IncompleteReadError, ValueError):
            load.errors += 1
            return
        if len(status) < 2 or status[1] != b"200":
            load.errors += 1
        else:
            load.latencies.append(time.perf_counter() - due)
        idle.append((reader, writer))

    total = int(rate * seconds)
    begin = time.perf_counter()
    tasks = []
    for i in range(total):
        due = begin + i / rate
        if (delay := due - time.perf_counter()) > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(due)))
    await asyncio.gather(*tasks)
    load.achieved = total / (time.perf_counter() - begin)
    for writer in opened:
        writer.close()
    return load


def _quantiles(values: Sequence[float]) -> tuple[float, float]:
    if len(values) < 2:
        return (values[0] * 1000, values[0] * 1000) if values else (float("nan"), float("nan"))
    q = statistics.quantiles(values, n=100, method="inclusive")
    return q[49] * 1000, q[98] * 1000


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    rates = [float(r) for r in args.rates.split(",")]
    nodes = [
        NodeSpec(f"tb{t}-n{n}", cpu="2", memory="4Gi", labels={f"{TESTBED_LABEL}-{t}": str(n)})
        for t in range(args.testbeds)
        for n in range(args.nodes_per_testbed)
    ]
    with local_stack("bench-api", nodes) as stack:
        headers = {"Authorization": f"Bearer {stack.token}"}
        with httpx.Client(base_url=stack.api_url, headers=headers, timeout=30) as api:
            _populate(api, stack.cluster, args)
        print(
            f"{'rate/s':>7} {'achieved':>9} | {'overview p50':>12} {'p99':>8} | {'healthz p50':>11} {'p99':>8} | ratio"
            "         | sent late p99"
        )
        overview_url, liveness_url = f"{stack.api_url}/external/overview", f"{stack.api_url}{processes.API.liveness}"
        for url, sent in ((overview_url, headers), (liveness_url, {})):
            asyncio.run(_load(url, sent, rates[0], args.warmup))
        for rate in rates:
            overview = asyncio.run(_load(overview_url, headers, rate, args.seconds))
            baseline = asyncio.run(_load(liveness_url, {}, rate, args.seconds))
            o50, o99 = _quantiles(overview.latencies)
            b50, b99 = _quantiles(baseline.latencies)
            _, late99 = _quantiles(overview.late + baseline.late)
            achieved = overview.achieved
            errors = f"  ({overview.errors} + {baseline.errors} errors)" if overview.errors or baseline.errors else ""
            if reconnects := overview.reconnects + baseline.reconnects:
                errors += f"  ({reconnects} sent again: idle connection closed by the server)"
            print(
                f"{rate:7.0f} {achieved:9.1f} | {o50:9.2f} ms {o99:5.2f} ms | {b50:8.2f} ms {b99:5.2f} ms | "
                f"x{o50 / b50:.2f} x{o99 / b99:.2f} | {late99:5.2f} ms{errors}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
