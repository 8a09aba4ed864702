"""Memory soak: resident memory of esi's processes over many completed job runs (issue 21: flat within ±10 %), and
what keeping every run as a Run object costs (issue 45: runs/s and the operators' memory within 10 % of without).

``python -m bench.soak [--runs 10000] [--sample-every 500] [--jobs 8] [--executors 2] [--nodes 4]
[--slots-per-node 4] [--runtime 0.5] [--run-objects both|with|without]``. A fresh local stack (``bench.stack``:
reconcilers, simulated Spark operator, API with the extender, second scheduler) with a Testbed of ``--nodes``
KWOK nodes (``--slots-per-node`` slots each) and ``--jobs`` Spark BatchJobs whose simulated applications run
``--runtime`` seconds once their executors run. Runs are fed in rounds, the way an external scheduler drives esi: a
queue-based Scheduling naming every job (``--executors`` times each) is submitted through the API
(``POST /external/schedulings``), followed there until it is Completed, deleted there (``DELETE``), and the
next round's Scheduling submitted. Each run takes esi's whole path: holds, reservation of its slots, the
SparkApplication created by the BatchJob reconciler, driver and executors made by the simulated operator, each
executor filtered and bound in place of its slot's ghost by the second scheduler and the extender, the run
recorded in the BatchJob's history (``MAX_RUNS`` kept, ``runCount`` counting on). Completed runs are the
BatchJobs' ``runCount`` summed, less runs still open.

With ``--run-objects both`` (the default) the soak runs twice in one process, each on a fresh stack: first
without Run objects (the operators' ``--keep-runs 0``: the jobs' histories only), then with them (each run
written as a Run once its Scheduling lets the job go, the default); at the end, each variant's runs/s and the
operators' highest and last resident memory of its samples, and with / without.

The benchmark deletes nothing but its Schedulings: that releases their jobs, whose reconciler deletes their
SparkApplications; the simulated operator deletes the executors when a run ends and the garbage collector takes
the driver with its application. Each sample line counts the pods, SparkApplications, Schedulings, Events and
Runs in the namespace, so a cluster that grows shows there and not only in the processes' memory (Events expire
after the API server's event TTL, an hour by default).

Every ``--sample-every`` completed runs: the resident memory (``VmRSS`` in ``/proc/<pid>/status``) of every
process with a pid file in the cluster's directory — esi's (``esi-operators``, ``esi-api``, ``esi-sim``, the
second scheduler) and the control plane's (etcd, kube-apiserver, …) — with elapsed time and the rate of runs
since the sample before. At the end, per process: the first sample after ``--warm-up`` of the runs, the last
and the highest, and last / first (the ±10 % criterion). Figures only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from lightkube.generic_resource import create_namespaced_resource
from lightkube.resources.core_v1 import Event, Pod

from bench.jobs import DRIVER_NODE, SPARK, TESTBED_NODE
from bench.processes import cpu_seconds, cpu_table, rss_mib
from bench.stack import Stack, local_stack
from esi.objects.applications import SPARK as SPARK_KIND
from esi.resources.meta import API_VERSION
from infra.local_cluster import NodeSpec
from kube.resources import BatchJobResource, RunResource, SchedulingResource, TestbedResource, plain

NAMESPACE = "default"
OPERATORS = "esi-operators"  # the operators' pid file: their column of resident memory
VARIANTS = {"without": False, "with": True}  # --run-objects: whether each run is written as a Run
TESTBED = "tb"
ISSUE_RUNS = 10_000  # issue 21's soak: memory flat over this many completed runs
ROUND_TIMEOUT = 300.0  # seconds a round's Scheduling may take to complete before the soak gives up
SparkApplicationResource = create_namespaced_resource(
    SPARK_KIND.group, SPARK_KIND.version, SPARK_KIND.kind, SPARK_KIND.plural
)


def _manifest(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec}


@dataclass(frozen=True)
class Sample:
    runs: int
    seconds: float
    rss: Mapping[str, float]


@dataclass(frozen=True)
class Census:
    """The cluster's size where it could grow: objects the runs create and something must delete."""

    pods: int
    applications: int
    schedulings: int
    events: int
    runs: int  # Run objects

    def __str__(self) -> str:
        return (
            f"pods {self.pods:3d}  apps {self.applications:2d}  schedulings {self.schedulings:2d}  "
            f"events {self.events:6d}  runs {self.runs:6d}"
        )


