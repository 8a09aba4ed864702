"""A Testbed's slot table and ghost pods as one pure function: (spec, status, what is observed now) -> decision.

The Testbed reconciler observes the nodes (labels, allocatable, what other pods request there), the
Testbed's own pods (ghosts and executors, with the slot id each carries) and the reservations Schedulings
have recorded; ``decide_testbed`` returns the next status (the slot table), the ghost pods to create and
delete, and the events to emit.

Slots and ids come from ``esi.decisions.layout``. Ids that work depends on stay put: a slot that an executor is in,
or that a Scheduling reserved, keeps the place the previous status gave it (or, if the status does not
know it, a place on the node its executor runs on). Every other slot is numbered afresh, interleaved, so
ids are 0..n-1 whenever no work pins them. Free slots may therefore be renumbered when nodes join or
leave; their ghosts are then replaced, which is cheap.

Ghosts: every slot that no executor is in has exactly one ghost pod, pinned to the slot's node, whose
requests are the slot size — except where the hand-over to an executor keeps it away
(docs/design.md#ghost-and-executor-hand-over): no reserved slot of a job gets a ghost while the job has an
executor the scheduler has yet to place, nor while the job's application is created (until the job ends).
A slot's ghost is a pod of role ghost on that node carrying that slot id, not
terminating and not finished. The shell names a ghost after the testbed, node and slot id, so a creation is
idempotent; for the same reason no ghost is created while that slot's previous ghost is terminating. The shell
deletes before it creates; a creation that still meets the ghost it replaces fails harmlessly and is decided
again on the next pod event.

Rules (docs/compatibility.md#executors-kept, #capacity and #testbed-states):

* Executor pods are never deleted or changed (docs/design.md#never-delete-running-work). An executor
  outside any slot, two in one slot, or one whose requests differ from the slot size by more than 1% is
  reported as a problem.
* A node that lacks capacity for its slots is reported (by name and shortfall); its slots stay listed so ids
  do not move. The room its other pods leave goes to the slots holding theirs, then to reserved slots, then
  by id; a slot it does not reach says so (``no_room``) and gets no ghost, and the extender binds no executor
  there (a kubelet would refuse either). Finished pods do not count against capacity.
* Finished executors (Succeeded/Failed) no longer hold their slot once their kubelet has let go of them
  (``room_held_until``: when deleted, else shortly after their last container ended): the slot is then Free
  and gets a ghost again (one still reserved for a job whose application is created waits for the job's end).
  Such pods are left for their application's owner to remove; they are not a
  problem.
* A reserved slot without an executor is ``InUse``, not an error, and there is no pause while pods are
  being placed: the decision is the same whenever it runs.

::

    Pending ──every slot has its ghost──▶ Ready ◀──work done──▶ InUse (a slot is reserved or occupied)
    any state ──a problem (capacity, node labels, executors, reservations)──▶ Degraded ──solved──▶ ...
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Collection, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from enum import StrEnum
from typing import Final

from esi.decisions.events import Event
from esi.decisions.layout import NodeLabels, SlotPlace, Taint, layout_slots
from esi.resources.meta import ConditionStatus, PodRole, find_condition, set_conditions
from esi.resources.quantity import Quantity
from esi.resources.testbed import Slot, SlotCounts, SlotState, TestbedSpec, TestbedState, TestbedStatus

__all__ = [
    "FINISHED_PHASES",
    "KUBELET_STOP_SECONDS",
    "SIZE_TOLERANCE",
    "CreateGhost",
    "DeleteGhost",
    "GhostAction",
    "NodeView",
    "PodPhase",
    "PodView",
    "Reservation",
    "Resources",
    "TestbedDecision",
    "TestbedObservation",
    "decide_testbed",
    "matches_slot_size",
    "room_held_until",
]

SIZE_TOLERANCE = Decimal("0.01")
"""How far (relative to the slot size) a pod's request of each resource may be from the slot size."""

# A condition message may hold 32768 characters; problems beyond this many are counted, not listed.
_MESSAGE_BUDGET = 30_000
# Slot ids shown in one sentence.
_SHOWN_IDS = 20


@dataclass(frozen=True)
class Resources:
    cpu: Quantity
    memory: Quantity

    def __str__(self) -> str:
        return f"{self.cpu} cpu and {self.memory} memory"


