"""The co-location table from recorded runs: rows computed by hand, the CSV, the ConfigMap, and reading it back."""

from __future__ import annotations

import pytest
import yaml

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
from tests.unit.run_entries import entry

RUNS = [
    entry("a", 0, 100),
    entry("a", 200, 310),
    entry("a", 400, 550, met={"b": 30.0}),
    entry("a", 600, 700, met={"b": 20.0}, outcome=RunOutcome.FAILED),  # failed: not a runtime
    entry("b", 420, 480, met={"a": 30.0}),
    entry("b", 800, 880, met={"a": None}),  # its record says they met, for how long is unknown
    entry("b", 900, 970, met={"a": 5.0, "c": 5.0}),  # beside each of them
]
TABLE = """job,colocated_with,mean_runtime_s,samples,stdev_s
a,-,105,2,7.071
a,b,150,1,
b,a,70,3,10
b,c,70,1,
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


def test_the_table_is_csv_with_the_alone_rows_marked() -> None:
    assert render_table(calibrate(RUNS)) == TABLE


def test_a_table_reads_back_as_it_was_written() -> None:
    rows = [TableRow("a", None, 105.5, 2, 0.5), TableRow("a", "b", 150.0, 1)]

    assert read_table(render_table(rows), "t") == rows


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
        pytest.param(TABLE + "c,d,1,1,,9\n", "t, line 6: more fields", id="too many fields"),
        pytest.param(TABLE + "a,-,99,1,\n", "t, line 6: a second row for a alone", id="two alone rows"),
        pytest.param(TABLE + "a,b,99,1,\n", "t, line 6: a second row for a next to b", id="two rows of a pair"),
    ],
)
def test_a_table_that_cannot_be_used_is_refused_naming_line_and_field(text: str, where: str) -> None:
    with pytest.raises(TableError, match=f"^{where}"):
        read_table(text, "t")
