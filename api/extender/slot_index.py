"""The extender's memory: every Testbed's slots and which executor pod each slot is given to.

The kube-scheduler extender must answer fast and the same way every time, so it answers from this index
(fed from watches of Testbed statuses and pods, never an API call per request), under one lock:

* ``filter``: an executor pod (labelled with its Testbed and BatchJob) gets a slot reserved for its job —
  the same slot on every call, never one another pod holds — and only that slot's node is allowed. Pods esi
  does not manage pass through with every offered node.
* ``preempt``: the victim on the slot's node is exactly that slot's ghost pod, nothing else.

A slot is given again only once the pod it was given to has let go of its room (``room_held_until``): a
finished pod that is not gone yet may still be counted by its kubelet, which would refuse the next one.

A binding lives in memory, but must not only live there: the Testbed reconciler must know which slot a
bound executor is in, and a restarted extender must give the same answers. So every binding is recorded on
its pod (its slot annotation) — by the bind verb, on the Binding itself (``plan_binding`` names the slot);
for a preemption, before the slot's ghost is evicted (``take_unrecorded`` hands a new binding out once to
record) — and ``restore`` reads such records back. A binding the extender does not remember (it restarted
between the scheduler's filter and bind calls) is made at bind time by the same rule, for an executor the
extender has seen waiting (``executor_waiting``); until the extender has read the cluster's pods once, it
binds no pod it holds no slot for (``pods_read``).

A slot whose room other pods hold on its node (the Testbed says so: ``no_room``) is given to no executor, and
one given it before is not bound there: the kubelet would refuse the executor, and its application would
ask for another, into the same room, until it gave up. The executor waits, told why.

An executor whose job has no free reserved slot left (or whose Testbed is unknown) gets an error from
``filter``, so the scheduler retries it after its backoff (the reservation may still be on its way), and no
victim from ``preempt``, so the scheduler evicts nothing for it in vain.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from api.extender.wire import (
    ExtenderArgs,
    ExtenderFilterResult,
    ExtenderPreemptionArgs,
    ExtenderPreemptionResult,
    MetaPod,
    MetaVictims,
    SchedulingPod,
)
from esi.objects.ghosts import ghost_name
from esi.objects.names import JOB_LABEL, TESTBED_LABEL, is_executor
from esi.resources.testbed import Slot, SlotState

__all__ = ["BindPlan", "GhostPod", "IndexedSlot", "SlotIndex", "indexed_slots", "key_of", "pod_key"]

TestbedKey = tuple[str, str]  # (namespace, name)


@dataclass(frozen=True)
class IndexedSlot:
    id: int
    node_name: str
    state: SlotState
    job: str | None = None  # the job the slot is reserved for or used by
    ghost_uid: str | None = None  # the ghost pod holding it, if any
    ghost_name: str | None = None
    no_room: str | None = None  # why other pods hold its room on its node (the Testbed's word), if they do


@dataclass(frozen=True)
class BindPlan:
    """How to bind a pod the scheduler placed: delete ``ghost`` (name, UID if known) of ``slot`` first, if any;
    or not at all, for ``error``."""

    slot: int | None = None
    ghost: tuple[str, str | None] | None = None
    error: str = ""


@dataclass(frozen=True)
class _Executor:
    testbed: TestbedKey
    job: str
    uid: str
    name: str


class SlotIndex:
    """Slots per Testbed and executor→slot bindings. Every method takes the lock; all are cheap."""

    def __init__(self, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._slots: dict[TestbedKey, dict[int, IndexedSlot]] = {}
        # job -> the slot ids of its own (reserved or used for it) that giving a slot must look at, ascending:
        # those nobody holds, those held by a finished pod (letting go) and those without room. A slot an
        # unfinished pod holds is left out, so a job of thousands of slots is not walked for each new executor.
        self._open: dict[TestbedKey, dict[str, list[int]]] = {}
        self._slot_of: dict[str, tuple[TestbedKey, int]] = {}  # pod uid -> (testbed, slot id)
        self._pod_in: dict[tuple[TestbedKey, int], str] = {}  # (testbed, slot id) -> pod uid
        self._unrecorded: dict[str, tuple[str, str, int]] = {}  # pod uid -> (namespace, pod name, slot id)
        self._released_at: dict[str, datetime] = {}  # pod uid -> when the finished pod lets go of its slot
        self._waiting: dict[str, _Executor] = {}  # pod uid -> an executor seen unbound and without a slot
        self._pods_read = False

    def replace_testbed(self, namespace: str, name: str, slots: Iterable[IndexedSlot]) -> None:
        """The Testbed's current slot table (from its status and its ghost pods)."""
        key = (namespace, name)
        table = {s.id: s for s in slots}
        with self._lock:
            self._slots[key] = table
            opened: dict[str, list[int]] = {}
            for slot_id in sorted(table):
                job = _job_of(table[slot_id])
                if job is not None and self._is_open(key, table[slot_id]):
                    opened.setdefault(job, []).append(slot_id)
            self._open[key] = opened

    def update_slots(self, namespace: str, name: str, slots: Iterable[IndexedSlot]) -> None:
        """Some of the Testbed's slots anew: the same ids, states and jobs, only their ghosts changed (so which
        slots a job has stays as it was); nothing if the Testbed is not known."""
        with self._lock:
            table = self._slots.get((namespace, name))
            if table is not None:
                for slot in slots:
                    if slot.id in table:
                        table[slot.id] = slot
                        self._reopen((namespace, name), slot.id)

    def remove_testbed(self, namespace: str, name: str) -> None:
        with self._lock:
            self._slots.pop((namespace, name), None)
            self._open.pop((namespace, name), None)

    def forget_pod(self, uid: str) -> None:
        """The pod is gone (or finished): its slot can be given again."""
        with self._lock:
            self._waiting.pop(uid, None)
            self._unbind(uid)

    def executor_waiting(self, uid: str, namespace: str, testbed: str, job: str, name: str) -> None:
        """Executor pod ``uid`` of ``job`` waits for the scheduler: unbound, no slot recorded on it."""
        with self._lock:
            self._waiting[uid] = _Executor((namespace, testbed), job, uid, name)

    def pods_read(self, waiting: Iterable[str]) -> None:
        """The cluster's pods were read (listed): of the executors, exactly ``waiting`` (UIDs) wait unbound."""
        still = set(waiting)
        with self._lock:
            self._waiting = {uid: e for uid, e in self._waiting.items() if uid in still}
            self._pods_read = True

    def release_at(self, uid: str, when: datetime) -> None:
        """The pod is finished: its slot can be given again from ``when`` on (at once if that is past)."""
        with self._lock:
            if when <= self._clock():
                self._unbind(uid)
            elif uid in self._slot_of:
                self._released_at[uid] = when
                self._reopen(*self._slot_of[uid])

    def take_unrecorded(self, uid: str, *, ghostless: bool = False) -> tuple[str, str, int] | None:
        """The pod's binding if it is new (handed out once), as (namespace, pod name, slot id), to record;
        ``ghostless``: only if its slot has no ghost known here (nothing to evict, so no preemption comes, and a
        scheduler that binds by itself would bind the pod unrecorded)."""
        with self._lock:
            binding = self._unrecorded.get(uid)
            if binding is None:
                return None
            if ghostless:
                bound = self._slot_of.get(uid)
                slot = self._slots.get(bound[0], {}).get(bound[1]) if bound is not None else None
                if slot is not None and slot.ghost_uid:
                    return None
            return self._unrecorded.pop(uid)

    def restore(self, uid: str, namespace: str, testbed: str, slot: int, released_at: datetime | None = None) -> bool:
        """Take back a binding recorded on a pod (after a restart), which a finished pod holds until
        ``released_at``; False if that slot is another pod's."""
        key = ((namespace, testbed), slot)
        with self._lock:
            self._waiting.pop(uid, None)
            if released_at is not None and released_at <= self._clock():
                self._unbind(uid)
                return True
            holder = self._pod_in.get(key)
            if holder is None:
                self._unbind(uid)
                self._slot_of[uid] = key
                self._pod_in[key] = uid
            elif holder != uid:
                return False
            if released_at is not None:
                self._released_at[uid] = released_at
            self._reopen(*key)
        return True

    def slots(self, namespace: str, name: str) -> tuple[IndexedSlot, ...] | None:
        """The Testbed's slots by id, or None while the index does not know the Testbed."""
        with self._lock:
            table = self._slots.get((namespace, name))
            return None if table is None else tuple(table[i] for i in sorted(table))

    def bound_pods(self) -> frozenset[str]:
        """UIDs of the pods that were given a slot."""
        with self._lock:
            return frozenset(self._slot_of)

    def slot_of(self, uid: str) -> tuple[str, str, int] | None:
        """(namespace, testbed, slot id) the pod was given, if any."""
        with self._lock:
            bound = self._slot_of.get(uid)
        return None if bound is None else (bound[0][0], bound[0][1], bound[1])

    def filter(self, args: ExtenderArgs) -> ExtenderFilterResult:
        offered = args.candidate_nodes()
        executor = _executor(args.pod)
        if executor is None:
            return ExtenderFilterResult(node_names=offered)
        with self._lock:
            slot, reason = self._assign(executor)
        if slot is None:
            # Transient, not "unschedulable": the reservation may still be on its way here (the application's
            # pods can be faster than the Testbed status). An error has the scheduler retry the pod after its
            # backoff; an unschedulable pod would wait for some unrelated cluster event, or minutes.
            return ExtenderFilterResult(error=reason)
        if slot.node_name in offered:
            # Only the slot's node: the scheduler reads why the others failed only when no node is left, and a
            # reason for each is ~70 bytes of every answer to encode and decode (140 KB at 2,000 nodes).
            return ExtenderFilterResult(node_names=[slot.node_name])
        elsewhere = f"slot {slot.id} of testbed {executor.testbed[1]} is on node {slot.node_name}"
        return ExtenderFilterResult(node_names=[], failed_nodes=dict.fromkeys(offered, elsewhere))

    def preempt(self, args: ExtenderPreemptionArgs) -> ExtenderPreemptionResult:
        executor = _executor(args.pod)
        if executor is None:  # not ours: the scheduler's own choice stands
            return ExtenderPreemptionResult(node_name_to_meta_victims=_meta_victims(args))
        with self._lock:
            slot, _ = self._assign(executor)
        if slot is None or slot.node_name not in args.candidate_nodes():
            return ExtenderPreemptionResult()
        victims = [MetaPod(uid=slot.ghost_uid)] if slot.ghost_uid else []
        return ExtenderPreemptionResult(node_name_to_meta_victims={slot.node_name: MetaVictims(pods=victims)})

    def plan_binding(self, uid: str, node: str) -> BindPlan:
        """What binding pod ``uid`` to ``node`` takes: an executor only to its slot's node, in place of the
        slot's ghost (given now if the extender does not remember it: see the module); any other pod as it is."""
        with self._lock:
            bound = self._slot_of.get(uid)
            if bound is None and uid in self._waiting:
                given, reason = self._assign(self._waiting[uid])
                if given is None:
                    return BindPlan(error=reason)
                bound = self._slot_of[uid]
            elif bound is None:
                not_read = "the extender has not read the cluster's pods yet, so it binds no pod it holds no slot for"
                return BindPlan() if self._pods_read else BindPlan(error=not_read)
            self._unrecorded.pop(uid, None)  # the Binding records it
            testbed, slot_id = bound
            slot = self._slots.get(testbed, {}).get(slot_id)
        return _binding_into(testbed, slot_id, slot, node)

    def _assign(self, executor: _Executor) -> tuple[IndexedSlot | None, str]:
        """The executor's slot: the one it was given before, else the lowest reserved one nobody holds."""
        slots = self._slots.get(executor.testbed)
        if slots is None:
            return None, f"testbed {executor.testbed[1]} is not known (yet)"
        bound = self._slot_of.get(executor.uid)
        if bound is not None and bound[1] in slots:
            given = slots[bound[1]]
            return (None, _without_room(executor.testbed, given)) if given.no_room else (given, "")
        self._unbind(executor.uid)
        now, letting_go, crowded = self._clock(), [], []
        # Changes while walked only right before the return: the slot given leaves it.
        for slot_id in self._open[executor.testbed].get(executor.job, ()):
            if slots[slot_id].no_room:
                crowded.append(slots[slot_id])
                continue
            holder = self._pod_in.get((executor.testbed, slot_id))
            if holder is not None:
                release = self._released_at.get(holder)
                if release is None:
                    continue
                if release > now:
                    letting_go.append(slot_id)
                    continue
                self._unbind(holder)
            self._slot_of[executor.uid] = (executor.testbed, slot_id)
            self._pod_in[(executor.testbed, slot_id)] = executor.uid
            self._unrecorded[executor.uid] = (executor.testbed[0], executor.name, slot_id)
            self._reopen(executor.testbed, slot_id)
            return slots[slot_id], ""
        if crowded and not letting_go:
            return None, _without_room(executor.testbed, crowded[0])
        reason = f"no slot of testbed {executor.testbed[1]} is reserved for job {executor.job} and still unused"
        if letting_go:
            reason += f" (slots {letting_go}: their finished pods may still be stopping on their nodes)"
        return None, reason

    def _unbind(self, uid: str) -> None:
        self._unrecorded.pop(uid, None)
        self._released_at.pop(uid, None)
        bound = self._slot_of.pop(uid, None)
        if bound is not None:
            self._pod_in.pop(bound, None)
            self._reopen(*bound)

    def _is_open(self, testbed: TestbedKey, slot: IndexedSlot) -> bool:
        """Whether giving a slot of the slot's job must look at ``slot`` (see ``_open``)."""
        holder = self._pod_in.get((testbed, slot.id))
        return bool(slot.no_room) or holder is None or holder in self._released_at

    def _reopen(self, testbed: TestbedKey, slot_id: int) -> None:
        """Put slot ``slot_id`` of ``testbed`` into its job's open slots or take it out, as it is now."""
        slot = self._slots.get(testbed, {}).get(slot_id)
        job = None if slot is None else _job_of(slot)
        if slot is None or job is None:
            return
        opened = self._open[testbed].setdefault(job, [])
        at = bisect_left(opened, slot_id)
        listed = at < len(opened) and opened[at] == slot_id
        is_open = self._is_open(testbed, slot)
        if is_open and not listed:
            opened.insert(at, slot_id)
        elif listed and not is_open:
            del opened[at]


