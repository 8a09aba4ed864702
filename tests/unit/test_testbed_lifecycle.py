"""The Testbed's slot table and ghost pods, decided from spec, status and observation alone.

The original's Testbed scenarios 3, 4, 17 and 18 (docs/compatibility.md#scenarios) are re-expressed here,
with its known defects checked as fixed (docs/compatibility.md#executors-kept, #capacity, #node-labels,
#testbed-states). A small world applies the decided actions (created ghosts
appear, deleted ones vanish) and decides again, as the reconciler would on the next pod event.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from esi.decisions.events import Event
from esi.decisions.layout import Taint
from esi.decisions.testbed_lifecycle import (
    KUBELET_STOP_SECONDS,
    CreateGhost,
    DeleteGhost,
    NodeView,
    PodPhase,
    PodView,
    Reservation,
    Resources,
    TestbedDecision,
    TestbedObservation,
    decide_testbed,
    matches_slot_size,
)
from esi.resources.meta import ConditionStatus, PodRole, find_condition
from esi.resources.quantity import Quantity
from esi.resources.testbed import SlotState, TestbedSpec, TestbedState, TestbedStatus, Toleration

T0 = datetime(2026, 1, 1, tzinfo=UTC)
LABEL = "esi.test/slots"
SIZE = Resources(Quantity("500m"), Quantity("1Gi"))
# The original's fixture: four nodes of 2000m CPU and 20Gi memory.
FIXTURE = ("node-1", "node-2", "node-3", "node-4")


def res(cpu: str, memory: str) -> Resources:
    return Resources(Quantity(cpu), Quantity(memory))


def tb_spec(per_node: int = 2, cpu: str = "500m", memory: str = "1Gi") -> TestbedSpec:
    return TestbedSpec.model_validate(
        {"nodeLabel": LABEL, "slotsPerNode": per_node, "resourcesPerSlot": {"cpu": cpu, "memory": memory}}
    )


def node(name: str, node_id: str | None, allocatable: Resources | None = None, others: str = "0/0") -> NodeView:
    other_cpu, other_memory = others.split("/")
    return NodeView(
        name,
        {} if node_id is None else {LABEL: node_id},
        allocatable or res("2", "20Gi"),
        res(other_cpu, other_memory),
    )


def labelled(*names: str) -> list[NodeView]:
    """The fixture's nodes; those named here carry the label, numbered in the order given."""
    ids = {name: str(i) for i, name in enumerate(names)}
    return [node(n, ids.get(n)) for n in FIXTURE]


def ghost(
    name: str, node_name: str | None, slot: int | None, *, phase: PodPhase = PodPhase.RUNNING, **changes: object
) -> PodView:
    pod = PodView(name, PodRole.GHOST, node_name, slot, SIZE, phase)
    return replace(pod, **changes)  # type: ignore[arg-type]


def executor(
    name: str, node_name: str | None, slot: int | None, *, phase: PodPhase = PodPhase.RUNNING, **changes: object
) -> PodView:
    pod = PodView(name, PodRole.EXECUTOR, node_name, slot, SIZE, phase, job="job-a")
    return replace(pod, **changes)  # type: ignore[arg-type]


def decide(
    nodes: Sequence[NodeView],
    pods: Sequence[PodView] = (),
    *,
    status: TestbedStatus | None = None,
    spec: TestbedSpec | None = None,
    reservations: Sequence[Reservation] = (),
    held_by: str | None = None,
) -> TestbedDecision:
    observation = TestbedObservation(nodes, pods, reservations, held_by)
    return decide_testbed(spec or tb_spec(), status, observation, generation=1, now=T0)


def apply(pods: Iterable[PodView], decision: TestbedDecision) -> list[PodView]:
    """The pods once the actions are done: deleted ghosts gone, created ghosts running on their node."""
    deleted = {a.pod for a in decision.actions if isinstance(a, DeleteGhost)}
    kept = [p for p in pods if p.name not in deleted]
    created = [
        PodView(f"ghost-{a.node_name}-{a.slot}", PodRole.GHOST, a.node_name, a.slot, a.size, PodPhase.RUNNING)
        for a in decision.actions
        if isinstance(a, CreateGhost)
    ]
    return kept + created


@dataclass
class World:
    """A testbed that the reconciler decides for, round after round, until nothing is left to do."""

    nodes: list[NodeView]
    spec: TestbedSpec = field(default_factory=tb_spec)
    pods: list[PodView] = field(default_factory=list)
    reservations: list[Reservation] = field(default_factory=list)
    status: TestbedStatus | None = None
    decisions: list[TestbedDecision] = field(default_factory=list)

    def decide(self) -> TestbedDecision:
        observation = TestbedObservation(self.nodes, self.pods, self.reservations)
        now = T0 + timedelta(seconds=len(self.decisions))
        decision = decide_testbed(self.spec, self.status, observation, generation=1, now=now)
        self.decisions.append(decision)
        self.status = decision.status
        return decision

    def settle(self) -> TestbedStatus:
        for _ in range(5):
            decision = self.decide()
            if not decision.actions:
                return decision.status
            self.pods = apply(self.pods, decision)
        raise AssertionError(f"no fixed point after 5 rounds: {self.decisions[-1].actions}")

    def ghosts(self) -> list[tuple[str | None, int | None]]:
        return sorted((p.node_name, p.slot) for p in self.pods if p.role == PodRole.GHOST)

    def executors(self) -> list[str]:
        return sorted(p.name for p in self.pods if p.role == PodRole.EXECUTOR)


