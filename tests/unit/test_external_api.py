"""The ``/external`` routes without a cluster: reads from a cache filled by hand, tokens, refusals.

Writes need an API server; they are tested against the real one (tests/integration/test_api.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_api_app
from api.auth import ANONYMOUS, Principal, Refusal, StaticToken
from api.cache import ResourceCache
from api.extender.app import create_extender_app
from esi.resources.meta import GROUP
from kube.resources import BatchJobResource, SchedulingResource
from tests.builders import status_slot, stored
from tests.manifests import FLINK, batchjob_manifest, scheduling_manifest, testbed_manifest

TOKEN = "s3cret-token"  # noqa: S105 (a test token)
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def cache() -> ResourceCache:
    cache = ResourceCache()
    cache.testbeds.observed(
        stored(testbed_manifest(), "empty", namespace="default")
    )  # no slots yet: the original answered 500
    slots = [status_slot(i, i % 2) for i in range(4)]
    cache.testbeds.observed(stored(testbed_manifest(), "tb", namespace="default", state="Ready", slots=slots))
    cache.jobs.observed(stored(batchjob_manifest(), "wordcount", namespace="default"))
    cache.jobs.observed(stored(batchjob_manifest(), "elsewhere", namespace="other"))
    cache.schedulings.observed(stored(scheduling_manifest(), "s", namespace="default"))
    return cache


@pytest.fixture
def api(cache: ResourceCache) -> Iterator[TestClient]:
    with TestClient(create_api_app(StaticToken(TOKEN), cache=cache)) as client:
        yield client


def test_testbeds_in_the_originals_shape_also_without_slots(api: TestClient) -> None:
    listed = api.get("/external/testbeds", headers=AUTH)
    one = api.get("/external/testbeds/tb", headers=AUTH)
    empty = api.get("/external/testbeds/empty", headers=AUTH)

    assert listed.status_code == 200
    assert [t["name"] for t in listed.json()] == ["empty", "tb"]
    assert one.json()["numberOfNodes"] == 2
    assert [s["position"] for s in one.json()["slotsByNode"]["n0"]] == [0, 2]
    assert (empty.status_code, empty.json()["slotsByNode"]) == (200, {})


def test_jobs_by_name_and_one_job(api: TestClient) -> None:
    assert list(api.get("/external/jobs", headers=AUTH).json()) == ["wordcount"]
    assert api.get("/external/jobs/wordcount", headers=AUTH).json()["state"] == "ReadyState"


def test_the_namespace_parameter_selects_another_namespace(api: TestClient) -> None:
    assert list(api.get("/external/jobs", params={"namespace": "other"}, headers=AUTH).json()) == ["elsewhere"]
    bad = api.get("/external/jobs", params={"namespace": "Not_A_Namespace"}, headers=AUTH)
    assert bad.status_code == 422
    assert bad.json()["detail"]["errors"][0]["field"] == "query.namespace"


def test_schedulings_and_the_overview(api: TestClient) -> None:
    assert api.get("/external/schedulings/s", headers=AUTH).json()["state"] == "AcquireState"
    overview = api.get("/external/overview", headers=AUTH).json()

    assert overview["namespace"] == "default"
    assert [(t["name"], t["slots"], t["free"]) for t in overview["testbeds"]] == [("empty", 0, 0), ("tb", 4, 4)]
    assert [s["name"] for s in overview["schedulings"]] == ["s"]


@pytest.mark.parametrize(
    "path",
    ["/external/testbeds/nope", "/external/jobs/nope", "/external/schedulings/nope"],
)
def test_what_does_not_exist_is_a_404_naming_it(api: TestClient, path: str) -> None:
    answer = api.get(path, headers=AUTH)

    assert answer.status_code == 404
    assert "nope" in answer.json()["detail"]["message"]
    assert "namespace default" in answer.json()["detail"]["message"]


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ({}, "no bearer token"),
        ({"Authorization": "Bearer wrong"}, "token"),
        ({"Authorization": f"Basic {TOKEN}"}, "not a bearer token"),
    ],
)
def test_without_the_token_every_route_is_a_401_with_the_reason(
    api: TestClient, headers: dict[str, str], reason: str
) -> None:
    for path in ("/external/testbeds", "/external/overview", "/external/jobs/wordcount"):
        answer = api.get(path, headers=headers)
        assert answer.status_code == 401, path
        assert reason in answer.json()["detail"]["message"]
        assert answer.headers["WWW-Authenticate"].startswith("Bearer")


def test_health_readiness_metrics_and_docs_need_no_token(api: TestClient) -> None:
    assert api.get("/healthz").status_code == 200
    assert api.get("/readyz").status_code == 503, "nothing listed from a cluster: not ready"
    metrics = api.get("/metrics")
    assert metrics.status_code == 200
    assert 'esi_testbed_slots{namespace="default",state="Free",testbed="tb"} 4.0' in metrics.text
    assert "esi_api_request_duration_seconds" in metrics.text
    assert api.get("/openapi.json").json()["paths"]["/external/schedulings"]["post"]


def test_metrics_have_one_series_for_every_made_up_method_and_unknown_path(api: TestClient) -> None:
    for method in ("FOO", "BAR1", "PROPFIND"):
        api.request(method, "/external/testbeds", headers=AUTH)
        api.request(method, f"/nowhere/{method}", headers=AUTH)

    metrics = api.get("/metrics").text
    assert "FOO" not in metrics
    assert "PROPFIND" not in metrics
    assert "/nowhere" not in metrics
    assert 'method="other",route="/external/testbeds",status="405"' in metrics


def test_metrics_are_documented_as_prometheus_text(api: TestClient) -> None:
    described = api.get("/openapi.json").json()["paths"]["/metrics"]["get"]["responses"]["200"]["content"]

    (media_type,) = described
    assert media_type.startswith("text/plain; version=")
    assert api.get("/metrics").headers["content-type"] == media_type


class ReadOnly:
    """RBAC as a Kubernetes authenticator would apply it: this caller may read, not submit."""

    async def authenticate(self, token: str | None) -> Principal:
        if token != TOKEN:
            raise Refusal(401, "unknown token")
        return Principal("reader")

    async def authorize(
        self, principal: Principal, verb: str, resource: str, namespace: str, *, group: str = GROUP
    ) -> None:
        if verb not in ("get", "list", "watch"):
            raise Refusal(403, f"forbidden: {principal.name} may not {verb} {resource} in namespace {namespace}")


def test_a_caller_may_read_but_not_submit_is_refused_with_403(cache: ResourceCache) -> None:
    with TestClient(create_api_app(ReadOnly(), cache=cache)) as api:
        assert api.get("/external/schedulings", headers=AUTH).status_code == 200
        body = {"name": "s2", "testBed": "tb", "queue": ["wordcount"]}
        refused = api.post("/external/schedulings", json=body, headers=AUTH)
        deleted = api.delete("/external/schedulings/s", headers=AUTH)

    assert refused.status_code == 403
    assert refused.json()["detail"]["message"] == "forbidden: reader may not create schedulings in namespace default"
    assert deleted.status_code == 403


def slots(mode: str, *jobs: tuple[str, list[Any]]) -> dict[str, Any]:
    return {"mode": mode, "jobs": [{"name": name, "slots": ids} for name, ids in jobs]}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "s", "testBed": "tb"}, "(body)"),  # neither queue nor slots
        ({"name": "s", "testBed": "tb", "queue": ["a"], "slots": slots("STRICT", ("a", [0]))}, "(body)"),
        ({"name": " ", "testBed": "tb", "queue": ["a"]}, "name"),
        ({"name": "s", "testBed": "tb", "slots": slots("SOMETIMES", ("a", [0]))}, "slots.mode"),
        ({"name": "s", "testBed": "tb", "slots": slots("STRICT", ("a", []))}, "slots.jobs.0.slots"),
        ({"name": "s", "testBed": "tb", "slots": slots("STRICT")}, "slots.jobs"),
        ({"name": "s", "testBed": "tb", "queue": []}, "queue"),
        ({"name": "s", "testBed": "tb", "slots": slots("relaxed", ("a", [-1]))}, "slots.jobs.0.slots.0"),
        ({"name": "s", "testBed": "tb", "slots": slots("relaxed", ("a", [1, 1]))}, "slots.jobs.0.slots"),
        ({"name": "s", "testBed": "tb", "slots": slots("relaxed", ("a", [True]))}, "slots.jobs.0.slots.0"),
        ({"name": "s", "testBed": "tb", "slots": slots("relaxed", ("a", [1.0]))}, "slots.jobs.0.slots.0"),
        ({"name": "s", "testBed": "tb", "slots": slots("relaxed", ("a", ["1"]))}, "slots.jobs.0.slots.0"),
        ({"name": "s", "testBed": "../x", "queue": ["a"]}, "testBed"),
        ({"name": "s", "testBed": "tb\n", "queue": ["a"]}, "testBed"),
        ({"name": "s", "testBed": "Tb", "queue": ["a"]}, "testBed"),
        ({"name": "s/x", "testBed": "tb", "queue": ["a"]}, "name"),
        ({"name": "s", "testBed": "tb", "queue": ["a", " "]}, "queue.1"),
        ({"name": "s", "testBed": "tb", "queue": ["../wordcount"]}, "queue.0"),
        ({"name": "s", "testBed": "tb", "queue": ["word\x00count"]}, "queue.0"),
        ({"name": "s", "testBed": "tb", "slots": slots("STRICT", ("a/b", [0]))}, "slots.jobs.0.name"),
    ],
)
def test_an_invalid_scheduling_is_a_422_naming_the_field_and_nothing_is_written(
    api: TestClient, cache: ResourceCache, body: dict[str, Any], field: str
) -> None:
    answer = api.post("/external/schedulings", json=body, headers=AUTH)

    assert answer.status_code == 422, answer.text
    fields = [e["field"] for e in answer.json()["detail"]["errors"]]
    assert any(f.startswith(field) for f in fields), fields
    assert [s.metadata.name for s in cache.schedulings.in_namespace("default")] == ["s"]


def test_a_scheduling_naming_a_job_that_can_never_run_in_the_testbeds_slots_is_a_422_at_its_first_entry(
    api: TestClient, cache: ResourceCache
) -> None:
    # The Testbed's slots are 896 MiB: Flink's own settings, as this job writes them, leave its TaskManager no heap.
    flink = FLINK | {"flinkConfiguration": {"taskmanager.memory.managed.fraction": "0.9"}}
    cache.jobs.observed(stored(batchjob_manifest(sparkSpec=None, flinkSpec=flink), "greedy", namespace="default"))
    body = {"name": "s2", "testBed": "tb", "queue": ["wordcount", "greedy", "greedy"]}

    answer = api.post("/external/schedulings", json=body, headers=AUTH)

    assert answer.status_code == 422, answer.text
    (problem,) = answer.json()["detail"]["errors"]
    assert problem["field"] == "queue[1]"
    assert problem["problem"].startswith("job greedy can never run in testbed tb's slots: ")
    assert "taskmanager.memory.managed.fraction" in problem["problem"]
    assert [s.metadata.name for s in cache.schedulings.in_namespace("default")] == ["s"]


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (
            {
                "apiVersion": "esi.tu-berlin.de/v1alpha1",
                "kind": "Scheduling",
                "metadata": {"name": "m"},
                "spec": {"testbed": {"name": "tb"}, "queueBased": [{"name": "a"}]},
            },
            ["this is a Scheduling manifest: send {name, testBed, queue | slots}", "esi submit"],
        ),
        (
            {"name": "m", "testbed": {"name": "tb"}, "queueBased": [{"name": "a"}]},
            ["testbed is a manifest's name: here it is testBed", "queueBased is a manifest's name: here it is queue"],
        ),
        (
            {"name": "m", "testBed": "tb", "slotBased": {"mode": "strict", "jobs": [{"name": "a", "slotIds": [0]}]}},
            ["slotBased is a manifest's name: here it is slots"],
        ),
    ],
)
def test_a_body_in_a_manifests_words_is_a_422_giving_the_apis_words(
    api: TestClient, cache: ResourceCache, body: dict[str, Any], said: list[str]
) -> None:
    answer = api.post("/external/schedulings", json=body, headers=AUTH)

    assert answer.status_code == 422, answer.text
    (problem,) = answer.json()["detail"]["errors"]
    assert problem["field"] == "(body)"
    assert all(words in problem["problem"] for words in said), problem
    assert [s.metadata.name for s in cache.schedulings.in_namespace("default")] == ["s"]


def test_the_openapi_submission_schema_is_as_strict_as_the_server(api: TestClient) -> None:
    schemas = api.get("/openapi.json").json()["components"]["schemas"]
    submission, slots_job = schemas["SchedulingSubmission"], schemas["SubmittedSlotsJob"]

    assert {"pattern", "maxLength"} <= set(submission["properties"]["testBed"])
    assert {"pattern", "maxLength"} <= set(submission["properties"]["name"])
    queue = next(s for s in submission["properties"]["queue"]["anyOf"] if s.get("type") == "array")
    assert "pattern" in queue["items"]
    assert queue["maxItems"] == 4096
    assert [sorted(one["required"]) for one in submission["oneOf"]] == [["queue"], ["slots"]]
    assert "pattern" in slots_job["properties"]["name"]
    assert slots_job["properties"]["slots"]["uniqueItems"] is True
    assert slots_job["properties"]["slots"]["items"] == {"type": "integer", "minimum": 0}


def test_a_body_that_is_not_json_is_a_422_not_a_500(api: TestClient) -> None:
    answer = api.post(
        "/external/schedulings", content=b"{not json", headers=AUTH | {"content-type": "application/json"}
    )

    assert answer.status_code == 422
    assert answer.json()["detail"]["errors"]


# The original ESI's fields of each object, as its Java classes declared them: a client mapping them strictly
# (Jackson's plain ObjectMapper, as its STOMP handler used) fails on any other field.
ORIGINAL_TESTBED = {"name", "state", "numberOfNodes", "numberOfSlotsPerNode", "slotsByNode"}
ORIGINAL_SLOT = {"reservedFor", "state", "podName", "nodeName", "nodeId", "slotPositionOnNode", "podUId", "position"}
ORIGINAL_JOB = {"name", "state", "externalScheduler", "scheduledEvents"}
ORIGINAL_RUN = {"start", "stop", "successful", "scheduling"}
ORIGINAL_SCHEDULING = {"name", "state", "jobStatus", "testBed", "queue", "slots"}
RUN = {
    "scheduling": "s",
    "testbed": "tb",
    "slots": [0, 1],
    "nodes": ["n0", "n1"],
    "colocatedJobs": ["other"],
    "start": "2026-11-23T10:00:00Z",
    "end": "2026-11-23T10:01:00Z",
    "outcome": "Succeeded",
}


@pytest.fixture
def ran(cache: ResourceCache) -> ResourceCache:
    cache.jobs.observed(stored(batchjob_manifest(), "ran", namespace="default", state="Succeeded", runs=[RUN]))
    return cache


def test_by_default_every_answer_has_exactly_the_originals_fields(api: TestClient, ran: ResourceCache) -> None:
    testbeds = api.get("/external/testbeds", headers=AUTH).json()
    testbed = api.get("/external/testbeds/tb", headers=AUTH).json()
    jobs = api.get("/external/jobs", headers=AUTH).json()
    job = api.get("/external/jobs/ran", headers=AUTH).json()
    schedulings = api.get("/external/schedulings", headers=AUTH).json()
    scheduling = api.get("/external/schedulings/s", headers=AUTH).json()

    assert [set(t) for t in [*testbeds, testbed]] == [ORIGINAL_TESTBED] * 3
    assert {frozenset(s) for node in testbed["slotsByNode"].values() for s in node} == {frozenset(ORIGINAL_SLOT)}
    assert [set(j) for j in [*jobs.values(), job]] == [ORIGINAL_JOB] * 3
    assert [set(e) for e in job["scheduledEvents"]] == [ORIGINAL_RUN]
    assert set(job["scheduledEvents"][0]["scheduling"]) == {"name", "namespace"}
    assert [set(s) for s in [*schedulings, scheduling]] == [ORIGINAL_SCHEDULING] * 2


def test_view_esi_adds_esis_own_fields(api: TestClient, ran: ResourceCache) -> None:
    esi = {"view": "esi"}
    testbed = api.get("/external/testbeds/tb", params=esi, headers=AUTH).json()
    job = api.get("/external/jobs/ran", params=esi, headers=AUTH).json()
    scheduling = api.get("/external/schedulings", params=esi, headers=AUTH).json()[0]

    assert set(testbed) - ORIGINAL_TESTBED == {"namespace", "esiState", "heldBy", "message", "conditions"}
    assert (testbed["esiState"], testbed["namespace"]) == ("Ready", "default")
    assert set(job) - ORIGINAL_JOB == {"namespace", "esiState", "message", "waitingFor", "conditions"}
    run = job["scheduledEvents"][0]
    assert set(run) - ORIGINAL_RUN == {
        "attempt",
        "testbed",
        "slots",
        "nodes",
        "colocatedJobs",
        "outcome",
        "reason",
        "incomplete",
    }
    assert (run["testbed"], run["colocatedJobs"], run["outcome"], run["reason"]) == ("tb", ["other"], "Succeeded", None)
    assert set(scheduling) - ORIGINAL_SCHEDULING == {"namespace", "esiState", "waitingFor", "conditions"}


def test_an_unknown_view_is_a_422_naming_the_parameter(api: TestClient) -> None:
    answer = api.get("/external/testbeds", params={"view": "full"}, headers=AUTH)

    assert answer.status_code == 422
    assert [e["field"] for e in answer.json()["detail"]["errors"]] == ["query.view"]


def test_anonymous_callers_are_let_in_only_where_the_server_allows_it(cache: ResourceCache) -> None:
    with TestClient(create_api_app(StaticToken(TOKEN), cache=cache)) as closed:
        refused = closed.get("/external/testbeds")
    with TestClient(create_api_app(StaticToken(TOKEN, anonymous=True), cache=cache)) as open_:
        let_in = open_.get("/external/testbeds")
        wrong_token = open_.get("/external/testbeds", headers={"Authorization": "Bearer wrong"})

    assert refused.status_code == 401
    assert "does not let anonymous callers in" in refused.json()["detail"]["message"]
    assert let_in.status_code == 200
    assert wrong_token.status_code == 401, "a token that is sent must be right, even where none is needed"


@pytest.mark.parametrize("header", [f"Basic {TOKEN}", "Bearer", f"Bearer {TOKEN} {TOKEN}", "Negotiate x"])
def test_where_anonymous_callers_may_do_anything_a_malformed_authorization_header_is_a_401(
    cache: ResourceCache, header: str
) -> None:
    with TestClient(create_api_app(StaticToken(TOKEN, anonymous=True), cache=cache)) as api:
        read = api.get("/external/testbeds", headers={"Authorization": header})
        submitted = api.post(
            "/external/schedulings",
            json={"name": "s2", "testBed": "tb", "queue": ["wordcount"]},
            headers={"Authorization": header},
        )

    assert (read.status_code, submitted.status_code) == (401, 401)
    assert "not a bearer token" in read.json()["detail"]["message"]
    assert read.headers["WWW-Authenticate"].startswith("Bearer")
    assert [s.metadata.name for s in cache.schedulings.in_namespace("default")] == ["s"]


class AnonymousMayRead:
    """An authorizer that, like RBAC with a Role bound to system:anonymous, lets anonymous callers read."""

    async def authenticate(self, token: str | None) -> Principal:
        if token is not None:
            raise Refusal(401, "unknown token")
        return ANONYMOUS

    async def authorize(
        self, principal: Principal, verb: str, resource: str, namespace: str, *, group: str = GROUP
    ) -> None:
        if principal != ANONYMOUS or verb not in ("get", "list", "watch"):
            raise Refusal(403, f"forbidden: {principal.name} may not {verb} {resource} in namespace {namespace}")


def test_anonymous_callers_are_authorized_like_everyone_else(cache: ResourceCache) -> None:
    with TestClient(create_api_app(AnonymousMayRead(), cache=cache)) as api:
        read = api.get("/external/schedulings")
        submitted = api.post("/external/schedulings", json={"name": "s2", "testBed": "tb", "queue": ["wordcount"]})

    assert read.status_code == 200
    assert submitted.status_code == 403
    assert submitted.json()["detail"]["message"].startswith("forbidden: system:anonymous may not create schedulings")


@pytest.mark.parametrize(
    ("body", "field", "says"),
    [
        ({"slots": slots("STRICT", ("wordcount", [1, 7]))}, "slots", "lists slot 7, which testbed does not have"),
        ({"queue": ["wordcount"] * 5}, "queue", "needs 5 slots but testbed has 4"),
    ],
    ids=["a slot it does not have", "more executors than slots"],
)
def test_a_scheduling_its_testbed_could_never_run_is_a_422_and_nothing_is_written(
    api: TestClient, cache: ResourceCache, body: dict[str, Any], field: str, says: str
) -> None:
    answer = api.post("/external/schedulings", json={"name": "s2", "testBed": "tb"} | body, headers=AUTH)

    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"]["message"].startswith("Testbed tb could never run Scheduling s2: ")
    problems = answer.json()["detail"]["errors"]
    assert [p["field"] for p in problems] == [field]
    assert says in problems[0]["problem"]
    assert [s.metadata.name for s in cache.schedulings.in_namespace("default")] == ["s"]


class DeletingKube:
    """The API server holding the cache's Scheduling ``s`` until it is deleted."""

    def __init__(self, cache: ResourceCache) -> None:
        scheduling = cache.schedulings.get("default", "s")
        assert scheduling is not None
        self.stored = scheduling.model_dump(mode="json", by_alias=True, exclude_none=True)

    async def get(self, resource: Any, name: str, *, namespace: str | None = None) -> Any:
        return SchedulingResource.from_dict(self.stored)

    async def delete(self, resource: Any, name: str, *, namespace: str | None = None) -> None:
        return None


