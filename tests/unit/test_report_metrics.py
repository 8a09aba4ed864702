"""What an experiment's runs add up to (esi.results.metrics), on small cases computed by hand."""

from __future__ import annotations

import math
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from esi.resources.batchjob import RunOutcome
from esi.results.metrics import (
    RuntimeStats,
    SlotPlace,
    colocation_matrix,
    job_runtimes,
    percentile,
    slot_layout,
    summary,
    testbed_layout,
)
from esi.wire.rest import ExternalSlot, ExternalTestbed
from tests.unit.run_entries import at, entry

# Three runs: a (slot 0, 2..12 s), b (slots 1 and 2, 5..25 s), and c, a retry that failed (slot 0, 16..20 s).
EXPERIMENT = [
    entry("a", 2, 12, submitted=0, slots=(0,)),
    entry("b", 5, 25, submitted=1, slots=(1, 2)),
    entry("c", 16, 20, submitted=10, slots=(0,), outcome=RunOutcome.FAILED, attempt=2),
]


def test_the_summary_of_an_experiment() -> None:
    s = summary(EXPERIMENT)
    assert (s.first_submitted, s.last_ended, s.makespan_seconds) == (at(0), at(25), 25.0)
    assert s.waiting_mean_seconds == pytest.approx(4.0)  # waits 2, 4, 6
    assert s.waiting_p95_seconds == pytest.approx(5.8)  # rank 0.95 * 2 = 1.9: 4 + 0.9 * (6 - 4)
    assert s.slot_seconds == pytest.approx(10 + 2 * 20 + 4)
    assert s.slots == 3  # the slots the runs used: 0, 1, 2
    assert s.utilisation == pytest.approx(54 / (3 * 25))
    assert (s.runs, s.jobs, s.succeeded, s.failed, s.cancelled, s.retried) == (3, 3, 2, 1, 0, 1)


def test_utilisation_is_over_the_testbeds_slots_when_their_layout_is_given() -> None:
    layout = {("tb", slot): SlotPlace("n1", slot) for slot in range(4)} | {("other", 0): SlotPlace("n9", 0)}
    s = summary(EXPERIMENT, layout)
    assert s.slots == 4  # tb's slots; another Testbed's are not the runs'
    assert s.utilisation == pytest.approx(54 / (4 * 25))


def test_a_testbed_the_layout_lacks_counts_the_slots_its_runs_used() -> None:
    runs = [*EXPERIMENT, entry("d", 0, 25, slots=(0, 5), testbed="gone")]
    s = summary(runs, {("tb", slot): SlotPlace("n1", slot) for slot in range(4)})
    assert s.slots == 4 + 2
    assert s.utilisation == pytest.approx((54 + 2 * 25) / (6 * 25))


def test_without_submitted_times_the_makespan_starts_at_the_first_start_and_waiting_is_unknown() -> None:
    s = summary([entry("a", 3, 8), entry("b", 4, 10)])
    assert s.makespan_seconds == 7.0
    assert (s.waiting_mean_seconds, s.waiting_p95_seconds) == (None, None)


def test_no_runs_have_no_figures() -> None:
    s = summary([])
    assert (s.runs, s.makespan_seconds, s.utilisation, s.waiting_mean_seconds) == (0, None, None, None)


def test_as_dict_gives_json_values() -> None:
    plain = summary(EXPERIMENT).as_dict()
    assert plain["first_submitted"] == "2026-11-28T12:00:00Z"
    assert plain["utilisation"] == 0.72
    assert plain["failed"] == 1