def table(status: TestbedStatus) -> list[tuple[int, str, int, str, str | None]]:
    return [(s.id, s.node_name, s.position, s.state.value, s.pod) for s in status.slots]


def deleted(decision: TestbedDecision) -> list[str]:
    return [a.pod for a in decision.actions if isinstance(a, DeleteGhost)]


def created(decision: TestbedDecision) -> list[tuple[int, str, int]]:
    return [(a.slot, a.node_name, a.position) for a in decision.actions if isinstance(a, CreateGhost)]


# --- the original's Testbed scenarios 3 and 4 (docs/compatibility.md#scenarios) -------------------------


def test_two_labelled_nodes_with_two_slots_each_get_four_interleaved_ghosts() -> None:
    world = World(labelled("node-1", "node-2"))

    first = world.decide()

    assert first.status.state == TestbedState.PENDING
    assert created(first) == [(0, "node-1", 0), (1, "node-2", 0), (2, "node-1", 1), (3, "node-2", 1)]
    assert all(a.size == SIZE for a in first.actions if isinstance(a, CreateGhost))

    world.pods = apply(world.pods, first)
    second = world.decide()

    assert second.actions == (), "one round of creations, then nothing left to do"
    status = second.status
    assert status.state == TestbedState.READY
    assert status.counts.model_dump() == {"nodes": 2, "slots": 4, "free": 4, "reserved": 0, "occupied": 0}
    assert table(status) == [
        (0, "node-1", 0, "Free", "ghost-node-1-0"),
        (1, "node-2", 0, "Free", "ghost-node-2-1"),
        (2, "node-1", 1, "Free", "ghost-node-1-2"),
        (3, "node-2", 1, "Free", "ghost-node-2-3"),
    ]


def test_an_executor_in_slot_0_of_node_1_replaces_its_ghost() -> None:
    world = World(labelled("node-1", "node-2"))
    world.settle()
    # The executor fit beside the ghost, so nobody preempted it: the testbed removes the ghost itself.
    world.pods.append(executor("exec-0", "node-1", 0))

    decision = world.decide()

    assert deleted(decision) == ["ghost-node-1-0"]
    assert created(decision) == []
    status = world.settle()
    assert world.ghosts() == [("node-1", 2), ("node-2", 1), ("node-2", 3)]
    assert world.executors() == ["exec-0"]
    assert status.state == TestbedState.IN_USE
    assert status.slots[0].state == SlotState.OCCUPIED
    assert (status.slots[0].pod, status.slots[0].job) == ("exec-0", "job-a")


def test_scaling_with_node_labels_keeps_the_ids_of_occupied_slots() -> None:
    world = World(labelled())
    counts, states = [], []

    for names in (
        (),
        ("node-1",),
        ("node-1", "node-2"),
        ("node-1", "node-2", "node-3", "node-4"),
    ):
        world.nodes = labelled(*names)
        status = world.settle()
        counts.append(status.counts.slots)
        states.append(status.state)

    # Slot 6 is node-3's second slot; the extender puts an executor there.
    assert (status.slots[6].node_name, status.slots[6].position) == ("node-3", 1)
    world.pods.append(executor("exec-6", "node-3", 6))
    world.settle()
    # Labels removed from node-1 and node-2: their slots go, and node-3's executor keeps its id 6.
    world.nodes = [node("node-1", None), node("node-2", None), node("node-3", "2"), node("node-4", "3")]
    status = world.settle()
    counts.append(status.counts.slots)
    states.append(status.state)

    assert counts == [0, 2, 4, 8, 4]
    assert states == [TestbedState.READY] * 4 + [TestbedState.IN_USE]
    assert table(status) == [
        (0, "node-3", 0, "Free", "ghost-node-3-0"),
        (1, "node-4", 0, "Free", "ghost-node-4-1"),
        (2, "node-4", 1, "Free", "ghost-node-4-2"),
        (6, "node-3", 1, "Occupied", "exec-6"),
    ]
    assert world.ghosts() == [("node-3", 0), ("node-4", 1), ("node-4", 2)]
    assert world.executors() == ["exec-6"]


def test_no_labelled_node_is_a_ready_testbed_without_slots() -> None:
    decision = decide(labelled())

    assert decision.status.state == TestbedState.READY
    assert decision.status.slots == []
    assert decision.actions == ()
    assert "no node has the label" in (decision.status.message or "")


# --- pod diffing (scenario 17, docs/compatibility.md#scenarios) -----------------------------------------

NODES = labelled("node-1", "node-2")
SETTLED = (
    ghost("g0", "node-1", 0),
    ghost("g1", "node-2", 1),
    ghost("g2", "node-1", 2),
    ghost("g3", "node-2", 3),
)
SETTLED_STATUS = decide(NODES, SETTLED).status


