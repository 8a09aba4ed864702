"""The run table: one row per Run (``esi.resources.run``), each with the jobs it met and for how long.

* **A row is a Run, as written.** ``run_row`` takes what the Run says; a row never changes, as a Run never does.
* **Co-location is computed, not recorded.** Two runs met when they shared a node while both ran; the seconds
  they overlapped are those of the intersection of their ``[start, end)``, counted once however many nodes they
  shared, and summed per neighbouring job. A neighbour is named as a run's ``colocatedJobs`` name it: by name
  in the run's namespace, ``namespace/name`` from another. A job the run's record names but whose overlapping
  run the table does not hold (pruned, not written yet, or the record without nodes) is listed with unknown
  seconds. Runs of the same job never count as neighbours.
* **Order**: by start, then namespace and name; a page continues after the last row of the one before it
  (``Cursor``), so pages stay stable while rows are added.
* **Records**: ``RunEntry`` is a row on the wire (JSON, camelCase); ``COLUMNS`` and ``run_columns`` the same row
  flat (CSV, Parquet): lists joined by ``;``, a neighbour as ``job=seconds``.

Pure: Runs in, rows and records out.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from pydantic import Field

from esi.resources.batchjob import RunOutcome
from esi.resources.meta import EsiModel
from esi.resources.run import Run, RunKind

__all__ = [
    "COLUMNS",
    "ColocatedJob",
    "Colocation",
    "Cursor",
    "Page",
    "RunEntry",
    "RunQuery",
    "RunRow",
    "RunTable",
    "run_columns",
    "run_entry",
    "run_row",
]

Key = tuple[str, str]  # (namespace, name) of a Run
Cursor = tuple[float, str, str]  # (start as Unix seconds, namespace, name): where a page ends
LIST_SEPARATOR: Final = ";"


def _epoch(moment: datetime) -> float:
    return (moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)).timestamp()


@dataclass(frozen=True, slots=True)
class RunRow:
    """One Run, as the table holds it."""

    namespace: str
    name: str
    job: str
    kind: RunKind
    ordinal: int
    attempt: int
    scheduling: str
    testbed: str
    slots: tuple[int, ...]
    nodes: tuple[str, ...]
    recorded_neighbours: tuple[str, ...]  # the record's colocatedJobs
    submitted: datetime | None
    start: datetime
    end: datetime | None
    outcome: RunOutcome | None
    reason: str | None
    incomplete: str | None
    labels: Mapping[str, str]
    start_s: float = field(init=False)
    end_s: float = field(init=False)  # the start for a run without an end: it overlaps nothing

    def __post_init__(self) -> None:
        start = _epoch(self.start)
        object.__setattr__(self, "start_s", start)
        object.__setattr__(self, "end_s", max(_epoch(self.end), start) if self.end is not None else start)

    @property
    def key(self) -> Key:
        return (self.namespace, self.name)

    @property
    def cursor(self) -> Cursor:
        return (self.start_s, self.namespace, self.name)

    @property
    def waiting_seconds(self) -> float | None:
        """From its application's creation to the run's start: how long its executors waited for their slots."""
        if self.submitted is None:
            return None
        return max(self.start_s - _epoch(self.submitted), 0.0)

    @property
    def runtime_seconds(self) -> float | None:
        return self.end_s - self.start_s if self.end is not None else None

    def neighbour_name(self, other: RunRow) -> str:
        """How this run names ``other``'s job: by name in its own namespace, else namespace/name."""
        return other.job if other.namespace == self.namespace else f"{other.namespace}/{other.job}"


def run_row(run: Run) -> RunRow:
    spec = run.spec
    return RunRow(
        namespace=run.metadata.namespace or "",
        name=run.metadata.name,
        job=spec.job,
        kind=spec.kind,
        ordinal=spec.ordinal,
        attempt=spec.attempt,
        scheduling=spec.scheduling,
        testbed=spec.testbed,
        slots=tuple(spec.slots),
        nodes=tuple(spec.nodes),
        recorded_neighbours=tuple(spec.colocated_jobs),
        submitted=spec.submitted,
        start=spec.start,
        end=spec.end,
        outcome=spec.outcome,
        reason=spec.reason,
        incomplete=spec.incomplete,
        labels=dict(run.metadata.labels or {}),
    )


