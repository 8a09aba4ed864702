"""The sim-vs-real benchmark's arithmetic: the queue cut into Schedulings, the figures of a queue's runs, the
comparison and its error, the figures written out, and a given table next to the one recovered."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from bench.sim_vs_real import (
    Figure,
    QueueFigures,
    compare,
    queue_of_runs,
    recovered,
    render,
    render_recovered,
    schedulings_of,
    simulated_spec,
    write_figures,
)
from esi.resources.batchjob import RunOutcome
from esi.results.calibration import TableRow
from tests.unit.run_entries import entry

# Two Schedulings of a real queue a,b,a,b on two slots: a and b side by side, each created 10 s before it starts.
REAL = [
    entry("a", 10, 110, submitted=0, met={"b": 80}, scheduling="s1"),
    entry("b", 12, 92, submitted=2, met={"a": 80}, scheduling="s1"),
    entry("a", 210, 330, submitted=200, met={"b": 80}, scheduling="s2"),
    entry("b", 215, 295, submitted=203, met={"a": 80}, scheduling="s2"),
]


@pytest.mark.parametrize(
    ("queue", "schedulings"),
    [
        pytest.param(["a", "b", "c"], [["a", "b", "c"]], id="each job once: one Scheduling"),
        pytest.param(["a", "b", "a", "b"], [["a", "b"], ["a", "b"]], id="a job again: a new Scheduling"),
        pytest.param(["a", "a", "b"], [["a"], ["a", "b"]], id="the same job twice in a row"),
        pytest.param([], [], id="nothing"),
    ],
)
def test_a_queue_runs_as_schedulings_that_run_each_job_once(queue: list[str], schedulings: list[list[str]]) -> None:
    assert schedulings_of(queue) == schedulings


def test_a_recorded_queue_is_read_back_in_the_order_it_ran() -> None:
    later_first = [REAL[3], REAL[2], REAL[1], REAL[0]]

    assert queue_of_runs(later_first) == ["a", "b", "a", "b"]


def test_a_queues_figures_are_means_per_job_and_the_sum_of_its_schedulings_makespans() -> None:
    failed = entry("a", 400, 420, submitted=390, outcome=RunOutcome.FAILED, scheduling="s3")

    figures = QueueFigures.of([*REAL, failed])

    assert figures.runtime == {"a": 110, "b": 80}  # (100 + 120) / 2; the failed run is not a runtime
    assert figures.waiting == {"a": 10, "b": 11}
    assert figures.makespan == 110 + 130 + 30  # s1: 0 to 110, s2: 200 to 330, s3: 390 to 420; not 0 to 420
    assert figures.runs == 5


def test_simulated_seconds_are_divided_by_the_time_scale() -> None:
    assert QueueFigures.of(REAL, time_scale=0.5) == QueueFigures({"a": 220, "b": 160}, {"a": 20, "b": 22}, 480, 4)


def test_real_and_simulated_side_by_side_with_the_relative_error() -> None:
    real = QueueFigures({"a": 100, "b": 80}, {"a": 10}, 200, 4)
    simulated = QueueFigures({"a": 110}, {"a": 10, "c": 5}, 180, 4)

    figures = compare(real, simulated)

    assert [(f.name, f.real, f.simulated) for f in figures] == [
        ("makespan", 200, 180),
        ("runtime a", 100, 110),
        ("waiting a", 10, 10),
        ("runtime b", 80, None),
        ("waiting b", None, None),
        ("runtime c", None, None),
        ("waiting c", None, 5),
    ]
    assert [f.error for f in figures[:4]] == [pytest.approx(-0.1), pytest.approx(0.1), 0, None]
    assert Figure("x", 0, 1).error is None
    assert render(figures[:2]).splitlines() == [
        "FIGURE       REAL  SIMULATED   ERROR",
        "makespan   200.0s     180.0s  -10.0%",
        "runtime a  100.0s     110.0s  +10.0%",
    ]


def test_the_figures_are_written_as_csv_or_json(tmp_path: Path) -> None:
    figures = [Figure("makespan", 200, 180), Figure("runtime b", 80, None)]

    write_figures(figures, tmp_path / "f.csv")
    write_figures(figures, tmp_path / "f.json")

    with (tmp_path / "f.csv").open() as written:
        assert list(csv.DictReader(written)) == [
            {"name": "makespan", "real": "200", "simulated": "180", "error": "-0.1"},
            {"name": "runtime b", "real": "80", "simulated": "", "error": ""},
        ]
    assert json.loads((tmp_path / "f.json").read_text()) == [
        {"name": "makespan", "real": 200, "simulated": 180, "error": -0.1},
        {"name": "runtime b", "real": 80, "simulated": None, "error": None},
    ]


def test_each_given_row_next_to_the_one_recovered_with_the_error() -> None:
    given = [TableRow("a", None, 100, 2, None, 10), TableRow("a", "b", 150, 2, None, 20), TableRow("b", "a", 80, 1)]
    found = [TableRow("a", "b", 165, 3, 2.0, 19), TableRow("b", "a", 80, 2, None, 0.5), TableRow("c", "a", 1, 1)]

    rows = recovered(given, found)

    assert [row.recovered for row in rows] == [None, found[0], found[1]]
    assert rows[1].error(lambda r: r.mean_runtime_s) == pytest.approx(0.1)
    assert rows[1].error(lambda r: r.mean_startup_s) == pytest.approx(-0.05)
    assert rows[2].error(lambda r: r.mean_startup_s) is None  # none given
    assert rows[0].error(lambda r: r.mean_runtime_s) is None  # never measured
    assert [line.split() for line in render_recovered(rows).splitlines()[1:]] == [
        ["a", "-", "100.0s", "-", "-", "10.0s", "-", "-"],
        ["a", "b", "150.0s", "165.0s", "(3)", "+10.0%", "20.0s", "19.0s", "-5.0%"],
        ["b", "a", "80.0s", "80.0s", "(2)", "+0.0%", "-", "0.5s", "-"],
    ]


def test_a_simulated_jobs_driver_and_jobmanager_are_not_pinned_to_the_real_nodes() -> None:
    real = {"esi.local/real-node": "true"}
    spark: dict[str, Any] = {
        "mainClass": "Pi",
        "driver": {"serviceAccount": "spark", "nodeSelector": real},
        "sparkConf": {"spark.kubernetes.driver.node.selector.esi.local/real-node": "true", "spark.x": "1"},
    }
    flink = {"jobManager": {"resource": {"cpu": 0.5}, "podTemplate": {"spec": {"nodeSelector": real}}}}
    assert simulated_spec({"sparkSpec": spark}) == {
        "sparkSpec": {"mainClass": "Pi", "driver": {"serviceAccount": "spark"}, "sparkConf": {"spark.x": "1"}}
    }
    assert simulated_spec({"flinkSpec": flink}) == {
        "flinkSpec": {"jobManager": {"resource": {"cpu": 0.5}, "podTemplate": {"spec": {}}}}
    }
    assert spark["driver"]["nodeSelector"] == real  # the real job's spec is left as it was