@pytest.mark.parametrize(
    ("pods", "expected_deleted", "expected_created"),
    [
        pytest.param(SETTLED, [], [], id="identical-sets-no-actions"),
        pytest.param(SETTLED[1:], [], [(0, "node-1", 0)], id="missing-ghost-is-created"),
        pytest.param((*SETTLED, ghost("g9", "node-1", 99)), ["g9"], [], id="ghost-of-unknown-slot-deleted"),
        pytest.param((*SETTLED, ghost("gx", "node-1", None)), ["gx"], [], id="ghost-without-slot-id-deleted"),
        pytest.param((*SETTLED, ghost("g1b", "node-2", 1)), ["g1b"], [], id="extra-ghost-deleted"),
        pytest.param(
            (*SETTLED[:3], ghost("g3", "node-1", 3)),
            ["g3"],
            [(3, "node-2", 1)],
            id="ghost-on-the-wrong-node-replaced",
        ),
        pytest.param(
            (*SETTLED[:3], ghost("g3", "node-2", 3, requests=res("1", "1Gi"))),
            ["g3"],
            [(3, "node-2", 1)],
            id="ghost-of-an-old-slot-size-replaced",
        ),
        pytest.param(
            (*SETTLED[:3], ghost("g3", "node-2", 3, phase=PodPhase.FAILED)),
            ["g3"],
            [(3, "node-2", 1)],
            id="failed-ghost-replaced",
        ),
        pytest.param(
            (*SETTLED, executor("e0", "node-1", 0)), ["g0"], [], id="executor-sharing-a-slot-with-its-ghost-wins"
        ),
        pytest.param(
            (*SETTLED, executor("e0", None, 0, phase=PodPhase.PENDING)),
            [],
            [],
            id="ghost-of-a-slot-given-to-an-unbound-executor-is-left-to-preemption",
        ),
        pytest.param(
            (*SETTLED[1:], executor("e0", None, 0, phase=PodPhase.PENDING)),
            [],
            [],
            id="no-new-ghost-where-the-scheduler-evicted-one-for-an-unbound-executor",
        ),
        pytest.param(
            (*SETTLED[1:], executor("e0", None, 0, phase=PodPhase.PENDING, terminating=True)),
            [],
            [(0, "node-1", 0)],
            id="ghost-back-when-the-unbound-executor-is-deleted",
        ),
        pytest.param(
            (ghost("g0", "node-1", 0), ghost("g0b", "node-1", 0, phase=PodPhase.PENDING), *SETTLED[1:]),
            ["g0b"],
            [],
            id="of-two-ghosts-the-running-one-stays",
        ),
    ],
)
def test_pod_diffing(
    pods: Sequence[PodView], expected_deleted: list[str], expected_created: list[tuple[int, str, int]]
) -> None:
    decision = decide(NODES, pods)

    assert deleted(decision) == expected_deleted
    assert created(decision) == expected_created
    again = decide(NODES, apply(pods, decision), status=decision.status)
    assert again.actions == ()


def test_a_terminating_ghost_is_not_duplicated() -> None:
    pods = [*SETTLED[1:], ghost("g0", "node-1", 0, terminating=True)]

    decision = decide(NODES, pods)

    assert decision.actions == ()
    assert decision.status.state == TestbedState.PENDING
    slots_ready = find_condition(decision.status.conditions, "SlotsReady")
    assert slots_ready is not None
    assert slots_ready.status == ConditionStatus.FALSE
    assert slots_ready.message == "slot 0 waits for a ghost pod"
    gone = decide(NODES, SETTLED[1:], status=decision.status)
    assert created(gone) == [(0, "node-1", 0)]


def test_a_slot_whose_ghost_was_evicted_for_its_executor_waits_for_the_executor() -> None:
    # The scheduler evicted g0 for e0 and has not bound e0 yet: a new ghost would take the room back.
    pods = [*SETTLED[1:], executor("e0", None, 0, phase=PodPhase.PENDING)]

    decision = decide(NODES, pods, status=SETTLED_STATUS)

    assert decision.actions == ()
    assert decision.status.state == TestbedState.IN_USE
    assert table(decision.status)[0] == (0, "node-1", 0, "Reserved", None)
    slots_ready = find_condition(decision.status.conditions, "SlotsReady")
    assert slots_ready is not None
    assert slots_ready.status == ConditionStatus.TRUE
    bound = decide(NODES, [*SETTLED[1:], executor("e0", "node-1", 0)], status=decision.status)
    assert bound.actions == ()
    assert table(bound.status)[0] == (0, "node-1", 0, "Occupied", "e0")


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        pytest.param(
            executor("e9", "node-1", 9),
            "executor pod e9 was given slot 9, which does not exist",
            id="slot-that-does-not-exist",
        ),
        pytest.param(
            executor("e1", "node-1", 1),
            "executor pod e1 runs on node node-1, but its slot 1 is on node node-2",
            id="slot-on-another-node",
        ),
        pytest.param(
            executor("ex", "node-1", None),
            "executor pod ex runs on node node-1 without a slot",
            id="bound-without-slot",
        ),
        pytest.param(
            executor("e0", "node-1", 0, requests=res("500m", "896Mi")),
            "executor pod e0 requests 500m cpu and 896Mi memory, but slot 0 is 500m cpu and 1Gi memory",
            id="requests-differ-from-slot-size",
        ),
    ],
)
def test_executor_problems_are_reported_never_acted_on(extra: PodView, problem: str) -> None:
    decision = decide(NODES, [*SETTLED, extra], status=SETTLED_STATUS)

    assert decision.problems == (problem,)
    assert extra.name not in deleted(decision)
    assert decision.status.state == TestbedState.DEGRADED
    healthy = find_condition(decision.status.conditions, "Healthy")
    assert healthy is not None
    assert (healthy.status, healthy.message) == (ConditionStatus.FALSE, problem)
    assert any(problem == event.message for event in decision.events)


