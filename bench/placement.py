"""Executor placement throughput: pods/s put into their slots by the second scheduler through esi's extender.

``python -m bench.placement [--nodes 50] [--slots-per-node 4] [--qps 200] [--burst 400] [--creators 8]``.
Creates a fresh local cluster (real control plane, KWOK nodes) and runs, as processes: the Testbed reconciler
(``python -m operators``), the API with the extender (``python -m api``) and two kube-schedulers with the
same client qps/burst — esi's second scheduler calling the extender (filter + bind), a plain one without
extender as the baseline, unless ``--no-one-scheduler`` one with an ordinary pods' profile beside esi's (one scheduler
for both, docs/design.md#one-scheduler-for-both) and, unless ``--no-before``, one configured the earlier way (filter +
preempt).

esi run: a Testbed of ``--nodes`` full nodes (every slot's ghost fills its node), job k reserved the slots
of node k, and its executors are pinned there as esi pins executors (node affinity to their slots' nodes by
label and by name, ``esi.objects.applications.slot_node_affinity``); all executors are created at once
(``--creators`` threads, as many Spark drivers would create theirs) and the clock stops when every one runs.
Each needs the extender's filter answer and its bind call, which deletes the slot's ghost and binds the
executor. One-scheduler run: the same on a Testbed of its own whose nodes advertise their slots, each executor
requesting one, placed by esi's profile of a scheduler that runs an ordinary profile too. Before run:
the same on a Testbed of its own, each executor needing a preemption of its slot's ghost, the ghost's
deletion and a second scheduling cycle. Baseline run, same process: the same number of pods, same sizes,
pinned the same way to as many empty nodes, placed by the plain scheduler (one cycle, nothing to
evict). Floor run, unless ``--no-floor``: the same executors on a third Testbed, each placed at its creation —
the creating thread deletes its slot's ghost, then creates the executor with its node and slot already set, as a
mutating admission webhook could at best (without the webhook's own round trip and decision); no scheduler takes
part. It is the least any placement costs that removes a ghost pod per executor. Every esi executor is checked:
on its job's node, in one of its job's slots, no slot twice; a pod its node refuses ends the run. Prints figures
only.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from lightkube import ApiError, Client, KubeConfig
from lightkube.core.client import LabelValue
from lightkube.resources.core_v1 import NodeStatus, Pod
from lightkube.types import PatchType

from bench.apiserver import api_requests, request_table
from bench.histograms import extender_buckets, handler_times, scheduler_buckets
from bench.processes import cpu_seconds, cpu_table
from bench.stack import Stack, local_stack
from bench.waiting import wait_until
from esi.objects.applications import slot_node_affinity
from esi.objects.names import (
    EXECUTOR_PRIORITY_CLASS,
    JOB_LABEL,
    ROLE_EXECUTOR,
    ROLE_GHOST,
    ROLE_LABEL,
    SCHEDULER_NAME,
    SLOT_ANNOTATION,
    TESTBED_LABEL,
    slot_of,
)
from esi.objects.slot_resource import advertised_slots, requesting_a_slot
from esi.resources.meta import API_VERSION
from infra.local_cluster import NodeSpec
from infra.stacks.second_scheduler import SecondScheduler, SecondSchedulerSettings
from kube.errors import Refusal, refusal
from kube.resources import PodObjects, plain


@dataclass(frozen=True)
class Pool:
    """The nodes of one run: node k is named ``<prefix>-<k>`` and carries ``label: k``."""

    label: str
    prefix: str

    def node(self, k: int) -> str:
        return f"{self.prefix}-{k}"

    def specs(self, nodes: int, cpu: str, memory: str) -> list[NodeSpec]:
        return [NodeSpec(self.node(k), cpu, memory, labels={self.label: str(k)}) for k in range(nodes)]

    def affinity(self, k: int) -> dict[str, Any]:
        """Pinned to node k as esi pins an executor to its slots' nodes: by label and by name."""
        return slot_node_affinity(None, node_label=self.label, node_ids=(str(k),), node_names=(self.node(k),))


