"""Cycles of Schedulings waiting on each other, found in the wait-for graph of one namespace."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from esi.decisions.wait_cycles import Held, WaitCycle, wait_cycle

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def job(name: str) -> Held:
    return ("job", name)


def testbed(name: str) -> Held:
    return ("testbed", name)


# a holds tb1 and x and was given y; b holds tb2 and y and was given x later.
NEEDS = {"a": {testbed("tb1"), job("x"), job("y")}, "b": {testbed("tb2"), job("y"), job("x")}}
HOLDERS = {testbed("tb1"): "a", job("x"): "a", testbed("tb2"): "b", job("y"): "b"}
SINCE = {"a": T0, "b": T0 + timedelta(seconds=5)}


def test_two_schedulings_waiting_on_each_other_find_the_same_cycle_and_the_later_one_is_last() -> None:
    expected = WaitCycle(("b", "a"), (("b", job("x"), "a"), ("a", job("y"), "b")), frozenset({job("y")}))

    assert wait_cycle("a", NEEDS, HOLDERS, SINCE) == expected
    assert wait_cycle("b", NEEDS, HOLDERS, SINCE) == expected
    assert expected.last == "b"
    assert str(expected) == (
        "schedulings b -> a -> b wait on each other (b needs job x held by a, a needs job y held by b)"
    )


def test_a_wait_on_a_scheduling_that_waits_for_nobody_is_no_cycle() -> None:
    holders = HOLDERS | {job("y"): "a"}  # a holds everything it needs

    assert wait_cycle("a", NEEDS, holders, SINCE) is None
    assert wait_cycle("b", NEEDS, holders, SINCE) is None


def test_one_waiting_on_a_cycle_is_not_in_it_and_the_cycle_is_named_from_its_last_member() -> None:
    needs = {
        "a": {testbed("tb"), job("x"), job("y")},
        "b": {testbed("tb2"), job("y"), job("z")},
        "c": {testbed("tb3"), job("z"), job("x")},
        "d": {testbed("tb4"), job("x")},  # waits for a, nobody waits for d
    }
    holders = {testbed("tb"): "a", job("x"): "a", testbed("tb2"): "b", job("y"): "b", testbed("tb3"): "c"}
    holders |= {job("z"): "c", testbed("tb4"): "d"}
    since = {"a": T0, "b": T0 + timedelta(seconds=9), "c": T0 + timedelta(seconds=3), "d": T0 + timedelta(hours=1)}

    cycle = wait_cycle("a", needs, holders, since)

    assert cycle is not None
    assert cycle.members == ("b", "c", "a")
    assert cycle.wanted == frozenset({job("y")})
    assert wait_cycle("c", needs, holders, since) == cycle
    assert wait_cycle("d", needs, holders, since) is None


def test_a_wait_its_status_does_not_record_yet_is_the_latest_and_ties_go_by_name() -> None:
    # b was given x a moment ago: its spec says so, its status (written before) does not.
    assert wait_cycle("a", NEEDS, HOLDERS, {"a": T0, "b": None}).last == "b"  # type: ignore[union-attr]
    assert wait_cycle("a", NEEDS, HOLDERS, {"a": None, "b": T0 + timedelta(hours=1)}).last == "a"  # type: ignore[union-attr]
    assert wait_cycle("a", NEEDS, HOLDERS, {}).last == "b"  # type: ignore[union-attr]
    assert wait_cycle("a", NEEDS, HOLDERS, {"a": T0, "b": T0}).last == "b"  # type: ignore[union-attr]
