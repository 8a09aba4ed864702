"""The extender over HTTP: the upstream wire format in and out, 400 naming the field for bad input."""

from __future__ import annotations

import json
from typing import Any, TypeVar

import httpx2
import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from api.extender.app import create_extender_app
from api.extender.slot_index import IndexedSlot, SlotIndex
from api.extender.wire import ExtenderArgs, ExtenderFilterResult, ExtenderPreemptionArgs, ExtenderPreemptionResult
from esi.resources.testbed import SlotState
from tests.builders import executor_pod

Arguments = TypeVar("Arguments", ExtenderArgs, ExtenderPreemptionArgs)


@pytest.fixture
def client() -> TestClient:
    index = SlotIndex()
    index.replace_testbed("ns", "tb", [IndexedSlot(3, "n1", SlotState.RESERVED, job="j", ghost_uid="g3")])
    return TestClient(create_extender_app(index))


def test_filter_answers_with_gos_field_names(client: TestClient) -> None:
    response = client.post("/extender/filter", json={"Pod": executor_pod("e1"), "NodeNames": ["n0", "n1"]})

    assert response.status_code == 200
    assert response.json() == {
        "NodeNames": ["n1"],
        "FailedNodes": {},
        "FailedAndUnresolvableNodes": {},
        "Error": "",
    }


def test_preempt_names_the_ghost(client: TestClient) -> None:
    body = {
        "Pod": executor_pod("e1"),
        "NodeNameToMetaVictims": {"n1": {"Pods": [{"UID": "other"}], "NumPDBViolations": 0}},
    }

    response = client.post("/extender/preempt", json=body)

    assert response.status_code == 200
    assert response.json() == {"NodeNameToMetaVictims": {"n1": {"Pods": [{"UID": "g3"}], "NumPDBViolations": 0}}}


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/extender/filter", b"{not json", "(body)"),
        ("/extender/filter", b"[]", "(body)"),
        ("/extender/filter", json.dumps({"NodeNames": ["n0"]}).encode(), "Pod"),
        ("/extender/filter", json.dumps({"Pod": {"metadata": {}}}).encode(), "Pod.metadata.name"),
        (
            "/extender/preempt",
            json.dumps({"Pod": executor_pod("e1"), "NodeNameToMetaVictims": {"n0": {"Pods": [{}]}}}).encode(),
            "NodeNameToMetaVictims.n0.Pods.0.UID",
        ),
        (
            "/extender/preempt",
            json.dumps(
                {"Pod": executor_pod("e1"), "NodeNameToVictims": {"n0": {"Pods": [{"metadata": {"name": "v"}}]}}}
            ).encode(),
            "NodeNameToVictims.n0.Pods.0.metadata.uid",
        ),
        (
            "/extender/preempt",
            json.dumps(
                {"Pod": executor_pod("e1"), "NodeNameToMetaVictims": {"n0": {"NumPDBViolations": False}}}
            ).encode(),
            "NodeNameToMetaVictims.n0.NumPDBViolations",
        ),
        (
            "/extender/filter",
            json.dumps({"Pod": {"metadata": {"name": "p"}, "spec": {"priority": False}}}).encode(),
            "Pod.spec.priority",
        ),
        ("/extender/bind", json.dumps({"PodName": "e1", "PodNamespace": "ns"}).encode(), "Node"),
        ("/extender/bind", json.dumps({"PodName": "", "PodNamespace": "ns", "Node": "n1"}).encode(), "PodName"),
    ],
    ids=[
        "not json",
        "not an object",
        "no pod",
        "pod without name",
        "victim without uid",
        "whole victim without uid",
        "pdb violations not a number",
        "priority not a number",
        "bind no node",
        "bind no pod",
    ],
)
def test_malformed_requests_get_400_naming_the_field(client: TestClient, path: str, body: bytes, field: str) -> None:
    response = client.post(path, content=body, headers={"Content-Type": "application/json"})

    assert response.status_code == 400
    detail = response.json()["detail"]
    assert field in [e["field"] for e in detail["errors"]], detail
    assert field in detail["message"]