def test_runtimes_alone_and_beside_each_neighbour() -> None:
    runs = [
        entry("x", 0, 10),  # alone
        entry("x", 20, 32, met={}),  # alone
        entry("x", 40, 62, met={"y": 5.0}),  # beside y, however short
        entry("x", 70, 88, met={"y": None, "z": 3.0}),  # beside y (its record says they met) and z
        entry("x", 90, 99, met={"y": 9.0}, outcome=RunOutcome.FAILED),  # not succeeded: not counted
        entry("x", 100, None, outcome=None),  # no end: not counted
        entry("y", 40, 45, met={"x": 5.0}),
    ]
    runtimes = job_runtimes(runs)
    x = runtimes["x"]
    assert x.alone == RuntimeStats(11.0, math.sqrt(2), 2)  # runtimes 10 and 12
    assert x.beside == {"y": RuntimeStats(20.0, math.sqrt(8), 2), "z": RuntimeStats(18.0, None, 1)}  # 22, 18; 18
    assert x.slowdown("y") == pytest.approx(20 / 11)
    assert x.slowdown("nobody") is None
    assert runtimes["y"].alone is None
    assert runtimes["y"].slowdown("x") is None  # never alone: no slowdown to tell
    jobs, neighbours, cells = colocation_matrix(runtimes)
    assert (jobs, neighbours) == (["x", "y"], ["x", "y", "z"])
    assert [[c.samples if c else None for c in row] for row in cells] == [[None, 2, 1], [1, None, None]]


def test_slot_places_come_from_the_layout_given_else_from_runs_on_one_node() -> None:
    runs = [
        entry("a", 0, 1, slots=(3, 1), nodes=("n1",)),
        entry("b", 0, 1, slots=(4,), nodes=("n2",)),
        entry("c", 0, 1, slots=(7, 4), nodes=("n2", "n3")),  # slot 4 is known from b; slot 7 is not
        entry("d", 0, 1, slots=(0,), nodes=("n1", "n2"), testbed="other"),
    ]
    known = {("tb", 3): SlotPlace("n1", 5)}
    assert slot_layout(runs, known) == {
        ("tb", 3): SlotPlace("n1", 5),
        ("tb", 1): SlotPlace("n1", 0),
        ("tb", 4): SlotPlace("n2", 0),
        ("tb", 7): SlotPlace("?", 0),
        ("other", 0): SlotPlace("?", 0),
    }


def test_a_testbeds_layout_is_its_slot_table() -> None:
    def slot(node: str, position: int, slot_id: int) -> ExternalSlot:
        return ExternalSlot(state="FREE", node_name=node, node_id=0, slot_position_on_node=position, position=slot_id)

    testbed = ExternalTestbed(
        name="tb",
        state="READY",
        namespace="team-a",
        esi_state="Ready",
        number_of_nodes=2,
        number_of_slots_per_node=2,
        slots_by_node={"n1": [slot("n1", 0, 0), slot("n1", 1, 1)], "n2": [slot("n2", 0, 2), slot("n2", 1, 3)]},
    )
    assert testbed_layout(testbed) == {
        ("tb", 0): SlotPlace("n1", 0),
        ("tb", 1): SlotPlace("n1", 1),
        ("tb", 2): SlotPlace("n2", 0),
        ("tb", 3): SlotPlace("n2", 1),
    }


values = st.lists(st.floats(min_value=-1e6, max_value=1e6, allow_nan=False), min_size=1, max_size=40)


@given(values, st.floats(min_value=0, max_value=1))
def test_a_percentile_lies_between_the_smallest_and_largest(data: list[float], share: float) -> None:
    assert min(data) <= percentile(data, share) <= max(data)
    assert percentile(data, 0) == min(data)
    assert percentile(data, 1) == max(data)


@given(values.filter(lambda data: len(data) > 1))
def test_the_95th_percentile_is_the_inclusive_quantile(data: list[float]) -> None:
    expected = statistics.quantiles(data, n=100, method="inclusive")[94]
    assert percentile(data, 0.95) == pytest.approx(expected, abs=1e-6)


def test_statistics_of_no_runs_are_refused() -> None:
    with pytest.raises(ValueError, match="no runs"):
        RuntimeStats.of([])
    with pytest.raises(ValueError, match="no values"):
        percentile([], 0.5)