TESTBED = Pool("esi.bench/testbed-node", "tb")
BASELINE = Pool("esi.bench/baseline-node", "base")
BEFORE = Pool("esi.bench/before-node", "before")
FLOOR = Pool("esi.bench/floor-node", "floor")
ONE = Pool("esi.bench/one-node", "one")
ONE_SCHEDULER = "esi-one"  # esi's profile in a scheduler that runs the ordinary pods' profile too
ORDINARY_PROFILE = "bench-ordinary"
PREEMPTING = "esi-preempting"  # the second scheduler the earlier way: it counts resources and preempts the ghost
NAMESPACE = "default"
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"


def _pod(
    name: str,
    scheduler: str,
    affinity: dict[str, Any],
    labels: dict[str, str],
    priority: str | None,
    *,
    slot: bool = False,
) -> Pod:
    """One slot's size (``slot``: and one slot of the slot resource)."""
    size = {"cpu": "1", "memory": "1Gi"}
    resources: dict[str, Any] = {"requests": size, "limits": size}
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "affinity": affinity,
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {"name": "main", "image": PAUSE_IMAGE, "resources": requesting_a_slot(resources) if slot else resources}
        ],
    }
    if priority is not None:
        spec["priorityClassName"] = priority
    manifest: dict[str, Any] = {"metadata": {"name": name, "namespace": NAMESPACE, "labels": labels}, "spec": spec}
    return cast(Pod, Pod.from_dict(manifest))


Creation = Callable[[Client, Pod], None]


def _plain_creation(client: Client, pod: Pod) -> None:
    client.create(pod)


def _create(kubeconfig: Path, pods: list[Pod], creators: int, creation: Creation) -> None:
    """Create ``pods`` from ``creators`` threads at once, each with a client of its own (as many drivers
    would); thread k creates pods k, k + creators, ..."""

    def create_share(share: list[Pod]) -> None:
        client = Client(KubeConfig.from_file(kubeconfig), field_manager="esi-bench")
        try:
            for manifest in share:
                creation(client, manifest)
        finally:
            client.close()

    with ThreadPoolExecutor(creators) as pool:
        for created in [pool.submit(create_share, pods[k::creators]) for k in range(creators)]:
            created.result()


def _place(stack: Stack, pods: list[Pod], run: str, creators: int, creation: Creation) -> tuple[float, list[Pod]]:
    """Create ``pods`` (each labelled ``bench: run``) at once; seconds until all run, and the pods.

    Their phases are followed by a WATCH of the run's pods, read as plain dicts: polling a LIST of them would cost
    the API server (and this process, on the same cores) a serialized copy of every pod several times a second.
    The watch starts from the version listed before the pods were created; when their creation took longer than
    the API server keeps events (410 Gone), it lists them again and watches on from there."""
    client = stack.client
    selector: dict[str, LabelValue] = {"bench": run}
    started = time.monotonic()
    running, version = _running(client, selector)
    _create(stack.cluster.kubeconfig, pods, creators, creation)
    print(f"  {time.monotonic() - started:6.1f}s  all {len(pods)} created ({creators} at a time)", flush=True)
    printed, printed_at, elapsed = -1, 0.0, time.monotonic() - started
    failed: dict[str, str] = {}  # a pod its node refused: why
    while len(running) + len(failed) < len(pods):
        try:
            for event, item in client.watch(PodObjects, namespace=NAMESPACE, labels=selector, resource_version=version):
                pod = plain(item)
                if event != "DELETED" and _phase(pod) == "Running":
                    running.add(pod["metadata"]["name"])
                elif event != "DELETED" and _phase(pod) == "Failed":
                    failed[pod["metadata"]["name"]] = f"{pod['status'].get('reason')}: {pod['status'].get('message')}"
                elapsed = time.monotonic() - started
                if len(running) >= len(pods) or (len(running) != printed and elapsed - printed_at >= 1.0):
                    print(f"  {elapsed:6.1f}s  {len(running):5d}/{len(pods)} running", flush=True)
                    printed, printed_at = len(running), elapsed
                if len(running) + len(failed) >= len(pods):
                    break
                if elapsed > 1800:
                    raise SystemExit("gave up after 30 minutes")
            else:
                raise SystemExit("the watch of the benchmark's pods ended")
        except ApiError as err:
            if refusal(err) is not Refusal.GONE:
                raise
            running, version = _running(client, selector)
            elapsed = time.monotonic() - started
    if failed:
        refused = "; ".join(f"{name}: {why}" for name, why in sorted(failed.items())[:5])
        raise SystemExit(f"{len(failed)} of {len(pods)} pods failed instead of running, e.g. {refused}")
    return elapsed, list(client.list(Pod, namespace=NAMESPACE, labels=selector))


