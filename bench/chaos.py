"""Chaos: a queue runs while esi's processes are killed and the control plane restarts; then what must hold is checked.

``python -m bench.chaos [--jobs 100] [--executors 2] [--nodes 4] [--slots-per-node 2] [--kill-every 10]
[--control-plane-every 60] [--seed 1] [--keep-logs DIR]``

A fresh local stack (``bench.stack``: every component under ``infra.local_cluster.supervise``, as ``make up`` runs
them), a Testbed of ``--nodes`` x ``--slots-per-node`` slots and ``--jobs`` simulated Spark BatchJobs of
``--executors`` executors each. The same queue of all jobs runs twice, each time as a new Scheduling: first
undisturbed (the baseline), then while every ``--kill-every`` seconds one of the reconcilers, the API (with
the extender), the simulator and the second kube-scheduler is SIGKILLed (in a seeded random order, each in
turn) and every ``--control-plane-every`` seconds kube-apiserver, etcd and the rest of the control plane are
stopped and started again (etcd's data kept).

After each round, checked (a problem names what broke): every job ran exactly once successfully for the
round's Scheduling; its run record is complete (nodes, those of its slots; nothing ``incomplete``); every
executor seen bound was in a slot of its job's runs, on that slot's node; no slot held two executors at
once (every executor's binding is watched; a time the watch was cut off is not held against anyone); and
once the Scheduling is deleted, no hold (Lease), executor or SparkApplication is left, every slot is Free
with its ghost, and every run in a job's history is kept as a Run that holds what the history holds — also of
the quarter of the jobs deleted, with the reconcilers SIGKILLed right after, before the chaotic round's
Scheduling lets them go (their last runs not kept yet). Prints the kills survived, both rounds' times,
throughput and their ratio.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import random
import signal
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from lightkube import Client, KubeConfig
from lightkube.generic_resource import create_namespaced_resource
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Pod

from bench.jobs import DRIVER_NODE, NAMESPACE, SPARK
from bench.stack import Stack, local_stack
from esi.objects.holds import HOLD_KIND_LABEL
from esi.objects.names import JOB_LABEL, ROLE_EXECUTOR, ROLE_LABEL, SCHEDULER_NAME, slot_of
from esi.resources.meta import API_VERSION
from infra.local_cluster import LocalCluster, NodeSpec
from infra.stacks import processes
from sim.crds import SPARK as SPARK_CRD

__all__ = ["COMPONENTS", "Report", "chaos", "print_report"]

TESTBED_NODE = "esi.bench/chaos-node"
COMPONENTS = (processes.OPERATORS.name, processes.API.name, processes.SIM.name, f"scheduler-{SCHEDULER_NAME}")
SparkApplication = create_namespaced_resource(SPARK_CRD.group, SPARK_CRD.version, SPARK_CRD.kind, SPARK_CRD.plural)
ROUND_TIMEOUT = 3600.0
CHAOS_NODE_LEASE_SECONDS = 10
# What esi tells when something waits or what it repairs: counted per round from its Events.
TOLD = ("Stalled", "JobRetrying", "WaitCycle")


@dataclass
class Round:
    """One run of the queue: how long it took and what went wrong."""

    name: str
    runs: int
    seconds: float = 0.0
    failed_attempts: int = 0  # runs that failed and were retried (a kill may cost a run)
    executors_seen: int = 0
    told: dict[str, int] = field(default_factory=dict)  # esi's Events of the round by reason (``TOLD``)
    problems: list[str] = field(default_factory=list)

    @property
    def runs_per_minute(self) -> float:
        return self.runs / self.seconds * 60 if self.seconds else 0.0


@dataclass
class Report:
    calm: Round
    chaotic: Round
    kills: dict[str, int]
    control_plane_restarts: int

    @property
    def problems(self) -> list[str]:
        return [f"{r.name}: {p}" for r in (self.calm, self.chaotic) for p in r.problems]


# --- what is observed ---------------------------------------------------------------------------------------


@dataclass
class Binding:
    """One executor pod as the watch saw it: where it was bound, and from when to when it held its slot."""

    pod: str
    job: str
    slot: int | None
    node: str | None = None
    bound: float | None = None  # time.time() when first seen with a node
    gone: float | None = None  # when first seen ending (finished, being deleted, deleted)
    gone_unseen: bool = False  # it went while the watch was cut off: ``gone`` is only an upper bound


class ExecutorWatch:
    """Every executor pod of the namespace, followed by list + watch, resumed (a fresh list) when cut off."""

    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig = kubeconfig
        self.bindings: dict[str, Binding] = {}
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._follow, name="executor-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(timeout=15)

    def since(self, start: float) -> list[Binding]:
        with self._lock:
            return [b for b in self.bindings.values() if b.bound is not None and b.bound >= start]

    def _follow(self) -> None:
        selector: dict[str, Any] = {ROLE_LABEL: ROLE_EXECUTOR}
        while not self._stopped.is_set():
            try:
                client = Client(KubeConfig.from_file(self.kubeconfig))
            except Exception:  # the kubeconfig is being rewritten: try again
                time.sleep(0.5)
                continue
            try:
                listed = client.list(Pod, namespace=NAMESPACE, labels=selector)
                present = set()
                for pod in listed:
                    present.add(self._note(pod, time.time()))
                self._note_gone_unseen(present)
                version = listed.resourceVersion
                for kind, pod in client.watch(Pod, namespace=NAMESPACE, labels=selector, resource_version=version):
                    self._note(pod, time.time(), deleted=kind == "DELETED")
                    if self._stopped.is_set():
                        return
            except Exception:  # the API server went away, or cut the watch: list again
                time.sleep(0.5)
            finally:
                client.close()

    def _note(self, pod: Pod, now: float, *, deleted: bool = False) -> str:
        assert pod.metadata is not None
        name = str(pod.metadata.name)
        labels = pod.metadata.labels or {}
        node = pod.spec.nodeName if pod.spec is not None else None
        phase = pod.status.phase if pod.status is not None else None
        with self._lock:
            binding = self.bindings.setdefault(name, Binding(name, labels.get(JOB_LABEL, ""), None))
            slot = slot_of(pod.metadata.annotations or {})  # the extender records it on the Binding
            binding.slot = slot if binding.slot is None else binding.slot
            if node and binding.bound is None:
                binding.node, binding.bound = node, now
            ending = deleted or pod.metadata.deletionTimestamp is not None or phase in ("Succeeded", "Failed")
            if ending and binding.gone is None:
                binding.gone = now
        return name

    def _note_gone_unseen(self, present: Iterable[str]) -> None:
        """Pods known and not listed any more went while the watch was cut off."""
        now, listed = time.time(), set(present)
        with self._lock:
            for binding in self.bindings.values():
                if binding.gone is None and binding.pod not in listed:
                    binding.gone, binding.gone_unseen = now, True


# --- what is done to it ---------------------------------------------------------------------------------------


def kill_component(cluster: LocalCluster, name: str) -> bool:
    """SIGKILL what the supervisor of component ``name`` runs (it starts it again); whether anything ran."""
    killed = False
    for child in cluster.children_of(name):
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)
            killed = True
    return killed


class Havoc:
    """Kills a component every ``kill_every`` seconds (each in turn, in a seeded random order) and restarts the
    control plane every ``control_plane_every`` seconds (None: never), until stopped."""

    def __init__(
        self,
        cluster: LocalCluster,
        kill_every: float,
        control_plane_every: float | None,
        seed: int,
        components: tuple[str, ...] = COMPONENTS,
    ) -> None:
        self.cluster = cluster
        self.kill_every, self.control_plane_every = kill_every, control_plane_every
        self.order = random.Random(seed).sample(components, len(components))  # noqa: S311 (an order, not a secret)
        self.kills = dict.fromkeys(components, 0)
        self.restarts = 0
        self.failures: list[str] = []
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="havoc", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(timeout=300)

    def _run(self) -> None:
        start = time.monotonic()
        next_kill, turn = start + self.kill_every, 0
        next_restart = start + self.control_plane_every if self.control_plane_every else float("inf")
        while not self._stopped.is_set():
            if self._stopped.wait(max(min(next_kill, next_restart) - time.monotonic(), 0.0)):
                return
            if time.monotonic() >= next_restart:
                print(f"  {time.monotonic() - start:6.1f}s restarting the control plane", flush=True)
                try:
                    self.cluster.restart_control_plane()
                    self.restarts += 1
                except Exception as err:  # one more try; that it failed is a problem of the round
                    self.failures.append(f"the control plane did not come back: {err}")
                    with contextlib.suppress(Exception):
                        self.cluster.start()
                next_restart = time.monotonic() + (self.control_plane_every or 0)
                continue
            component = self.order[turn % len(self.order)]
            turn += 1
            if kill_component(self.cluster, component):
                self.kills[component] += 1
                print(f"  {time.monotonic() - start:6.1f}s SIGKILL {component}", flush=True)
            next_kill = time.monotonic() + self.kill_every


# --- a round --------------------------------------------------------------------------------------------------


def _retrying(what: str, read: Callable[[], Any], timeout: float = ROUND_TIMEOUT) -> Any:
    """``read()`` until it returns something true, through the API server going away; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(Exception):
            value = read()
            if value:
                return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.5)