@dataclass(frozen=True, slots=True)
class Colocation:
    """A job a run met: ``seconds`` they overlapped on shared nodes (None: met, as its record says, for how long
    the table cannot tell)."""

    job: str
    seconds: float | None


@dataclass(frozen=True)
class RunQuery:
    """Which rows to select; an empty set selects all. A run is in ``[since, until)`` when it ran at some moment
    of it (ended at or after ``since``, started before ``until``)."""

    namespace: str | None = None  # None: every namespace
    jobs: frozenset[str] = frozenset()
    schedulings: frozenset[str] = frozenset()
    testbeds: frozenset[str] = frozenset()
    outcomes: frozenset[RunOutcome] = frozenset()
    labels: Mapping[str, str] = field(default_factory=dict)  # each label equal to its value
    since: datetime | None = None
    until: datetime | None = None

    def selects(self, row: RunRow) -> bool:
        return (
            (self.namespace is None or row.namespace == self.namespace)
            and (not self.jobs or row.job in self.jobs)
            and (not self.schedulings or row.scheduling in self.schedulings)
            and (not self.testbeds or row.testbed in self.testbeds)
            and (not self.outcomes or row.outcome in self.outcomes)
            and all(row.labels.get(k) == v for k, v in self.labels.items())
            and (self.since is None or (row.end_s if row.end is not None else row.start_s) >= _epoch(self.since))
            and (self.until is None or row.start_s < _epoch(self.until))
        )


@dataclass(frozen=True)
class Page:
    """Rows of a query in table order; ``next`` continues after them (None: there are no more)."""

    rows: list[RunRow]
    next: Cursor | None


class _NodeRuns:
    """The runs on one node, by start, and the longest of them (how far back an overlapping run can start)."""

    __slots__ = ("cursors", "longest")

    def __init__(self) -> None:
        self.cursors: list[Cursor] = []
        self.longest = 0.0


class RunTable:
    """The rows of every Run seen, indexed by node for co-location and kept in table order for paging."""

    def __init__(self, rows: Iterable[RunRow] = ()) -> None:
        self._rows: dict[Key, RunRow] = {}
        self._order: list[Cursor] = []
        self._by_node: dict[str, _NodeRuns] = {}
        for row in rows:
            self.put(row)

    def __len__(self) -> int:
        return len(self._rows)

    def __iter__(self) -> Iterator[RunRow]:
        return (self._rows[(ns, name)] for _, ns, name in self._order)

    def get(self, namespace: str, name: str) -> RunRow | None:
        return self._rows.get((namespace, name))

    def put(self, row: RunRow) -> None:
        self.remove(row.namespace, row.name)
        self._rows[row.key] = row
        bisect.insort(self._order, row.cursor)
        for node in row.nodes:
            runs = self._by_node.setdefault(node, _NodeRuns())
            bisect.insort(runs.cursors, row.cursor)
            runs.longest = max(runs.longest, row.end_s - row.start_s)

    def remove(self, namespace: str, name: str) -> None:
        row = self._rows.pop((namespace, name), None)
        if row is None:
            return
        _discard(self._order, row.cursor)
        for node in row.nodes:
            runs = self._by_node[node]
            _discard(runs.cursors, row.cursor)
            if not runs.cursors:
                del self._by_node[node]

    def overlapping(self, row: RunRow) -> Iterator[RunRow]:
        """The other rows that shared a node with ``row`` while both ran, each once."""
        seen: set[Key] = {row.key}
        for node in row.nodes:
            runs = self._by_node.get(node)
            if runs is None:
                continue
            earliest = row.start_s - runs.longest
            index = bisect.bisect_left(runs.cursors, (row.end_s,))
            while index > 0:
                index -= 1
                start, namespace, name = runs.cursors[index]
                if start < earliest:
                    break
                other = self._rows[(namespace, name)]
                if other.key not in seen and min(row.end_s, other.end_s) > max(row.start_s, start):
                    seen.add(other.key)
                    yield other

    def colocations(self, row: RunRow) -> tuple[Colocation, ...]:
        """The jobs ``row`` met, by name, each with the seconds they overlapped."""
        seconds: dict[str, float] = {}
        for other in self.overlapping(row):
            if (other.namespace, other.job) == (row.namespace, row.job):
                continue
            overlap = min(row.end_s, other.end_s) - max(row.start_s, other.start_s)
            name = row.neighbour_name(other)
            seconds[name] = seconds.get(name, 0.0) + overlap
        met: dict[str, float | None] = {name: None for name in row.recorded_neighbours if name != row.job}
        met.update(seconds)
        return tuple(Colocation(name, met[name]) for name in sorted(met))

    def select(self, query: RunQuery, *, after: Cursor | None = None, limit: int | None = None) -> Page:
        """The rows ``query`` selects in table order, after ``after``, at most ``limit`` of them."""
        start = bisect.bisect_right(self._order, after) if after is not None else 0
        rows: list[RunRow] = []
        for cursor in self._order[start:]:
            row = self._rows[(cursor[1], cursor[2])]
            if not query.selects(row):
                continue
            if limit is not None and len(rows) == limit:
                return Page(rows, rows[-1].cursor)
            rows.append(row)
        return Page(rows, None)


