"""The report of an experiment (esi.results.report and ``esi report``): figures read back from their SVG, the page
self-contained, the same bytes for the same runs."""

from __future__ import annotations

import json
import re
import sys
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path

import pytest
from typer.testing import CliRunner

import esi.results
from esi.client.cli import app
from esi.resources.batchjob import RunOutcome
from esi.results.metrics import RunGroup
from esi.results.report import build_report
from tests.unit.run_entries import entry, runs_file

SVG = "{http://www.w3.org/2000/svg}"

# Two Schedulings of the same jobs: x alone, then x and y side by side on n1; z alone on two slots of n2.
FIRST = [
    entry("x", 0, 10, submitted=0, slots=(0,)),
    entry("x", 20, 30, submitted=19, slots=(0,), met={"y": 8.0}),
    entry("y", 22, 30, submitted=19, slots=(1,), met={"x": 8.0}),
    entry("y", 40, 50, submitted=39, slots=(1,), outcome=RunOutcome.FAILED),
    entry("z", 0, 20, submitted=0, slots=(2, 3), nodes=("n2",)),
]
SECOND = [
    entry("x", 0, 12, submitted=0, slots=(0,), scheduling="s2"),
    entry("x", 20, 34, submitted=19, slots=(0,), met={"y": 10.0}, scheduling="s2"),
    entry("y", 24, 34, submitted=19, slots=(1,), met={"x": 10.0}, scheduling="s2"),
]


def groups() -> list[RunGroup]:
    return [RunGroup("first", FIRST), RunGroup("second", SECOND)]


@pytest.fixture(scope="module")
def files() -> Mapping[str, bytes]:
    """The report's files (drawn once: drawing takes seconds)."""
    return build_report(groups(), "An <experiment>").files


def elements(svg: bytes, prefix: str) -> dict[str, ET.Element]:
    """The SVG's groups whose id starts with ``prefix``, by id."""
    root = ET.fromstring(svg)  # noqa: S314 (our own SVG)
    return {g.get("id", ""): g for g in root.iter(f"{SVG}g") if g.get("id", "").startswith(prefix)}


def test_the_gantt_chart_has_a_bar_per_run_and_slot_marked_by_outcome(files: Mapping[str, bytes]) -> None:
    bars = {gid: len(list(g.iter(f"{SVG}path"))) for gid, g in elements(files["gantt.svg"], "gantt--").items()}
    assert bars == {
        "gantt--0--x--ok": 2,
        "gantt--0--y--ok": 1,
        "gantt--0--y--Failed": 1,
        "gantt--0--z--ok": 2,  # one run on two slots
        "gantt--1--x--ok": 2,
        "gantt--1--y--ok": 1,
    }


def test_the_slowdown_figure_has_a_bar_per_condition_each_job_ran_in(files: Mapping[str, bytes]) -> None:
    assert sorted(elements(files["slowdown.svg"], "slowdown--")) == [
        "slowdown--0--x--alone",
        "slowdown--0--x--y",
        "slowdown--0--y--x",  # y never ran alone (its run alone failed)
        "slowdown--0--z--alone",
        "slowdown--1--x--alone",
        "slowdown--1--x--y",
        "slowdown--1--y--x",
    ]


def test_the_heatmap_annotates_each_cell_with_its_mean_and_runs(files: Mapping[str, bytes]) -> None:
    cells = {
        gid: " ".join(t.strip() for t in g.itertext() if t.strip())
        for gid, g in elements(files["colocation.svg"], "colocation--").items()
    }
    assert cells == {
        "colocation--0--x--alone": "10 s (1)",
        "colocation--0--x--y": "10 s (1)",
        "colocation--0--y--x": "8 s (1)",
        "colocation--0--z--alone": "20 s (1)",
        "colocation--1--x--alone": "12 s (1)",
        "colocation--1--x--y": "14 s (1)",
        "colocation--1--y--x": "10 s (1)",
    }


def test_the_page_is_self_contained_with_unique_ids(files: Mapping[str, bytes]) -> None:
    page = files["report.html"].decode()
    assert "<title>An &lt;experiment&gt;</title>" in page
    assert page.count("<svg") == 3
    assert re.findall(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", page) == []
    assert "<script" not in page
    assert "<link" not in page
    ids = re.findall(r'\sid="([^"]*)"', page)
    assert len(ids) == len(set(ids))


def test_the_summary_has_a_column_per_group(files: Mapping[str, bytes]) -> None:
    assert json.loads(files["summary.json"])["first"]["failed"] == 1
    lines = files["summary.csv"].decode().splitlines()
    assert lines[0].startswith("group,runs,jobs,makespan_seconds")
    assert [line.split(",")[:3] for line in lines[1:]] == [["first", "5", "3"], ["second", "3", "2"]]


def test_the_same_runs_give_the_same_bytes(files: Mapping[str, bytes]) -> None:
    assert build_report(groups(), "An <experiment>").files == files


def test_a_report_needs_runs() -> None:
    with pytest.raises(ValueError, match="at least one group"):
        build_report([], "t")


# ---------------------------------------------------------------------------------------------- esi report


def test_esi_report_writes_the_report_of_runs_files_side_by_side(tmp_path: Path) -> None:
    first = runs_file(tmp_path / "first.json", FIRST)
    second = runs_file(tmp_path / "second.jsonl", SECOND, lines=True)
    out = tmp_path / "out"
    args = ["report", "--from", str(first), "--from", str(second), "--out", str(out)]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})  # the headline table uncut
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["report.html", "summary.csv", "summary.json"]
        + [f"{f}.{e}" for f in ("gantt", "slowdown", "colocation") for e in ("svg", "pdf")]
    )
    assert f"to {out}" in result.output
    assert re.search(r"first\s+│\s+5\s+│\s+50\.0s", result.output), result.output
    assert list(json.loads((out / "summary.json").read_text())) == ["first", "second"]


