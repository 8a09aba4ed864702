"""Scheduling latency: from a Scheduling's creation until all executors of its job run in their slots.

``python -m bench.jobs [--jobs 30] [--executors 4] [--nodes 4] [--slots-per-node 2] [--no-before]``. A fresh local stack
(``bench.stack``: reconcilers, simulated Spark operator, API with the extender, second scheduler) with a
Testbed of ``--nodes`` full nodes. One job at a time: create a Scheduling for ``--executors`` executors of a
Spark BatchJob and time until every executor pod runs (checked: each in a slot reserved for the job, on that
slot's node); then delete the Scheduling and wait for the Testbed to be Ready again. That is the whole path:
hold, reservation, application, simulated operator, filter, binding in place of the slots' ghosts.

Before, same run (unless ``--no-before``): every trial also once the earlier way — the second scheduler
restarted to count resources and preempt the slot's ghost through the extender, a second cycle per executor —,
alternating with the swap trial by trial. Baseline, same run: after each esi trial, the same number of pods of
the same size pinned (node selector) to the same nodes' twins — empty nodes outside the Testbed — and placed by
the cluster's own kube-scheduler. Prints p50/p99 of each and their ratios. Figures only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from lightkube import Client, KubeConfig
from lightkube.generic_resource import create_namespaced_resource
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Pod

from bench.stack import Stack, local_stack
from esi.objects.applications import SPARK as SPARK_KIND
from esi.objects.names import JOB_ANNOTATION, JOB_LABEL, ROLE_EXECUTOR, ROLE_LABEL, SLOT_ANNOTATION
from esi.resources.meta import API_VERSION
from infra.local_cluster import LocalCluster, NodeSpec
from infra.second_scheduler import SecondScheduler
from kube.resources import SchedulingResource, TestbedResource

TESTBED_NODE = "esi.bench/testbed-node"
TWIN_NODE = "esi.bench/twin-of"
DRIVER_NODE = "esi.bench/drivers"
NAMESPACE = "default"
SPARK = {
    "type": "Scala",
    "sparkVersion": "3.5.0",
    "image": "spark:3.5.0",
    "mainClass": "org.apache.spark.examples.SparkPi",
    "mainApplicationFile": "local:///opt/spark/examples/jars/spark-examples.jar",
    # Drivers are scheduled normally; they get a node of their own so they never crowd the baseline's twins.
    # (esi refuses a driver without an account; a simulated driver needs no rights, so the namespace's default.)
    "driver": {"cores": 1, "memory": "512m", "nodeSelector": {DRIVER_NODE: "true"}, "serviceAccount": "default"},
}


def _wait(what: str, probe: Callable[[], Any], timeout: float = 300, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := probe()):
        if time.monotonic() > deadline:
            raise SystemExit(f"gave up after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)
    return value


@dataclass
class Stages:
    """When (seconds after the start) a trial's job first reached each step (``STAGES``)."""

    seen: dict[str, float] = field(default_factory=dict)

    def record(self, stage: str, seconds: float) -> None:
        self.seen.setdefault(stage, seconds)


# The way from a Scheduling to running executors: its slots reserved in the Testbed's status (holds taken,
# reservation recorded, Testbed reconciled), the SparkApplication made by the BatchJob reconciler, its driver pod
# made and running (simulated operator), then the executors all created (simulated driver), bound, running.
STAGES = ("reserved", "application", "driver created", "driver running", "created", "bound", "running")
SPARK_APPLICATION = create_namespaced_resource(SPARK_KIND.group, SPARK_KIND.version, SPARK_KIND.kind, SPARK_KIND.plural)


