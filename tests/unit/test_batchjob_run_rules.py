"""Two rules about a BatchJob's run: which other jobs run next to it (recorded with the run), and what an
application that cannot be built means (a failed run, not a job stuck in Submitted)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from esi.decisions.batchjob_lifecycle import (
    BatchJobObservation,
    CreateApplication,
    Holder,
    colocated_jobs,
    decide_batchjob,
    decide_unbuildable,
)
from esi.decisions.events import Event
from esi.resources.batchjob import BatchJobState, BatchJobStatus, RunOutcome, RunRecord

JOB = ("team-a", "wordcount")


@dataclass(frozen=True)
class Neighbours:
    nodes: tuple[str, ...]  # the run's executors' nodes
    executors_on_nodes: dict[str, tuple[tuple[str, str], ...]]  # per node, the (namespace, job) of each executor
    colocated: tuple[str, ...]


NEIGHBOURS = {
    "no-nodes-yet-no-neighbours": Neighbours((), {"n0": (("team-a", "pagerank"),)}, ()),
    "alone-on-its-nodes": Neighbours(("n0", "n1"), {"n0": (JOB, JOB), "n1": (JOB,)}, ()),
    "a-job-of-its-namespace-by-name": Neighbours(("n0",), {"n0": (JOB, ("team-a", "pagerank"))}, ("pagerank",)),
    "a-job-of-another-namespace-with-its-namespace": Neighbours(
        ("n0",), {"n0": (("team-b", "pagerank"),)}, ("team-b/pagerank",)
    ),
    "its-own-name-in-another-namespace-is-another-job": Neighbours(
        ("n0",), {"n0": (JOB, ("team-b", "wordcount"))}, ("team-b/wordcount",)
    ),
    "a-neighbour-on-several-nodes-once": Neighbours(
        ("n0", "n1", "n1"),
        {"n0": (("team-a", "pagerank"),), "n1": (("team-a", "pagerank"), ("team-a", "pagerank"))},
        ("pagerank",),
    ),
    "jobs-on-nodes-the-run-does-not-use-are-not-neighbours": Neighbours(
        ("n0",), {"n0": (JOB,), "n1": (("team-a", "pagerank"),)}, ()
    ),
    "sorted-by-the-name-told": Neighbours(
        ("n1", "n0"),
        {"n0": (("team-b", "kmeans"), ("team-a", "sort")), "n1": (("team-a", "grep"),)},
        ("grep", "sort", "team-b/kmeans"),
    ),
}


@pytest.mark.parametrize("case", NEIGHBOURS.values(), ids=NEIGHBOURS.keys())
def test_the_jobs_a_run_shares_its_nodes_with(case: Neighbours) -> None:
    assert colocated_jobs(JOB, case.nodes, case.executors_on_nodes) == case.colocated


T0 = datetime(2026, 1, 1, tzinfo=UTC)
HOLDER = Holder("nightly", "tb", (0, 2), attempt=2)
EARLIER_RUN = RunRecord(
    scheduling="weekly",
    attempt=1,
    testbed="tb",
    slots=[1],
    nodes=["n1"],
    start=T0 - timedelta(days=1),
    end=T0 - timedelta(days=1) + timedelta(minutes=5),
    outcome=RunOutcome.SUCCEEDED,
)


@dataclass(frozen=True)
class Unbuildable:
    status: BatchJobStatus | None  # before the decision that asks for the application
    runs_before: int  # runs recorded before this one


UNBUILDABLE = {
    "a-first-run": Unbuildable(None, 0),
    "queued-for-its-scheduling": Unbuildable(
        BatchJobStatus(state=BatchJobState.QUEUED, scheduling="nightly", attempt=2), 0
    ),
    "after-an-earlier-run": Unbuildable(BatchJobStatus(state=BatchJobState.READY, runs=[EARLIER_RUN], run_count=1), 1),
}


@pytest.mark.parametrize("case", UNBUILDABLE.values(), ids=UNBUILDABLE.keys())
def test_an_application_that_cannot_be_built_is_a_failed_run(case: Unbuildable) -> None:
    observation = BatchJobObservation(HOLDER, None, colocated_jobs=("pagerank",))
    decided = decide_batchjob(case.status, observation, generation=3, now=T0)
    assert decided.actions == (CreateApplication("tb", (0, 2), attempt=2),), "the application is asked for"

    decision = decide_unbuildable(decided, observation, "no executor memory fits 700Mi", generation=3, now=T0)

    status = decision.status
    message = "cannot build the application: no executor memory fits 700Mi"
    assert (status.state, status.message, status.scheduling) == (BatchJobState.FAILED, message, "nightly")
    assert decision.actions == (), "nothing is created, and nothing is asked for again"
    assert status.run_count == case.runs_before + 1
    run = status.runs[-1]
    assert (run.scheduling, run.attempt, run.slots, run.colocated_jobs) == ("nightly", 2, [0, 2], ["pagerank"])
    assert (run.start, run.end, run.outcome) == (T0, T0, RunOutcome.FAILED)
    assert status.runs[: case.runs_before] == ([EARLIER_RUN] if case.runs_before else [])
    assert decision.events == (Event("Failed", message, warning=True),)