def test_a_submissions_answer_links_to_reading_and_deleting_the_scheduling_it_wrote() -> None:
    described = create_api_app(StaticToken("t")).openapi()
    responses = described["paths"]["/external/schedulings"]["post"]["responses"]

    for status in ("200", "201"):
        links = responses[status]["links"]
        targets = {link["operationRef"].removeprefix("#/paths/").replace("~1", "/") for link in links.values()}
        assert targets == {"/external/schedulings/{name}/get", "/external/schedulings/{name}/delete"}
        for link in links.values():
            path, method = link["operationRef"].removeprefix("#/paths/").replace("~1", "/").rsplit("/", 1)
            parameters = {p["name"] for p in described["paths"][path][method]["parameters"]}
            assert set(link["parameters"]) <= parameters


def test_a_deleted_scheduling_is_gone_for_the_next_read(cache: ResourceCache) -> None:
    with TestClient(create_api_app(StaticToken(TOKEN), cache=cache, kube=DeletingKube(cache))) as api:  # type: ignore[arg-type]
        deleted = api.delete("/external/schedulings/s", headers=AUTH)
        read = api.get("/external/schedulings/s", headers=AUTH)
        listed = api.get("/external/schedulings", headers=AUTH)

    assert deleted.status_code == 200, deleted.text
    assert deleted.json()["name"] == "s"
    assert read.status_code == 404
    assert listed.json() == []