@pytest.mark.parametrize(
    ("path", "arguments"), [("/extender/filter", "ExtenderArgs"), ("/extender/preempt", "ExtenderPreemptionArgs")]
)
def test_a_request_without_a_body_gets_400_naming_the_body(path: str, arguments: str) -> None:
    response = TestClient(create_extender_app()).post(path)

    assert response.status_code == 400
    detail = response.json()["detail"]
    assert [e["field"] for e in detail["errors"]] == ["(body)"]
    assert detail["message"] == f"not a valid {arguments}: (body)"


# Any JSON, with the keys of the verbs' arguments among its object keys...
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "Pod",
                    "NodeNames",
                    "Nodes",
                    "items",
                    "metadata",
                    "name",
                    "labels",
                    "Pods",
                    "UID",
                    "NodeNameToMetaVictims",
                    "NodeNameToVictims",
                    "x",
                ]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)
# ...and requests shaped like the scheduler's (an empty name or UID among them is refused), so that both the
# answers and the refusals come up. Their pods are never esi's executors (the labels are not esi's), so the
# extender has nothing to decide about them.
names = st.text(max_size=3)
labels = st.dictionaries(names, names, max_size=2)
pods = st.fixed_dictionaries({"metadata": st.fixed_dictionaries({"name": names}, optional={"labels": labels})})
victims = st.fixed_dictionaries({"Pods": st.lists(st.fixed_dictionaries({"UID": names}), max_size=2)})
# Nodes as whole objects (a scheduler without nodeCacheCapable), their metadata any JSON at all.
nodes = st.fixed_dictionaries(
    {
        "items": st.lists(
            st.fixed_dictionaries({}, optional={"metadata": json_values | pods.map(lambda p: p["metadata"])})
        )
    }
)
requests = st.fixed_dictionaries(
    {"Pod": pods},
    optional={
        "NodeNames": st.lists(names, max_size=3),
        "Nodes": nodes,
        "NodeNameToMetaVictims": st.dictionaries(names, victims, max_size=2),
        "x": json_values,
    },
)
bodies = requests | json_values


def parsed(model: type[Arguments], body: Any) -> tuple[Arguments | None, list[str]]:
    """The body as the verb's arguments, or the fields a 400 must name."""
    try:
        return model.model_validate_json(json.dumps(body)), []
    except ValidationError as err:
        return None, [".".join(str(part) for part in e["loc"]) or "(body)" for e in err.errors()]


def refused_fields(response: httpx2.Response) -> list[str]:
    assert response.status_code == 400, response.text
    return [e["field"] for e in response.json()["detail"]["errors"]]


@settings(max_examples=75, deadline=None)
@given(body=bodies)
def test_filter_passes_any_other_pod_on_every_offered_node_and_refuses_the_rest_with_400(body: Any) -> None:
    response = TestClient(create_extender_app()).post("/extender/filter", json=body)

    args, fields = parsed(ExtenderArgs, body)
    if args is None:
        assert refused_fields(response) == fields
    else:
        assert response.status_code == 200
        answer = ExtenderFilterResult.model_validate(response.json())
        assert answer == ExtenderFilterResult(node_names=args.candidate_nodes())


@settings(max_examples=75, deadline=None)
@given(body=bodies)
def test_preempt_keeps_the_schedulers_victims_of_any_other_pod_and_refuses_the_rest_with_400(body: Any) -> None:
    response = TestClient(create_extender_app()).post("/extender/preempt", json=body)

    args, fields = parsed(ExtenderPreemptionArgs, body)
    if args is None:
        assert refused_fields(response) == fields
    else:
        assert response.status_code == 200
        answer = ExtenderPreemptionResult.model_validate(response.json())
        assert answer == ExtenderPreemptionResult(node_name_to_meta_victims=args.node_name_to_meta_victims or {})


def test_bind_without_a_cluster_says_so_and_binds_nothing(client: TestClient) -> None:
    response = client.post("/extender/bind", json={"PodName": "e1", "PodNamespace": "ns", "PodUID": "u", "Node": "n1"})

    assert response.status_code == 200
    assert "binds nothing" in response.json()["Error"]


def test_healthz() -> None:
    assert TestClient(create_extender_app()).get("/healthz").json() == {"status": "ok"}


