"""Placement for real: the Testbed reconciler keeps ghosts, a Scheduling's status reserves a slot, the
extender (following the cluster by watches) steers the real second kube-scheduler, and the executor takes
exactly its slot — evicting only that slot's ghost — and gives it back to a new ghost when it ends."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from lightkube import Client
from lightkube.resources.core_v1 import Pod

from api.extender.slot_index import SlotIndex
from esi.objects.names import JOB_LABEL, ROLE_EXECUTOR, ROLE_LABEL, SLOT_ANNOTATION, TESTBED_LABEL
from esi.objects.pod_status import scheduler_refusal
from esi.resources.testbed import SlotState
from infra.local_cluster import LocalCluster
from infra.stacks.second_scheduler import SecondScheduler
from tests.integration.conftest import AddNodes
from tests.integration.esi_objects import ghosts_when, set_scheduling_status, settled, status_of
from tests.integration.kube import create_in, create_testbed, executor_pod, get_or_none, pod, running_on, wait_for
from tests.manifests import scheduling_manifest, testbed_manifest


def reserve_for_wordcount(cluster: LocalCluster, namespace: str, slot_id: int) -> None:
    """Scheduling ``sched`` on testbed tb, with job wordcount's one executor given slot ``slot_id`` in its status."""
    create_in(cluster, namespace, scheduling_manifest(testbed={"name": "tb"}, queueBased=[{"name": "wordcount"}]))
    set_scheduling_status(
        cluster, namespace, [{"name": "wordcount", "state": "Reserved", "executors": 1, "slots": [slot_id]}]
    )


def uids(client: Client, namespace: str, names: list[str]) -> dict[str, str]:
    return {n: str(client.get(Pod, n, namespace=namespace).metadata.uid) for n in names}  # type: ignore[union-attr]


def slot(cluster: LocalCluster, namespace: str, slot_id: int) -> dict[str, Any]:
    found: dict[str, Any] = next(s for s in status_of(cluster, namespace)["slots"] if s["id"] == slot_id)
    return found


