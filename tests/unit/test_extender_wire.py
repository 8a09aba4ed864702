"""The extender wire format: requests as kube-scheduler sends them parse, answers serialise with Go's keys,
and malformed requests fail naming the field (the original's scenario 19, docs/compatibility.md#scenarios)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from api.extender.wire import (
    ExtenderArgs,
    ExtenderFilterResult,
    ExtenderPreemptionArgs,
    ExtenderPreemptionResult,
    MetaPod,
    MetaVictims,
)

POD: dict[str, Any] = {
    "metadata": {
        "name": "exec-1",
        "namespace": "jobs",
        "uid": "u-1",
        "labels": {"esi.tu-berlin.de/testbed": "tb"},
        "resourceVersion": "42",
    },
    "spec": {"schedulerName": "esi-scheduler", "priority": 2000, "containers": [{"name": "x", "image": "spark"}]},
    "status": {"phase": "Pending"},
}


def test_filter_args_with_node_names_parse_and_keep_the_pod_as_sent() -> None:
    body = {"Pod": POD, "Nodes": None, "NodeNames": ["n0", "n1"]}

    args = ExtenderArgs.model_validate_json(json.dumps(body))

    assert args.candidate_nodes() == ["n0", "n1"]
    assert args.pod.metadata.labels == {"esi.tu-berlin.de/testbed": "tb"}
    assert args.pod.spec.scheduler_name == "esi-scheduler"
    dumped = args.pod.model_dump(mode="json", exclude_none=True)
    assert dumped["spec"]["containers"] == POD["spec"]["containers"]
    assert dumped["metadata"]["resourceVersion"] == "42"


def test_filter_args_with_full_nodes_give_the_same_candidates() -> None:
    body = {"Pod": POD, "Nodes": {"items": [{"metadata": {"name": "n0"}}, {"metadata": {"name": "n1"}}]}}

    assert ExtenderArgs.model_validate(body).candidate_nodes() == ["n0", "n1"]


def test_filter_result_uses_gos_keys() -> None:
    result = ExtenderFilterResult(node_names=["n1"], failed_nodes={"n0": "slot 3 is on n1"})

    assert json.loads(result.model_dump_json()) == {
        "NodeNames": ["n1"],
        "FailedNodes": {"n0": "slot 3 is on n1"},
        "FailedAndUnresolvableNodes": {},
        "Error": "",
    }


def test_preemption_round_trip() -> None:
    body = {
        "Pod": POD,
        "NodeNameToVictims": None,
        "NodeNameToMetaVictims": {
            "n1": {"Pods": [{"UID": "ghost-3"}], "NumPDBViolations": 0},
            "n0": {"Pods": [{"UID": "ghost-0"}, {"UID": "other"}], "NumPDBViolations": 1},
        },
    }

    args = ExtenderPreemptionArgs.model_validate(body)
    answer = ExtenderPreemptionResult(node_name_to_meta_victims={"n1": MetaVictims(pods=[MetaPod(uid="ghost-3")])})

    assert args.candidate_nodes() == ["n0", "n1"]
    assert args.node_name_to_meta_victims is not None
    assert args.node_name_to_meta_victims["n0"].num_pdb_violations == 1
    assert json.loads(answer.model_dump_json()) == {
        "NodeNameToMetaVictims": {"n1": {"Pods": [{"UID": "ghost-3"}], "NumPDBViolations": 0}}
    }
    assert ExtenderPreemptionResult.model_validate_json(answer.model_dump_json()) == answer


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"NodeNames": ["n0"]}, "Pod"),
        ({"Pod": {"spec": {}}, "NodeNames": ["n0"]}, "Pod.metadata"),
        ({"Pod": {"metadata": {"name": ""}}, "NodeNames": []}, "Pod.metadata.name"),
        ({"Pod": POD, "NodeNames": "n0"}, "NodeNames"),
    ],
    ids=["no pod", "pod without metadata", "pod without name", "node names not a list"],
)
def test_malformed_filter_requests_name_the_field(body: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as refused:
        ExtenderArgs.model_validate(body)

    assert field in {".".join(map(str, e["loc"])) for e in refused.value.errors()}


def test_a_preemption_victim_needs_a_uid() -> None:
    with pytest.raises(ValidationError, match="UID"):
        ExtenderPreemptionArgs.model_validate({"Pod": POD, "NodeNameToMetaVictims": {"n0": {"Pods": [{}]}}})