def _get(cluster: LocalCluster, kind: str, name: str) -> dict[str, Any]:
    out = cluster.kubectl("get", "-n", NAMESPACE, kind, name, "-o", "json", timeout=20)
    found: dict[str, Any] = json.loads(out)
    return found


def _run_round(
    stack: Stack,
    watch: ExecutorWatch,
    name: str,
    jobs: list[str],
    *,
    executors: int,
    havoc: Callable[[], Havoc | None],
    timeout: float,
    deleted: Iterable[str] = (),
) -> tuple[Round, Havoc | None]:
    """Run the queue as Scheduling ``name`` (``havoc`` starts what disturbs it), check, delete the jobs
    ``deleted`` (and kill the reconcilers) and the Scheduling, check again."""
    cluster = stack.cluster
    queue = [{"name": job} for job in jobs for _ in range(executors)]
    scheduling = {
        "apiVersion": API_VERSION,
        "kind": "Scheduling",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"testbed": {"name": "tb"}, "queueBased": queue},
    }
    result = Round(name, len(jobs))
    started_wall, started = time.time(), time.monotonic()
    _create(cluster, scheduling)
    disturber = havoc()
    try:
        _retrying(
            f"scheduling {name} to complete",
            lambda: _get(cluster, "scheduling", name)["status"]["state"] == "Completed",
            timeout,
        )
        result.seconds = time.monotonic() - started
    finally:
        if disturber is not None:
            disturber.stop()
            result.problems += disturber.failures
    table = _retrying("the Testbed's slot table", lambda: _get(cluster, "testbed", "tb")["status"]["slots"])
    slot_nodes = {s["id"]: s["nodeName"] for s in table}
    run_slots = _check_runs(cluster, name, jobs, executors=executors, slot_nodes=slot_nodes, result=result)
    result.told = _told_since(cluster, started_wall)
    bindings = watch.since(started_wall)
    result.executors_seen = len(bindings)
    _check_bindings(bindings, run_slots, slot_nodes, result)
    histories = {job: _get(cluster, "batchjob", job)["status"] for job in deleted}
    if histories:  # still held: their last runs are kept by their deletion, whatever the crash cuts short
        cluster.kubectl("delete", "-n", NAMESPACE, "batchjob", *histories, "--wait=false")
        kill_component(cluster, processes.OPERATORS.name)
    cluster.kubectl("delete", "-n", NAMESPACE, "scheduling", name, "--wait=false")
    _check_released(stack, len(slot_nodes), result)
    _check_kept(cluster, [job for job in jobs if job not in histories], histories, result)
    return result, disturber