def test_two_executors_in_one_slot_are_reported_and_both_kept() -> None:
    pods = [*SETTLED[1:], executor("e0", "node-1", 0), executor("e0b", "node-1", 0, job="job-b")]

    decision = decide(NODES, pods)

    assert decision.actions == ()
    assert decision.problems == ("slot 0 holds 2 executor pods: e0, e0b",)
    assert decision.status.slots[0].pod == "e0"


def test_a_finished_executor_frees_its_slot_for_a_new_ghost() -> None:
    pods = [*SETTLED[1:], executor("e0", "node-1", 0, phase=PodPhase.SUCCEEDED)]

    decision = decide(NODES, pods)

    assert decision.actions == (CreateGhost(0, "node-1", 0, SIZE),)
    assert decision.problems == ()
    assert (decision.status.slots[0].state, decision.status.slots[0].pod) == (SlotState.FREE, None)
    after = decide(NODES, apply(pods, decision), status=decision.status)
    assert after.status.state == TestbedState.READY
    assert after.status.slots[0].pod == "ghost-node-1-0"


def test_a_finished_executor_nobody_deletes_holds_its_slot_until_its_kubelet_has_let_go_of_it() -> None:
    """The kubelet counts a finished pod until it has stopped it: a ghost bound meanwhile would be refused."""
    ended = T0 - timedelta(seconds=KUBELET_STOP_SECONDS - 3)
    pods = [*SETTLED[1:], executor("e0", "node-1", 0, phase=PodPhase.SUCCEEDED, finished_at=ended)]

    waiting = decide(NODES, pods)
    assert created(waiting) == []
    assert waiting.status.slots[0].pod == "e0"
    assert waiting.decide_again_in == pytest.approx(3.0)

    later = decide_testbed(
        tb_spec(), waiting.status, TestbedObservation(NODES, pods), generation=1, now=T0 + timedelta(seconds=3)
    )
    assert later.actions == (CreateGhost(0, "node-1", 0, SIZE),)
    assert later.decide_again_in is None


def test_a_finished_executor_being_deleted_holds_its_slot_until_it_is_gone() -> None:
    """Its kubelet removes it from the API once it has stopped it; time alone does not free the slot."""
    long_ago = T0 - timedelta(hours=1)
    deleted = executor("e0", "node-1", 0, phase=PodPhase.FAILED, finished_at=long_ago, terminating=True)

    waiting = decide(NODES, [*SETTLED[1:], deleted])
    assert created(waiting) == []
    assert waiting.decide_again_in is None, "a pod event, not a timer, frees it"

    gone = decide(NODES, SETTLED[1:], status=waiting.status)
    assert gone.actions == (CreateGhost(0, "node-1", 0, SIZE),)


def test_a_reserved_slot_gets_no_ghost_while_its_job_has_an_executor_the_scheduler_may_place_there() -> None:
    reservation = Reservation("sched-a", "job-a", (0,))
    failed = executor("e0", "node-1", 0, phase=PodPhase.FAILED)
    replacement = executor("e1", None, None, phase=PodPhase.PENDING)  # no slot yet: the scheduler has it

    waiting = decide(NODES, [*SETTLED[1:], failed, replacement], reservations=[reservation])
    assert created(waiting) == [], "the room stays free for the replacement, which the filter alone may place"
    assert waiting.status.slots[0].state == SlotState.RESERVED
    slots_ready = find_condition(waiting.status.conditions, "SlotsReady")
    assert slots_ready is not None
    assert slots_ready.status == ConditionStatus.TRUE

    placed = decide(
        NODES, [*SETTLED[1:], failed, replace(replacement, node_name="node-1", slot=0)], reservations=[reservation]
    )
    assert created(placed) == []
    assert placed.status.slots[0].state == SlotState.OCCUPIED

    given_up = decide(NODES, [*SETTLED[1:], failed], reservations=[reservation])
    assert created(given_up) == [(0, "node-1", 0)], "no executor coming: the ghost holds the room again"


