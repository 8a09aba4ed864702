"""The Flink operator's pod-template merge (``esi.objects.flink_pod_templates``), case by case as the operator's
``FlinkUtils.mergePodTemplates`` does it (read from its source, operator 1.12-1.15)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from esi.objects.flink_pod_templates import MERGE_BY_NAME_KEY, merge_arrays_by_name, merged_pod_templates

MAIN = {"name": "flink-main-container", "env": [{"name": "A", "value": "1"}]}


def spec(**fields: Any) -> dict[str, Any]:
    return {"spec": fields}


def test_either_template_alone_is_taken_as_it_is() -> None:
    template = spec(containers=[MAIN], nodeSelector={"disk": "ssd"})
    assert merged_pod_templates(template, None) == template
    assert merged_pod_templates(None, template) == template
    assert merged_pod_templates(None, None) is None


def test_mappings_merge_key_by_key_and_the_components_scalars_win() -> None:
    common = {"metadata": {"labels": {"team": "a", "tier": "batch"}}, "spec": {"serviceAccountName": "x"}}
    component = {"metadata": {"labels": {"tier": "gold"}}, "spec": {"serviceAccountName": "y", "hostIPC": False}}

    merged = merged_pod_templates(common, component)

    assert merged == {
        "metadata": {"labels": {"team": "a", "tier": "gold"}},
        "spec": {"serviceAccountName": "y", "hostIPC": False},
    }


def test_a_mapping_keeps_what_it_has_when_the_component_gives_no_mapping() -> None:
    common = spec(nodeSelector={"disk": "ssd"})
    assert merged_pod_templates(common, spec(nodeSelector="ssd")) == common


def test_lists_merge_by_position_and_the_longer_common_list_keeps_its_tail() -> None:
    first, second = {"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}
    common = spec(tolerations=[first, second])
    component = spec(tolerations=[{"key": "c", "effect": "NoSchedule"}])

    merged = merged_pod_templates(common, component)

    assert merged == spec(tolerations=[{"key": "c", "operator": "Exists", "effect": "NoSchedule"}, second])


def test_the_components_extra_elements_are_appended() -> None:
    common = spec(tolerations=[{"key": "a", "operator": "Exists"}])
    extra = {"key": "b", "operator": "Exists"}
    assert merged_pod_templates(common, spec(tolerations=[{"key": "a"}, extra])) == spec(
        tolerations=[{"key": "a", "operator": "Exists"}, extra]
    )


def test_scalars_at_a_position_the_common_list_has_are_not_replaced() -> None:
    common = spec(containers=[{"name": "flink-main-container", "args": ["a", "b"]}])
    component = spec(containers=[{"name": "flink-main-container", "args": ["x", "y", "z"]}])

    merged = merged_pod_templates(common, component)

    assert merged is not None
    assert merged["spec"]["containers"][0]["args"] == ["a", "b", "z"]


def test_containers_of_different_names_at_one_position_become_one() -> None:
    common = spec(containers=[{"name": "sidecar", "image": "busybox"}])
    component = spec(containers=[MAIN])

    merged = merged_pod_templates(common, component)

    assert merged == spec(containers=[{"name": "flink-main-container", "image": "busybox", "env": MAIN["env"]}])


def test_by_name_when_asked_and_every_element_is_named() -> None:
    common = spec(containers=[{"name": "sidecar", "image": "busybox"}, {"name": "flink-main-container"}])
    component = spec(containers=[MAIN, {"name": "log-shipper", "image": "fluent"}])

    merged = merged_pod_templates(common, component, by_name=True)

    assert merged == spec(
        containers=[{"name": "sidecar", "image": "busybox"}, MAIN, {"name": "log-shipper", "image": "fluent"}]
    )


def test_by_name_falls_back_to_position_when_an_element_has_no_name() -> None:
    common = spec(tolerations=[{"key": "a", "operator": "Exists"}])
    component = spec(tolerations=[{"key": "b"}])
    assert merged_pod_templates(common, component, by_name=True) == spec(
        tolerations=[{"key": "b", "operator": "Exists"}]
    )


def test_nulls_and_empty_lists_say_nothing() -> None:
    common = spec(tolerations=[{"key": "a"}], nodeSelector={"disk": "ssd"})
    component = spec(tolerations=[], nodeSelector=None, hostname=None)
    assert merged_pod_templates(common, component) == common


def test_neither_template_is_changed() -> None:
    common = spec(tolerations=[{"key": "a"}], containers=[{"name": "flink-main-container", "args": ["a"]}])
    component = spec(tolerations=[{"key": "b"}, {"key": "c"}], containers=[MAIN])
    before = copy.deepcopy((common, component))

    merged = merged_pod_templates(common, component)
    assert merged is not None
    merged["spec"]["tolerations"][1]["key"] = "changed"
    merged["spec"]["containers"][0]["env"].append({"name": "B"})

    assert (common, component) == before


@pytest.mark.parametrize(("value", "expected"), [("true", True), (" TRUE ", True), ("false", False), (None, False)])
def test_merge_by_name_is_the_configurations(value: str | None, expected: bool) -> None:
    conf = {} if value is None else {MERGE_BY_NAME_KEY: value}
    assert merge_arrays_by_name(conf) is expected