def _told_since(cluster: LocalCluster, started_wall: float) -> dict[str, int]:
    """How often esi told each reason of ``TOLD`` in the namespace since ``started_wall``."""
    listed = _retrying(
        "the namespace's Events", lambda: cluster.kubectl("get", "events", "-n", NAMESPACE, "-o", "json")
    )
    told = dict.fromkeys(TOLD, 0)
    for event in json.loads(listed)["items"]:
        when = event.get("lastTimestamp") or event.get("eventTime") or ""
        if event.get("reason") in told and when and _epoch(when) >= int(started_wall):
            told[event["reason"]] += event.get("count") or 1
    return told


def _epoch(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp).timestamp()


def _create(cluster: LocalCluster, manifest: dict[str, Any]) -> None:
    _retrying(
        f"{manifest['kind']} {manifest['metadata']['name']} created",
        lambda: cluster.kubectl("create", "-f", "-", input_text=json.dumps(manifest)) or True,
    )


def _check_runs(
    cluster: LocalCluster, name: str, jobs: list[str], *, executors: int, slot_nodes: dict[int, str], result: Round
) -> dict[str, set[int]]:
    """Each job ran once successfully for Scheduling ``name``, its record complete; the slots of its runs."""
    run_slots: dict[str, set[int]] = {}
    for job in jobs:
        runs = [r for r in _get(cluster, "batchjob", job)["status"].get("runs", []) if r["scheduling"] == name]
        run_slots[job] = {slot for r in runs for slot in r["slots"]}
        outcomes = [r.get("outcome") for r in runs]
        result.failed_attempts += outcomes.count("Failed")
        if outcomes.count("Succeeded") != 1:
            result.problems.append(f"job {job} ran {outcomes} for {name}, not once successfully")
        for run in runs:
            nodes = sorted({slot_nodes.get(slot, "?") for slot in run["slots"]})
            if run.get("incomplete") or run.get("nodes") != nodes or len(run["slots"]) != executors:
                result.problems.append(f"job {job}: run record {run} is not complete (slots' nodes: {nodes})")
    return run_slots