class ListingKube:
    """The API server as the missing-jobs check sees it: BatchJobs ``present`` (not in the cache yet), every
    request recorded."""

    def __init__(self, *present: str) -> None:
        self.present = present
        self.requests: list[tuple[str, str | None]] = []

    def list(self, resource: Any, *, namespace: str | None = None, **_: Any) -> Any:
        self.requests.append(("list", namespace))

        async def listed() -> Any:
            for name in self.present:
                yield BatchJobResource.from_dict(stored(batchjob_manifest(), name, namespace=namespace or "default"))

        return listed()

    async def get(self, resource: Any, name: str, *, namespace: str | None = None) -> Any:
        self.requests.append(("get", name))
        raise AssertionError("one LIST answers for every job")


def test_a_submission_naming_many_missing_jobs_reads_the_api_server_once(cache: ResourceCache) -> None:
    kube = ListingKube("made-just-now")
    missing = [f"missing-{i}" for i in range(200)]
    with TestClient(create_api_app(StaticToken(TOKEN), cache=cache, kube=kube)) as api:  # type: ignore[arg-type]
        body = {"name": "s2", "testBed": "tb", "queue": ["wordcount", "made-just-now", *missing]}
        answer = api.post("/external/schedulings", json=body, headers=AUTH)

    assert answer.status_code == 422, answer.text
    fields = [e["field"] for e in answer.json()["detail"]["errors"]]
    assert fields == [f"queue[{i}]" for i in range(2, 202)]
    assert kube.requests == [("list", "default")]


