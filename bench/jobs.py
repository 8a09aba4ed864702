"""Scheduling latency: from a Scheduling's creation until all executors of its job run in their slots.

``python -m bench.jobs [--jobs 30] [--executors 4] [--nodes 4] [--slots-per-node 2] [--no-before]``. A fresh local stack
(``bench.stack``: reconcilers, simulated Spark operator, API with the extender, second scheduler) with a
Testbed of ``--nodes`` full nodes. One job at a time: register a Spark BatchJob (Ready before the clock starts: a
recurring application is registered once), create a Scheduling for ``--executors`` executors of it and time until
every executor pod runs (checked: each in a slot reserved for the job, on that slot's node); then delete the
Scheduling and wait for the Testbed to be Ready again. That is the whole path: hold, reservation, application,
simulated operator, filter, binding in place of the slots' ghosts. Every step is timed as its watch event
arrives (the benchmark lists nothing while a trial runs).

Before, same run (unless ``--no-before``): every trial also once the earlier way — the second scheduler
restarted to count resources and preempt the slot's ghost through the extender, a second cycle per executor —,
alternating with the swap trial by trial. Two baselines, same run. Pinned pods: after each esi trial, the same
number of pods of the same size pinned (node selector) to the same nodes' twins — empty nodes outside the Testbed —
and placed by the cluster's own kube-scheduler: the executors' placement alone. The job without esi: once the
Testbed is Ready again, the same Spark application submitted directly — its driver by the same simulated operator,
its executors (same size and count) by the simulated driver onto the twins, all placed by the cluster's own
kube-scheduler — timed from the SparkApplication's creation until all its executors run: the same way from
submission to running executors, without esi. Prints p50/p99 of each and their ratios, and what the trials of esi
(swap) and of the job without esi cost while they ran: each component's CPU time, the writes the API server
answered and the watch events it sent, per job. Figures only; nothing is asserted.
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
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from lightkube import Client, KubeConfig
from lightkube.generic_resource import create_namespaced_resource
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Pod

from bench.apiserver import api_requests, request_table
from bench.histograms import extender_buckets, handler_times
from bench.processes import cpu_seconds, cpu_table
from bench.stack import Stack, local_stack
from bench.waiting import wait_until
from esi.objects.applications import SPARK as SPARK_KIND
from esi.objects.applications import application_pod_selector
from esi.objects.names import JOB_ANNOTATION, JOB_LABEL, ROLE_EXECUTOR, ROLE_LABEL, SLOT_ANNOTATION
from esi.resources.meta import API_VERSION
from infra.local_cluster import LocalCluster, NodeSpec
from infra.stacks.second_scheduler import SecondScheduler
from kube.resources import BatchJobResource, SchedulingResource, TestbedResource

TESTBED_NODE = "esi.bench/testbed-node"
TWIN_NODE = "esi.bench/twin-of"
TWINS = "esi.bench/twin"  # on every twin: where the job without esi may put its executors
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


def _wait(what: str, probe: Callable[[], Any], timeout: float = 300) -> Any:
    """``wait_until``, asking often: the benchmark times what it waits for."""
    return wait_until(what, probe, timeout, interval=0.05)


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
    """Watches (in threads) a trial's way: the steps before its pods exist, then its pods (``follow`` says which)
    until ``count`` of them run — each step timed when its event arrives, with no listing in between."""

    def __init__(self, kubeconfig: Path) -> None:
        self._kubeconfig = kubeconfig
        self._lock = threading.Lock()
        self._job, self._started, self._stages = "", 0.0, Stages()
        self._apps: set[str] = set()  # the trial's applications
        self._counted: Callable[[dict[str, str]], bool] = lambda _: False
        self._count = 0
        self._pods: dict[str, Pod] = {}  # the counted pods, by name
        self._done = threading.Event()
        self._closed = threading.Event()
        for watch in (self._testbeds, self._applications, self._pod_events):
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

    def follow(
        self, started: float, count: int, counted: Callable[[dict[str, str]], bool], *, job: str = "", app: str = ""
    ) -> Stages:
        """Follow a trial started at ``started``: the pods whose labels are ``counted`` until ``count`` of them
        run; the steps of ``job`` (its applications found by their job annotation) or of ``app``."""
        with self._lock:
            self._job, self._started, self._stages = job, started, Stages()
            self._apps = {app} if app else set()
            self._counted, self._count, self._pods = counted, count, {}
            self._done.clear()
            return self._stages

    def running(self, what: str, timeout: float = 300) -> list[Pod]:
        """The followed pods, once ``count`` of them run."""
        if not self._done.wait(timeout):
            raise SystemExit(f"gave up after {timeout:.0f}s waiting for {what}")
        with self._lock:
            return [pod for pod in self._pods.values() if _runs(pod)]

    def _seen(self, stage: str, job: str | None = None, app: str | None = None) -> None:
        with self._lock:
            if (job is not None and job == self._job) or (app is not None and app in self._apps):
                self._stages.record(stage, time.monotonic() - self._started)

    def _events(self, resource: Any) -> Iterator[tuple[str, Any]]:
        client = Client(config=KubeConfig.from_file(self._kubeconfig))
        yield from client.watch(resource, namespace=NAMESPACE)

    def _testbeds(self) -> None:
        for _, testbed in self._events(TestbedResource):
            for slot in (testbed.status or {}).get("slots", []):
                if slot.get("state") == "Reserved" and slot.get("job"):
                    self._seen("reserved", job=slot["job"])

    def _applications(self) -> None:
        for _, app in self._events(SPARK_APPLICATION):
            job = (app.metadata.annotations or {}).get(JOB_ANNOTATION)
            with self._lock:
                if job is not None and job == self._job:
                    self._apps.add(app.metadata.name)
            self._seen("application", job=job)

    def _pod_events(self) -> None:
        for kind, pod in self._events(Pod):
            labels = pod.metadata.labels or {}
            if labels.get("spark-role") == "driver":
                app = labels.get(SPARK_KIND.pod_label)
                self._seen("driver created", app=app)
                if _runs(pod):
                    self._seen("driver running", app=app)
            with self._lock:
                if self._counted(labels):
                    self._count_pod(kind, pod)

    def _count_pod(self, kind: str, pod: Pod) -> None:
        """Record a counted pod's event, and the steps it completes (the lock held)."""
        assert pod.metadata is not None
        name = str(pod.metadata.name)
        if kind == "DELETED" or pod.metadata.deletionTimestamp:
            self._pods.pop(name, None)
            return
        self._pods[name] = pod
        pods, at = self._pods.values(), time.monotonic() - self._started
        if len(pods) >= self._count:
            self._stages.record("created", at)
        if sum(1 for p in pods if p.spec is not None and p.spec.nodeName) >= self._count:
            self._stages.record("bound", at)
        if sum(1 for p in pods if _runs(p)) >= self._count:
            self._stages.record("running", at)
            self._done.set()


