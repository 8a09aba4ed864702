"""Which nodes a Testbed is set up on (``esi label-nodes``): the most room first, never another Testbed's node,
never a node whose slots are in use, and a refusal that says what each node lacks."""

from __future__ import annotations

from typing import Any

import pytest

from esi.decisions.layout import Taint
from esi.decisions.node_choice import NodeChoice, NodeFacts, NodeRefusal, choose_nodes, room_in_slots
from esi.decisions.testbed_lifecycle import Resources
from esi.resources.quantity import Quantity
from esi.resources.testbed import Testbed
from tests.builders import status_slot, stored
from tests.manifests import testbed_manifest

LABEL = "esi.test/slots"


def new_testbed(
    name: str = "tb", label: str = LABEL, slots: list[dict[str, Any]] | None = None, **spec: Any
) -> Testbed:
    """Two slots of 1 cpu and 1Gi a node, on the nodes labelled ``label``."""
    manifest = testbed_manifest(nodeLabel=label, resourcesPerSlot={"cpu": "1", "memory": "1Gi"}, **spec)
    return Testbed.model_validate(stored(manifest, name, slots=slots) if slots else stored(manifest, name))


def node(
    name: str, cpu: str = "4", memory: str = "8Gi", used_cpu: str = "0", used_memory: str = "0", **more: Any
) -> NodeFacts:
    return NodeFacts(
        name=name,
        labels=more.pop("labels", {}),
        allocatable=Resources(Quantity(cpu), Quantity(memory)),
        requested=Resources(Quantity(used_cpu), Quantity(used_memory)),
        **more,
    )


def chosen(decision: NodeChoice | NodeRefusal) -> NodeChoice:
    assert isinstance(decision, NodeChoice), decision
    return decision


def refused(decision: NodeChoice | NodeRefusal) -> NodeRefusal:
    assert isinstance(decision, NodeRefusal), decision
    return decision


def test_the_nodes_with_most_room_are_chosen_ties_by_name_and_numbered_from_0() -> None:
    nodes = [node("c", cpu="8"), node("b", cpu="4"), node("a", cpu="4"), node("d", cpu="8", used_cpu="5")]

    choice = chosen(choose_nodes(new_testbed(), 3, nodes))

    assert [(n.name, n.node_id, n.room, n.kept) for n in choice.chosen] == [
        ("a", 0, 4, False),
        ("b", 1, 4, False),
        ("c", 2, 8, False),
    ]
    assert choice.set_labels == {"a": "0", "b": "1", "c": "2"}
    assert choice.remove_labels == ()


def test_room_is_counted_in_slots_of_cpu_and_memory_both() -> None:
    slot = Resources(Quantity("1"), Quantity("1Gi"))

    assert room_in_slots(Resources(Quantity("8"), Quantity("3Gi")), slot) == 3
    assert room_in_slots(Resources(Quantity("2500m"), Quantity("8Gi")), slot) == 2
    assert room_in_slots(Resources(Quantity("-1"), Quantity("8Gi")), slot) == 0


def test_memory_counts_not_only_cpu() -> None:
    nodes = [node("plenty-of-cpu", cpu="64", memory="1Gi"), node("balanced", cpu="2", memory="2Gi")]

    choice = chosen(choose_nodes(new_testbed(), 1, nodes))

    assert [n.name for n in choice.chosen] == ["balanced"]


def test_too_few_fit_is_refused_with_what_each_node_lacks() -> None:
    nodes = [
        node("roomy"),
        node("busy", used_cpu="3", used_memory="7Gi"),
        node("tainted", taints=(Taint("gpu", "yes", "NoSchedule"),)),
        node("cordoned", unschedulable=True),
        node("down", ready=False),
    ]

    refusal = refused(choose_nodes(new_testbed(), 3, nodes))

    assert refusal.message.startswith("only 1 of the 3 nodes Testbed tb asks for fit")
    assert refusal.nodes == {
        "tainted": "has taints the Testbed does not tolerate: gpu=yes:NoSchedule",
        "cordoned": "is cordoned",
        "down": "is not Ready",
        "busy": "has room for 1 of its 2 slots (1 cpu, 1Gi memory free): lacks 1 cpu and 1Gi memory",
    }


def test_tolerated_taints_and_prefer_no_schedule_do_not_keep_a_node_out() -> None:
    tolerating = new_testbed(tolerations=[{"key": "gpu", "operator": "Exists"}])
    nodes = [node("gpu", taints=(Taint("gpu", "yes", "NoSchedule"), Taint("slow", "", "PreferNoSchedule")))]

    assert [n.name for n in chosen(choose_nodes(tolerating, 1, nodes)).chosen] == ["gpu"]


