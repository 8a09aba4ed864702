"""The Testbed reconciler on the real cluster: ghost pods per slot, interleaved ids, growth and shrinkage
with node labels, capacity problems reported, never an executor touched."""

from __future__ import annotations

import json

from lightkube import Client
from lightkube.resources.core_v1 import Pod

from esi.objects.ghosts import ghost_name
from esi.objects.names import ROLE_GHOST, ROLE_LABEL, SLOT_ANNOTATION, TESTBED_LABEL
from infra.local_cluster import LocalCluster
from tests.integration.conftest import AddNodes
from tests.integration.esi_objects import ghosts_when, settled, status_of
from tests.integration.kube import create_testbed, executor_pod, get_or_none, wait_for
from tests.integration.kube import pod as ordinary_pod


def test_two_labelled_nodes_with_two_slots_get_four_interleaved_ghosts(
    esi_operators: LocalCluster, client: Client, namespace: str, unique: str, add_nodes: AddNodes
) -> None:
    label = f"esi.test/slots-{unique}"
    (first,) = add_nodes(1, cpu="4", labels={label: "1"})
    (second,) = add_nodes(1, cpu="4", labels={label: "0"})
    create_testbed(esi_operators, namespace, label)

    status = wait_for("testbed tb to be Ready with 4 slots", settled(esi_operators, namespace, 4), timeout=60)

    # Node "second" carries node id 0, so it holds ids 0 and 2.
    table = [(s["id"], s["nodeName"], s["position"], s["state"]) for s in status["slots"]]
    assert table == [(0, second, 0, "Free"), (1, first, 0, "Free"), (2, second, 1, "Free"), (3, first, 1, "Free")]
    assert status["counts"] == {"nodes": 2, "slots": 4, "free": 4, "reserved": 0, "occupied": 0}
    assert wait_for("four running ghosts", ghosts_when(client, namespace, 4)) == {
        0: second,
        1: first,
        2: second,
        3: first,
    }
    columns = esi_operators.kubectl("get", "tb", "tb", "-n", namespace, "--no-headers").split()
    assert columns[1:5] == ["2", "4", "4", "Ready"]


def test_labelling_nodes_grows_and_shrinks_the_testbed(
    esi_operators: LocalCluster, client: Client, namespace: str, unique: str, add_nodes: AddNodes
) -> None:
    label = f"esi.test/slots-{unique}"
    nodes = add_nodes(4, cpu="4")
    create_testbed(esi_operators, namespace, label)
    wait_for("an empty testbed", settled(esi_operators, namespace, 0), timeout=60)

    for labelled, expected in ((1, 2), (2, 4), (4, 8)):
        for i, node in enumerate(nodes[:labelled]):
            esi_operators.kubectl("label", "node", node, f"{label}={i}", "--overwrite")
        wait_for(f"{expected} slots", settled(esi_operators, namespace, expected), timeout=60)
        wait_for(f"{expected} ghosts", ghosts_when(client, namespace, expected), timeout=60)

    for node in nodes[2:]:
        esi_operators.kubectl("label", "node", node, f"{label}-")
    status = wait_for("4 slots again", settled(esi_operators, namespace, 4), timeout=60)
    assert {s["nodeName"] for s in status["slots"]} == set(nodes[:2])
    assert set(wait_for("4 ghosts again", ghosts_when(client, namespace, 4), timeout=60).values()) == set(nodes[:2])


# Well inside the reconciler's resync (30 s): only the event of the pod or node itself can wake it this soon.
AT_ONCE = 10


def test_a_pod_or_label_leaving_a_node_changes_the_testbed_at_once(
    esi_operators: LocalCluster, client: Client, namespace: str, unique: str, add_nodes: AddNodes
) -> None:
    label = f"esi.test/slots-{unique}"
    first, second = add_nodes(2, cpu="2500m")
    esi_operators.kubectl("label", "node", first, f"{label}=0")
    client.create(ordinary_pod("ordinary", namespace, cpu="1", node_name=first))
    create_testbed(esi_operators, namespace, label)
    wait_for("a node without room for its slots", settled(esi_operators, namespace, 2, "Degraded"), timeout=60)
    assert wait_for("a ghost in the room left", ghosts_when(client, namespace, 1), timeout=AT_ONCE) == {0: first}

    client.delete(Pod, "ordinary", namespace=namespace, grace_period=0)
    wait_for("its ghosts once the pod is gone", ghosts_when(client, namespace, 2), timeout=AT_ONCE)
    esi_operators.kubectl("label", "node", second, f"{label}=1")
    wait_for("four ghosts with a second node", ghosts_when(client, namespace, 4), timeout=AT_ONCE)
    esi_operators.kubectl("label", "node", second, f"{label}-")
    status = wait_for("two slots without it", settled(esi_operators, namespace, 2), timeout=AT_ONCE)
    assert {s["nodeName"] for s in status["slots"]} == {first}