def _runs(pod: Pod) -> bool:
    deleting = pod.metadata is not None and pod.metadata.deletionTimestamp
    return pod.status is not None and pod.status.phase == "Running" and not deleting


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


def _baseline(client: Client, timeline: Timeline, nodes: list[str], trial: str) -> float:
    """Seconds until plain pods, pinned to the twins of ``nodes``, run under the default scheduler."""
    label = f"baseline-{trial}"
    size = {"cpu": "1", "memory": "1Gi"}
    started = time.monotonic()
    stages = timeline.follow(started, len(nodes), lambda labels: labels.get("bench") == label)
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
    timeline.running("baseline pods to run")
    seconds = stages.seen["running"]
    for i in range(len(nodes)):
        client.delete(Pod, f"{label}-{i}", namespace=NAMESPACE, grace_period=0)
    _wait("baseline pods to be gone", lambda: _gone(client, {"bench": label}))
    return seconds


def _job_without_esi(
    client: Client, timeline: Timeline, name: str, executors: int, twins: set[str]
) -> tuple[float, Stages]:
    """Seconds from a SparkApplication's creation until its ``executors`` run on twin nodes — the same job as
    esi's trials (driver, executors of a slot's size), submitted directly and placed by the default
    kube-scheduler; and when it reached each step."""
    spec = {
        **SPARK,
        # Spark makes the executor pod request memory + overhead: 640 + 384 MiB, the slot's 1 GiB (as esi sizes them).
        "executor": {"instances": executors, "cores": 1, "memory": "640m", "memoryOverhead": "384m"},
        "sparkConf": {f"spark.kubernetes.executor.node.selector.{TWINS}": "true"},
    }
    selector: dict[str, str] = {**application_pod_selector(SPARK_KIND, name), "spark-role": "executor"}
    started = time.monotonic()
    stages = timeline.follow(started, executors, lambda labels: selector.items() <= labels.items(), app=name)
    client.create(SPARK_APPLICATION(metadata=ObjectMeta(name=name, namespace=NAMESPACE), spec=spec))
    pods = timeline.running(f"the executors of {name} to run")
    seconds = stages.seen["running"]
    for pod in pods:
        assert pod.metadata is not None
        assert pod.spec is not None
        if pod.spec.nodeName not in twins:
            raise SystemExit(f"{pod.metadata.name} of {name} ran on {pod.spec.nodeName}, not on a twin node")
    return seconds, stages


def _remove_application(client: Client, name: str) -> None:
    """Delete application ``name`` and wait for its pods to be gone (the garbage collector removes them; the
    next trial's pinned pods need the twins free)."""
    client.delete(SPARK_APPLICATION, name, namespace=NAMESPACE)
    app_pods = application_pod_selector(SPARK_KIND, name)
    _wait(f"the pods of {name} to be gone", lambda: _gone(client, app_pods))


