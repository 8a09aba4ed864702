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
* **Queries** by job, Scheduling, Testbed, outcome, time and a label selector (``label_selector``: kubectl's
  ``-l`` syntax); ``continue_token`` / ``continued`` carry a page's cursor to the next request.
* **Records**: ``RunEntry`` is a row on the wire (JSON, camelCase); ``COLUMNS`` and ``run_columns`` the same row
  flat (CSV, Parquet): lists joined by ``;``, a neighbour as ``job=seconds``; ``read_run_columns`` reads the CSV
  back. ``RenderedRuns`` keeps each row rendered until a row it overlaps changes.

Pure: Runs in, rows and records out.
"""

from __future__ import annotations

import base64
import bisect
import csv
import io
import json
import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Final

from pydantic import Field
from pydantic_core import to_json

from esi.resources.batchjob import RunOutcome
from esi.resources.meta import EsiModel
from esi.resources.run import Run, RunKind

__all__ = [
    "COLUMNS",
    "CSV_HEADER",
    "ColocatedJob",
    "Colocation",
    "Cursor",
    "LabelOperator",
    "LabelRequirement",
    "Page",
    "RenderedRuns",
    "RunEntry",
    "RunPage",
    "RunQuery",
    "RunRow",
    "RunTable",
    "continue_token",
    "continued",
    "label_selector",
    "ran_within",
    "read_run_columns",
    "run_columns",
    "run_entry",
    "run_row",
]

Key = tuple[str, str]  # (namespace, name) of a Run
SECONDS_DIGITS: Final = 6  # durations to the microsecond, as runs are recorded: not the noise of Unix-seconds floats
Cursor = tuple[float, str, str]  # (start as Unix seconds, namespace, name): where a page ends
LIST_SEPARATOR: Final = ";"


def _epoch(moment: datetime) -> float:
    return (moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)).timestamp()


@dataclass(frozen=True, slots=True)
class RunRow:
    """One Run, as the table holds it: times as Unix seconds (a table of 100,000 rows is held in tens of MB)."""

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
    submitted_s: float | None
    start_s: float
    ended_s: float | None
    outcome: RunOutcome | None
    reason: str | None
    incomplete: str | None
    labels: Mapping[str, str]
    end_s: float = field(init=False)  # the start for a run without an end: it overlaps nothing
    cursor: Cursor = field(init=False)

    def __post_init__(self) -> None:
        start = self.start_s
        object.__setattr__(self, "end_s", max(self.ended_s, start) if self.ended_s is not None else start)
        object.__setattr__(self, "cursor", (start, self.namespace, self.name))

    @property
    def key(self) -> Key:
        return (self.namespace, self.name)

    @property
    def submitted(self) -> datetime | None:
        return _moment(self.submitted_s)

    @property
    def start(self) -> datetime:
        return datetime.fromtimestamp(self.start_s, UTC)

    @property
    def end(self) -> datetime | None:
        return _moment(self.ended_s)

    @property
    def waiting_seconds(self) -> float | None:
        """From its application's creation to the run's start: how long its executors waited for their slots."""
        if self.submitted_s is None:
            return None
        return round(max(self.start_s - self.submitted_s, 0.0), SECONDS_DIGITS)

    @property
    def runtime_seconds(self) -> float | None:
        return round(self.end_s - self.start_s, SECONDS_DIGITS) if self.ended_s is not None else None

    def neighbour_name(self, other: RunRow) -> str:
        """How this run names ``other``'s job: by name in its own namespace, else namespace/name."""
        return other.job if other.namespace == self.namespace else f"{other.namespace}/{other.job}"


def _moment(seconds: float | None) -> datetime | None:
    return datetime.fromtimestamp(seconds, UTC) if seconds is not None else None


# Label sets are shared between rows: a job's runs carry the same few, and 100,000 copies would weigh.
_LABEL_SETS: dict[tuple[tuple[str, str], ...], Mapping[str, str]] = {}
_LABEL_SETS_LIMIT: Final = 65_536


