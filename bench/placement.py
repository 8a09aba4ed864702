"""Executor placement throughput: pods/s put into their slots by the second scheduler through esi's extender.

``python -m bench.placement [--nodes 50] [--slots-per-node 4] [--qps 200] [--burst 400]``. Creates a fresh
local cluster (real control plane, KWOK nodes) and runs, as processes: the Testbed reconciler
(``python -m operators``), the API with the extender (``python -m api``) and two kube-schedulers with the
same client qps/burst — esi's second scheduler calling the extender (filter + bind), a plain one without
extender as the baseline and, unless ``--no-before``, one configured the earlier way (filter + preempt).

esi run: a Testbed of ``--nodes`` full nodes (every slot's ghost fills its node), job k reserved the slots
of node k; all executors are created at once and the clock stops when every one runs. Each needs the
extender's filter answer and its bind call, which evicts the slot's ghost and binds the executor. Before run:
the same on a Testbed of its own, each executor needing a preemption of its slot's ghost, the ghost's
deletion and a second scheduling cycle. Baseline run, same process: the same number of pods, same sizes,
pinned by node selector to as many empty nodes, placed by the plain scheduler (one cycle, nothing to
evict). Every esi executor is checked: on its job's node, in one of its job's slots, no slot twice. Prints
figures only.
"""

from __future__ import annotations

import argparse
import json
import re
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from lightkube import Client
from lightkube.resources.core_v1 import Pod

from bench.stack import local_stack
from esi.objects.names import (
    EXECUTOR_PRIORITY_CLASS,
    JOB_LABEL,
    ROLE_EXECUTOR,
    ROLE_LABEL,
    SCHEDULER_NAME,
    SLOT_LABEL,
    TESTBED_LABEL,
)
from esi.resources.meta import API_VERSION
from infra.local_cluster import NodeSpec
from infra.second_scheduler import SecondScheduler, SecondSchedulerSettings

TESTBED_NODE = "esi.bench/testbed-node"
BASELINE_NODE = "esi.bench/baseline-node"
BEFORE_NODE = "esi.bench/before-node"
_BUCKET_LINE = re.compile(
    r'^esi_extender_request_duration_seconds_bucket\{(?=[^}]*route="(?P<route>[^"]+)")(?=[^}]*le="(?P<le>[^"]+)")[^}]*\}'
    r" (?P<count>\S+)$",
    re.MULTILINE,
)
PREEMPTING = "esi-preempting"  # the second scheduler the earlier way: it counts resources and preempts the ghost
NAMESPACE = "default"
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"


def _wait(what: str, probe: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > deadline:
            raise SystemExit(f"gave up after {timeout:.0f}s waiting for {what}")
        time.sleep(0.5)


def _pod(name: str, scheduler: str, selector: dict[str, str], labels: dict[str, str], priority: str | None) -> Pod:
    size = {"cpu": "1", "memory": "1Gi"}
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "nodeSelector": selector,
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "main", "image": PAUSE_IMAGE, "resources": {"requests": size, "limits": size}}],
    }
    if priority is not None:
        spec["priorityClassName"] = priority
    manifest: dict[str, Any] = {"metadata": {"name": name, "namespace": NAMESPACE, "labels": labels}, "spec": spec}
    return cast(Pod, Pod.from_dict(manifest))


def _place(client: Client, pods: list[Pod], run: str) -> tuple[float, list[Pod]]:
    """Create ``pods`` (each labelled ``bench: run``) at once; seconds until all run, and the pods."""
    started = time.monotonic()
    for manifest in pods:
        client.create(manifest)
    last = -1
    while True:
        running = [
            p
            for p in client.list(Pod, namespace=NAMESPACE, labels={"bench": run})
            if p.status is not None and p.status.phase == "Running"
        ]
        elapsed = time.monotonic() - started
        if len(running) != last:
            print(f"  {elapsed:6.1f}s  {len(running):5d}/{len(pods)} running", flush=True)
            last = len(running)
        if len(running) >= len(pods):
            return elapsed, running
        if elapsed > 1800:
            raise SystemExit("gave up after 30 minutes")
        time.sleep(0.2)