def test_an_executor_takes_its_reserved_slot_and_gives_it_back(
    esi_operators: LocalCluster,
    client: Client,
    namespace: str,
    unique: str,
    add_nodes: AddNodes,
    second_scheduler: Callable[[str], SecondScheduler],
    fed_extender: tuple[str, SlotIndex],
) -> None:
    url, index = fed_extender
    label = f"esi.test/slots-{unique}"
    node_0, node_1 = (add_nodes(1, cpu="2500m", labels={label: str(i)})[0] for i in range(2))
    client.create(pod("foreign", namespace, cpu="500m", node_name=node_1))
    create_testbed(esi_operators, namespace, label)
    wait_for("testbed tb Ready with 4 slots", settled(esi_operators, namespace, 4), timeout=60)
    ghosts = wait_for("four ghosts", ghosts_when(client, namespace, 4), timeout=60)
    assert ghosts == {0: node_0, 1: node_1, 2: node_0, 3: node_1}
    before = uids(client, namespace, ["tb-ghost-0", "tb-ghost-2", "tb-ghost-3", "foreign"])

    # The Scheduling decides: job wordcount gets slot 1 (node 1), and records it in its status.
    reserve_for_wordcount(esi_operators, namespace, 1)
    wait_for("slot 1 reserved", lambda: slot(esi_operators, namespace, 1)["state"] == "Reserved", timeout=30)
    wait_for(
        "the extender to see the reservation",
        lambda: any(s.id == 1 and s.state == SlotState.RESERVED for s in index.slots(namespace, "tb") or ()),
        timeout=30,
    )

    scheduler = second_scheduler(url)
    client.create(executor_pod("wordcount-exec-1", namespace, pool=unique, scheduler=scheduler.settings.scheduler_name))

    assert wait_for("the executor to run", running_on(client, "wordcount-exec-1", namespace), timeout=90) == node_1
    occupied = wait_for(
        "slot 1 occupied", lambda: (s := slot(esi_operators, namespace, 1))["state"] == "Occupied" and s, timeout=30
    )
    assert (occupied["job"], occupied["pod"], occupied["nodeName"]) == ("wordcount", "wordcount-exec-1", node_1)
    placed = client.get(Pod, "wordcount-exec-1", namespace=namespace)
    assert placed.metadata is not None
    assert placed.metadata.labels is not None
    assert (placed.metadata.annotations or {})[SLOT_ANNOTATION] == "1", "the extender records the slot on the pod"
    assert get_or_none(client, Pod, "tb-ghost-1", namespace) is None, "slot 1's ghost must be gone, not back"
    assert uids(client, namespace, list(before)) == before, "other ghosts and the foreign pod are untouched"
    assert status_of(esi_operators, namespace)["state"] == "InUse"

    # The executor is replaced (its application restarted it): the new pod is given the same reserved slot.
    first = str(placed.metadata.uid)
    assert index.slot_of(first) == (namespace, "tb", 1)
    client.delete(Pod, "wordcount-exec-1", namespace=namespace)
    wait_for("the extender to forget the deleted executor", lambda: index.slot_of(first) is None, timeout=30)
    client.create(executor_pod("wordcount-exec-2", namespace, pool=unique, scheduler=scheduler.settings.scheduler_name))
    assert wait_for("the new executor to run", running_on(client, "wordcount-exec-2", namespace), timeout=90) == node_1
    wait_for(
        "slot 1 occupied by the new executor",
        lambda: slot(esi_operators, namespace, 1).get("pod") == "wordcount-exec-2",
        timeout=30,
    )

    # The executor ends and the Scheduling records the job as done: the slot is free again, with a new ghost.
    client.delete(Pod, "wordcount-exec-2", namespace=namespace)
    set_scheduling_status(
        esi_operators, namespace, [{"name": "wordcount", "state": "Succeeded", "executors": 1, "slots": [1]}]
    )
    wait_for("testbed tb Ready again", settled(esi_operators, namespace, 4), timeout=60)
    assert wait_for("four ghosts again", ghosts_when(client, namespace, 4), timeout=60)[1] == node_1
    assert slot(esi_operators, namespace, 1)["state"] == "Free"


def test_a_hundred_executors_over_25_nodes_each_take_their_own_slot(
    esi_operators: LocalCluster,
    client: Client,
    namespace: str,
    unique: str,
    add_nodes: AddNodes,
    second_scheduler: Callable[[str], SecondScheduler],
    fed_extender: tuple[str, SlotIndex],
) -> None:
    url, index = fed_extender
    label = f"esi.test/slots-{unique}"
    nodes = [add_nodes(1, cpu="4", memory="4Gi", labels={label: str(i)})[0] for i in range(25)]
    create_testbed(esi_operators, namespace, label, slots_per_node=4)
    wait_for("100 slots with their ghosts", settled(esi_operators, namespace, 100), timeout=120)
    # Job k gets the four slots of node k (ids interleave: node k holds k, k+25, k+50, k+75).
    create_in(
        esi_operators,
        namespace,
        scheduling_manifest(testbed={"name": "tb"}, queueBased=[{"name": f"job-{k}"} for k in range(25)]),
    )
    reservations = [
        {"name": f"job-{k}", "state": "Reserved", "executors": 4, "slots": [k + 25 * p for p in range(4)]}
        for k in range(25)
    ]
    set_scheduling_status(esi_operators, namespace, reservations)
    wait_for(
        "100 reserved slots", lambda: status_of(esi_operators, namespace)["counts"].get("reserved") == 100, timeout=60
    )
    wait_for(
        "the extender to see 100 reservations",
        lambda: sum(s.state == SlotState.RESERVED for s in index.slots(namespace, "tb") or ()) == 100,
        timeout=60,
    )

    scheduler = second_scheduler(url)
    for k in range(25):
        for e in range(4):
            manifest = executor_pod(
                f"job-{k}-exec-{e}", namespace, pool=unique, scheduler=scheduler.settings.scheduler_name, job=f"job-{k}"
            )
            client.create(manifest)

    def all_running() -> list[Any] | None:
        pods = [p for p in client.list(Pod, namespace=namespace, labels={ROLE_LABEL: ROLE_EXECUTOR})]
        running = [p for p in pods if p.status is not None and p.status.phase == "Running"]
        return running if len(running) == 100 else None

    running = wait_for("100 executors to run", all_running, timeout=300)

    slots_seen: set[int] = set()
    for executor in running:  # every executor, not a sample
        job = executor.metadata.labels[JOB_LABEL]
        k = int(job.removeprefix("job-"))
        given = int((executor.metadata.annotations or {})[SLOT_ANNOTATION])
        assert executor.spec.nodeName == nodes[k], f"{executor.metadata.name} ran on {executor.spec.nodeName}"
        assert given in {k + 25 * p for p in range(4)}, f"{executor.metadata.name} got slot {given}"
        assert given not in slots_seen, f"slot {given} given twice"
        slots_seen.add(given)
    table = wait_for(
        "100 occupied slots",
        lambda: (s := status_of(esi_operators, namespace))["counts"].get("occupied") == 100 and s,
        timeout=60,
    )
    by_pod = {s["pod"]: s["id"] for s in table["slots"]}
    assert {e.metadata.name: int((e.metadata.annotations or {})[SLOT_ANNOTATION]) for e in running} == by_pod


