"""The typed client against a fake esi API (httpx.MockTransport) and a fake STOMP subscription: paths,
namespace and token on every request, results parsed into the wire models, each refusal its exception."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from esi.client import (
    ApiStatusError,
    AsyncEsiClient,
    Conflict,
    EsiClient,
    EsiConnectionError,
    Event,
    Forbidden,
    Invalid,
    NotFound,
    ResourceDeleted,
    StompError,
    SubscriptionRefused,
    Unauthorized,
    Unavailable,
    UnexpectedResponse,
    WaitTimeout,
)
from esi.wire.rest import ExternalBatchJob, ExternalScheduling, ExternalSlots, ExternalSlotsJob, ExternalTestbed
from esi.wire.stomp_frames import Frame
from tests.unit.fake_api import (
    FakeApi,
    FakeStomp,
    message,
    refusal,
    wire_job,
    wire_overview,
    wire_scheduling,
    wire_testbed,
)

URL = "http://esi.test:8082"


def client(api: FakeApi, stomp: FakeStomp | None = None, **options: Any) -> EsiClient:
    options = {"token": "t0ken", "namespace": "team"} | options
    return EsiClient(URL, transport=api.transport, subscriber=stomp.subscribe if stomp else None, **options)


def async_client(api: FakeApi, stomp: FakeStomp | None = None, **options: Any) -> AsyncEsiClient:
    options = {"token": "t0ken", "namespace": "team"} | options
    return AsyncEsiClient(URL, transport=api.transport, subscriber=stomp.asubscribe if stomp else None, **options)


# ---------------------------------------------------------------------------------------------- reading

READS: list[tuple[str, Callable[[EsiClient], Any], str, Any, Callable[[Any], bool]]] = [
    ("overview", lambda c: c.overview(), "/external/overview", wire_overview(),
     lambda r: r.testbeds[0].free == 4 and r.schedulings[0].waiting_for == "the Testbed"),
    ("testbeds", lambda c: c.testbeds(), "/external/testbeds", [wire_testbed()],
     lambda r: isinstance(r[0], ExternalTestbed) and [s.position for s in r[0].slots_by_node["node-1"]] == [1, 3]),
    ("one testbed", lambda c: c.testbed("tb"), "/external/testbeds/tb", wire_testbed(),
     lambda r: r.number_of_nodes == 2),
    ("jobs by name", lambda c: c.jobs(), "/external/jobs", {"wordcount": wire_job()},
     lambda r: isinstance(r["wordcount"], ExternalBatchJob)),
    ("one job", lambda c: c.job("wordcount"), "/external/jobs/wordcount", wire_job(),
     lambda r: r.state == "ReadyState"),
    ("schedulings", lambda c: c.schedulings(), "/external/schedulings", [wire_scheduling()],
     lambda r: r[0].queue == ["wordcount", "pagerank"]),
    ("one scheduling", lambda c: c.scheduling("s1"), "/external/schedulings/s1", wire_scheduling(),
     lambda r: isinstance(r, ExternalScheduling) and r.test_bed == "tb"),
]  # fmt: skip


@pytest.mark.parametrize(("call", "path", "body", "parsed"), [r[1:] for r in READS], ids=[r[0] for r in READS])
def test_a_read_asks_its_path_in_the_namespace_with_the_token_and_parses_the_answer(
    call: Callable[[EsiClient], Any], path: str, body: Any, parsed: Callable[[Any], bool]
) -> None:
    api = FakeApi().answer("GET", path, body=body)
    with client(api) as esi:
        result = call(esi)

    assert parsed(result)
    assert api.last.url.path == path
    assert api.last.url.params["namespace"] == "team"
    assert api.last.headers["authorization"] == "Bearer t0ken"


def test_without_namespace_or_token_the_server_decides_and_no_credentials_are_sent() -> None:
    api = FakeApi().answer("GET", "/external/testbeds", body=[])
    with EsiClient(URL + "/", transport=api.transport) as esi:
        assert esi.testbeds() == []

    assert "namespace" not in api.last.url.params
    assert "authorization" not in api.last.headers
    assert str(api.last.url) == f"{URL}/external/testbeds?view=esi"


def test_a_name_cannot_reach_another_route() -> None:
    api = FakeApi()
    with client(api) as esi, pytest.raises(NotFound):
        esi.testbed("tb/../../jobs")

    assert api.last.url.raw_path.startswith(b"/external/testbeds/tb%2F..%2F..%2Fjobs")


def test_health_needs_no_namespace_and_503_means_not_ready() -> None:
    api = FakeApi().answer("GET", "/readyz", body={"status": "ok"})
    with client(api) as esi:
        assert esi.ready()
        assert "namespace" not in api.last.url.params
        api.answer("GET", "/readyz", 503, refusal("caches are filling"))
        assert not esi.ready()
    with EsiClient("http://127.0.0.1:1") as unreachable:
        assert not unreachable.ready()


# ---------------------------------------------------------------------------------------------- refusals

REFUSALS = [
    (400, Invalid),
    (401, Unauthorized),
    (403, Forbidden),
    (404, NotFound),
    (409, Conflict),
    (422, Invalid),
    (503, Unavailable),
    (502, ApiStatusError),
]


@pytest.mark.parametrize(("status", "error"), REFUSALS, ids=[str(s) for s, _ in REFUSALS])
def test_each_refusal_raises_its_exception_with_message_and_field_problems(
    status: int, error: type[ApiStatusError]
) -> None:
    body = refusal("not a valid Scheduling: slots.jobs.0.slots", ("slots.jobs.0.slots", "must not be empty"))
    api = FakeApi().answer("POST", "/external/schedulings", status, body)
    with client(api) as esi, pytest.raises(error) as raised:
        esi.submit_slots("s1", "tb", {"wordcount": [0]})

    assert type(raised.value) is error
    assert raised.value.status == status
    assert raised.value.message == "not a valid Scheduling: slots.jobs.0.slots"
    assert [(e.field, e.problem) for e in raised.value.errors] == [("slots.jobs.0.slots", "must not be empty")]
    assert "slots.jobs.0.slots: must not be empty" in str(raised.value)


ODD_REFUSALS = [
    ("detail is a sentence", {"json": {"detail": "Not Found"}}, "Not Found", []),
    (
        "FastAPI's own validation list",
        {"json": {"detail": [{"loc": ["body", "slots", "mode"], "msg": "Input should be 'STRICT'", "type": "x"}]}},
        "the request is invalid",
        [("slots.mode", "Input should be 'STRICT'")],
    ),
    (
        "message but odd errors",
        {"json": {"detail": {"message": "bad", "errors": ["?", {"field": "name", "problem": "blank"}]}}},
        "bad",
        [("name", "blank")],
    ),
    ("plain text from a proxy", {"text": "upstream connect error"}, "upstream connect error", []),
    ("nothing at all", {}, "Unprocessable Entity", []),
]


@pytest.mark.parametrize(
    ("response", "message", "problems"), [c[1:] for c in ODD_REFUSALS], ids=[c[0] for c in ODD_REFUSALS]
)
def test_a_refusal_in_another_shape_still_reads(
    response: dict[str, Any], message: str, problems: list[tuple[str, str]]
) -> None:
    api = FakeApi()
    api.routes[("GET", "/external/jobs")] = httpx.Response(422, **response)
    with client(api) as esi, pytest.raises(Invalid) as raised:
        esi.jobs()

    assert raised.value.message == message
    assert [(e.field, e.problem) for e in raised.value.errors] == problems


def test_an_unreachable_api_is_a_connection_error_naming_the_url() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    api = FakeApi()
    api.routes[("GET", "/external/overview")] = refuse
    with client(api) as esi, pytest.raises(EsiConnectionError) as raised:
        esi.overview()

    assert raised.value.url == URL
    assert "could not reach the esi API at http://esi.test:8082: connection refused" in str(raised.value)


def test_an_answer_that_is_not_the_esi_api_is_unexpected() -> None:
    api = FakeApi()
    api.routes[("GET", "/external/testbeds")] = httpx.Response(200, text="<html>hello</html>")
    with (
        client(api) as esi,
        pytest.raises(UnexpectedResponse, match=re.escape("GET http://esi.test:8082/external/testbeds")),
    ):
        esi.testbeds()


# ---------------------------------------------------------------------------------------------- writing


@pytest.mark.parametrize(("status", "created"), [(201, True), (200, False)], ids=["created", "replaced"])
def test_submit_says_whether_it_created_or_replaced(status: int, created: bool) -> None:
    api = FakeApi().answer("POST", "/external/schedulings", status, wire_scheduling())
    with client(api) as esi:
        submitted = esi.submit_queue("s1", "tb", ["wordcount", "pagerank", "wordcount"])

    assert submitted.created is created
    assert submitted.scheduling.name == "s1"
    assert api.body() == {"name": "s1", "testBed": "tb", "queue": ["wordcount", "pagerank", "wordcount"]}


@pytest.mark.parametrize(("strict", "mode"), [(True, "STRICT"), (False, "RELAXED")])
def test_submit_slots_sends_the_originals_shape(strict: bool, mode: str) -> None:
    api = FakeApi().answer("POST", "/external/schedulings", 201, wire_scheduling())
    with client(api) as esi:
        esi.submit_slots("s1", "tb", {"wordcount": [0, 2], "pagerank": [1]}, strict=strict)

    assert api.body() == {
        "name": "s1",
        "testBed": "tb",
        "slots": {"mode": mode, "jobs": [{"name": "wordcount", "slots": [0, 2]}, {"name": "pagerank", "slots": [1]}]},
    }


def test_submit_sends_no_read_only_fields_and_uses_the_schedulings_namespace_when_the_client_has_none() -> None:
    api = FakeApi().answer("POST", "/external/schedulings", 201, wire_scheduling())
    read_back = ExternalScheduling.model_validate(wire_scheduling(state="CompletedState", waitingFor="x"))
    with EsiClient(URL, transport=api.transport) as esi:
        esi.submit(read_back)

    assert api.body() == {"name": "s1", "testBed": "tb", "queue": ["wordcount", "pagerank"]}
    assert api.last.url.params["namespace"] == "team"


def test_submit_refuses_a_scheduling_of_another_namespace_than_the_clients() -> None:
    api = FakeApi()
    scheduling = ExternalScheduling(name="s1", namespace="other", test_bed="tb", queue=["a"])
    with client(api) as esi, pytest.raises(ValueError, match="names namespace other, but the client uses team"):
        esi.submit(scheduling)

    assert api.requests == []


def test_set_external_scheduler_puts_the_whole_map() -> None:
    profile = {"profiler": [{"pagerank": "63 (2)"}]}
    api = FakeApi().answer("PUT", "/external/jobs", body=wire_job(externalScheduler=profile))
    with client(api) as esi:
        job = esi.set_external_scheduler("wordcount", profile)

    assert api.body() == {"name": "wordcount", "externalScheduler": profile}
    assert job.external_scheduler == profile


def test_delete_returns_the_scheduling_as_it_was() -> None:
    api = FakeApi().answer("DELETE", "/external/schedulings/s1", body=wire_scheduling(state="CompletedState"))
    with client(api) as esi:
        gone = esi.delete_scheduling("s1")

    assert gone.state == "CompletedState"
    assert (api.last.method, api.last.url.path) == ("DELETE", "/external/schedulings/s1")


# ---------------------------------------------------------------------------------------------- STOMP

SCHEDULING_TOPIC = "/topic/schedulings/s1"


def test_wait_returns_at_once_when_the_scheduling_is_already_there_subscribed_with_token_and_namespace() -> None:
    done_body = wire_scheduling(state="CompletedState", esiState="Completed")
    api = FakeApi().answer("GET", "/external/schedulings/s1", body=done_body)
    stomp = FakeStomp()
    with client(api, stomp) as esi:
        done = esi.wait_for_scheduling("s1")

    assert done.esi_state == "Completed"
    assert stomp.subscriptions == [
        {
            "url": URL,
            "destinations": [SCHEDULING_TOPIC],
            "token": "t0ken",
            "namespace": "team",
            "view": "esi",
        }
    ]


def test_wait_follows_the_objects_topic_until_a_wanted_state() -> None:
    api = FakeApi().answer("GET", "/external/schedulings/s1", body=wire_scheduling())
    stomp = FakeStomp(
        [
            message(SCHEDULING_TOPIC, "MODIFIED", wire_scheduling(state="SubmissionState", esiState="Running")),
            message(SCHEDULING_TOPIC, "MODIFIED", wire_scheduling(state="CompletedState", esiState="Completed")),
            message(SCHEDULING_TOPIC, "DELETED", wire_scheduling(state="CompletedState", esiState="Completed")),
        ]
    )
    with client(api, stomp) as esi:
        done = esi.wait_for_scheduling("s1")

    assert done.esi_state == "Completed"


@pytest.mark.parametrize(
    "states", [("Completed", "Failed"), ("CompletedState", "FailedState")], ids=["esi's names", "the original's"]
)
def test_wait_for_any_of_several_states_named_in_either_vocabulary(states: tuple[str, str]) -> None:
    api = FakeApi().answer("GET", "/external/schedulings/s1", body=wire_scheduling())
    failed = wire_scheduling(state="FailedState", esiState="Failed")
    stomp = FakeStomp([message(SCHEDULING_TOPIC, "MODIFIED", failed)])
    with client(api, stomp) as esi:
        assert esi.wait_for_scheduling("s1", states=states).esi_state == "Failed"


def test_wait_raises_when_the_scheduling_is_deleted() -> None:
    api = FakeApi().answer("GET", "/external/schedulings/s1", body=wire_scheduling())
    stomp = FakeStomp([message(SCHEDULING_TOPIC, "DELETED", wire_scheduling(state="SubmissionState"))])
    with client(api, stomp) as esi, pytest.raises(ResourceDeleted, match="scheduling s1 was deleted"):
        esi.wait_for_scheduling("s1")


def test_wait_gives_up_after_the_timeout_saying_what_it_last_saw() -> None:
    api = FakeApi().answer("GET", "/external/schedulings/s1", body=wire_scheduling())
    running = wire_scheduling(state="SubmissionState", esiState="Running")
    stomp = FakeStomp([message(SCHEDULING_TOPIC, "MODIFIED", running)])
    with client(api, stomp) as esi, pytest.raises(WaitTimeout) as raised:
        esi.wait_for_scheduling("s1", timeout=5)

    assert isinstance(raised.value, TimeoutError)
    assert raised.value.last == "Running"
    assert "did not reach Completed within 5s (last seen: Running)" in str(raised.value)


def test_a_missing_scheduling_is_not_waited_for() -> None:
    api = FakeApi()
    with client(api, FakeStomp()) as esi, pytest.raises(NotFound):
        esi.wait_for_scheduling("s1")


def test_watching_a_kind_gives_names_and_watching_an_object_gives_its_typed_view() -> None:
    stomp = FakeStomp(
        [
            message("/topic/testbeds", "ADDED", "tb"),
            message("/topic/testbeds/tb", "MODIFIED", wire_testbed(state="RUNNING")),
        ]
    )
    with client(FakeApi(), stomp) as esi, esi.watch("testbeds") as events:
        listed, detailed = list(events)

    assert (listed.action, listed.kind, listed.name, listed.resource) == ("ADDED", "testbeds", "tb", None)
    assert detailed.resource is not None
    assert (detailed.name, detailed.resource.state) == ("tb", "RUNNING")
    assert stomp.subscriptions[0]["destinations"] == ["/topic/testbeds"]


def test_subscribe_takes_several_destinations_at_once() -> None:
    stomp = FakeStomp([message("/topic/jobs/wordcount", "MODIFIED", wire_job(state="RunningState"))])
    with client(FakeApi(), stomp) as esi, esi.subscribe("/topic/jobs", "/topic/jobs/wordcount") as events:
        event = events.next(1)

    assert event is not None
    assert isinstance(event.resource, ExternalBatchJob)
    assert stomp.subscriptions[0]["destinations"] == ["/topic/jobs", "/topic/jobs/wordcount"]


def test_a_message_esi_would_not_send_is_unexpected() -> None:
    stomp = FakeStomp([message("/topic/testbeds/tb", "MODIFIED", {"name": "tb", "slots": "many"})])
    with (
        client(FakeApi(), stomp) as esi,
        esi.watch("testbeds", "tb") as events,
        pytest.raises(UnexpectedResponse, match="/topic/testbeds/tb"),
    ):
        list(events)


def test_a_stomp_connection_that_cannot_be_opened_is_a_connection_error() -> None:
    stomp = FakeStomp(refuse=StompError("cannot open a WebSocket to ws://esi.test:8082/scheduler: refused"))
    with client(FakeApi(), stomp) as esi, pytest.raises(EsiConnectionError) as raised:
        esi.wait_for_scheduling("s1")

    assert raised.value.url == URL
    assert "ws://esi.test:8082/scheduler: refused" in str(raised.value)


def test_a_subscription_esi_refuses_says_why() -> None:
    frame = Frame("ERROR", {"message": "may not watch schedulings in namespace team"})
    stomp = FakeStomp(refuse=StompError("may not watch schedulings in namespace team", frame))
    with client(FakeApi(), stomp) as esi, pytest.raises(SubscriptionRefused, match="may not watch schedulings"):
        esi.wait_for_scheduling("s1")


def test_a_broken_stomp_connection_while_reading_is_a_connection_error() -> None:
    stomp = FakeStomp([message("/topic/jobs", "ADDED", "a")], then=ConnectionResetError("reset by peer"))
    with client(FakeApi(), stomp) as esi, esi.watch("jobs") as events:
        received: list[Event[ExternalBatchJob]] = []
        with pytest.raises(EsiConnectionError, match="reset by peer"):
            received.extend(events)

    assert [e.name for e in received] == ["a"]


def test_without_a_subscriber_the_client_uses_esis_stomp_client() -> None:
    # Nothing listens on port 1: the real WebSocket stack fails at once, and says where it tried.
    with (
        EsiClient("http://127.0.0.1:1", timeout=5) as esi,
        pytest.raises(EsiConnectionError, match=re.escape("ws://127.0.0.1:1/scheduler")),
        esi.watch("jobs"),
    ):
        pass


# ---------------------------------------------------------------------------------------------- async


def test_the_async_client_reads_and_refuses_as_the_sync_one() -> None:
    api = (
        FakeApi()
        .answer("GET", "/external/jobs", body={"wordcount": wire_job()})
        .answer("GET", "/external/testbeds/nope", 404, refusal("Not found: Testbed nope in namespace team"))
    )

    async def scenario() -> None:
        async with async_client(api) as esi:
            assert list(await esi.jobs()) == ["wordcount"]
            with pytest.raises(NotFound, match="Not found: Testbed nope"):
                await esi.testbed("nope")

    asyncio.run(scenario())
    assert [r.url.params["namespace"] for r in api.requests] == ["team", "team"]
    assert {r.headers["authorization"] for r in api.requests} == {"Bearer t0ken"}


@pytest.mark.parametrize(("status", "created"), [(201, True), (200, False)], ids=["created", "replaced"])
def test_the_async_submit_says_whether_it_created_or_replaced(status: int, created: bool) -> None:
    api = FakeApi().answer("POST", "/external/schedulings", status, wire_scheduling())
    slots = ExternalSlots(mode="RELAXED", jobs=[ExternalSlotsJob(name="wordcount", slots=[3])])

    async def scenario() -> bool:
        async with async_client(api) as esi:
            return (await esi.submit(ExternalScheduling(name="s1", test_bed="tb", slots=slots))).created

    assert asyncio.run(scenario()) is created
    assert api.body()["slots"] == {"mode": "RELAXED", "jobs": [{"name": "wordcount", "slots": [3]}]}


def test_the_async_client_writes_jobs_and_deletes_schedulings() -> None:
    api = (
        FakeApi()
        .answer("PUT", "/external/jobs", body=wire_job(externalScheduler={"k": [{"a": "1"}]}))
        .answer("DELETE", "/external/schedulings/s1", body=wire_scheduling())
        .answer("GET", "/external/overview", body=wire_overview())
        .answer("GET", "/external/schedulings", body=[wire_scheduling()])
    )

    async def scenario() -> None:
        async with async_client(api) as esi:
            assert (await esi.set_external_scheduler("wordcount", {"k": [{"a": "1"}]})).external_scheduler
            assert (await esi.delete_scheduling("s1")).name == "s1"
            assert (await esi.overview()).namespace == "team"
            assert [s.name for s in await esi.schedulings()] == ["s1"]

    asyncio.run(scenario())
    assert [r.method for r in api.requests] == ["PUT", "DELETE", "GET", "GET"]


def test_the_async_wait_follows_the_topic_and_raises_on_deletion() -> None:
    api = FakeApi().answer("GET", "/external/schedulings/s1", body=wire_scheduling())
    done = wire_scheduling(state="CompletedState", esiState="Completed")
    completes = FakeStomp([message(SCHEDULING_TOPIC, "MODIFIED", done)])
    deleted = FakeStomp([message(SCHEDULING_TOPIC, "DELETED", wire_scheduling())])

    async def scenario() -> None:
        async with async_client(api, completes) as esi:
            assert (await esi.wait_for_scheduling("s1", timeout=30)).esi_state == "Completed"
        async with async_client(api, deleted) as esi:
            with pytest.raises(ResourceDeleted):
                await esi.wait_for_scheduling("s1", timeout=30)

    asyncio.run(scenario())
    assert completes.subscriptions[0]["destinations"] == [SCHEDULING_TOPIC]


def test_the_async_wait_reports_a_closed_connection_and_a_timeout() -> None:
    api = FakeApi().answer("GET", "/external/schedulings/s1", body=wire_scheduling())

    async def closed() -> None:
        async with async_client(api, FakeStomp()) as esi:
            await esi.wait_for_scheduling("s1", timeout=30)

    async def times_out() -> None:
        async with async_client(api, FakeStomp(quiet=True)) as esi:
            await esi.wait_for_scheduling("s1", timeout=0.01)  # nothing ever comes: only the timeout ends it

    with pytest.raises(EsiConnectionError, match="closed the STOMP connection"):
        asyncio.run(closed())
    with pytest.raises(WaitTimeout):
        asyncio.run(times_out())


def test_the_async_watch_yields_typed_events() -> None:
    stomp = FakeStomp([message("/topic/schedulings/s1", "ADDED", wire_scheduling())])

    async def scenario() -> list[str | None]:
        async with async_client(FakeApi(), stomp) as esi, esi.watch("schedulings", "s1") as events:
            return [event.resource.state async for event in events if event.resource is not None]

    assert asyncio.run(scenario()) == ["AcquireState"]