def _census(stack: Stack) -> Census:
    client = stack.client
    return Census(
        pods=sum(1 for _ in client.list(Pod, namespace=NAMESPACE)),
        applications=sum(1 for _ in client.list(SparkApplicationResource, namespace=NAMESPACE)),
        schedulings=sum(1 for _ in client.list(SchedulingResource, namespace=NAMESPACE)),
        events=sum(1 for _ in client.list(Event, namespace=NAMESPACE, chunk_size=500)),
        runs=sum(1 for _ in client.list(RunResource, namespace=NAMESPACE, chunk_size=500)),
    )


def _completed_runs(stack: Stack, scheduling: str) -> tuple[int, Counter[str]]:
    """Runs of every BatchJob that have ended, and the outcomes of the runs of ``scheduling``."""
    total, outcomes = 0, Counter[str]()
    for job in stack.client.list(BatchJobResource, namespace=NAMESPACE):
        status = plain(job).get("status") or {}
        runs = status.get("runs") or []
        total += int(status.get("runCount", 0)) - (1 if runs and runs[-1].get("end") is None else 0)
        outcomes.update(str(run.get("outcome")) for run in runs if run.get("scheduling") == scheduling)
    return total, outcomes


def _wait_until_idle(stack: Stack, slots: int) -> None:
    """Until no Scheduling is left (deleted ones gone too), every BatchJob is Ready (its application deleted)
    and the Testbed is Ready with every slot free."""
    deadline = time.monotonic() + ROUND_TIMEOUT
    client = stack.client
    while True:
        status = plain(client.get(TestbedResource, TESTBED, namespace=NAMESPACE)).get("status") or {}
        idle = (
            status.get("state") == "Ready"
            and (status.get("counts") or {}).get("free") == slots
            and not any(True for _ in client.list(SchedulingResource, namespace=NAMESPACE))
            and not any(True for _ in client.list(SparkApplicationResource, namespace=NAMESPACE))
            and all(
                (plain(job).get("status") or {}).get("state", "Ready") == "Ready"
                for job in client.list(BatchJobResource, namespace=NAMESPACE)
            )
        )
        if idle:
            return
        if time.monotonic() > deadline:
            raise SystemExit(
                f"the stack was not idle (no Scheduling, jobs Ready, {slots} free slots) within {ROUND_TIMEOUT:.0f}s"
            )
        time.sleep(0.5)


def _run_round(api: httpx.Client, name: str, queue: list[str]) -> None:
    """Submit Scheduling ``name`` through the API, follow it there until Completed, delete it there."""
    answer = api.post("/external/schedulings", json={"name": name, "testBed": TESTBED, "queue": queue})
    if answer.status_code != httpx.codes.CREATED:
        raise SystemExit(f"POST /external/schedulings {name}: {answer.status_code} {answer.text}")
    deadline = time.monotonic() + ROUND_TIMEOUT
    while True:
        seen = api.get(f"/external/schedulings/{name}", params={"view": "esi"})
        state = seen.json().get("esiState") if seen.status_code == httpx.codes.OK else None
        if state == "Completed":
            break
        if state == "Failed":
            raise SystemExit(f"Scheduling {name} failed: {seen.text}")
        if time.monotonic() > deadline:
            raise SystemExit(f"Scheduling {name} not completed after {ROUND_TIMEOUT:.0f}s: {seen.text}")
        time.sleep(0.2)
    gone = api.delete(f"/external/schedulings/{name}")
    if gone.status_code != httpx.codes.OK:
        raise SystemExit(f"DELETE /external/schedulings/{name}: {gone.status_code} {gone.text}")


def _sample_line(sample: Sample, before: Sample, census: Census, names: Sequence[str]) -> str:
    rate = (sample.runs - before.runs) / max(sample.seconds - before.seconds, 1e-9)
    memory = "".join(f"{sample.rss.get(n, float('nan')):>{max(len(n), 6) + 2}.1f}" for n in names)
    return f"{sample.runs:7d} {sample.seconds:8.0f} {rate:6.2f}  {census}{memory}"


