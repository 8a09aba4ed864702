"""Where the profiler and the scheduler put jobs: pure functions of a Testbed's slots and the matrix.

**The scheduler's queue** (as in the thesis). A round takes as many jobs as the Testbed has nodes, each
replicated NumberOfSlots / NumberOfJobs times. Every node gets one of them as its *lead* and, in its other
slots, the lead's best partners — the jobs next to which the lead ran shortest — greedily, node by node,
each job once per slot position, so that a round is not the same job everywhere. esi maps a queue onto the
free slots in ascending id order, and slot ids interleave across nodes; the queue is therefore written slot
by slot from the Testbed's own slot table, which puts each group on its node whatever the layout.

Also (docs/compatibility.md#profiling-scheduler):

- the slot count is the Testbed's real one;
- when the candidates run out, a job is replicated again;
- a partner is chosen so that later nodes can still get a partner other than their own lead, where
  possible;
- the round's jobs are the idle ones first, then those the scheduler ran longest ago.

**The profiler's slots**: two slots on one node, so both jobs of a pair share it. The profiler names them
in a slot-based Scheduling, which co-locates the pair on any Testbed, whatever its number of nodes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from functools import partial

from esi.wire.rest import ExternalBatchJob, ExternalTestbed
from examples.profiling.matrix import ColocationMatrix

__all__ = ["IDLE_STATE", "node_slots", "plan_groups", "plan_queue", "profiling_slots", "round_jobs"]

IDLE_STATE = "ReadyState"  # held by no Scheduling: a Scheduling naming it can take it at once
_NEVER = datetime.min.replace(tzinfo=UTC)


def node_slots(testbed: ExternalTestbed) -> list[list[int]]:
    """The slot ids of each node (ascending), nodes ordered by their lowest slot id."""
    nodes = [sorted(slot.position for slot in slots) for slots in testbed.slots_by_node.values() if slots]
    return sorted(nodes)


def profiling_slots(testbed: ExternalTestbed) -> tuple[int, int] | None:
    """The two lowest slot ids of the first node with at least two slots; ``None`` if no node has two."""
    for slots in node_slots(testbed):
        if len(slots) >= 2:
            return slots[0], slots[1]
    return None


def round_jobs(jobs: Mapping[str, ExternalBatchJob], count: int, scheduling_prefix: str) -> list[str]:
    """The ``count`` jobs of the next round (all of them if there are fewer).

    Idle jobs come first, so the round does not wait for work held elsewhere; among those, the ones whose
    last run in a Scheduling named ``<scheduling_prefix>-…`` started longest ago (never: first), then names.
    """

    def last_run(job: ExternalBatchJob) -> datetime:
        mine = [r.start for r in job.scheduled_events if r.scheduling.name.startswith(f"{scheduling_prefix}-")]
        return max(mine, default=_NEVER)

    ordered = sorted(jobs.values(), key=lambda job: (job.state != IDLE_STATE, last_run(job), job.name))
    return [job.name for job in ordered[: max(count, 0)]]


def plan_groups(matrix: ColocationMatrix, jobs: Sequence[str], sizes: Sequence[int]) -> list[list[str]]:
    """For nodes with ``sizes`` slots each: the jobs per node, its lead first; empty without jobs.

    Node i's lead is ``jobs[i]`` (cycling when there are fewer jobs than nodes). Slot position p ≥ 1 of
    every node that has one is then filled from a pool holding each job once (more often if the nodes
    outnumber the jobs): node by node, the lead's best partner in the pool — known runtimes shortest
    first, unmeasured ones after, then by name — that still lets every later node get a job other than
    those already on it; a job is put next to a copy of itself only when nothing else is left.
    """
    if not jobs or not sizes:
        return []
    groups = [[jobs[i % len(jobs)]] for i in range(len(sizes))]
    for position in range(1, max(sizes)):
        filling = [i for i, size in enumerate(sizes) if size > position]
        copies = -(-len(filling) // len(jobs))  # ceiling division
        pool = [job for _ in range(copies) for job in jobs]
        for i, job in zip(filling, _assign(matrix, [groups[i] for i in filling], pool), strict=True):
            groups[i].append(job)
    return groups


def plan_queue(matrix: ColocationMatrix, jobs: Sequence[str], testbed: ExternalTestbed) -> list[str]:
    """The queue that puts ``plan_groups`` onto the Testbed's nodes: one entry per slot, in slot id order."""
    nodes = node_slots(testbed)
    groups = plan_groups(matrix, jobs, [len(slots) for slots in nodes])
    if not groups:
        return []
    by_slot = {
        slot: job for slots, group in zip(nodes, groups, strict=True) for slot, job in zip(slots, group, strict=True)
    }
    return [by_slot[slot] for slot in sorted(by_slot)]


def _assign(matrix: ColocationMatrix, groups: Sequence[Sequence[str]], pool: Sequence[str]) -> list[str]:
    """One job from ``pool`` for each group, in order: greedily its lead's best, keeping the rest feasible."""
    chosen: list[str] = []
    left = list(pool)
    for index, group in enumerate(groups):
        ranked = sorted(set(left), key=partial(_preference, matrix, group[0]))
        new_here = [job for job in ranked if job not in group]
        feasible = [job for job in new_here if _distinct_possible(groups[index + 1 :], _without(left, job))]
        # A job beside a copy of itself only when nothing else is left.
        pick = (feasible or new_here or ranked)[0]
        chosen.append(pick)
        left.remove(pick)
    return chosen


def _without(items: Sequence[str], item: str) -> list[str]:
    rest = list(items)
    rest.remove(item)
    return rest


def _preference(matrix: ColocationMatrix, lead: str, job: str) -> tuple[int, float, str]:
    runtime = matrix.runtime(lead, job)
    return (0, float(runtime), job) if runtime is not None else (1, 0.0, job)


def _distinct_possible(groups: Sequence[Sequence[str]], pool: Sequence[str]) -> bool:
    """Whether each group can get its own item of ``pool``, none a job the group already holds.

    A bipartite matching (Kuhn's augmenting paths); Testbeds have few nodes, so this stays cheap.
    """
    owner: list[int | None] = [None] * len(pool)

    def place(group: int, seen: set[int]) -> bool:
        for item, job in enumerate(pool):
            if item in seen or job in groups[group]:
                continue
            seen.add(item)
            holder = owner[item]
            if holder is None or place(holder, seen):
                owner[item] = group
                return True
        return False

    return all(place(group, set()) for group in range(len(groups)))
