"""``GET /external/runs`` without a cluster: a run store filled by hand, as its watch would fill it."""

from __future__ import annotations

import asyncio
import csv
import io
from collections.abc import Iterator
from typing import Any, cast

import pytest
from fastapi.testclient import TestClient
from lightkube import AsyncClient

from api.app import create_api_app
from api.auth import StaticToken
from api.runs import RunStore, run_stream
from esi.results.table import COLUMNS, RunPage
from kube.resources import RunResource
from kube.watch import streaming
from tests import virtual_time
from tests.builders import run_object
from tests.unit.fake_cluster import FakeCluster

TOKEN = "s3cret-token"  # noqa: S105 (a test token)
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def store() -> RunStore:
    store = RunStore()
    store.listed(
        [
            run_object("pi", 1, 0, 100, ["n1"], namespace="default", labels={"experiment": "e1"}),
            run_object("wc", 1, 50, 100, ["n1"], namespace="default", scheduling="s2"),
            run_object("pi", 2, 200, 10, ["n2"], namespace="default", outcome="Failed"),
            run_object("pi", 1, 0, 100, ["n9"], namespace="other"),
        ]
    )
    return store


@pytest.fixture
def api(store: RunStore) -> Iterator[TestClient]:
    with TestClient(create_api_app(StaticToken(TOKEN), run_store=store)) as client:
        yield client


def names(answer: Any) -> list[str]:
    assert answer.status_code == 200, answer.text
    return [entry["name"] for entry in RunPage.model_validate(answer.json()).model_dump(by_alias=True)["items"]]


def test_the_namespaces_runs_in_order_with_the_seconds_they_met(api: TestClient) -> None:
    answer = api.get("/external/runs", headers=AUTH)

    assert names(answer) == ["pi-uid-pi-1", "wc-uid-wc-1", "pi-uid-pi-2"]
    first = answer.json()["items"][0]
    assert first["colocated"] == [{"job": "wc", "seconds": 50.0}]
    assert (first["started"], first["runtimeSeconds"], first["waitingSeconds"]) == ("2026-11-28T12:00:00Z", 100.0, 2.0)
    assert answer.json()["continue"] is None


@pytest.mark.parametrize(
    ("params", "selected"),
    [
        ({"job": "wc"}, ["wc-uid-wc-1"]),
        ({"job": ["wc", "pi"]}, ["pi-uid-pi-1", "wc-uid-wc-1", "pi-uid-pi-2"]),
        ({"scheduling": "s2"}, ["wc-uid-wc-1"]),
        ({"outcome": "Failed"}, ["pi-uid-pi-2"]),
        ({"selector": "experiment=e1"}, ["pi-uid-pi-1"]),
        ({"selector": "!experiment,esi.tu-berlin.de/job in (pi)"}, ["pi-uid-pi-2"]),
        ({"since": "2026-11-28T12:02:30Z"}, ["wc-uid-wc-1", "pi-uid-pi-2"]),
        ({"until": "2026-11-28T12:00:50"}, ["pi-uid-pi-1"]),
        ({"namespace": "other"}, ["pi-uid-pi-1"]),
        ({"testbed": "nowhere"}, []),
    ],
)
def test_filters(api: TestClient, params: dict[str, Any], selected: list[str]) -> None:
    assert names(api.get("/external/runs", params=params, headers=AUTH)) == selected


def test_pages_follow_the_continue_token_in_body_and_header(api: TestClient) -> None:
    seen: list[str] = []
    token: str | None = None
    while True:
        answer = api.get("/external/runs", params={"limit": 2, **({"continue": token} if token else {})}, headers=AUTH)
        seen += names(answer)
        token = answer.json()["continue"]
        assert answer.headers.get("Esi-Continue") == token
        if token is None:
            break

    assert seen == ["pi-uid-pi-1", "wc-uid-wc-1", "pi-uid-pi-2"]


