"""Slot layout: interleaved ids, bad labels reported (never a crash, never silently dropped), stable ids."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from esi.decisions.layout import NodeLabels, SlotPlace, Taint, layout_slots, testbeds_of_node
from esi.resources.testbed import Toleration

LABEL = "esi.test/node-id"


def node(name: str, value: str | None) -> NodeLabels:
    return NodeLabels(name, {} if value is None else {LABEL: value})


def places(
    layout_nodes: list[NodeLabels], per_node: int, keep: dict[tuple[str, int], int] | None = None
) -> list[tuple[int, str, int]]:
    return [(s.id, s.node_name, s.position) for s in layout_slots(layout_nodes, LABEL, per_node, keep).slots]


def test_ids_interleave_across_nodes_by_position_then_node_id() -> None:
    # Node names sort the other way round than their ids: the id decides.
    nodes = [node("b", "0"), node("a", "1")]

    assert places(nodes, 2) == [(0, "b", 0), (1, "a", 0), (2, "b", 1), (3, "a", 1)]


def test_nodes_without_the_label_are_not_part_of_the_testbed() -> None:
    layout = layout_slots([node("x", None), node("y", "3")], LABEL, 2)

    assert [s.node_name for s in layout.slots] == ["y", "y"]
    assert layout.slots[0] == SlotPlace(id=0, node_name="y", node_id=3, position=0)
    assert layout.problems == ()


def test_no_labelled_nodes_is_an_empty_testbed() -> None:
    assert layout_slots([node("x", None)], LABEL, 3).slots == ()


@pytest.mark.parametrize("value", ["abc", "1.5", "-1", "", " 2", "1e3"])
def test_a_label_that_is_not_an_integer_leaves_the_node_out_and_says_so(value: str) -> None:
    layout = layout_slots([node("good", "0"), node("bad", value)], LABEL, 2)

    assert {s.node_name for s in layout.slots} == {"good"}
    assert len(layout.problems) == 1
    assert "node bad is left out" in layout.problems[0]
    assert repr(value) in layout.problems[0]


def test_shared_node_ids_keep_every_slot_and_are_reported() -> None:
    layout = layout_slots([node("n2", "1"), node("n1", "1"), node("n0", "0")], LABEL, 2)

    assert len(layout.slots) == 6, "no slot may be dropped"
    assert [(s.id, s.node_name) for s in layout.slots][:3] == [(0, "n0"), (1, "n1"), (2, "n2")]
    assert layout.problems == (f"nodes n1, n2 share node id 1 ({LABEL}); their slots are ordered by node name",)


def test_ids_of_kept_slots_survive_a_node_joining() -> None:
    # A job runs in ids 1 and 3 (node "one"). Node "zero" (id 0) joins, which alone would renumber them.
    before = layout_slots([node("one", "1")], LABEL, 2)
    assert [(s.id, s.node_name, s.position) for s in before.slots] == [(0, "one", 0), (1, "one", 1)]
    keep = {("one", 0): 0, ("one", 1): 1}

    after = places([node("zero", "0"), node("one", "1")], 2, keep)

    assert (0, "one", 0) in after
    assert (1, "one", 1) in after
    assert sorted(i for i, _, _ in after) == [0, 1, 2, 3]
    assert [p for p in after if p[1] == "zero"] == [(2, "zero", 0), (3, "zero", 1)]


def test_ids_of_kept_slots_survive_a_node_leaving() -> None:
    nodes = [node("a", "0"), node("b", "1"), node("c", "2")]
    running = {("c", 0): 2, ("c", 1): 5}  # ids of node c under three nodes

    after = places([node("b", "1"), node("c", "2")], 2, running)

    assert (2, "c", 0) in after
    assert (5, "c", 1) in after
    assert len(places(nodes, 2)) == 6
    assert sorted(i for i, _, _ in after) == [0, 1, 2, 5]


def test_slots_per_node_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        layout_slots([], LABEL, 0)


node_sets = st.dictionaries(
    keys=st.text(alphabet="abcdefgh", min_size=1, max_size=3),
    values=st.one_of(st.integers(0, 6).map(str), st.sampled_from(["x", "", "1.0"]), st.none()),
    max_size=6,
)


@given(node_sets, st.integers(1, 4))
def test_every_valid_node_gets_all_its_slots_with_distinct_ids(labels: dict[str, str | None], per_node: int) -> None:
    layout = layout_slots([node(n, v) for n, v in labels.items()], LABEL, per_node)

    valid = [n for n, v in labels.items() if v is not None and v.isdigit()]
    assert len(layout.slots) == len(valid) * per_node
    assert sorted(s.id for s in layout.slots) == list(range(len(layout.slots)))
    # Interleaved: ids follow (position, node id, node name).
    ordered = sorted(layout.slots, key=lambda s: (s.position, s.node_id, s.node_name))
    assert [s.id for s in ordered] == list(range(len(layout.slots)))


@given(node_sets, node_sets, st.integers(1, 3), st.data())
def test_kept_ids_never_move_and_never_collide(
    first: dict[str, str | None], second: dict[str, str | None], per_node: int, data: st.DataObject
) -> None:
    before = layout_slots([node(n, v) for n, v in first.items()], LABEL, per_node)
    held = data.draw(st.lists(st.sampled_from(before.slots), unique=True) if before.slots else st.just([]))
    keep = {(s.node_name, s.position): s.id for s in held}

    after = layout_slots([node(n, v) for n, v in {**first, **second}.items()], LABEL, per_node, keep)

    ids = [s.id for s in after.slots]
    assert len(ids) == len(set(ids))
    by_place = {(s.node_name, s.position): s.id for s in after.slots}
    for place, kept_id in keep.items():
        if place in by_place:
            assert by_place[place] == kept_id


def tainted(name: str, value: str, *taints: Taint) -> NodeLabels:
    return NodeLabels(name, {LABEL: value}, taints)


DEDICATED = Taint("dedicated", "esi", "NoSchedule")
DRAINING = Taint("draining", "", "NoExecute")
PREFERRED = Taint("spare", "yes", "PreferNoSchedule")


def toleration(**fields: object) -> Toleration:
    return Toleration.model_validate(fields)


def test_a_node_whose_taint_is_not_tolerated_holds_no_slots_and_is_named_with_its_taints() -> None:
    nodes = [tainted("a", "0"), tainted("b", "1", DEDICATED, DRAINING), tainted("c", "2", PREFERRED)]

    layout = layout_slots(nodes, LABEL, 1)

    assert [s.node_name for s in layout.slots] == ["a", "c"], "PreferNoSchedule keeps nothing off a node"
    assert layout.untolerated == (
        "node b offers no slots: its taints dedicated=esi:NoSchedule, draining:NoExecute are not tolerated "
        "(spec.tolerations)",
    )
    assert layout.problems == ()


@pytest.mark.parametrize(
    ("tolerations", "holds_slots"),
    [
        ([toleration(key="dedicated", operator="Equal", value="esi", effect="NoSchedule")], False),  # not draining
        (
            [
                toleration(key="dedicated", value="esi"),  # Equal is the default; any effect
                toleration(key="draining", operator="Exists", effect="NoExecute", tolerationSeconds=30),
            ],
            True,
        ),
        ([toleration(key="dedicated", value="other"), toleration(key="draining", operator="Exists")], False),
        ([toleration(operator="Exists")], True),  # every taint
        ([toleration(operator="Exists", effect="NoSchedule")], False),
    ],
    ids=["one-of-two", "both", "other-value", "everything", "every-noschedule"],
)
def test_tolerations_match_taints_as_kubernetes_matches_them(tolerations: list[Toleration], holds_slots: bool) -> None:
    layout = layout_slots([tainted("b", "1", DEDICATED, DRAINING)], LABEL, 2, tolerations=tolerations)

    assert bool(layout.slots) is holds_slots
    assert bool(layout.untolerated) is not holds_slots


def test_a_tainted_node_keeps_only_the_slots_that_hold_work_until_the_work_ends() -> None:
    cordoned = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")
    nodes = [tainted("a", "0"), tainted("b", "1", cordoned)]

    working = layout_slots(nodes, LABEL, 2, keep={("b", 1): 3})
    assert [(s.id, s.node_name, s.position) for s in working.slots] == [(0, "a", 0), (1, "a", 1), (3, "b", 1)]
    assert working.untolerated == (
        "node b offers no slots: its taint node.kubernetes.io/unschedulable:NoSchedule is not tolerated "
        "(spec.tolerations)",
    )

    assert [s.node_name for s in layout_slots(nodes, LABEL, 2).slots] == ["a", "a"]


def test_a_node_is_part_of_the_testbeds_whose_labels_it_carries_whatever_their_values() -> None:
    by_label = {"esi/a": [("ns", "a")], "esi/b": [("ns", "b"), ("other", "b")], "esi/c": [("ns", "c")]}

    assert testbeds_of_node({"esi/a": "0", "esi/b": "not an id", "zone": "x"}, by_label) == {
        ("ns", "a"),
        ("ns", "b"),
        ("other", "b"),
    }
    assert testbeds_of_node({"zone": "x"}, by_label) == set()
