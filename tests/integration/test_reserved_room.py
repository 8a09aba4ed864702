"""Executors take their slots at once while a stream of ordinary pods (the default scheduler's) competes for
the same nodes; how much of the slots' room the ordinary pods get meanwhile is measured.

Room given twice shows as a node whose bound pods request more than it has; an observer lists the pods every
few tens of milliseconds and checks every node, every time. On shared nodes the room is not kept, and the test
reports how often it is lost: between a ghost's deletion and its executor's binding the default scheduler binds
waiting ordinary pods into the room (about half the nodes, measured 2026-11-25; the earlier path, preemption and
a second cycle, loses it the same way), and how many pods the kubelet then refused (KWOK admits as a kubelet
does; ``kubelet_admission`` reads its refusals: the later of two pods given the same room). The test plays
Spark's part for an executor refused so: a replacement, which the extender holds back while its slot has no room
(told so in its PodScheduled condition). While the stream lasts, the default scheduler's waiting pods take such
room as it frees, so the replacements run once the ordinary pods are gone. On nodes given to the Testbed alone (a
taint only its ghosts and executors tolerate: ``spec.tolerations``), with the ordinary pods' other nodes full,
no ordinary pod is ever on a Testbed node: that the test asserts, and the ``namespace`` fixture that the kubelet
admitted every pod. On shared nodes with one scheduler for both (the ordinary pods' profile and esi's in one
kube-scheduler process, executors requesting a slot of the resource the nodes advertise:
docs/design.md#one-scheduler-for-both), no ordinary pod ever has reserved room and the kubelet refuses nothing:
that the test asserts too.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

import pytest
from lightkube import ApiError, Client
from lightkube.resources.core_v1 import NodeStatus, Pod
from lightkube.types import PatchType

from api.extender.slot_index import SlotIndex
from api.metrics import EXTENDER_LATENCY
from esi.objects.names import JOB_LABEL, ROLE_EXECUTOR, ROLE_LABEL, SLOT_ANNOTATION
from esi.objects.slot_resource import advertised_slots
from esi.resources.quantity import Quantity
from esi.resources.testbed import SlotState
from infra.local_cluster import LocalCluster
from infra.stacks.second_scheduler import SecondScheduler
from tests.integration.admission import KubeletAdmission, Refusal
from tests.integration.conftest import AddNodes
from tests.integration.esi_objects import set_scheduling_status, settled, status_of
from tests.integration.kube import create_in, create_testbed, events, executor_pod, pod, wait_for
from tests.manifests import scheduling_manifest

NODES, SLOTS_PER_NODE = 25, 4
NODE_CPU = Decimal(6)  # 4 slots of 1 cpu reserved, 2 cpu for ordinary pods
ORDINARY_CPU = Decimal("0.5")
ORDINARY = "ordinary"
ORDINARY_NODES = 2  # beside dedicated Testbed nodes: where the ordinary pods can run (4 each)


@pytest.mark.parametrize(
    ("one_scheduler", "dedicated"),
    [(False, False), (False, True), (True, False)],
    ids=["shared-nodes", "dedicated-nodes", "shared-nodes-one-scheduler"],
)
def test_executors_take_their_slots_at_once_while_ordinary_pods_compete_for_the_nodes(
    one_scheduler: bool,
    dedicated: bool,
    esi_operators: LocalCluster,
    client: Client,
    namespace: str,
    unique: str,
    add_nodes: AddNodes,
    second_scheduler: Callable[..., SecondScheduler],
    fed_extender: tuple[str, SlotIndex],
    record_property: Callable[[str, object], None],
    kubelet_admission: KubeletAdmission,
) -> None:
    url, index = fed_extender
    if not dedicated and not one_scheduler:
        kubelet_admission.expect_refusals(namespace)  # what a kubelet would refuse here is measured, below
    label = f"esi.test/slots-{unique}"
    nodes = [add_nodes(1, cpu=str(NODE_CPU), memory="8Gi", labels={label: str(i)})[0] for i in range(NODES)]
    tolerations: list[dict[str, str]] = []
    ordinary_room = NODES * (NODE_CPU - SLOTS_PER_NODE)
    if dedicated:
        tolerations = dedicate(esi_operators, label, unique)
        ordinary_room = ORDINARY_NODES * Decimal(2)
        add_nodes(ORDINARY_NODES, cpu="2", memory="8Gi")
    if one_scheduler:  # the Testbed's nodes advertise their slots (KWOK's admission counts cpu and memory only)
        for node in nodes:
            client.patch(NodeStatus, node, advertised_slots(SLOTS_PER_NODE), patch_type=PatchType.MERGE)
    create_testbed(esi_operators, namespace, label, slots_per_node=SLOTS_PER_NODE, tolerations=tolerations)
    total = NODES * SLOTS_PER_NODE
    reserve_every_slot(esi_operators, namespace, index, total)
    # One scheduler: the ordinary pods' profile (the cluster's default-scheduler, here of this test's own name) and
    # esi's in one kube-scheduler process.
    ordinary_scheduler = f"{ORDINARY}-{unique}" if one_scheduler else None
    scheduler = second_scheduler(url, shared_with=ordinary_scheduler)
    executor_pod_ = functools.partial(
        executor_pod,
        namespace=namespace,
        pool=unique,
        scheduler=scheduler.settings.scheduler_name,
        tolerations=tolerations,
        slot=one_scheduler,
    )

    fit = int(ordinary_room / ORDINARY_CPU)
    with (
        ordinary_stream(client, namespace, unique, fit, ordinary_scheduler) as stream,
        observer(client, namespace, set(nodes)) as seen,
    ):
        wait_for("ordinary pods waiting for room", lambda: stream.pending() >= 20, timeout=120)
        created_before = stream.created
        for k, e in itertools.product(range(NODES), range(SLOTS_PER_NODE)):
            client.create(executor_pod_(f"job-{k}-exec-{e}", job=f"job-{k}"))
        # As Spark does, an executor its kubelet refused (KWOK admits as a kubelet does) is replaced by a new one,
        # which waits while its slot has no room: while the stream lasts, ordinary pods keep taking that room.
        replaced: list[str] = []
        first = {f"job-{k}-exec-{e}" for k, e in itertools.product(range(NODES), range(SLOTS_PER_NODE))}

        def placed() -> list[Any] | None:
            replaced.extend(replace_refused(client, namespace, executor_pod_))
            return running_executors(client, namespace, total)

        def each_ran_or_was_refused() -> bool:
            replaced.extend(replace_refused(client, namespace, executor_pod_))
            running = {str(p.metadata.name) for p in running_executors(client, namespace, None) or ()}
            return all(name in running or f"{name}-r" in replaced for name in first)

        wait_for("every executor to run or to have been refused", each_ran_or_was_refused, 300)
        came_meanwhile = stream.created - created_before
        time.sleep(2)  # the stream and the observer go on a little after the last swap

    # The ordinary pods go: the room they held in slots is the slots' again, and the replacements run there.
    delete_ordinary_pods(client, namespace)
    running = wait_for(f"{total} executors to run", placed, 300)

    told_no_room = told_their_slot_has_no_room(esi_operators, namespace)
    extra = sum((cpu - NODE_CPU for cpu, _ in seen.overcommitted.values()), Decimal(0))
    refused = kubelet_admission.refused_in(namespace)
    refused_executors = sum(r.pod.startswith("job-") for r in refused)
    record_property(
        "figure",
        f"  {total} executors took their slots while {stream.created} ordinary pods came and went "
        f"({came_meanwhile} while the executors took their slots, {stream.pending_at_most} waiting for room at "
        f"most), {seen.snapshots} snapshots of every node:\n"
        f"  {'dedicated' if dedicated else 'shared'} nodes, {'one scheduler' if one_scheduler else 'two schedulers'}: "
        f"ordinary pods were on {len(seen.ordinary_on)} of "
        f"{NODES} Testbed nodes and got reserved room on {len(seen.overcommitted)}, {extra} cpu in all; the "
        f"extender bound {seen.extender_binds:.0f} pods while the stream lasted; "
        f"a kubelet refused {len(refused)} of the pods bound there ({refused_executors} executors, each replaced: "
        f"{len(replaced)} replacements, {len(told_no_room & set(replaced))} of them told their slot had no room "
        "before they ran)",
    )
    assert seen.snapshots > 20, "the observer saw too little to tell"
    assert came_meanwhile >= 5, "too few ordinary pods came while the executors took their slots"
    if one_scheduler:
        assert_room_kept(seen, refused, total)
    if dedicated:
        assert not seen.ordinary_on, (
            f"ordinary pods on {len(seen.ordinary_on)} dedicated nodes ({', '.join(sorted(seen.ordinary_on)[:3])}, "
            f"...), in reserved room on {len(seen.overcommitted)}"
        )
    assert_each_in_a_slot_of_its_job(running, nodes)
    wait_for("every slot occupied", lambda: status_of(esi_operators, namespace)["counts"].get("occupied") == total, 60)


def assert_room_kept(seen: Seen, refused: list[Refusal], executors: int) -> None:
    """No ordinary pod in reserved room, no pod refused, and the extender asked to bind the executors alone."""
    assert not seen.overcommitted, (
        f"ordinary pods in reserved room on {len(seen.overcommitted)} nodes with one scheduler for both: "
        f"{sorted(seen.overcommitted.items())[:2]}"
    )
    assert not refused, f"a kubelet refused {len(refused)} pods: {[str(r) for r in refused[:3]]}"
    # The ordinary pods' profile binds its pods itself: the extender is asked only about pods requesting a slot
    # (a few more binds: calls the scheduler made again).
    binds = seen.extender_binds
    assert binds <= executors + 5, f"the extender bound {binds:.0f} pods for {executors} executors"


def assert_each_in_a_slot_of_its_job(running: list[Any], nodes: list[str]) -> None:
    """Executor k of job j on job j's node, in one of the job's slots (j, j + NODES, ...), no slot given twice."""
    for executor in running:
        k = int(executor.metadata.labels[JOB_LABEL].removeprefix("job-"))
        assert executor.spec.nodeName == nodes[k]
        assert int((executor.metadata.annotations or {})[SLOT_ANNOTATION]) in {k + NODES * p for p in range(4)}
    slots = {(e.metadata.annotations or {})[SLOT_ANNOTATION] for e in running}
    assert len(slots) == len(running), "a slot given twice"


def dedicate(cluster: LocalCluster, label: str, unique: str) -> list[dict[str, str]]:
    """The nodes labelled ``label`` tainted for the Testbed alone; the toleration its ghosts and executors need."""
    cluster.kubectl("taint", "nodes", "-l", label, f"esi.test/dedicated={unique}:NoSchedule")
    return [{"key": "esi.test/dedicated", "operator": "Equal", "value": unique, "effect": "NoSchedule"}]


def reserve_every_slot(cluster: LocalCluster, namespace: str, index: SlotIndex, total: int) -> None:
    """Once Testbed ``tb`` has its ``total`` ghosts, a Scheduling reserving slots k, k + NODES, ... for job k,
    and the extender seeing every reservation."""
    wait_for(f"{total} slots with their ghosts", settled(cluster, namespace, total), timeout=120)
    create_in(
        cluster,
        namespace,
        scheduling_manifest(testbed={"name": "tb"}, queueBased=[{"name": f"job-{k}"} for k in range(NODES)]),
    )
    set_scheduling_status(
        cluster,
        namespace,
        [
            {"name": f"job-{k}", "state": "Reserved", "executors": 4, "slots": [k + NODES * p for p in range(4)]}
            for k in range(NODES)
        ],
    )
    wait_for(
        "the extender to see every reservation",
        lambda: sum(s.state == SlotState.RESERVED for s in index.slots(namespace, "tb") or ()) == total,
        timeout=60,
    )


def told_their_slot_has_no_room(cluster: LocalCluster, namespace: str) -> set[str]:
    """The pods the extender told (in a FailedScheduling Event) that their slot has no room."""
    return {
        e["involvedObject"]["name"]
        for e in events(cluster, namespace, "FailedScheduling")
        if "has no room" in e.get("message", "")
    }


def delete_ordinary_pods(client: Client, namespace: str) -> None:
    for ordinary in client.list(Pod, namespace=namespace, labels={"role": ORDINARY}):
        with contextlib.suppress(ApiError):  # gone meanwhile
            client.delete(Pod, str(ordinary.metadata.name), namespace=namespace)  # type: ignore[union-attr]


def replace_refused(client: Client, namespace: str, replacement_of: Callable[..., Any]) -> list[str]:
    """Each executor its kubelet refused deleted and made again under a new name (``replacement_of(name, job=...)``),
    as Spark replaces a lost executor; the names of the new ones."""
    made = []
    for executor in client.list(Pod, namespace=namespace, labels={ROLE_LABEL: ROLE_EXECUTOR}):
        status, name = executor.status, str(executor.metadata.name)  # type: ignore[union-attr]
        if status is None or status.phase != "Failed" or not (status.reason or "").startswith("OutOf"):
            continue
        job = executor.metadata.labels[JOB_LABEL]  # type: ignore[union-attr,index]
        client.delete(Pod, name, namespace=namespace)
        replacement = f"{name}-r"
        client.create(replacement_of(replacement, job=job))
        made.append(replacement)
    return made


def running_executors(client: Client, namespace: str, total: int | None) -> list[Any] | None:
    """The running executors once there are ``total`` (None: however many)."""
    pods = client.list(Pod, namespace=namespace, labels={ROLE_LABEL: ROLE_EXECUTOR})
    running = [p for p in pods if p.status is not None and p.status.phase == "Running"]
    return running if total is None or len(running) == total else None


class Stream:
    def __init__(self) -> None:
        self.created = 0
        self.pending_at_most = 0
        self._pending = 0

    def pending(self) -> int:
        return self._pending

    def saw_pending(self, count: int) -> None:
        self._pending = count
        self.pending_at_most = max(self.pending_at_most, count)


@contextmanager
def repeating(name: str, step: Callable[[], None], pause: float) -> Iterator[None]:
    """``step`` over and over on a thread of its own, ``pause`` seconds apart, while the context is open."""
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            step()
            time.sleep(pause)

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=30)


@contextmanager
def ordinary_stream(client: Client, namespace: str, pool: str, fit: int, scheduler: str | None) -> Iterator[Stream]:
    """Ordinary pods of ``scheduler`` (None: the default scheduler) for the pool's nodes, always more than ``fit``
    (as many as the room they may take holds): one is created and the oldest running one deleted every 20 ms, so
    some always wait, retried as room frees up."""
    stream, numbers = Stream(), itertools.count()

    def step() -> None:
        manifest = pod(
            f"{ORDINARY}-{next(numbers)}",
            namespace,
            cpu=str(ORDINARY_CPU),
            node_selector={"esi.test/pool": pool},
            scheduler=scheduler,
        )
        manifest.metadata.labels = {"role": ORDINARY}
        client.create(manifest)
        stream.created += 1
        ordinary = list(client.list(Pod, namespace=namespace, labels={"role": ORDINARY}))
        bound = [str(p.metadata.name) for p in ordinary if p.metadata and p.spec and p.spec.nodeName]
        stream.saw_pending(len(ordinary) - len(bound))
        if len(ordinary) > fit + 25 and bound:
            oldest = min(bound, key=lambda name: int(name.rsplit("-", 1)[1]))
            with contextlib.suppress(ApiError):
                client.delete(Pod, oldest, namespace=namespace, grace_period=0)

    with repeating("ordinary-stream", step, 0.02):
        yield stream


class Seen:
    def __init__(self) -> None:
        self.snapshots = 0
        self.overcommitted: dict[str, tuple[Decimal, list[str]]] = {}
        self.ordinary_on: set[str] = set()
        self.extender_binds = 0.0


def extender_binds() -> float:
    """The bind calls this process's extenders answered so far (``fed_extender`` runs in the test's process)."""
    return sum(
        sample.value
        for metric in EXTENDER_LATENCY.collect()
        for sample in metric.samples
        if sample.name.endswith("_count") and sample.labels.get("route") == "/extender/bind"
    )


@contextmanager
def observer(client: Client, namespace: str, nodes: Collection[str]) -> Iterator[Seen]:
    """Lists the namespace's pods over and over; of ``nodes``, every one whose bound, unfinished pods request
    more cpu than it has is recorded with those pods (the most it was seen to hold), and every one an ordinary
    pod was bound to; and how many pods the extender bound meanwhile."""
    seen = Seen()

    def step() -> None:
        on_node: dict[str, list[Any]] = defaultdict(list)
        for p in client.list(Pod, namespace=namespace):
            node = p.spec.nodeName if p.spec else None
            if node in nodes and (p.status is None or p.status.phase not in ("Succeeded", "Failed")):
                on_node[str(node)].append(p)
        for node, pods in on_node.items():
            if any((p.metadata.labels or {}).get("role") == ORDINARY for p in pods):
                seen.ordinary_on.add(node)
            cpu = sum((requested_cpu(p) for p in pods), Decimal(0))
            if cpu > max(NODE_CPU, seen.overcommitted.get(node, (NODE_CPU, []))[0]):
                seen.overcommitted[node] = (cpu, sorted(p.metadata.name for p in pods))
        seen.snapshots += 1

    binds_before = extender_binds()
    with repeating("room-observer", step, 0.03):
        yield seen
    seen.extender_binds = extender_binds() - binds_before


def requested_cpu(pod: Any) -> Decimal:
    return sum(
        (
            Quantity(c.resources.requests.get("cpu", "0")).amount
            for c in pod.spec.containers
            if c.resources and c.resources.requests
        ),
        Decimal(0),
    )