_NOTHING = Resources(Quantity(0), Quantity(0))


@functools.lru_cache(maxsize=256)  # a reconcile asks it for every ghost, of a few distinct sizes
def matches_slot_size(requests: Resources, size: Resources) -> bool:
    """Whether a pod requesting ``requests`` fits a slot of ``size``: each resource within 1% of the size.

    200m/4000M matches 202m/4002M; 100m or 2000M do not (docs/compatibility.md#size-tolerance).
    """
    within, of = SIZE_TOLERANCE.as_integer_ratio()  # exact, in whole nano-units: a reconcile asks it per ghost
    return all(
        abs(requested.nanos - slot.nanos) * of <= slot.nanos * within
        for requested, slot in ((requests.cpu, size.cpu), (requests.memory, size.memory))
    )


class PodPhase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"

    @property
    def finished(self) -> bool:
        return self in FINISHED_PHASES


# Pods in these phases are done (compares equal to the phase strings pods carry); see ``room_held_until`` for
# when esi's own finished pods stop holding their slot.
FINISHED_PHASES: Final = frozenset({PodPhase.SUCCEEDED, PodPhase.FAILED})

KUBELET_STOP_SECONDS: Final = 10.0
"""How long after a finished pod's last container ended its kubelet may still count it against the node."""

_LONG_AGO: Final = datetime(1970, 1, 1, tzinfo=UTC)


def room_held_until(phase: str | None, terminating: bool, finished_at: datetime | None) -> datetime | None:
    """Until when one of esi's pods holds its room on its node (a time in the past: no more); None: for as long
    as the pod exists.

    The API server shows a pod finished before its kubelet has stopped it, and until then the kubelet counts the
    pod against the node: a pod bound there meanwhile that does not fit beside it is refused (OutOfcpu,
    OutOfmemory). A kubelet forgets a pod deleted from the API before it admits any pod bound after, and a
    finished pod that was being deleted leaves the API only once its kubelet has stopped it. So: a pod that is
    not finished, or finished while being deleted, holds its room until it is gone; a finished pod nobody
    deletes holds it ``KUBELET_STOP_SECONDS`` past the end of its last container (``finished_at``); one that
    never ran a container (refused by the kubelet) holds nothing.
    """
    if phase not in FINISHED_PHASES or terminating:
        return None
    return _LONG_AGO if finished_at is None else finished_at + timedelta(seconds=KUBELET_STOP_SECONDS)


@dataclass(frozen=True)
class NodeView:
    name: str
    labels: Mapping[str, str]
    allocatable: Resources
    # Summed requests of the node's pods that are not finished and are not this testbed's ghosts or executors.
    other_requests: Resources = _NOTHING
    taints: tuple[Taint, ...] = ()


@dataclass(frozen=True)
class PodView:
    """One of the testbed's pods, as the shell read it."""

    name: str
    role: PodRole
    node_name: str | None  # None: not bound yet
    slot: int | None  # the global slot id it carries: the slot a ghost holds, the slot an executor was given
    requests: Resources
    phase: PodPhase
    job: str | None = None  # executors: the BatchJob
    terminating: bool = False
    finished_at: datetime | None = None  # when its last container ended, once it is finished

    @property
    def held_until(self) -> datetime | None:
        """Until when the pod holds its room on its node (``room_held_until``)."""
        return room_held_until(self.phase, self.terminating, self.finished_at)

    def holds_room(self, now: datetime) -> bool:
        """Whether the pod still holds its room on its node at ``now``."""
        until = self.held_until
        return until is None or until > now


@dataclass(frozen=True)
class Reservation:
    """Slots a Scheduling reserved for one of its jobs."""

    scheduling: str
    job: str
    slots: tuple[int, ...]
    started: bool = False  # the job's application is created: its executors may come at any moment


@dataclass(frozen=True)
class TestbedObservation:
    nodes: Sequence[NodeView]  # any nodes; those without the testbed's label are not part of it
    pods: Sequence[PodView]  # the testbed's own pods
    reservations: Sequence[Reservation] = ()
    held_by: str | None = None  # the Scheduling holding the testbed


