"""Which nodes a Testbed gets when it is set up on N of them: a pure choice over plain node facts.

``choose_nodes`` answers the labels to set and remove so that exactly N nodes carry the Testbed's node label, or a
refusal that says why not — and then nothing is to change.

A node fits when all of these hold:

* it carries no other Testbed's node label (a node is one Testbed's);
* it is Ready and not cordoned (``spec.unschedulable``);
* every ``NoSchedule``/``NoExecute`` taint on it is tolerated by the Testbed (``spec.tolerations``), as
  ``esi.decisions.layout`` requires of a node that offers slots;
* its *room* — allocatable minus what its unfinished pods request, not counting the Testbed's own ghosts and
  executors, which the room is for — holds ``slotsPerNode`` slots of ``resourcesPerSlot``, cpu and memory both.

Of the nodes that fit, those with the most room come first: room counted in whole slots of the Testbed's size
(the smaller of what the free cpu and the free memory hold), ties broken by node name. The first N are chosen.

Node ids: a chosen node that already carries the Testbed's label with an integer value keeps it (the first by
name, should two share a value); the others get the smallest ids not kept, in the order of their names. Nodes
of the Testbed that are not chosen lose the label — unless one of the Testbed's slots on them is Reserved or
Occupied: work is never taken from under a job, so the whole choice is refused instead, naming them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from esi.decisions.layout import Taint, untolerated_taints
from esi.decisions.testbed_lifecycle import Resources
from esi.resources.quantity import Quantity
from esi.resources.testbed import SlotState, Testbed

__all__ = ["ChosenNode", "NodeChoice", "NodeFacts", "NodeRefusal", "choose_nodes", "room_in_slots"]

_NODE_ID: Final = re.compile(r"^[0-9]{1,18}$")  # as esi.decisions.layout reads a node id
# Nodes named in a refusal, closest to fitting first; the rest are counted.
SHOWN_NODES: Final = 20


@dataclass(frozen=True)
class NodeFacts:
    """What the choice needs to know of one node, as the shell read it."""

    name: str
    labels: Mapping[str, str]
    allocatable: Resources
    requested: Resources  # by its unfinished pods, other than the Testbed's own ghosts and executors
    taints: tuple[Taint, ...] = ()
    ready: bool = True
    unschedulable: bool = False

    @property
    def free(self) -> Resources:
        """Its room: allocatable minus requested (negative where its pods ask for more than it has)."""
        return Resources(self.allocatable.cpu - self.requested.cpu, self.allocatable.memory - self.requested.memory)


@dataclass(frozen=True)
class ChosenNode:
    name: str
    node_id: int
    free: Resources  # its room before the Testbed's slots are put there
    room: int  # whole slots of the Testbed's size its room holds (at least slotsPerNode)
    kept: bool  # it carried the label with this id already


@dataclass(frozen=True)
class NodeChoice:
    """The Testbed's nodes after the change, ordered by node id, and the label writes that make it so."""

    chosen: tuple[ChosenNode, ...]
    set_labels: Mapping[str, str]  # node name -> the node id to write as the label's value (new or changed)
    remove_labels: tuple[str, ...]  # nodes that lose the label

    @property
    def changes(self) -> bool:
        return bool(self.set_labels or self.remove_labels)


@dataclass(frozen=True)
class NodeRefusal:
    """Why the Testbed cannot be set up on N nodes: a sentence, and per node what keeps it out (or in)."""

    message: str
    nodes: Mapping[str, str]  # node name -> its problem, closest to fitting first


