"""Ghost pods and how a Testbed's pods and nodes read: manifests in, views for ``decide_testbed`` out.

A ghost pod holds one slot: it requests (and is limited to) exactly the slot size, is pinned to the slot's
node, tolerates what its Testbed tolerates, carries the ghost priority class (so ordinary pods cannot evict
it, but executors can), never preempts anything, and goes at once when evicted (grace period 0). It runs the
pause image, which a real node has anyway and KWOK never pulls. It is owned by its Testbed, so deleting the
Testbed removes them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from esi.decisions.layout import Taint
from esi.decisions.node_choice import NodeFacts
from esi.decisions.testbed_lifecycle import FINISHED_PHASES, CreateGhost, NodeView, PodPhase, PodView, Resources
from esi.objects.names import (
    GHOST_PRIORITY_CLASS,
    JOB_LABEL,
    ROLE_GHOST,
    ROLE_LABEL,
    SLOT_ANNOTATION,
    TESTBED_LABEL,
    slot_of,
    testbed_of,
)
from esi.objects.owners import owner_reference
from esi.objects.pod_status import last_container_end
from esi.resources.meta import API_VERSION, PodRole, part_of_esi
from esi.resources.quantity import Quantity, QuantityError
from esi.resources.testbed import Toleration

__all__ = [
    "GHOST_IMAGE",
    "ghost_name",
    "ghost_pod",
    "node_facts",
    "node_view",
    "other_requests",
    "pod_requests",
    "pod_view",
]

GHOST_IMAGE = "registry.k8s.io/pause:3.10"
_ZERO = Quantity(0)


def ghost_name(testbed: str, slot: int) -> str:
    return f"{testbed}-ghost-{slot}"


def ghost_pod(
    testbed: str, testbed_uid: str, namespace: str, create: CreateGhost, tolerations: Sequence[Toleration] = ()
) -> dict[str, Any]:
    """The ghost pod manifest for one slot of a Testbed (``tolerations``: the Testbed's)."""
    size = {"cpu": str(create.size.cpu), "memory": str(create.size.memory)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": ghost_name(testbed, create.slot),
            "namespace": namespace,
            "labels": {
                ROLE_LABEL: ROLE_GHOST,
                TESTBED_LABEL: testbed,
                **part_of_esi(),
            },
            "annotations": {SLOT_ANNOTATION: str(create.slot)},
            "ownerReferences": [owner_reference(API_VERSION, "Testbed", testbed, testbed_uid)],
        },
        "spec": {
            "nodeName": create.node_name,
            "priorityClassName": GHOST_PRIORITY_CLASS,
            "terminationGracePeriodSeconds": 0,
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "containers": [{"name": "ghost", "image": GHOST_IMAGE, "resources": {"requests": size, "limits": size}}],
            **({"tolerations": [t.to_json_dict() for t in tolerations]} if tolerations else {}),
        },
    }


def _quantity(value: Any) -> Quantity:
    try:
        return Quantity(value)
    except (QuantityError, TypeError):
        return _ZERO


def pod_requests(pod: Mapping[str, Any]) -> Resources:
    """What a pod asks the scheduler for: the sum over its containers (what slot sizing compares)."""
    cpu, memory = _ZERO, _ZERO
    for container in pod.get("spec", {}).get("containers", []):
        requests = (container.get("resources") or {}).get("requests") or {}
        cpu += _quantity(requests.get("cpu", 0))
        memory += _quantity(requests.get("memory", 0))
    return Resources(cpu, memory)


def pod_view(pod: Mapping[str, Any]) -> PodView | None:
    """A Testbed pod as ``decide_testbed`` sees it; None for a pod that is neither ghost nor executor."""
    metadata = pod.get("metadata", {})
    labels = metadata.get("labels") or {}
    try:
        role = PodRole(labels.get(ROLE_LABEL, ""))
    except ValueError:
        return None
    phase_text = (pod.get("status") or {}).get("phase", "Pending")
    phase = PodPhase(phase_text) if phase_text in PodPhase.__members__.values() else PodPhase.PENDING
    return PodView(
        name=metadata["name"],
        role=role,
        node_name=(pod.get("spec") or {}).get("nodeName") or None,
        slot=slot_of(metadata.get("annotations") or {}),
        requests=pod_requests(pod),
        phase=phase,
        job=labels.get(JOB_LABEL),
        terminating=metadata.get("deletionTimestamp") is not None,
        finished_at=last_container_end(pod.get("status")) if phase.finished else None,
    )


def node_view(node: Mapping[str, Any], other_requests: Resources) -> NodeView:
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    return NodeView(
        name=node["metadata"]["name"],
        labels=dict(node["metadata"].get("labels") or {}),
        allocatable=Resources(_quantity(allocatable.get("cpu", 0)), _quantity(allocatable.get("memory", 0))),
        other_requests=other_requests,
        taints=tuple(
            Taint(str(t.get("key") or ""), str(t.get("value") or ""), str(t.get("effect") or ""))
            for t in (node.get("spec") or {}).get("taints") or ()
        ),
    )


def other_requests(pods: Iterable[Mapping[str, Any]], namespace: str, testbed: str) -> dict[str, Resources]:
    """Per node, what its unfinished pods request, the ghosts and executors of Testbed ``testbed`` in ``namespace``
    not counted: the requests its slots would be beside."""
    sums: dict[str, Resources] = {}
    for pod in pods:
        metadata = pod.get("metadata") or {}
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or (pod.get("status") or {}).get("phase") in FINISHED_PHASES:
            continue
        if metadata.get("namespace") == namespace and testbed_of(metadata.get("labels") or {}) == testbed:
            continue
        requests, before = pod_requests(pod), sums.get(node, Resources(_ZERO, _ZERO))
        sums[node] = Resources(before.cpu + requests.cpu, before.memory + requests.memory)
    return sums


def node_facts(node: Mapping[str, Any], requested: Resources) -> NodeFacts:
    """A node as ``esi.decisions.node_choice`` reads it, with what its other pods request (``other_requests``)."""
    view = node_view(node, requested)
    conditions = (node.get("status") or {}).get("conditions") or ()
    return NodeFacts(
        name=view.name,
        labels=view.labels,
        allocatable=view.allocatable,
        requested=requested,
        taints=view.taints,
        ready=any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions),
        unschedulable=bool((node.get("spec") or {}).get("unschedulable")),
    )