@dataclass(frozen=True)
class CreateGhost:
    """Create the ghost pod of slot ``slot``, pinned to ``node_name``, requesting ``size``."""

    slot: int
    node_name: str
    position: int
    size: Resources


@dataclass(frozen=True)
class DeleteGhost:
    pod: str
    reason: str


GhostAction = CreateGhost | DeleteGhost


@dataclass(frozen=True)
class TestbedDecision:
    status: TestbedStatus
    actions: tuple[GhostAction, ...] = ()  # deletions first, then creations
    events: tuple[Event, ...] = field(default=())  # for Kubernetes Events
    problems: tuple[str, ...] = ()
    # Seconds until the decision changes with time alone (a finished executor's room comes free); None: never.
    decide_again_in: float | None = None


@dataclass(frozen=True)
class _Problem:
    reason: str  # CamelCase, for the Event
    message: str


def decide_testbed(
    spec: TestbedSpec,
    status: TestbedStatus | None,
    observation: TestbedObservation,
    *,
    generation: int | None,
    now: datetime,
) -> TestbedDecision:
    """The Testbed's next status, the ghost pods to create and delete, and the events to emit."""
    current = status or TestbedStatus()
    table = _decide(spec, current, observation, now)
    decision = _render(spec, current, table, observation.held_by, generation=generation, now=now)
    return replace(decision, decide_again_in=_next_release(observation.pods, now))


def _next_release(pods: Iterable[PodView], now: datetime) -> float | None:
    """Seconds until the first finished executor that still holds its room lets it go; None if none does."""
    times = [until for p in pods if p.role == PodRole.EXECUTOR and (until := p.held_until) is not None and until > now]
    return (min(times) - now).total_seconds() if times else None


@dataclass(frozen=True)
class _SlotTable:
    """What one decision finds and changes, before it is written as a status."""

    nodes: int  # the testbed's nodes
    slots: list[Slot]
    missing: list[int]  # slots that wait for a ghost pod
    problems: list[_Problem]
    actions: tuple[GhostAction, ...]  # deletions first, then creations


def _decide(spec: TestbedSpec, current: TestbedStatus, observation: TestbedObservation, now: datetime) -> _SlotTable:
    """What changes: where the slots are, what is wrong, and which ghost pods go and come."""
    size = Resources(spec.resources_per_slot.cpu, spec.resources_per_slot.memory)
    pods = sorted(observation.pods, key=lambda p: p.name)
    executors = [p for p in pods if p.role == PodRole.EXECUTOR and p.holds_room(now)]
    reserved, problems = _reservations(observation.reservations)

    in_use = set(reserved) | {e.slot for e in executors if e.slot is not None}
    keep = _keep(current.slots, in_use, executors, spec.slots_per_node)
    layout = layout_slots(
        [NodeLabels(n.name, n.labels, n.taints) for n in observation.nodes],
        spec.node_label,
        spec.slots_per_node,
        keep,
        spec.tolerations or (),
    )
    places = {s.id: s for s in layout.slots}
    problems = [
        *(_Problem("NodeLabelInvalid", p) for p in layout.problems),
        *(_Problem("NodeTainted", p) for p in layout.untolerated),
        *problems,
    ]
    short = _capacity_problems(observation.nodes, layout.node_names, spec.slots_per_node, size)
    problems += short.values()
    problems += _unknown_reservations(reserved, places)
    in_slot, executor_problems = _executors_in_slots(executors, places, size)
    problems += executor_problems

    ghosts, deletions, blocked = _ghosts(pods, places, in_slot, size)
    holding = {*ghosts, *blocked, *in_slot}
    no_room = _slots_without_room(
        layout.slots, observation.nodes, short=short.keys(), holding=holding, reserved=reserved.keys(), size=size
    )
    # Jobs with an executor the scheduler has yet to place: the extender may have deleted the ghost of one of
    # the job's reserved slots for it, the binding (which records the slot) still on its way, and a ghost put
    # back meanwhile would overcommit the node (its kubelet refuses one).
    awaited = {e.job for e in executors if e.slot is None and e.node_name is None and not e.terminating}
    slots, missing, creations = _fill(
        layout.slots,
        ghosts=ghosts,
        in_slot=in_slot,
        reserved=reserved,
        no_room=no_room,
        blocked=blocked,
        awaited=awaited,
        size=size,
    )
    return _SlotTable(
        len(layout.node_names),
        slots,
        missing,
        problems,
        (*deletions, *creations),
    )


