"""Proof that the local control plane is the real thing: default scheduling, a second kube-scheduler that
consults an HTTP extender for filtering, preemption decided together with that extender, and KWOK writing to
pods as a kubelet does."""

from __future__ import annotations

import json
import ssl
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lightkube import Client
from lightkube.resources.core_v1 import Node, Pod

from api.extender.wire import ExtenderArgs, ExtenderPreemptionArgs
from infra.local_cluster import KWOK_NODE_ANNOTATION, LocalCluster, NodeSpec
from infra.stacks.second_scheduler import SecondScheduler
from tests.integration.admission import KubeletAdmission
from tests.integration.conftest import AddNodes
from tests.integration.kube import (
    events,
    get_or_none,
    made_again_while_behind,
    phase_of,
    pod,
    running_on,
    wait_for,
    while_the_watch_was_lost,
)
from tests.integration.recording_extender import RecordingExtender, serve


def test_default_scheduler_runs_a_pod_on_a_kwok_node(client: Client, namespace: str) -> None:
    client.create(pod("plain", namespace, node_selector={"esi.test/pool": "shared"}))

    node_name = wait_for("pod plain to run", running_on(client, "plain", namespace))

    node = client.get(Node, node_name)
    assert node.metadata is not None
    assert node.metadata.annotations is not None
    assert node.metadata.annotations[KWOK_NODE_ANNOTATION] == "fake"


def test_kwok_deletes_only_the_pod_it_ran(
    cluster: LocalCluster, client: Client, namespace: str, add_nodes: AddNodes
) -> None:
    """A pod deleted and made again under the same name while KWOK was behind keeps running: KWOK's deletion
    carries the deleted pod's UID as precondition, as a kubelet's does (test_real_nodes: the same with a real
    kubelet); a DELETE by name would take the new pod."""
    (node,) = add_nodes(1)
    manifest = pod("again", namespace, node_name=node)

    uid, current = made_again_while_behind(
        client, manifest, manifest, lambda: cluster.paused("kwok-controller"), seen_running=True
    )

    assert current is not None, "KWOK deleted the pod made again"
    assert (current.metadata.uid, current.metadata.deletionTimestamp) == (uid, None)
    assert current.status.phase == "Running"


def test_kwok_gives_a_pod_made_again_none_of_the_old_ones_status(
    cluster: LocalCluster, client: Client, namespace: str, unique: str, add_nodes: AddNodes
) -> None:
    """A pod bound to a KWOK node, deleted and made again unbound while KWOK was behind, stays Pending: KWOK's
    status patches carry the pod's UID, as a kubelet's do (test_real_nodes: the same with a real kubelet); a
    patch by name would mark the unbound pod Running, with the old one's IP."""
    (node,) = add_nodes(1)
    first = pod("again", namespace, node_name=node)
    unbound = pod("again", namespace, node_selector={"esi.test/nowhere": unique})

    uid, current = made_again_while_behind(
        client, first, unbound, lambda: cluster.paused("kwok-controller"), seen_running=False
    )

    assert current is not None
    assert current.metadata.uid == uid
    assert (current.status.phase, current.status.hostIP, current.status.podIP) == ("Pending", None, None)


