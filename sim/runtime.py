"""The workload model: how long a job runs, given the jobs whose executors share its nodes; and which table applies.

The model is a co-location table of measured runtimes (its format: ``esi.results.calibration``; ``esi calibrate``
writes one from recorded runs): per (job, neighbour) the runtime of that job only (not symmetric), and a job's
runtime alone (``colocated_with`` ``-``). ``sim/data/colocation-thesis.csv`` is the table measured in the thesis
(5-node GKE cluster, 750m CPU slots) and the default.

- The *base* runtime of a job (running alone) is an explicit value if one is given (``--base``, else the
  table's alone row), else the smallest of its measured pair runtimes (the mildest neighbour is the best
  estimate of none), else ``default_runtime``.
- Next to a set C of other jobs, a job runs max over c in C of: the measured (job, c) runtime, else
  base x ``unknown_pair_factor``; with C empty, its base. The slowest neighbour decides, because a run ends
  with its slowest executor.
- ``time_scale`` stretches every runtime (and start-up) into wall-clock time (0.01 turns 444 s into 4.44 s).
- **Start-up**: the seconds from an application's creation until its executors run (spark-submit, the driver's
  JVM, the executors asked for). The simulator creates a run's executors no earlier than its application's
  creation plus its job's start-up (x ``time_scale``), taken from the table's ``mean_startup_s`` for its
  neighbours C: the jobs of other applications, not over, whose executors are bound for (required node affinity, as
  esi writes it) or running on the nodes its executors are bound for — applications still in their own start-up
  included, so two jobs started together are each other's neighbours, as calibration files their runs. The start-up
  is the largest of the rows (job, c) for c in C that have one; else (C empty, or no such row) its alone row's; else
  the samples-weighted mean of all its rows that have one; else 0 (the thesis' table has none: executors at once).
  Decided at the application's first sight and again, for the neighbours known then, whenever the simulator looks
  at it before its executors exist: never earlier than decided before (recorded on the application,
  ``sim.lifecycle``).
- A table's ``stdev_s`` is for people and benchmarks; the simulator does not draw from it. Runs vary only with
  ``--runtime-jitter`` (one relative spread for every job, drawn per application from the seed), so a simulated
  experiment stays reproducible and its spread is one knob.

**Which table applies** (``Tables``): a run of a job in namespace N uses N's table, given in the ConfigMap
``esi-colocation`` of N labelled ``sim.esi.tu-berlin.de/colocation-table`` (``TABLE_CONFIGMAP``, ``TABLE_LABEL``,
under the key ``TABLE_KEY``), else the default table (``--table``). N's table replaces the default for N's jobs
entirely (rows are not merged); the simulator's settings (default runtime, unknown-pair factor, time scale)
apply to every table, ``--base`` to the default table only. The ConfigMap may set its namespace's time scale under
the key ``TIME_SCALE_KEY`` (``time-scale``, a positive factor), replacing ``--time-scale`` for its jobs: so one
simulator runs a benchmark's namespace at the pace of the real runs it is compared with (where esi's own fraction
of a second per run does not count) while others run faster. A table is read when its ConfigMap changes and
applies to the runs planned from then on (a run in progress keeps its end until a neighbour arrives); a
ConfigMap whose table cannot be used is reported and the namespace keeps the table it had; deleting the
ConfigMap goes back to the default.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import Any, Final

from esi.results.calibration import TABLE_CONFIGMAP, TABLE_KEY, TIME_SCALE_KEY, TableError, read_table

__all__ = ["DEFAULT_TABLE", "InterferenceModel", "ModelError", "Tables"]

DEFAULT_TABLE: Final = Path(__file__).parent / "data" / "colocation-thesis.csv"


class ModelError(ValueError):
    """A co-location table or a model setting that cannot be used; the message says where and why."""


@dataclass(frozen=True)
class InterferenceModel:
    """Measured pair runtimes (seconds) plus the rules above for everything that was not measured."""

    pairs: Mapping[tuple[str, str], float] = field(default_factory=dict)
    bases: Mapping[str, float] = field(default_factory=dict)  # explicit base runtimes, seconds
    # (job, neighbour or None: alone) -> (mean start-up seconds, samples)
    startups: Mapping[tuple[str, str | None], tuple[float, int]] = field(default_factory=dict)
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
        """The model of a co-location table (a path, or the CSV text itself); ``bases`` override its alone rows."""
        text = source.read_text() if isinstance(source, Path) else source
        where = str(source) if isinstance(source, Path) else "the co-location table"
        settings = cls(default_runtime=default_runtime, unknown_pair_factor=unknown_pair_factor, time_scale=time_scale)
        model = settings.with_table(text, where)
        return replace(model, bases={**model.bases, **(bases or {})})

    def with_table(self, text: str, where: str) -> InterferenceModel:
        """This model's settings with the table of the CSV ``text`` (``where`` names it in errors)."""
        try:
            rows = read_table(text, where)
        except TableError as err:
            raise ModelError(str(err)) from None
        pairs = {(row.job, other): row.mean_runtime_s for row in rows if (other := row.colocated_with) is not None}
        bases = {row.job: row.mean_runtime_s for row in rows if row.colocated_with is None}
        startups = {
            (row.job, row.colocated_with): (row.mean_startup_s, row.samples)
            for row in rows
            if row.mean_startup_s is not None
        }
        return replace(self, pairs=pairs, bases=bases, startups=startups)

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

    def startup(self, job: str, colocated: Iterable[str]) -> float:
        """Seconds from the creation of ``job``'s application until its executors, next to ``colocated`` (unscaled)."""
        beside = [self.startups[(job, other)][0] for other in set(colocated) if (job, other) in self.startups]
        if beside:
            return max(beside)
        if (job, None) in self.startups:
            return self.startups[(job, None)][0]
        rows = [(seconds, samples) for (row_job, _), (seconds, samples) in self.startups.items() if row_job == job]
        total = sum(samples for _, samples in rows)
        return sum(seconds * samples for seconds, samples in rows) / total if total else 0.0

    def startup_delay(self, job: str, colocated: Iterable[str]) -> timedelta:
        """The wall-clock start-up of ``job`` next to ``colocated``: its start-up x ``time_scale``."""
        return timedelta(seconds=self.startup(job, colocated) * self.time_scale)

    def duration(self, job: str, colocated: Iterable[str]) -> timedelta:
        """The wall-clock time a run of ``job`` next to ``colocated`` takes: its runtime x ``time_scale``."""
        return timedelta(seconds=self.runtime(job, colocated) * self.time_scale)


