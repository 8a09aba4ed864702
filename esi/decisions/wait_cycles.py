"""Schedulings that wait on each other: the wait-for graph of one namespace's Schedulings, and its cycles.

A Scheduling waits for another when the other holds something it needs (its Testbed or one of its
BatchJobs) — which happens when a Scheduling that holds its Testbed and jobs is given more jobs. Waits
that form a cycle never end by themselves: each Scheduling waits for the next to let go. In each cycle
(strongly connected part of the graph, so that every member finds the same one) the Scheduling that joined it
last — whose wait began latest — is told and lets go of what the others need and it does not use.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass
from datetime import datetime

__all__ = ["Held", "WaitCycle", "wait_cycle"]

Held = tuple[str, str]
"""Something a Scheduling holds or needs: ("testbed" or "job", its name)."""


@dataclass(frozen=True)
class WaitCycle:
    """A cycle of Schedulings, each waiting for the next; ``members[0]`` joined it last."""

    members: tuple[str, ...]
    waits: tuple[tuple[str, Held, str], ...]  # (waiting Scheduling, what it needs, the Scheduling holding that)
    wanted: frozenset[Held]  # what the one that joined last holds and the others need

    @property
    def last(self) -> str:
        return self.members[0]

    def __str__(self) -> str:
        path = " -> ".join((*self.members, self.members[0]))
        waits = ", ".join(
            f"{waiter} needs {kind} {name} held by {holder}" for waiter, (kind, name), holder in self.waits
        )
        return f"schedulings {path} wait on each other ({waits})"


def wait_cycle(
    name: str,
    needs: Mapping[str, Set[Held]],
    holders: Mapping[Held, str],
    waiting_since: Mapping[str, datetime | None],
) -> WaitCycle | None:
    """The cycle of waits Scheduling ``name`` is part of, or None.

    ``needs``: what each Scheduling of the namespace needs (its Testbed and jobs); ``holders``: who holds
    what; ``waiting_since``: when each began to wait as its status records it. A member of a cycle always
    waits, so one whose status does not record that yet began to wait after its status was written: None is
    taken as the latest.
    """
    waits_for = {
        scheduling: sorted({holders[item] for item in wanted if holders.get(item, scheduling) != scheduling})
        for scheduling, wanted in needs.items()
    }
    part = _reachable(name, waits_for) & _reachable(name, _reversed(waits_for))
    if name not in part:
        return None
    last = max(part, key=lambda s: (waiting_since.get(s) is None, waiting_since.get(s) or 0, s))
    members = _shortest_cycle(last, waits_for, part)
    waits = tuple(
        (waiter, min(item for item in needs[waiter] if holders.get(item) == holder), holder)
        for waiter, holder in zip(members, (*members[1:], members[0]), strict=True)
    )
    wanted = frozenset(item for other in part - {last} for item in needs[other] if holders.get(item) == last)
    return WaitCycle(members, waits, wanted)


def _reachable(start: str, edges: Mapping[str, list[str]]) -> set[str]:
    """Every Scheduling reachable from ``start`` by one or more waits (``start`` itself only through a cycle)."""
    seen: set[str] = set()
    stack = list(edges.get(start, ()))
    while stack:
        node = stack.pop()
        if node not in seen:
            seen.add(node)
            stack.extend(edges.get(node, ()))
    return seen


def _reversed(edges: Mapping[str, list[str]]) -> dict[str, list[str]]:
    back: dict[str, list[str]] = {}
    for source, targets in edges.items():
        for target in targets:
            back.setdefault(target, []).append(source)
    return {node: sorted(sources) for node, sources in back.items()}


def _shortest_cycle(start: str, edges: Mapping[str, list[str]], part: Set[str]) -> tuple[str, ...]:
    """The shortest cycle from ``start`` back to itself within ``part`` (breadth first, by name)."""
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in edges.get(node, ()):
                if target not in part:
                    continue
                if target == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return tuple(reversed(path))
                if target not in previous:
                    previous[target] = node
                    following.append(target)
        frontier = following
    raise AssertionError(f"{start} is in a strongly connected part, so a cycle leads back to it")