def _check_bindings(
    bindings: list[Binding], run_slots: dict[str, set[int]], slot_nodes: dict[int, str], result: Round
) -> None:
    """Every executor in a slot of its job, on that slot's node; no slot held by two executors at once."""
    by_slot: dict[int, list[Binding]] = {}
    for b in bindings:
        if b.slot is None or b.slot not in run_slots.get(b.job, set()) or b.node != slot_nodes.get(b.slot):
            result.problems.append(f"executor {b.pod} of {b.job} ran in slot {b.slot} on {b.node}")
            continue
        by_slot.setdefault(b.slot, []).append(b)
    for slot, held in by_slot.items():
        held.sort(key=lambda b: b.bound or 0.0)
        for earlier, later in itertools.pairwise(held):
            if earlier.gone is None or (not earlier.gone_unseen and earlier.gone > (later.bound or 0.0)):
                result.problems.append(f"slot {slot} held by {earlier.pod} and {later.pod} at once")


def _check_released(stack: Stack, slots: int, result: Round) -> None:
    """Once the Scheduling is gone: no hold, executor or application left; every slot Free with its ghost."""
    client = stack.client

    def released() -> bool:
        left = [
            *client.list(Lease, namespace=NAMESPACE, labels={HOLD_KIND_LABEL: None}),
            *client.list(Pod, namespace=NAMESPACE, labels={ROLE_LABEL: ROLE_EXECUTOR}),
            *client.list(SparkApplication, namespace=NAMESPACE),
        ]
        table = _get(stack.cluster, "testbed", "tb")["status"]
        free = [s for s in table.get("slots", []) if s["state"] == "Free" and s.get("pod")]
        return not left and len(free) == slots and table.get("state") == "Ready"

    try:
        _retrying("everything released", released, timeout=300)
    except TimeoutError as err:
        result.problems.append(str(err))


def _check_kept(cluster: LocalCluster, jobs: list[str], deleted: dict[str, dict[str, Any]], result: Round) -> None:
    """Once the jobs are let go, or gone (``deleted``: their statuses before): every run in a job's history is
    kept as a Run, holding what the history holds."""

    def missing() -> list[str]:
        listed = json.loads(cluster.kubectl("get", "runs", "-n", NAMESPACE, "-o", "json", timeout=20))["items"]
        kept = {(r["spec"]["job"], r["spec"]["ordinal"]): r["spec"] for r in listed}
        problems = []
        if deleted:
            left = cluster.kubectl("get", "-n", NAMESPACE, "batchjob", *deleted, "--ignore-not-found", "-o", "name")
            problems += [f"{job} deleted, still there" for job in left.split()]
        statuses = {job: _get(cluster, "batchjob", job)["status"] for job in jobs} | deleted
        for job, status in statuses.items():
            first = status["runCount"] - len(status["runs"]) + 1
            for ordinal, run in enumerate(status["runs"], start=first):
                spec = kept.get((job, ordinal))
                if spec is None or {k: spec.get(k) for k in run} != run:
                    problems.append(f"job {job}: run {ordinal} is not kept as it is recorded ({spec})")
        return problems

    try:
        _retrying("every run kept as a Run", lambda: not missing(), timeout=120)
    except TimeoutError:
        result.problems += missing()


# --- the benchmark ----------------------------------------------------------------------------------------------


