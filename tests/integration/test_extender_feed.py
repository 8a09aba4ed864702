"""The extender's index fed by watches alone: a Testbed's published slot table and its ghost pods reach the
index without anyone telling it, the real second kube-scheduler then puts an executor into exactly the
reserved slot, and once that executor is deleted the slot can be given again.

The Testbed's status and ghosts are written by the test here (the Testbed reconciler does it in operation).
"""

from __future__ import annotations

import json
from collections.abc import Callable

from lightkube import Client
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Pod

from api.index_feed import TestbedResource
from esi.slot_index import IndexedSlot, SlotIndex
from esi.testbed import SlotState
from infra.local_cluster import LocalCluster
from infra.second_scheduler import SecondScheduler
from tests.integration.conftest import AddNodes
from tests.integration.kube import executor_pod, get_or_none, running_on, wait_for
from tests.integration.test_extender_placement import two_full_nodes


def uid_of(client: Client, name: str, namespace: str) -> str:
    current = client.get(Pod, name, namespace=namespace)
    assert current.metadata is not None
    assert current.metadata.uid is not None
    return current.metadata.uid


def test_the_extender_follows_testbeds_and_pods(
    esi_priority_classes: LocalCluster,
    cluster: LocalCluster,
    client: Client,
    namespace: str,
    unique: str,
    add_nodes: AddNodes,
    second_scheduler: Callable[[str], SecondScheduler],
    fed_extender: tuple[str, SlotIndex],
) -> None:
    url, index = fed_extender
    node_a, node_b = add_nodes(2, cpu="2500m")
    places = two_full_nodes(client, namespace, node_a, node_b)
    ghosts = {s: uid_of(client, f"ghost-{s}", namespace) for s in places}

    # The Testbed publishes its slot table; a Scheduling gave job "wordcount" slot 1.
    client.create(
        TestbedResource(
            metadata=ObjectMeta(name="tb", namespace=namespace),
            spec={"nodeLabel": "esi.test/node", "slotsPerNode": 2, "resourcesPerSlot": {"cpu": "1", "memory": "1Gi"}},
        )
    )
    slots = [
        {"id": s, "nodeName": n, "nodeId": s % 2, "position": s // 2, "state": "Free", "pod": f"ghost-{s}"}
        | ({"state": "Reserved", "job": "wordcount", "scheduling": "sched"} if s == 1 else {})
        for s, n in places.items()
    ]
    status = {"state": "InUse", "slots": slots}
    cluster.kubectl("patch", "testbeds.esi.tu-berlin.de", "tb", "--namespace", namespace, "--subresource=status",
                    "--type=merge", "--patch", json.dumps({"status": status}))  # fmt: skip

    published = (
        IndexedSlot(0, node_a, SlotState.FREE, ghost_uid=ghosts[0]),
        IndexedSlot(1, node_b, SlotState.RESERVED, job="wordcount", ghost_uid=ghosts[1]),
        IndexedSlot(2, node_a, SlotState.FREE, ghost_uid=ghosts[2]),
        IndexedSlot(3, node_b, SlotState.FREE, ghost_uid=ghosts[3]),
    )
    wait_for("the index to show the Testbed's slots and ghosts", lambda: index.slots(namespace, "tb") == published)

    # Left alone, the scheduler would evict the younger ghost of node B (slot 3's): the index says slot 1's.
    scheduler = second_scheduler(url)
    client.create(executor_pod("exec-1", namespace, pool=unique, scheduler=scheduler.settings.scheduler_name))
    node = wait_for("the executor to run", running_on(client, "exec-1", namespace), timeout=90)

    assert node == node_b
    assert get_or_none(client, Pod, "ghost-1", namespace) is None, "the slot's ghost was not evicted"
    for survivor in ("ghost-0", "ghost-2", "ghost-3", "foreign"):
        current = client.get(Pod, survivor, namespace=namespace)
        assert current.metadata is not None
        assert current.metadata.deletionTimestamp is None, f"{survivor} was touched"
    first = uid_of(client, "exec-1", namespace)
    assert index.slot_of(first) == (namespace, "tb", 1)
    wait_for("the index to see slot 1's ghost gone", lambda: _victim(index, namespace, 1) is None)

    client.delete(Pod, "exec-1", namespace=namespace)

    wait_for("the index to forget the deleted executor", lambda: index.slot_of(first) is None)
    client.create(executor_pod("exec-2", namespace, pool=unique, scheduler=scheduler.settings.scheduler_name))
    node = wait_for("the next executor to run", running_on(client, "exec-2", namespace), timeout=90)
    assert node == node_b
    assert index.slot_of(uid_of(client, "exec-2", namespace)) == (namespace, "tb", 1)


def _victim(index: SlotIndex, namespace: str, slot: int) -> str | None:
    slots = index.slots(namespace, "tb") or ()
    return next((s.ghost_uid for s in slots if s.id == slot), "(no such slot)")
