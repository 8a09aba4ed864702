"""Testbed status writes: what one write of a large slot table costs the API server.

``python -m bench.testbed_status [--nodes 1000] [--slots-per-node 4] [--writes 10]``. Creates a fresh local
cluster, then, with the Testbed CRD as esi defines it (the slot table an atomic list) and with the same CRD
but the table a list keyed by slot id (the baseline), creates one Testbed and replaces its status
``--writes`` times the way the Testbed reconciler does (a JSON patch of the whole status, one slot more
Occupied each time), alternating the two twice. Prints, per round: the API server's and etcd's CPU seconds
per write, the write's latency, and the stored object's size with its managedFields. Prints figures only.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lightkube import Client, KubeConfig
from lightkube.types import PatchType

from bench.processes import cpu_seconds
from esi.resources.crds import DEFINITIONS, crd
from esi.resources.meta import ObjectMeta
from esi.resources.testbed import Slot, SlotCounts, SlotState, Testbed, TestbedSpec, TestbedState, TestbedStatus
from infra.local_cluster import LocalCluster
from kube.resources import TestbedResource

_DEFINITION = next(d for d in DEFINITIONS if d.kind == "Testbed")
_NAME, _NAMESPACE = "big", "default"


def _crd(*, keyed: bool) -> dict[str, Any]:
    manifest = crd(_DEFINITION)
    if keyed:
        for version in manifest["spec"]["versions"]:
            slots = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]["slots"]
            slots.update({"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["id"]})
    return manifest


def _status(nodes: int, per_node: int, occupied: int) -> dict[str, Any]:
    slots = [
        Slot(
            id=node * per_node + position,
            node_name=f"node-{node}",
            node_id=node,
            position=position,
            state=SlotState.OCCUPIED if node * per_node + position < occupied else SlotState.FREE,
            job="job" if node * per_node + position < occupied else None,
            pod=f"pod-{node}-{position}",
        )
        for node in range(nodes)
        for position in range(per_node)
    ]
    counts = SlotCounts(nodes=nodes, slots=len(slots), free=len(slots) - occupied, occupied=occupied)
    return TestbedStatus(state=TestbedState.IN_USE, counts=counts, slots=slots).to_json_dict()


def _round(cluster: LocalCluster, client: Client, args: argparse.Namespace, *, keyed: bool) -> tuple[float, str]:
    """The API server's CPU seconds per write, and the round's line of figures."""
    cluster.kubectl("apply", "-f", "-", input_text=json.dumps(_crd(keyed=keyed)))
    cluster.kubectl("wait", "--for=condition=Established", f"crd/{_DEFINITION.name}", "--timeout=60s")
    testbed = Testbed(
        metadata=ObjectMeta(name=_NAME, namespace=_NAMESPACE),
        spec=TestbedSpec.model_validate(
            {
                "nodeLabel": "esi.bench/node-id",
                "slotsPerNode": args.slots_per_node,
                "resourcesPerSlot": {"cpu": "1", "memory": "1Gi"},
            }
        ),
    )
    cluster.kubectl("apply", "-f", "-", input_text=json.dumps(testbed.to_json_dict()))
    patches = [
        [{"op": "add", "path": "/status", "value": _status(args.nodes, args.slots_per_node, occupied)}]
        for occupied in range(args.writes)
    ]
    before, seconds = cpu_seconds(cluster.directory), []
    for patch in patches:
        started = time.monotonic()
        client.patch(TestbedResource.Status, _NAME, patch, namespace=_NAMESPACE, patch_type=PatchType.JSON)
        seconds.append(time.monotonic() - started)
    after = cpu_seconds(cluster.directory)
    stored = cluster.kubectl("get", "testbed", _NAME, "-n", _NAMESPACE, "-o", "json", "--show-managed-fields")
    cluster.kubectl("delete", "crd", _DEFINITION.name, "--wait", timeout=120)

    api_server, etcd = ((after[c] - before[c]) / args.writes for c in ("kube-apiserver", "etcd"))
    return api_server, (
        f"{'keyed by slot id' if keyed else 'atomic (esi)':<17} API server {api_server:.3f} s CPU per write, "
        f"etcd {etcd:.3f} s, write p50 {statistics.median(seconds) * 1000:.0f} ms, "
        f"stored object {len(stored) / 1024:.0f} KiB"
    )


def run(args: argparse.Namespace) -> None:
    cluster = LocalCluster("bench-testbed-status", Path(tempfile.mkdtemp(prefix="esi-bench-")))
    try:
        cluster.create()
        client = Client(config=KubeConfig.from_file(cluster.kubeconfig))
        slots = args.nodes * args.slots_per_node
        print(f"{slots} slots ({args.nodes} nodes x {args.slots_per_node}), {args.writes} status writes per round")
        figures: dict[bool, list[float]] = {True: [], False: []}
        for keyed in (True, False, True, False):
            api_server, line = _round(cluster, client, args, keyed=keyed)
            figures[keyed].append(api_server)
            print("  " + line, flush=True)
        ratio = statistics.mean(figures[True]) / statistics.mean(figures[False])
        print(f"API server CPU per status write: keyed / atomic = x{ratio:.2f}")
    finally:
        cluster.delete()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.testbed_status", description=__doc__)
    parser.add_argument("--nodes", type=int, default=1000, help="nodes of the Testbed (default: %(default)s)")
    parser.add_argument("--slots-per-node", type=int, default=4, help="slots per node (default: %(default)s)")
    parser.add_argument("--writes", type=int, default=10, help="status writes per round (default: %(default)s)")
    args = parser.parse_args(argv)
    for flag, value in (("--nodes", args.nodes), ("--slots-per-node", args.slots_per_node), ("--writes", args.writes)):
        if value < 1:
            parser.error(f"{flag} must be at least 1, not {value}")
    run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
