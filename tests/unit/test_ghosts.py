"""Ghost pod manifests and how pods and nodes are read for the Testbed decision."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from esi.decisions.layout import Taint
from esi.decisions.testbed_lifecycle import CreateGhost, PodPhase, Resources
from esi.objects.ghosts import ghost_pod, node_view, pod_requests, pod_view
from esi.objects.names import GHOST_PRIORITY_CLASS, JOB_LABEL, ROLE_LABEL, SLOT_ANNOTATION, TESTBED_LABEL, testbed_of
from esi.resources.meta import PodRole
from esi.resources.quantity import Quantity
from esi.resources.testbed import Toleration

SIZE = Resources(Quantity("700m"), Quantity("896Mi"))


def test_a_ghost_holds_exactly_its_slot_and_gives_way_at_once() -> None:
    pod = ghost_pod("tb", "uid-tb", "ns", CreateGhost(slot=5, node_name="n1", position=2, size=SIZE))

    assert pod["metadata"]["name"] == "tb-ghost-5"
    assert pod["metadata"]["labels"].items() >= {ROLE_LABEL: "ghost", TESTBED_LABEL: "tb"}.items()
    assert pod["metadata"]["annotations"] == {SLOT_ANNOTATION: "5"}
    owner = pod["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("Testbed", "uid-tb", True)
    spec = pod["spec"]
    assert spec["nodeName"] == "n1"
    assert spec["priorityClassName"] == GHOST_PRIORITY_CLASS
    assert spec["terminationGracePeriodSeconds"] == 0
    (container,) = spec["containers"]
    assert container["resources"] == {
        "requests": {"cpu": "700m", "memory": "896Mi"},
        "limits": {"cpu": "700m", "memory": "896Mi"},
    }
    assert pod_requests(pod) == SIZE


def test_reading_an_executor_pod() -> None:
    pod = {
        "metadata": {
            "name": "e",
            "labels": {ROLE_LABEL: "executor", TESTBED_LABEL: "tb", JOB_LABEL: "j"},
            "annotations": {SLOT_ANNOTATION: "3"},
            "deletionTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {
            "nodeName": "n0",
            "containers": [
                {"resources": {"requests": {"cpu": "1"}}},
                {"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
            ],
        },
        "status": {"phase": "Running"},
    }

    view = pod_view(pod)

    assert view is not None
    assert (view.role, view.node_name, view.slot, view.job, view.phase, view.terminating) == (
        PodRole.EXECUTOR,
        "n0",
        3,
        "j",
        PodPhase.RUNNING,
        True,
    )
    assert view.requests == Resources(Quantity("1500m"), Quantity("1Gi"))


def test_a_finished_pod_reads_with_the_end_of_its_last_container() -> None:
    def ended(at: str) -> dict[str, Any]:
        return {"name": "c", "state": {"terminated": {"exitCode": 0, "finishedAt": at}}}

    labels = {ROLE_LABEL: "executor", TESTBED_LABEL: "tb", JOB_LABEL: "j"}
    statuses = {
        "initContainerStatuses": [ended("2026-01-01T00:00:01Z")],
        "containerStatuses": [ended("2026-01-01T00:00:09Z"), ended("2026-01-01T00:00:05Z"), ended("never")],
    }
    finished = pod_view({"metadata": {"name": "e", "labels": labels}, "status": {"phase": "Succeeded", **statuses}})
    running = pod_view({"metadata": {"name": "e", "labels": labels}, "status": {"phase": "Running", **statuses}})

    assert finished is not None
    assert finished.finished_at == datetime(2026, 1, 1, 0, 0, 9, tzinfo=UTC)
    assert running is not None
    assert running.finished_at is None


def test_pods_without_a_role_or_with_odd_labels_read_safely() -> None:
    assert pod_view({"metadata": {"name": "x", "labels": {}}}) is None
    view = pod_view(
        {
            "metadata": {"name": "g", "labels": {ROLE_LABEL: "ghost"}, "annotations": {SLOT_ANNOTATION: "two"}},
            "status": {"phase": "Unknown"},
        }
    )
    assert view is not None
    assert (view.slot, view.phase, view.node_name) == (None, PodPhase.PENDING, None)


def test_reading_a_node() -> None:
    node = {"metadata": {"name": "n", "labels": {"a": "1"}}, "status": {"allocatable": {"cpu": "4", "memory": "8Gi"}}}

    view = node_view(node, SIZE)

    assert (view.name, dict(view.labels), view.allocatable, view.other_requests) == (
        "n",
        {"a": "1"},
        Resources(Quantity(4), Quantity("8Gi")),
        SIZE,
    )


def test_only_ghosts_and_executors_belong_to_a_testbed_whatever_testbed_label_a_pod_carries() -> None:
    assert testbed_of({ROLE_LABEL: "ghost", TESTBED_LABEL: "tb"}) == "tb"
    assert testbed_of({ROLE_LABEL: "executor", TESTBED_LABEL: "tb"}) == "tb"
    # a Spark driver with its application's labels, or a user's pod that copies esi's labels
    assert testbed_of({"spark-role": "driver", TESTBED_LABEL: "tb", JOB_LABEL: "j"}) is None
    assert testbed_of({ROLE_LABEL: "driver", TESTBED_LABEL: "tb"}) is None
    assert testbed_of({ROLE_LABEL: "executor"}) is None


def test_a_ghost_tolerates_what_its_testbed_tolerates_and_a_nodes_taints_are_read() -> None:
    tolerations = [Toleration.model_validate({"key": "dedicated", "value": "esi", "effect": "NoExecute"})]
    create = CreateGhost(slot=0, node_name="n1", position=0, size=SIZE)

    assert "tolerations" not in ghost_pod("tb", "uid-tb", "ns", create)["spec"]
    pod = ghost_pod("tb", "uid-tb", "ns", create, tolerations)
    assert pod["spec"]["tolerations"] == [{"key": "dedicated", "value": "esi", "effect": "NoExecute"}]

    node = {
        "metadata": {"name": "n"},
        "spec": {
            "taints": [
                {"key": "dedicated", "value": "esi", "effect": "NoSchedule"},
                {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": "2026-01-01T00:00:00Z"},
            ]
        },
    }
    assert node_view(node, SIZE).taints == (
        Taint("dedicated", "esi", "NoSchedule"),
        Taint("node.kubernetes.io/unreachable", "", "NoExecute"),
    )