def test_a_reserved_slot_of_a_started_job_gets_no_ghost_back_until_the_job_ends() -> None:
    # Its application may replace the executor at any moment, before its pod is seen here; a ghost made
    # meanwhile could reach the kubelet before the replacement the extender binds there.
    started = Reservation("sched-a", "job-a", (0,), started=True)
    failed = executor("e0", "node-1", 0, phase=PodPhase.FAILED)

    running = decide(NODES, [*SETTLED[1:], failed], reservations=[started])
    assert created(running) == []
    assert (running.status.slots[0].state, running.status.slots[0].pod) == (SlotState.RESERVED, None)
    slots_ready = find_condition(running.status.conditions, "SlotsReady")
    assert slots_ready is not None
    assert slots_ready.status == ConditionStatus.TRUE, "kept for the job's executor, the slot waits for no ghost"

    other_slots = decide(NODES, SETTLED[2:], reservations=[started])
    assert created(other_slots) == [(1, "node-2", 0)], "only the started job's own slots wait without a ghost"

    ended = decide(NODES, [*SETTLED[1:], failed], status=running.status)
    assert created(ended) == [(0, "node-1", 0)]


# --- size tolerance (scenario 18, docs/compatibility.md#size-tolerance) ---------------------------------


@pytest.mark.parametrize(
    ("requests", "slot", "matches"),
    [
        pytest.param(("202m", "4002M"), ("200m", "4000M"), True, id="within-1%"),
        pytest.param(("200m", "4000M"), ("200m", "4000M"), True, id="exact"),
        pytest.param(("198m", "3960M"), ("200m", "4000M"), True, id="1%-below-still-matches"),
        pytest.param(("197m", "4000M"), ("200m", "4000M"), False, id="cpu-1.5%-below"),
        pytest.param(("100m", "4000M"), ("200m", "4000M"), False, id="half-the-cpu"),
        pytest.param(("200m", "2000M"), ("200m", "4000M"), False, id="half-the-memory"),
        pytest.param(("125m", "896M"), ("125m", "512M"), False, id="memory-far-above"),
        pytest.param(("500m", "1073741825"), ("500m", "1Gi"), True, id="a-byte-off-is-not-a-mismatch"),
    ],
)
def test_pod_size_tolerance(requests: tuple[str, str], slot: tuple[str, str], matches: bool) -> None:
    assert matches_slot_size(res(*requests), res(*slot)) is matches


# --- capacity (docs/compatibility.md#capacity) ----------------------------------------------------------


def test_a_node_short_of_capacity_is_reported_gets_no_ghosts_and_keeps_its_pods() -> None:
    spec = tb_spec(cpu="1", memory="4Gi")
    nodes = [node("n1", "0", res("4", "16Gi")), node("n2", "1", res("2", "8Gi"), others="300m/1Gi")]
    running = executor("e1", "n2", 1, requests=res("1", "4Gi"))
    pods = [running]

    decision = decide(nodes, pods, spec=spec)

    problem = "node n2 lacks 300m cpu and 1Gi memory for its 2 slots"
    assert decision.problems == (problem,)
    assert Event("InsufficientCapacity", problem, warning=True) in decision.events
    assert decision.status.state == TestbedState.DEGRADED
    assert created(decision) == [(0, "n1", 0), (2, "n1", 1)]
    assert deleted(decision) == []
    assert table(decision.status) == [
        (0, "n1", 0, "Free", None),
        (1, "n2", 0, "Occupied", "e1"),
        (2, "n1", 1, "Free", None),
        (3, "n2", 1, "Free", None),
    ]

    pods = apply(pods, decision)
    again = decide(nodes, pods, spec=spec, status=decision.status)
    assert again.actions == ()
    assert again.events == (), "a problem already reported is not reported again"
    assert running in pods

    relieved = [nodes[0], node("n2", "1", res("2", "8Gi"))]
    fixed = decide(relieved, pods, spec=spec, status=again.status)
    assert fixed.problems == ()
    assert created(fixed) == [(3, "n2", 1)]
    assert fixed.status.state == TestbedState.IN_USE
    assert ("InUse", fixed.status.message) in [(e.reason, e.message) for e in fixed.events]


def test_only_unfinished_foreign_requests_count_against_capacity() -> None:
    # The shell sums only pods that are not finished; a node with exactly the room for its slots is fine.
    nodes = [node("n1", "0", res("1", "2Gi"))]

    assert decide(nodes).problems == ()
    assert decide([node("n1", "0", res("1", "2Gi"), others="1m/0")]).problems == (
        "node n1 lacks 1m cpu for its 2 slots",
    )


def no_room(decision: TestbedDecision) -> dict[int, str]:
    return {s.id: s.no_room for s in decision.status.slots if s.no_room is not None}


def test_the_room_other_pods_leave_goes_to_as_many_slots_as_it_holds_and_the_rest_say_why() -> None:
    spec = tb_spec(cpu="1", memory="4Gi")
    crowded = [node("n1", "0", res("2", "16Gi"), others="1/2Gi")]

    decision = decide(crowded, spec=spec)

    assert created(decision) == [(0, "n1", 0)], "the room for one slot gets its ghost"
    assert no_room(decision) == {
        1: "other pods on node n1 request 1 cpu and 2Gi memory of its 2 cpu and 16Gi memory: room for 1 of its 2 slots"
    }
    assert decision.problems == ("node n1 lacks 1 cpu for its 2 slots",)

    pods = apply([], decision)
    again = decide(crowded, pods, spec=spec, status=decision.status)
    assert again.actions == ()
    assert no_room(again) == no_room(decision)

    relieved = decide([node("n1", "0", res("2", "16Gi"))], pods, spec=spec, status=again.status)
    assert no_room(relieved) == {}
    assert created(relieved) == [(1, "n1", 1)]


