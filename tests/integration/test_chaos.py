"""``python -m bench.chaos`` in short, on a cluster of its own: a queue runs while esi's components are SIGKILLed
and the control plane restarts, and every invariant the benchmark checks holds."""

from __future__ import annotations

from bench.chaos import COMPONENTS, chaos, print_report


def test_a_queue_survives_kills_and_a_control_plane_restart_with_every_invariant_held() -> None:
    report = chaos(
        components=COMPONENTS,
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
    assert sum(report.kills.values()) >= len(COMPONENTS), report.kills
    assert (report.calm.runs, report.chaotic.runs) == (6, 6)
