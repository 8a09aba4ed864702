"""An experiment's report from real Schedulings on the simulated cluster: two jobs side by side on one node, then
one alone; their Runs read as kubectl lists them, made into the run table, and reported by ``esi report``."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from esi.client.cli import app
from esi.resources.run import Run
from esi.results.metrics import job_runtimes
from esi.results.table import RunEntry, RunTable, run_entry, run_row
from infra.local_cluster import LocalCluster
from tests.integration.conftest import AddNodes
from tests.integration.esi_objects import new_testbed_on_nodes, run_to_end, spark_job
from tests.integration.kube import wait_for

COMPLETION = 300  # seconds a Scheduling of simulated jobs may take on a busy 2-core machine
# Two of the thesis' jobs: the simulated operator runs each for its measured runtime beside the other, or alone.
SPARK, CRAWLER = "batchjob-spark", "spark-crawler"


def slots(lists: dict[str, list[int]]) -> dict[str, Any]:
    """A Scheduling's spec that runs each job on its slots, together (relaxed)."""
    jobs = [{"name": {"name": job}, "slotIds": ids} for job, ids in lists.items()]
    return {"queueBased": None, "slotBased": {"mode": "relaxed", "jobs": jobs}}


def run_entries(cluster: LocalCluster, namespace: str, count: int) -> list[RunEntry] | None:
    """The namespace's Runs as the run table's rows, once there are ``count`` of them."""
    listed = json.loads(cluster.kubectl("get", "runs", "-n", namespace, "-o", "json"))["items"]
    if len(listed) != count:
        return None
    table = RunTable(run_row(Run.model_validate(item)) for item in listed)
    return [RunEntry.model_validate(run_entry(row, table.colocations(row))) for row in table]


def test_a_report_of_real_schedulings(
    esi_stack: LocalCluster, namespace: str, unique: str, add_nodes: AddNodes, tmp_path: Path
) -> None:
    new_testbed_on_nodes(esi_stack, namespace, unique, add_nodes, count=1)  # slots 0 and 1 on one node
    for job in (SPARK, CRAWLER):
        spark_job(esi_stack, namespace, job)
    run_to_end(esi_stack, namespace, "together", slots({SPARK: [0], CRAWLER: [1]}), timeout=COMPLETION)
    run_to_end(esi_stack, namespace, "alone", slots({SPARK: [0]}), timeout=COMPLETION)

    entries = wait_for("three Runs", functools.partial(run_entries, esi_stack, namespace, 3), timeout=60)
    runtimes = job_runtimes(entries)
    alone = runtimes[SPARK].alone
    assert alone is not None
    assert alone.samples == 1
    assert [(n, s.samples) for n, s in runtimes[SPARK].beside.items()] == [(CRAWLER, 1)]
    assert [(n, s.samples) for n, s in runtimes[CRAWLER].beside.items()] == [(SPARK, 1)]

    runs = tmp_path / "runs.json"
    runs.write_text(json.dumps([entry.model_dump(mode="json", by_alias=True) for entry in entries]))
    out = tmp_path / "report"
    result = CliRunner().invoke(app, ["report", "--from", str(runs), "--by", "scheduling", "--out", str(out)])
    assert result.exit_code == 0, result.output
    summaries = json.loads((out / "summary.json").read_text())
    assert {name: (s["runs"], s["succeeded"], s["slots"]) for name, s in summaries.items()} == {
        "alone": (1, 1, 1),
        "together": (2, 2, 2),
    }
    assert summaries["together"]["makespan_seconds"] > 0
    page = (out / "report.html").read_text()
    assert page.count("<svg") == 3
    assert f"slowdown-slowdown--1--{SPARK}--{CRAWLER}" in page  # the "together" group's bar beside the crawler