def _extender_buckets(api_url: str) -> dict[tuple[str, float], float]:
    """The extender's latency histogram as the API process serves it: (route, bucket bound) -> count so far."""
    with urllib.request.urlopen(f"{api_url}/metrics", timeout=10) as response:  # noqa: S310 (our own http:// URL)
        text = response.read().decode()
    counts: dict[tuple[str, float], float] = {}
    for match in _BUCKET_LINE.finditer(text):
        key = (match["route"], float("inf") if match["le"] == "+Inf" else float(match["le"]))
        counts[key] = counts.get(key, 0.0) + float(match["count"])
    return counts


def _handler_times(before: dict[tuple[str, float], float], after: dict[tuple[str, float], float]) -> str:
    """p50 and p99 of each extender verb between two scrapes, as the histogram's bucket bounds allow (≤)."""
    lines = []
    for route in sorted({route for route, _ in after}):
        bounds = sorted(le for r, le in after if r == route)
        counts = [after[(route, le)] - before.get((route, le), 0.0) for le in bounds]
        if not counts or counts[-1] == 0:
            continue
        quantiles = [next(le for le, c in zip(bounds, counts, strict=True) if c >= q * counts[-1]) for q in (0.5, 0.99)]
        p50, p99 = (q * 1000 for q in quantiles)
        lines.append(f"    {route:<18} {int(counts[-1]):6d} calls  p50 <= {p50:g} ms  p99 <= {p99:g} ms")
    return "\n".join(lines)


def _check(running: list[Pod], nodes: list[str], per_node: int) -> None:
    """Every executor on its job's node, in one of its job's slots, no slot twice (each pod, not a sample)."""
    seen: set[int] = set()
    for executor in running:
        assert executor.metadata is not None
        assert executor.metadata.labels is not None
        assert executor.spec is not None
        k = int(executor.metadata.labels[JOB_LABEL].removeprefix("job-"))
        given = int(executor.metadata.labels[SLOT_LABEL])
        mine = {k + len(nodes) * p for p in range(per_node)}
        if executor.spec.nodeName != nodes[k] or given not in mine or given in seen:
            raise SystemExit(f"misplaced: {executor.metadata.name} on {executor.spec.nodeName}, slot {given}")
        seen.add(given)


def _testbed(cluster: Any, name: str, node_label: str, *, nodes: int, per_node: int) -> None:
    """Testbed ``name`` over the nodes labelled ``node_label``, every slot reserved (job k: node k's slots, as the
    Scheduling reconciler records them); returns once the Testbed shows every slot reserved."""
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

    _wait(f"Testbed {name} to be Ready", lambda: testbed_status().get("state") == "Ready", timeout=1800)
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
            "state": "Reserved",
            "executors": per_node,
            "slots": [k + nodes * p for p in range(per_node)],
        }
        for k in range(nodes)
    ]
    status = json.dumps({"status": {"state": "Running", "jobs": jobs}})
    cluster.kubectl("patch", "-n", NAMESPACE, "scheduling", name, "--subresource=status", "--type=merge", "-p", status)
    reserved = nodes * per_node
    _wait(f"every slot of {name} reserved", lambda: testbed_status().get("counts", {}).get("reserved") == reserved, 600)


def _executors(run: str, testbed: str, scheduler: str, node_label: str, *, nodes: int, per_node: int) -> list[Pod]:
    labels = {ROLE_LABEL: ROLE_EXECUTOR, TESTBED_LABEL: testbed, "bench": run}
    return [
        _pod(
            f"{run}-{k}-{e}", scheduler, {node_label: str(k)}, labels | {JOB_LABEL: f"job-{k}"}, EXECUTOR_PRIORITY_CLASS
        )
        for k in range(nodes)
        for e in range(per_node)
    ]


