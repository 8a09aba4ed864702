"""Runs exported as data, end to end: ``esi runs -o csv|json|parquet`` and the Python client against the real API.

``python -m bench.runs_export [--sizes 10000,100000] [--creators 8]``. A fresh local cluster (kube-apiserver +
etcd, esi's CRDs, no nodes: Runs need none) and ``python -m api``. Per size, a namespace of that many Runs,
created from ``--creators`` threads, each a bare keep-alive connection to the API server (``bench.apiserver``):
runs of 20 jobs, one after another in each of 4 slots on 50 nodes, so that each run meets a few others. Then
``python -m api`` starts, so that it lists them all and every first export is cold (nothing rendered yet), and
is timed: the list (until ``/external/runs`` answers), the API's resident memory, and per size, each a process of
its own as a user runs it — ``esi runs -o csv`` (cold, then again), ``-o json`` (cold for JSON, then again),
``-o parquet``, the client's ``runs()`` (validated models) — against the baseline ``kubectl get runs -o json``
of the same namespace (the API server's own answer, read whole by a client). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from bench.apiserver import BareApi
from bench.stack import install
from esi.objects.names import JOB_LABEL, TESTBED_LABEL
from esi.objects.runs import SCHEDULING_LABEL
from esi.resources.crds import DEFINITIONS, crd
from esi.resources.meta import API_VERSION, GROUP, VERSION
from infra import toolchain
from infra.local_cluster import LocalCluster, free_port
from infra.stacks import processes

NODES, SLOTS, JOBS = 50, 4, 20
T0 = datetime(2026, 11, 1, tzinfo=UTC)


def _parser() -> argparse.ArgumentParser:
    cli = argparse.ArgumentParser(prog="python -m bench.runs_export", description=__doc__.split("\n\n")[0])
    cli.add_argument("--sizes", default="10000,100000", help="Runs per namespace, comma-separated")
    cli.add_argument("--creators", type=int, default=8, help="threads creating Runs")
    return cli


def _runs(namespace: str, count: int) -> Iterator[dict[str, Any]]:
    """``count`` Runs: each slot of each node runs one job after another (30 to 90 s each, a few seconds apart)."""
    rnd = random.Random(count)  # noqa: S311 (test data, not secrets)
    free = [0.0] * (NODES * SLOTS)
    for ordinal in range(1, count + 1):
        slot = rnd.randrange(NODES * SLOTS)
        job = f"job-{rnd.randrange(JOBS)}"
        start = free[slot] + rnd.uniform(1, 5)
        end = start + rnd.uniform(30, 90)
        free[slot] = end
        began = T0 + timedelta(seconds=start)
        scheduling = f"s-{ordinal // 500}"
        yield {
            "apiVersion": API_VERSION,
            "kind": "Run",
            "metadata": {
                "name": f"{job}-0a1b2c3d-{ordinal}",
                "namespace": namespace,
                "labels": {JOB_LABEL: job, SCHEDULING_LABEL: scheduling, TESTBED_LABEL: "tb"},
            },
            "spec": {
                "job": job,
                "jobUid": f"uid-{job}",
                "kind": "spark",
                "ordinal": ordinal,
                "scheduling": scheduling,
                "testbed": "tb",
                "slots": [slot],
                "nodes": [f"node-{slot // SLOTS}"],
                "submitted": (began - timedelta(seconds=rnd.uniform(0.5, 3))).isoformat(),
                "start": began.isoformat(),
                "end": (T0 + timedelta(seconds=end)).isoformat(),
                "outcome": "Succeeded" if rnd.random() > 0.05 else "Failed",
                "runtimeSeconds": end - start,
            },
        }


def _create(cluster: LocalCluster, namespace: str, count: int, creators: int) -> float:
    """Creates the namespace's Runs from ``creators`` connections; the seconds it took."""
    cluster.kubectl("create", "namespace", namespace)
    path = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/runs"
    runs = list(_runs(namespace, count))
    started = time.monotonic()

    def create(share: Sequence[dict[str, Any]]) -> None:
        api = BareApi(cluster)
        try:
            for run in share:
                api.send("POST", path, run)
        finally:
            api.close()

    with concurrent.futures.ThreadPoolExecutor(creators) as pool:
        for done in [pool.submit(create, runs[i::creators]) for i in range(creators)]:
            done.result()
    return time.monotonic() - started


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _timed(argv: Sequence[str], env: dict[str, str], api: int) -> tuple[float, float, float]:
    """Runs ``argv``: seconds it took, and CPU seconds of it and of the API process meanwhile."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    api_before = _cpu_seconds(api)
    started = time.monotonic()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env)
    took = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    client = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return took, client, _cpu_seconds(api) - api_before


CLIENT_RUNS = """
import sys
from esi.client.api_client import EsiClient
with EsiClient(sys.argv[1], token=sys.argv[2], namespace=sys.argv[3], timeout=300) as esi:
    print(sum(1 for _ in esi.runs()))
