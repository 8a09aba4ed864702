"""Run: one finished run of a BatchJob, kept as an object of its own — the researcher's data.

A BatchJob's status keeps its latest runs (``MAX_RUNS``); every run whose record is final also becomes a Run,
written once by the BatchJob reconciler and never changed (the API server refuses any change to its spec), owned
by nobody, so it outlives its BatchJob and its Scheduling. Runs are pruned by the operators' retention setting
only (docs/design.md#runs).
"""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar, Literal

from pydantic import Field

from esi.resources.batchjob import RunRecord
from esi.resources.meta import API_VERSION, MAX_NAME_LENGTH, EsiModel, ObjectMeta

__all__ = ["Run", "RunKind", "RunSpec"]


class RunKind(StrEnum):
    """Which application the run's job runs."""

    SPARK = "spark"
    FLINK = "flink"


class RunSpec(RunRecord):
    """The record of one finished run of a BatchJob, as its history had it when the record was final."""

    cel_rules: ClassVar = ({"rule": "self == oldSelf", "message": "a run's record is never changed"},)

    job: str = Field(min_length=1, max_length=MAX_NAME_LENGTH, description="The BatchJob's name.")
    job_uid: str = Field(min_length=1, max_length=64, description="The BatchJob's uid: which BatchJob of that name.")
    kind: RunKind
    ordinal: int = Field(ge=1, description="Which run of the job this is, counting all its runs (1 the first).")
    runtime_seconds: float | None = Field(default=None, ge=0, description="From start to end; absent without end.")


class Run(EsiModel):
    """A whole Run object, as the BatchJob reconciler writes it and the API server returns it."""

    api_version: Literal["esi.tu-berlin.de/v1alpha1"] = API_VERSION
    kind: Literal["Run"] = "Run"
    metadata: ObjectMeta
    spec: RunSpec