def _shared_labels(labels: Mapping[str, str] | None) -> Mapping[str, str]:
    items = tuple(sorted((sys.intern(k), sys.intern(v)) for k, v in (labels or {}).items()))
    shared = _LABEL_SETS.get(items)
    if shared is None:
        if len(_LABEL_SETS) >= _LABEL_SETS_LIMIT:
            _LABEL_SETS.clear()
        shared = _LABEL_SETS[items] = MappingProxyType(dict(items))
    return shared


def run_row(run: Run) -> RunRow:
    """The row of ``run``; names it shares with other rows (job, node, label …) are held once."""
    spec = run.spec
    intern = sys.intern
    return RunRow(
        namespace=intern(run.metadata.namespace or ""),
        name=run.metadata.name,
        job=intern(spec.job),
        kind=spec.kind,
        ordinal=spec.ordinal,
        attempt=spec.attempt,
        scheduling=intern(spec.scheduling),
        testbed=intern(spec.testbed),
        slots=tuple(spec.slots),
        nodes=tuple(intern(node) for node in spec.nodes),
        recorded_neighbours=tuple(intern(job) for job in spec.colocated_jobs),
        submitted_s=_epoch(spec.submitted) if spec.submitted is not None else None,
        start_s=_epoch(spec.start),
        ended_s=_epoch(spec.end) if spec.end is not None else None,
        outcome=spec.outcome,
        reason=spec.reason,
        incomplete=spec.incomplete,
        labels=_shared_labels(run.metadata.labels),
    )


@dataclass(frozen=True, slots=True)
class Colocation:
    """A job a run met: ``seconds`` they overlapped on shared nodes (None: met, as its record says, for how long
    the table cannot tell)."""

    job: str
    seconds: float | None


class LabelOperator(StrEnum):
    EQUALS = "="
    NOT_EQUALS = "!="
    IN = "in"
    NOT_IN = "notin"
    EXISTS = "exists"
    NOT_EXISTS = "!"


@dataclass(frozen=True, slots=True)
class LabelRequirement:
    """One term of a label selector, as Kubernetes reads it: ``key=value`` (or ``==``), ``key!=value`` (also
    true without the label), ``key in (a,b)``, ``key notin (a,b)`` (also true without it), ``key``, ``!key``."""

    key: str
    operator: LabelOperator
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        match self.operator:
            case LabelOperator.EQUALS | LabelOperator.IN:
                return value in self.values
            case LabelOperator.NOT_EQUALS | LabelOperator.NOT_IN:
                return value not in self.values
            case LabelOperator.EXISTS:
                return value is not None
            case LabelOperator.NOT_EXISTS:
                return value is None


_LABEL_TERM: Final = re.compile(
    r"\s*(?:(?P<absent>!)\s*(?P<absent_key>[^\s=!(),]+)"
    r"|(?P<key>[^\s=!(),]+)\s*(?:(?P<op>==|=|!=)\s*(?P<value>[^\s=!(),]*)"
    r"|\s(?P<set>in|notin)\s*\((?P<values>[^()]*)\))?)\s*(?:,|$)"
)


def label_selector(text: str) -> tuple[LabelRequirement, ...]:
    """The requirements of a label selector (``kubectl -l``'s syntax); ValueError names what it cannot read."""
    requirements: list[LabelRequirement] = []
    position = 0
    while position < len(text):
        term = _LABEL_TERM.match(text, position)
        if term is None or term.end() == position:
            raise ValueError(
                f"not a label selector at {text[position:]!r}: key=value, key!=value, key in (a,b), key, !key"
            )
        position = term.end()
        if term["absent"]:
            requirements.append(LabelRequirement(term["absent_key"], LabelOperator.NOT_EXISTS))
        elif term["op"]:
            operator = LabelOperator.NOT_EQUALS if term["op"] == "!=" else LabelOperator.EQUALS
            requirements.append(LabelRequirement(term["key"], operator, frozenset({term["value"]})))
        elif term["set"]:
            values = frozenset(v.strip() for v in term["values"].split(",") if v.strip())
            requirements.append(LabelRequirement(term["key"], LabelOperator(term["set"]), values))
        else:
            requirements.append(LabelRequirement(term["key"], LabelOperator.EXISTS))
        if term.group(0).rstrip().endswith(",") and position == len(text):
            raise ValueError(f"not a label selector: {text!r} ends in a comma")
    return tuple(requirements)