def _running(client: Client, selector: dict[str, LabelValue]) -> tuple[set[str], str]:
    """The names of the selected pods that run, and the list's resourceVersion to watch from."""
    listing = client.list(PodObjects, namespace=NAMESPACE, labels=selector)
    running = {pod["metadata"]["name"] for pod in map(plain, listing) if _phase(pod) == "Running"}
    return running, listing.resourceVersion


def _phase(pod: Mapping[str, Any]) -> str | None:
    phase: str | None = (pod.get("status") or {}).get("phase")
    return phase


def _slot(k: int, e: int, nodes: int) -> int:
    """The slot id of job k's executor e: job k holds node k's slots, and slot ids interleave the nodes."""
    return k + nodes * e


def _check(running: list[Pod], nodes: list[str], per_node: int) -> None:
    """Every executor on its job's node, in one of its job's slots, no slot twice (each pod, not a sample)."""
    seen: set[int] = set()
    for executor in running:
        assert executor.metadata is not None
        assert executor.metadata.labels is not None
        assert executor.spec is not None
        k = int(executor.metadata.labels[JOB_LABEL].removeprefix("job-"))
        given = int((executor.metadata.annotations or {})[SLOT_ANNOTATION])
        mine = {_slot(k, e, len(nodes)) for e in range(per_node)}
        if executor.spec.nodeName != nodes[k] or given not in mine or given in seen:
            raise SystemExit(f"misplaced: {executor.metadata.name} on {executor.spec.nodeName}, slot {given}")
        seen.add(given)


def _testbed(cluster: Any, name: str, node_label: str, *, nodes: int, per_node: int, submitted: bool = False) -> None:
    """Testbed ``name`` over the nodes labelled ``node_label``, every slot reserved (job k: node k's slots, as the
    Scheduling reconciler records them; ``submitted``: each job's application created, so a slot whose ghost is
    gone gets none back); returns once the Testbed shows every slot reserved."""
    testbed = {
        "apiVersion": API_VERSION,
        "kind": "Testbed",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"nodeLabel": node_label, "slotsPerNode": per_node, "resourcesPerSlot": {"cpu": "1", "memory": "1Gi"}},
    }
    cluster.kubectl("create", "-f", "-", input_text=json.dumps(testbed))

    def testbed_status() -> dict[str, Any]:
        out = cluster.kubectl("get", "testbed", name, "-n", NAMESPACE, "-o", "jsonpath={.status}")
        found: dict[str, Any] = json.loads(out) if out else {}
        return found

    wait_until(f"Testbed {name} to be Ready", lambda: testbed_status().get("state") == "Ready", timeout=1800)
    scheduling = {
        "apiVersion": API_VERSION,
        "kind": "Scheduling",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"testbed": {"name": name}, "queueBased": [{"name": f"job-{k}"} for k in range(nodes)]},
    }
    cluster.kubectl("create", "-f", "-", input_text=json.dumps(scheduling))
    jobs = [
        {
            "name": f"job-{k}",
            "state": "Submitted" if submitted else "Reserved",
            "executors": per_node,
            "slots": [_slot(k, e, nodes) for e in range(per_node)],
        }
        for k in range(nodes)
    ]
    status = json.dumps({"status": {"state": "Running", "jobs": jobs}})
    cluster.kubectl("patch", "-n", NAMESPACE, "scheduling", name, "--subresource=status", "--type=merge", "-p", status)
    reserved = nodes * per_node
    wait_until(
        f"every slot of {name} reserved", lambda: testbed_status().get("counts", {}).get("reserved") == reserved, 600
    )