def _fill(
    places: Sequence[SlotPlace],
    *,
    ghosts: Mapping[int, PodView],
    in_slot: Mapping[int, Sequence[PodView]],
    reserved: Mapping[int, Reservation],
    no_room: Mapping[int, str],
    blocked: Container[int],
    awaited: Container[str | None],
    size: Resources,
) -> tuple[list[Slot], list[int], list[CreateGhost]]:
    """Each slot's row of the table, the slots that wait for a ghost, and the ghosts to create for them: none
    in a slot whose room other pods hold (``no_room``), none while the slot's previous ghost is terminating
    (``blocked``), none in a slot reserved for a job whose application is created (``Reservation.started``) or
    that has an executor waiting for the scheduler (``awaited``)."""
    slots: list[Slot] = []
    missing: list[int] = []
    creations: list[CreateGhost] = []
    for place in places:
        ghost = ghosts.get(place.id)
        given = in_slot.get(place.id, [])
        slot = _slot(place, given, reserved.get(place.id), ghost.name if ghost else None, no_room.get(place.id))
        slots.append(slot)
        if slot.state == SlotState.OCCUPIED or ghost is not None or _being_placed(given):
            continue
        reservation = reserved.get(place.id)
        if reservation is not None and (reservation.started or reservation.job in awaited):
            continue  # kept for its job's executor, not waiting for a ghost
        missing.append(place.id)
        if place.id not in no_room and place.id not in blocked:
            creations.append(CreateGhost(place.id, place.node_name, place.position, size))
    return slots, missing, creations


def _unknown_reservations(reserved: Mapping[int, Reservation], places: Mapping[int, SlotPlace]) -> list[_Problem]:
    return [
        _Problem(
            "ReservationInvalid",
            f"scheduling {r.scheduling} reserved slot {slot} for job {r.job}, which does not exist",
        )
        for slot, r in sorted(reserved.items())
        if slot not in places
    ]


def _render(
    spec: TestbedSpec,
    current: TestbedStatus,
    table: _SlotTable,
    held_by: str | None,
    *,
    generation: int | None,
    now: datetime,
) -> TestbedDecision:
    """The decision as the status to write (slot table, counts, state, conditions) and the Events to tell."""
    slots, problems = table.slots, table.problems
    counts = SlotCounts(
        nodes=table.nodes,
        slots=len(slots),
        free=sum(s.state == SlotState.FREE for s in slots),
        reserved=sum(s.state == SlotState.RESERVED for s in slots),
        occupied=sum(s.state == SlotState.OCCUPIED for s in slots),
    )
    state, message = _state(spec, counts, table.missing, problems, held_by)
    listed, problem_text = _listed(problems)
    updated = current.model_copy(
        update={
            "state": state,
            "counts": counts,
            "slots": slots,
            "scheduling": held_by,
            "message": message,
            "observed_generation": generation,
        }
    )
    updated = _conditions(updated, table.missing, problems, problem_text, generation=generation, now=now)
    events = _events(current, state, message, listed)
    return TestbedDecision(updated, table.actions, events, tuple(p.message for p in problems))


def _events(current: TestbedStatus, state: TestbedState, message: str, listed: Sequence[_Problem]) -> tuple[Event, ...]:
    """A change of state, and each listed problem not reported already (a Warning: someone should fix it)."""
    events: list[Event] = []
    if state != current.state:
        events.append(Event(state.value, message))
    previous = find_condition(current.conditions, "Healthy")
    previous_text = previous.message if previous is not None and previous.status == ConditionStatus.FALSE else ""
    events += [Event(p.reason, p.message, warning=True) for p in listed if p.message not in previous_text]
    return tuple(events)