@dataclass(frozen=True)
class RunQuery:
    """Which rows to select; an empty set selects all. A run is in ``[since, until)`` when it ran at some moment
    of it (ended at or after ``since``, started before ``until``)."""

    namespace: str | None = None  # None: every namespace
    jobs: frozenset[str] = frozenset()
    schedulings: frozenset[str] = frozenset()
    testbeds: frozenset[str] = frozenset()
    outcomes: frozenset[RunOutcome] = frozenset()
    labels: tuple[LabelRequirement, ...] = ()  # every one met (``label_selector``)
    since: datetime | None = None
    until: datetime | None = None

    def selects(self, row: RunRow) -> bool:
        return (
            (self.namespace is None or row.namespace == self.namespace)
            and (not self.jobs or row.job in self.jobs)
            and (not self.schedulings or row.scheduling in self.schedulings)
            and (not self.testbeds or row.testbed in self.testbeds)
            and (not self.outcomes or row.outcome in self.outcomes)
            and all(requirement.matches(row.labels) for requirement in self.labels)
            and ran_within(row.start_s, row.end_s, self.since, self.until)
        )


def ran_within(start: float, end: float, since: datetime | None, until: datetime | None) -> bool:
    """Whether a run from ``start`` to ``end`` (Unix seconds) ran at some moment of ``[since, until)``: it ended at
    or after ``since`` and started before ``until`` (either None: no bound)."""
    return (since is None or end >= _epoch(since)) and (until is None or start < _epoch(until))


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
        start, end, rows = row.start_s, row.end_s, self._rows
        if end <= start:  # a run without an end (or of no length) meets nobody
            return
        for node in row.nodes:
            runs = self._by_node.get(node)
            if runs is None:
                continue
            cursors, earliest = runs.cursors, start - runs.longest
            index = bisect.bisect_left(cursors, (end,))
            while index > 0:
                index -= 1
                other_start, namespace, name = cursors[index]
                if other_start < earliest:
                    break
                key = (namespace, name)
                other_end = rows[key].end_s
                # min(ends) > max(starts), the row's own end after its start being checked above
                if key not in seen and other_end > start and end > other_start and other_end > other_start:
                    seen.add(key)
                    yield rows[key]

    def colocations(self, row: RunRow) -> tuple[Colocation, ...]:
        """The jobs ``row`` met, by name, each with the seconds they overlapped."""
        seconds: dict[str, float] = {}
        start, end, namespace, job = row.start_s, row.end_s, row.namespace, row.job
        for other in self.overlapping(row):
            if other.job == job and other.namespace == namespace:
                continue
            name = other.job if other.namespace == namespace else f"{other.namespace}/{other.job}"
            seconds[name] = seconds.get(name, 0.0) + min(end, other.end_s) - max(start, other.start_s)
        met: dict[str, float | None] = {name: None for name in row.recorded_neighbours if name != row.job}
        met.update({name: round(value, SECONDS_DIGITS) for name, value in seconds.items()})
        return tuple(Colocation(name, met[name]) for name in sorted(met))

    def select(self, query: RunQuery, *, after: Cursor | None = None, limit: int | None = None) -> Page:
        """The rows ``query`` selects in table order, after ``after``, at most ``limit`` of them."""
        start = bisect.bisect_right(self._order, after) if after is not None else 0
        stop = bisect.bisect_left(self._order, (_epoch(query.until),)) if query.until is not None else None
        rows: list[RunRow] = []
        for cursor in self._order[start:stop]:
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

    namespace: str = Field(description="The Run's namespace (its job's).")
    name: str = Field(description="The Run's name: the job's name, 8 characters of its uid, the ordinal.")
    job: str = Field(description="The BatchJob that ran.")
    kind: RunKind = Field(description="spark or flink.")
    ordinal: int = Field(description="Which run of the job it is, counting all its runs (1 the first).")
    attempt: int = Field(description="Which run of the job in its Scheduling (1 the first, more after retries).")
    scheduling: str = Field(description="The Scheduling it ran in.")
    testbed: str = Field(description="The Testbed whose slots it ran in.")
    slots: list[int] = Field(description="The slot ids its executors had (the original's numbering).")
    nodes: list[str] = Field(description="The nodes of those slots.")
    colocated: list[ColocatedJob] = Field(description="The jobs it met on its nodes, by name.")
    submitted: datetime | None = Field(description="When its application was created (UTC).")
    started: datetime = Field(description="When its executors were running (UTC).")
    ended: datetime | None = Field(description="When it ended (UTC); null if its record has no end.")
    waiting_seconds: float | None = Field(description="From submitted to started.")
    runtime_seconds: float | None = Field(description="From started to ended.")
    outcome: RunOutcome | None = Field(description="Succeeded, Failed or Cancelled.")
    reason: str | None = Field(description="Why it failed or was cancelled.")
    incomplete: str | None = Field(description="What its record could not learn, and why.")


