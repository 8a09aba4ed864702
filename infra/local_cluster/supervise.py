"""Keep one local component running: ``python -m infra.local_cluster.supervise --name NAME -- COMMAND [ARGS...]``.

The local stack runs esi's components as processes (``infra.stacks.local``). A component that exits (a crash,
an API server that went away for too long, a kill) is started again: after 1 s if it had run for 10 s or
more, else after a backoff that doubles up to 30 s, so one that cannot start is not restarted in a hot loop
while one that ran and was stopped is back at once; every exit and restart is logged with its exit status.
SIGTERM or SIGINT to the supervisor is passed on to the component, which gets 10 s to end before it is
killed; then the supervisor ends too — so stopping the supervisor stops the component.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from types import FrameType

__all__ = ["main", "supervised"]

STOP_GRACE = 10.0
MIN_BACKOFF, MAX_BACKOFF, STARTED_AFTER = 1.0, 30.0, 10.0


def supervised(name: str, command: Sequence[str]) -> list[str]:
    """The command line that keeps ``command`` running under this supervisor, as component ``name``."""
    return [sys.executable, "-m", "infra.local_cluster.supervise", f"--name={name}", "--", *command]


def _say(name: str, message: str) -> None:
    print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} supervise[{name}]: {message}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    cli = argparse.ArgumentParser(prog="python -m infra.local_cluster.supervise", description=__doc__.split("\n\n")[0])
    cli.add_argument("--name", required=True, help="the component's name, for the log")
    cli.add_argument(
        "--started-after",
        type=float,
        default=STARTED_AFTER,
        metavar="SECONDS",
        help=f"a run this long counts as started: restarted after {MIN_BACKOFF:.0f}s (default: %(default)s)",
    )
    cli.add_argument("command", nargs=argparse.REMAINDER, help="-- and the command to keep running")
    args = cli.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        cli.error("no command given (after --)")

    stopping = False
    child: subprocess.Popen[bytes] | None = None

    def stop(signum: int, _: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        if child is not None and child.poll() is None:
            child.send_signal(signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    backoff = MIN_BACKOFF
    while True:
        started = time.monotonic()
        child = subprocess.Popen(command)
        _say(args.name, f"started pid {child.pid}: {' '.join(command)}")
        while True:
            try:
                status = child.wait(timeout=STOP_GRACE if stopping else None)
                break
            except subprocess.TimeoutExpired:
                _say(args.name, f"pid {child.pid} did not end within {STOP_GRACE:.0f}s, killing it")
                child.kill()
        if stopping:
            _say(args.name, f"stopped (exit status {status})")
            return 0
        if time.monotonic() - started >= args.started_after:
            backoff = MIN_BACKOFF
        _say(args.name, f"exited with status {status}; starting it again in {backoff:.0f}s")
        deadline = time.monotonic() + backoff
        while not stopping and time.monotonic() < deadline:
            time.sleep(0.1)
        if stopping:
            return 0
        backoff = min(2 * backoff, MAX_BACKOFF)


if __name__ == "__main__":
    sys.exit(main())
