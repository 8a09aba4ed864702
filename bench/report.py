"""How long ``esi report`` takes to compute and draw an experiment of 10,000 and 100,000 runs (prints, asserts
nothing); ``--example DIR`` writes the report of a realistic experiment of a few hundred runs instead.

The runs are synthetic, shaped like the thesis' profiling experiment: 5 nodes with 2 slots each, rounds in which a
node runs a pair of the thesis' jobs side by side (one slot each; now and then one job alone), each for the runtime
the thesis measured beside its partner (``sim/data/colocation-thesis.csv``) ± 10 %; alone, 15 % faster than its
fastest pairing. About 2 % of runs fail part-way and run again (attempt 2) in the node's next round.
"""

from __future__ import annotations

import argparse
import csv
import random
import sys
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

from esi.resources.batchjob import RunOutcome
from esi.resources.run import RunKind
from esi.results.metrics import RunGroup
from esi.results.report import build_report
from esi.results.table import RunEntry, RunRow, RunTable, run_entry

__all__ = ["synthetic_runs", "thesis_matrix"]

THESIS = Path(__file__).resolve().parent.parent / "sim" / "data" / "colocation-thesis.csv"
NODES = 5
SLOTS_PER_NODE = 2
T0 = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


def thesis_matrix() -> dict[str, dict[str, float]]:
    """The thesis' mean runtime (s) of each job beside each other job."""
    matrix: dict[str, dict[str, float]] = defaultdict(dict)
    with THESIS.open() as file:
        for line in csv.DictReader(file):
            matrix[line["job"]][line["colocated_with"]] = float(line["mean_runtime_s"])
    return dict(matrix)


def synthetic_runs(count: int, seed: int = 1, scheduling: str = "profiling") -> list[RunEntry]:
    """``count`` runs of a profiling experiment on one Testbed ``tb`` (see the module's docstring)."""
    matrix = thesis_matrix()
    jobs = sorted(matrix)
    rng = random.Random(seed)  # noqa: S311 (a synthetic experiment, not a secret)
    rows: list[RunRow] = []
    ordinals: dict[str, int] = defaultdict(int)
    clock = [0.0] * NODES
    retry: list[list[str]] = [[] for _ in range(NODES)]
    rounds = 0
    while len(rows) < count:
        node = min(range(NODES), key=lambda n: clock[n])
        pair = retry[node] + [job for job in rng.sample(jobs, 2) if job not in retry[node]]
        pair = pair[: 1 if rng.random() < 0.15 else 2]
        retries, retry[node] = set(retry[node]), []
        rounds += 1
        submitted = clock[node]
        ends = []
        for position, job in enumerate(pair):
            partner = next((other for other in pair if other != job), None)
            mean = matrix[job][partner] if partner else 0.85 * min(matrix[job].values())
            start = submitted + rng.uniform(1.0, 4.0)
            runtime = mean * rng.uniform(0.9, 1.1)
            failed = rng.random() < 0.02
            if failed:
                runtime *= rng.uniform(0.1, 0.9)
                retry[node].append(job)
            ordinals[job] += 1
            slot = node * SLOTS_PER_NODE + position
            rows.append(
                RunRow(
                    namespace="profiling",
                    name=f"{job}-{ordinals[job]}",
                    job=job,
                    kind=RunKind.FLINK if "flink" in job else RunKind.SPARK,
                    ordinal=ordinals[job],
                    attempt=2 if job in retries else 1,
                    scheduling=f"{scheduling}-{rounds}",
                    testbed="tb",
                    slots=(slot,),
                    nodes=(f"node-{node + 1}",),
                    recorded_neighbours=(partner,) if partner else (),
                    submitted_s=T0.timestamp() + submitted,
                    start_s=T0.timestamp() + start,
                    ended_s=T0.timestamp() + start + runtime,
                    outcome=RunOutcome.FAILED if failed else RunOutcome.SUCCEEDED,
                    reason="executor lost" if failed else None,
                    incomplete=None,
                    labels={},
                )
            )
            ends.append(start + runtime)
        clock[node] = max(ends) + rng.uniform(0.5, 2.0)
    table = RunTable(rows[:count])
    return [RunEntry.model_validate(run_entry(row, table.colocations(row))) for row in table]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--example", type=Path, help="write a realistic example report (400 runs) into this folder")
    args = parser.parse_args()
    if args.example is not None:
        report = build_report([RunGroup("profiling", synthetic_runs(400))], "A profiling experiment")
        args.example.mkdir(parents=True, exist_ok=True)
        for name, content in report.files.items():
            (args.example / name).write_bytes(content)
        print(f"wrote {', '.join(sorted(report.files))} to {args.example}")
        return
    print("esi report: compute and draw an experiment's runs (synthetic, thesis-shaped)")
    print(f"{'runs':>8}  {'make runs':>9}  {'report':>7}  {'report cpu':>10}  {'html':>7}")
    for count in (10_000, 100_000):
        began = time.perf_counter()
        entries = synthetic_runs(count)
        made, cpu = time.perf_counter(), time.process_time()
        report = build_report([RunGroup("profiling", entries)], "benchmark")
        done, cpu = time.perf_counter(), time.process_time() - cpu  # CPU time: what a busy machine does not inflate
        size = len(report.files["report.html"]) / 1e6
        print(f"{count:>8,}  {made - began:>8.1f}s  {done - made:>6.1f}s  {cpu:>9.1f}s  {size:>5.1f}MB", flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
