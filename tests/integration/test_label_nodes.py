"""``esi label-nodes`` against the session's cluster and its API: the nodes with the most room get the Testbed's
label (and only they), the Testbed's slots follow, and a request too large is refused changing nothing."""

from __future__ import annotations

from typing import Any

from lightkube import Client
from lightkube.resources.core_v1 import Node
from typer.testing import CliRunner, Result

from esi.client import EsiClient
from esi.client.cli import app
from infra.local_cluster import LocalCluster
from tests.integration.conftest import AddNodes, EsiApi
from tests.integration.esi_objects import settled
from tests.integration.kube import create_testbed, pod, running_on, wait_for


def esi(endpoint: EsiApi, namespace: str, *args: str) -> Result:
    """The ``esi`` command, as a user runs it against the session's API."""
    options = ["--url", endpoint.url, "--token", endpoint.token, "-n", namespace]
    return CliRunner().invoke(app, [*options, *args], env={"COLUMNS": "200"})


def labels(client: Client, names: list[str], label: str) -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for name in names:
        node: Any = client.get(Node, name)
        found[name] = (node.metadata.labels or {}).get(label)
    return found


def slot_nodes(cluster: LocalCluster, namespace: str, slots: int) -> dict[str, int]:
    """Testbed tb's nodes and ids once it is Ready with ``slots`` slots."""
    status = wait_for(f"the Testbed Ready with {slots} slots", settled(cluster, namespace, slots), timeout=60)
    return {slot["nodeName"]: slot["nodeId"] for slot in status["slots"]}


def test_the_nodes_with_most_room_are_labelled_and_the_testbed_takes_their_slots(
    esi_endpoint: EsiApi,
    esi_stack: LocalCluster,
    client: Client,
    namespace: str,
    unique: str,
    add_nodes: AddNodes,
) -> None:
    label = f"esi.test/label-nodes-{unique}"
    roomy, crowded, middle = (
        add_nodes(1, cpu="64", memory="128Gi")[0],
        add_nodes(1, cpu="64", memory="128Gi")[0],
        add_nodes(1, cpu="32", memory="64Gi")[0],
    )
    client.create(pod("busy", namespace, cpu="40", memory="1Gi", node_name=crowded))
    wait_for("the pod taking room on the crowded node", running_on(client, "busy", namespace))
    create_testbed(esi_stack, namespace, label)  # two slots of 1 cpu and 1Gi a node; no node labelled yet
    with EsiClient(esi_endpoint.url, token=esi_endpoint.token, namespace=namespace) as api:
        wait_for("the Testbed in the API", lambda: api.testbed("tb"))
    ours = [roomy, crowded, middle]

    dry = esi(esi_endpoint, namespace, "label-nodes", "tb", "--count", "2", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert "no node is labelled" in dry.stdout
    assert labels(client, ours, label) == dict.fromkeys(ours)

    done = esi(esi_endpoint, namespace, "label-nodes", "tb", "--count", "2")
    assert done.exit_code == 0, done.output
    # The most room in slots first: 64, then 32 (the crowded node has 24 beside its pod); ids by name.
    expected = dict(zip(sorted([roomy, middle]), ["0", "1"], strict=True))
    assert labels(client, ours, label) == {crowded: None, **expected}
    assert slot_nodes(esi_stack, namespace, 4) == {name: int(i) for name, i in expected.items()}

    too_many = esi(esi_endpoint, namespace, "label-nodes", "tb", "--count", "100")
    assert too_many.exit_code == 1
    assert "nodes Testbed tb asks for fit" in too_many.stderr
    assert labels(client, ours, label) == {crowded: None, **expected}, "a refusal changes nothing"

    # Asked again for one node, the Testbed keeps the node with the most room, its ghosts not counted against it.
    fewer = esi(esi_endpoint, namespace, "label-nodes", "tb", "--count", "1", "-o", "json")
    assert fewer.exit_code == 0, fewer.output
    assert labels(client, ours, label) == {roomy: expected[roomy], crowded: None, middle: None}
    assert slot_nodes(esi_stack, namespace, 2) == {roomy: int(expected[roomy])}