def _executors(
    run: str, testbed: str, scheduler: str, pool: Pool, *, nodes: int, per_node: int, slot: bool = False
) -> list[Pod]:
    labels = {ROLE_LABEL: ROLE_EXECUTOR, TESTBED_LABEL: testbed, "bench": run}
    return [
        _pod(
            f"{run}-{k}-{e}",
            scheduler,
            pool.affinity(k),
            labels | {JOB_LABEL: f"job-{k}"},
            EXECUTOR_PRIORITY_CLASS,
            slot=slot,
        )
        for k in range(nodes)
        for e in range(per_node)
    ]


@dataclass(frozen=True)
class Placed:
    """One run's figures: seconds until every pod ran, the pods, and what the time went into."""

    seconds: float
    running: list[Pod]
    where: str


def _at_creation(
    client: Client, testbed: str, pool: Pool, pods: list[Pod], *, nodes: int
) -> tuple[list[Pod], Creation]:
    """``pods`` (executors made by ``_executors`` for ``nodes`` nodes) with their node and slot set, and the creation
    that first deletes the slot's ghost (no grace period): placement at creation, as a mutating admission webhook
    could do it."""
    ghosts = {
        slot_of(ghost["metadata"].get("annotations") or {}): ghost["metadata"]["name"]
        for ghost in map(plain, client.list(PodObjects, namespace=NAMESPACE, labels={TESTBED_LABEL: testbed}))
        if ghost["metadata"]["labels"].get(ROLE_LABEL) == ROLE_GHOST
    }
    placed = []
    for pod in pods:
        manifest = pod.to_dict()
        k = int(manifest["metadata"]["labels"][JOB_LABEL].removeprefix("job-"))
        slot = _slot(k, int(manifest["metadata"]["name"].rsplit("-", 1)[1]), nodes)
        manifest["spec"]["nodeName"] = pool.node(k)
        manifest["metadata"]["annotations"] = {SLOT_ANNOTATION: str(slot)}
        placed.append(cast(Pod, Pod.from_dict(manifest)))

    def swap_in(client: Client, pod: Pod) -> None:
        assert pod.metadata is not None
        client.delete(Pod, ghosts[slot_of(pod.metadata.annotations or {})], namespace=NAMESPACE, grace_period=0)
        client.create(pod)

    return placed, swap_in


def _measured(
    stack: Stack,
    pods: list[Pod],
    run: str,
    scheduler: SecondScheduler | None,
    creators: int,
    *,
    creation: Creation = _plain_creation,
) -> Placed:
    """``_place`` the pods, with each component's CPU time, the scheduler's and the extender's latencies (none
    without a ``scheduler``)."""
    cpu, extender, requests = (
        cpu_seconds(stack.cluster.directory, with_benchmark=True),
        extender_buckets(stack.api_url),
        api_requests(stack.cluster),
    )
    scheduling = scheduler_buckets(scheduler) if scheduler is not None else None
    seconds, running = _place(stack, pods, run, creators, creation)
    where = [
        "  CPU time per component:",
        cpu_table(cpu, cpu_seconds(stack.cluster.directory, with_benchmark=True), seconds),
        "  writes answered by the API server (the benchmark's own: one create per pod), watch events it sent:",
        request_table(requests, api_requests(stack.cluster), len(pods), "pod"),
    ]
    if scheduler is not None and scheduling is not None:
        where += [
            f"  {scheduler.settings.scheduler_name}'s latencies:",
            handler_times(scheduling, scheduler_buckets(scheduler)),
        ]
    if scheduler is not None and scheduler.settings.extender_url is not None:
        where += ["  extender handler time:", handler_times(extender, extender_buckets(stack.api_url))]
    return Placed(seconds, running, "\n".join(line for line in where if line))