def test_esi_report_groups_by_scheduling_and_selects_by_time(tmp_path: Path) -> None:
    both = runs_file(tmp_path / "runs.json", FIRST + SECOND)
    out = tmp_path / "out"
    args = ["report", "--from", str(both), "--by", "scheduling", "--since", "2026-11-28T12:00:15", "--out", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    summaries = json.loads((out / "summary.json").read_text())
    assert {name: s["runs"] for name, s in summaries.items()} == {"s1": 4, "s2": 2}  # ended at 15 s or later


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--by", "scheduling", "--compare", "a=b"], "one way to group"),
        (["--selector", "a=b"], "carry no labels"),
        (["--since", "yesterday"], "not an ISO 8601 time"),
    ],
)
def test_esi_report_refuses_what_it_cannot_do(tmp_path: Path, args: list[str], says: str) -> None:
    runs = runs_file(tmp_path / "runs.json", FIRST)
    result = CliRunner().invoke(app, ["report", "--from", str(runs), *args])
    assert result.exit_code == 2
    assert says in result.output


def test_esi_report_says_what_is_wrong_with_a_runs_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('[{"job": "x"}]')
    args = ["report", "--from", str(bad), "--out", str(tmp_path / "out")]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "1000"})  # the path unwrapped, however long
    assert result.exit_code == 1
    assert "bad.json does not hold runs" in result.output


def test_esi_report_without_selected_runs_says_so(tmp_path: Path) -> None:
    runs = runs_file(tmp_path / "runs.json", FIRST)
    result = CliRunner().invoke(app, ["report", "--from", str(runs), "nobody", "--out", str(tmp_path / "out")])
    assert result.exit_code == 1
    assert "no runs selected" in " ".join(result.output.split())


def test_esi_report_without_matplotlib_says_how_to_install_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # None: its import fails as if it were not installed
    for module in ("report", "figures"):  # imported again, they ask for matplotlib
        monkeypatch.delitem(sys.modules, f"esi.results.{module}", raising=False)
        monkeypatch.delattr(esi.results, module, raising=False)
    runs = runs_file(tmp_path / "runs.json", FIRST)
    result = CliRunner().invoke(app, ["report", "--from", str(runs), "--out", str(tmp_path / "out")])
    assert result.exit_code == 1
    assert "pip install 'esi[analysis]'" in " ".join(result.output.split())


# ---------------------------------------------------------------------------------------------- reference tables

REFERENCE = "job,colocated_with,mean_runtime_s,samples,stdev_s\nx,-,100,3,2\nx,w,150,2,\nw,x,90,1,\n"


def test_a_reference_table_is_drawn_beside_the_runs_in_slowdown_and_colocation(tmp_path: Path) -> None:
    table = tmp_path / "thesis.csv"
    table.write_text(REFERENCE)
    out = tmp_path / "out"
    args = ["report", "--from", str(runs_file(tmp_path / "runs.json", FIRST)), "--reference", str(table)]
    result = CliRunner().invoke(app, [*args, "--out", str(out)])
    assert result.exit_code == 0, result.output
    cells = {
        gid: " ".join(t.strip() for t in g.itertext() if t.strip())
        for gid, g in elements((out / "colocation.svg").read_bytes(), "colocation--1--").items()
    }
    assert cells == {
        "colocation--1--w--x": "90 s (1)",
        "colocation--1--x--alone": "100 s (3)",
        "colocation--1--x--w": "150 s (2)",
    }
    assert sorted(elements((out / "slowdown.svg").read_bytes(), "slowdown--1--")) == [
        "slowdown--1--w--x",
        "slowdown--1--x--alone",
        "slowdown--1--x--w",
    ]
    page = (out / "report.html").read_text()
    assert "<h3>thesis</h3>" in page
    assert list(json.loads((out / "summary.json").read_text())) == ["runs"]  # a table has no runs to sum up


def test_a_reference_table_that_cannot_be_read_is_refused_before_anything_is_drawn(tmp_path: Path) -> None:
    table = tmp_path / "bad.csv"
    table.write_text("job,colocated_with,mean_runtime_s,samples\nx,-,soon,1\n")
    out = tmp_path / "out"
    runs = runs_file(tmp_path / "runs.json", FIRST)
    for reference, says in ((table, "field mean_runtime_s"), (tmp_path / "missing.csv", "cannot read")):
        result = CliRunner().invoke(
            app, ["report", "--from", str(runs), "--reference", str(reference), "--out", str(out)]
        )
        assert result.exit_code == 2, result.output
        assert says in " ".join(result.output.split())
    assert not out.exists()