def test_two_testbeds_one_with_room_one_needing_preemption(
    esi_operators: LocalCluster,
    client: Client,
    namespace: str,
    unique: str,
    add_nodes: AddNodes,
    second_scheduler: Callable[[str], SecondScheduler],
    fed_extender: tuple[str, SlotIndex],
) -> None:
    url, index = fed_extender
    # Testbed "roomy": one 1-cpu slot on each of two 2-cpu nodes (room beside the ghost). Testbed "tight":
    # two 1-cpu slots on one 2-cpu node (full with its ghosts), so its executors must evict ghosts.
    roomy, tight = f"esi.test/roomy-{unique}", f"esi.test/tight-{unique}"
    roomy_nodes = [add_nodes(1, cpu="2", labels={roomy: str(i)})[0] for i in range(2)]
    (tight_node,) = add_nodes(1, cpu="2", labels={tight: "0"})
    size = {"cpu": "1", "memory": "1Gi"}
    for name, label, per_node in (("roomy", roomy, 1), ("tight", tight, 2)):
        create_in(
            esi_operators,
            namespace,
            testbed_manifest(nodeLabel=label, slotsPerNode=per_node, resourcesPerSlot=size)
            | {"metadata": {"name": name}},
        )
    wait_for("testbed roomy Ready", lambda: _ready(esi_operators, namespace, "roomy", 2), timeout=60)
    wait_for("testbed tight Ready", lambda: _ready(esi_operators, namespace, "tight", 2), timeout=60)
    for name, testbed, jobs in (("s-roomy", "roomy", [("x", [1])]), ("s-tight", "tight", [("y", [0, 1])])):
        create_in(
            esi_operators,
            namespace,
            scheduling_manifest(testbed={"name": testbed}, queueBased=[{"name": job} for job, _ in jobs])
            | {"metadata": {"name": name}},
        )
        status = {
            "status": {
                "state": "Running",
                "jobs": [{"name": job, "state": "Reserved", "executors": len(ids), "slots": ids} for job, ids in jobs],
            }
        }
        esi_operators.kubectl(
            "patch",
            "-n",
            namespace,
            "scheduling",
            name,
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps(status),
        )
    wait_for(
        "the extender to see both reservations",
        lambda: (
            sum(s.state == SlotState.RESERVED for t in ("roomy", "tight") for s in index.slots(namespace, t) or ()) == 3
        ),
        timeout=60,
    )

    scheduler = second_scheduler(url)
    client.create(
        executor_pod(
            "x-0", namespace, pool=unique, scheduler=scheduler.settings.scheduler_name, job="x", testbed="roomy"
        )
    )
    for e in range(2):
        client.create(
            executor_pod(
                f"y-{e}", namespace, pool=unique, scheduler=scheduler.settings.scheduler_name, job="y", testbed="tight"
            )
        )

    assert wait_for("x-0 to run", running_on(client, "x-0", namespace), timeout=90) == roomy_nodes[1]
    for e in range(2):
        assert wait_for(f"y-{e} to run", running_on(client, f"y-{e}", namespace), timeout=90) == tight_node

    def ends_as(name: str, ghosts: int, occupied: int) -> bool:
        status = status_of(esi_operators, namespace, name)
        own = [
            p
            for p in client.list(Pod, namespace=namespace, labels={TESTBED_LABEL: name, ROLE_LABEL: "ghost"})
            if p.metadata is not None and p.metadata.deletionTimestamp is None
        ]
        return status.get("counts", {}).get("occupied") == occupied and len(own) == ghosts

    wait_for("roomy: one ghost, one executor", lambda: ends_as("roomy", 1, 1), timeout=60)
    wait_for("tight: no ghost, two executors", lambda: ends_as("tight", 0, 2), timeout=60)


