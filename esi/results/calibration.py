"""The simulator's co-location table: calibrated from recorded runs, written as CSV or a ConfigMap, and read back.

The table's format, once (``esi calibrate`` writes it, the simulator reads it with ``read_table``):

* CSV with a header row ``job,colocated_with,mean_runtime_s,samples``, optionally followed by ``stdev_s``, or by
  ``stdev_s,mean_startup_s`` (the thesis' table, ``sim/data/colocation-thesis.csv``, has neither).
* A row is the runtime of its ``job`` only (the table is not symmetric): next to ``colocated_with``, or alone
  when ``colocated_with`` is ``-`` (``ALONE``). At most one row per (job, colocated_with).
* ``mean_runtime_s`` is positive seconds, ``samples`` a positive count of runs, ``stdev_s`` their sample
  standard deviation in seconds (empty below two samples).
* ``mean_startup_s`` is the mean seconds from its runs' applications' creation to the runs' start (``RunEntry``'s
  ``waitingSeconds``: spark-submit, driver, executors asked for and running) over the row's runs that have one;
  empty (or no such column) when none has, which the simulator takes as 0.

``calibrate`` takes the rows from ``colocation_groups`` (``esi.results.metrics``): succeeded runs only, a run beside
every job it met however short the overlap, alone when it met none. A table reaches the simulator in a
ConfigMap (``table_configmap``): named ``TABLE_CONFIGMAP``, labelled ``TABLE_LABEL`` (the simulator watches only
those), the CSV under the key ``TABLE_KEY``; it applies to the jobs of the ConfigMap's namespace. The ConfigMap may
also hold, under ``TIME_SCALE_KEY``, the time scale of that namespace's runs (``sim.runtime`` says what it does).

Pure: runs in, rows, CSV and manifests out; CSV text in, rows out.
"""

from __future__ import annotations

import csv
import io
import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from esi.resources.meta import GROUP
from esi.results.metrics import JobRuntimes, RuntimeStats, colocation_groups
from esi.results.table import RunEntry

__all__ = [
    "ALONE",
    "COLUMNS",
    "TABLE_CONFIGMAP",
    "TABLE_KEY",
    "TABLE_LABEL",
    "TIME_SCALE_KEY",
    "TableError",
    "TableRow",
    "calibrate",
    "read_table",
    "render_table",
    "table_configmap",
    "table_runtimes",
]

COLUMNS: Final = ("job", "colocated_with", "mean_runtime_s", "samples", "stdev_s", "mean_startup_s")
_REQUIRED: Final = COLUMNS[:4]  # the thesis' table: no stdev_s, no mean_startup_s
_HEADERS: Final = (_REQUIRED, COLUMNS[:5], COLUMNS)
ALONE: Final = "-"  # colocated_with of a job's runtime alone

TABLE_CONFIGMAP: Final = "esi-colocation"
TABLE_LABEL: Final = f"sim.{GROUP}/colocation-table"
TABLE_KEY: Final = "colocation.csv"
TIME_SCALE_KEY: Final = "time-scale"


class TableError(ValueError):
    """A co-location table that cannot be used; the message names where (line, field) and why."""


@dataclass(frozen=True)
class TableRow:
    """The runtime of ``job`` next to ``colocated_with`` (None: alone): mean and spread over ``samples`` runs, and
    the mean start-up of those runs (None: not known)."""

    job: str
    colocated_with: str | None
    mean_runtime_s: float
    samples: int
    stdev_s: float | None = None
    mean_startup_s: float | None = None

    @classmethod
    def of(cls, job: str, colocated_with: str | None, runs: Sequence[RunEntry], time_scale: float = 1.0) -> TableRow:
        """The row of ``runs`` (succeeded, each with a runtime), their seconds divided by ``time_scale``."""
        stats = RuntimeStats.of([run.runtime_seconds or 0.0 for run in runs])
        stdev = stats.stdev / time_scale if stats.stdev is not None else None
        waits = [run.waiting_seconds for run in runs if run.waiting_seconds is not None]
        startup = statistics.fmean(waits) / time_scale if waits else None
        return cls(job, colocated_with, stats.mean / time_scale, stats.samples, stdev, startup)