def test_a_node_too_small_for_its_slots_says_so_for_the_slots_beyond_its_room() -> None:
    decision = decide([node("n1", "0", res("1500m", "4Gi"))], spec=tb_spec(cpu="1", memory="1Gi"))

    assert no_room(decision) == {1: "node n1 has 1500m cpu and 4Gi memory: room for 1 of its 2 slots"}
    assert created(decision) == [(0, "n1", 0)]


def test_slots_holding_their_room_keep_it_then_reserved_slots_get_it() -> None:
    spec = tb_spec(per_node=3, cpu="1", memory="4Gi")
    crowded = [node("n1", "0", res("3", "16Gi"), others="1/0")]  # room for two of its three slots
    running = executor("e1", "n1", 2, requests=res("1", "4Gi"))
    reservation = Reservation("sched-a", "job-b", (1,))

    decision = decide(crowded, [running], spec=spec, reservations=[reservation])

    assert sorted(no_room(decision)) == [0], "the occupied slot, then the reserved one"
    assert [slot for slot, _, _ in created(decision)] == [1]

    ghost_in_0 = ghost("g0", "n1", 0, requests=res("1", "4Gi"))
    held = decide(crowded, [running, ghost_in_0], spec=spec, reservations=[reservation])
    assert sorted(no_room(held)) == [1], "a ghost already there holds its room, even against a reservation"
    assert created(held) == []


def test_an_executor_its_kubelet_refused_holds_no_room_so_its_slot_says_whose_it_is() -> None:
    """Two schedulers gave the same room: the kubelet admitted the other pod and refused the executor."""
    spec = tb_spec(cpu="1", memory="4Gi")
    crowded = [node("n1", "0", res("2", "16Gi"), others="1/0")]
    refused = executor("e1", "n1", 1, phase=PodPhase.FAILED, requests=res("1", "4Gi"))
    pods = [refused, ghost("g0", "n1", 0, requests=res("1", "4Gi"))]

    decision = decide(crowded, pods, spec=spec, reservations=[Reservation("sched-a", "job-a", (1,))])

    assert no_room(decision) == {
        1: "other pods on node n1 request 1 cpu and 0 memory of its 2 cpu and 16Gi memory: room for 1 of its 2 slots"
    }
    assert created(decision) == [], "a ghost there would be refused too"
    assert [(s.id, s.state) for s in decision.status.slots] == [(0, SlotState.FREE), (1, SlotState.RESERVED)]


@pytest.mark.parametrize(
    "holder",
    [
        pytest.param(ghost("g1", "n1", 1, terminating=True, requests=res("1", "4Gi")), id="a-ghost-still-stopping"),
        pytest.param(
            executor("e1", None, 1, phase=PodPhase.PENDING, requests=res("1", "4Gi")), id="an-executor-being-placed"
        ),
    ],
)
def test_a_slot_whose_room_is_on_its_way_to_a_pod_keeps_it(holder: PodView) -> None:
    """A ghost that is still stopping holds its room on the kubelet until it is gone; an executor given the
    slot (its ghost deleted for it) is about to take it: the room left goes to the other slot, or to none."""
    crowded = [node("n1", "0", res("2", "16Gi"), others="1/0")]

    decision = decide(crowded, [holder], spec=tb_spec(cpu="1", memory="4Gi"))

    assert sorted(no_room(decision)) == [0]
    assert created(decision) == []


# --- node labels (docs/compatibility.md#node-labels) ----------------------------------------------------


def test_bad_and_duplicate_node_labels_are_problems_not_crashes() -> None:
    nodes = [node("a", "0"), node("b", "0"), node("c", "one")]

    decision = decide(nodes)

    assert decision.status.state == TestbedState.DEGRADED
    assert decision.status.counts.slots == 4, "nodes sharing an id keep their slots"
    assert len(decision.problems) == 2
    assert any("node c is left out" in p for p in decision.problems)
    assert {e.reason for e in decision.events} == {"Degraded", "NodeLabelInvalid"}
    healthy = find_condition(decision.status.conditions, "Healthy")
    assert healthy is not None
    assert healthy.reason == "NodeLabelInvalid"


# --- reservations, holder, state (docs/compatibility.md#testbed-states) ---------------------------------


def test_a_reserved_slot_without_an_executor_is_in_use_not_an_error() -> None:
    reservation = Reservation("sched-a", "job-a", (1, 3))

    decision = decide(NODES, SETTLED, reservations=[reservation], held_by="sched-a")

    assert decision.actions == ()
    assert decision.status.state == TestbedState.IN_USE
    assert decision.status.scheduling == "sched-a"
    assert [(s.id, s.state, s.job, s.scheduling, s.pod) for s in decision.status.slots if s.job] == [
        (1, SlotState.RESERVED, "job-a", "sched-a", "g1"),
        (3, SlotState.RESERVED, "job-a", "sched-a", "g3"),
    ]
    assert decision.status.counts.reserved == 2