@dataclass(frozen=True)
class GhostPod:
    """A ghost pod as the extender sees it: its UID and the slot and node it says it holds."""

    uid: str
    slot: int | None
    node_name: str | None


def indexed_slots(slots: Iterable[Slot], ghosts: Mapping[str, GhostPod]) -> list[IndexedSlot]:
    """The index's slots of one Testbed: its published slot table joined with its ghost pods (by name).

    A slot's ghost is the ghost pod the slot names or, when the table does not name one yet (a ghost just
    put back, the Testbed's status not caught up), the ghost pod labelled with that slot on that node: the
    extender must be able to name the victim as soon as the ghost exists, because a scheduler told "no
    victim" leaves the executor waiting for minutes. An occupied slot has no ghost to evict.
    """
    by_slot = {(g.slot, g.node_name): name for name, g in ghosts.items() if g.slot is not None}
    indexed = []
    for slot in slots:
        name = slot.pod if slot.pod in ghosts else None
        if name is None and slot.state != SlotState.OCCUPIED:
            name = by_slot.get((slot.id, slot.node_name))
        uid = ghosts[name].uid if name is not None else None
        indexed.append(
            IndexedSlot(
                slot.id,
                slot.node_name,
                slot.state,
                job=slot.job,
                ghost_uid=uid,
                ghost_name=name,
                no_room=slot.no_room,
            )
        )
    return indexed


