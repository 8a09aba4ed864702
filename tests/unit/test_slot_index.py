"""The extender's answers: one slot per executor, always the same, never shared; only that slot's node;
only that slot's ghost as victim; pods esi does not manage untouched."""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from api.extender.slot_index import BindPlan, IndexedSlot, SlotIndex
from api.extender.wire import ExtenderPreemptionArgs
from esi.resources.testbed import SlotState
from tests.builders import NODES, executor_pod, filter_args


def plain(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"}}


def preempt_args(pod: dict[str, Any], victims: dict[str, list[str]]) -> ExtenderPreemptionArgs:
    meta = {n: {"Pods": [{"UID": u} for u in uids], "NumPDBViolations": 0} for n, uids in victims.items()}
    return ExtenderPreemptionArgs.model_validate({"Pod": pod, "NodeNameToMetaVictims": meta})


def index() -> SlotIndex:
    """Testbed tb: slots 0-5 interleaved on n0/n1/n2; job j has 1 (n1) and 4 (n1), job k has 2 (n2)."""
    slots = SlotIndex()
    table = [
        IndexedSlot(0, "n0", SlotState.FREE, ghost_uid="g0"),
        IndexedSlot(1, "n1", SlotState.RESERVED, job="j", ghost_uid="g1"),
        IndexedSlot(2, "n2", SlotState.RESERVED, job="k", ghost_uid="g2"),
        IndexedSlot(3, "n0", SlotState.FREE, ghost_uid="g3"),
        IndexedSlot(4, "n1", SlotState.RESERVED, job="j", ghost_uid="g4"),
        IndexedSlot(5, "n2", SlotState.FREE, ghost_uid="g5"),
    ]
    slots.replace_testbed("ns", "tb", table)
    return slots


def test_pods_esi_does_not_manage_pass_through() -> None:
    slots = index()

    assert slots.filter(filter_args(plain("web"))).node_names == NODES
    answer = slots.preempt(preempt_args(plain("web"), {"n0": ["x"], "n1": ["y", "z"]}))
    assert {n: [p.uid for p in v.pods] for n, v in answer.node_name_to_meta_victims.items()} == {
        "n0": ["x"],
        "n1": ["y", "z"],
    }


def test_an_executor_gets_only_its_slots_node_and_the_same_answer_every_time() -> None:
    slots = index()

    first = slots.filter(filter_args(executor_pod("e1")))
    again = slots.filter(filter_args(executor_pod("e1")))

    assert first.node_names == again.node_names == ["n1"]
    assert first.failed_nodes == {}, "a node is left: the scheduler reads no reasons for the others"
    assert slots.slot_of("uid-e1") == ("ns", "tb", 1)


def test_executors_of_one_job_never_share_a_slot_and_the_third_is_refused() -> None:
    slots = index()
    for name in ("e1", "e2"):
        slots.filter(filter_args(executor_pod(name)))

    third = slots.filter(filter_args(executor_pod("e3")))

    assert [slots.slot_of(f"uid-e{i}") for i in (1, 2, 3)] == [("ns", "tb", 1), ("ns", "tb", 4), None]
    assert third.node_names is None, "a transient error, retried after backoff, not an unschedulable pod"
    assert "no slot of testbed tb is reserved for job j" in third.error


def test_a_slot_is_given_again_once_its_pod_is_gone() -> None:
    slots = index()
    slots.filter(filter_args(executor_pod("e1")))
    slots.filter(filter_args(executor_pod("e2")))

    slots.forget_pod("uid-e1")

    assert slots.filter(filter_args(executor_pod("e3"))).node_names == ["n1"]
    assert slots.slot_of("uid-e3") == ("ns", "tb", 1)


def test_the_slots_node_not_offered_means_no_node_but_preemption_may_help() -> None:
    result = index().filter(filter_args(executor_pod("e1"), ["n0", "n2"]))

    assert result.node_names == []
    assert result.failed_nodes == {n: "slot 1 of testbed tb is on node n1" for n in ("n0", "n2")}
    assert result.failed_and_unresolvable_nodes == {}


def test_preemption_evicts_exactly_the_slots_ghost() -> None:
    slots = index()

    # The scheduler would evict the ghost of slot 4 on n1, and something on n0; the extender insists on slot 1's.
    answer = slots.preempt(preempt_args(executor_pod("e1"), {"n0": ["g0"], "n1": ["g4"]}))

    assert {n: [p.uid for p in v.pods] for n, v in answer.node_name_to_meta_victims.items()} == {"n1": ["g1"]}
    assert slots.filter(filter_args(executor_pod("e1"))).node_names == ["n1"], "filter and preempt agree"


def test_preemption_without_the_slots_node_among_the_candidates_evicts_nothing() -> None:
    answer = index().preempt(preempt_args(executor_pod("e1"), {"n0": ["g0"]}))

    assert answer.node_name_to_meta_victims == {}


def test_an_unknown_testbed_is_refused_with_the_reason() -> None:
    result = index().filter(filter_args(executor_pod("e1", testbed="other")))

    assert result.node_names is None
    assert result.error == "testbed other is not known (yet)"


def test_free_slots_and_other_jobs_slots_are_never_given() -> None:
    slots = index()
    assert slots.filter(filter_args(executor_pod("k1", job="k"))).node_names == ["n2"]
    for refused in (executor_pod("k2", job="k"), executor_pod("x1", job="x")):
        answer = slots.filter(filter_args(refused))
        assert answer.node_names is None
        assert answer.error


@given(st.lists(st.tuples(st.sampled_from(["e1", "e2", "e3", "e4"]), st.booleans()), max_size=30))
def test_no_two_pods_ever_hold_one_slot(calls: list[tuple[str, bool]]) -> None:
    slots = index()
    for name, forget in calls:
        if forget:
            slots.forget_pod(f"uid-{name}")
        else:
            slots.filter(filter_args(executor_pod(name)))
        held = [slots.slot_of(f"uid-e{i}") for i in range(1, 5)]
        given_out = [h for h in held if h is not None]
        assert len(given_out) == len(set(given_out))
        assert {h[2] for h in given_out} <= {1, 4}


def test_concurrent_requests_never_share_a_slot() -> None:
    slots = SlotIndex()
    slots.replace_testbed("ns", "tb", [IndexedSlot(i, f"n{i}", SlotState.RESERVED, job="j") for i in range(50)])
    barrier = threading.Barrier(8)

    def ask(worker: int) -> None:
        barrier.wait()
        for i in range(10):
            slots.filter(filter_args(executor_pod(f"w{worker}-{i}"), [f"n{n}" for n in range(50)]))

    threads = [threading.Thread(target=ask, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    held = [slots.slot_of(f"uid-w{w}-{i}") for w in range(8) for i in range(10)]
    given_out = [h for h in held if h is not None]
    assert len(given_out) == 50
    assert len(set(given_out)) == 50


def test_a_new_binding_is_handed_out_once_for_recording() -> None:
    slots = index()
    slots.filter(filter_args(executor_pod("e1")))
    slots.filter(filter_args(executor_pod("e1")))

    assert slots.take_unrecorded("uid-e1") == ("ns", "e1", 1)
    assert slots.take_unrecorded("uid-e1") is None
    assert slots.take_unrecorded("uid-unknown") is None


def test_recorded_bindings_are_restored_and_respected() -> None:
    # An extender that restarted learns e1's slot from its label before e1 asks again.
    slots = index()
    assert slots.restore("uid-e1", "ns", "tb", 4)

    assert slots.filter(filter_args(executor_pod("e1"))).node_names == ["n1"]
    assert slots.slot_of("uid-e1") == ("ns", "tb", 4)
    assert slots.take_unrecorded("uid-e1") is None, "a restored binding is already recorded"
    assert slots.filter(filter_args(executor_pod("e2"))).node_names == ["n1"]
    assert slots.slot_of("uid-e2") == ("ns", "tb", 1)
    assert not slots.restore("uid-e3", "ns", "tb", 4), "a slot another pod holds is not taken over"


def test_a_binding_plan_evicts_exactly_the_slots_ghost_and_only_on_the_slots_node() -> None:
    slots = SlotIndex()
    slots.replace_testbed(
        "ns", "tb", [IndexedSlot(1, "n1", SlotState.RESERVED, job="j", ghost_uid="g1", ghost_name="tb-ghost-1")]
    )
    slots.filter(filter_args(executor_pod("e1")))
    slots.pods_read([])

    assert slots.plan_binding("uid-e1", "n1") == BindPlan(1, ("tb-ghost-1", "g1"))
    assert slots.plan_binding("uid-e1", "n0").error == "slot 1 of testbed tb is on node n1, not n0"
    assert slots.plan_binding("uid-web", "n0") == BindPlan(), "a pod given no slot is bound as it is"
    slots.replace_testbed("ns", "tb", [IndexedSlot(1, "n1", SlotState.RESERVED, job="j")])
    assert slots.plan_binding("uid-e1", "n1") == BindPlan(1, ("tb-ghost-1", None)), "not seen: evicted by its name"
    slots.remove_testbed("ns", "tb")
    assert "not known any more" in slots.plan_binding("uid-e1", "n1").error


def test_an_extender_that_restarted_after_the_filter_binds_a_waiting_executor_by_the_same_rule() -> None:
    slots = index()
    assert "not read the cluster's pods yet" in slots.plan_binding("uid-e1", "n1").error, "nothing bound blind"

    slots.executor_waiting("uid-e1", "ns", "tb", "j", "e1")
    slots.executor_waiting("uid-k1", "ns", "tb", "k", "k1")
    slots.executor_waiting("uid-k2", "ns", "tb", "k", "k2")
    slots.pods_read(["uid-e1", "uid-k1", "uid-k2"])

    assert slots.plan_binding("uid-e1", "n1").slot == 1, "the lowest reserved slot, as filter gives"
    assert slots.slot_of("uid-e1") == ("ns", "tb", 1)
    assert slots.take_unrecorded("uid-e1") is None, "the Binding records it"
    assert slots.plan_binding("uid-k1", "n0").error == "slot 2 of testbed tb is on node n2, not n0"
    assert "no slot of testbed tb is reserved for job k" in slots.plan_binding("uid-k2", "n2").error
    assert slots.plan_binding("uid-web", "n0") == BindPlan(), "a pod esi does not manage is bound as it is"


def test_a_relist_or_a_deletion_ends_the_wait() -> None:
    slots = index()
    slots.executor_waiting("uid-e1", "ns", "tb", "j", "e1")
    slots.executor_waiting("uid-e2", "ns", "tb", "j", "e2")
    slots.pods_read(["uid-e2"])
    slots.forget_pod("uid-e2")

    assert slots.plan_binding("uid-e1", "n1") == BindPlan(), "not listed as waiting: not an executor of ours now"
    assert slots.plan_binding("uid-e2", "n1") == BindPlan()


def test_a_new_binding_to_a_slot_without_a_ghost_is_handed_out_at_filter_for_recording() -> None:
    slots = index()
    slots.filter(filter_args(executor_pod("e1")))
    assert slots.take_unrecorded("uid-e1", ghostless=True) is None, "a ghost to evict: a preemption records it"
    slots.update_slots("ns", "tb", [IndexedSlot(4, "n1", SlotState.RESERVED, job="j")])  # slot 4's ghost is gone
    slots.filter(filter_args(executor_pod("e2")))

    assert slots.take_unrecorded("uid-e2", ghostless=True) == ("ns", "e2", 4)
    assert slots.take_unrecorded("uid-e1") == ("ns", "e1", 1), "still handed out once, to the preemption"


CROWDED = "other pods on node n1 request 1 cpu and 0 memory of its 2 cpu and 8Gi memory: room for 1 of its 2 slots"


def test_a_slot_whose_room_other_pods_hold_is_given_to_no_executor_and_says_why() -> None:
    slots = index()
    table = slots.slots("ns", "tb")
    assert table is not None
    slots.replace_testbed("ns", "tb", [replace(s, no_room=CROWDED) if s.id == 1 else s for s in table])

    first = slots.filter(filter_args(executor_pod("e1")))
    second = slots.filter(filter_args(executor_pod("e2")))

    assert (first.node_names, slots.slot_of("uid-e1")) == (["n1"], ("ns", "tb", 4)), "the job's slot with room"
    assert second.node_names is None, "an error: the scheduler tries again after its backoff"
    assert second.error == f"slot 1 of testbed tb has no room: {CROWDED}; its executor waits until it has " + (
        "(the node's kubelet would refuse it now)"
    )
    assert slots.slot_of("uid-e2") is None
    assert slots.preempt(preempt_args(executor_pod("e2"), {"n1": ["g1"]})).node_name_to_meta_victims == {}


def test_an_executor_given_a_slot_before_its_room_was_taken_is_not_bound_there_until_it_is_back() -> None:
    slots = index()
    slots.pods_read([])
    assert slots.filter(filter_args(executor_pod("e1"))).node_names == ["n1"]
    table = slots.slots("ns", "tb")
    assert table is not None

    slots.replace_testbed("ns", "tb", [replace(s, no_room=CROWDED) if s.id == 1 else s for s in table])

    assert "slot 1 of testbed tb has no room" in slots.plan_binding("uid-e1", "n1").error
    assert "slot 1 of testbed tb has no room" in slots.filter(filter_args(executor_pod("e1"))).error
    assert slots.slot_of("uid-e1") == ("ns", "tb", 1), "it keeps its slot: the same answer once the room is back"

    slots.replace_testbed("ns", "tb", table)

    assert slots.filter(filter_args(executor_pod("e1"))).node_names == ["n1"]
    assert slots.plan_binding("uid-e1", "n1").slot == 1


# A table of 8 slots on n0-n3: each slot reserved for job j or k, used by one, or free; with room or without.
TABLES = st.lists(
    st.tuples(
        st.sampled_from([SlotState.FREE, SlotState.RESERVED, SlotState.OCCUPIED]), st.sampled_from("jk"), st.booleans()
    ),
    min_size=8,
    max_size=8,
).map(
    lambda rows: [
        IndexedSlot(
            i, f"n{i % 4}", state, job=None if state == SlotState.FREE else job, no_room=CROWDED if crowded else None
        )
        for i, (state, job, crowded) in enumerate(rows)
    ]
)
STEPS = st.one_of(
    st.tuples(st.just("filter"), st.sampled_from("jjk")),
    st.tuples(st.just("forget"), st.integers(0, 5)),
    st.tuples(st.just("finish"), st.integers(0, 5), st.integers(-2, 4)),  # released so many seconds from now
    st.tuples(st.just("restore"), st.integers(0, 2), st.integers(0, 7), st.none() | st.integers(-2, 4)),
    st.tuples(st.just("wait"), st.integers(1, 3)),
)


class Replay:
    """The index told a sequence of steps beside the rule it must follow, written out slot by slot: a new
    executor gets its job's lowest slot with room that no pod holds, or whose finished pod has let go of it."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)
        self.index = SlotIndex(clock=lambda: self.now)
        self.table: list[IndexedSlot] = []
        self.holders: dict[int, str] = {}  # slot id -> pod uid
        self.released: dict[str, datetime] = {}  # pod uid -> when its finished pod lets go
        self.pods = 0

    def replace(self, table: list[IndexedSlot]) -> None:
        self.table = table
        self.index.replace_testbed("ns", "tb", table)

    def filter(self, job: str) -> None:
        uid, expected = f"uid-e{self.pods}", self._slot_for(job)
        answer = self.index.filter(filter_args(executor_pod(f"e{self.pods}", job=job), ["n0", "n1", "n2", "n3"]))
        self.pods += 1
        assert self.index.slot_of(uid) == (None if expected is None else ("ns", "tb", expected))
        assert answer.node_names == (None if expected is None else [f"n{expected % 4}"])
        if expected is not None:
            self._hold(expected, uid)

    def forget(self, pod: int) -> None:
        self.index.forget_pod(f"uid-e{pod}")
        self._forget(f"uid-e{pod}")

    def finish(self, pod: int, seconds: int) -> None:
        uid, when = f"uid-e{pod}", self.now + timedelta(seconds=seconds)
        self.index.release_at(uid, when)
        if when <= self.now:
            self._forget(uid)
        elif uid in self.holders.values():
            self.released[uid] = when

    def restore(self, pod: int, slot_id: int, seconds: int | None) -> None:
        uid, when = f"uid-r{pod}", None if seconds is None else self.now + timedelta(seconds=seconds)
        finished = when is not None and when <= self.now
        taken = self.index.restore(uid, "ns", "tb", slot_id, when)
        assert taken == (self.holders.get(slot_id, uid) == uid or finished)
        if finished:
            self._forget(uid)
        elif taken and self.holders.get(slot_id) != uid:
            self._hold(slot_id, uid)
        if taken and not finished and when is not None:
            self.released[uid] = when

    def wait(self, seconds: int) -> None:
        self.now += timedelta(seconds=seconds)

    def _slot_for(self, job: str) -> int | None:
        for slot in self.table:
            if slot.job == job and slot.state != SlotState.FREE and not slot.no_room:
                holder = self.holders.get(slot.id)
                if holder is None or self.released.get(holder, self.now + timedelta(days=1)) <= self.now:
                    return slot.id
        return None

    def _hold(self, slot_id: int, uid: str) -> None:
        self._forget(uid)
        self.holders[slot_id] = uid

    def _forget(self, uid: str) -> None:
        self.holders = {s: h for s, h in self.holders.items() if h != uid}
        self.released.pop(uid, None)


@settings(max_examples=300)
@given(st.lists(st.tuples(TABLES, st.lists(STEPS, max_size=12)), min_size=1, max_size=4))
def test_a_new_executor_gets_its_jobs_lowest_slot_with_room_that_no_unfinished_pod_holds(
    rounds: list[tuple[list[IndexedSlot], list[tuple[Any, ...]]]],
) -> None:
    replay = Replay()
    for table, steps in rounds:  # each round: the Testbed's table anew, then what the index is told
        replay.replace(table)
        for kind, *values in steps:
            getattr(replay, kind)(*values)


def test_a_slot_a_finished_pod_lets_go_of_is_given_once_it_has() -> None:
    replay = Replay()
    table = [IndexedSlot(0, "n0", SlotState.RESERVED, job="j"), IndexedSlot(1, "n1", SlotState.RESERVED, job="j")]
    replay.replace(table)
    replay.filter("j")  # e0 in slot 0
    replay.restore(0, 1, None)  # r0 in slot 1, read back after a restart
    replay.replace(table)
    replay.restore(0, 1, 2)  # r0 has finished: it lets go of slot 1 in 2 s
    replay.finish(0, 3)  # e0 lets go of slot 0 in 3 s
    replay.filter("j")  # e1: none yet
    replay.wait(2)
    replay.filter("j")  # e2: slot 1
    replay.wait(1)
    replay.filter("j")  # e3: slot 0

    assert replay.holders == {0: "uid-e3", 1: "uid-e2"}