def _reservations(reservations: Iterable[Reservation]) -> tuple[dict[int, Reservation], list[_Problem]]:
    """Reservation by slot id; a slot reserved twice goes to the first (by scheduling, job) and is reported."""
    by_slot: dict[int, Reservation] = {}
    problems = []
    for reservation in sorted(reservations, key=lambda r: (r.scheduling, r.job, r.slots)):
        for slot in sorted(set(reservation.slots)):
            first = by_slot.setdefault(slot, reservation)
            if (first.scheduling, first.job) != (reservation.scheduling, reservation.job):
                problems.append(
                    _Problem(
                        "ReservationInvalid",
                        f"slot {slot} is reserved for job {first.job} of scheduling {first.scheduling} "
                        f"and for job {reservation.job} of scheduling {reservation.scheduling}",
                    )
                )
    return by_slot, problems


def _keep(
    previous: Sequence[Slot], in_use: set[int], executors: Sequence[PodView], slots_per_node: int
) -> dict[tuple[str, int], int]:
    """Places whose ids work depends on: where the previous status had them, else where their executor runs.

    Taken from what is in use *now* (not from the states the previous status shows), so that deciding
    again on the status this decision writes gives the same ids. An executor whose id the previous status
    does not know (the status was lost, or is older than the executor) keeps its id on a position of its
    node that the status does not number either.
    """
    keep = {(s.node_name, s.position): s.id for s in previous if s.id in in_use}
    numbered = {(s.node_name, s.position) for s in previous}
    kept = set(keep.values())
    for executor in executors:  # sorted by name
        node = executor.node_name
        if executor.slot is None or node is None or executor.slot in kept:
            continue
        position = next((p for p in range(slots_per_node) if (node, p) not in numbered), None)
        if position is not None:
            keep[(node, position)] = executor.slot
            numbered.add((node, position))
            kept.add(executor.slot)
    return keep


def _capacity_problems(
    nodes: Iterable[NodeView], members: Sequence[str], slots_per_node: int, size: Resources
) -> dict[str, _Problem]:
    """The testbed's nodes that cannot hold all their slots next to everything else running there."""
    problems = {}
    by_name = {n.name: n for n in nodes}
    for name in members:
        node = by_name[name]
        shortfalls = []
        for resource, slot, allocatable, others in (
            ("cpu", size.cpu, node.allocatable.cpu, node.other_requests.cpu),
            ("memory", size.memory, node.allocatable.memory, node.other_requests.memory),
        ):
            needed = slot * slots_per_node
            free = allocatable - others
            if needed > free:
                shortfalls.append(f"{needed - free} {resource}")
        if shortfalls:
            slots = f"{slots_per_node} slot{'s' if slots_per_node != 1 else ''}"
            problems[name] = _Problem(
                "InsufficientCapacity", f"node {name} lacks {' and '.join(shortfalls)} for its {slots}"
            )
    return problems


def _slots_without_room(
    places: Sequence[SlotPlace],
    nodes: Iterable[NodeView],
    *,
    short: Collection[str],
    holding: Container[int],
    reserved: Container[int],
    size: Resources,
) -> dict[int, str]:
    """The slots whose room other pods hold, each with why. On a node ``short`` of capacity, the slots that fit
    beside its other pods go first to the slots ``holding`` their room already (a ghost, an executor, or one
    being placed), then to reserved slots, then by id; the slots left over have no room: a ghost or executor
    put there would be refused by the kubelet."""
    if not short:
        return {}
    by_node: dict[str, list[int]] = {}
    for place in places:
        if place.node_name in short:
            by_node.setdefault(place.node_name, []).append(place.id)
    without: dict[int, str] = {}
    for node in nodes:
        ids = by_node.get(node.name)
        if not ids:
            continue
        fitting = min(
            _times_within(node.allocatable.cpu - node.other_requests.cpu, size.cpu),
            _times_within(node.allocatable.memory - node.other_requests.memory, size.memory),
        )
        unheld = sorted((i for i in ids if i not in holding), key=lambda i: (i not in reserved, i))
        left = max(fitting - (len(ids) - len(unheld)), 0)
        room = f"room for {fitting} of its {len(ids)} slots"
        if node.other_requests == _NOTHING:
            reason = f"node {node.name} has {node.allocatable}: {room}"
        else:
            reason = f"other pods on node {node.name} request {node.other_requests} of its {node.allocatable}: {room}"
        without.update(dict.fromkeys(unheld[left:], reason))
    return without


def _times_within(room: Quantity, size: Quantity) -> int:
    """How many times ``size`` fits into ``room`` (none into no room; any number of a size of nothing)."""
    if not room.is_positive:
        return 0
    return room.nanos // size.nanos if size.is_positive else sys.maxsize


