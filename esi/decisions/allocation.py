"""What starts next in a Scheduling: which of its not-yet-started jobs get which slots right now.

A Scheduling states its decision in one of two ways, and each has an allocation function here:

- a **queue** of job names, a name repeated k times meaning that job runs k executors in k slots
  (`queue_allocations`). Queue entries map in order onto the free slots in ascending id order, so the
  scheduling algorithm controls co-location through positions: with the testbed's interleaved slot ids,
  consecutive entries land on different nodes. A job starts only when every one of its entries has a slot
  (gang start), and a job that cannot start keeps its positions, so later jobs neither overtake it into
  those slots nor shift onto other nodes than the algorithm intended.
- an explicit **slot list** per job (`slot_allocations`): a job starts only with exactly the slots it lists;
  in `SlotMode.STRICT` no job overtakes an earlier one that is still waiting, in `SlotMode.RELAXED` any job
  whose slots are free may start.

`queue_problems` and `slot_problems` check a decision against the testbed before anything runs and
describe, in sentences meant for a Scheduling's condition message, why a job could never start. When
they report nothing, every job of the Scheduling is eventually started by the allocation functions, as
long as slots keep returning once jobs finish.

Everything here works on plain values (job names, global slot ids) and is deterministic: results never
depend on the iteration order of the sets passed in.

Runnable means placeable: a queue ``[A, B, A]`` on two free slots starts B at once and A once B is done
(docs/compatibility.md#queue-allocation). A job always gets all of its slots or none
(docs/compatibility.md#slot-lists).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence, Set
from dataclasses import dataclass

from esi.resources.scheduling import SlotMode

__all__ = [
    "Allocation",
    "queue_allocations",
    "queue_problems",
    "slot_allocations",
    "slot_problems",
]

# A queue shown in a problem sentence is cut here: enough to see who blocks whom without flooding a condition.
_SHOWN_QUEUE_ENTRIES = 12


@dataclass(frozen=True, slots=True)
class Allocation:
    """One job to start now, with the global ids of the slots its executors go into (ascending)."""

    job: str
    slots: tuple[int, ...]


def queue_allocations(queue: Sequence[str], started: Set[str], free: Set[int]) -> list[Allocation]:
    """The jobs of a queue that start now, in order of their first entry, each with one slot per entry.

    `started` holds the jobs of this Scheduling that were already started (they run at most once, so their
    entries no longer count); `free` the slots this Scheduling may use right now.
    """
    pending_positions: dict[str, list[int]] = {}
    pending = (job for job in queue if job not in started)
    for position, job in enumerate(pending):
        pending_positions.setdefault(job, []).append(position)
    free_slots = sorted(free)
    # Every job keeps its own positions whether it starts or not: handing a waiting job's positions to a
    # later job would move that later job onto slots (and nodes) the algorithm did not choose for it.
    return [
        Allocation(job, tuple(free_slots[position] for position in positions))
        for job, positions in pending_positions.items()
        if positions[-1] < len(free_slots)
    ]


def slot_allocations(
    jobs: Sequence[tuple[str, Sequence[int]]], mode: SlotMode, started: Set[str], free: Set[int]
) -> list[Allocation]:
    """The jobs of a slot list that start now, in list order, each on exactly the slots it lists.

    A job starts only when all of its slots are free and none of them went to an earlier job in this same
    call. A job listing no slot, or one slot twice, never starts (`slot_problems` reports it). When a name
    is listed more than once only its first entry counts, since a job runs at most once per Scheduling.
    """
    available = set(free)
    considered: set[str] = set()
    allocations: list[Allocation] = []
    for job, slot_ids in jobs:
        if job in started or job in considered:
            continue
        considered.add(job)
        wanted = set(slot_ids)
        # Equal lengths rule out a slot listed twice: two executors can never share one slot.
        if wanted and len(wanted) == len(slot_ids) and wanted <= available:
            available -= wanted
            allocations.append(Allocation(job, tuple(sorted(wanted))))
        elif mode == SlotMode.STRICT:
            break
    return allocations


def queue_problems(queue: Sequence[str], slot_ids: Set[int]) -> list[str]:
    """Why jobs of this queue could never start on a testbed with these slots; empty when all of them can."""
    capacity = len(slot_ids)
    problems: list[str] = []
    blank = [position for position, job in enumerate(queue) if not job]
    if blank:
        problems.append(f"{_entries_at('queue', blank)} an empty job name")
    demands = Counter(queue)
    too_big = [job for job, demand in demands.items() if demand > capacity]
    problems.extend(f"job {job!r} needs {_count(demands[job], 'slot')} but testbed has {capacity}" for job in too_big)
    stuck = _never_started(queue, capacity)
    blocked = [job for job in dict.fromkeys(stuck) if job not in too_big]
    if blocked:
        # Jobs small enough for the testbed can still wait forever on each other: in [A, B, A, B] on two
        # slots both A and B hold a position the other needs, and since positions are kept, neither moves.
        problems.append(
            f"{_jobs(blocked)} can never start: once every job that can start has run, the queue is "
            f"{_show_queue(stuck)}, and even with {_all_slots(capacity)} free "
            f"{'it has' if len(blocked) == 1 else 'each of them has'} an entry at position {capacity} or "
            "later, which maps to no slot"
        )
    return problems


def slot_problems(jobs: Sequence[tuple[str, Sequence[int]]], slot_ids: Set[int]) -> list[str]:
    """Why jobs of this slot list could never start, or the list is ambiguous; empty when it is sound."""
    problems: list[str] = []
    blank = [position for position, (job, _) in enumerate(jobs) if not job]
    if blank:
        problems.append(f"{_entries_at('slot list', blank)} an empty job name")
    entries = Counter(job for job, _ in jobs)
    for job, listed in jobs:
        if entries[job] > 1:
            problems.append(f"job {job!r} appears {entries[job]} times in the slot list, but may appear only once")
        if not listed:
            problems.append(f"job {job!r} lists no slots")
        if len(listed) > len(slot_ids):
            problems.append(f"job {job!r} needs {_count(len(listed), 'slot')} but testbed has {len(slot_ids)}")
        repeated = sorted(slot for slot, times in Counter(listed).items() if times > 1)
        if repeated:
            problems.append(f"job {job!r} lists {_slots(repeated)} more than once")
        unknown = sorted(set(listed) - slot_ids)
        if unknown:
            have = f"it has {_slots(sorted(slot_ids))}" if slot_ids else "it has none"
            problems.append(f"job {job!r} lists {_slots(unknown)}, which testbed does not have ({have})")
    # A name listed twice with the same flaw would otherwise say the same thing twice.
    return list(dict.fromkeys(problems))


def _never_started(queue: Sequence[str], capacity: int) -> list[str]:
    """The queue entries left over once every job that can ever start on `capacity` slots has started.

    Placing the same queue with every slot free, round after round, finds them for any order in which
    jobs really finish: a job fits when its last remaining entry sits below the number of free slots,
    fewer free slots only make fewer jobs fit, and starting a job only moves the entries after it forward.
    So the jobs that can ever start are exactly those this loop starts.
    """
    all_free = frozenset(range(capacity))
    started: set[str] = set()
    while allocations := queue_allocations(queue, started, all_free):
        started.update(allocation.job for allocation in allocations)
    return [job for job in queue if job not in started]


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _and(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _jobs(names: Sequence[str]) -> str:
    return ("job " if len(names) == 1 else "jobs ") + _and([repr(name) for name in names])


def _entries_at(listing: str, positions: Sequence[int]) -> str:
    if len(positions) == 1:
        return f"the {listing} entry at position {positions[0]} has"
    return f"the {listing} entries at positions {_and([str(p) for p in positions])} have"


def _slots(ids: Sequence[int]) -> str:
    """Ascending slot ids with runs folded, as in "slots 0-3, 6 and 8-9"."""
    runs: list[list[int]] = []
    for slot in ids:
        if runs and slot == runs[-1][-1] + 1:
            runs[-1].append(slot)
        else:
            runs.append([slot])
    if len(runs) == 1 and len(runs[0]) == 1:
        return f"slot {ids[0]}"
    return "slots " + _and([_run(run) for run in runs])


def _run(run: Sequence[int]) -> str:
    return str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}"


def _all_slots(capacity: int) -> str:
    return "the testbed's only slot" if capacity == 1 else f"all {capacity} slots of the testbed"


def _show_queue(entries: Iterable[str]) -> str:
    shown = list(entries)
    if len(shown) <= _SHOWN_QUEUE_ENTRIES:
        return f"[{', '.join(shown)}]"
    return f"[{', '.join(shown[:_SHOWN_QUEUE_ENTRIES])}, ... ({len(shown)} entries)]"