def room_in_slots(free: Resources, size: Resources) -> int:
    """How many slots of ``size`` fit in ``free``: the smaller of what its cpu and its memory hold, at least 0."""
    return max(0, min(free.cpu.nanos // size.cpu.nanos, free.memory.nanos // size.memory.nanos))


def choose_nodes(
    testbed: Testbed, count: int, nodes: Iterable[NodeFacts], others: Iterable[Testbed] = ()
) -> NodeChoice | NodeRefusal:
    """The ``count`` nodes with the most room that fit ``testbed``, labelled for it; or why that cannot be.

    ``nodes``: every node of the cluster; ``others``: every other Testbed (any namespace), whose nodes are theirs.
    """
    if count < 1:
        raise ValueError(f"count must be at least 1, got {count}")
    spec = testbed.spec
    size = Resources(spec.resources_per_slot.cpu, spec.resources_per_slot.memory)
    # A Testbed that shares this one's label shares its nodes too: those are not another's.
    foreign = {t.spec.node_label: t for t in others if t.spec.node_label != spec.node_label}
    by_room = sorted(nodes, key=lambda n: (-room_in_slots(n.free, size), n.name))
    problems = {n.name: problem for n in by_room if (problem := _problem(n, testbed, size, foreign))}
    fitting = [n for n in by_room if n.name not in problems]
    if len(fitting) < count:
        return _too_few(testbed, count, len(fitting), problems, foreign)
    chosen = fitting[:count]
    names = {n.name for n in chosen}
    members = [n for n in by_room if spec.node_label in n.labels]
    leaving = sorted(n.name for n in members if n.name not in names)
    busy = _busy_nodes(testbed)
    kept_busy = [name for name in leaving if name in busy]
    if kept_busy:
        return NodeRefusal(
            f"Testbed {testbed.metadata.name} would lose nodes on which its slots are in use: "
            f"{', '.join(kept_busy)}; wait until their slots are free, or set it up on more nodes",
            {name: f"slots {busy[name]} of the Testbed are in use here" for name in kept_busy},
        )
    return _labelled(chosen, spec.node_label, size, leaving)


def _problem(node: NodeFacts, testbed: Testbed, size: Resources, foreign: Mapping[str, Testbed]) -> str | None:
    """What keeps ``node`` from holding the Testbed's slots (each reason, in a sentence); None when it fits."""
    spec = testbed.spec
    reasons = [
        f"carries {label}, the node label of Testbed {other.metadata.namespace}/{other.metadata.name}"
        for label, other in sorted(foreign.items())
        if label in node.labels
    ]
    if not node.ready:
        reasons.append("is not Ready")
    if node.unschedulable:
        reasons.append("is cordoned")
    kept_off = untolerated_taints(node.taints, spec.tolerations or ())
    if kept_off:
        reasons.append(f"has taints the Testbed does not tolerate: {', '.join(map(str, kept_off))}")
    need = Resources(size.cpu * spec.slots_per_node, size.memory * spec.slots_per_node)
    free = node.free
    short = [
        f"{need_of - free_of} {what}"
        for what, need_of, free_of in (("cpu", need.cpu, free.cpu), ("memory", need.memory, free.memory))
        if free_of < need_of
    ]
    if short:
        reasons.append(
            f"has room for {room_in_slots(free, size)} of its {spec.slots_per_node} slots "
            f"({_free(free)} free): lacks {' and '.join(short)}"
        )
    return "; ".join(reasons) or None


def _free(free: Resources) -> str:
    return f"{_at_least_zero(free.cpu)} cpu, {_at_least_zero(free.memory)} memory"


def _at_least_zero(quantity: Quantity) -> Quantity:
    return max(quantity, Quantity(0))


def _too_few(
    testbed: Testbed, count: int, fitting: int, problems: Mapping[str, str], foreign: Mapping[str, Testbed]
) -> NodeRefusal:
    spec = testbed.spec
    shown = dict(list(problems.items())[:SHOWN_NODES])
    more = len(problems) - len(shown)
    message = (
        f"only {fitting} of the {count} nodes Testbed {testbed.metadata.name} asks for fit: a node fits when it is "
        f"Ready, not cordoned, has no taint the Testbed does not tolerate, carries no other Testbed's node label "
        f"and has room for {spec.slots_per_node} slots of {spec.resources_per_slot.cpu} cpu and "
        f"{spec.resources_per_slot.memory} memory beside its other pods"
    )
    if more:
        message += f" ({more} more nodes do not fit)"
    return NodeRefusal(message, shown)


def _busy_nodes(testbed: Testbed) -> dict[str, str]:
    """The Testbed's nodes on which a slot is Reserved or Occupied, with those slots' ids."""
    busy: dict[str, list[int]] = {}
    for slot in testbed.status.slots if testbed.status else ():
        if slot.state in (SlotState.RESERVED, SlotState.OCCUPIED):
            busy.setdefault(slot.node_name, []).append(slot.id)
    return {name: ", ".join(map(str, sorted(ids))) for name, ids in busy.items()}


def _labelled(chosen: Sequence[NodeFacts], label: str, size: Resources, leaving: Sequence[str]) -> NodeChoice:
    kept: dict[str, int] = {}
    for node in sorted(chosen, key=lambda n: n.name):
        value = node.labels.get(label, "")
        if _NODE_ID.fullmatch(value) and int(value) not in kept.values():
            kept[node.name] = int(value)
    taken = set(kept.values())
    ids = dict(kept)
    free_ids = (i for i in range(len(chosen) + len(taken)) if i not in taken)
    for node in sorted(chosen, key=lambda n: n.name):
        if node.name not in ids:
            ids[node.name] = next(free_ids)
    rows = sorted(
        (ChosenNode(n.name, ids[n.name], n.free, room_in_slots(n.free, size), n.name in kept) for n in chosen),
        key=lambda row: row.node_id,
    )
    return NodeChoice(
        chosen=tuple(rows),
        set_labels={row.name: str(row.node_id) for row in rows if not row.kept},
        remove_labels=tuple(leaving),
    )