def chaos(
    *,
    jobs: int,
    executors: int,
    nodes: int,
    per_node: int,
    kill_every: float,
    control_plane_every: float | None,
    seed: int = 1,
    round_timeout: float = ROUND_TIMEOUT,
    components: tuple[str, ...] = COMPONENTS,
    sim: list[str] | None = None,
    keep_logs: Path | None = None,
) -> Report:
    """Both rounds on a fresh stack; the figures and every problem found."""
    size = {"cpu": "1", "memory": "1Gi"}
    specs = [NodeSpec(f"tb-{i}", str(per_node), f"{per_node}Gi", labels={TESTBED_NODE: str(i)}) for i in range(nodes)]
    specs.append(NodeSpec("drivers", "256", "1024Gi", labels={DRIVER_NODE: "true"}))
    sim_args = sim if sim is not None else ["--time-scale=0.05", "--default-runtime=60"]
    # The KWOK controller restarts with the control plane, and a new one plays a node's kubelet only once the lease
    # of the one before it expired (kwokctl's: 200 s, every pod stalled as long after each restart; a kubelet
    # would keep its node): short leases, renewed every 2.5 s.
    with local_stack(
        "bench-chaos",
        specs,
        sim=sim_args,
        supervise=True,
        keep_logs=keep_logs,
        node_lease_seconds=CHAOS_NODE_LEASE_SECONDS,
    ) as stack:
        cluster = stack.cluster
        testbed = {"nodeLabel": TESTBED_NODE, "slotsPerNode": per_node, "resourcesPerSlot": size}
        _create(
            cluster,
            {
                "apiVersion": API_VERSION,
                "kind": "Testbed",
                "metadata": {"name": "tb", "namespace": NAMESPACE},
                "spec": testbed,
            },
        )
        names = [f"job-{i:03d}" for i in range(jobs)]
        for job in names:
            _create(
                cluster,
                {
                    "apiVersion": API_VERSION,
                    "kind": "BatchJob",
                    "metadata": {"name": job, "namespace": NAMESPACE},
                    "spec": {"sparkSpec": SPARK},
                },
            )
        _retrying("the Testbed to be Ready", lambda: _get(cluster, "testbed", "tb")["status"]["state"] == "Ready", 300)
        watch = ExecutorWatch(cluster.kubeconfig)
        try:
            print(f"calm round: {jobs} jobs x {executors} executors on {nodes * per_node} slots", flush=True)
            calm, _ = _run_round(
                stack, watch, "calm", names, executors=executors, havoc=lambda: None, timeout=round_timeout
            )
            print(f"  {calm.seconds:.1f}s", flush=True)
            deleted = names[: max(len(names) // 4, 1)]
            print(
                f"chaotic round: a kill every {kill_every:g}s, a control plane restart every "
                f"{control_plane_every or 'never'}s",
                flush=True,
            )
            chaotic, havoc = _run_round(
                stack,
                watch,
                "chaos",
                names,
                executors=executors,
                havoc=lambda: Havoc(cluster, kill_every, control_plane_every, seed, components),
                timeout=round_timeout,
                deleted=deleted,
            )
        finally:
            watch.stop()
        assert havoc is not None
        return Report(calm, chaotic, havoc.kills, havoc.restarts)


def print_report(report: Report) -> None:
    calm, chaotic = report.calm, report.chaotic
    kills = ", ".join(f"{name} {count}" for name, count in report.kills.items())
    print(
        f"\nkills survived: {sum(report.kills.values())} ({kills}); control plane restarts: "
        f"{report.control_plane_restarts}"
    )
    for r in (calm, chaotic):
        print(
            f"{r.name:>6}: {r.runs} job runs in {r.seconds:7.1f}s = {r.runs_per_minute:6.1f} runs/min; "
            f"{r.failed_attempts} failed attempts retried; {r.executors_seen} executors watched"
        )
        print(f"        esi's Events: {', '.join(f'{reason} {count}' for reason, count in r.told.items())}")
    if calm.seconds:
        print(f" ratio: chaotic / calm time x{chaotic.seconds / calm.seconds:.2f}")
    print("invariants: " + ("all held" if not report.problems else f"{len(report.problems)} broken"))
    for problem in report.problems:
        print(f"  - {problem}")


def main() -> None:
    cli = argparse.ArgumentParser(prog="python -m bench.chaos", description=__doc__.split("\n\n")[0])
    cli.add_argument("--jobs", type=int, default=100, help="BatchJobs in the queue (default: %(default)s)")
    cli.add_argument("--executors", type=int, default=2, help="executors per job (default: %(default)s)")
    cli.add_argument("--nodes", type=int, default=4, help="Testbed nodes (default: %(default)s)")
    cli.add_argument("--slots-per-node", type=int, default=2, help="(default: %(default)s)")
    cli.add_argument("--kill-every", type=float, default=10.0, help="seconds between kills (default: %(default)s)")
    cli.add_argument(
        "--control-plane-every",
        type=float,
        default=60.0,
        help="seconds between control plane restarts; 0: none (default: %(default)s)",
    )
    cli.add_argument("--seed", type=int, default=1, help="orders the kills (default: %(default)s)")
    cli.add_argument("--keep-logs", type=Path, help="copy the components' logs here")
    args = cli.parse_args()
    report = chaos(
        jobs=args.jobs,
        executors=args.executors,
        nodes=args.nodes,
        per_node=args.slots_per_node,
        kill_every=args.kill_every,
        control_plane_every=args.control_plane_every or None,
        seed=args.seed,
        keep_logs=args.keep_logs,
    )
    print_report(report)
    raise SystemExit(1 if report.problems else 0)


if __name__ == "__main__":
    main()