def _summary(samples: list[Sample], warm_up_runs: int, names: Sequence[str]) -> str:
    settled = [s for s in samples if s.runs >= warm_up_runs] or samples[-1:]
    first, last = settled[0], samples[-1]
    lines = [
        f"\nresident memory (MiB), from the first sample after warm-up ({first.runs} runs) to the last "
        f"({last.runs} runs):",
        f"    {'process':<28} {'first':>8} {'last':>8} {'max':>8} {'last/first':>11}",
    ]
    for name in names:
        if name not in first.rss or name not in last.rss:
            continue
        highest = max(s.rss[name] for s in settled if name in s.rss)
        ratio = last.rss[name] / first.rss[name]
        flat = "within ±10 %" if abs(ratio - 1) <= 0.1 else "OUTSIDE ±10 %"
        lines.append(
            f"    {name:<28} {first.rss[name]:8.1f} {last.rss[name]:8.1f} {highest:8.1f} {ratio:10.3f}  {flat}"
        )
    return "\n".join(lines)


def _ordered(names: Sequence[str]) -> list[str]:
    """esi's processes first, then the control plane's."""
    return sorted(names, key=lambda n: (not n.startswith("esi-"), n))


@dataclass(frozen=True)
class Soak:
    """What one soak measured: its completed runs, in how many seconds, and the operators' resident memory (MiB)
    at the highest and the last of its samples."""

    runs: int
    seconds: float
    operators_peak: float
    operators_end: float

    @property
    def rate(self) -> float:
        return self.runs / self.seconds


def run(
    *,
    runs: int,
    sample_every: int,
    jobs: int,
    executors: int,
    nodes: int,
    per_node: int,
    runtime: float,
    warm_up: float,
    keep_logs: Path | None,
    run_objects: bool = True,
) -> Soak:
    """One soak on a fresh stack; ``run_objects``: each run written as a Run (else the operators keep none)."""
    size = {"cpu": "1", "memory": "1Gi"}
    specs = [NodeSpec(f"tb-{i}", str(per_node), f"{per_node}Gi", labels={TESTBED_NODE: str(i)}) for i in range(nodes)]
    specs.append(NodeSpec("drivers", "64", "256Gi", labels={DRIVER_NODE: "true"}))
    sim = [f"--default-runtime={runtime:g}"]
    operators = () if run_objects else ("--keep-runs=0",)
    with local_stack("bench-soak", specs, sim=sim, operators=operators, keep_logs=keep_logs) as stack:
        client, slots = stack.client, nodes * per_node
        testbed = {"nodeLabel": TESTBED_NODE, "slotsPerNode": per_node, "resourcesPerSlot": size}
        client.create(TestbedResource.from_dict(_manifest("Testbed", TESTBED, testbed)))
        names = [f"soak-{j}" for j in range(jobs)]
        for job in names:
            client.create(BatchJobResource.from_dict(_manifest("BatchJob", job, {"sparkSpec": SPARK})))
        _wait_until_idle(stack, slots)
        queue = [job for job in names for _ in range(executors)]
        print(
            f"\n{jobs} jobs x {executors} executors per round on a Testbed of {nodes} nodes x {per_node} slots; "
            f"runs of {runtime:g}s; a sample every {sample_every} runs, until {runs} runs; "
            f"{'each run kept as a Run' if run_objects else 'no Run objects (--keep-runs 0)'}",
            flush=True,
        )
        headers = {"Authorization": f"Bearer {stack.token}"}
        with httpx.Client(base_url=stack.api_url, headers=headers, timeout=30) as api:
            started, cpu = time.monotonic(), cpu_seconds(stack.cluster.directory)
            samples = [Sample(0, 0.0, rss_mib(stack.cluster.directory))]
            columns = _ordered(list(samples[0].rss))
            census = _census(stack)
            memory_header = "".join(f"{n:>{max(len(n), 6) + 2}}" for n in columns)
            print(
                f"\n{'runs':>7} {'seconds':>8} {'runs/s':>6}  {'cluster':<{len(str(census))}}{memory_header}"
                "   (resident memory, MiB)",
                flush=True,
            )
            print(_sample_line(samples[0], samples[0], census, columns), flush=True)
            completed, outcomes, round_number = 0, Counter[str](), 0
            while completed < runs:
                scheduling = f"round-{round_number}"
                _run_round(api, scheduling, queue)
                completed, this_round = _completed_runs(stack, scheduling)
                outcomes += this_round
                round_number += 1
                if completed >= samples[-1].runs + sample_every or completed >= runs:
                    sample = Sample(completed, time.monotonic() - started, rss_mib(stack.cluster.directory))
                    print(_sample_line(sample, samples[-1], _census(stack), columns), flush=True)
                    samples.append(sample)
            elapsed = time.monotonic() - started
            spent = cpu_table(cpu, cpu_seconds(stack.cluster.directory), elapsed)
        _wait_until_idle(stack, slots)
        told = ", ".join(f"{count} {outcome}" for outcome, count in sorted(outcomes.items()))
        print(
            f"\n{completed} runs in {round_number} rounds, {elapsed:.0f}s: {completed / elapsed:.2f} runs/s "
            f"({told}); {ISSUE_RUNS} runs take {ISSUE_RUNS / (completed / elapsed) / 3600:.1f} h at this rate",
            flush=True,
        )
        print(f"CPU time per component over the {completed} runs:\n{spent}", flush=True)
        print(f"left in the cluster once the last round is released: {_census(stack)}", flush=True)
        print(_summary(samples, int(runs * warm_up), columns), flush=True)
        memory = [s.rss[OPERATORS] for s in samples if OPERATORS in s.rss]
        return Soak(completed, elapsed, max(memory, default=float("nan")), memory[-1] if memory else float("nan"))