def test_csv_has_a_header_of_the_columns_and_a_line_per_run(api: TestClient) -> None:
    answer = api.get("/external/runs", params={"format": "csv"}, headers=AUTH)

    assert answer.headers["content-type"].startswith("text/csv")
    header, *rows = list(csv.reader(io.StringIO(answer.text)))
    assert tuple(header) == COLUMNS
    first = dict(zip(header, rows[0], strict=True))
    assert (first["name"], first["colocated"], first["nodes"], first["ended"]) == (
        "pi-uid-pi-1",
        "wc=50.0",
        "n1",
        "2026-11-28T12:01:40Z",
    )
    assert len(rows) == 3


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"continue": "not-a-token"}, "query.continue"),
        ({"selector": "=x"}, "query.selector"),
        ({"limit": 0}, "query.limit"),
        ({"limit": 100_001}, "query.limit"),
        ({"outcome": ["Failed", "Maybe"]}, "query.outcome.1"),
        ({"format": "xml"}, "query.format"),
        ({"since": "yesterday"}, "query.since"),
        ({"since": "-97006496"}, "query.since"),
        ({"until": "1764331200"}, "query.until"),
    ],
)
def test_a_wrong_parameter_is_a_422_naming_it(api: TestClient, params: dict[str, Any], field: str) -> None:
    answer = api.get("/external/runs", params=params, headers=AUTH)

    assert answer.status_code == 422
    assert [e["field"] for e in answer.json()["detail"]["errors"]] == [field]


def test_a_run_seen_again_or_deleted_changes_the_neighbours_answer(api: TestClient, store: RunStore) -> None:
    assert api.get("/external/runs", headers=AUTH).json()["items"][0]["colocated"] == [{"job": "wc", "seconds": 50.0}]

    store.deleted(run_object("wc", 1, 50, 100, ["n1"], namespace="default"))
    store.observed(run_object("sort", 1, 90, 100, ["n1"], namespace="default"))

    assert api.get("/external/runs", headers=AUTH).json()["items"][0]["colocated"] == [{"job": "sort", "seconds": 10.0}]


def test_before_the_first_list_the_route_says_it_is_not_ready_and_needs_a_token() -> None:
    with TestClient(create_api_app(StaticToken(TOKEN))) as api:
        assert api.get("/external/runs").status_code == 401
        assert api.get("/external/runs", headers=AUTH).status_code == 503


def test_a_run_that_does_not_read_as_one_is_left_out(caplog: pytest.LogCaptureFixture) -> None:
    store = RunStore()
    broken = run_object("pi", 1, 0, 10, ["n1"])
    del broken["spec"]["start"]
    store.listed([broken, run_object("wc", 1, 0, 10, ["n1"])])

    assert [row.name for row in store.rendered.table] == ["wc-uid-wc-1"]
    assert "left out" in caplog.text


def test_the_route_is_in_openapi_with_its_models_and_csv() -> None:
    schema = create_api_app(StaticToken(TOKEN)).openapi()
    route = schema["paths"]["/external/runs"]["get"]

    assert set(route["responses"]["200"]["content"]) == {"application/json", "text/csv"}
    assert route["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith("/RunPage")
    assert {p["name"] for p in route["parameters"]} >= {"job", "selector", "since", "until", "limit", "continue"}


def test_the_run_stream_lists_piece_by_piece_and_a_relist_forgets_what_went() -> None:
    def run(job: str) -> Any:
        return RunResource.from_dict(run_object(job, 1, 0, 10, ["n1"], namespace="default"))

    cluster = FakeCluster(
        lists={RunResource: [([run("pi"), run("wc")], "10"), ([run("pi")], "20")]},
        watches={RunResource: [RuntimeError("the watch broke"), [("ADDED", run("sort"))]]},
    )
    store = RunStore()

    async def follow() -> None:
        async with streaming([run_stream(store)], cast(AsyncClient, cluster), min_backoff=0.001, max_backoff=0.01):
            async with asyncio.timeout(5):
                while store.rendered.table.get("default", "sort-uid-sort-1") is None:
                    await asyncio.sleep(0.001)

    virtual_time.run(follow())

    assert store.synced
    assert [row.job for row in store.rendered.table] == ["pi", "sort"], "wc was not in the second list"
    assert cluster.count("list", "Run") == 2