def _register(cluster: LocalCluster, client: Client, job: str) -> None:
    """A BatchJob for ``job``, Ready: a recurring application is registered once, before its Scheduling."""
    _create(cluster, {"apiVersion": API_VERSION, "kind": "BatchJob", "metadata": {"name": job},
                      "spec": {"sparkSpec": SPARK}})  # fmt: skip

    def state() -> str | None:
        status = cast(dict[str, Any], client.get(BatchJobResource, job, namespace=NAMESPACE).status or {})
        found: str | None = status.get("state")
        return found

    _wait(f"BatchJob {job} to be Ready", lambda: state() == "Ready")


def _trial(
    stack: Stack, timeline: Timeline, job: str, executors: int, slot_nodes: dict[int, str]
) -> tuple[float, list[str], Stages]:
    """One job's Scheduling until all its executors run in their slots: seconds, the nodes they ran on, and
    when its executors were all created and all bound on the way (hold, reservation, application, simulated
    operator and driver before the first; filter and binding before the second)."""
    client = stack.client
    spec = {"testbed": {"name": "tb"}, "queueBased": [{"name": job}] * executors}
    scheduling = SchedulingResource(metadata=ObjectMeta(name=job, namespace=NAMESPACE), spec=spec)
    selector = _executors_of(job)
    started = time.monotonic()  # the Scheduling is sent by this process's client, as the baseline's pods are
    stages = timeline.follow(started, executors, lambda labels: selector.items() <= labels.items(), job=job)
    client.create(scheduling)
    pods = timeline.running(f"the executors of {job} to run")
    seconds = stages.seen["running"]
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


class Spent:
    """What the windows ``add`` measured cost: each component's CPU seconds, the writes the API server answered
    and the watch events it sent; and the windows' count and wall time."""

    def __init__(self, cluster: LocalCluster) -> None:
        self._cluster = cluster
        self.seconds: dict[str, float] = {}
        self.requests: dict[str, float] = {}
        self.windows, self.wall = 0, 0.0

    @contextlib.contextmanager
    def add(self) -> Iterator[None]:
        # The API server's metrics are read outside the CPU window (kubectl's request costs it CPU).
        requests = api_requests(self._cluster)
        before, started = cpu_seconds(self._cluster.directory, with_benchmark=True), time.monotonic()
        yield
        self.wall += time.monotonic() - started
        self.windows += 1
        for name, seconds in cpu_seconds(self._cluster.directory, with_benchmark=True).items():
            self.seconds[name] = self.seconds.get(name, 0.0) + seconds - before.get(name, 0.0)
        for key, count in api_requests(self._cluster).items():
            self.requests[key] = self.requests.get(key, 0.0) + count - requests.get(key, 0.0)

    def table(self) -> str:
        return "\n".join(
            (cpu_table({}, self.seconds, self.wall), request_table({}, self.requests, self.windows, "job"))
        )


def _executors_of(job: str) -> dict[str, str]:
    """The labels of esi's executor pods of ``job``."""
    return {ROLE_LABEL: ROLE_EXECUTOR, JOB_LABEL: job}


def _gone(client: Client, labels: Mapping[str, str]) -> bool:
    """No pod with ``labels`` is left."""
    return not list(client.list(Pod, namespace=NAMESPACE, labels=dict(labels)))


def _stages(trials: list[Stages], start: str = "the Scheduling's") -> str:
    """p50 of when each stage was reached, over the trials."""
    parts = []
    for stage in STAGES:
        times = [t.seen[stage] for t in trials if stage in t.seen]
        if times:
            parts.append(f"{stage} {statistics.median(times):.2f}s")
    return f"    reached (p50, seconds after {start} creation): " + ", ".join(parts)


@dataclass
class Measured:
    """One way of starting the jobs: seconds and steps per trial, the pinned pods' seconds after each (esi's
    ways), and what they cost while they started."""

    spent: Spent
    seconds: list[float] = field(default_factory=list)
    stages: list[Stages] = field(default_factory=list)
    pinned: list[float] = field(default_factory=list)


