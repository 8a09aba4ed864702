"""``python -m infra.local_cluster.supervise``: a component that cannot start backs off; one that ran is back
at once."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time


def restart_delays(command: str, started_after: float, count: int) -> list[str]:
    """The first ``count`` delays the supervisor announces for ``sh -c command``."""
    argv = [sys.executable, "-m", "infra.local_cluster.supervise", "--name=t", f"--started-after={started_after}"]
    delays: list[str] = []
    with subprocess.Popen([*argv, "--", "sh", "-c", command], stderr=subprocess.PIPE, text=True) as supervisor:
        assert supervisor.stderr is not None
        deadline = time.monotonic() + 30
        try:
            while len(delays) < count and time.monotonic() < deadline:
                delays += re.findall(r"starting it again in (\d+)s", supervisor.stderr.readline())
        finally:
            supervisor.send_signal(signal.SIGTERM)
            supervisor.wait(timeout=15)
    return delays


def test_a_component_that_exits_at_once_is_restarted_after_a_doubling_backoff() -> None:
    assert restart_delays("exit 3", started_after=5, count=3) == ["1", "2", "4"]


def test_a_component_that_had_started_is_restarted_after_a_second_each_time() -> None:
    assert restart_delays("sleep 0.3; exit 3", started_after=0.2, count=3) == ["1", "1", "1"]
