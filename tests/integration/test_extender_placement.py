"""esi's extender, served by uvicorn, steering the real second kube-scheduler: an executor lands on exactly
its slot's node and deletes exactly that slot's ghost pod; nothing else on the node is touched.

The Testbed's slots and ghosts are set up by the test here (the Testbed reconciler does it in operation).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from lightkube import Client, KubeConfig
from lightkube.resources.core_v1 import Pod

from api.extender.app import create_extender_app
from api.extender.slot_index import IndexedSlot, SlotIndex
from api.threaded import serve_in_thread
from esi.objects.names import (
    GHOST_PRIORITY_CLASS,
    ROLE_GHOST,
    ROLE_LABEL,
    SLOT_ANNOTATION,
    TESTBED_LABEL,
)
from esi.resources.testbed import SlotState
from infra.local_cluster import LocalCluster
from infra.stacks.second_scheduler import SecondScheduler
from tests.integration.conftest import AddNodes
from tests.integration.kube import events, executor_pod, get_or_none, pod, running_on, wait_for


@pytest.fixture
def extender(esi_crds: LocalCluster) -> Iterator[tuple[str, SlotIndex]]:
    """esi's extender app on a free loopback port, binding in the cluster from a slot index the test fills:
    (URL prefix, its slot index)."""
    index = SlotIndex()
    index.pods_read([])  # the test's pods are all there is: any pod given no slot is bound as it is
    app = create_extender_app(index, kube_config=KubeConfig.from_file(esi_crds.kubeconfig), feed=False)
    with serve_in_thread(app, lifespan="on") as url:
        yield f"{url}/extender", index


def ghost(name: str, namespace: str, node: str, slot: int) -> Any:
    manifest = pod(name, namespace, cpu="1", memory="1Gi", node_name=node, priority_class_name=GHOST_PRIORITY_CLASS)
    manifest.metadata.labels = {ROLE_LABEL: ROLE_GHOST, TESTBED_LABEL: "tb"}
    manifest.metadata.annotations = {SLOT_ANNOTATION: str(slot)}
    return manifest


def two_full_nodes(client: Client, namespace: str, node_a: str, node_b: str) -> dict[int, str]:
    """Ghosts of testbed tb's slots 0-3, interleaved (0 and 2 on A, 1 and 3 on B), plus a foreign pod on B,
    filling both nodes of 2500m; returns slot -> node once all of them run."""
    places = {0: node_a, 1: node_b, 2: node_a, 3: node_b}
    for slot, node in places.items():
        client.create(ghost(f"ghost-{slot}", namespace, node, slot))
    client.create(pod("foreign", namespace, cpu="500m", node_name=node_b))
    for name in [*(f"ghost-{s}" for s in places), "foreign"]:
        wait_for(f"{name} to run", running_on(client, name, namespace))
    return places


def publish(client: Client, index: SlotIndex, namespace: str, places: dict[int, str], reserved: set[int]) -> None:
    """Give the extender tb's slot table as the Testbed reconciler would: slots ``reserved`` for job
    "wordcount", each slot's ghost as it is now."""
    uids = {s: client.get(Pod, f"ghost-{s}", namespace=namespace).metadata.uid for s in places}  # type: ignore[union-attr]
    index.replace_testbed(
        namespace,
        "tb",
        [
            IndexedSlot(
                s,
                n,
                SlotState.RESERVED if s in reserved else SlotState.FREE,
                job="wordcount" if s in reserved else None,
                ghost_uid=uids[s],
                ghost_name=f"ghost-{s}",
            )
            for s, n in places.items()
        ],
    )


def test_an_executor_takes_exactly_its_slot(
    esi_priority_classes: LocalCluster,
    client: Client,
    namespace: str,
    unique: str,
    add_nodes: AddNodes,
    second_scheduler: Callable[[str], SecondScheduler],
    extender: tuple[str, SlotIndex],
) -> None:
    url, index = extender
    node_a, node_b = add_nodes(2, cpu="2500m")
    places = two_full_nodes(client, namespace, node_a, node_b)
    # The Scheduling gave job "wordcount" slot 1: the executor takes the room of slot 1's ghost on node B, not
    # that of slot 3's, which is also there.
    publish(client, index, namespace, places, reserved={1})

    scheduler = second_scheduler(url)
    client.create(executor_pod("exec-1", namespace, pool=unique, scheduler=scheduler.settings.scheduler_name))

    node = wait_for("the executor to run", running_on(client, "exec-1", namespace), timeout=90)

    assert node == node_b
    assert get_or_none(client, Pod, "ghost-1", namespace) is None, "the slot's ghost was not deleted"
    for survivor in ("ghost-0", "ghost-2", "ghost-3", "foreign"):
        current = client.get(Pod, survivor, namespace=namespace)
        assert current.metadata is not None
        assert current.metadata.deletionTimestamp is None, f"{survivor} was touched"
    executor_uid = client.get(Pod, "exec-1", namespace=namespace).metadata.uid  # type: ignore[union-attr]
    assert index.slot_of(str(executor_uid)) == (namespace, "tb", 1)
    refusals = [e["message"] for e in events(esi_priority_classes, namespace, "FailedScheduling")]
    assert refusals == [], "the scheduler placed and bound it at the first try"