def test_a_node_without_room_for_its_slots_is_reported_and_only_the_room_it_has_is_filled(
    esi_operators: LocalCluster, client: Client, namespace: str, unique: str, add_nodes: AddNodes
) -> None:
    label = f"esi.test/slots-{unique}"
    (small,) = add_nodes(1, cpu="1500m", labels={label: "0"})
    create_testbed(esi_operators, namespace, label)

    status = wait_for("a degraded testbed", settled(esi_operators, namespace, 2, "Degraded"), timeout=60)
    assert wait_for("a ghost in the room there is", ghosts_when(client, namespace, 1), timeout=AT_ONCE) == {0: small}
    without = {s["id"]: s.get("noRoom") for s in status_of(esi_operators, namespace)["slots"]}
    assert without == {0: None, 1: f"node {small} has 1500m cpu and 4Gi memory: room for 1 of its 2 slots"}

    healthy = next(c for c in status["conditions"] if c["type"] == "Healthy")
    assert healthy["status"] == "False"
    assert small in healthy["message"]
    assert "500m cpu" in healthy["message"]
    events = esi_operators.kubectl("get", "events", "-n", namespace, "-o", "json")
    reasons = {(e["reason"], e["type"]) for e in json.loads(events)["items"] if e["involvedObject"]["name"] == "tb"}
    assert any(kind == "Warning" for _, kind in reasons), reasons


def test_a_ghost_evicted_for_an_executor_is_not_put_back_while_the_executor_waits(
    esi_operators: LocalCluster, client: Client, namespace: str, unique: str, add_nodes: AddNodes
) -> None:
    label = f"esi.test/slots-{unique}"
    (node,) = add_nodes(1, cpu="4", labels={label: "0"})
    create_testbed(esi_operators, namespace, label)
    before = wait_for("two ghosts", ghosts_when(client, namespace, 2), timeout=60)
    assert before == {0: node, 1: node}
    # The extender gave the executor slot 0; no scheduler will bind it (a scheduler that does not exist).
    executor = executor_pod("exec-0", namespace, pool=unique, scheduler="nobody")
    executor.metadata.annotations = {SLOT_ANNOTATION: "0"}
    client.create(executor)
    wait_for("slot 0 given to exec-0", lambda: status_of(esi_operators, namespace)["slots"][0]["state"] == "Reserved")

    # What the extender does when it binds the executor: it evicts the slot's ghost first.
    esi_operators.kubectl("delete", "pod", ghost_name("tb", 0), "-n", namespace, "--wait")
    # Slot 1's ghost deleted after it: once its replacement exists, the reconciler has decided on a view
    # that no longer holds slot 0's ghost either.
    first_ghost_1 = uid_of(client, namespace, ghost_name("tb", 1))
    esi_operators.kubectl("delete", "pod", ghost_name("tb", 1), "-n", namespace, "--wait")
    wait_for("slot 1's ghost back", lambda: uid_of(client, namespace, ghost_name("tb", 1)) not in (None, first_ghost_1))

    assert ghost_pods(client, namespace) == [ghost_name("tb", 1)]
    slot_0 = status_of(esi_operators, namespace)["slots"][0]
    assert (slot_0["state"], slot_0.get("job"), slot_0.get("pod")) == ("Reserved", "wordcount", None)

    # The executor goes without being bound: its slot is Free and held by a ghost again.
    client.delete(Pod, "exec-0", namespace=namespace, grace_period=0)
    assert wait_for("slot 0's ghost back", ghosts_when(client, namespace, 2), timeout=60) == before


def uid_of(client: Client, namespace: str, name: str) -> str | None:
    pod = get_or_none(client, Pod, name, namespace)
    return None if pod is None else str(pod.metadata.uid)


def ghost_pods(client: Client, namespace: str) -> list[str]:
    """The names of tb's ghost pods, whatever their phase, that are not being deleted."""
    pods = client.list(Pod, namespace=namespace, labels={TESTBED_LABEL: "tb", ROLE_LABEL: ROLE_GHOST})
    return sorted(str(p.metadata.name) for p in pods if p.metadata is not None and not p.metadata.deletionTimestamp)