def _report(measured: dict[str, Measured], jobs: int) -> None:
    swap, bare = measured["swap"], measured["bare"]
    print(_summary("esi, swap at binding (filter + bind):", swap.seconds, swap.pinned))
    print(_stages(swap.stages))
    (bare50, bare99), (swap50, swap99) = _percentiles(bare.seconds), _percentiles(swap.seconds)
    print(
        f"  {'the job without esi (application -> running):':<46} p50 {bare50:.2f}s  p99 {bare99:.2f}s"
        f"   esi (swap) / without esi: p50 x{swap50 / bare50:.1f}  p99 x{swap99 / bare99:.1f}"
    )
    print(_stages(bare.stages, "the SparkApplication's"))
    print(f"  CPU time per component and the API server's writes while esi's {jobs} jobs (swap) started:")
    print(swap.spent.table())
    print(f"  the same while the {jobs} jobs without esi started:")
    print(bare.spent.table())
    if (earlier := measured.get("before")) is not None:
        print(_summary("esi, earlier path (filter + preemption round):", earlier.seconds, earlier.pinned))
        print(_stages(earlier.stages))
        before50, before99 = _percentiles(earlier.seconds)
        print(f"  ratio swap / earlier path: p50 x{swap50 / before50:.2f}  p99 x{swap99 / before99:.2f}")
        print(f"  the same while esi's {jobs} jobs took the earlier path:")
        print(earlier.spent.table())


def run(jobs: int, executors: int, nodes: int, per_node: int, keep_logs: Path | None, *, before: bool) -> None:
    size = {"cpu": "1", "memory": "1Gi"}
    cpu, memory = str(per_node), f"{per_node}Gi"
    specs = [NodeSpec(f"tb-{i}", cpu, memory, labels={TESTBED_NODE: str(i)}) for i in range(nodes)]
    specs += [NodeSpec(f"twin-{i}", cpu, memory, labels={TWIN_NODE: f"tb-{i}", TWINS: "true"}) for i in range(nodes)]
    specs.append(NodeSpec("drivers", "64", "256Gi", labels={DRIVER_NODE: "true"}))
    twins = {spec.name for spec in specs if TWINS in spec.labels}
    # Long runs: the executors are still running when they are counted; the Scheduling's deletion ends them.
    with local_stack("bench-jobs", specs, sim=["--default-runtime=600"], keep_logs=keep_logs) as stack:
        cluster, client = stack.cluster, stack.client
        testbed = {"nodeLabel": TESTBED_NODE, "slotsPerNode": per_node, "resourcesPerSlot": size}
        _create(cluster, {"apiVersion": API_VERSION, "kind": "Testbed", "metadata": {"name": "tb"}, "spec": testbed})
        _wait("the Testbed to be Ready", lambda: _testbed_status(cluster).get("state") == "Ready", timeout=300)
        slot_nodes = {s["id"]: s["nodeName"] for s in _testbed_status(cluster)["slots"]}
        # Trial by trial, alternating swap and earlier path when both run, so that a machine busy for a while
        # weighs on both alike; the scheduler is restarted between them (not timed).
        paths = ["swap", "before"] if before else ["swap"]
        measured = {path: Measured(Spent(cluster)) for path in [*paths, "bare"]}
        scheduler, extender = stack.scheduler, extender_buckets(stack.api_url)
        with contextlib.closing(Timeline(cluster.kubeconfig)) as timeline:
            for trial in range(jobs):
                for path in paths:
                    if before:
                        scheduler = _scheduler(cluster, scheduler, swap=path == "swap")
                    job, way = f"job-{trial}{'' if path == 'swap' else '-before'}", measured[path]
                    _register(cluster, client, job)
                    with way.spent.add():
                        esi, placed, seen = _trial(stack, timeline, job, executors, slot_nodes)
                    way.seconds.append(esi)
                    way.stages.append(seen)
                    way.pinned.append(_baseline(client, timeline, placed, f"{trial}-{path}"))
                    print(f"  {job}: esi ({path}) {esi:5.2f}s   baseline {way.pinned[-1]:5.2f}s", flush=True)
                    cluster.kubectl("delete", "-n", NAMESPACE, "scheduling", job, "--wait=true", "--timeout=120s")
                    # Its executors hold their slots until they are gone (the next job's would be refused until then).
                    _wait(f"the executors of {job} to be gone", lambda: _gone(client, _executors_of(job)))  # noqa: B023
                    _wait(
                        "the Testbed to be Ready again",
                        lambda: _testbed_status(cluster).get("counts", {}).get("free") == nodes * per_node,
                    )
                bare, name = measured["bare"], f"bare-{trial}"
                with bare.spent.add():
                    seconds, seen = _job_without_esi(client, timeline, name, executors, twins)
                _remove_application(client, name)
                bare.seconds.append(seconds)
                bare.stages.append(seen)
                print(f"  {name}: the job without esi {seconds:5.2f}s", flush=True)
        print(
            f"\n{jobs} jobs x {executors} executors, Testbed {nodes} nodes x {per_node} slots (full nodes), "
            f"{os.cpu_count()} cores, KWOK nodes; Scheduling created -> all executors running in their slots, "
            "against pinned pods by the default kube-scheduler right after each:"
        )
        _report(measured, jobs)
        print("  extender handler time over esi's trials (its calls come from esi's executors alone):")
        print(handler_times(extender, extender_buckets(stack.api_url)))


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
