"""The simulator shell's own parts: the status merge patch, the work queue, the first read of the tables."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, cast

import kopf
import pytest
from lightkube import AsyncClient
from lightkube.resources.core_v1 import ConfigMap

from esi.results.calibration import TABLE_LABEL, table_configmap
from sim.controller import CurrentTables, WorkQueue, merge_patch, read_tables, select_own_objects
from sim.names import APP_UID_LABEL
from sim.runtime import InterferenceModel, Tables
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


class _Listing:
    """An API server's answer to one list: the ConfigMaps given, and what was asked for."""

    def __init__(self, *configmaps: ConfigMap) -> None:
        self.configmaps = configmaps
        self.asked: dict[str, Any] = {}

    def list(self, kind: type[ConfigMap], **asked: Any) -> AsyncIterator[ConfigMap]:
        assert kind is ConfigMap
        self.asked = asked

        async def listed() -> AsyncIterator[ConfigMap]:
            for configmap in self.configmaps:
                yield configmap

        return listed()


def _table(namespace: str, csv: str) -> ConfigMap:
    return cast(ConfigMap, ConfigMap.from_dict(table_configmap(csv, namespace)))


def test_the_tables_there_are_are_read_at_once_a_bad_one_left_to_the_watch() -> None:
    header = "job,colocated_with,mean_runtime_s,samples\n"
    listing = _Listing(_table("calibrated", header + "job,-,300,4\n"), _table("bad", header + "job,-,soon,4\n"))
    tables = CurrentTables(Tables(InterferenceModel()))
    asyncio.run(read_tables(cast(AsyncClient, listing), tables))
    assert listing.asked["namespace"] == "*"
    assert tables.now.model_for("calibrated").runtime("job", set()) == 300
    assert tables.now.model_for("bad").runtime("job", set()) == InterferenceModel().default_runtime