def _ready(cluster: LocalCluster, namespace: str, name: str, slots: int) -> bool:
    status = status_of(cluster, namespace, name)
    return status.get("state") == "Ready" and status.get("counts", {}).get("slots") == slots


def test_an_executor_whose_slot_other_pods_fill_waits_says_why_and_runs_once_they_go(
    esi_operators: LocalCluster,
    client: Client,
    namespace: str,
    unique: str,
    add_nodes: AddNodes,
    second_scheduler: Callable[[str], SecondScheduler],
    fed_extender: tuple[str, SlotIndex],
) -> None:
    """On a node the Testbed shares, another pod holds the room of a reserved slot (two schedulers gave it
    twice, or it came while the slot had no ghost). A kubelet would refuse an executor bound there — and its
    application would ask for another, into the same room, until it gave up. The executor waits instead, and
    its PodScheduled condition says why; it is bound once the room is back. The namespace fixture holds every
    pod here to a kubelet's admission."""
    url, index = fed_extender
    label = f"esi.test/slots-{unique}"
    (node,) = add_nodes(1, cpu="2", labels={label: "0"})
    client.create(pod("foreign", namespace, cpu="1", node_name=node))
    wait_for("the foreign pod to run", running_on(client, "foreign", namespace))
    create_testbed(esi_operators, namespace, label)
    wait_for("testbed tb Degraded with 2 slots", settled(esi_operators, namespace, 2, "Degraded"), timeout=60)
    assert wait_for("the ghost of the slot with room", ghosts_when(client, namespace, 1), timeout=60) == {0: node}
    assert slot(esi_operators, namespace, 1)["noRoom"] == (
        f"other pods on node {node} request 1 cpu and 64Mi memory of its 2 cpu and 4Gi memory: "
        "room for 1 of its 2 slots"
    )

    reserve_for_wordcount(esi_operators, namespace, 1)
    wait_for(
        "the extender to see slot 1 reserved and without room",
        lambda: any(
            s.id == 1 and s.state == SlotState.RESERVED and s.no_room for s in index.slots(namespace, "tb") or ()
        ),
        timeout=30,
    )
    scheduler = second_scheduler(url)
    client.create(executor_pod("wordcount-exec-1", namespace, pool=unique, scheduler=scheduler.settings.scheduler_name))

    why = wait_for(
        "the scheduler to say why it waits",
        lambda: scheduler_refusal(client.get(Pod, "wordcount-exec-1", namespace=namespace).to_dict()),
    )
    assert f"slot 1 of testbed tb has no room: other pods on node {node} request 1 cpu" in why
    waiting = client.get(Pod, "wordcount-exec-1", namespace=namespace)
    assert waiting.spec is not None
    assert waiting.spec.nodeName is None, "not bound into room its kubelet would refuse it"

    client.delete(Pod, "foreign", namespace=namespace)

    assert wait_for("the executor to run", running_on(client, "wordcount-exec-1", namespace), timeout=90) == node
    assert wait_for("slot 1 occupied", lambda: slot(esi_operators, namespace, 1)["state"] == "Occupied", timeout=30)
    assert "noRoom" not in slot(esi_operators, namespace, 1)