def _executors_in_slots(
    executors: Sequence[PodView], places: Mapping[int, SlotPlace], size: Resources
) -> tuple[dict[int, list[PodView]], list[_Problem]]:
    """The running or pending executors in each slot, and what is wrong with executors (never acted on)."""
    in_slot: dict[int, list[PodView]] = {}
    problems = []
    for executor in executors:
        pod = f"executor pod {executor.name}"
        if executor.slot is None:
            if executor.node_name is not None:
                problems.append(
                    _Problem("ExecutorOutsideSlot", f"{pod} runs on node {executor.node_name} without a slot")
                )
            continue  # unbound and without a slot: still waiting for the scheduler
        place = places.get(executor.slot)
        if place is None:
            problems.append(
                _Problem("ExecutorOutsideSlot", f"{pod} was given slot {executor.slot}, which does not exist")
            )
            continue
        if executor.node_name is not None and executor.node_name != place.node_name:
            problems.append(
                _Problem(
                    "ExecutorOutsideSlot",
                    f"{pod} runs on node {executor.node_name}, but its slot {place.id} is on node {place.node_name}",
                )
            )
            continue
        in_slot.setdefault(place.id, []).append(executor)
        if not matches_slot_size(executor.requests, size):
            problems.append(
                _Problem(
                    "ExecutorSizeMismatch",
                    f"{pod} requests {executor.requests}, but slot {place.id} is {size}",
                )
            )
    for slot_id, pods in sorted(in_slot.items()):
        if len(pods) > 1:
            problems.append(
                _Problem(
                    "SlotShared", f"slot {slot_id} holds {len(pods)} executor pods: {', '.join(p.name for p in pods)}"
                )
            )
    return in_slot, problems


def _ghosts(
    pods: Sequence[PodView],
    places: Mapping[int, SlotPlace],
    in_slot: Mapping[int, Sequence[PodView]],
    size: Resources,
) -> tuple[dict[int, PodView], list[DeleteGhost], set[int]]:
    """Each slot's ghost, the ghosts to delete, and the slots whose previous ghost is still terminating."""
    candidates: dict[int, list[PodView]] = {}
    deletions: list[DeleteGhost] = []
    blocked: set[int] = set()
    for ghost in pods:
        if ghost.role != PodRole.GHOST:
            continue
        if ghost.terminating:
            if ghost.slot is not None:
                blocked.add(ghost.slot)
            continue
        reason = _unfit_ghost(ghost, places, size)
        if reason is not None:
            deletions.append(DeleteGhost(ghost.name, reason))
            continue
        assert ghost.slot is not None  # _unfit_ghost refuses ghosts without a slot
        candidates.setdefault(ghost.slot, []).append(ghost)

    ghosts: dict[int, PodView] = {}
    for slot_id, found in sorted(candidates.items()):
        keeper, *extra = (
            found if len(found) == 1 else sorted(found, key=lambda g: (g.phase != PodPhase.RUNNING, g.name))
        )
        deletions += [DeleteGhost(g.name, f"slot {slot_id} already has ghost pod {keeper.name}") for g in extra]
        node = places[slot_id].node_name
        bound = [e for e in in_slot.get(slot_id, ()) if e.node_name == node]
        if bound:
            # Normally the scheduler preempted it; an executor that fit beside its ghost must not keep both.
            deletions.append(DeleteGhost(keeper.name, f"executor pod {bound[0].name} occupies slot {slot_id}"))
        else:
            ghosts[slot_id] = keeper
    return ghosts, sorted(deletions, key=lambda d: d.pod), blocked


def _unfit_ghost(ghost: PodView, places: Mapping[int, SlotPlace], size: Resources) -> str | None:
    """Why a (not terminating) ghost cannot hold a slot, or None if it can."""
    if ghost.phase.finished:
        return f"it ended ({ghost.phase.value})"
    if ghost.slot is None:
        return "it carries no valid slot id"
    place = places.get(ghost.slot)
    if place is None:
        return f"the testbed has no slot {ghost.slot}"
    if ghost.node_name != place.node_name:
        return f"slot {ghost.slot} is on node {place.node_name}, not on node {ghost.node_name}"
    if not matches_slot_size(ghost.requests, size):
        return f"it requests {ghost.requests}, but slot {ghost.slot} is {size}"
    return None


