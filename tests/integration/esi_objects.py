"""esi's objects on the session's cluster, as integration tests make and read them: Testbed ``tb`` made Ready
on new nodes, its status and running ghosts read back; a Spark BatchJob; a Scheduling's status written as its
reconciler writes it."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from lightkube import Client
from lightkube.resources.core_v1 import Pod

from esi.objects.names import ROLE_GHOST, ROLE_LABEL, SLOT_ANNOTATION, TESTBED_LABEL
from infra.local_cluster import LocalCluster
from tests.integration.conftest import AddNodes
from tests.integration.kube import create_in, create_testbed, status, wait_for
from tests.manifests import SPARK, batchjob_manifest, scheduling_manifest

__all__ = [
    "ghosts",
    "ghosts_when",
    "new_testbed_on_nodes",
    "ready_with_ghosts",
    "set_scheduling_status",
    "settled",
    "spark_job",
    "status_of",
]


def status_of(cluster: LocalCluster, namespace: str, name: str = "tb") -> dict[str, Any]:
    """The Testbed's status; {} before it has one."""
    return status(cluster, namespace, "testbed", name)


def settled(cluster: LocalCluster, namespace: str, slots: int, state: str = "Ready") -> Any:
    """A probe: testbed tb's status once it is in ``state`` with ``slots`` slots."""

    def probe() -> dict[str, Any] | None:
        found = status_of(cluster, namespace)
        return found if found.get("state") == state and found.get("counts", {}).get("slots") == slots else None

    return probe


def ghosts_when(client: Client, namespace: str, count: int) -> Any:
    """A probe: the running ghosts once there are exactly ``count``."""

    def probe() -> dict[int, str] | None:
        found = ghosts(client, namespace)
        return found if len(found) == count else None

    return probe


def ghosts(client: Client, namespace: str) -> dict[int, str]:
    """Running ghost pods of testbed tb: slot id -> node."""
    found = {}
    for pod in client.list(Pod, namespace=namespace, labels={TESTBED_LABEL: "tb", ROLE_LABEL: ROLE_GHOST}):
        assert pod.metadata is not None
        assert pod.metadata.labels is not None
        if pod.status is not None and pod.status.phase == "Running" and pod.metadata.deletionTimestamp is None:
            assert pod.spec is not None
            found[int((pod.metadata.annotations or {})[SLOT_ANNOTATION])] = str(pod.spec.nodeName)
    return found


def ready_with_ghosts(cluster: LocalCluster, namespace: str, slots: int) -> Callable[[], bool]:
    """A probe: testbed tb Ready with ``slots`` free slots."""

    def probe() -> bool:
        table = status(cluster, namespace, "testbed", "tb")
        return table.get("state") == "Ready" and table.get("counts", {}).get("free") == slots

    return probe


def new_testbed_on_nodes(
    cluster: LocalCluster, namespace: str, unique: str, add_nodes: AddNodes, count: int = 2, memory: str = "1Gi"
) -> list[str]:
    """Testbed ``tb`` with two 1-cpu slots of ``memory`` on each of ``count`` new 2-cpu nodes (full with its
    ghosts), Ready."""
    label = f"esi.test/e2e-{unique}"
    nodes = [add_nodes(1, cpu="2", labels={label: str(i)})[0] for i in range(count)]
    create_testbed(cluster, namespace, label, memory=memory)
    wait_for("testbed Ready", ready_with_ghosts(cluster, namespace, 2 * count), timeout=60)
    return nodes


def spark_job(cluster: LocalCluster, namespace: str, name: str, **conf: str) -> None:
    """BatchJob ``name`` of a Spark application (with ``conf`` as its sparkConf)."""
    spec = dict(SPARK) | ({"sparkConf": conf} if conf else {})
    create_in(cluster, namespace, batchjob_manifest(sparkSpec=spec) | {"metadata": {"name": name}})


def set_scheduling_status(cluster: LocalCluster, namespace: str, jobs: list[dict[str, Any]]) -> None:
    """What the Scheduling reconciler records for Scheduling ``sched`` when it decides (or sees a job finish)."""
    written = {"status": {"state": "Running", "jobs": jobs}}
    cluster.kubectl(
        "patch",
        "-n",
        namespace,
        "scheduling",
        "sched",
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps(written),
    )


def run_to_end(cluster: LocalCluster, namespace: str, name: str, spec: dict[str, Any], timeout: float = 300) -> None:
    """Scheduling ``name`` (of ``spec``, on Testbed ``tb``) runs to its end, then is deleted: its jobs are let go."""
    manifest = scheduling_manifest(testbed={"name": "tb"}, **spec)
    create_in(cluster, namespace, manifest | {"metadata": {"name": name}})
    wait_for(
        f"{name} to complete",
        lambda: status(cluster, namespace, "scheduling", name).get("state") == "Completed",
        timeout=timeout,
    )
    cluster.kubectl("delete", "-n", namespace, "scheduling", name, "--wait=true", "--timeout=60s")
