"""``python -m infra.local_cluster up|down|status``: one local cluster, by hand."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from infra import toolchain
from infra.local_cluster import DEFAULT_WORKDIR, ClusterError, LocalCluster, NodeSpec


def _main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m infra.local_cluster",
        description="Run a local Kubernetes cluster: real control plane processes, KWOK-simulated nodes.",
    )
    parser.add_argument("--name", default="esi", help="cluster name (default: %(default)s)")
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR, help="state directory (default: %(default)s)")
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="create the cluster, or start it if it exists but is stopped")
    up.add_argument("--nodes", type=int, default=4, help="simulated nodes to create (default: %(default)s)")
    up.add_argument("--cpu", default="4", help="allocatable CPU per node (default: %(default)s)")
    up.add_argument("--memory", default="16Gi", help="allocatable memory per node (default: %(default)s)")
    sub.add_parser("down", help="stop the cluster and delete its state")
    sub.add_parser("status", help="say whether the cluster exists and serves, and where")
    args = parser.parse_args(argv)
    cluster = LocalCluster(args.name, args.workdir)
    try:
        if args.command == "up":
            if not cluster.exists():
                print(f"creating cluster {cluster.name!r} with {args.nodes} simulated nodes ...", flush=True)
                started = time.monotonic()
                nodes = [NodeSpec(f"node-{i}", cpu=args.cpu, memory=args.memory) for i in range(args.nodes)]
                cluster.create(nodes)
                print(f"cluster ready in {time.monotonic() - started:.1f}s", flush=True)
            elif not cluster.serving():
                print(f"starting the stopped cluster {cluster.name!r} ...", flush=True)
                cluster.start()
            _describe(cluster)
        elif args.command == "down":
            cluster.delete()
            print(f"cluster {cluster.name!r} deleted")
        elif not cluster.exists():
            print(f"cluster {cluster.name!r} does not exist (make up creates it)")
            return 1
        else:
            _describe(cluster)
            return 0 if cluster.serving() else 1
    except (ClusterError, toolchain.ToolchainError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


def _describe(cluster: LocalCluster) -> None:
    state = "serving" if cluster.serving() else "NOT serving"
    kubectl_dir = toolchain.binary("kubectl").parent
    print(f"cluster {cluster.name!r}: {state}")
    print(f"  API server:  {cluster.server()}")
    print(f"  kubeconfig:  {cluster.kubeconfig}")
    print(f"  logs:        {cluster.logs_dir}")
    print(f"  try:         export KUBECONFIG={cluster.kubeconfig} PATH={kubectl_dir}:$PATH")
    print("               kubectl get nodes")


if __name__ == "__main__":
    sys.exit(_main())