def test_an_executor_given_a_slot_but_not_placed_keeps_the_slot_reserved_with_its_ghost() -> None:
    # The extender recorded slot 1 on the executor before the scheduler evicted g1: the slot must still name
    # g1 (the extender evicts it by that name), and no second ghost may be added.
    reservation = Reservation("sched-a", "job-a", (1,))
    waiting = executor("e1", None, 1, phase=PodPhase.PENDING)

    decision = decide(NODES, [*SETTLED, waiting], reservations=[reservation])
    placed = decide(
        NODES,
        [p for p in SETTLED if p.name != "g1"] + [replace(waiting, node_name=NODES[1].name)],
        reservations=[reservation],
    )

    assert decision.actions == ()
    assert [(s.state, s.job, s.pod) for s in decision.status.slots if s.id == 1] == [
        (SlotState.RESERVED, "job-a", "g1")
    ]
    assert placed.actions == ()
    assert [(s.state, s.pod) for s in placed.status.slots if s.id == 1] == [(SlotState.OCCUPIED, "e1")]


def test_reserved_ids_survive_a_node_joining_in_front() -> None:
    world = World([node("b", "1")], reservations=[Reservation("sched-a", "job-a", (1,))])
    before = world.settle()
    assert [(s.id, s.node_name, s.position) for s in before.slots if s.state == SlotState.RESERVED] == [(1, "b", 1)]

    world.nodes = [node("a", "0"), node("b", "1")]
    status = world.settle()

    # The reserved slot keeps its id and place; the free ones are numbered around it, interleaved.
    assert [(s.id, s.node_name, s.position, s.state) for s in status.slots] == [
        (0, "a", 0, SlotState.FREE),
        (1, "b", 1, SlotState.RESERVED),
        (2, "b", 0, SlotState.FREE),
        (3, "a", 1, SlotState.FREE),
    ]


def test_a_slot_reserved_twice_or_missing_is_a_problem() -> None:
    reservations = [Reservation("sched-a", "job-a", (0, 7)), Reservation("sched-b", "job-b", (0,))]

    decision = decide(NODES, SETTLED, reservations=reservations)

    assert decision.problems == (
        "slot 0 is reserved for job job-a of scheduling sched-a and for job job-b of scheduling sched-b",
        "scheduling sched-a reserved slot 7 for job job-a, which does not exist",
    )
    assert decision.status.slots[0].job == "job-a"


def test_a_running_executor_keeps_its_id_when_the_status_is_lost() -> None:
    # Slot 5 was node b's first slot when there were three nodes; the status saying so is gone.
    decision = decide([node("a", "0"), node("b", "1")], [executor("e5", "b", 5)])

    assert decision.problems == ()
    assert [(s.id, s.node_name, s.state) for s in decision.status.slots] == [
        (0, "a", SlotState.FREE),
        (1, "a", SlotState.FREE),
        (2, "b", SlotState.FREE),
        (5, "b", SlotState.OCCUPIED),
    ]


def test_state_changes_are_events_and_conditions_keep_their_transition_time() -> None:
    world = World(NODES)
    world.settle()
    later = world.decide()

    assert [d.status.state for d in world.decisions] == [
        TestbedState.PENDING,
        TestbedState.READY,
        TestbedState.READY,
    ]
    assert world.decisions[0].events == ()
    assert world.decisions[1].events == (Event("Ready", "all 4 slots on 2 nodes are free and held by ghost pods"),)
    assert later.events == ()
    slots_ready = find_condition(later.status.conditions, "SlotsReady")
    assert slots_ready is not None
    assert (slots_ready.status, slots_ready.last_transition_time) == (ConditionStatus.TRUE, T0 + timedelta(seconds=1))


# --- properties -----------------------------------------------------------------------------------------

NAMES = ("n0", "n1", "n2", "n3")
OFF_SIZE = res("1", "1Gi")


@st.composite
def observations(draw: st.DrawFn) -> TestbedObservation:
    nodes = [
        NodeView(
            name,
            draw(st.sampled_from([{}, {LABEL: "0"}, {LABEL: "1"}, {LABEL: "2"}, {LABEL: "3"}, {LABEL: "x"}])),
            res(draw(st.sampled_from(["1", "2", "4"])), "16Gi"),
            res(draw(st.sampled_from(["0", "500m", "3"])), "0"),
        )
        for name in draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=4))
    ]
    pods = draw(
        st.lists(
            st.builds(
                PodView,
                name=st.sampled_from([f"p{i}" for i in range(12)]),
                role=st.sampled_from(PodRole),
                node_name=st.one_of(st.none(), st.sampled_from(NAMES)),
                slot=st.one_of(st.none(), st.integers(0, 11)),
                requests=st.sampled_from([SIZE, OFF_SIZE]),
                phase=st.sampled_from(PodPhase),
                job=st.sampled_from(["j1", "j2"]),
                terminating=st.booleans(),
            ),
            max_size=10,
            unique_by=lambda p: p.name,
        )
    )
    reservations = draw(
        st.lists(
            st.builds(
                Reservation,
                scheduling=st.sampled_from(["s1", "s2"]),
                job=st.sampled_from(["j1", "j2", "j3"]),
                slots=st.lists(st.integers(0, 11), max_size=3).map(tuple),
            ),
            max_size=3,
        )
    )
    return TestbedObservation(nodes, pods, reservations, draw(st.sampled_from([None, "s1"])))


