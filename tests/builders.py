"""Test objects that more than one test module builds: resources as the API server returns them, the rows of
a Testbed's slot table, executor pods, the scheduler's filter requests to the extender, and Runs. The manifests
themselves (valid and invalid) are in ``tests.manifests``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from api.extender.wire import ExtenderArgs
from esi.objects.names import JOB_LABEL, ROLE_EXECUTOR, ROLE_LABEL, TESTBED_LABEL
from esi.objects.runs import SCHEDULING_LABEL
from esi.resources.meta import API_VERSION

__all__ = ["NODES", "executor_pod", "filter_args", "run_object", "status_slot", "stored"]

NODES = ["n0", "n1", "n2"]  # the nodes a filter request offers unless it says otherwise


def stored(
    manifest: dict[str, Any], name: str, version: int = 1, namespace: str = "ns", **status: Any
) -> dict[str, Any]:
    """``manifest`` as the API server returns it: named, in ``namespace``, at ``version``, with ``status``."""
    body = manifest | {"metadata": {"name": name, "namespace": namespace, "resourceVersion": str(version)}}
    return body | ({"status": status} if status else {})


def status_slot(slot_id: int, node_id: int, state: str = "Free", **more: Any) -> dict[str, Any]:
    """A row of a Testbed's slot table on nodes ``n0``, ``n1`` (two slots a node: ids interleave across them)."""
    row = {"id": slot_id, "nodeName": f"n{node_id}", "nodeId": node_id, "position": slot_id // 2, "state": state}
    return row | more


def executor_pod(name: str, job: str = "j", testbed: str = "tb", namespace: str = "ns") -> dict[str, Any]:
    """An executor pod of ``job`` in ``testbed``, as the scheduler and the API server show it (no spec)."""
    labels = {ROLE_LABEL: ROLE_EXECUTOR, TESTBED_LABEL: testbed, JOB_LABEL: job}
    return {"metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "labels": labels}}


def filter_args(pod: dict[str, Any], nodes: list[str] = NODES) -> ExtenderArgs:
    """The scheduler's filter request to the extender for ``pod``, offering ``nodes``."""
    return ExtenderArgs.model_validate({"Pod": pod, "NodeNames": nodes})


RUNS_START = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)  # when run_object's clock starts


def run_object(
    job: str,
    ordinal: int,
    start: float,
    seconds: float | None,
    nodes: list[str],
    *,
    namespace: str = "ns",
    scheduling: str = "s",
    testbed: str = "tb",
    outcome: str = "Succeeded",
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A Run of ``job`` as the BatchJob reconciler writes it: started ``start`` seconds after ``RUNS_START`` on
    ``nodes`` (slot i on the i-th node), ended ``seconds`` later (None: no end, no outcome)."""
    began = RUNS_START + timedelta(seconds=start)
    spec: dict[str, Any] = {
        "job": job,
        "jobUid": f"uid-{job}",
        "kind": "spark",
        "ordinal": ordinal,
        "scheduling": scheduling,
        "testbed": testbed,
        "slots": list(range(len(nodes))),
        "nodes": nodes,
        "submitted": (began - timedelta(seconds=2)).isoformat(),
        "start": began.isoformat(),
    }
    if seconds is not None:
        spec |= {"end": (began + timedelta(seconds=seconds)).isoformat(), "outcome": outcome}
    run_labels = {JOB_LABEL: job, SCHEDULING_LABEL: scheduling, TESTBED_LABEL: testbed} | (labels or {})
    metadata = {"name": f"{job}-uid-{job}-{ordinal}", "namespace": namespace, "labels": run_labels}
    return {"apiVersion": API_VERSION, "kind": "Run", "metadata": metadata, "spec": spec}
