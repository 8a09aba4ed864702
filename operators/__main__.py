"""Run esi's reconcilers: ``python -m operators [--kubeconfig PATH] [--liveness URL] [--log-level LEVEL]``.

The Testbed, BatchJob and Scheduling reconcilers run in one kopf operator, cluster-wide.
"""

from __future__ import annotations

import argparse
import logging
import os

import kopf


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m operators", description=__doc__)
    parser.add_argument("--kubeconfig", help="kubeconfig to use (default: $KUBECONFIG, then in-cluster)")
    parser.add_argument("--liveness", help="serve a liveness endpoint, e.g. http://127.0.0.1:8081/healthz")
    levels = ["debug", "info", "warning", "error"]
    parser.add_argument("--log-level", default="warning", choices=levels, help="(default: %(default)s)")
    args = parser.parse_args()
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.kubeconfig:
        os.environ["KUBECONFIG"] = args.kubeconfig
    # Importing a reconciler's module registers its handlers with kopf.
    from operators import batchjob, scheduling, testbed  # noqa: F401, PLC0415

    kopf.run(clusterwide=True, standalone=True, liveness_endpoint=args.liveness)


if __name__ == "__main__":
    main()