class Timeline:
    """Watches (in threads) for the steps before the executors exist; ``follow`` names the trial's job."""

    def __init__(self, kubeconfig: Path) -> None:
        self._kubeconfig = kubeconfig
        self._lock = threading.Lock()
        self._job, self._started, self._stages = "", 0.0, Stages()
        self._apps: set[str] = set()  # the trial's applications
        self._closed = threading.Event()
        for watch in (self._testbeds, self._applications, self._drivers):
            threading.Thread(target=self._quietly, args=(watch,), daemon=True).start()

    def close(self) -> None:
        """The cluster is about to go: its watches may end, without a word."""
        self._closed.set()

    def _quietly(self, watch: Callable[[], None]) -> None:
        try:
            watch()
        except Exception:
            if not self._closed.is_set():
                raise

    def follow(self, job: str, started: float, stages: Stages) -> None:
        with self._lock:
            self._job, self._started, self._stages = job, started, stages

    def _seen(self, stage: str, job: str | None = None, app: str | None = None) -> None:
        with self._lock:
            if (job is not None and job == self._job) or (app is not None and app in self._apps):
                self._stages.record(stage, time.monotonic() - self._started)

    def _events(self, resource: Any, labels: dict[str, Any] | None = None) -> Iterator[Any]:
        client = Client(config=KubeConfig.from_file(self._kubeconfig))
        for _, obj in client.watch(resource, namespace=NAMESPACE, labels=labels):
            yield obj

    def _testbeds(self) -> None:
        for testbed in self._events(TestbedResource):
            for slot in (testbed.status or {}).get("slots", []):
                if slot.get("state") == "Reserved" and slot.get("job"):
                    self._seen("reserved", job=slot["job"])

    def _applications(self) -> None:
        for app in self._events(SPARK_APPLICATION):
            job = (app.metadata.annotations or {}).get(JOB_ANNOTATION)
            with self._lock:
                if job == self._job:
                    self._apps.add(app.metadata.name)
            self._seen("application", job=job)

    def _drivers(self) -> None:
        for pod in self._events(Pod, {"spark-role": "driver"}):
            app = (pod.metadata.labels or {}).get(SPARK_KIND.pod_label)
            self._seen("driver created", app=app)
            if pod.status is not None and pod.status.phase == "Running":
                self._seen("driver running", app=app)


def _running(
    client: Client, labels: dict[str, str], count: int, stages: Stages | None = None, started: float = 0.0
) -> list[Pod] | None:
    listed = [
        p
        for p in client.list(Pod, namespace=NAMESPACE, labels=labels)  # type: ignore[arg-type]
        if p.metadata and not p.metadata.deletionTimestamp
    ]
    pods = [p for p in listed if p.status is not None and p.status.phase == "Running"]
    if stages is not None and len(listed) >= count:
        stages.record("created", time.monotonic() - started)
        if sum(1 for p in listed if p.spec is not None and p.spec.nodeName) >= count:
            stages.record("bound", time.monotonic() - started)
    return pods if len(pods) >= count else None


def _testbed_status(cluster: LocalCluster) -> dict[str, Any]:
    out = cluster.kubectl("get", "testbed", "tb", "-n", NAMESPACE, "-o", "jsonpath={.status}")
    found: dict[str, Any] = json.loads(out) if out else {}
    return found


def _create(cluster: LocalCluster, manifest: dict[str, Any]) -> None:
    cluster.kubectl("create", "-n", NAMESPACE, "-f", "-", input_text=json.dumps(manifest))


def _percentiles(samples: list[float]) -> tuple[float, float]:
    if len(samples) < 2:
        return samples[0], samples[0]
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return cuts[49], cuts[98]


def _baseline(client: Client, nodes: list[str], trial: str) -> float:
    """Seconds until plain pods, pinned to the twins of ``nodes``, run under the default scheduler."""
    label = f"baseline-{trial}"
    size = {"cpu": "1", "memory": "1Gi"}
    started = time.monotonic()
    for i, node in enumerate(nodes):
        manifest = {
            "metadata": {"name": f"{label}-{i}", "namespace": NAMESPACE, "labels": {"bench": label}},
            "spec": {
                "nodeSelector": {TWIN_NODE: node},
                "terminationGracePeriodSeconds": 0,
                "containers": [{"name": "main", "image": "pause", "resources": {"requests": size, "limits": size}}],
            },
        }
        client.create(cast(Pod, Pod.from_dict(manifest)))
    _wait("baseline pods to run", lambda: _running(client, {"bench": label}, len(nodes)))
    seconds = time.monotonic() - started
    for i in range(len(nodes)):
        client.delete(Pod, f"{label}-{i}", namespace=NAMESPACE, grace_period=0)
    return seconds