@dataclass(frozen=True)
class Tables:
    """The model of each namespace that has a table of its own, and the default for every other one."""

    default: InterferenceModel
    by_namespace: Mapping[str, InterferenceModel] = field(default_factory=dict)

    def model_for(self, namespace: str) -> InterferenceModel:
        """The model runs of jobs in ``namespace`` take their runtimes from."""
        return self.by_namespace.get(namespace, self.default)

    def changed(self, configmap: Mapping[str, Any]) -> Tables:
        """The tables once ``configmap`` (a labelled ConfigMap, as the API server gave it) holds what it holds.

        Raises ``ModelError`` (the tables stay as they are) when it holds no table that can be used."""
        metadata = configmap.get("metadata") or {}
        namespace, name = str(metadata.get("namespace") or ""), str(metadata.get("name") or "")
        where = f"ConfigMap {namespace}/{name}"
        if name != TABLE_CONFIGMAP:
            raise ModelError(f"{where}: not used: a namespace's co-location table is the ConfigMap {TABLE_CONFIGMAP}")
        text = (configmap.get("data") or {}).get(TABLE_KEY)
        if text is None:
            raise ModelError(f"{where}: no co-location table: the key {TABLE_KEY} is missing")
        model = self.default.with_table(str(text), f"{where}, key {TABLE_KEY}")
        scale = (configmap.get("data") or {}).get(TIME_SCALE_KEY)
        if scale is not None:
            try:
                model = replace(model, time_scale=float(str(scale)))
            except (ValueError, ModelError):
                raise ModelError(f"{where}, key {TIME_SCALE_KEY}: expected a positive factor, not {scale!r}") from None
        return replace(self, by_namespace={**self.by_namespace, namespace: model})

    def removed(self, configmap: Mapping[str, Any]) -> Tables:
        """The tables once ``configmap`` is gone: its namespace goes back to the default (if it was its table)."""
        metadata = configmap.get("metadata") or {}
        namespace = str(metadata.get("namespace") or "")
        if metadata.get("name") != TABLE_CONFIGMAP or namespace not in self.by_namespace:
            return self
        return replace(self, by_namespace={k: v for k, v in self.by_namespace.items() if k != namespace})
