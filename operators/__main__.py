"""Run esi's reconcilers: ``python -m operators [--kubeconfig PATH] [--liveness URL] [--log-level LEVEL]
[--stalled-after SECONDS] [--keep-runs COUNT] [--keep-runs-for SECONDS]``.

The Testbed, BatchJob and Scheduling reconcilers run in one kopf operator, cluster-wide, and so does the
retention of Runs.
"""

from __future__ import annotations

import argparse
import logging
import os
from datetime import timedelta

import kopf

from esi.decisions.batchjob_lifecycle import STALLED_AFTER
from esi.objects.runs import KEEP_RUNS, Retention


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m operators", description=__doc__)
    parser.add_argument("--kubeconfig", help="kubeconfig to use (default: $KUBECONFIG, then in-cluster)")
    parser.add_argument("--liveness", help="serve a liveness endpoint, e.g. http://127.0.0.1:8081/healthz")
    levels = ["debug", "info", "warning", "error"]
    parser.add_argument("--log-level", default="warning", choices=levels, help="(default: %(default)s)")
    parser.add_argument(
        "--stalled-after",
        type=_seconds,
        default=STALLED_AFTER.total_seconds(),
        metavar="SECONDS",
        help="a run not Running this long after submission is Stalled: a condition and a Warning Event on its "
        "BatchJob and Scheduling (default: %(default)s)",
    )
    parser.add_argument(
        "--keep-runs",
        type=_count,
        default=KEEP_RUNS,
        metavar="COUNT",
        help="Runs kept per namespace, the newest; older ones are deleted; 0: none is written, and those there "
        "are deleted (default: %(default)s)",
    )
    parser.add_argument(
        "--keep-runs-for",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="Runs older than this are deleted (default: kept however old)",
    )
    args = parser.parse_args()
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.kubeconfig:
        os.environ["KUBECONFIG"] = args.kubeconfig
    # Importing a reconciler's module registers its handlers with kopf.
    from operators import batchjob, runs, scheduling, testbed  # noqa: F401, PLC0415

    max_age = None if args.keep_runs_for is None else timedelta(seconds=args.keep_runs_for)
    memo = kopf.Memo(stalled_after=timedelta(seconds=args.stalled_after), retention=Retention(args.keep_runs, max_age))
    kopf.run(clusterwide=True, standalone=True, liveness_endpoint=args.liveness, memo=memo)


def _seconds(text: str) -> float:
    seconds = float(text)
    if not seconds > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return seconds


def _count(text: str) -> int:
    count = int(text)
    if count < 0:
        raise argparse.ArgumentTypeError(f"must be a count of 0 or more, got {text}")
    return count


if __name__ == "__main__":
    main()