@st.composite
def cases(draw: st.DrawFn) -> tuple[TestbedSpec, TestbedStatus | None, TestbedObservation]:
    """A spec, a previous status (none, or the one decided on some other earlier world) and an observation."""
    spec = tb_spec(per_node=draw(st.integers(1, 3)))
    earlier = draw(st.one_of(st.none(), observations()))
    status = None if earlier is None else decide_testbed(spec, None, earlier, generation=1, now=T0).status
    return spec, status, draw(observations())


@settings(deadline=None, max_examples=200)
@given(cases())
def test_property_no_action_ever_touches_an_executor(
    case: tuple[TestbedSpec, TestbedStatus | None, TestbedObservation],
) -> None:
    spec, status, observation = case

    decision = decide_testbed(spec, status, observation, generation=1, now=T0)

    ghosts = {p.name for p in observation.pods if p.role == PodRole.GHOST and not p.terminating}
    assert set(deleted(decision)) <= ghosts
    assert all(isinstance(a, CreateGhost | DeleteGhost) for a in decision.actions)
    assert len(set(deleted(decision))) == len(deleted(decision))


@settings(deadline=None, max_examples=200)
@given(cases())
def test_property_level_triggered(case: tuple[TestbedSpec, TestbedStatus | None, TestbedObservation]) -> None:
    spec, status, observation = case
    first = decide_testbed(spec, status, observation, generation=1, now=T0)

    same = decide_testbed(spec, first.status, observation, generation=1, now=T0 + timedelta(minutes=1))
    applied = replace(observation, pods=apply(observation.pods, first))
    after = decide_testbed(spec, first.status, applied, generation=1, now=T0 + timedelta(minutes=1))

    assert same.status == first.status
    assert same.actions == first.actions
    assert after.actions == ()


@settings(deadline=None, max_examples=200)
@given(cases())
def test_property_slot_ids_are_distinct_and_outputs_do_not_depend_on_input_order(
    case: tuple[TestbedSpec, TestbedStatus | None, TestbedObservation],
) -> None:
    spec, status, observation = case
    decision = decide_testbed(spec, status, observation, generation=1, now=T0)
    reversed_input = TestbedObservation(
        observation.nodes[::-1], observation.pods[::-1], observation.reservations[::-1], observation.held_by
    )

    ids = [s.id for s in decision.status.slots]
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids)
    assert len({a.slot for a in decision.actions if isinstance(a, CreateGhost)}) == len(created(decision))
    assert decide_testbed(spec, status, reversed_input, generation=1, now=T0) == decision
    work = [p for p in observation.pods if p.role == PodRole.EXECUTOR and p.holds_room(T0) and p.slot is not None]
    if status is None and not work and not any(r.slots for r in observation.reservations):
        assert ids == list(range(len(ids))), "with nothing to keep, ids are 0..n-1"


def test_a_node_with_a_taint_the_testbed_does_not_tolerate_is_reported_and_loses_its_ghosts() -> None:
    taint = Taint("dedicated", "esi", "NoSchedule")
    world = World(labelled("node-1", "node-2"))
    world.settle()
    world.nodes = [replace(n, taints=(taint,)) if n.name == "node-2" else n for n in world.nodes]

    decision = world.decide()

    assert {"ghost-node-2-1", "ghost-node-2-3"} <= set(deleted(decision)), "its slots are not offered"
    assert [s.node_name for s in decision.status.slots] == ["node-1", "node-1"]
    assert decision.status.state == TestbedState.DEGRADED
    message = "node node-2 offers no slots: its taint dedicated=esi:NoSchedule is not tolerated (spec.tolerations)"
    assert Event("NodeTainted", message, warning=True) in decision.events
    healthy = find_condition(decision.status.conditions, "Healthy")
    assert healthy is not None
    assert (healthy.status, healthy.reason, healthy.message) == (ConditionStatus.FALSE, "NodeTainted", message)

    world.pods = apply(world.pods, decision)
    status = world.settle()
    assert world.ghosts() == [("node-1", 0), ("node-1", 1)]
    assert status.state == TestbedState.DEGRADED

    world.spec = world.spec.model_copy(
        update={"tolerations": [Toleration.model_validate({"key": "dedicated", "value": "esi"})]}
    )
    status = world.settle()
    assert status.state == TestbedState.READY, "tolerated, the node holds its slots again"
    assert world.ghosts() == [("node-1", 0), ("node-1", 2), ("node-2", 1), ("node-2", 3)]
