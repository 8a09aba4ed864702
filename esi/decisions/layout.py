"""Where a Testbed's slots are and which global id each one has.

Every node that carries the Testbed's label holds ``slotsPerNode`` slots; the label's value is the node's
id. Slots are numbered by (position on node, node id) — *interleaved* across nodes: with nodes 0 and 1 and
two slots each, ids 0 and 1 are the first slot of node 0 and node 1, ids 2 and 3 the second, so
consecutive queue entries land on different nodes (docs/design.md#slot-ids-interleaved).

Three more rules (docs/compatibility.md#node-labels):

* Label values that are not integers, or not distinct, never crash the layout and never drop slots
  silently. A node whose value is not an integer cannot be ordered, so its slots are left out *and named in
  a problem*; nodes sharing a value all keep their slots (ordered by node name as a tie-break) and the
  clash is named in a problem. The reconciler turns problems into a condition.
* A node with a ``NoSchedule`` or ``NoExecute`` taint that none of the Testbed's tolerations tolerates (a
  dedicated node the Testbed was not told of, a cordoned one) offers no slots — no executor could be placed
  there — and is named in ``untolerated``; only its slots that hold work (``keep``) stay, until the work
  ends. ``PreferNoSchedule`` taints do not keep anything off a node.
* Ids held by work stay put. Renumbering every slot when a node joins or leaves would move the slots a
  running job was given. ``keep`` maps (node, position) to the id it must keep; every other slot gets the
  smallest id not kept, in interleaved order. With nothing kept the ids are exactly 0..n-1.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from esi.resources.testbed import Toleration

__all__ = [
    "NodeLabels",
    "SlotLayout",
    "SlotPlace",
    "Taint",
    "layout_slots",
    "offers_slots",
    "testbeds_of_node",
    "untolerated_taints",
]

_INTEGER = re.compile(r"^[0-9]{1,18}$")
T = TypeVar("T")


@dataclass(frozen=True)
class Taint:
    """One of a node's taints."""

    key: str
    value: str
    effect: str  # NoSchedule, PreferNoSchedule or NoExecute

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"

    @property
    def keeps_pods_off(self) -> bool:
        return self.effect in ("NoSchedule", "NoExecute")


@dataclass(frozen=True)
class NodeLabels:
    """What the layout needs of a node: its name, its labels and its taints."""

    name: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...] = ()


@dataclass(frozen=True, order=True)
class SlotPlace:
    """One slot: its global id, and where it is (node name, node id, position on the node)."""

    id: int
    node_name: str
    node_id: int
    position: int


@dataclass(frozen=True)
class SlotLayout:
    slots: tuple[SlotPlace, ...]  # ordered by id
    problems: tuple[str, ...] = field(default=())  # node labels that cannot order the nodes
    untolerated: tuple[str, ...] = field(default=())  # nodes left out for their taints, each named with them

    @property
    def node_names(self) -> tuple[str, ...]:
        return tuple(sorted({s.node_name for s in self.slots}))


def offers_slots(labels: Mapping[str, str], label: str) -> bool:
    """Whether a node with these labels is one of a Testbed's whose node label is ``label``: it carries the
    label (whatever its value — a value that is no node id is reported, not ignored)."""
    return label in labels


def testbeds_of_node(labels: Mapping[str, str], by_label: Mapping[str, Iterable[T]]) -> set[T]:
    """The Testbeds a node with these labels is part of (``offers_slots``), given each Testbed under its label."""
    return {testbed for label in labels if label in by_label for testbed in by_label[label]}


def layout_slots(
    nodes: Sequence[NodeLabels],
    label: str,
    slots_per_node: int,
    keep: Mapping[tuple[str, int], int] | None = None,
    tolerations: Sequence[Toleration] = (),
) -> SlotLayout:
    """The Testbed's slots on ``nodes`` (any nodes; those without ``label`` are ignored)."""
    if slots_per_node < 1:
        raise ValueError(f"slots_per_node must be at least 1, got {slots_per_node}")
    keep = keep or {}
    problems: list[str] = []
    untolerated: list[str] = []
    members: list[tuple[int, str]] = []  # (node id, node name)
    tainted: set[str] = set()
    for node in sorted(nodes, key=lambda n: n.name):
        if not offers_slots(node.labels, label):
            continue
        value = node.labels[label]
        kept_off = untolerated_taints(node.taints, tolerations)
        if kept_off:
            taints = ", ".join(map(str, kept_off))
            untolerated.append(
                f"node {node.name} offers no slots: its taint{'s' if len(kept_off) > 1 else ''} {taints} "
                f"{'are' if len(kept_off) > 1 else 'is'} not tolerated (spec.tolerations)"
            )
            tainted.add(node.name)
        if not _INTEGER.fullmatch(value):
            problems.append(
                f"node {node.name} is left out: its label {label}={value!r} is not a non-negative integer node id"
            )
            continue
        members.append((int(value), node.name))

    by_id: dict[int, list[str]] = {}
    for node_id, name in members:
        by_id.setdefault(node_id, []).append(name)
    for node_id, names in sorted(by_id.items()):
        if len(names) > 1:
            problems.append(
                f"nodes {', '.join(names)} share node id {node_id} ({label}); their slots are ordered by node name"
            )

    places = sorted(
        (position, node_id, name)
        for node_id, name in members
        for position in range(slots_per_node)
        if name not in tainted or (name, position) in keep
    )
    ids = _assign_ids([(name, position) for position, _, name in places], keep)
    slots = sorted(
        (
            SlotPlace(id=ids[(name, position)], node_name=name, node_id=node_id, position=position)
            for position, node_id, name in places
        ),
        key=_slot_id,
    )
    return SlotLayout(tuple(slots), tuple(problems), tuple(untolerated))


def _slot_id(place: SlotPlace) -> int:
    return place.id  # unique: the order of the ids is the order of the places


def untolerated_taints(taints: Iterable[Taint], tolerations: Sequence[Toleration]) -> list[Taint]:
    """The taints that keep the Testbed's pods off a node: NoSchedule or NoExecute, and none of ``tolerations``
    tolerates them."""
    return [
        taint
        for taint in taints
        if taint.keeps_pods_off and not any(t.tolerates(taint.key, taint.value, taint.effect) for t in tolerations)
    ]


def _assign_ids(places: Sequence[tuple[str, int]], keep: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    """Kept ids first (each id at most once, in interleaved order), then the smallest free ids in order."""
    assigned: dict[tuple[str, int], int] = {}
    taken: set[int] = set()
    for place in places:
        kept = keep.get(place)
        if kept is not None and kept >= 0 and kept not in taken:
            assigned[place] = kept
            taken.add(kept)
    next_id = 0
    for place in places:
        if place in assigned:
            continue
        while next_id in taken:
            next_id += 1
        assigned[place] = next_id
        taken.add(next_id)
    return assigned