"""


@contextlib.contextmanager
def _cluster() -> Iterator[LocalCluster]:
    cluster = LocalCluster("bench-runs", Path(tempfile.mkdtemp(prefix="esi-bench-")))
    try:
        cluster.create()
        install(cluster, [crd(d) for d in DEFINITIONS])
        yield cluster
    finally:
        cluster.delete()
        shutil.rmtree(cluster.workdir, ignore_errors=True)


def _start_api(cluster: LocalCluster, port: int, namespaces: Sequence[str]) -> tuple[int, float]:
    """Starts ``python -m api``; its pid and the seconds until every namespace's runs are listed."""
    token_file = cluster.directory / "api-token"
    argv = processes.api_command(
        sys.executable,
        kubeconfig=cluster.kubeconfig,
        port=port,
        extender_port=free_port(),
        token_file=token_file,
        log_level="warning",
    )
    started = time.monotonic()
    pid = cluster.start_process(processes.API.name, argv)
    deadline = started + 900
    while not token_file.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    headers = {"Authorization": f"Bearer {token_file.read_text().strip()}"}
    url = f"http://127.0.0.1:{port}/external/runs"
    for namespace in namespaces:
        while True:
            if time.monotonic() > deadline:
                raise SystemExit("the API did not list the Runs within 900 s")
            with contextlib.suppress(httpx.HTTPError):
                # 503 until the first list of every Run is in
                answer = httpx.get(url, params={"namespace": namespace, "limit": 1}, headers=headers, timeout=60)
                if answer.status_code == 200 and answer.json()["items"]:
                    break
            time.sleep(0.5)
    return pid, time.monotonic() - started


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    namespaces = [f"runs-{size}" for size in sizes]
    with _cluster() as cluster:
        for namespace, size in zip(namespaces, sizes, strict=True):
            seconds = _create(cluster, namespace, size, args.creators)
            print(f"{size:,} Runs created in {seconds:.1f} s ({size / seconds:.0f}/s)", flush=True)
        port = free_port()
        pid, listed = _start_api(cluster, port, namespaces)
        token = (cluster.directory / "api-token").read_text().strip()
        print(
            f"API started and listed {sum(sizes):,} Runs in {listed:.1f} s; resident memory {_rss_mib(pid):.0f} MiB",
            flush=True,
        )
        url = f"http://127.0.0.1:{port}"
        env = {**os.environ, "ESI_URL": url, "ESI_TOKEN": token}
        esi = [sys.executable, "-m", "esi.client.cli", "runs"]
        out = cluster.directory / "export"
        print(
            f"{'runs':>8} | {'kubectl -o json':>15} | {'export':<24} {'seconds':>8} {'ratio':>6} | CPU s: client, API"
            f" | load avg"
        )
        for namespace, size in zip(namespaces, sizes, strict=True):
            kubectl = [str(toolchain.binary("kubectl")), "--kubeconfig", str(cluster.kubeconfig)]
            baseline, kubectl_cpu, _ = _timed([*kubectl, "get", "runs", "-n", namespace, "-o", "json"], env, pid)
            print(f"{size:8,} | {baseline:13.2f} s | (kubectl's CPU {kubectl_cpu:.2f} s)", flush=True)
            ways = {
                "esi runs -o csv (cold)": [*esi, "-n", namespace, "-o", "csv", "--output-file", f"{out}.csv"],
                "esi runs -o csv": [*esi, "-n", namespace, "-o", "csv", "--output-file", f"{out}.csv"],
                "esi runs -o json (cold)": [*esi, "-n", namespace, "-o", "json", "--output-file", f"{out}.json"],
                "esi runs -o json": [*esi, "-n", namespace, "-o", "json", "--output-file", f"{out}.json"],
                "esi runs -o parquet": [*esi, "-n", namespace, "-o", "parquet", "--output-file", f"{out}.parquet"],
                "client runs() (models)": [sys.executable, "-c", CLIENT_RUNS, url, token, namespace],
            }
            for way, command in ways.items():
                seconds, client, api = _timed(command, env, pid)
                print(
                    f"{size:8,} | {baseline:13.2f} s | {way:<24} {seconds:6.2f} s  x{seconds / baseline:.2f}"
                    f" | {client:5.2f} {api:5.2f} | {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
        print(f"API resident memory after the exports: {_rss_mib(pid):.0f} MiB", flush=True)
        cluster.stop_process(processes.API.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
