"""Executor placement throughput: pods/s put into their slots by the second scheduler through esi's extender.

``python -m bench.placement [--nodes 50] [--slots-per-node 4] [--qps 200] [--burst 400]``. Creates a fresh
local cluster (real control plane, KWOK nodes) and runs, as processes: the Testbed reconciler
(``python -m operators``), the API with the extender (``python -m api``) and two kube-schedulers with the
same client qps/burst — esi's second scheduler calling the extender (filter + preempt), and a plain one
without extender as the baseline.

esi run: a Testbed of ``--nodes`` full nodes (every slot's ghost fills its node), job k reserved the slots
of node k; all executors are created at once and the clock stops when every one runs. Each needs the
extender's filter answer, a preemption of its slot's ghost, the ghost's deletion and a second scheduling
cycle. Baseline run, same process: the same number of pods, same sizes, pinned by node selector to as many
empty nodes, placed by the plain scheduler (one cycle, nothing to evict). Every esi executor is checked: on
its job's node, in one of its job's slots, no slot twice. Prints figures only.
"""

from __future__ import annotations

import argparse
import json
import time
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


def _place(client: Client, pods: list[Pod], label: str) -> tuple[float, list[Pod]]:
    """Create ``pods`` (each carrying the label key ``label``) at once; seconds until all run, and the pods."""
    started = time.monotonic()
    for manifest in pods:
        client.create(manifest)
    last = -1
    while True:
        running = [
            p
            for p in client.list(Pod, namespace=NAMESPACE, labels={label: None})
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


def run(nodes: int, per_node: int, qps: float, burst: int, keep_logs: Path | None = None) -> None:
    executors = nodes * per_node
    # Full nodes: the slots' ghosts take all of each testbed node, so every executor needs a preemption.
    cpu, memory = str(per_node), f"{per_node}Gi"
    specs = [NodeSpec(f"tb-{i}", cpu, memory, labels={TESTBED_NODE: str(i)}) for i in range(nodes)]
    specs += [NodeSpec(f"base-{i}", cpu, memory, labels={BASELINE_NODE: str(i)}) for i in range(nodes)]
    with local_stack("bench-placement", specs, qps=qps, burst=burst, keep_logs=keep_logs) as stack:
        cluster, client = stack.cluster, stack.client
        SecondScheduler(cluster, SecondSchedulerSettings("plain-scheduler", qps=qps, burst=burst)).start()
        testbed = {
            "apiVersion": API_VERSION,
            "kind": "Testbed",
            "metadata": {"name": "tb", "namespace": NAMESPACE},
            "spec": {
                "nodeLabel": TESTBED_NODE,
                "slotsPerNode": per_node,
                "resourcesPerSlot": {"cpu": "1", "memory": "1Gi"},
            },
        }
        cluster.kubectl("create", "-f", "-", input_text=json.dumps(testbed))

        def testbed_status() -> dict[str, Any]:
            out = cluster.kubectl("get", "testbed", "tb", "-n", NAMESPACE, "-o", "jsonpath={.status}")
            found: dict[str, Any] = json.loads(out) if out else {}
            return found

        _wait("the Testbed to be Ready", lambda: testbed_status().get("state") == "Ready", timeout=1800)
        # The reservations, as the Scheduling reconciler records them: job k holds the slots of node k.
        scheduling = {
            "apiVersion": API_VERSION,
            "kind": "Scheduling",
            "metadata": {"name": "bench", "namespace": NAMESPACE},
            "spec": {"testbed": {"name": "tb"}, "queueBased": [{"name": f"job-{k}"} for k in range(nodes)]},
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
        cluster.kubectl(
            "patch",
            "-n",
            NAMESPACE,
            "scheduling",
            "bench",
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps({"status": {"state": "Running", "jobs": jobs}}),
        )
        _wait(
            "every slot reserved",
            lambda: testbed_status().get("counts", {}).get("reserved") == executors,
            timeout=600,
        )
        time.sleep(2)  # the extender's watch follows the same status; give it a moment, it is not what is measured

        print(f"\nbaseline: {executors} pods pinned to {nodes} empty nodes by the plain scheduler", flush=True)
        baseline = [
            _pod(f"base-{k}-{e}", "plain-scheduler", {BASELINE_NODE: str(k)}, {"bench": "baseline"}, None)
            for k in range(nodes)
            for e in range(per_node)
        ]
        base_seconds, _ = _place(client, baseline, "bench")

        print(f"\nesi: {executors} executors into their reserved slots (filter + preempt + ghost eviction)", flush=True)
        labels = {ROLE_LABEL: ROLE_EXECUTOR, TESTBED_LABEL: "tb"}
        esi_pods = [
            _pod(
                f"job-{k}-exec-{e}",
                SCHEDULER_NAME,
                {TESTBED_NODE: str(k)},
                labels | {JOB_LABEL: f"job-{k}"},
                EXECUTOR_PRIORITY_CLASS,
            )
            for k in range(nodes)
            for e in range(per_node)
        ]
        esi_seconds, running = _place(client, esi_pods, JOB_LABEL)
        _check(running, [f"tb-{i}" for i in range(nodes)], per_node)

        print(
            f"\n{executors} pods, scheduler client qps {qps:g} / burst {burst}, 2-core machine, KWOK nodes:\n"
            f"  esi (extender filter + preemption): {esi_seconds:6.1f}s  {executors / esi_seconds:6.1f} pods/s"
            f"  — every executor checked in its own slot\n"
            f"  baseline (plain scheduler, pinned): {base_seconds:6.1f}s  {executors / base_seconds:6.1f} pods/s\n"
            f"  ratio esi / baseline time: {esi_seconds / base_seconds:.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.placement", description=__doc__)
    parser.add_argument("--nodes", type=int, default=50, help="testbed nodes, and as many baseline nodes")
    parser.add_argument("--slots-per-node", type=int, default=4)
    parser.add_argument("--qps", type=float, default=SecondSchedulerSettings.qps, help="scheduler client qps")
    parser.add_argument("--burst", type=int, default=SecondSchedulerSettings.burst, help="scheduler client burst")
    parser.add_argument("--keep-logs", type=Path, metavar="DIR", help="copy the components' logs here at the end")
    args = parser.parse_args()
    run(args.nodes, args.slots_per_node, args.qps, args.burst, args.keep_logs)


if __name__ == "__main__":
    main()
