"""Conditions: Kubernetes conventions, changed only through set_condition (the original's scenario 14,
docs/compatibility.md#scenarios)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from esi.resources.meta import Condition, ConditionStatus, find_condition, set_condition, utc_now

T0 = datetime(2026, 1, 1, tzinfo=UTC)
T1 = T0 + timedelta(minutes=5)


def test_a_new_condition_is_added_and_reported_as_a_change() -> None:
    conditions, changed = set_condition([], "Held", ConditionStatus.TRUE, "HeldByScheduling", "by s", now=T0)

    assert changed
    assert conditions == [
        Condition(
            type="Held", status=ConditionStatus.TRUE, reason="HeldByScheduling", message="by s", last_transition_time=T0
        )
    ]


def test_setting_the_same_condition_again_changes_nothing() -> None:
    conditions, _ = set_condition([], "Held", ConditionStatus.TRUE, "HeldByScheduling", "by s", now=T0)

    again, changed = set_condition(conditions, "Held", ConditionStatus.TRUE, "HeldByScheduling", "by s", now=T1)

    assert not changed
    assert again == conditions


def test_the_transition_time_moves_only_when_the_status_does() -> None:
    conditions, _ = set_condition([], "Held", ConditionStatus.TRUE, "HeldByScheduling", "by s", now=T0)

    reworded, changed = set_condition(conditions, "Held", ConditionStatus.TRUE, "HeldByScheduling", "by t", now=T1)
    flipped, _ = set_condition(reworded, "Held", ConditionStatus.FALSE, "NotHeld", "", now=T1)

    assert changed
    held = find_condition(reworded, "Held")
    assert held is not None
    assert (held.message, held.last_transition_time) == ("by t", T0)
    held = find_condition(flipped, "Held")
    assert held is not None
    assert (held.status, held.last_transition_time) == (ConditionStatus.FALSE, T1)


def test_other_conditions_keep_their_place() -> None:
    conditions, _ = set_condition([], "A", ConditionStatus.TRUE, "Yes", "", now=T0)
    conditions, _ = set_condition(conditions, "B", ConditionStatus.TRUE, "Yes", "", now=T0)
    conditions, _ = set_condition(conditions, "A", ConditionStatus.FALSE, "No", "", now=T1)

    assert [c.type for c in conditions] == ["A", "B"]


def test_conditions_serialise_the_kubernetes_way() -> None:
    conditions, _ = set_condition(
        [], "Finished", ConditionStatus.TRUE, "Succeeded", "done", now=T0, observed_generation=3
    )

    assert conditions[0].to_json_dict() == {
        "type": "Finished",
        "status": "True",
        "reason": "Succeeded",
        "message": "done",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
        "observedGeneration": 3,
    }
    assert Condition.model_validate(conditions[0].to_json_dict()) == conditions[0]


@pytest.mark.parametrize("reason", ["", "has space", "9Starts", "EndsWith:"])
def test_reasons_are_camel_case_words(reason: str) -> None:
    with pytest.raises(ValidationError, match="reason"):
        Condition(type="X", status=ConditionStatus.TRUE, reason=reason, last_transition_time=T0)


def test_naive_times_are_refused() -> None:
    with pytest.raises(ValueError, match="timezone"):
        set_condition([], "X", ConditionStatus.TRUE, "Yes", "", now=datetime(2026, 1, 1))


def test_transition_times_are_whole_seconds_though_the_clock_has_milliseconds() -> None:
    now = utc_now()
    later = T0 + timedelta(seconds=1, milliseconds=250)

    conditions, _ = set_condition([], "Held", ConditionStatus.TRUE, "HeldByScheduling", "by s", now=later)

    assert now.microsecond % 1000 == 0
    assert conditions[0].last_transition_time == T0 + timedelta(seconds=1)