def test_a_body_over_the_documented_limit_is_a_413_stating_the_limit(api: TestClient) -> None:
    huge = {"name": "s2", "testBed": "tb", "queue": ["wordcount"] * 250_000}  # 3 MiB
    said = api.post("/external/schedulings", json=huge, headers=AUTH)
    streamed = api.post(
        "/external/schedulings",
        content=iter([b'{"name": "s2", "queue": [', *[b'"wordcount",' * 1000] * 300, b'"x"]}']),
        headers=AUTH | {"content-type": "application/json"},
    )

    for answer in (said, streamed):
        assert answer.status_code == 413, answer.text
        assert "2 MiB" in answer.json()["detail"]["message"]
    assert "413" in api.get("/openapi.json").json()["paths"]["/external/schedulings"]["post"]["responses"]
    assert "2 MiB" in api.get("/openapi.json").json()["info"]["description"]


@pytest.mark.parametrize("app", ["api", "extender"])
def test_every_operation_taking_a_body_documents_the_doors_refusals(app: str) -> None:
    """A body that is no JSON is a 400 and one over the limit a 413 on every such route (``api.door``)."""
    described = (create_api_app(StaticToken("t")) if app == "api" else create_extender_app()).openapi()
    with_body = [
        (method, path)
        for path, operations in described["paths"].items()
        for method, operation in operations.items()
        if "requestBody" in operation
    ]
    undocumented = [
        (method, path, code)
        for method, path in with_body
        for code in ("400", "413")
        if code not in described["paths"][path][method]["responses"]
    ]

    assert len(with_body) >= 3
    assert undocumented == []


