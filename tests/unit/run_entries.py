"""A builder of ``RunEntry`` rows for the tests of what is computed from runs: a run by job, start and end (seconds
after T0); and a file of them as ``esi runs -o json`` (``-o csv``) writes it."""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from esi.resources.batchjob import RunOutcome
from esi.resources.run import RunKind
from esi.results.table import COLUMNS, ColocatedJob, RunEntry, run_columns

T0 = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def entry(
    job: str,
    start: float,
    end: float | None,
    *,
    submitted: float | None = None,
    slots: Sequence[int] = (0,),
    nodes: Sequence[str] = ("n1",),
    met: Mapping[str, float | None] | None = None,
    outcome: RunOutcome | None = RunOutcome.SUCCEEDED,
    attempt: int = 1,
    scheduling: str = "s1",
    testbed: str = "tb",
) -> RunEntry:
    return RunEntry(
        namespace="team-a",
        name=f"{job}-{start:g}",
        job=job,
        kind=RunKind.SPARK,
        ordinal=1,
        attempt=attempt,
        scheduling=scheduling,
        testbed=testbed,
        slots=list(slots),
        nodes=list(nodes),
        colocated=[ColocatedJob(job=name, seconds=seconds) for name, seconds in (met or {}).items()],
        submitted=at(submitted) if submitted is not None else None,
        started=at(start),
        ended=at(end) if end is not None else None,
        waiting_seconds=start - submitted if submitted is not None else None,
        runtime_seconds=end - start if end is not None else None,
        outcome=outcome,
        reason="executor lost" if outcome is RunOutcome.FAILED else None,
        incomplete=None,
    )


def runs_csv(path: Path, runs: list[RunEntry]) -> Path:
    """``runs`` written to ``path`` as ``esi runs -o csv`` does."""
    with path.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(COLUMNS)
        writer.writerows(run_columns(run.model_dump(mode="json", by_alias=True)) for run in runs)
    return path


def runs_file(path: Path, runs: list[RunEntry], lines: bool = False) -> Path:
    """``runs`` written to ``path`` as ``esi runs -o json`` does: a JSON array, or (``lines``) a run per line."""
    records = [run.model_dump(mode="json", by_alias=True) for run in runs]
    path.write_text("\n".join(json.dumps(r) for r in records) if lines else json.dumps(records))
    return path
