"""The extender over HTTP: the upstream wire format in and out, 400 naming the field for bad input."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from api.app import create_extender_app
from api.extender.slot_index import IndexedSlot, SlotIndex
from esi.resources.testbed import SlotState
from tests.unit.test_slot_index import executor


@pytest.fixture
def client() -> TestClient:
    index = SlotIndex()
    index.replace_testbed("ns", "tb", [IndexedSlot(3, "n1", SlotState.RESERVED, job="j", ghost_uid="g3")])
    return TestClient(create_extender_app(index))


def test_filter_answers_with_gos_field_names(client: TestClient) -> None:
    response = client.post("/extender/filter", json={"Pod": executor("e1"), "NodeNames": ["n0", "n1"]})

    assert response.status_code == 200
    assert response.json() == {
        "NodeNames": ["n1"],
        "FailedNodes": {"n0": "slot 3 of testbed tb is on node n1"},
        "FailedAndUnresolvableNodes": {},
        "Error": "",
    }


def test_preempt_names_the_ghost(client: TestClient) -> None:
    body = {"Pod": executor("e1"), "NodeNameToMetaVictims": {"n1": {"Pods": [{"UID": "other"}], "NumPDBViolations": 0}}}

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
            json.dumps({"Pod": executor("e1"), "NodeNameToMetaVictims": {"n0": {"Pods": [{}]}}}).encode(),
            "NodeNameToMetaVictims.n0.Pods.0.UID",
        ),
    ],
    ids=["not json", "not an object", "no pod", "pod without name", "victim without uid"],
)
def test_malformed_requests_get_400_naming_the_field(client: TestClient, path: str, body: bytes, field: str) -> None:
    response = client.post(path, content=body, headers={"Content-Type": "application/json"})

    assert response.status_code == 400
    detail = response.json()["detail"]
    assert field in [e["field"] for e in detail["errors"]], detail
    assert field in detail["message"]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                ["Pod", "NodeNames", "metadata", "name", "labels", "Pods", "UID", "NodeNameToMetaVictims", "x"]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(path=st.sampled_from(["/extender/filter", "/extender/preempt"]), body=json_values)
def test_no_request_body_makes_the_extender_fail(path: str, body: Any) -> None:
    client = TestClient(create_extender_app())

    response = client.post(path, json=body)

    assert response.status_code in (200, 400)


def test_healthz() -> None:
    assert TestClient(create_extender_app()).get("/healthz").json() == {"status": "ok"}