def _trial(
    stack: Stack, timeline: Timeline, job: str, executors: int, slot_nodes: dict[int, str]
) -> tuple[float, list[str], Stages]:
    """One job's Scheduling until all its executors run in their slots: seconds, the nodes they ran on, and
    when its executors were all created and all bound on the way (hold, reservation, application, simulated
    operator and driver before the first; filter and binding before the second)."""
    cluster, client = stack.cluster, stack.client
    _create(cluster, {"apiVersion": API_VERSION, "kind": "BatchJob", "metadata": {"name": job},
                      "spec": {"sparkSpec": SPARK}})  # fmt: skip
    spec = {"testbed": {"name": "tb"}, "queueBased": [{"name": job}] * executors}
    scheduling = SchedulingResource(metadata=ObjectMeta(name=job, namespace=NAMESPACE), spec=spec)
    stages = Stages()
    started = time.monotonic()  # the Scheduling is sent by this process's client, as the baseline's pods are
    timeline.follow(job, started, stages)
    client.create(scheduling)
    selector = {ROLE_LABEL: ROLE_EXECUTOR, JOB_LABEL: job}
    pods: list[Pod] = _wait(
        f"the executors of {job} to run", lambda: _running(client, selector, executors, stages, started)
    )
    seconds = time.monotonic() - started
    stages.record("running", seconds)
    placed = []
    for pod in pods:
        assert pod.metadata is not None
        assert pod.metadata.labels is not None
        assert pod.spec is not None
        slot, node = int((pod.metadata.annotations or {})[SLOT_ANNOTATION]), str(pod.spec.nodeName)
        if node != slot_nodes[slot]:
            raise SystemExit(f"{pod.metadata.name} in slot {slot} ran on {node}, not {slot_nodes[slot]}")
        placed.append(node)
    return seconds, placed, stages


def _scheduler(cluster: LocalCluster, running: SecondScheduler, *, swap: bool) -> SecondScheduler:
    """esi's second scheduler (``running``) restarted the way asked: swap at binding, or the earlier path."""
    running.stop()
    settings = dataclasses.replace(running.settings, bind_verb="bind" if swap else None)
    scheduler = SecondScheduler(cluster, settings)
    scheduler.start()
    return scheduler


def _summary(name: str, seconds: list[float], base_seconds: list[float]) -> str:
    p50, p99 = _percentiles(seconds)
    base_p50, base_p99 = _percentiles(base_seconds)
    return (
        f"  {name:<46} p50 {p50:.2f}s  p99 {p99:.2f}s   baseline p50 {base_p50:.2f}s  p99 {base_p99:.2f}s"
        f"   ratio p50 x{p50 / base_p50:.1f}  p99 x{p99 / base_p99:.1f}"
    )


def _gone(client: Client, job: str) -> bool:
    """No executor pod of ``job`` is left."""
    labels: dict[str, Any] = {ROLE_LABEL: ROLE_EXECUTOR, JOB_LABEL: job}
    return not list(client.list(Pod, namespace=NAMESPACE, labels=labels))


def _stages(trials: list[Stages]) -> str:
    """p50 of when each stage was reached, over the trials."""
    parts = []
    for stage in STAGES:
        times = [t.seen[stage] for t in trials if stage in t.seen]
        if times:
            parts.append(f"{stage} {statistics.median(times):.2f}s")
    return "    reached (p50, seconds after the Scheduling's creation): " + ", ".join(parts)


