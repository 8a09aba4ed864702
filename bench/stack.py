"""A fresh local esi stack for a benchmark: cluster, CRDs, priority classes, nodes, and esi's processes.

The benchmarks measure the real thing: kube-apiserver + etcd, KWOK nodes, ``python -m operators``,
``python -m api`` (the extender) and the second kube-scheduler ``esi-scheduler`` calling it; with ``sim``,
also the simulated Spark/Flink operator (``python -m sim``).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from lightkube import Client, KubeConfig

from esi.objects.names import SCHEDULER_NAME
from esi.objects.priority import priority_classes
from esi.resources.crds import DEFINITIONS, crd
from infra.local_cluster import LocalCluster, NodeSpec, free_port
from infra.local_cluster.supervise import supervised
from infra.stacks import processes
from infra.stacks.second_scheduler import SecondScheduler, SecondSchedulerSettings
from sim.crds import application_crds

__all__ = ["Stack", "install", "local_stack"]


@dataclass(frozen=True)
class Stack:
    cluster: LocalCluster
    client: Client
    extender_url: str
    api_url: str
    token: str
    scheduler: SecondScheduler  # esi's second scheduler, calling the extender


def _live(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def install(cluster: LocalCluster, items: Sequence[dict[str, Any]]) -> None:
    """Applies ``items`` (CRDs among them) to ``cluster`` and waits until its CRDs are established."""
    body = json.dumps({"kind": "List", "apiVersion": "v1", "items": list(items)})
    cluster.kubectl("apply", "--server-side", "-f", "-", input_text=body)
    cluster.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")


@contextlib.contextmanager
def local_stack(
    name: str,
    nodes: Sequence[NodeSpec],
    *,
    qps: float = SecondSchedulerSettings.qps,
    burst: int = SecondSchedulerSettings.burst,
    sim: Sequence[str] | None = None,
    operators: Sequence[str] = (),
    supervise: bool = False,
    keep_logs: Path | None = None,
    node_lease_seconds: int | None = None,
) -> Iterator[Stack]:
    """The stack, deleted afterwards; ``sim``: arguments of ``python -m sim`` (None: no simulator);
    ``operators``: more arguments of ``python -m operators``; ``supervise``: every component under
    ``infra.local_cluster.supervise``, as the local stack runs them (started again when it exits or is killed);
    ``node_lease_seconds``: see ``LocalCluster``."""
    cluster = LocalCluster(name, Path(tempfile.mkdtemp(prefix="esi-bench-")), node_lease_seconds=node_lease_seconds)
    try:
        started = time.monotonic()
        cluster.create()
        install(cluster, [crd(d) for d in DEFINITIONS] + application_crds() + priority_classes())
        cluster.add_nodes(nodes, timeout=600)
        print(f"cluster with {len(nodes)} nodes ready in {time.monotonic() - started:.1f}s", flush=True)

        kubeconfig = cluster.kubeconfig
        port, extender_port = free_port(), free_port()
        token_file = cluster.directory / "api-token"

        def start(process: processes.EsiProcess, argv: list[str]) -> None:
            cluster.start_process(process.name, supervised(process.name, argv) if supervise else argv)

        start(processes.OPERATORS, processes.operators_command(sys.executable, kubeconfig=kubeconfig, more=operators))
        api = processes.api_command(
            sys.executable,
            kubeconfig=kubeconfig,
            port=port,
            extender_port=extender_port,
            token_file=token_file,
            log_level="warning",
        )
        start(processes.API, api)
        if sim is not None:
            start(processes.SIM, processes.sim_command(sys.executable, kubeconfig=kubeconfig, more=sim))
        deadline = time.monotonic() + 60
        while not _live(processes.API.live_url(port)):
            if time.monotonic() > deadline:
                raise SystemExit("the API did not come up within 60 s")
            time.sleep(0.2)
        extender_url = processes.extender_url("127.0.0.1", extender_port)
        scheduler = SecondScheduler(
            cluster, SecondSchedulerSettings(SCHEDULER_NAME, extender_url, qps=qps, burst=burst)
        )
        scheduler.start(supervise=supervise)
        print(f"{SCHEDULER_NAME}: client qps {qps:g}, burst {burst}; percentageOfNodesToScore 100", flush=True)
        client = Client(KubeConfig.from_file(cluster.kubeconfig), field_manager="esi-bench")
        try:
            token = token_file.read_text().strip()
            yield Stack(cluster, client, extender_url, f"http://127.0.0.1:{port}", token, scheduler)
        finally:
            client.close()
    finally:
        if keep_logs is not None:
            shutil.copytree(cluster.logs_dir, keep_logs, dirs_exist_ok=True)
            print(f"component logs copied to {keep_logs}")
        cluster.delete()
        shutil.rmtree(cluster.workdir, ignore_errors=True)
