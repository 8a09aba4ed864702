"""``POST /external/testbeds/{name}/nodes`` without a cluster: nodes and pods from a fake Kubernetes client, which
records the label patches the route sends."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx2
import pytest
from fastapi.testclient import TestClient
from lightkube import ApiError

from api.app import create_api_app
from api.auth import Principal, Refusal, StaticToken
from api.cache import ResourceCache
from esi.objects.names import ROLE_GHOST, ROLE_LABEL, TESTBED_LABEL
from esi.resources.meta import GROUP
from tests.builders import status_slot, stored
from tests.manifests import testbed_manifest

TOKEN = "s3cret-token"  # noqa: S105 (a test token)
AUTH = {"Authorization": f"Bearer {TOKEN}"}
LABEL = "esi.test/slots"


def node_object(name: str, cpu: str = "4", labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
        "status": {
            "allocatable": {"cpu": cpu, "memory": "8Gi"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod_object(node: str, cpu: str, labels: dict[str, str] | None = None, phase: str = "Running") -> dict[str, Any]:
    container = {"name": "c", "resources": {"requests": {"cpu": cpu}}}
    return {
        "metadata": {"name": f"p-{node}-{cpu}", "namespace": "default", "labels": labels or {}},
        "spec": {"nodeName": node, "containers": [container]},
        "status": {"phase": phase},
    }


@dataclass
class _Listed:
    body: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return self.body


@dataclass
class FakeKube:
    """What the route calls of lightkube's AsyncClient: list nodes and pods, patch nodes."""

    nodes: list[dict[str, Any]]
    pods: list[dict[str, Any]] = field(default_factory=list)
    patches: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    forbidden: bool = False

    async def _items(self, items: list[dict[str, Any]]) -> AsyncIterator[_Listed]:
        for item in items:
            yield _Listed(item)

    def list(self, kind: type, namespace: str | None = None) -> AsyncIterator[_Listed]:
        if self.forbidden:
            raise ApiError(response=_response(403, "nodes is forbidden"))
        return self._items(self.pods if namespace == "*" else self.nodes)

    async def patch(self, kind: type, name: str, body: dict[str, Any], **_: Any) -> None:
        self.patches.append((name, body))


def _response(code: int, message: str) -> httpx2.Response:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "code": code}
    return httpx2.Response(code, json=body, request=httpx2.Request("GET", "https://kube/api/v1/nodes"))


def api_with(kube: FakeKube, authenticator: Any = None, slots: list[dict[str, Any]] | None = None) -> TestClient:
    cache = ResourceCache()
    spec = {"nodeLabel": LABEL, "resourcesPerSlot": {"cpu": "1", "memory": "1Gi"}}
    manifest = testbed_manifest(**spec)
    testbed = (
        stored(manifest, "tb", namespace="default", slots=slots)
        if slots
        else stored(manifest, "tb", namespace="default")
    )
    cache.testbeds.observed(testbed)
    other = testbed_manifest(nodeLabel="esi.test/other")
    cache.testbeds.observed(stored(other, "other", namespace="elsewhere"))
    app = create_api_app(authenticator or StaticToken(TOKEN), cache=cache, kube=kube)  # type: ignore[arg-type]
    return TestClient(app)


@pytest.fixture
def kube() -> FakeKube:
    return FakeKube(
        nodes=[
            node_object("kept", labels={LABEL: "3"}),
            node_object("big", cpu="16"),
            node_object("crowded", cpu="16"),
            node_object("theirs", cpu="64", labels={"esi.test/other": "0"}),
            node_object("dropped", cpu="2", labels={LABEL: "0"}),
        ],
        pods=[
            pod_object("crowded", "15"),
            pod_object("kept", "2", {ROLE_LABEL: ROLE_GHOST, TESTBED_LABEL: "tb"}),  # the Testbed's own
            pod_object("big", "8", phase="Succeeded"),  # finished: holds nothing
        ],
    )


@pytest.fixture
def api(kube: FakeKube) -> Iterator[TestClient]:
    with api_with(kube) as client:
        yield client