def _one_scheduler_run(stack: Stack, qps: float, burst: int, creators: int, *, nodes: int, per_node: int) -> Placed:
    """The one-scheduler run: Testbed ``one`` over nodes that advertise their slots, placed by esi's profile of a
    scheduler that runs an ordinary pods' profile too, each executor requesting a slot."""
    for k in range(nodes):
        stack.client.patch(NodeStatus, ONE.node(k), advertised_slots(per_node), patch_type=PatchType.MERGE)
    shared = SecondSchedulerSettings(
        ONE_SCHEDULER, stack.extender_url, shared_with=ORDINARY_PROFILE, qps=qps, burst=burst
    )
    scheduler = SecondScheduler(stack.cluster, shared)
    scheduler.start()
    _testbed(stack.cluster, "one", ONE.label, nodes=nodes, per_node=per_node)
    time.sleep(2)  # as for the other runs: the extender's watch follows the statuses
    executors = nodes * per_node
    print(f"\none scheduler: {executors} executors into their reserved slots by esi's profile of a shared scheduler")
    pods = _executors("one", "one", ONE_SCHEDULER, ONE, nodes=nodes, per_node=per_node, slot=True)
    placed = _measured(stack, pods, "one", scheduler, creators)
    _check(placed.running, [ONE.node(k) for k in range(nodes)], per_node)
    print(placed.where, flush=True)
    return placed