def test_kwok_admits_a_pod_as_a_kubelet_does_and_refuses_one_that_does_not_fit(
    cluster: LocalCluster, client: Client, namespace: str, add_nodes: AddNodes, kubelet_admission: KubeletAdmission
) -> None:
    """KWOK judges a pod bound to its node against the pods it admitted there before (test_real_nodes: the same
    pod gets the real kubelet's answer), and room a pod let go of is room again."""
    kubelet_admission.expect_refusals(namespace)
    (node,) = add_nodes(1, cpu="1", memory="2Gi")
    client.create(pod("first", namespace, cpu="600m", node_name=node))
    wait_for("the first pod to run", running_on(client, "first", namespace))

    client.create(pod("second", namespace, cpu="600m", node_name=node))
    refused = wait_for("KWOK's answer", phase_of(client, "second", namespace, "Failed", "Running"))

    assert (refused.status.reason, refused.status.message) == (
        "OutOfcpu",
        "Pod was rejected: Node didn't have enough resource: cpu, requested: 600, used: 600, capacity: 1000",
    )
    assert refused.status.podIP is None, "refused: it never ran"
    told = wait_for("the refusal told", lambda: events(cluster, namespace, "OutOfcpu"))
    assert [(e["type"], e["involvedObject"]["name"]) for e in told] == [("Warning", "second")]

    client.delete(Pod, "first", namespace=namespace)
    wait_for("the first pod to go", lambda: get_or_none(client, Pod, "first", namespace) is None)
    client.create(pod("third", namespace, cpu="600m", node_name=node))
    assert wait_for("the third pod to run", running_on(client, "third", namespace)) == node
    assert client.get(Pod, "second", namespace=namespace).status.phase == "Failed", "a refused pod stays refused"  # type: ignore[union-attr]


def test_kwok_after_a_lost_watch_frees_the_room_of_a_pod_gone_and_judges_the_new_pods_oldest_first(
    tmp_path: Path, unique: str
) -> None:
    """The API server crashes and comes back while KWOK is behind, without the pods' history from where KWOK was; a
    pod of KWOK's node is deleted meanwhile, and two pods each needing its room are made. KWOK lists the pods
    again, as a kubelet does (test_real_nodes: the same with a real kubelet): the deleted pod's room is free, and
    of the two new pods the older is admitted and the newer refused. An account that waited for the deletion, which
    never comes, would refuse both; one that took the listing in its order (by name) would admit the newer. KWOK
    also lets go of the deleted pod's IP, as at a deletion: its pool hands a freed address out first, and no other
    pod of this cluster takes one, so the older pod gets it. A cluster of its own: its API server crashes."""
    cluster = LocalCluster(f"relist-{unique}", workdir=tmp_path / "kwok")
    try:
        cluster.create([NodeSpec("a", cpu="2")])

        lost = while_the_watch_was_lost(
            cluster,
            lambda name: pod(name, "default", cpu="1500m", node_name="a"),
            lambda: cluster.paused("kwok-controller"),
        )

        assert (lost.older, lost.newer) == (("Running", None), ("Failed", "OutOfcpu"))
        assert lost.first_ip is not None
        assert lost.older_ip == lost.first_ip, "the deleted pod's IP was freed"
    finally:
        cluster.delete()


def test_second_scheduler_places_a_pod_where_the_extender_allows(
    client: Client,
    namespace: str,
    unique: str,
    add_nodes: AddNodes,
    second_scheduler: Callable[..., SecondScheduler],
) -> None:
    nodes = add_nodes(3)
    allowed = nodes[1]
    with serve(RecordingExtender(allowed_nodes={allowed})) as extender:
        scheduler = second_scheduler(extender.url, bind_verb=None)
        client.create(
            pod(
                "steered",
                namespace,
                scheduler=scheduler.settings.scheduler_name,
                node_selector={"esi.test/pool": unique},
            )
        )

        node_name = wait_for("pod steered to run", running_on(client, "steered", namespace))

    assert node_name == allowed
    filters = extender.calls_for("filter", "steered")
    assert filters, f"the extender saw no filter call for the pod; it saw {extender.verbs()}"
    # Every feasible node was offered, not a sample: percentageOfNodesToScore is 100.
    assert set(filters[0]["NodeNames"]) == set(nodes)
    # esi's wire models read what this kube-scheduler really sends.
    assert ExtenderArgs.model_validate(filters[0]).candidate_nodes() == filters[0]["NodeNames"]


