"""What an experiment's runs add up to: makespan, waiting, slot utilisation, failures, and runtime beside others.

Computed from ``RunEntry`` rows (``esi.results.table``), as ``esi runs -o json`` gives them; the rules, once:

* **Makespan**: from the first run's ``submitted`` (its ``started`` when not known) to the last run's ``ended``.
* **Waiting**: ``waitingSeconds`` of the runs that have one; its mean, and its 95th percentile interpolated
  linearly between the closest ranks (numpy's default, ``percentile``).
* **Slot utilisation**: the slot-seconds runs held (slots times runtime, every run whatever its outcome) over the
  slots there were times makespan. The slots there were are a Testbed's slots when the ``SlotLayout`` given holds
  it (the CLI reads it from the Testbeds), else the distinct slots its runs used (then an upper bound: slots no run
  used are not counted).
* **Failed, cancelled, retried**: runs by outcome; a retry is a run with ``attempt`` > 1.
* **Runtime alone and beside a neighbour** (the thesis' co-location matrix), from succeeded runs only: a run is
  *beside* job N when it met N (``colocated`` lists N with seconds > 0, or with unknown seconds: its record says
  they met), however short the overlap; a run beside several jobs counts beside each of them. A run is *alone*
  when it met no job. ``slowdown`` is the mean runtime beside N over the mean runtime alone.

Pure: rows in, figures out.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from esi.resources.batchjob import RunOutcome
from esi.results.table import RunEntry
from esi.wire.rest import ExternalTestbed

__all__ = [
    "FIGURES",
    "JobRuntimes",
    "RunGroup",
    "RuntimeStats",
    "SlotKey",
    "SlotLayout",
    "SlotPlace",
    "Summary",
    "colocation_groups",
    "colocation_matrix",
    "job_runtimes",
    "met",
    "percentile",
    "slot_layout",
    "summary",
    "testbed_layout",
]

FIGURES: Final = {  # what each figure shows, by file name: (heading, caption)
    "gantt": (
        "Slot occupancy",
        "A row per slot, grouped by node; a bar per run, coloured by job; failed runs hatched "
        "with a red edge, cancelled ones dotted.",
    ),
    "slowdown": (
        "Runtime alone and beside others",
        "Each job's runtime alone and beside each neighbour (mean ± standard deviation), with the slowdown "
        "(runtime beside ÷ runtime alone) and the number of runs.",
    ),
    "colocation": (
        "Co-location matrix",
        "Each job's mean runtime alone and beside each neighbour, runs in "
        "brackets, coloured by the runtime relative to the job's runtime alone.",
    ),
}

SlotKey = tuple[str, int]  # (Testbed, slot id): slot ids are per Testbed


@dataclass(frozen=True, order=True)
class SlotPlace:
    """Where a slot is: its node and its position on the node."""

    node: str
    position: int


SlotLayout = Mapping[SlotKey, SlotPlace]


@dataclass(frozen=True)
class RunGroup:
    """Runs reported together (one Scheduling, selector or file): a title, the runs, and where their slots are
    (None: learnt from the runs, see ``slot_layout``)."""

    title: str
    entries: Sequence[RunEntry]
    layout: SlotLayout | None = None


UNKNOWN_NODE = "?"  # a slot's node when no run on one node alone used it (no Testbed layout given)


def testbed_layout(testbed: ExternalTestbed) -> dict[SlotKey, SlotPlace]:
    """Every slot of ``testbed`` and where it is, as its slot table says."""
    return {
        (testbed.name, slot.position): SlotPlace(node, slot.slot_position_on_node)
        for node, slots in testbed.slots_by_node.items()
        for slot in slots
    }


def slot_layout(entries: Iterable[RunEntry], known: SlotLayout | None = None) -> dict[SlotKey, SlotPlace]:
    """Where each slot the runs used is: from ``known`` (the Testbeds' layout), else learnt from the runs that ran on
    one node (all their slots are there), else on node ``?``; a learnt slot's position is its rank among its node's."""
    layout = dict(known or {})
    learnt: dict[SlotKey, str] = {}
    for entry in entries:
        for slot in entry.slots:
            key = (entry.testbed, slot)
            if key in layout:
                continue
            if len(entry.nodes) == 1:
                learnt[key] = entry.nodes[0]
            else:
                learnt.setdefault(key, UNKNOWN_NODE)
    by_node: dict[tuple[str, str], list[int]] = defaultdict(list)
    for (testbed, slot), node in learnt.items():
        by_node[(testbed, node)].append(slot)
    for (testbed, node), slots in by_node.items():
        for position, slot in enumerate(sorted(slots)):
            layout[(testbed, slot)] = SlotPlace(node, position)
    return layout


def percentile(values: Sequence[float], share: float) -> float:
    """The ``share`` (0..1) quantile of ``values``, interpolated linearly between the closest ranks."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    rank = share * (len(ordered) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass(frozen=True)
class Summary:
    """An experiment's headline figures (seconds; None where no run tells)."""

    runs: int
    jobs: int
    first_submitted: datetime | None
    last_ended: datetime | None
    makespan_seconds: float | None
    waiting_mean_seconds: float | None
    waiting_p95_seconds: float | None
    slots: int
    slot_seconds: float
    utilisation: float | None  # 0..1
    succeeded: int
    failed: int
    cancelled: int
    retried: int

    def as_dict(self) -> dict[str, object]:
        """The figures as JSON/CSV values: times ISO 8601, seconds rounded to milliseconds."""
        plain: dict[str, object] = {}
        for name, value in self.__dict__.items():
            if isinstance(value, datetime):
                plain[name] = value.isoformat().replace("+00:00", "Z")
            elif isinstance(value, float):
                plain[name] = round(value, 6 if name == "utilisation" else 3)
            else:
                plain[name] = value
        return plain


def summary(entries: Sequence[RunEntry], layout: SlotLayout | None = None) -> Summary:
    """The headline figures of ``entries``; ``layout``: the Testbeds' slots (a Testbed it lacks: the slots used)."""
    starts = [entry.submitted or entry.started for entry in entries]
    ends = [entry.ended for entry in entries if entry.ended is not None]
    first = min(starts, default=None)
    last = max(ends, default=None)
    makespan = max((last - first).total_seconds(), 0.0) if first is not None and last is not None else None
    waits = [entry.waiting_seconds for entry in entries if entry.waiting_seconds is not None]
    slot_seconds = sum(len(entry.slots) * (entry.runtime_seconds or 0.0) for entry in entries)
    laid_out = {testbed for testbed, _ in layout or {}}
    used = {(entry.testbed, slot) for entry in entries for slot in entry.slots if entry.testbed not in laid_out}
    slots = sum(1 for testbed, _ in layout or {} if testbed in {entry.testbed for entry in entries}) + len(used)
    outcomes = [entry.outcome for entry in entries]
    return Summary(
        runs=len(entries),
        jobs=len({(entry.namespace, entry.job) for entry in entries}),
        first_submitted=first,
        last_ended=last,
        makespan_seconds=makespan,
        waiting_mean_seconds=statistics.fmean(waits) if waits else None,
        waiting_p95_seconds=percentile(waits, 0.95) if waits else None,
        slots=slots,
        slot_seconds=slot_seconds,
        utilisation=slot_seconds / (slots * makespan) if slots and makespan else None,
        succeeded=outcomes.count(RunOutcome.SUCCEEDED),
        failed=outcomes.count(RunOutcome.FAILED),
        cancelled=outcomes.count(RunOutcome.CANCELLED),
        retried=sum(entry.attempt > 1 for entry in entries),
    )


@dataclass(frozen=True)
class RuntimeStats:
    """Runtimes of some runs: their mean, sample standard deviation (None below two) and count."""

    mean: float
    stdev: float | None
    samples: int

    @classmethod
    def of(cls, runtimes: Sequence[float]) -> RuntimeStats:
        if not runtimes:
            raise ValueError("runtime statistics of no runs")
        stdev = statistics.stdev(runtimes) if len(runtimes) > 1 else None
        return cls(statistics.fmean(runtimes), stdev, len(runtimes))


@dataclass(frozen=True)
class JobRuntimes:
    """One job's runtime alone and beside each neighbour it met (by the neighbour's name)."""

    job: str
    alone: RuntimeStats | None
    beside: Mapping[str, RuntimeStats]

    def slowdown(self, neighbour: str) -> float | None:
        """Mean runtime beside ``neighbour`` over mean runtime alone (None: never alone, or never beside it)."""
        stats = self.beside.get(neighbour)
        if stats is None or self.alone is None or self.alone.mean == 0:
            return None
        return stats.mean / self.alone.mean


def met(entry: RunEntry) -> list[str]:
    """The jobs ``entry`` ran beside: those its ``colocated`` lists with seconds > 0 or unknown."""
    return [c.job for c in entry.colocated if c.seconds is None or c.seconds > 0]


def colocation_groups(entries: Iterable[RunEntry]) -> dict[str, dict[str | None, list[RunEntry]]]:
    """Each job's succeeded runs (with a runtime): alone (key None) and beside each neighbour; jobs sorted, alone
    first, then neighbours sorted. A run beside several jobs is in each of their groups."""
    groups: dict[str, dict[str | None, list[RunEntry]]] = defaultdict(lambda: defaultdict(list))
    for entry in entries:
        if entry.outcome is not RunOutcome.SUCCEEDED or entry.runtime_seconds is None:
            continue
        neighbours: list[str | None] = [*met(entry)]
        for neighbour in neighbours or [None]:
            groups[entry.job][neighbour].append(entry)
    return {
        job: dict(sorted(groups[job].items(), key=lambda item: (item[0] is not None, item[0] or "")))
        for job in sorted(groups)
    }


def job_runtimes(entries: Iterable[RunEntry]) -> dict[str, JobRuntimes]:
    """Each job's runtime alone and beside each neighbour, from its succeeded runs; jobs and neighbours sorted."""
    runtimes: dict[str, JobRuntimes] = {}
    for job, groups in colocation_groups(entries).items():
        stats = {n: RuntimeStats.of([run.runtime_seconds or 0.0 for run in runs]) for n, runs in groups.items()}
        alone = stats.pop(None, None)
        runtimes[job] = JobRuntimes(job, alone, {n: s for n, s in stats.items() if n is not None})
    return runtimes


def colocation_matrix(
    runtimes: Mapping[str, JobRuntimes],
) -> tuple[list[str], list[str], list[list[RuntimeStats | None]]]:
    """The thesis' table: a row per job, a column per neighbour any job met (sorted), each cell the row's runtime
    beside the column's job (None where they never met)."""
    rows = sorted(runtimes)
    columns = sorted({n for job in runtimes.values() for n in job.beside})
    return rows, columns, [[runtimes[job].beside.get(n) for n in columns] for job in rows]