def test_external_scheduler_data_a_batchjob_cannot_hold_is_a_422_naming_the_field(api: TestClient) -> None:
    data = {"profiler": [{f"run-{i}": "x" * 1000 for i in range(600)}]}  # 600 KB
    answer = api.put("/external/jobs", json={"name": "wordcount", "externalScheduler": data}, headers=AUTH)

    assert answer.status_code == 422, answer.text
    (problem,) = answer.json()["detail"]["errors"]
    assert problem["field"] == "externalScheduler"
    assert "512 KiB" in problem["problem"]
    schema = api.get("/openapi.json").json()["components"]["schemas"]["JobUpdate"]
    assert "512 KiB" in schema["properties"]["externalScheduler"]["description"]


@pytest.mark.parametrize(
    ("method", "path", "status", "allowed"),
    [
        ("GET", "/nowhere", 404, None),
        ("DELETE", "/external/jobs", 405, "GET, PUT"),
        ("PUT", "/external/schedulings/s", 405, "DELETE, GET"),
        ("PATCH", "/external/schedulings", 405, "GET, POST"),
        ("BREW", "/external/testbeds", 405, "GET"),
    ],
)
def test_routing_refusals_have_the_one_error_shape_and_405_allows_every_method_of_the_path(
    api: TestClient, method: str, path: str, status: int, allowed: str | None
) -> None:
    answer = api.request(method, path, headers=AUTH)

    assert answer.status_code == status
    assert answer.json()["detail"]["message"]
    assert answer.headers.get("Allow") == allowed


