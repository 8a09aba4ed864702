"""The co-location table from recorded runs: rows computed by hand, the CSV, the ConfigMap, and reading it back."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from esi.client.cli import app
from esi.resources.batchjob import RunOutcome
from esi.results.calibration import (
    TABLE_CONFIGMAP,
    TABLE_KEY,
    TABLE_LABEL,
    TableError,
    TableRow,
    calibrate,
    read_table,
    render_table,
    table_configmap,
)
from tests.unit.run_entries import entry, runs_file

RUNS = [
    entry("a", 0, 100),
    entry("a", 200, 310),
    entry("a", 400, 550, met={"b": 30.0}),
    entry("a", 600, 700, met={"b": 20.0}, outcome=RunOutcome.FAILED),  # failed: not a runtime
    entry("b", 420, 480, met={"a": 30.0}),
    entry("b", 800, 880, met={"a": None}),  # its record says they met, for how long is unknown
    entry("b", 900, 970, met={"a": 5.0, "c": 5.0}),  # beside each of them
]
TABLE = """job,colocated_with,mean_runtime_s,samples,stdev_s,mean_startup_s
a,-,105,2,7.071,
a,b,150,1,,
b,a,70,3,10,
b,c,70,1,,
"""


def test_each_job_alone_and_beside_each_neighbour_with_mean_spread_and_samples() -> None:
    rows = calibrate(RUNS)

    assert [(row.job, row.colocated_with, row.mean_runtime_s, row.samples) for row in rows] == [
        ("a", None, 105.0, 2),  # 100 and 110 s
        ("a", "b", 150.0, 1),
        ("b", "a", 70.0, 3),  # 60, 80 and 70 s
        ("b", "c", 70.0, 1),
    ]
    assert [row.stdev_s for row in rows] == [pytest.approx(50**0.5), None, 10.0, None]


def test_each_row_has_the_mean_start_up_of_its_runs_that_know_it() -> None:
    runs = [
        entry("a", 10, 110, submitted=0),  # 10 s from the application's creation to the run's start
        entry("a", 220, 330, submitted=200),  # 20 s
        entry("a", 400, 490),  # no creation time: not counted
        entry("a", 615, 700, met={"b": 20.0}, submitted=600),
        entry("b", 650, 700, met={"a": 20.0}),
    ]

    rows = calibrate(runs)
    scaled = calibrate(runs, time_scale=0.5)

    assert [(row.job, row.colocated_with, row.mean_startup_s) for row in rows] == [
        ("a", None, 15.0),
        ("a", "b", 15.0),
        ("b", "a", None),
    ]
    assert [row.mean_startup_s for row in scaled] == [30.0, 30.0, None]
    assert render_table(rows).splitlines()[1:] == ["a,-,100,3,10,15", "a,b,85,1,,15", "b,a,50,1,,"]


def test_runs_of_a_time_scaled_simulator_give_modelled_seconds() -> None:
    scaled = calibrate(RUNS, time_scale=0.5)

    assert [(row.mean_runtime_s, row.stdev_s) for row in scaled] == [
        (row.mean_runtime_s * 2, None if row.stdev_s is None else pytest.approx(row.stdev_s * 2))
        for row in calibrate(RUNS)
    ]
    with pytest.raises(ValueError, match="positive"):
        calibrate(RUNS, time_scale=0)


def test_the_table_is_csv_with_the_alone_rows_marked() -> None:
    assert render_table(calibrate(RUNS)) == TABLE


def test_a_table_reads_back_as_it_was_written() -> None:
    rows = [TableRow("a", None, 105.5, 2, 0.5, 12.25), TableRow("a", "b", 150.0, 1)]

    assert read_table(render_table(rows), "t") == rows
    without_startup = "job,colocated_with,mean_runtime_s,samples,stdev_s\na,-,105.5,2,0.5\n"
    assert read_table(without_startup, "t") == [TableRow("a", None, 105.5, 2, 0.5, None)]


def test_the_theses_table_has_no_spread_and_still_reads() -> None:
    (row,) = read_table("job,colocated_with,mean_runtime_s,samples\nx,y,36,5\n", "t")

    assert row == TableRow("x", "y", 36.0, 5, None)


def test_the_configmap_is_the_one_the_simulator_watches() -> None:
    manifest = table_configmap(TABLE, "team-a")

    assert yaml.safe_load(yaml.safe_dump(manifest)) == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": TABLE_CONFIGMAP, "namespace": "team-a", "labels": {TABLE_LABEL: "true"}},
        "data": {TABLE_KEY: TABLE},
    }


@pytest.mark.parametrize(
    ("text", "where"),
    [
        pytest.param("job,with,runtime\na,b,1\n", "t, line 1: the header must be", id="wrong header"),
        pytest.param(TABLE + "c,d,fast,1,\n", "t, line 6, field mean_runtime_s: expected positive", id="not a number"),
        pytest.param(TABLE + "c,d,0,1,\n", "t, line 6, field mean_runtime_s", id="zero seconds"),
        pytest.param(TABLE + "c,d,1,1.5,\n", "t, line 6, field samples: expected a count", id="a fraction of a run"),
        pytest.param(TABLE + "c,d,1,1,-2\n", "t, line 6, field stdev_s", id="negative spread"),
        pytest.param(TABLE + "c,,1,1,\n", "t, line 6, field colocated_with: must not be empty", id="no neighbour"),
        pytest.param(TABLE + "c,d,1,1,,-1\n", "t, line 6, field mean_startup_s", id="negative start-up"),
        pytest.param(TABLE + "c,d,1,1,,9,9\n", "t, line 6: more fields", id="too many fields"),
        pytest.param(TABLE + "a,-,99,1,\n", "t, line 6: a second row for a alone", id="two alone rows"),
        pytest.param(TABLE + "a,b,99,1,\n", "t, line 6: a second row for a next to b", id="two rows of a pair"),
    ],
)
def test_a_table_that_cannot_be_used_is_refused_naming_line_and_field(text: str, where: str) -> None:
    with pytest.raises(TableError, match=f"^{where}"):
        read_table(text, "t")


# ---------------------------------------------------------------------------------------------- esi calibrate


def test_esi_calibrate_writes_the_table_of_runs_files(tmp_path: Path) -> None:
    first = runs_file(tmp_path / "first.json", RUNS[:3])
    second = runs_file(tmp_path / "second.jsonl", RUNS[3:], lines=True)

    result = CliRunner().invoke(app, ["calibrate", "--from", str(first), "--from", str(second)])
    scaled = CliRunner().invoke(app, ["calibrate", "--from", str(first), "--from", str(second), "--time-scale", "0.5"])

    assert result.exit_code == 0, result.output
    assert result.stdout == TABLE
    assert scaled.stdout.splitlines()[1] == "a,-,210,2,14.142,"  # 105 ± 7.071 modelled seconds at half speed


def test_esi_calibrate_selects_runs_and_writes_a_configmap_to_a_file(tmp_path: Path) -> None:
    runs = runs_file(tmp_path / "runs.json", [*RUNS, entry("a", 2000, 2300, scheduling="s2")])
    out = tmp_path / "table.yaml"
    args = ["calibrate", "--from", str(runs), "s1", "--until", "2026-11-28T12:10:00", "-o", "configmap"]

    result = CliRunner().invoke(app, [*args, "-n", "team-a", "--out", str(out)])

    assert result.exit_code == 0, result.output
    manifest = yaml.safe_load(out.read_text())
    # Scheduling s1, started before 600 s: b ran once, next to a.
    table = f"{TABLE.splitlines()[0]}\na,-,105,2,7.071,\na,b,150,1,,\nb,a,60,1,,\n"
    assert manifest == table_configmap(table, "team-a")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        pytest.param(["-o", "configmap"], "name it", id="a ConfigMap without a namespace"),
        pytest.param(["--selector", "a=b"], "carry no labels", id="labels of runs from a file"),
        pytest.param(["--since", "yesterday"], "not an ISO 8601 time", id="not a time"),
    ],
)
def test_esi_calibrate_refuses_what_it_cannot_do(tmp_path: Path, args: list[str], says: str) -> None:
    runs = runs_file(tmp_path / "runs.json", RUNS)

    result = CliRunner().invoke(app, ["calibrate", "--from", str(runs), *args])

    assert result.exit_code == 2
    assert says in result.output


def test_esi_calibrate_without_succeeded_runs_says_so(tmp_path: Path) -> None:
    runs = runs_file(tmp_path / "runs.json", [entry("a", 0, 10, outcome=RunOutcome.FAILED)])

    result = CliRunner().invoke(app, ["calibrate", "--from", str(runs)])

    assert result.exit_code == 1
    assert "no succeeded runs selected" in " ".join(result.output.split())