def test_second_scheduler_runs_the_configuration_it_was_given(
    cluster: LocalCluster,
    second_scheduler: Callable[..., SecondScheduler],
) -> None:
    scheduler = second_scheduler("http://127.0.0.1:9/extender")  # never called: no pod uses it
    insecure = ssl.create_default_context()
    insecure.check_hostname = False
    insecure.verify_mode = ssl.CERT_NONE
    with urllib.request.urlopen(f"https://127.0.0.1:{scheduler.port}/configz", context=insecure) as response:
        loaded = json.load(response)["componentconfig"]

    # /configz serialises the scheduler's internal configuration type: Go field names.
    assert loaded["PercentageOfNodesToScore"] == 100
    assert [p["SchedulerName"] for p in loaded["Profiles"]] == [scheduler.settings.scheduler_name]
    assert loaded["ClientConnection"]["QPS"] == scheduler.settings.qps
    assert loaded["ClientConnection"]["Burst"] == scheduler.settings.burst
    (extender,) = loaded["Extenders"]
    assert extender["URLPrefix"] == "http://127.0.0.1:9/extender"
    assert (extender["FilterVerb"], extender["BindVerb"], extender["PreemptVerb"], extender["NodeCacheCapable"]) == (
        "filter",
        "bind",
        "",
        True,
    )
    # Executors are not held back by their slot's ghost: no resource count, no preemption; the rest stays.
    multi_point = loaded["Profiles"][0]["Plugins"]["MultiPoint"]
    enabled = {p["Name"] for p in multi_point["Enabled"]}
    assert {p["Name"] for p in multi_point["Disabled"]} == {"NodeResourcesFit", "DefaultPreemption"}
    assert not enabled & {"NodeResourcesFit", "DefaultPreemption"}
    assert {"TaintToleration", "NodeAffinity", "NodeUnschedulable", "DefaultBinder"} <= enabled


def test_preemption_follows_the_extenders_choice_of_victims(
    client: Client,
    namespace: str,
    unique: str,
    add_nodes: AddNodes,
    second_scheduler: Callable[..., SecondScheduler],
    priority_classes: Callable[[Sequence[tuple[str, int]]], None],
) -> None:
    # Two full nodes. On its own the scheduler would evict on node A (its victim has the lower priority);
    # the extender only allows node B, so B's victim must go and A's must survive.
    node_a, node_b = add_nodes(2, cpu="1")
    priority_classes([("lowest", 10), ("low", 100), ("high", 1000)])
    client.create(pod("victim-a", namespace, cpu="1", node_name=node_a, priority_class_name=f"lowest-{unique}"))
    client.create(pod("victim-b", namespace, cpu="1", node_name=node_b, priority_class_name=f"low-{unique}"))
    for name in ("victim-a", "victim-b"):
        wait_for(f"pod {name} to run", running_on(client, name, namespace))

    with serve(RecordingExtender(allowed_nodes={node_b})) as extender:
        scheduler = second_scheduler(extender.url, bind_verb=None)
        client.create(
            pod(
                "urgent",
                namespace,
                cpu="1",
                scheduler=scheduler.settings.scheduler_name,
                priority_class_name=f"high-{unique}",
                node_selector={"esi.test/pool": unique},
            )
        )

        node_name = wait_for("pod urgent to run", running_on(client, "urgent", namespace), timeout=90)

    assert node_name == node_b
    assert get_or_none(client, Pod, "victim-b", namespace) is None, "the allowed victim was not evicted"
    survivor: Any = client.get(Pod, "victim-a", namespace=namespace)
    assert survivor.metadata.deletionTimestamp is None
    assert survivor.status.phase == "Running"
    preempts = extender.calls_for("preempt", "urgent")
    assert preempts, f"the extender saw no preempt call for the pod; it saw {extender.verbs()}"
    assert set(preempts[0]["NodeNameToMetaVictims"]) == {node_a, node_b}, "the scheduler offered both nodes"
    assert ExtenderPreemptionArgs.model_validate(preempts[0]).candidate_nodes() == sorted([node_a, node_b])