def calibrate(entries: Iterable[RunEntry], *, time_scale: float = 1.0) -> list[TableRow]:
    """The table of ``entries``: per job its runtime alone (when it ran alone), then beside each neighbour it met;
    jobs and neighbours sorted. ``time_scale`` is the simulator's the runs ran at (1 for real runs): their seconds
    are divided by it, so that the table holds modelled seconds, as the simulator reads them."""
    if not (math.isfinite(time_scale) and time_scale > 0):
        raise ValueError(f"the time scale must be a positive number, not {time_scale!r}")
    return [
        TableRow.of(job, neighbour, runs, time_scale)
        for job, groups in colocation_groups(entries).items()
        for neighbour, runs in groups.items()
    ]


def table_runtimes(rows: Iterable[TableRow]) -> dict[str, JobRuntimes]:
    """A table's rows as each job's runtime alone and beside its neighbours, as runs give them; jobs and neighbours
    sorted."""
    alone: dict[str, RuntimeStats] = {}
    beside: dict[str, dict[str, RuntimeStats]] = {}
    for row in rows:
        stats = RuntimeStats(row.mean_runtime_s, row.stdev_s, row.samples)
        beside.setdefault(row.job, {})
        if row.colocated_with is None:
            alone[row.job] = stats
        else:
            beside[row.job][row.colocated_with] = stats
    return {job: JobRuntimes(job, alone.get(job), dict(sorted(beside[job].items()))) for job in sorted(beside)}


def _seconds(value: float | None) -> str:
    """Seconds to the millisecond, without trailing zeros; empty for None."""
    return "" if value is None else f"{value:.3f}".rstrip("0").rstrip(".")


def render_table(rows: Iterable[TableRow]) -> str:
    """``rows`` as the table's CSV, header included."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for row in rows:
        neighbour = ALONE if row.colocated_with is None else row.colocated_with
        seconds = (_seconds(row.mean_runtime_s), row.samples, _seconds(row.stdev_s), _seconds(row.mean_startup_s))
        writer.writerow((row.job, neighbour, *seconds))
    return out.getvalue()


def table_configmap(table: str, namespace: str, *, time_scale: float | None = None) -> dict[str, Any]:
    """The ConfigMap that gives the simulator ``table`` (CSV) for the jobs of ``namespace``, and their
    ``time_scale`` if given."""
    scale = {TIME_SCALE_KEY: f"{time_scale:g}"} if time_scale is not None else {}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": TABLE_CONFIGMAP, "namespace": namespace, "labels": {TABLE_LABEL: "true"}},
        "data": {TABLE_KEY: table, **scale},
    }


def read_table(text: str, where: str) -> list[TableRow]:
    """The rows of a table's CSV text; ``where`` names it in errors (a file, a ConfigMap)."""
    reader = csv.DictReader(io.StringIO(text))
    header = tuple(reader.fieldnames or ())
    if header not in _HEADERS:
        expected = f"{','.join(_REQUIRED)}[,stdev_s[,mean_startup_s]]"
        raise TableError(f"{where}, line 1: the header must be {expected}, not {','.join(header)}")
    rows: list[TableRow] = []
    seen: set[tuple[str, str | None]] = set()
    for fields in reader:
        row = _row(fields, f"{where}, line {reader.line_num}")
        if (row.job, row.colocated_with) in seen:
            beside = "alone" if row.colocated_with is None else f"next to {row.colocated_with}"
            raise TableError(f"{where}, line {reader.line_num}: a second row for {row.job} {beside}")
        seen.add((row.job, row.colocated_with))
        rows.append(row)
    return rows


def _row(fields: Mapping[str | None, Any], where: str) -> TableRow:
    if fields.get(None):  # DictReader's key for values beyond the header
        raise TableError(f"{where}: more fields than the header names")
    values = {column: str(fields.get(column) or "").strip() for column in COLUMNS}
    for column in _REQUIRED:
        if not values[column]:
            raise TableError(f"{where}, field {column}: must not be empty")
    mean = _number(values["mean_runtime_s"], f"{where}, field mean_runtime_s", lambda x: x > 0, "positive seconds")
    samples = _number(values["samples"], f"{where}, field samples", lambda x: x >= 1 and x.is_integer(), "a count ≥ 1")
    stdev, startup = (_optional_seconds(values[column], f"{where}, field {column}") for column in COLUMNS[4:])
    neighbour = values["colocated_with"]
    return TableRow(values["job"], None if neighbour == ALONE else neighbour, mean, int(samples), stdev, startup)


def _optional_seconds(text: str, where: str) -> float | None:
    return _number(text, where, lambda x: x >= 0, "seconds ≥ 0 or empty") if text else None


def _number(text: str, where: str, holds: Callable[[float], bool], expected: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and holds(value)):
        raise TableError(f"{where}: expected {expected}, not {text!r}")
    return value
