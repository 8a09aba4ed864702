"""The co-location matrix the profiler learns: how long job a runs while job b runs on the same node.

The matrix lives only in the jobs themselves, in the original ESI's format
(docs/compatibility.md#the-co-location-matrix), so other tools written for the original read it and a
restarted profiler carries on where it stopped: job ``a``'s ``externalScheduler.profiler[0]`` maps each
partner ``b`` to ``"<seconds> (<samples>)"`` — the mean runtime of ``a`` next to ``b`` in whole seconds,
over that many runs. The matrix is not symmetric (a row is
its own job's runtime) and has no diagonal (a job runs once at a time, so it cannot be its own partner).

Beside it, ``externalScheduler.profilerSchedulings[0]`` maps each partner to the last profiling Scheduling
recorded into that entry (an addition; the original's readers ignore it). Recording the same Scheduling
again changes nothing, so a profiler that crashed between recording a run and deleting its Scheduling
neither loses the sample nor counts it twice.

Everything here is pure: jobs in, values out.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from datetime import datetime

from esi.wire.rest import ExternalBatchJob, ExternalScheduledEvent

__all__ = [
    "NO_SAMPLES",
    "PROFILER_KEY",
    "RECORDED_KEY",
    "ColocationMatrix",
    "Entry",
    "Pair",
    "Rejected",
    "UnreadableEntry",
    "least_sampled_pair",
    "measure",
    "parse_entry",
    "profile_row",
    "recorded_by",
    "with_profile_entry",
]

PROFILER_KEY = "profiler"
RECORDED_KEY = "profilerSchedulings"
Pair = tuple[str, str]
ExternalSchedulerData = Mapping[str, Sequence[Mapping[str, str]]]

# Decimals are read (another tool may write them) but never written: the original's readers expect integers.
_ENTRY = re.compile(r"\s*(\d+(?:\.\d+)?)\s*\(\s*(\d+)\s*\)\s*")


class UnreadableEntry(ValueError):
    """An entry of a job's profile that is not ``"<seconds> (<samples>)"``; the message names where."""


@dataclass(frozen=True, slots=True)
class Entry:
    """``M[a][b]``: ``seconds`` is the mean runtime of a next to b over ``samples`` runs."""

    seconds: int
    samples: int

    def __str__(self) -> str:
        return f"{self.seconds} ({self.samples})"

    def with_sample(self, seconds: float) -> Entry:
        """The cumulative moving average with one more run of ``seconds``: (avg·n + x) / (n + 1).

        Rounded to the nearest second, not truncated: truncating every update would pull the stored mean
        down a little more with each sample (docs/compatibility.md#profiling-scheduler).
        """
        if not (math.isfinite(seconds) and seconds >= 0):
            raise ValueError(f"a runtime must be a non-negative number of seconds, not {seconds!r}")
        count = self.samples + 1
        return Entry(math.floor((self.seconds * self.samples + seconds) / count + 0.5), count)


NO_SAMPLES = Entry(0, 0)


def parse_entry(text: str) -> Entry:
    """``"24 (16)"`` -> ``Entry(24, 16)``; raises ``UnreadableEntry`` for anything else."""
    match = _ENTRY.fullmatch(text)
    if match is None:
        raise UnreadableEntry(f"{text!r} is not '<seconds> (<samples>)'")
    return Entry(math.floor(float(match[1]) + 0.5), int(match[2]))


def _row(data: ExternalSchedulerData | None, key: str) -> Mapping[str, str]:
    entries = (data or {}).get(key) or []
    return entries[0] if entries else {}


def profile_row(data: ExternalSchedulerData | None) -> Mapping[str, str]:
    """The profiler's row of a job's ``externalScheduler`` data: partner -> entry text (empty if none)."""
    return _row(data, PROFILER_KEY)


def recorded_by(data: ExternalSchedulerData | None, partner: str) -> str | None:
    """The profiling Scheduling last recorded into the job's entry for ``partner``, if any."""
    return _row(data, RECORDED_KEY).get(partner)


def with_profile_entry(
    data: ExternalSchedulerData | None, partner: str, entry: Entry, scheduling: str
) -> dict[str, list[dict[str, str]]]:
    """The job's ``externalScheduler`` data with ``M[job][partner]`` set to ``entry``, recorded from
    ``scheduling``; nothing else changed.

    The API replaces the data wholesale, so what other tools keep there (other keys, further list items,
    entries of partners that no longer exist) is carried over.
    """
    result = {key: [dict(item) for item in items] for key, items in (data or {}).items()}
    for key, value in ((PROFILER_KEY, str(entry)), (RECORDED_KEY, scheduling)):
        rows = result.setdefault(key, [])
        if not rows:
            rows.append({})
        rows[0][partner] = value
    return result


