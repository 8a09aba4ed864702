"""The workload model: how long a job runs, given the jobs whose executors share its nodes.

The model is a table of measured co-location runtimes — CSV with the columns
``job,colocated_with,mean_runtime_s,samples``, one row per (job, neighbour) pair, not symmetric: a row is
the runtime of its ``job`` only. ``sim/data/colocation-thesis.csv`` is the table measured in the thesis
(5-node GKE cluster, 750m CPU slots) and the default.

- The *base* runtime of a job (running alone) is an explicit value if one is given, else the smallest of
  its measured pair runtimes (the mildest neighbour is the best estimate of none), else
  ``default_runtime``.
- Next to a set C of other jobs, a job runs max over c in C of: the measured (job, c) runtime, else
  base x ``unknown_pair_factor``; with C empty, its base. The slowest neighbour decides, because a run ends
  with its slowest executor.
- ``time_scale`` stretches every runtime into wall-clock time (0.01 turns 444 s into 4.44 s).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Final

__all__ = ["DEFAULT_TABLE", "InterferenceModel", "ModelError", "parse_table"]

DEFAULT_TABLE: Final = Path(__file__).parent / "data" / "colocation-thesis.csv"
_COLUMNS: Final = ("job", "colocated_with", "mean_runtime_s", "samples")


class ModelError(ValueError):
    """A co-location table or a model setting that cannot be used; the message says where and why."""


@dataclass(frozen=True)
class InterferenceModel:
    """Measured pair runtimes (seconds) plus the rules above for everything that was not measured."""

    pairs: Mapping[tuple[str, str], float] = field(default_factory=dict)
    bases: Mapping[str, float] = field(default_factory=dict)  # explicit base runtimes, seconds
    default_runtime: float = 60.0
    unknown_pair_factor: float = 1.2
    time_scale: float = 1.0

    def __post_init__(self) -> None:
        named = {"default_runtime": self.default_runtime, "unknown_pair_factor": self.unknown_pair_factor}
        named |= {"time_scale": self.time_scale} | {f"base of {job}": s for job, s in self.bases.items()}
        named |= {f"runtime of {job} next to {other}": s for (job, other), s in self.pairs.items()}
        for name, value in named.items():
            if not (math.isfinite(value) and value > 0):
                raise ModelError(f"{name} must be a positive number of seconds or factor, not {value!r}")

    @classmethod
    def from_csv(
        cls,
        source: Path | str,
        *,
        bases: Mapping[str, float] | None = None,
        default_runtime: float = 60.0,
        unknown_pair_factor: float = 1.2,
        time_scale: float = 1.0,
    ) -> InterferenceModel:
        """The model of a co-location table: a path, or the CSV text itself."""
        text = source.read_text() if isinstance(source, Path) else source
        where = str(source) if isinstance(source, Path) else "the co-location table"
        return cls(
            pairs=parse_table(text, where),
            bases=dict(bases or {}),
            default_runtime=default_runtime,
            unknown_pair_factor=unknown_pair_factor,
            time_scale=time_scale,
        )

    def base(self, job: str) -> float:
        """Seconds ``job`` runs alone (unscaled)."""
        if job in self.bases:
            return self.bases[job]
        measured = [seconds for (row_job, _), seconds in self.pairs.items() if row_job == job]
        return min(measured) if measured else self.default_runtime

    def runtime(self, job: str, colocated: Iterable[str]) -> float:
        """Seconds ``job`` runs next to the jobs ``colocated`` (unscaled)."""
        base = self.base(job)
        others = set(colocated)
        if not others:
            return base
        return max(self.pairs.get((job, other), base * self.unknown_pair_factor) for other in others)

    def duration(self, job: str, colocated: Iterable[str]) -> timedelta:
        """The wall-clock time a run of ``job`` next to ``colocated`` takes: its runtime x ``time_scale``."""
        return timedelta(seconds=self.runtime(job, colocated) * self.time_scale)


def parse_table(text: str, where: str) -> dict[tuple[str, str], float]:
    """(job, colocated_with) -> mean runtime in seconds, from CSV text with a header row."""
    reader = csv.DictReader(io.StringIO(text))
    if tuple(reader.fieldnames or ()) != _COLUMNS:
        raise ModelError(f"{where}: the header must be {','.join(_COLUMNS)}, not {','.join(reader.fieldnames or ())}")
    pairs: dict[tuple[str, str], float] = {}
    for row in reader:
        line = reader.line_num
        job, other = (row["job"] or "").strip(), (row["colocated_with"] or "").strip()
        if not job or not other:
            raise ModelError(f"{where}, line {line}: job and colocated_with must not be empty")
        try:
            seconds = float(row["mean_runtime_s"] or "")
            samples = int(row["samples"] or "")
        except ValueError:
            raise ModelError(
                f"{where}, line {line}: mean_runtime_s must be a number and samples an integer, "
                f"not {row['mean_runtime_s']!r} and {row['samples']!r}"
            ) from None
        if not (math.isfinite(seconds) and seconds > 0) or samples < 1:
            raise ModelError(f"{where}, line {line}: mean_runtime_s and samples must be positive")
        if (job, other) in pairs:
            raise ModelError(f"{where}, line {line}: a second row for {job} next to {other}")
        pairs[(job, other)] = seconds
    return pairs