def compare(without: Soak, with_runs: Soak) -> str:
    """Both variants' runs/s and the operators' memory, and with / without (issue 45: within 10 %)."""
    lines = [
        "\nRun objects: without (--keep-runs 0) and with (each run kept as a Run)",
        f"    {'':<14} {'runs':>7} {'seconds':>8} {'runs/s':>7} {'operators peak MiB':>19} {'end MiB':>8}",
    ]
    for name, soak in (("without", without), ("with", with_runs)):
        lines.append(
            f"    {name:<14} {soak.runs:7d} {soak.seconds:8.0f} {soak.rate:7.2f} {soak.operators_peak:19.1f} "
            f"{soak.operators_end:8.1f}"
        )
    ratios = (
        with_runs.rate / without.rate,
        with_runs.operators_peak / without.operators_peak,
        with_runs.operators_end / without.operators_end,
    )
    within = "within 10 %" if all(abs(r - 1) <= 0.1 for r in ratios) else "NOT within 10 %"
    lines.append(
        f"    {'with / without':<14} {'':>7} {'':>8} {ratios[0]:7.3f} {ratios[1]:19.3f} {ratios[2]:8.3f}  {within}"
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.soak", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=ISSUE_RUNS, help="completed runs to reach (default: %(default)s)")
    parser.add_argument(
        "--sample-every", type=int, default=500, help="completed runs between samples (default: %(default)s)"
    )
    parser.add_argument("--jobs", type=int, default=8, help="BatchJobs, each run once a round (default: %(default)s)")
    parser.add_argument("--executors", type=int, default=2, help="executors per run (default: %(default)s)")
    parser.add_argument("--nodes", type=int, default=4, help="Testbed nodes (default: %(default)s)")
    parser.add_argument("--slots-per-node", type=int, default=4, help="(default: %(default)s)")
    parser.add_argument(
        "--runtime", type=float, default=0.5, help="seconds a simulated run lasts (default: %(default)s)"
    )
    parser.add_argument(
        "--warm-up",
        type=float,
        default=0.1,
        help="share of --runs before the sample the end compares against (default: %(default)s)",
    )
    parser.add_argument("--keep-logs", type=Path, metavar="DIR", help="copy the components' logs here at the end")
    parser.add_argument(
        "--run-objects",
        choices=["both", *VARIANTS],
        default="both",
        help="soak without Run objects (the operators' --keep-runs 0), with them, or both, one after the other, "
        "and compare (default: %(default)s)",
    )
    args = parser.parse_args()
    if args.executors > args.nodes * args.slots_per_node:
        parser.error("--executors cannot exceed the Testbed's slots (--nodes x --slots-per-node)")
    if not 0 <= args.warm_up < 1:
        parser.error("--warm-up is a share of --runs, from 0 up to (not including) 1")
    soaks = {
        variant: run(
            runs=args.runs,
            sample_every=args.sample_every,
            jobs=args.jobs,
            executors=args.executors,
            nodes=args.nodes,
            per_node=args.slots_per_node,
            runtime=args.runtime,
            warm_up=args.warm_up,
            keep_logs=args.keep_logs / variant if args.keep_logs is not None else None,
            run_objects=run_objects,
        )
        for variant, run_objects in VARIANTS.items()
        if args.run_objects in ("both", variant)
    }
    if len(soaks) == len(VARIANTS):
        print(compare(soaks["without"], soaks["with"]), flush=True)


if __name__ == "__main__":
    main()