def test_a_ghost_made_since_under_the_same_name_is_not_deleted(
    esi_priority_classes: LocalCluster,
    client: Client,
    namespace: str,
    unique: str,
    add_nodes: AddNodes,
    second_scheduler: Callable[[str], SecondScheduler],
    extender: tuple[str, SlotIndex],
) -> None:
    """The extender deletes the ghost it saw (its UID a precondition of the DELETE): a ghost put back under the
    same name since then is left alone, and the executor waits until the extender has seen the new one."""
    url, index = extender
    node_a, node_b = add_nodes(2, cpu="2500m")
    places = two_full_nodes(client, namespace, node_a, node_b)
    publish(client, index, namespace, places, reserved={1})
    old_uid = client.get(Pod, "ghost-1", namespace=namespace).metadata.uid  # type: ignore[union-attr]
    client.delete(Pod, "ghost-1", namespace=namespace, grace_period=0)
    wait_for("ghost-1 to go", lambda: get_or_none(client, Pod, "ghost-1", namespace) is None)
    client.create(ghost("ghost-1", namespace, node_b, 1))
    wait_for("the new ghost-1 to run", running_on(client, "ghost-1", namespace))
    scheduler = second_scheduler(url)
    client.create(executor_pod("exec-1", namespace, pool=unique, scheduler=scheduler.settings.scheduler_name))

    refused = wait_for(
        "the binding to be refused",
        lambda: next(
            (m for m in (e["message"] for e in events(esi_priority_classes, namespace, "FailedScheduling")) if m),
            None,
        ),
    )

    assert "was replaced" in refused
    current = client.get(Pod, "ghost-1", namespace=namespace)
    assert current.metadata is not None
    assert current.metadata.deletionTimestamp is None, "the new ghost was touched"
    assert current.metadata.uid != old_uid
    unbound = client.get(Pod, "exec-1", namespace=namespace)
    assert unbound.spec is not None
    assert unbound.spec.nodeName is None
    publish(client, index, namespace, places, reserved={1})
    assert wait_for("the executor to run", running_on(client, "exec-1", namespace), timeout=60) == node_b
    assert get_or_none(client, Pod, "ghost-1", namespace) is None


def test_an_ordinary_pod_cannot_take_reserved_capacity(
    esi_priority_classes: LocalCluster, client: Client, namespace: str, unique: str, add_nodes: AddNodes
) -> None:
    (node,) = add_nodes(1, cpu="2")
    for slot in (0, 1):
        client.create(ghost(f"ghost-{slot}", namespace, node, slot))
    for slot in (0, 1):
        wait_for(f"ghost-{slot} to run", running_on(client, f"ghost-{slot}", namespace))

    client.create(pod("greedy", namespace, cpu="1", node_selector={"esi.test/pool": unique}))
    unschedulable = wait_for("the scheduler to give up on the pod", lambda: _unschedulable(client, "greedy", namespace))

    assert "Insufficient cpu" in unschedulable
    for slot in (0, 1):
        current = client.get(Pod, f"ghost-{slot}", namespace=namespace)
        assert current.metadata is not None
        assert current.metadata.deletionTimestamp is None


def _unschedulable(client: Client, name: str, namespace: str) -> str | None:
    current = client.get(Pod, name, namespace=namespace)
    for condition in (current.status.conditions or []) if current.status else []:
        if condition.type == "PodScheduled" and condition.reason == "Unschedulable":
            return condition.message or ""
    return None


def test_an_executor_created_before_its_reservation_is_known_runs_once_it_is(
    esi_priority_classes: LocalCluster,
    client: Client,
    namespace: str,
    unique: str,
    add_nodes: AddNodes,
    second_scheduler: Callable[[str], SecondScheduler],
    extender: tuple[str, SlotIndex],
) -> None:
    """The application's pods can reach the scheduler before the Testbed status that reserves their slots
    reaches the extender. Turned away as unschedulable, such a pod would wait for an unrelated cluster event
    or the scheduler's five-minute flush; a transient answer has it retried after the scheduler's backoff."""
    url, index = extender
    node_a, node_b = add_nodes(2, cpu="2500m")
    places = two_full_nodes(client, namespace, node_a, node_b)
    publish(client, index, namespace, places, reserved=set())
    scheduler = second_scheduler(url)
    client.create(executor_pod("exec-1", namespace, pool=unique, scheduler=scheduler.settings.scheduler_name))
    wait_for("the scheduler to try the executor", lambda: _scheduling_failed(client, "exec-1", namespace))

    publish(client, index, namespace, places, reserved={1})  # nothing the kube-scheduler watches changes with this

    assert wait_for("the executor to run", running_on(client, "exec-1", namespace), timeout=60) == node_b


def _scheduling_failed(client: Client, name: str, namespace: str) -> bool:
    current = client.get(Pod, name, namespace=namespace)
    conditions = (current.status.conditions or []) if current.status else []
    return any(c.type == "PodScheduled" and c.status == "False" for c in conditions)
