"""The simulator shell's own pure parts: the status merge patch and the work queue."""

from __future__ import annotations

import asyncio
from typing import Any

import kopf
import pytest

from esi.results.calibration import TABLE_LABEL
from sim.controller import WorkQueue, merge_patch, select_own_objects
from sim.names import APP_UID_LABEL
from tests import virtual_time


@pytest.mark.parametrize(
    ("old", "new", "patch"),
    [
        pytest.param({}, {"a": 1}, {"a": 1}, id="added"),
        pytest.param({"a": 1, "b": 2}, {"a": 1}, {"b": None}, id="removed"),
        pytest.param({"a": {"x": 1, "y": 2}}, {"a": {"x": 1, "y": 3}}, {"a": {"y": 3}}, id="nested change"),
        pytest.param({"a": {"x": 1}}, {"a": {"x": 1}}, {}, id="unchanged"),
        pytest.param({"a": [1, 2]}, {"a": [1]}, {"a": [1]}, id="lists replaced"),
        pytest.param({"a": {"x": 1}}, {"a": 5}, {"a": 5}, id="object to value"),
    ],
)
def test_merge_patch(old: dict[str, Any], new: dict[str, Any], patch: dict[str, Any]) -> None:
    assert merge_patch(old, new) == patch


def test_the_queue_hands_out_each_key_once_and_earliest_first() -> None:
    async def scenario() -> list[str]:
        queue = WorkQueue()
        queue.add("later", 0.05)
        queue.add("now")
        queue.add("now")
        queue.add("later", 10)  # a later due time does not postpone an earlier one
        queue.add("soon", 0.01)
        taken = [await queue.get() for _ in range(3)]
        queue.add("again")
        taken.append(await asyncio.wait_for(queue.get(), 1))
        return taken

    assert virtual_time.run(scenario()) == ["now", "soon", "later", "again"]


def test_an_earlier_due_time_brings_a_key_forward() -> None:
    async def scenario() -> str:
        queue = WorkQueue()
        queue.add("k", 30)
        waiting = asyncio.create_task(queue.get())
        await asyncio.sleep(0.01)
        queue.add("k")
        return await asyncio.wait_for(waiting, 1)

    assert virtual_time.run(scenario()) == "k"


@pytest.mark.parametrize(
    ("group", "version", "plural", "kind", "selected"),
    [
        pytest.param("", "v1", "pods", "Pod", [APP_UID_LABEL], id="pods"),
        pytest.param("apps", "v1", "deployments", "Deployment", [APP_UID_LABEL], id="deployments"),
        pytest.param("", "v1", "configmaps", "ConfigMap", [TABLE_LABEL], id="co-location tables"),
        pytest.param("sparkoperator.k8s.io", "v1beta2", "sparkapplications", "SparkApplication", [], id="applications"),
        pytest.param("metrics.k8s.io", "v1beta1", "pods", "PodMetrics", [], id="another group's pods"),
    ],
)
def test_the_api_server_sends_only_the_simulated_pods_deployments_and_tables(
    group: str, version: str, plural: str, kind: str, selected: list[str]
) -> None:
    settings = kopf.OperatorSettings()
    select_own_objects(settings)
    resource = kopf.Resource(group=group, version=version, plural=plural, kind=kind)
    assert list(settings.watching.label_selectors.collect(resource)) == selected