class RunPage(EsiModel):
    """A page of the run table: its entries, and the token that asks for the next page (null: the last)."""

    items: list[RunEntry]
    continue_: str | None = Field(
        alias="continue", description="Pass it as `continue` to get the next page; null on the last page."
    )


_EPOCH: Final = datetime(1970, 1, 1)  # naive: isoformat without an offset, then Z (a third faster than with one)


def _time(seconds: float | None) -> str | None:
    return (_EPOCH + timedelta(seconds=seconds)).isoformat() + "Z" if seconds is not None else None


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
        "submitted": _time(row.submitted_s),
        "started": _time(row.start_s),
        "ended": _time(row.ended_s),
        "waitingSeconds": row.waiting_seconds,
        "runtimeSeconds": row.runtime_seconds,
        "outcome": row.outcome.value if row.outcome is not None else None,
        "reason": row.reason,
        "incomplete": row.incomplete,
    }


COLUMNS: Final = tuple(info.alias or name for name, info in RunEntry.model_fields.items())
"""The run table's columns, flat (CSV, Parquet), in ``RunEntry``'s order."""


_LISTS: Final = ("slots", "nodes", "colocated")
_SLOTS, _NODES, _COLOCATED = (COLUMNS.index(column) for column in _LISTS)


def run_columns(entry: Mapping[str, Any]) -> tuple[object, ...]:
    """A ``run_entry`` as flat values in ``COLUMNS`` order: lists joined by ``;``, a neighbour as ``job=seconds``."""
    values: list[object] = [entry[column] for column in COLUMNS]
    values[_SLOTS] = LIST_SEPARATOR.join(map(str, entry["slots"]))
    values[_NODES] = LIST_SEPARATOR.join(entry["nodes"])
    values[_COLOCATED] = LIST_SEPARATOR.join(
        f"{met['job']}={'' if met['seconds'] is None else round(met['seconds'], 3)}" for met in entry["colocated"]
    )
    return tuple(values)


_CSV_BUFFER: Final = io.StringIO()
_CSV_WRITER: Final = csv.writer(_CSV_BUFFER)


def _csv_line(values: Iterable[object]) -> str:
    _CSV_BUFFER.seek(0)
    _CSV_BUFFER.truncate()
    _CSV_WRITER.writerow(values)
    return _CSV_BUFFER.getvalue()


CSV_HEADER: Final = _csv_line(COLUMNS)
"""The first line of the run table as CSV: ``COLUMNS``, ending in CRLF as every line does (RFC 4180)."""


