"""The run table: rows from Runs, co-location seconds, queries and pages, records and flat columns."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from esi.resources.batchjob import RunOutcome
from esi.resources.run import Run, RunKind
from esi.results.table import (
    COLUMNS,
    CSV_HEADER,
    Colocation,
    RenderedRuns,
    RunEntry,
    RunQuery,
    RunRow,
    RunTable,
    continue_token,
    continued,
    label_selector,
    read_run_columns,
    run_columns,
    run_entry,
    run_row,
)

T0 = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


def row(
    job: str,
    start: float,
    end: float | None,
    nodes: tuple[str, ...] = ("n1",),
    *,
    namespace: str = "team-a",
    name: str | None = None,
    recorded: tuple[str, ...] = (),
    outcome: RunOutcome | None = RunOutcome.SUCCEEDED,
    scheduling: str = "s1",
) -> RunRow:
    return RunRow(
        namespace=namespace,
        name=name or f"{job}-{start:g}",
        job=job,
        kind=RunKind.SPARK,
        ordinal=1,
        attempt=1,
        scheduling=scheduling,
        testbed="tb",
        slots=(0,),
        nodes=nodes,
        recorded_neighbours=recorded,
        submitted_s=T0.timestamp() + start - 2,
        start_s=T0.timestamp() + start,
        ended_s=T0.timestamp() + end if end is not None else None,
        outcome=outcome,
        reason=None,
        incomplete=None,
        labels={"esi.tu-berlin.de/job": job},
    )


def test_a_run_becomes_a_row_as_written() -> None:
    run = Run.model_validate(
        {
            "metadata": {"name": "pi-0a1b2c3d-7", "namespace": "team-a", "labels": {"experiment": "e1"}},
            "spec": {
                "job": "pi",
                "jobUid": "0a1b2c3d-uid",
                "kind": "spark",
                "ordinal": 7,
                "scheduling": "s1",
                "attempt": 2,
                "testbed": "tb",
                "slots": [3, 1],
                "nodes": ["n1"],
                "colocatedJobs": ["wc"],
                "submitted": "2026-11-28T12:00:00Z",
                "start": "2026-11-28T12:00:05Z",
                "end": "2026-11-28T12:01:05Z",
                "outcome": "Failed",
                "reason": "driver exited with code 1",
            },
        }
    )

    r = run_row(run)

    assert (r.namespace, r.name, r.job, r.ordinal, r.attempt, r.slots) == (
        "team-a",
        "pi-0a1b2c3d-7",
        "pi",
        7,
        2,
        (3, 1),
    )
    assert (r.waiting_seconds, r.runtime_seconds, r.outcome, r.reason) == (
        5.0,
        60.0,
        RunOutcome.FAILED,
        "driver exited with code 1",
    )
    assert r.labels == {"experiment": "e1"}


def test_neighbours_overlap_on_shared_nodes_counted_once_and_summed_per_job() -> None:
    pi = row("pi", 0, 100, ("n1", "n2"))
    table = RunTable(
        [
            pi,
            row("wc", 50, 150, ("n1", "n2")),  # shares two nodes: 50 s, once
            row("sort", 90, 95, ("n2",)),  # 5 s
            row("sort", 98, 130, ("n2",)),  # 2 s more of the same job
            row("far", 0, 100, ("n3",)),  # another node
            row("before", 0, 0.5, ("n1",), name="before-touching"),
            row("after", 100, 200, ("n1",)),  # starts as pi ends: no overlap
            row("pi", 10, 20, ("n1",), name="pi-again"),  # the same job never counts
        ]
    )

    assert table.colocations(pi) == (
        Colocation("before", 0.5),
        Colocation("sort", 7.0),
        Colocation("wc", 50.0),
    )


def test_a_recorded_neighbour_without_an_overlapping_row_has_unknown_seconds() -> None:
    pi = row("pi", 0, 100, recorded=("gone", "wc", "team-b/x"))
    table = RunTable([pi, row("wc", 10, 20), row("x", 30, 40, namespace="team-b")])

    assert table.colocations(pi) == (
        Colocation("gone", None),
        Colocation("team-b/x", 10.0),
        Colocation("wc", 10.0),
    )


intervals = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "c"]),
        st.integers(0, 50),
        st.integers(0, 30),
        st.sets(st.sampled_from(["n1", "n2", "n3"]), min_size=1, max_size=2),
    ),
    max_size=12,
)


@settings(max_examples=150, deadline=None)
@given(intervals, st.data())
def test_the_indexed_overlap_is_the_plain_definition_after_any_puts_and_removes(
    runs: list[tuple[str, int, int, set[str]]], data: st.DataObject
) -> None:
    rows = [row(job, s, s + d, tuple(sorted(nodes)), name=f"r{i}") for i, (job, s, d, nodes) in enumerate(runs)]
    removed = set(data.draw(st.sets(st.integers(0, max(len(rows) - 1, 0)))) if rows else set())
    table = RunTable(rows)
    for i in removed:
        table.remove("team-a", f"r{i}")
    kept = [r for i, r in enumerate(rows) if i not in removed]

    for r in kept:
        expected: dict[str, float] = {}
        for o in kept:
            overlap = min(r.end_s, o.end_s) - max(r.start_s, o.start_s)
            if o.job != r.job and set(o.nodes) & set(r.nodes) and overlap > 0:
                expected[o.job] = expected.get(o.job, 0.0) + overlap
        assert {c.job: c.seconds for c in table.colocations(r)} == expected
    assert [x.name for x in table] == [x.name for x in sorted(kept, key=lambda x: x.cursor)]


def test_a_query_selects_by_job_scheduling_testbed_outcome_label_and_time() -> None:
    table = RunTable(
        [
            row("pi", 0, 10),
            row("wc", 5, 20, scheduling="s2"),
            row("pi", 30, 40, outcome=RunOutcome.FAILED),
            row("pi", 50, 60, namespace="team-b"),
        ]
    )

    def names(query: RunQuery) -> list[str]:
        return [r.name for r in table.select(query).rows]

    assert names(RunQuery(namespace="team-a", jobs=frozenset({"pi"}))) == ["pi-0", "pi-30"]
    assert names(RunQuery(schedulings=frozenset({"s2"}))) == ["wc-5"]
    assert names(RunQuery(outcomes=frozenset({RunOutcome.FAILED}))) == ["pi-30"]
    assert names(RunQuery(labels=label_selector("esi.tu-berlin.de/job=wc"))) == ["wc-5"]
    assert names(RunQuery(since=T0 + timedelta(seconds=15), until=T0 + timedelta(seconds=50))) == ["wc-5", "pi-30"]
    assert names(RunQuery(namespace="team-c")) == []


def test_pages_continue_after_the_last_row_even_when_rows_are_added_between_them() -> None:
    table = RunTable([row("pi", s, s + 1) for s in range(5)])

    first = table.select(RunQuery(), limit=2)
    table.put(row("wc", 0.5, 1))  # before the cursor: the next pages do not repeat or skip a row
    second = table.select(RunQuery(), after=first.next, limit=2)
    third = table.select(RunQuery(), after=second.next, limit=2)

    assert [r.name for r in first.rows + second.rows + third.rows] == ["pi-0", "pi-1", "pi-2", "pi-3", "pi-4"]
    assert None not in (first.next, second.next)
    assert third.next is None


def test_an_entry_is_a_valid_run_entry_and_its_columns_are_flat() -> None:
    pi = row("pi", 0, 100, recorded=("gone",))
    table = RunTable([pi, row("wc", 50, 150)])

    entry = run_entry(pi, table.colocations(pi))

    assert RunEntry.model_validate(entry).model_dump(mode="json") == entry
    flat = dict(zip(COLUMNS, run_columns(entry), strict=True))
    assert flat["colocated"] == "gone=;wc=50.0"
    assert (flat["slots"], flat["nodes"], flat["started"]) == ("0", "n1", "2026-11-28T12:00:00Z")
    assert all(not isinstance(v, list | dict) for v in flat.values())


def test_the_tables_csv_reads_back_as_the_entries_it_was_written_from() -> None:
    rendered = RenderedRuns()
    rows = [row("pi", 0, 100, recorded=("gone",)), row("wc", 50, 150), row("far", 0, None, ("n9",))]
    for each in rows:
        rendered.put(each)

    text = CSV_HEADER + "".join(rendered.csv(each).decode() for each in rows)

    assert [e.model_dump(mode="json") for e in read_run_columns(text)] == [rendered.entry(each) for each in rows]


@pytest.mark.parametrize("n", [0, 1, 7])
def test_the_table_iterates_in_order_and_forgets_removed_rows(n: int) -> None:
    rows = [row("pi", float(s), s + 1.0) for s in reversed(range(n))]
    table = RunTable(rows)
    for r in rows[::2]:
        table.remove(r.namespace, r.name)
        table.remove(r.namespace, r.name)  # twice: nothing more happens

    assert [r.name for r in table] == [r.name for r in sorted(rows[1::2], key=lambda r: r.start_s)]
    assert len(table) == len(rows[1::2])
    assert list(itertools.chain.from_iterable(r.nodes for r in table)) == ["n1"] * len(table)


@pytest.mark.parametrize(
    ("selector", "selected"),
    [
        ("tier=gold", ["gold"]),
        ("tier==gold", ["gold"]),
        ("tier!=gold", ["silver", "none"]),
        ("tier", ["gold", "silver"]),
        ("!tier", ["none"]),
        ("tier in (gold, silver)", ["gold", "silver"]),
        ("tier notin (gold)", ["silver", "none"]),
        ("tier, app=x", ["gold", "silver"]),
        (" tier = silver , app ", ["silver"]),
        ("", ["gold", "silver", "none"]),
    ],
)
def test_a_label_selector_reads_as_kubectl_reads_it(selector: str, selected: list[str]) -> None:
    labelled = {"gold": {"tier": "gold", "app": "x"}, "silver": {"tier": "silver", "app": "x"}, "none": {}}
    requirements = label_selector(selector)

    assert [name for name, labels in labelled.items() if all(r.matches(labels) for r in requirements)] == selected


@pytest.mark.parametrize("selector", ["=gold", "tier=gold,", "tier in gold", "tier in (gold", "(", "a=b=c"])
def test_a_selector_it_cannot_read_is_refused_with_where(selector: str) -> None:
    with pytest.raises(ValueError, match="label selector"):
        label_selector(selector)


def test_a_continue_token_carries_the_cursor_and_nothing_else_reads_as_one() -> None:
    cursor = (T0.timestamp() + 0.123456, "team-a", "pi-0a1b2c3d-7")

    assert continued(continue_token(cursor)) == cursor
    for bad in ("", "nope", continue_token((1.0, "a", "b"))[:-2], "W1siYSJdXQ"):
        with pytest.raises(ValueError, match="continue token"):
            continued(bad)


def test_rendered_rows_follow_their_neighbours() -> None:
    rendered = RenderedRuns()
    pi = row("pi", 0, 100)
    rendered.put(pi)
    rendered.put(row("far", 0, 100, ("n9",)))
    before = (rendered.json(pi), rendered.csv(pi))

    rendered.put(row("wc", 50, 150))  # meets pi: pi's co-locations change
    met = (rendered.json(pi), rendered.csv(pi))
    rendered.put(row("far2", 0, 100, ("n9",)))  # elsewhere: pi's stay
    rendered.remove("team-a", "wc-50")
    after = (rendered.json(pi), rendered.csv(pi))

    assert b'"colocated":[]' in before[0]
    assert b'"colocated":[{"job":"wc","seconds":50.0}]' in met[0]
    assert b"wc=50.0" in met[1]
    assert after == before
    assert met[1].decode().count(",") == len(COLUMNS) - 1
