"""The kubelet's admission as the integration tests keep it for KWOK nodes (tests/integration/admission.py)."""

from __future__ import annotations

from typing import Any

from tests.integration.admission import AdmissionLedger, Room, room_of_node

ROOMS = {"kwok": Room(cpu=2000, memory=4 * 2**30, pods=3)}


def pod(uid: str, node: str | None = "kwok", cpu: str = "1", memory: str = "1Gi", phase: str = "Pending") -> Any:
    return {
        "metadata": {"name": f"p-{uid}", "namespace": "ns", "uid": uid},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "main", "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
        },
        "status": {"phase": phase},
    }


def ledger() -> AdmissionLedger:
    return AdmissionLedger(ROOMS.get)


def test_pods_that_fit_beside_the_admitted_ones_are_admitted_and_the_next_is_refused_in_the_kubelets_words() -> None:
    admission = ledger()

    assert admission.seen(pod("a")) is None
    assert admission.seen(pod("b", cpu="500m")) is None
    refusal = admission.seen(pod("c", cpu="600m"))

    assert refusal is not None
    assert (refusal.pod, refusal.node, refusal.reason) == ("p-c", "kwok", "OutOfcpu")
    assert refusal.message == (
        "Pod was rejected: Node didn't have enough resource: cpu, requested: 600, used: 1500, capacity: 2000"
    )


def test_memory_and_the_pod_count_are_refused_too() -> None:
    admission = ledger()
    assert admission.seen(pod("a", cpu="0", memory="3Gi")) is None
    memory = admission.seen(pod("b", cpu="0", memory="2Gi"))
    assert memory is not None
    assert memory.reason == "OutOfmemory"
    assert admission.seen(pod("c", cpu="0", memory="0")) is None
    assert admission.seen(pod("d", cpu="0", memory="0")) is None
    count = admission.seen(pod("e", cpu="0", memory="0"))
    assert count is not None
    assert count.reason == "OutOfpods"


def test_a_pod_is_judged_once_when_first_seen_bound() -> None:
    admission = ledger()
    assert admission.seen(pod("a", node=None, cpu="2")) is None  # not bound yet
    assert admission.seen(pod("a", cpu="2")) is None  # bound: admitted
    assert admission.seen(pod("a", cpu="2", phase="Running")) is None  # the same pod again
    refusal = admission.seen(pod("b", cpu="1"))
    assert refusal is not None, "the admitted pod still holds the room"
    assert admission.seen(pod("b", cpu="1", phase="Running")) is None, "a refused pod is not judged again"


def test_room_is_freed_when_a_pod_finishes_or_is_gone_and_a_refused_pod_never_held_any() -> None:
    admission = ledger()
    assert admission.seen(pod("a", cpu="2")) is None
    assert admission.seen(pod("b", cpu="2")) is not None
    admission.seen(pod("a", cpu="2", phase="Succeeded"))
    assert admission.seen(pod("c", cpu="2")) is None
    admission.gone(pod("c", cpu="2"))
    admission.gone(pod("b", cpu="2"))
    assert admission.seen(pod("d", cpu="2")) is None


def test_pods_listed_are_admitted_as_they_are_and_other_nodes_are_left_alone() -> None:
    admission = ledger()
    admission.listed([pod("a", cpu="2", phase="Running")])
    assert admission.seen(pod("b", cpu="1")) is not None, "the listed pod holds its room"
    assert admission.seen(pod("c", node="real", cpu="64")) is None, "a real node's kubelet judges its pods"


def test_a_listing_after_the_watch_lost_its_place_replaces_the_account() -> None:
    admission = ledger()
    admission.listed([])
    assert admission.seen(pod("a", cpu="2")) is None
    assert admission.listed([pod("b", cpu="1", phase="Running")]) == [], "a went meanwhile, b came and fits"
    assert admission.seen(pod("c", cpu="1")) is None, "a's room is free"
    refusal = admission.seen(pod("d", cpu="1"))
    assert refusal is not None, "b holds its room"
    assert "used: 2000" in refusal.message


def test_pods_that_came_while_the_watch_had_lost_its_place_are_judged_oldest_first() -> None:
    admission = ledger()
    admission.listed([pod("a", cpu="1", phase="Running")])
    late, early = pod("late", cpu="1"), pod("early", cpu="1", phase="Running")
    late["metadata"]["creationTimestamp"] = "2026-11-27T10:00:02Z"
    early["metadata"]["creationTimestamp"] = "2026-11-27T10:00:01Z"

    refused = admission.listed([pod("a", cpu="1", phase="Running"), late, early])

    assert [(r.pod, r.reason) for r in refused] == [("p-late", "OutOfcpu")], "a and early hold the room"
    assert admission.listed([pod("a", cpu="1", phase="Running"), late, early]) == [], "each is judged once"


def test_only_kwok_nodes_have_room_kept_here() -> None:
    kwok = {
        "metadata": {"name": "n", "annotations": {"kwok.x-k8s.io/node": "fake"}},
        "status": {"allocatable": {"cpu": "2500m", "memory": "4Gi", "pods": "110"}},
    }
    real = {"metadata": {"name": "r"}, "status": {"allocatable": {"cpu": "1", "memory": "2Gi", "pods": "110"}}}

    assert room_of_node(kwok) == Room(cpu=2500, memory=4 * 2**30, pods=110)
    assert room_of_node(real) is None