def read_run_columns(text: str) -> list[RunEntry]:
    """The runs of a run table's CSV (``CSV_HEADER``, then ``run_columns`` a line each), as ``RunEntry`` again: an
    empty value is null, lists split at ``;``, a neighbour ``job=seconds`` (seconds empty: unknown). Raises
    pydantic's ``ValidationError`` for a line that is not a run."""
    entries = []
    for line in csv.DictReader(io.StringIO(text)):
        record: dict[str, Any] = {column: line.get(column) or None for column in COLUMNS}
        lists = {column: [v for v in (line.get(column) or "").split(LIST_SEPARATOR) if v] for column in _LISTS}
        neighbours = (met.rpartition("=") for met in lists["colocated"])
        record |= {"slots": lists["slots"], "nodes": lists["nodes"]}
        record["colocated"] = [{"job": job, "seconds": seconds or None} for job, _, seconds in neighbours]
        entries.append(RunEntry.model_validate(record))
    return entries


class RenderedRuns:
    """A ``RunTable`` whose rows are rendered once — as a ``RunEntry``'s JSON and as a CSV line — and again only
    when their co-locations may have changed: when a row they overlap is put or removed.

    Exporting 100,000 rows is then a join of bytes, not 100,000 co-locations computed and records built.
    A row is kept rendered once it was asked for, in the forms asked for: about 0.8 KB of JSON and 0.4 KB of CSV
    (the row itself about 0.7 KB).
    """

    def __init__(self, table: RunTable | None = None) -> None:
        self.table = table if table is not None else RunTable()
        self._json: dict[Key, bytes] = {}
        self._csv: dict[Key, bytes] = {}

    def put(self, row: RunRow) -> None:
        self.remove(row.namespace, row.name)
        self.table.put(row)
        self._forget_around(row)

    def remove(self, namespace: str, name: str) -> None:
        row = self.table.get(namespace, name)
        if row is not None:
            self._forget_around(row)
            self.table.remove(namespace, name)

    def _forget_around(self, row: RunRow) -> None:
        if not self._json and not self._csv:  # nothing rendered yet (as while a list fills the table)
            return
        for key in (row.key, *(other.key for other in self.table.overlapping(row))):
            self._json.pop(key, None)
            self._csv.pop(key, None)

    def entry(self, row: RunRow) -> dict[str, Any]:
        return run_entry(row, self.table.colocations(row))

    def json(self, row: RunRow) -> bytes:
        """``row``'s ``RunEntry`` as JSON."""
        rendered = self._json.get(row.key)
        if rendered is None:
            rendered = to_json(self.entry(row))
            if self.table.get(row.namespace, row.name) is row:  # not one removed since it was selected
                self._json[row.key] = rendered
        return rendered

    def csv(self, row: RunRow) -> bytes:
        """``row`` as a line of CSV, in ``COLUMNS`` order."""
        rendered = self._csv.get(row.key)
        if rendered is None:
            rendered = _csv_line(run_columns(self.entry(row))).encode()
            if self.table.get(row.namespace, row.name) is row:
                self._csv[row.key] = rendered
        return rendered

    def clear(self) -> None:
        self.table = RunTable()
        self._json.clear()
        self._csv.clear()


def continue_token(cursor: Cursor) -> str:
    """The ``continue`` token of a page that ends at ``cursor``: opaque to clients, read by ``continued``."""
    return base64.urlsafe_b64encode(json.dumps(cursor, separators=(",", ":")).encode()).decode().rstrip("=")


def continued(token: str) -> Cursor:
    """The cursor a ``continue_token`` holds; ValueError for anything else."""
    try:
        start, namespace, name = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        if isinstance(start, int | float) and isinstance(namespace, str) and isinstance(name, str):
            return (float(start), namespace, name)
    except (ValueError, TypeError):
        pass
    raise ValueError("not a continue token of this API: pass the one a page answered, as it is")