def _discard(cursors: list[Cursor], cursor: Cursor) -> None:
    index = bisect.bisect_left(cursors, cursor)
    if index < len(cursors) and cursors[index] == cursor:
        del cursors[index]


class ColocatedJob(EsiModel):
    job: str = Field(description="The job it met: a name, or namespace/name from another namespace.")
    seconds: float | None = Field(
        description="How long they ran side by side on a shared node; null when its record names the job but the "
        "table holds no run of it that overlapped (pruned, not written yet, or the record without nodes)."
    )


class RunEntry(EsiModel):
    """One row of the run table, as the REST API and ``esi runs -o json`` give it."""

    namespace: str
    name: str = Field(description="The Run's name.")
    job: str
    kind: RunKind
    ordinal: int = Field(description="Which run of the job it is, counting all its runs (1 the first).")
    attempt: int = Field(description="Which run of the job in its Scheduling (1 the first, more after retries).")
    scheduling: str
    testbed: str
    slots: list[int]
    nodes: list[str]
    colocated: list[ColocatedJob] = Field(description="The jobs it met on its nodes, by name.")
    submitted: datetime | None = Field(description="When its application was created.")
    started: datetime
    ended: datetime | None
    waiting_seconds: float | None = Field(description="From submitted to started.")
    runtime_seconds: float | None = Field(description="From started to ended.")
    outcome: RunOutcome | None
    reason: str | None = Field(description="Why it failed or was cancelled.")
    incomplete: str | None = Field(description="What its record could not learn, and why.")


def _time(moment: datetime | None) -> str | None:
    return moment.isoformat().replace("+00:00", "Z") if moment is not None else None


def run_entry(row: RunRow, colocations: Iterable[Colocation]) -> dict[str, Any]:
    """``row`` as a ``RunEntry``'s JSON, built directly (a table of 100,000 rows is written in seconds)."""
    return {
        "namespace": row.namespace,
        "name": row.name,
        "job": row.job,
        "kind": row.kind.value,
        "ordinal": row.ordinal,
        "attempt": row.attempt,
        "scheduling": row.scheduling,
        "testbed": row.testbed,
        "slots": list(row.slots),
        "nodes": list(row.nodes),
        "colocated": [{"job": c.job, "seconds": c.seconds} for c in colocations],
        "submitted": _time(row.submitted),
        "started": _time(row.start),
        "ended": _time(row.end),
        "waitingSeconds": row.waiting_seconds,
        "runtimeSeconds": row.runtime_seconds,
        "outcome": row.outcome.value if row.outcome is not None else None,
        "reason": row.reason,
        "incomplete": row.incomplete,
    }


COLUMNS: Final = tuple(info.alias or name for name, info in RunEntry.model_fields.items())
"""The run table's columns, flat (CSV, Parquet), in ``RunEntry``'s order."""


def _flat(value: object) -> object:
    if isinstance(value, list):
        return LIST_SEPARATOR.join(
            f"{item['job']}={'' if item['seconds'] is None else round(item['seconds'], 3)}"
            if isinstance(item, dict)
            else str(item)
            for item in value
        )
    return value


def run_columns(entry: Mapping[str, Any]) -> tuple[object, ...]:
    """A ``run_entry`` as flat values in ``COLUMNS`` order: lists joined by ``;``, a neighbour as ``job=seconds``."""
    return tuple(_flat(entry[column]) for column in COLUMNS)