@dataclass(frozen=True)
class ColocationMatrix:
    """The matrix over ``jobs`` (sorted), read from their profiles; ``problems`` lists what was unreadable."""

    jobs: tuple[str, ...]
    entries: Mapping[Pair, Entry] = field(default_factory=dict)
    problems: tuple[str, ...] = ()

    @classmethod
    def of_jobs(cls, jobs: Iterable[ExternalBatchJob]) -> ColocationMatrix:
        """The matrix between the given jobs; entries naming other jobs (or the job itself) are left out."""
        by_name = {job.name: job for job in jobs}
        entries: dict[Pair, Entry] = {}
        problems: list[str] = []
        for name, job in sorted(by_name.items()):
            for partner, text in sorted(profile_row(job.external_scheduler).items()):
                if partner == name or partner not in by_name:
                    continue
                try:
                    entries[(name, partner)] = parse_entry(text)
                except UnreadableEntry as err:
                    # Left out, not fatal: the pair counts as unmeasured and its next sample overwrites it.
                    problems.append(f"job {name}, partner {partner}: {err}")
        return cls(tuple(sorted(by_name)), entries, tuple(problems))

    def entry(self, job: str, partner: str) -> Entry:
        return self.entries.get((job, partner), NO_SAMPLES)

    def runtime(self, job: str, partner: str) -> int | None:
        """Mean seconds of ``job`` next to ``partner``; ``None`` while that was never measured."""
        entry = self.entry(job, partner)
        return entry.seconds if entry.samples else None

    def pairs(self) -> list[Pair]:
        """Every ordered pair of different jobs."""
        return [(a, b) for a in self.jobs for b in self.jobs if a != b]

    def with_sample(self, job: str, partner: str, seconds: float) -> ColocationMatrix:
        entries = dict(self.entries)
        entries[(job, partner)] = self.entry(job, partner).with_sample(seconds)
        return ColocationMatrix(self.jobs, entries, self.problems)

    def render(self) -> str:
        """A table as the thesis printed it: a row per job, its runtime next to each column's job."""
        header = ["", *self.jobs]
        rows = [[a, *("/" if a == b else str(self.entry(a, b)) if (a, b) in self.entries else "-" for b in self.jobs)]
                for a in self.jobs]  # fmt: skip
        widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
        return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
                         for row in [header, *rows])  # fmt: skip


def least_sampled_pair(matrix: ColocationMatrix, busy: Set[str] = frozenset()) -> Pair | None:
    """The ordered pair (a, b) whose ``M[a][b]`` has the fewest samples; ``None`` with fewer than two jobs.

    Among equally sampled pairs, one of jobs that are not ``busy`` (held by another Scheduling) comes
    first, so the profiler does not queue behind other work while it has a choice; then the pair whose
    reverse has fewer samples, since one run measures both directions; then names, so the choice is stable.
    """
    pairs = matrix.pairs()
    if not pairs:
        return None
    return min(
        pairs,
        key=lambda p: (matrix.entry(*p).samples, bool({*p} & busy), matrix.entry(p[1], p[0]).samples, p),
    )


@dataclass(frozen=True, slots=True)
class Rejected:
    """Why a job's run in a profiling Scheduling is not a sample of its pair."""

    reason: str


def measure(job: ExternalBatchJob, scheduling: str, partner: ExternalBatchJob | None = None) -> float | Rejected:
    """Seconds ``job`` ran in the Scheduling named ``scheduling`` (beside ``partner``), or why that is unknown.

    The run is the job's latest one of that Scheduling (a retried job has several; only the last can have
    succeeded). A failed run is no sample. Nor is one the partner did not share: the partner must have been
    on the node when the run started (esi's ``colocatedJobs``), or its own run in the same Scheduling, on
    a node of this one, must have overlapped it — a partner that started a little later still interferes,
    one that had ended before this run began does not.
    """
    runs = [run for run in job.scheduled_events if run.scheduling.name == scheduling]
    if not runs:
        return Rejected(f"{job.name} has no run in scheduling {scheduling}")
    run = max(runs, key=lambda r: (r.start, r.attempt))
    if run.stop is None or run.successful is None:
        return Rejected(f"the run of {job.name} in {scheduling} has not ended")
    if not run.successful:
        return Rejected(f"the run of {job.name} in {scheduling} failed")
    if partner is not None and not _beside(run, run.stop, partner, scheduling):
        return Rejected(f"{partner.name} did not run beside {job.name} in {scheduling}")
    return max((run.stop - run.start).total_seconds(), 0.0)


def _beside(run: ExternalScheduledEvent, stop: datetime, partner: ExternalBatchJob, scheduling: str) -> bool:
    if partner.name in run.colocated_jobs:
        return True
    return any(
        other.start < stop and (other.stop is None or other.stop > run.start)
        for other in partner.scheduled_events
        if other.scheduling.name == scheduling and set(other.nodes) & set(run.nodes)
    )
