"""Two rules about a BatchJob's run: which other jobs run next to it and where (recorded with the run, from
what outlasts its pods), and what an application that cannot be built means (a failed run, not a job stuck
in Submitted)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from esi.decisions.batchjob_lifecycle import (
    ApplicationPhase,
    ApplicationView,
    BatchJobObservation,
    CreateApplication,
    Holder,
    Neighbour,
    decide_batchjob,
    decide_unbuildable,
    neighbours_on,
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
    found = neighbours_on(JOB, case.nodes, case.executors_on_nodes, {})
    assert tuple(sorted({n.job for n in found})) == case.colocated
    assert all(n.node in case.nodes and n.start is None for n in found), "running there now, no times"


def test_kept_runs_on_the_nodes_are_neighbours_with_their_times() -> None:
    start, end = T0, T0 + timedelta(minutes=3)
    runs: dict[str, list[tuple[tuple[str, str], datetime, datetime | None]]] = {
        "n0": [(("team-a", "pagerank"), start, end), (JOB, start, None)],
        "n1": [(("team-b", "grep"), start, None)],
    }

    assert neighbours_on(JOB, ["n0"], {}, runs) == (Neighbour("pagerank", "n0", start, end),)


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
    "after-an-earlier-run": Unbuildable(
        BatchJobStatus(state=BatchJobState.READY, runs=[EARLIER_RUN], run_count=1, kept_runs=1), 1
    ),
}


@pytest.mark.parametrize("case", UNBUILDABLE.values(), ids=UNBUILDABLE.keys())
def test_an_application_that_cannot_be_built_is_a_failed_run(case: Unbuildable) -> None:
    observation = BatchJobObservation(HOLDER, None, slot_nodes=("n0",), neighbours=(Neighbour("pagerank", "n0"),))
    decided = decide_batchjob(case.status, observation, generation=3, now=T0)
    assert decided.actions == (CreateApplication("tb", (0, 2), attempt=2),), "the application is asked for"

    decision = decide_unbuildable(decided, observation, "no executor memory fits 700Mi", generation=3, now=T0)

    status = decision.status
    message = "cannot build the application: no executor memory fits 700Mi"
    assert (status.state, status.message, status.scheduling) == (BatchJobState.FAILED, message, "nightly")
    assert decision.actions == (), "nothing is created, and nothing is asked for again"
    assert status.run_count == case.runs_before + 1
    run = status.runs[-1]
    assert (run.scheduling, run.attempt, run.slots, run.nodes, run.colocated_jobs) == (
        "nightly",
        2,
        [0, 2],
        ["n0"],
        ["pagerank"],
    )
    assert (run.start, run.end, run.outcome) == (T0, T0, RunOutcome.FAILED)
    assert status.runs[: case.runs_before] == ([EARLIER_RUN] if case.runs_before else [])
    assert decision.events == (Event("Failed", message, warning=True),)


# --- run records that outlast their pods ------------------------------------------------------------------

SUBMITTED = BatchJobStatus(state=BatchJobState.SUBMITTED, scheduling="nightly", attempt=2, submitted_at=T0)
DONE = ApplicationView(ApplicationPhase.SUCCEEDED)  # its executors are gone: no nodes to read


def later(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def test_a_run_whose_executors_are_gone_records_the_nodes_of_its_slots() -> None:
    observation = BatchJobObservation(HOLDER, DONE, slot_nodes=("n0", "n1"))

    (run,) = decide_batchjob(SUBMITTED, observation, generation=1, now=later(10)).status.runs

    assert (run.nodes, run.incomplete) == (["n0", "n1"], None)


def test_a_run_whose_nodes_nothing_tells_says_so_until_something_does() -> None:
    unknown = decide_batchjob(SUBMITTED, BatchJobObservation(HOLDER, DONE), generation=1, now=later(10)).status
    (run,) = unknown.runs
    assert run.nodes == []
    assert run.incomplete == (
        "nodes unknown: its executors were gone and testbed tb does not list slots 0, 2; so are the jobs it ran next to"
    )

    told = BatchJobObservation(HOLDER, DONE, slot_nodes=("n1",), neighbours=(Neighbour("grep", "n1", T0, None),))
    (run,) = decide_batchjob(unknown, told, generation=1, now=later(11)).status.runs
    assert (run.nodes, run.colocated_jobs, run.incomplete) == (["n1"], ["grep"], None)


def test_runs_recorded_next_to_it_are_its_neighbours_when_their_times_meet_even_if_recorded_later() -> None:
    running = ApplicationView(
        ApplicationPhase.RUNNING, executors=2, executors_running=2, executors_bound=2, nodes=("n0",)
    )
    opened = decide_batchjob(SUBMITTED, BatchJobObservation(HOLDER, running), generation=1, now=later(1)).status
    ended = decide_batchjob(opened, BatchJobObservation(HOLDER, DONE), generation=1, now=later(5)).status
    assert ended.runs[-1].colocated_jobs == []

    recorded_after = (
        Neighbour("before", "n0", T0 - timedelta(minutes=9), later(0.5)),  # ended before it started
        Neighbour("overlapping", "n0", T0 - timedelta(minutes=9), later(2)),
        Neighbour("still-open", "n0", later(4), None),
        Neighbour("after", "n0", later(6), later(8)),  # started after it ended
        Neighbour("elsewhere", "n1", later(2), None),  # not on its nodes
        Neighbour("running-now", "n0"),  # executors there now, after it ended
    )
    told = decide_batchjob(
        ended, BatchJobObservation(HOLDER, DONE, neighbours=recorded_after), generation=1, now=later(9)
    )
    assert told.status.runs[-1].colocated_jobs == ["overlapping", "still-open"]

    released = decide_batchjob(told.status, BatchJobObservation(None, None), generation=1, now=later(10)).status
    assert released.scheduling is None
    late = BatchJobObservation(None, None, neighbours=(Neighbour("late", "n0", later(3), later(4)),))
    again = decide_batchjob(released, late, generation=1, now=later(11))
    assert again.status.runs[-1].colocated_jobs == ["overlapping", "still-open"], "final once released"
