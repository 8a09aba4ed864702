"""The profiling scheduler's pure parts (``examples.profiling.matrix``, ``.plan``) and its profiler's
bookkeeping against a fake esi API: what a sample is, how the matrix is kept, which pair runs next, what
the scheduler's queue looks like — and the original's bugs, each with the case that showed it
(docs/compatibility.md#profiling-scheduler)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from esi.client import AsyncEsiClient
from esi.wire.rest import ExternalBatchJob, ExternalTestbed
from examples.profiling.__main__ import parse_args
from examples.profiling.matrix import (
    NO_SAMPLES,
    PROFILER_KEY,
    RECORDED_KEY,
    ColocationMatrix,
    Entry,
    Rejected,
    UnreadableEntry,
    least_sampled_pair,
    measure,
    parse_entry,
    recorded_by,
    with_profile_entry,
)
from examples.profiling.plan import node_slots, plan_groups, plan_queue, profiling_slots, round_jobs
from examples.profiling.runner import Profiler, Settings

T0 = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC)
FLINK, FLINK2, SAMPLE3 = "batchjob-flink", "batchjob-flink2", "batchjob-sample3"
SPARK, CRAWLER = "batchjob-spark", "spark-crawler"
# The thesis' table (sim/data/colocation-thesis.csv): job -> partner -> "seconds (samples)".
THESIS = {
    FLINK: {SPARK: "36 (5)", SAMPLE3: "28 (11)", FLINK2: "24 (16)", CRAWLER: "34 (11)"},
    SPARK: {FLINK: "70 (4)", SAMPLE3: "93 (4)", FLINK2: "68 (4)", CRAWLER: "94 (4)"},
    SAMPLE3: {FLINK: "444 (4)", SPARK: "480 (6)", FLINK2: "450 (3)", CRAWLER: "493 (3)"},
    FLINK2: {FLINK: "24 (16)", SPARK: "36 (5)", SAMPLE3: "30 (11)", CRAWLER: "25 (10)"},
    CRAWLER: {FLINK: "173 (3)", SPARK: "203 (5)", SAMPLE3: "211 (3)", FLINK2: "171 (3)"},
}


def run(scheduling: str, start: int, stop: int | None, *, ok: bool | None = True, beside: Sequence[str] = (),
        nodes: Sequence[str] = ("node-0",), attempt: int = 1) -> dict[str, Any]:  # fmt: skip
    """A scheduledEvent as the API sends it; times in seconds after T0."""
    return {"start": (T0 + timedelta(seconds=start)).isoformat(),
            "stop": (T0 + timedelta(seconds=stop)).isoformat() if stop is not None else None,
            "successful": ok if stop is not None else None, "scheduling": {"name": scheduling}, "attempt": attempt,
            "slots": [0], "nodes": list(nodes), "colocatedJobs": list(beside)}  # fmt: skip


def job(name: str, *runs: dict[str, Any], profile: dict[str, str] | None = None, state: str = "ReadyState",
        recorded: dict[str, str] | None = None) -> ExternalBatchJob:  # fmt: skip
    """A job as the API sends it: its runs, its profile row, the Schedulings recorded into that row."""
    scheduler = ({PROFILER_KEY: [profile]} if profile is not None else {}) | (
        {RECORDED_KEY: [recorded]} if recorded is not None else {}
    )
    return ExternalBatchJob.model_validate({"name": name, "state": state, "externalScheduler": scheduler or None,
                                            "scheduledEvents": list(runs)})  # fmt: skip


def testbed(nodes: int, per_node: int) -> ExternalTestbed:
    """A Testbed as the API sends it, slot ids interleaved: id = position x nodes + node."""
    slots = {f"node-{n}": [{"state": "FREE", "nodeName": f"node-{n}", "nodeId": n, "slotPositionOnNode": p,
                            "position": p * nodes + n} for p in range(per_node)] for n in range(nodes)}  # fmt: skip
    return ExternalTestbed.model_validate({"name": "tb", "namespace": "team", "state": "SUCCESS", "esiState": "Ready",
                                           "numberOfNodes": nodes, "numberOfSlotsPerNode": per_node,
                                           "slotsByNode": slots})  # fmt: skip


def thesis_matrix(*names: str) -> ColocationMatrix:
    chosen = names or tuple(THESIS)
    return ColocationMatrix.of_jobs(job(n, profile=THESIS[n]) for n in chosen)


# ---------------------------------------------------------------------------------------------- entries


@pytest.mark.parametrize(
    ("text", "entry"),
    [("24 (16)", Entry(24, 16)), (" 7(1) ", Entry(7, 1)), ("0 (0)", Entry(0, 0)), ("24.5 (3)", Entry(25, 3))],
    ids=["the original's form", "spacing varies", "nothing measured", "decimals another tool wrote"],
)
def test_an_entry_is_read_from_the_originals_text(text: str, entry: Entry) -> None:
    assert parse_entry(text) == entry


@pytest.mark.parametrize("text", ["", "24", "(16)", "fast (1)", "24 (x)", "-3 (1)", "24 (16) extra"])
def test_an_entry_that_is_not_seconds_and_samples_is_refused(text: str) -> None:
    with pytest.raises(UnreadableEntry, match="is not '<seconds> \\(<samples>\\)'"):
        parse_entry(text)


def test_an_entry_is_written_as_the_original_wrote_it() -> None:
    assert str(Entry(24, 16)) == "24 (16)"
    assert parse_entry(str(Entry(493, 3))) == Entry(493, 3)


@pytest.mark.parametrize(
    ("before", "sample", "after"),
    [
        (NO_SAMPLES, 30.4, Entry(30, 1)),
        (Entry(30, 1), 41, Entry(36, 2)),  # 35.5: rounded half up
        (Entry(24, 16), 24, Entry(24, 17)),
        (Entry(10, 1), 11, Entry(11, 2)),  # 10.5: the original's integer division kept 10
        (Entry(100, 3), 0, Entry(75, 4)),
    ],
    ids=["first sample", "half rounds up", "same value stays", "not truncated", "a zero-second run counts"],
)
def test_a_sample_updates_the_cumulative_moving_average(before: Entry, sample: float, after: Entry) -> None:
    assert before.with_sample(sample) == after


def test_the_average_of_many_rounded_samples_does_not_drift() -> None:
    entry = NO_SAMPLES
    for sample in [0.0, 1.0] * 50:  # what whole-second timestamps make of a 0.5 s run
        entry = entry.with_sample(sample * 100)
    assert entry == Entry(50, 100)


@pytest.mark.parametrize("sample", [-1.0, float("nan"), float("inf")])
def test_a_runtime_that_is_no_duration_is_refused(sample: float) -> None:
    with pytest.raises(ValueError, match="non-negative number of seconds"):
        NO_SAMPLES.with_sample(sample)


# ---------------------------------------------------------------------------------------------- the matrix


def test_the_matrix_is_read_from_each_jobs_profile_row() -> None:
    matrix = thesis_matrix()
    assert matrix.jobs == tuple(sorted(THESIS))
    assert matrix.entry(SAMPLE3, CRAWLER) == Entry(493, 3)
    assert matrix.entry(CRAWLER, SAMPLE3) == Entry(211, 3), "not symmetric: a row is its own job's runtime"
    assert len(matrix.pairs()) == 20
    assert all(a != b for a, b in matrix.pairs())


def test_entries_for_the_job_itself_unknown_jobs_or_unreadable_text_are_left_out() -> None:
    matrix = ColocationMatrix.of_jobs(
        [job(FLINK, profile={FLINK: "1 (1)", "deleted-job": "5 (1)", SPARK: "soon"}), job(SPARK)]
    )
    assert matrix.entries == {}
    assert matrix.problems == (f"job {FLINK}, partner {SPARK}: 'soon' is not '<seconds> (<samples>)'",)
    assert matrix.runtime(FLINK, SPARK) is None


def test_the_matrix_renders_as_the_thesis_printed_it() -> None:
    lines = ColocationMatrix.of_jobs([job(FLINK, profile={SPARK: "36 (5)"}), job(SPARK)]).render().splitlines()
    assert lines == [
        "                batchjob-flink  batchjob-spark",
        "batchjob-flink  /               36 (5)",
        "batchjob-spark  -               /",
    ]


def test_writing_an_entry_keeps_everything_else_in_the_jobs_data() -> None:
    data = {PROFILER_KEY: [{SPARK: "36 (5)"}, {"note": "kept"}], "mine": [{"a": "b"}]}
    written = with_profile_entry(data, CRAWLER, Entry(34, 11), "profiler-scheduling-1")
    assert written == {
        PROFILER_KEY: [{SPARK: "36 (5)", CRAWLER: "34 (11)"}, {"note": "kept"}],
        "mine": [{"a": "b"}],
        RECORDED_KEY: [{CRAWLER: "profiler-scheduling-1"}],
    }
    assert data[PROFILER_KEY][0] == {SPARK: "36 (5)"}, "the input is not changed"
    assert recorded_by(written, CRAWLER) == "profiler-scheduling-1"
    assert recorded_by(written, SPARK) is None
    assert with_profile_entry(None, SPARK, Entry(1, 1), "s")[PROFILER_KEY] == [{SPARK: "1 (1)"}]


# ---------------------------------------------------------------------------------------------- the next pair


def test_the_next_pair_is_the_one_with_the_fewest_samples() -> None:
    matrix = thesis_matrix(FLINK, SPARK, SAMPLE3)
    # Three entries have the fewest samples (4); of those, spark next to flink has the least-sampled reverse.
    assert least_sampled_pair(matrix) == (SPARK, FLINK)


def test_among_equally_sampled_pairs_idle_jobs_then_the_less_sampled_reverse_come_first() -> None:
    matrix = ColocationMatrix.of_jobs([job(FLINK, profile={SPARK: "36 (1)"}), job(SPARK), job(SAMPLE3)])
    assert least_sampled_pair(matrix) == (FLINK, SAMPLE3)  # (flink, spark) has a sample already
    assert least_sampled_pair(matrix, busy={SAMPLE3}) == (SPARK, FLINK)  # the only unsampled pair of idle jobs
    assert least_sampled_pair(matrix, busy={SAMPLE3, SPARK, FLINK}) == (FLINK, SAMPLE3), "busy: it waits"


def test_with_fewer_than_two_jobs_there_is_no_pair() -> None:
    assert least_sampled_pair(ColocationMatrix.of_jobs([job(FLINK)])) is None
    assert least_sampled_pair(ColocationMatrix.of_jobs([])) is None


# ---------------------------------------------------------------------------------------------- samples

S = "profiler-scheduling-1"


@pytest.mark.parametrize(
    ("runs", "partner_runs", "expected"),
    [
        ([run(S, 0, 28, beside=[SPARK])], [run(S, 0, 70)], 28.0),
        ([run(S, 0, 28)], [run(S, 1, 70)], 28.0),
        ([run("other", 0, 99, beside=[SPARK]), run(S, 100, 128, beside=[SPARK])], [], 28.0),
        ([run(S, 0, 5, ok=False, beside=[SPARK]), run(S, 20, 48, attempt=2, beside=[SPARK])], [], 28.0),
        ([run(S, 0, 28, ok=False, beside=[SPARK])], [], Rejected(f"the run of {FLINK} in {S} failed")),
        ([run(S, 0, None, beside=[SPARK])], [], Rejected(f"the run of {FLINK} in {S} has not ended")),
        ([run("other", 0, 28, beside=[SPARK])], [], Rejected(f"{FLINK} has no run in scheduling {S}")),
        ([run(S, 10, 38)], [run(S, 0, 10)], Rejected(f"{SPARK} did not run beside {FLINK} in {S}")),
        ([run(S, 0, 28)], [run(S, 0, 70, nodes=["node-1"])], Rejected(f"{SPARK} did not run beside {FLINK} in {S}")),
        ([run(S, 0, 28)], [run("other", 0, 70)], Rejected(f"{SPARK} did not run beside {FLINK} in {S}")),
    ],
    ids=[
        "partner there when it started",
        "partner came a second later",
        "only this Scheduling's run counts",
        "a retried run: the last attempt counts",
        "a failed run is no sample",
        "a run still going is no sample",
        "no run in this Scheduling",
        "partner ended before it started",
        "partner on another node",
        "partner ran in another Scheduling",
    ],
)
def test_a_sample_is_a_successful_run_the_partner_shared(
    runs: list[dict[str, Any]], partner_runs: list[dict[str, Any]], expected: float | Rejected
) -> None:
    assert measure(job(FLINK, *runs), S, job(SPARK, *partner_runs)) == expected


def test_without_a_partner_any_successful_run_is_measured() -> None:
    assert measure(job(FLINK, run(S, 0, 28)), S) == 28.0


# ---------------------------------------------------------------------------------------------- where jobs go


def test_slots_are_grouped_by_node_in_the_testbeds_interleaved_numbering() -> None:
    assert node_slots(testbed(3, 2)) == [[0, 3], [1, 4], [2, 5]]


@pytest.mark.parametrize(
    ("nodes", "per_node", "slots"),
    [(1, 2, (0, 1)), (2, 2, (0, 2)), (2, 1, None), (0, 2, None)],
    ids=["the thesis' profiler testbed", "two slots of the first node", "no node has two slots", "no slots yet"],
)
def test_a_profiled_pair_gets_two_slots_of_one_node(nodes: int, per_node: int, slots: tuple[int, int] | None) -> None:
    assert profiling_slots(testbed(nodes, per_node)) == slots


def test_a_round_takes_idle_jobs_first_then_those_scheduled_longest_ago() -> None:
    jobs = {
        "a": job("a", run("example-scheduling-1", 50, 60)),
        "b": job("b", state="RunningState"),
        "c": job("c", run("example-scheduling-0", 10, 20), run("profiler-scheduling-0", 90, 95)),
        "d": job("d"),
    }
    assert round_jobs(jobs, 3, "example-scheduling") == ["d", "c", "a"]
    assert round_jobs(jobs, 9, "example-scheduling") == ["d", "c", "a", "b"], "busy ones last, not left out"
    assert round_jobs(jobs, 0, "example-scheduling") == []


def test_each_node_gets_its_lead_and_the_leads_best_partner_left() -> None:
    groups = plan_groups(thesis_matrix(), [FLINK, FLINK2, SAMPLE3], [2, 2, 2])
    # flink's best is flink2 (24 s). flink2's best left is flink (24 s), but then sample3 would be left only
    # itself; so flink2 takes sample3 (30 s) and sample3 gets flink. Each job runs twice: 6 slots / 3 jobs.
    assert groups == [[FLINK, FLINK2], [FLINK2, SAMPLE3], [SAMPLE3, FLINK]]


def test_the_queue_fills_every_slot_of_the_testbed_in_slot_order() -> None:
    queue = plan_queue(thesis_matrix(), [FLINK, FLINK2, SAMPLE3], testbed(3, 2))
    assert queue == [FLINK, FLINK2, SAMPLE3, FLINK2, SAMPLE3, FLINK]  # slots 0..5; node i holds i and i+3


@pytest.mark.parametrize(("nodes", "per_node"), [(3, 2), (4, 2), (2, 3), (1, 2)])
def test_the_slot_count_is_the_testbeds_real_one(nodes: int, per_node: int) -> None:
    # The original computed slotsPerNode², right only for two nodes with two slots each.
    jobs = round_jobs({n: job(n) for n in THESIS}, nodes, "example-scheduling")
    assert len(plan_queue(thesis_matrix(), jobs, testbed(nodes, per_node))) == nodes * per_node


def test_with_fewer_jobs_than_nodes_jobs_are_replicated_never_left_empty() -> None:
    # The original appended a null job when the candidates ran out.
    groups = plan_groups(thesis_matrix(), [CRAWLER, SPARK], [2, 2, 2])
    assert groups == [[CRAWLER, SPARK], [SPARK, CRAWLER], [CRAWLER, SPARK]]
    assert plan_groups(thesis_matrix(), [SPARK], [2, 2]) == [[SPARK, SPARK], [SPARK, SPARK]], "nothing else left"
    assert plan_groups(thesis_matrix(), [], [2, 2]) == []
    assert plan_queue(thesis_matrix(), [], testbed(2, 2)) == []


def test_measured_partners_come_before_unmeasured_ones() -> None:
    matrix = ColocationMatrix.of_jobs([job("a", profile={"c": "90 (1)"}), job("b"), job("c")])
    assert plan_groups(matrix, ["a", "b", "c"], [2, 2, 2])[0] == ["a", "c"]


def test_a_node_with_more_slots_gets_more_partners() -> None:
    groups = plan_groups(thesis_matrix(), [FLINK, SAMPLE3], [3, 2])
    assert groups == [[FLINK, SAMPLE3, SAMPLE3], [SAMPLE3, FLINK]], "two jobs for three slots: one twice"
    assert all(len(group) == size for group, size in zip(groups, [3, 2], strict=True))


# ---------------------------------------------------------------------------------------------- the profiler


class FakeApi:
    """Just enough of the esi API for a profiler to finish a Scheduling: jobs and Schedulings in memory."""

    def __init__(self, jobs: Sequence[ExternalBatchJob], schedulings: Sequence[dict[str, Any]]) -> None:
        self.jobs = {j.name: j.model_dump(mode="json", by_alias=True) for j in jobs}
        self.schedulings = {s["name"]: s for s in schedulings}
        self.puts = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path, method = request.url.path, request.method
        if match := re.fullmatch(r"/external/jobs/([^/]+)", path):
            found_job = self.jobs.get(match[1])
            return (
                httpx.Response(200, json=found_job)
                if found_job
                else httpx.Response(404, json={"detail": {"message": "no"}})
            )
        if path == "/external/jobs" and method == "PUT":
            body = json.loads(request.content)
            self.jobs[body["name"]]["externalScheduler"] = body["externalScheduler"]
            self.puts += 1
            return httpx.Response(200, json=self.jobs[body["name"]])
        if match := re.fullmatch(r"/external/schedulings/([^/]+)", path):
            found = self.schedulings.pop(match[1], None) if method == "DELETE" else self.schedulings.get(match[1])
            return httpx.Response(200, json=found) if found else httpx.Response(404, json={"detail": {"message": "no"}})
        return httpx.Response(404, json={"detail": {"message": f"no route {method} {path}"}})

    def matrix(self) -> ColocationMatrix:
        return ColocationMatrix.of_jobs(ExternalBatchJob.model_validate(j) for j in self.jobs.values())


class QuietSubscription:
    """A STOMP subscription on which nothing happens (the Schedulings here have ended already)."""

    async def __aiter__(self) -> AsyncIterator[Any]:
        await asyncio.Event().wait()
        yield None


@asynccontextmanager
async def quiet(url: str, destinations: Sequence[str], **_: Any) -> AsyncIterator[QuietSubscription]:
    yield QuietSubscription()


def completed(name: str, *pair: str) -> dict[str, Any]:
    return {"name": name, "state": "CompletedState", "testBed": "profiler-slots",
            "slots": {"mode": "RELAXED", "jobs": [{"name": j, "slots": [i]} for i, j in enumerate(pair)]}}  # fmt: skip


def finish(api: FakeApi, name: str, time_scale: float = 0.01) -> Profiler:
    async def go() -> Profiler:
        async with AsyncEsiClient("http://esi.test", transport=httpx.MockTransport(api), subscriber=quiet) as client:
            profiler = Profiler(client, Settings(time_scale=time_scale))
            await profiler.finish(name)
            return profiler

    return asyncio.run(go())


def test_the_profiler_records_both_runtimes_then_deletes_the_scheduling() -> None:
    api = FakeApi([job(FLINK, run(S, 0, 1, beside=[SPARK])), job(SPARK, run(S, 0, 2), profile={FLINK: "100 (1)"})],
                  [completed(S, FLINK, SPARK)])  # fmt: skip
    profiler = finish(api, S)
    assert api.matrix().entries == {(FLINK, SPARK): Entry(100, 1), (SPARK, FLINK): Entry(150, 2)}
    assert not api.schedulings
    (pair,) = profiler.finished
    assert (pair.jobs, pair.recorded) == ((FLINK, SPARK), {FLINK: 100.0, SPARK: 200.0}), "seconds / time scale"


def test_a_scheduling_recorded_before_a_crash_is_not_counted_again() -> None:
    # The profiler wrote both entries, then died before deleting the Scheduling; the next start finishes it.
    api = FakeApi([job(FLINK, run(S, 0, 1, beside=[SPARK]), profile={SPARK: "100 (1)"}, recorded={SPARK: S}),
                   job(SPARK, run(S, 0, 2, beside=[FLINK]), profile={FLINK: "200 (1)"}, recorded={FLINK: S})],
                  [completed(S, FLINK, SPARK)])  # fmt: skip
    finish(api, S)
    assert api.matrix().entries == {(FLINK, SPARK): Entry(100, 1), (SPARK, FLINK): Entry(200, 1)}
    assert api.puts == 0
    assert not api.schedulings


def test_a_failed_run_records_nothing_for_its_job_but_the_scheduling_still_goes() -> None:
    api = FakeApi([job(FLINK, run(S, 0, 1, ok=False, beside=[SPARK])), job(SPARK, run(S, 0, 2, beside=[FLINK]))],
                  [completed(S, FLINK, SPARK)])  # fmt: skip
    profiler = finish(api, S)
    assert api.matrix().entries == {(SPARK, FLINK): Entry(200, 1)}
    assert profiler.finished[0].recorded[FLINK] == Rejected(f"the run of {FLINK} in {S} failed")
    assert not api.schedulings, "a failed Scheduling is cleaned up"


def test_a_scheduling_whose_job_is_gone_is_deleted_not_retried_forever() -> None:
    api = FakeApi([job(FLINK, run(S, 0, 1, beside=[SPARK]))], [completed(S, FLINK, SPARK)])
    profiler = finish(api, S)
    assert not api.schedulings
    assert api.matrix().entries == {}
    assert profiler.finished == []


@pytest.mark.parametrize(
    ("argv", "env", "expected"),
    [
        ([], {}, {"url": "http://127.0.0.1:8082", "token": None, "rounds": None, "only": None, "time_scale": 1.0}),
        ([], {"ESI_URL": "http://esi:80", "ESI_TOKEN": "t", "ESI_NAMESPACE": "lab"},
         {"url": "http://esi:80", "token": "t", "namespace": "lab"}),
        (["--rounds", "3", "--only", "profiler", "--time-scale", "0.05", "-p", "p", "-s", "s"], {},
         {"rounds": 3, "only": "profiler", "time_scale": 0.05, "profiler_testbed": "p", "scheduler_testbed": "s"}),
    ],
    ids=["defaults", "the esi CLI's environment", "options"],
)  # fmt: skip
def test_the_command_line(
    argv: list[str], env: dict[str, str], expected: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("ESI_URL", "ESI_TOKEN", "ESI_NAMESPACE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    args = vars(parse_args(argv))
    assert {key: args[key] for key in expected} == expected


@pytest.mark.parametrize("argv", [["--rounds", "-1"], ["--time-scale", "0"], ["--only", "both"]])
def test_the_command_line_refuses_what_cannot_run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(argv)
    assert "error:" in capsys.readouterr().err