def test_the_chosen_nodes_are_labelled_and_the_dropped_one_unlabelled_first(api: TestClient, kube: FakeKube) -> None:
    answer = api.post("/external/testbeds/tb/nodes", json={"count": 2}, headers=AUTH)

    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert [(n["name"], n["nodeId"], n["freeCpu"], n["room"], n["labelled"]) for n in body["nodes"]] == [
        ("big", 0, "16", 8, True),
        ("kept", 3, "4", 4, False),
    ]
    assert (body["testbed"], body["nodeLabel"], body["dryRun"], body["unlabelled"]) == ("tb", LABEL, False, ["dropped"])
    assert kube.patches == [
        ("dropped", {"metadata": {"labels": {LABEL: None}}}),
        ("big", {"metadata": {"labels": {LABEL: "0"}}}),
    ]


def test_a_dry_run_labels_nothing(api: TestClient, kube: FakeKube) -> None:
    answer = api.post("/external/testbeds/tb/nodes", json={"count": 2, "dryRun": True}, headers=AUTH)

    assert (answer.status_code, answer.json()["dryRun"], kube.patches) == (200, True, [])


def test_too_few_fitting_nodes_is_a_409_naming_each_nodes_problem(api: TestClient, kube: FakeKube) -> None:
    answer = api.post("/external/testbeds/tb/nodes", json={"count": 4}, headers=AUTH)

    assert answer.status_code == 409
    detail = answer.json()["detail"]
    assert detail["message"].startswith("only 3 of the 4 nodes Testbed tb asks for fit")
    assert {e["field"]: e["problem"] for e in detail["errors"]} == {
        "node/theirs": "carries esi.test/other, the node label of Testbed elsewhere/other",
        "node/crowded": "has room for 1 of its 2 slots (1 cpu, 8Gi memory free): lacks 1 cpu",
    }
    assert kube.patches == []


def test_a_node_with_slots_in_use_is_not_unlabelled(kube: FakeKube) -> None:
    slots = [{**status_slot(0, 0, "Occupied", job="wordcount"), "nodeName": "dropped"}]
    with api_with(kube, slots=slots) as api:
        answer = api.post("/external/testbeds/tb/nodes", json={"count": 2}, headers=AUTH)

    assert answer.status_code == 409
    assert answer.json()["detail"]["errors"] == [
        {"field": "node/dropped", "problem": "slots 0 of the Testbed are in use here"}
    ]
    assert kube.patches == []


@pytest.mark.parametrize(
    ("path", "body", "status"),
    [
        ("/external/testbeds/nope/nodes", {"count": 1}, 404),
        ("/external/testbeds/tb/nodes", {"count": 0}, 422),
        ("/external/testbeds/tb/nodes", {"count": 1, "dryrun": True}, 422),
    ],
    ids=["unknown-testbed", "count-zero", "unknown-field"],
)
def test_what_is_refused_before_any_node_is_read(
    api: TestClient, kube: FakeKube, path: str, body: dict[str, Any], status: int
) -> None:
    answer = api.post(path, json=body, headers=AUTH)

    assert answer.status_code == status, answer.text
    assert kube.patches == []


class MayNotPatchNodes:
    """RBAC as a Kubernetes authenticator applies it: this caller may read Testbeds, not patch nodes."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str, str, str]] = []

    async def authenticate(self, token: str | None) -> Principal:
        return Principal("reader")

    async def authorize(
        self, principal: Principal, verb: str, resource: str, namespace: str, *, group: str = GROUP
    ) -> None:
        self.asked.append((verb, group, resource, namespace))
        if resource == "nodes":
            raise Refusal(403, f"forbidden: {principal.name} may not {verb} {resource}")


def test_the_caller_needs_patch_on_nodes_cluster_wide(kube: FakeKube) -> None:
    authorizer = MayNotPatchNodes()
    with api_with(kube, authorizer) as api:
        answer = api.post("/external/testbeds/tb/nodes", json={"count": 1}, headers=AUTH)

    assert answer.status_code == 403
    assert ("patch", "", "nodes", "") in authorizer.asked
    assert ("get", GROUP, "testbeds", "default") in authorizer.asked


def test_esi_itself_not_allowed_to_read_nodes_says_which_permission_it_lacks(kube: FakeKube) -> None:
    kube.forbidden = True
    with api_with(kube) as api:
        answer = api.post("/external/testbeds/tb/nodes", json={"count": 1}, headers=AUTH)

    assert answer.status_code == 502
    assert "esi's API may not list nodes" in answer.json()["detail"]["message"]