def _binding_into(testbed: TestbedKey, slot_id: int, slot: IndexedSlot | None, node: str) -> BindPlan:
    """Binding an executor given slot ``slot_id`` (``slot``: as the index knows it now) to ``node``."""
    if slot is None:
        return BindPlan(slot_id, error=f"slot {slot_id} of testbed {testbed[1]} is not known any more")
    if slot.node_name != node:
        return BindPlan(
            slot_id, error=f"slot {slot_id} of testbed {testbed[1]} is on node {slot.node_name}, not {node}"
        )
    if slot.no_room:
        return BindPlan(slot_id, error=_without_room(testbed, slot))
    if slot.ghost_name and slot.ghost_uid:
        return BindPlan(slot_id, (slot.ghost_name, slot.ghost_uid))
    # No ghost seen here, but the Testbed may have made one a moment ago (a slot let go of by a finished
    # executor gets one at once if no executor of its job waits): the slot's ghost goes by its name.
    return BindPlan(slot_id, (ghost_name(testbed[1], slot_id), None))


def _job_of(slot: IndexedSlot) -> str | None:
    """The job among whose slots ``slot`` is counted: the one it is reserved for or used by."""
    return slot.job if slot.state != SlotState.FREE else None


def _without_room(testbed: TestbedKey, slot: IndexedSlot) -> str:
    return (
        f"slot {slot.id} of testbed {testbed[1]} has no room: {slot.no_room}; its executor waits until it has "
        "(the node's kubelet would refuse it now)"
    )


def pod_key(pod: SchedulingPod) -> str:
    """How the index knows a pod (``key_of``)."""
    return key_of(pod.metadata.uid, pod.metadata.namespace, pod.metadata.name)


def key_of(uid: str, namespace: str, name: str) -> str:
    """How the index knows a pod: its UID (namespace/name for the rare request without one)."""
    return uid or f"{namespace}/{name}"


def _executor(pod: SchedulingPod) -> _Executor | None:
    labels = pod.metadata.labels
    testbed, job = labels.get(TESTBED_LABEL), labels.get(JOB_LABEL)
    if not is_executor(labels) or not testbed or not job:
        return None
    return _Executor((pod.metadata.namespace, testbed), job, pod_key(pod), pod.metadata.name)


def _meta_victims(args: ExtenderPreemptionArgs) -> dict[str, MetaVictims]:
    if args.node_name_to_meta_victims is not None:
        return dict(args.node_name_to_meta_victims)
    return {
        node: MetaVictims(pods=[MetaPod(uid=p.metadata.uid) for p in v.pods], num_pdb_violations=v.num_pdb_violations)
        for node, v in (args.node_name_to_victims or {}).items()
    }