def test_a_slot_is_recorded_on_the_pod_before_a_preemption_names_its_ghost_and_not_at_filter(
    client: TestClient,
) -> None:
    written: list[tuple[str, str, int]] = []

    async def record(namespace: str, pod: str, slot: int) -> None:
        written.append((namespace, pod, slot))

    client.app.state.binding_recorder = record  # type: ignore[attr-defined]
    client.post("/extender/filter", json={"Pod": executor_pod("e1"), "NodeNames": ["n0", "n1"]})
    assert written == [], "the bind verb records the slot on the Binding: nothing to write at filter"

    victims = {"n1": {"Pods": [], "NumPDBViolations": 0}}
    answer = client.post("/extender/preempt", json={"Pod": executor_pod("e1"), "NodeNameToMetaVictims": victims})
    assert answer.json()["NodeNameToMetaVictims"]["n1"]["Pods"] == [{"UID": "g3"}]
    assert written == [("ns", "e1", 3)], "recorded before the answer that evicts the ghost"

    client.post("/extender/preempt", json={"Pod": executor_pod("e1"), "NodeNameToMetaVictims": victims})
    assert written == [("ns", "e1", 3)], "once per binding"


@settings(max_examples=150, deadline=None)
@given(
    path=st.sampled_from(["/extender/filter", "/extender/preempt", "/extender/bind"]),
    body=st.binary(max_size=20) | bodies.map(lambda b: json.dumps(b).encode()),
)
def test_every_verb_answers_any_body_with_an_answer_or_a_400_in_the_apis_error_shape(path: str, body: bytes) -> None:
    response = TestClient(create_extender_app()).post(path, content=body, headers={"Content-Type": "application/json"})

    assert response.status_code in {200, 400}, response.text
    if response.status_code == 400:
        assert {"message", "errors"} <= set(response.json()["detail"])


@pytest.mark.parametrize(
    ("binding", "field"),
    [
        ({"PodName": "../../nodes/n1", "PodNamespace": "ns"}, "PodName"),
        ({"PodName": "e1", "PodNamespace": "ns/pods/x"}, "PodNamespace"),
        ({"PodName": "e1?dryRun=All", "PodNamespace": "ns"}, "PodName"),
    ],
)
def test_bind_refuses_names_that_are_no_object_names_with_400(
    client: TestClient, binding: dict[str, str], field: str
) -> None:
    response = client.post("/extender/bind", json=binding | {"PodUID": "u", "Node": "n1"})

    assert response.status_code == 400
    assert field in [e["field"] for e in response.json()["detail"]["errors"]]


def test_the_openapi_description_declares_each_verbs_body() -> None:
    paths = TestClient(create_extender_app()).get("/openapi.json").json()["paths"]

    for path, model in [
        ("/extender/filter", "ExtenderArgs"),
        ("/extender/preempt", "ExtenderPreemptionArgs"),
        ("/extender/bind", "ExtenderBindingArgs"),
    ]:
        body = paths[path]["post"]["requestBody"]["content"]["application/json"]["schema"]
        assert body["$ref"].endswith(f"/{model}"), (path, body)
        assert "400" in paths[path]["post"]["responses"], path


def test_a_body_over_the_documented_limit_is_a_413_stating_the_limit(client: TestClient) -> None:
    nodes = [f"node-{i:07d}" for i in range(1_200_000)]  # 17 MiB
    said = client.post("/extender/filter", json={"Pod": executor_pod("e1"), "NodeNames": nodes})
    streamed = client.post("/extender/filter", content=iter([b"[", *[b'"node-0000001",' * 1000] * 1200, b"1]"]))

    for answer in (said, streamed):
        assert answer.status_code == 413
        assert "16 MiB" in answer.json()["detail"]["message"]


def test_routing_refusals_have_the_one_error_shape(client: TestClient) -> None:
    wrong_method = client.get("/extender/filter")
    nowhere = client.post("/extender/nowhere", json={})

    assert (wrong_method.status_code, wrong_method.headers["Allow"]) == (405, "POST")
    assert nowhere.status_code == 404
    assert all(answer.json()["detail"]["message"] for answer in (wrong_method, nowhere))
