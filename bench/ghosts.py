"""Ghost reservation: how fast the Testbed reconciler fills a large Testbed with ghost pods.

``python -m bench.ghosts [--nodes 1000] [--slots-per-node 4]``. Creates a fresh local cluster (real
control plane, KWOK nodes), installs esi's CRDs and priority classes, starts ``python -m operators``, labels
``--nodes`` nodes and creates one Testbed over them; then reports the time until every slot has a running
ghost and the Testbed is Ready, and the ghost creation rate (pods/s) over that time. Prints figures only.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from esi.objects.names import ROLE_GHOST, ROLE_LABEL
from esi.objects.priority import priority_classes
from esi.resources.crds import DEFINITIONS, crd
from esi.resources.meta import API_VERSION
from infra.local_cluster import LocalCluster, NodeSpec
from infra.stacks import processes

LABEL = "esi.bench/node-id"


def _apply(cluster: LocalCluster, items: list[dict[str, object]]) -> None:
    cluster.kubectl(
        "apply",
        "--server-side",
        "-f",
        "-",
        input_text=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}),
        timeout=600,
    )


def _counts(cluster: LocalCluster) -> tuple[int, str]:
    pods = cluster.kubectl(
        "get",
        "pods",
        "-n",
        "default",
        "-l",
        f"{ROLE_LABEL}={ROLE_GHOST}",
        "--field-selector=status.phase=Running",
        "-o",
        "name",
        timeout=120,
    )
    state = cluster.kubectl("get", "testbed", "big", "-n", "default", "-o", "jsonpath={.status.state}")
    return len(pods.split()), state


def run(nodes: int, per_node: int) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="esi-bench-"))
    cluster = LocalCluster("bench-ghosts", workdir)
    try:
        started = time.monotonic()
        cluster.create()
        _apply(cluster, [crd(d) for d in DEFINITIONS] + priority_classes())
        cluster.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
        cluster.add_nodes(
            [NodeSpec(f"node-{i}", cpu="8", memory="32Gi", labels={LABEL: str(i)}) for i in range(nodes)], timeout=600
        )
        print(f"cluster with {nodes} nodes ready in {time.monotonic() - started:.1f}s", flush=True)
        cluster.start_process(
            processes.OPERATORS.name, processes.operators_command(sys.executable, kubeconfig=cluster.kubeconfig)
        )
        time.sleep(3)  # let the operator list and watch before the clock starts; it is not what is measured
        testbed = {
            "apiVersion": API_VERSION,
            "kind": "Testbed",
            "metadata": {"name": "big", "namespace": "default"},
            "spec": {"nodeLabel": LABEL, "slotsPerNode": per_node, "resourcesPerSlot": {"cpu": "1", "memory": "1Gi"}},
        }
        slots = nodes * per_node
        clock = time.monotonic()
        cluster.kubectl("create", "-f", "-", input_text=json.dumps(testbed))
        samples: list[tuple[float, int]] = []
        while True:
            running, state = _counts(cluster)
            elapsed = time.monotonic() - clock
            samples.append((elapsed, running))
            print(f"  {elapsed:6.1f}s  {running:5d}/{slots} ghosts running  testbed {state or '-'}", flush=True)
            if running >= slots and state == "Ready":
                break
            if elapsed > 1800:
                print("gave up after 30 minutes", flush=True)
                break
            time.sleep(2)
        total = samples[-1][0]
        print(
            f"\n{nodes} nodes x {per_node} slots = {slots} ghosts: Testbed Ready after {total:.1f}s, "
            f"{samples[-1][1] / total:.1f} ghost pods/s on average (2-core machine, KWOK nodes)"
        )
    finally:
        cluster.delete()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.ghosts", description=__doc__)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--slots-per-node", type=int, default=4)
    args = parser.parse_args()
    run(args.nodes, args.slots_per_node)


if __name__ == "__main__":
    main()