def run(
    nodes: int,
    per_node: int,
    qps: float,
    burst: int,
    keep_logs: Path | None = None,
    *,
    before: bool = True,
    floor: bool = True,
    one: bool = True,
    creators: int = 8,
) -> None:
    executors = nodes * per_node
    # Full nodes: the slots' ghosts take all of each testbed node.
    cpu, memory = str(per_node), f"{per_node}Gi"
    pools = [TESTBED, BASELINE, *([BEFORE] if before else []), *([FLOOR] if floor else []), *([ONE] if one else [])]
    specs = [spec for pool in pools for spec in pool.specs(nodes, cpu, memory)]
    with local_stack("bench-placement", specs, qps=qps, burst=burst, keep_logs=keep_logs) as stack:
        cluster = stack.cluster
        plain = SecondScheduler(cluster, SecondSchedulerSettings("plain-scheduler", qps=qps, burst=burst))
        plain.start()
        _testbed(cluster, "tb", TESTBED.label, nodes=nodes, per_node=per_node)
        if before:
            preempting = SecondScheduler(
                cluster, SecondSchedulerSettings(PREEMPTING, stack.extender_url, bind_verb=None, qps=qps, burst=burst)
            )
            preempting.start()
            _testbed(cluster, "before", BEFORE.label, nodes=nodes, per_node=per_node)
        if floor:
            _testbed(cluster, "floor", FLOOR.label, nodes=nodes, per_node=per_node, submitted=True)
        time.sleep(2)  # the extender's watch follows the same statuses; give it a moment, it is not what is measured

        print(f"\nbaseline: {executors} pods pinned to {nodes} empty nodes by the plain scheduler", flush=True)
        baseline = [
            _pod(f"base-{k}-{e}", "plain-scheduler", BASELINE.affinity(k), {"bench": "baseline"}, None)
            for k in range(nodes)
            for e in range(per_node)
        ]
        base = _measured(stack, baseline, "baseline", plain, creators)
        print(base.where, flush=True)

        print(f"\nesi: {executors} executors into their reserved slots (filter, then bind in place of the ghost)")
        esi = _measured(
            stack,
            _executors("esi", "tb", SCHEDULER_NAME, TESTBED, nodes=nodes, per_node=per_node),
            "esi",
            stack.scheduler,
            creators,
        )
        _check(esi.running, [TESTBED.node(k) for k in range(nodes)], per_node)
        print(esi.where, flush=True)
        figures = [
            f"{executors} pods created {creators} at a time, scheduler client qps {qps:g} / burst {burst}, "
            f"{os.cpu_count()} cores, KWOK nodes:",
            f"  esi (filter + swap at binding):     {esi.seconds:6.1f}s  {executors / esi.seconds:6.1f} pods/s"
            "  — every executor checked in its own slot",
        ]
        if one:
            shared = _one_scheduler_run(stack, qps, burst, creators, nodes=nodes, per_node=per_node)
            figures.append(
                f"  one scheduler for both (same swap): {shared.seconds:6.1f}s  {executors / shared.seconds:6.1f} "
                f"pods/s  — ratio to esi's time: {shared.seconds / esi.seconds:.2f}"
            )
        if before:
            print(f"\nbefore: {executors} executors the earlier way (filter, preemption of the ghost, second cycle)")
            earlier = _measured(
                stack,
                _executors("before", "before", PREEMPTING, BEFORE, nodes=nodes, per_node=per_node),
                "before",
                preempting,
                creators,
            )
            _check(earlier.running, [BEFORE.node(k) for k in range(nodes)], per_node)
            print(earlier.where, flush=True)
            rate = executors / earlier.seconds
            figures.append(f"  before (filter + preemption round): {earlier.seconds:6.1f}s  {rate:6.1f} pods/s")
        if floor:
            print(f"\nfloor: {executors} executors placed at their creation (ghost deleted, node and slot set)")
            executors_at_creation, swap_in = _at_creation(
                stack.client,
                "floor",
                FLOOR,
                _executors("floor", "floor", SCHEDULER_NAME, FLOOR, nodes=nodes, per_node=per_node),
                nodes=nodes,
            )
            lowest = _measured(stack, executors_at_creation, "floor", None, creators, creation=swap_in)
            _check(lowest.running, [FLOOR.node(k) for k in range(nodes)], per_node)
            print(lowest.where, flush=True)
            rate = executors / lowest.seconds
            figures.append(f"  floor (at creation, no scheduler):  {lowest.seconds:6.1f}s  {rate:6.1f} pods/s")
        figures += [
            f"  baseline (plain scheduler, pinned): {base.seconds:6.1f}s  {executors / base.seconds:6.1f} pods/s",
            f"  ratio esi / baseline time: {esi.seconds / base.seconds:.2f}",
        ]
        if floor:
            figures.append(f"  ratio floor / baseline time: {lowest.seconds / base.seconds:.2f}")

        if before:
            figures += [
                f"  ratio before / baseline time: {earlier.seconds / base.seconds:.2f}",
                f"  ratio esi / before time: {esi.seconds / earlier.seconds:.2f}",
            ]
        print("\n" + "\n".join(figures))


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.placement", description=__doc__)
    parser.add_argument("--nodes", type=int, default=50, help="testbed nodes, and as many baseline nodes")
    parser.add_argument("--slots-per-node", type=int, default=4)
    parser.add_argument("--qps", type=float, default=SecondSchedulerSettings.qps, help="scheduler client qps")
    parser.add_argument("--burst", type=int, default=SecondSchedulerSettings.burst, help="scheduler client burst")
    parser.add_argument("--keep-logs", type=Path, metavar="DIR", help="copy the components' logs here at the end")
    parser.add_argument(
        "--no-before", dest="before", action="store_false", help="leave out the earlier path (preemption round)"
    )
    parser.add_argument(
        "--no-floor",
        dest="floor",
        action="store_false",
        help="leave out the floor run (executors placed at their creation, no scheduler)",
    )
    parser.add_argument(
        "--no-one-scheduler",
        dest="one",
        action="store_false",
        help="leave out the run with one scheduler for both (an ordinary profile beside esi's)",
    )
    parser.add_argument(
        "--creators",
        type=int,
        default=8,
        help="threads creating the pods (default: %(default)s)",
    )
    args = parser.parse_args()
    if args.creators < 1:
        parser.error(f"--creators must be at least 1, not {args.creators}")
    run(
        args.nodes,
        args.slots_per_node,
        args.qps,
        args.burst,
        args.keep_logs,
        before=args.before,
        floor=args.floor,
        one=args.one,
        creators=args.creators,
    )


if __name__ == "__main__":
    main()