def _being_placed(executors: Sequence[PodView]) -> bool:
    """An executor was given the slot and is not bound yet: with the slot's ghost gone, the ghost made way for that
    executor, and a new one (pinned, so no scheduler stops it) would take the room back."""
    return any(e.node_name is None and not e.terminating for e in executors)


def _slot(
    place: SlotPlace,
    executors: Sequence[PodView],
    reservation: Reservation | None,
    ghost: str | None,
    no_room: str | None,
) -> Slot:
    job: str | None
    pod: str | None
    bound = [e for e in executors if e.node_name is not None]
    if bound:
        state, job, pod = SlotState.OCCUPIED, bound[0].job, bound[0].name
    elif executors:
        # An executor given the slot but not placed yet still needs the extender to name the slot's ghost:
        # the slot stays Reserved, with its ghost, until the executor is bound there.
        state, job, pod = SlotState.RESERVED, executors[0].job, ghost
    elif reservation is not None:
        state, job, pod = SlotState.RESERVED, reservation.job, ghost
    else:
        state, job, pod = SlotState.FREE, None, ghost
    return Slot(
        id=place.id,
        node_name=place.node_name,
        node_id=place.node_id,
        position=place.position,
        state=state,
        job=job,
        scheduling=reservation.scheduling if reservation is not None else None,
        pod=pod,
        no_room=no_room,
    )


def _state(
    spec: TestbedSpec, counts: SlotCounts, missing: Sequence[int], problems: Sequence[_Problem], holder: str | None
) -> tuple[TestbedState, str]:
    held = f"; held by scheduling {holder}" if holder is not None else ""
    if problems:
        more = f" (and {len(problems) - 1} more, see condition Healthy)" if len(problems) > 1 else ""
        return TestbedState.DEGRADED, f"{problems[0].message}{more}{held}"
    if counts.reserved or counts.occupied:
        return (
            TestbedState.IN_USE,
            f"{counts.occupied} of {counts.slots} slots occupied, {counts.reserved} reserved{held}",
        )
    if not counts.slots:
        return TestbedState.READY, f"no node has the label {spec.node_label}, so the testbed has no slots{held}"
    if not missing:
        nodes = f"{counts.nodes} node{'s' if counts.nodes != 1 else ''}"
        return TestbedState.READY, f"all {counts.slots} slots on {nodes} are free and held by ghost pods{held}"
    return TestbedState.PENDING, f"waiting for ghost pods in {len(missing)} of {counts.slots} slots{held}"


def _listed(problems: Sequence[_Problem]) -> tuple[list[_Problem], str]:
    """The problems that fit into a condition message, and that message."""
    listed: list[_Problem] = []
    length = 0
    for problem in problems:
        length += len(problem.message) + 2
        if length > _MESSAGE_BUDGET:
            break
        listed.append(problem)
    text = "; ".join(p.message for p in listed)
    if len(listed) < len(problems):
        text += f"; and {len(problems) - len(listed)} more"
    return listed, text


def _conditions(
    status: TestbedStatus,
    missing: Sequence[int],
    problems: Sequence[_Problem],
    problem_text: str,
    *,
    generation: int | None,
    now: datetime,
) -> TestbedStatus:
    conditions = list(status.conditions)
    shown = ", ".join(map(str, missing[:_SHOWN_IDS])) + (", ..." if len(missing) > _SHOWN_IDS else "")
    reasons = sorted({p.reason for p in problems})
    settings = (
        (
            "SlotsReady",
            not missing,
            "GhostsInPlace" if not missing else "GhostsMissing",
            f"slot{'s' if len(missing) > 1 else ''} {shown} wait{'s' if len(missing) == 1 else ''} for a ghost pod"
            if missing
            else "",
        ),
        (
            "Healthy",
            not problems,
            "NoProblems" if not problems else (reasons[0] if len(reasons) == 1 else "SeveralProblems"),
            problem_text,
        ),
    )
    conditions = set_conditions(conditions, settings, now=now, observed_generation=generation)
    return status.model_copy(update={"conditions": conditions})