def run(jobs: int, executors: int, nodes: int, per_node: int, keep_logs: Path | None, *, before: bool) -> None:
    size = {"cpu": "1", "memory": "1Gi"}
    cpu, memory = str(per_node), f"{per_node}Gi"
    specs = [NodeSpec(f"tb-{i}", cpu, memory, labels={TESTBED_NODE: str(i)}) for i in range(nodes)]
    specs += [NodeSpec(f"twin-{i}", cpu, memory, labels={TWIN_NODE: f"tb-{i}"}) for i in range(nodes)]
    specs.append(NodeSpec("drivers", "64", "256Gi", labels={DRIVER_NODE: "true"}))
    # Long runs: the executors are still running when they are counted; the Scheduling's deletion ends them.
    with local_stack("bench-jobs", specs, sim=["--default-runtime=600"], keep_logs=keep_logs) as stack:
        cluster, client = stack.cluster, stack.client
        testbed = {"nodeLabel": TESTBED_NODE, "slotsPerNode": per_node, "resourcesPerSlot": size}
        _create(cluster, {"apiVersion": API_VERSION, "kind": "Testbed", "metadata": {"name": "tb"}, "spec": testbed})
        _wait("the Testbed to be Ready", lambda: _testbed_status(cluster).get("state") == "Ready", timeout=300)
        slot_nodes = {s["id"]: s["nodeName"] for s in _testbed_status(cluster)["slots"]}
        # Trial by trial, alternating swap and earlier path when both run, so that a machine busy for a while
        # weighs on both alike; the scheduler is restarted between them (not timed).
        paths = [True, False] if before else [True]
        seconds: dict[bool, list[float]] = {swap: [] for swap in paths}
        base_seconds: dict[bool, list[float]] = {swap: [] for swap in paths}
        stages: dict[bool, list[Stages]] = {swap: [] for swap in paths}
        scheduler = stack.scheduler
        with contextlib.closing(Timeline(cluster.kubeconfig)) as timeline:
            for trial in range(jobs):
                for swap in paths:
                    if before:
                        scheduler = _scheduler(cluster, scheduler, swap=swap)
                    job = f"job-{trial}{'' if swap else '-before'}"
                    esi, placed, seen = _trial(stack, timeline, job, executors, slot_nodes)
                    seconds[swap].append(esi)
                    stages[swap].append(seen)
                    base_seconds[swap].append(_baseline(client, placed, f"{trial}-{int(swap)}"))
                    path = "swap" if swap else "before"
                    print(f"  {job}: esi ({path}) {esi:5.2f}s   baseline {base_seconds[swap][-1]:5.2f}s", flush=True)
                    cluster.kubectl("delete", "-n", NAMESPACE, "scheduling", job, "--wait=true", "--timeout=120s")
                    # Its executors hold their slots until they are gone (the next job's would be refused until then).
                    _wait(f"the executors of {job} to be gone", lambda: _gone(client, job))  # noqa: B023
                    _wait(
                        "the Testbed to be Ready again",
                        lambda: _testbed_status(cluster).get("counts", {}).get("free") == nodes * per_node,
                    )
        print(
            f"\n{jobs} jobs x {executors} executors, Testbed {nodes} nodes x {per_node} slots (full nodes), "
            f"{os.cpu_count()} cores, KWOK nodes; Scheduling created -> all executors running in their slots, "
            "against pinned pods by the default kube-scheduler right after each:"
        )
        print(_summary("esi, swap at binding (filter + bind):", seconds[True], base_seconds[True]))
        print(_stages(stages[True]))
        if before:
            print(_summary("esi, earlier path (filter + preemption round):", seconds[False], base_seconds[False]))
            print(_stages(stages[False]))
            (swap50, swap99), (before50, before99) = _percentiles(seconds[True]), _percentiles(seconds[False])
            print(f"  ratio swap / earlier path: p50 x{swap50 / before50:.2f}  p99 x{swap99 / before99:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.jobs", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=30, help="trials, one job each (default: %(default)s)")
    parser.add_argument("--executors", type=int, default=4, help="executors per job (default: %(default)s)")
    parser.add_argument("--nodes", type=int, default=4, help="Testbed nodes (default: %(default)s)")
    parser.add_argument("--slots-per-node", type=int, default=2, help="(default: %(default)s)")
    parser.add_argument("--keep-logs", type=Path, metavar="DIR", help="copy the components' logs here at the end")
    parser.add_argument(
        "--no-before", dest="before", action="store_false", help="leave out the earlier path (preemption round)"
    )
    args = parser.parse_args()
    if args.executors > args.nodes * args.slots_per_node:
        parser.error("--executors cannot exceed the Testbed's slots (--nodes x --slots-per-node)")
    run(args.jobs, args.executors, args.nodes, args.slots_per_node, args.keep_logs, before=args.before)


if __name__ == "__main__":
    main()
