"""Runs: each finished run of a BatchJob as an object of its own (``esi.resources.run``), how it is named and
labelled, and which Runs retention lets go.

* **Named by the job and the run's ordinal.** ``<job>-<uid>-<ordinal>``: the BatchJob's name, the first 8
  characters of its uid (a BatchJob deleted and created again under the same name counts its runs from 1
  again) and which run of the job it is. The name follows from the job's status alone, so the BatchJob
  reconciler writes each Run by creating it, and a Run that exists already is written.
* **Labelled with its job, Scheduling and Testbed** (``JOB_LABEL``, ``SCHEDULING_LABEL``, ``TESTBED_LABEL``),
  so that ``kubectl get runs -l esi.tu-berlin.de/job=<job>`` lists a job's runs. A label value holds at most
  63 characters: a longer name is cut to 54 and ends in ``-`` and 8 hex digits of its SHA-256
  (``label_value``); the full names are in the spec.
* **Owned by nobody**: it outlives its BatchJob and its Scheduling; only retention (``runs_to_prune``)
  deletes it. Keeping none (``Retention.keep`` 0), none is written.

Pure: records in, manifests out.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from esi.objects.names import JOB_LABEL, MANAGED_BY, MANAGED_BY_LABEL, TESTBED_LABEL
from esi.resources.batchjob import BatchJob, RunRecord
from esi.resources.meta import API_VERSION, GROUP, MAX_NAME_LENGTH
from esi.resources.run import RunKind, RunSpec

__all__ = [
    "KEEP_RUNS",
    "SCHEDULING_LABEL",
    "KeptRun",
    "Retention",
    "label_value",
    "run_labels",
    "run_manifest",
    "run_name",
    "runs_to_prune",
]

SCHEDULING_LABEL: Final = f"{GROUP}/scheduling"  # Runs: the Scheduling the run ran for
KEEP_RUNS: Final = 100_000
"""Runs kept per namespace unless told otherwise: the newest ones; older ones are deleted."""

_MAX_LABEL_VALUE = 63
_DIGEST = 8  # hex digits of a SHA-256 that stand for what a name or label value leaves out


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:_DIGEST]


def _cut(text: str, length: int) -> str:
    """``text`` cut to at most ``length`` characters, ending in a letter or digit (as names and labels must)."""
    return text[:length].rstrip("-.")


def label_value(name: str) -> str:
    """``name`` (an object name) as a label value: as it is up to 63 characters, else its first 54 characters
    and a digest of the whole."""
    if len(name) <= _MAX_LABEL_VALUE:
        return name
    return f"{_cut(name, _MAX_LABEL_VALUE - _DIGEST - 1)}-{_digest(name)}"


def run_name(job: str, job_uid: str, ordinal: int) -> str:
    """The name of run ``ordinal`` of BatchJob ``job`` (uid ``job_uid``); a job name too long for it is cut,
    and a digest of it stands for what was cut."""
    suffix = f"-{job_uid[:_DIGEST]}-{ordinal}"
    if len(job) + len(suffix) <= MAX_NAME_LENGTH:
        return job + suffix
    return f"{_cut(job, MAX_NAME_LENGTH - len(suffix) - _DIGEST - 1)}-{_digest(job)}{suffix}"


def run_labels(job: str, record: RunRecord) -> dict[str, str]:
    return {
        JOB_LABEL: label_value(job),
        SCHEDULING_LABEL: label_value(record.scheduling),
        TESTBED_LABEL: label_value(record.testbed),
        MANAGED_BY_LABEL: MANAGED_BY,
    }


def run_manifest(job: BatchJob, ordinal: int, record: RunRecord) -> dict[str, Any]:
    """The Run of ``job``'s run ``ordinal``, whose final record is ``record``."""
    name, uid = job.metadata.name, job.metadata.uid or ""
    runtime = (record.end - record.start).total_seconds() if record.end is not None else None
    spec = RunSpec(
        **record.model_dump(),
        job=name,
        job_uid=uid,
        kind=RunKind.SPARK if job.spec.spark_spec is not None else RunKind.FLINK,
        ordinal=ordinal,
        runtime_seconds=max(runtime, 0.0) if runtime is not None else None,
    )
    metadata: dict[str, Any] = {"name": run_name(name, uid, ordinal), "labels": run_labels(name, record)}
    if job.metadata.namespace:
        metadata["namespace"] = job.metadata.namespace
    return {"apiVersion": API_VERSION, "kind": "Run", "metadata": metadata, "spec": spec.to_json_dict()}


@dataclass(frozen=True)
class KeptRun:
    """What retention reads of a Run: where it is, its name and when it was written."""

    namespace: str
    name: str
    created: datetime


@dataclass(frozen=True)
class Retention:
    """How many Runs each namespace keeps (the newest), and for how long (None: for ever)."""

    keep: int = KEEP_RUNS
    max_age: timedelta | None = None

    @property
    def keeps_runs(self) -> bool:
        """Whether any Run is kept: keeping none, none is written (the BatchJobs' histories only)."""
        return self.keep > 0


def runs_to_prune(runs: Iterable[KeptRun], retention: Retention, *, now: datetime) -> list[KeptRun]:
    """The Runs retention lets go: in each namespace those beyond the newest ``keep`` (by when they were
    written, then by name), and those older than ``max_age``; oldest first."""
    by_namespace: dict[str, list[KeptRun]] = {}
    for run in runs:
        by_namespace.setdefault(run.namespace, []).append(run)
    pruned: list[KeptRun] = []
    for kept in by_namespace.values():
        kept.sort(key=lambda r: (r.created, r.name), reverse=True)
        max_age = retention.max_age
        too_old = [r for r in kept[: retention.keep] if max_age is not None and now - r.created > max_age]
        pruned += kept[retention.keep :] + too_old
    return sorted(pruned, key=lambda r: (r.created, r.namespace, r.name))