def run(
    nodes: int, per_node: int, qps: float, burst: int, keep_logs: Path | None = None, *, before: bool = True
) -> None:
    executors = nodes * per_node
    # Full nodes: the slots' ghosts take all of each testbed node.
    cpu, memory = str(per_node), f"{per_node}Gi"
    specs = [NodeSpec(f"tb-{i}", cpu, memory, labels={TESTBED_NODE: str(i)}) for i in range(nodes)]
    specs += [NodeSpec(f"base-{i}", cpu, memory, labels={BASELINE_NODE: str(i)}) for i in range(nodes)]
    if before:
        specs += [NodeSpec(f"before-{i}", cpu, memory, labels={BEFORE_NODE: str(i)}) for i in range(nodes)]
    with local_stack("bench-placement", specs, qps=qps, burst=burst, keep_logs=keep_logs) as stack:
        cluster, client = stack.cluster, stack.client
        SecondScheduler(cluster, SecondSchedulerSettings("plain-scheduler", qps=qps, burst=burst)).start()
        _testbed(cluster, "tb", TESTBED_NODE, nodes=nodes, per_node=per_node)
        if before:
            preempting = SecondSchedulerSettings(PREEMPTING, stack.extender_url, bind_verb=None, qps=qps, burst=burst)
            SecondScheduler(cluster, preempting).start()
            _testbed(cluster, "before", BEFORE_NODE, nodes=nodes, per_node=per_node)
        time.sleep(2)  # the extender's watch follows the same statuses; give it a moment, it is not what is measured

        print(f"\nbaseline: {executors} pods pinned to {nodes} empty nodes by the plain scheduler", flush=True)
        baseline = [
            _pod(f"base-{k}-{e}", "plain-scheduler", {BASELINE_NODE: str(k)}, {"bench": "baseline"}, None)
            for k in range(nodes)
            for e in range(per_node)
        ]
        base_seconds, _ = _place(client, baseline, "baseline")

        print(f"\nesi: {executors} executors into their reserved slots (filter, then bind in place of the ghost)")
        scraped = _extender_buckets(stack.api_url)
        esi_seconds, running = _place(
            client, _executors("esi", "tb", SCHEDULER_NAME, TESTBED_NODE, nodes=nodes, per_node=per_node), "esi"
        )
        _check(running, [f"tb-{i}" for i in range(nodes)], per_node)
        esi_handlers, scraped = _handler_times(scraped, after := _extender_buckets(stack.api_url)), after
        figures = [
            f"{executors} pods, scheduler client qps {qps:g} / burst {burst}, 2-core machine, KWOK nodes:",
            f"  esi (filter + swap at binding):     {esi_seconds:6.1f}s  {executors / esi_seconds:6.1f} pods/s"
            "  — every executor checked in its own slot",
        ]
        if before:
            print(f"\nbefore: {executors} executors the earlier way (filter, preemption of the ghost, second cycle)")
            before_seconds, running = _place(
                client,
                _executors("before", "before", PREEMPTING, BEFORE_NODE, nodes=nodes, per_node=per_node),
                "before",
            )
            _check(running, [f"before-{i}" for i in range(nodes)], per_node)
            before_handlers = _handler_times(scraped, _extender_buckets(stack.api_url))
            rate = executors / before_seconds
            figures.append(f"  before (filter + preemption round): {before_seconds:6.1f}s  {rate:6.1f} pods/s")
        figures += [
            f"  baseline (plain scheduler, pinned): {base_seconds:6.1f}s  {executors / base_seconds:6.1f} pods/s",
            f"  ratio esi / baseline time: {esi_seconds / base_seconds:.2f}",
        ]
        figures += ["  extender handler time, esi run:", esi_handlers]
        if before:
            figures += [
                f"  ratio before / baseline time: {before_seconds / base_seconds:.2f}",
                f"  ratio esi / before time: {esi_seconds / before_seconds:.2f}",
                "  extender handler time, before run:",
                before_handlers,
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
    args = parser.parse_args()
    run(args.nodes, args.slots_per_node, args.qps, args.burst, args.keep_logs, before=args.before)


if __name__ == "__main__":
    main()
