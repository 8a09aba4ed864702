"""``python -m examples.profiling``: run the profiling scheduler (profiler and scheduler side by side).

    python -m examples.profiling --url http://127.0.0.1:8082 --token "$ESI_TOKEN" -n profiling \\
        --profiler-testbed profiler-slots --scheduler-testbed scheduler-slots [--rounds N] [--just-print]

URL, token and namespace default to ``ESI_URL``, ``ESI_TOKEN`` and ``ESI_NAMESPACE``, as for the ``esi``
CLI. Ctrl-C stops both loops at once; a Scheduling still running is finished by the next start.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Sequence

from esi.client import AsyncEsiClient, EsiError
from examples.profiling.matrix import ColocationMatrix
from examples.profiling.runner import Loop, Settings, run

__all__ = ["main", "parse_args"]

_EXIT_INTERRUPTED = 130


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, not {text!r}")
    return value


def _count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number ≥ 0, not {text!r}")
    return int(text)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m examples.profiling", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default=os.environ.get("ESI_URL", "http://127.0.0.1:8082"), help="the esi API")
    parser.add_argument("--token", default=os.environ.get("ESI_TOKEN"), help="bearer token (default: $ESI_TOKEN)")
    parser.add_argument("-n", "--namespace", default=os.environ.get("ESI_NAMESPACE"), help="the jobs' namespace")
    parser.add_argument("-p", "--profiler-testbed", default="profiler-slots", help="default: %(default)s")
    parser.add_argument("-s", "--scheduler-testbed", default="scheduler-slots", help="default: %(default)s")
    parser.add_argument("--just-print", action="store_true", help="print the co-location matrix and exit")
    parser.add_argument("--rounds", type=_count, help="stop each loop after this many Schedulings (default: never)")
    parser.add_argument(
        "--only", choices=["profiler", "scheduler"], help="run one loop only (default: both, side by side)"
    )
    parser.add_argument(
        "--time-scale",
        type=_positive,
        default=1.0,
        metavar="FACTOR",
        help="wall-clock seconds per stored second: the simulator's --time-scale, so the matrix holds the "
        "modelled seconds (default: %(default)s)",
    )
    parser.add_argument(
        "--round-timeout",
        type=_positive,
        default=3600.0,
        metavar="SECONDS",
        help="delete a Scheduling that has not ended after this long (default: %(default)s)",
    )
    return parser.parse_args(argv)


async def _main(args: argparse.Namespace) -> None:
    async with AsyncEsiClient(args.url, token=args.token, namespace=args.namespace) as client:
        if args.just_print:
            matrix = ColocationMatrix.of_jobs((await client.jobs()).values())
            print(matrix.render())
            for problem in matrix.problems:
                print(f"unreadable: {problem}", file=sys.stderr)
            return
        settings = Settings(
            profiler_testbed=args.profiler_testbed,
            scheduler_testbed=args.scheduler_testbed,
            rounds=args.rounds,
            time_scale=args.time_scale,
            round_timeout=args.round_timeout,
        )
        loops: tuple[Loop, ...] = (args.only,) if args.only else ("profiler", "scheduler")
        await run(client, settings, loops)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per request would drown the rounds
    try:
        asyncio.run(_main(args))
    except KeyboardInterrupt:
        print("interrupted; a Scheduling still running is finished by the next start", file=sys.stderr)
        return _EXIT_INTERRUPTED
    except EsiError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