def test_another_testbeds_nodes_are_not_taken_and_the_refusal_names_it() -> None:
    other = new_testbed("other", label="esi.test/other")
    nodes = [node("theirs", cpu="64", memory="64Gi", labels={"esi.test/other": "0"}), node("free")]

    choice = chosen(choose_nodes(new_testbed(), 1, nodes, others=[other]))
    refusal = refused(choose_nodes(new_testbed(), 2, nodes, others=[other]))

    assert [n.name for n in choice.chosen] == ["free"]
    assert refusal.nodes == {"theirs": "carries esi.test/other, the node label of Testbed ns/other"}


def test_a_testbed_sharing_the_label_shares_its_nodes() -> None:
    twin = new_testbed("twin")

    choice = chosen(choose_nodes(new_testbed(), 1, [node("n", labels={LABEL: "0"})], others=[twin]))

    assert [(n.name, n.kept) for n in choice.chosen] == [("n", True)]


def test_nodes_of_the_testbed_keep_their_ids_new_ones_get_the_lowest_free_and_the_rest_lose_the_label() -> None:
    nodes = [
        node("kept", labels={LABEL: "1"}),
        node("new-b", cpu="8"),
        node("new-a", cpu="8"),
        node("dropped", cpu="2", labels={LABEL: "0"}),
        node("garbled", cpu="8", labels={LABEL: "x"}),
    ]

    choice = chosen(choose_nodes(new_testbed(), 4, nodes))

    assert [(n.name, n.node_id, n.kept) for n in choice.chosen] == [
        ("garbled", 0, False),
        ("kept", 1, True),
        ("new-a", 2, False),
        ("new-b", 3, False),
    ]
    assert choice.set_labels == {"garbled": "0", "new-a": "2", "new-b": "3"}
    assert choice.remove_labels == ("dropped",)


def test_two_nodes_sharing_an_id_keep_it_once() -> None:
    nodes = [node("a", labels={LABEL: "0"}), node("b", labels={LABEL: "0"})]

    choice = chosen(choose_nodes(new_testbed(), 2, nodes))

    assert [(n.name, n.node_id, n.kept) for n in choice.chosen] == [("a", 0, True), ("b", 1, False)]
    assert choice.set_labels == {"b": "1"}


def test_asking_again_for_the_same_nodes_changes_nothing() -> None:
    nodes = [node("a", labels={LABEL: "0"}), node("b", labels={LABEL: "1"})]

    choice = chosen(choose_nodes(new_testbed(), 2, nodes))

    assert not choice.changes


def test_the_testbeds_own_slots_are_its_room_not_other_pods() -> None:
    # The shell leaves the Testbed's ghosts out of ``requested``: a node full of its own ghosts still fits.
    full_of_ghosts = node("n", cpu="2", memory="2Gi", labels={LABEL: "0"})

    assert chosen(choose_nodes(new_testbed(), 1, [full_of_ghosts])).chosen[0].room == 2


def test_a_node_whose_slots_are_in_use_is_never_unlabelled() -> None:
    slots = [status_slot(0, 0, "Occupied", job="wordcount"), status_slot(1, 1), status_slot(2, 0, "Reserved")]
    busy = new_testbed(slots=slots)
    nodes = [node("n0", cpu="2", memory="2Gi", labels={LABEL: "0"}), node("n1", labels={LABEL: "1"}), node("big")]

    refusal = refused(choose_nodes(busy, 2, nodes))

    assert "would lose nodes on which its slots are in use: n0" in refusal.message
    assert refusal.nodes == {"n0": "slots 0, 2 of the Testbed are in use here"}
    assert isinstance(choose_nodes(busy, 3, nodes), NodeChoice)


def test_a_refusal_names_the_nodes_closest_to_fitting_first_and_counts_the_rest() -> None:
    nodes = [node(f"small-{i:02}", cpu="1") for i in range(25)] + [node("almost", cpu="1", memory="64Gi")]

    refusal = refused(choose_nodes(new_testbed(), 1, nodes))

    assert len(refusal.nodes) == 20
    assert next(iter(refusal.nodes)) == "almost"
    assert "(6 more nodes do not fit)" in refusal.message


def test_count_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        choose_nodes(new_testbed(), 0, [])