def test_a_body_that_is_not_utf8_is_refused_in_the_one_error_shape(api: TestClient) -> None:
    answer = api.post(
        "/external/schedulings", content=b'{"name": "\xff\xfe"}', headers=AUTH | {"content-type": "application/json"}
    )

    assert answer.status_code in {400, 422}
    assert answer.json()["detail"]["errors"][0]["field"] == "(body)"


@pytest.mark.parametrize(
    "body",
    [b"{not json", b'{"name": "\xff"}', b'{"name": 1}', b"[]"],
    ids=["not json", "not utf-8", "schema-invalid", "not an object"],
)
def test_who_may_not_submit_is_refused_before_the_body_is_read(cache: ResourceCache, body: bytes) -> None:
    json_type = {"content-type": "application/json"}
    with TestClient(create_api_app(ReadOnly(), cache=cache)) as api:
        anonymous = api.post("/external/schedulings", content=body, headers=json_type)
        reader = api.post("/external/schedulings", content=body, headers=json_type | AUTH)
        job = api.put("/external/jobs", content=body, headers=json_type | AUTH)

    assert (anonymous.status_code, reader.status_code, job.status_code) == (401, 403, 403)
    assert anonymous.headers["WWW-Authenticate"].startswith("Bearer")


class _StoredJobs:
    """The API server's side of ``PUT /external/jobs`` for jobs the cache does not hold: what ``get`` returns,
    and the patches that were sent (none may be, for a job that cannot run)."""

    def __init__(self, *jobs: dict[str, Any]) -> None:
        self.jobs = {job["metadata"]["name"]: job for job in jobs}
        self.patched: list[str] = []

    async def get(self, resource: Any, name: str, *, namespace: str) -> Any:
        return BatchJobResource.from_dict(self.jobs[name])

    async def patch(self, resource: Any, name: str, patch: Any, **_: Any) -> Any:
        self.patched.append(name)
        return BatchJobResource.from_dict(self.jobs[name])


def test_external_scheduler_data_for_a_stored_job_that_can_never_run_is_a_422_naming_its_field() -> None:
    # Stored before its CRD had the rule: its driver names no ServiceAccount, so no run of it could start.
    manifest = batchjob_manifest()
    del manifest["spec"]["sparkSpec"]["driver"]
    kube = _StoredJobs(stored(manifest, "legacy", namespace="default"))
    app = create_api_app(StaticToken(TOKEN), cache=ResourceCache(), kube=kube)  # type: ignore[arg-type]

    with TestClient(app) as api:
        answer = api.put("/external/jobs", json={"name": "legacy", "externalScheduler": {}}, headers=AUTH)

    assert answer.status_code == 422, answer.text
    (problem,) = answer.json()["detail"]["errors"]
    assert problem["field"] == "spec.sparkSpec.driver.serviceAccount"
    assert "set driver.serviceAccount" in problem["problem"]
    assert kube.patched == []
