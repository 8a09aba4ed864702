"""The STOMP endpoint end to end over real sockets: esi's client against the served router.

Messages are published on the server's event loop through test-only HTTP routes, so each publish has
happened when the request returns. Protocol details the client never exposes (receipts, heart-beat bytes,
refused frames) are checked with a raw WebSocket.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import re
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from fastapi import APIRouter, FastAPI, Request
from prometheus_client import REGISTRY
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection
from websockets.sync.client import connect as ws_connect
from websockets.sync.server import ServerConnection
from websockets.sync.server import serve as ws_serve
from websockets.typing import Subprotocol

from api import stomp
from api.auth import AuthUnavailable, Principal, Refusal
from api.stomp import Broker, router
from api.threaded import serve_in_thread
from esi.client.subscriber import StompError, Subscription, asubscribe, subscribe, websocket_url
from esi.wire.rest import View
from esi.wire.stomp_frames import Frame, FrameParser, Message, encode
from tests.cancellation import assert_caller_stays_cancelled

NAMESPACE = "esi"
TOKENS = {"alice-token": "alice", "bob-token": "bob"}
ALICE = "alice-token"
BOB = "bob-token"
API_DOWN = "token-while-the-api-server-is-down"


@dataclass
class Gate:
    """Stub authenticator: known tokens only; bob may not watch schedulings. Remembers what it was asked."""

    authorized: list[tuple[str, str, str, str]] = field(default_factory=list)

    async def authenticate(self, token: str | None) -> Principal:
        if token is None:
            raise Refusal(401, "no bearer token")
        if token == API_DOWN:
            raise AuthUnavailable("the Kubernetes API server did not answer")
        if token not in TOKENS:
            raise Refusal(401, "token not recognised")
        return Principal(TOKENS[token])

    async def authorize(self, principal: Principal, verb: str, resource: str, namespace: str) -> None:
        self.authorized.append((principal.name, verb, resource, namespace))
        if principal.name == "bob" and resource == "schedulings":
            raise Refusal(403, f"bob may not {verb} {resource} in {namespace}")


@dataclass
class Served:
    url: str
    broker: Broker
    gate: Gate

    def publish(self, destination: str, payload: Any, namespace: str = NAMESPACE, view: str = "original") -> None:
        params = {"destination": destination, "namespace": namespace, "view": view}
        httpx.post(f"{self.url}/test/publish", params=params, content=json.dumps(payload)).raise_for_status()

    def flood(self, destination: str, *, size: int, most: int) -> int:
        """Publish ``size``-byte messages until no session is left (at most ``most``); how many were published."""
        params: dict[str, str | int] = {"destination": destination, "namespace": NAMESPACE, "size": size, "most": most}
        response = httpx.post(f"{self.url}/test/flood", params=params, timeout=30)
        published: int = response.raise_for_status().json()["published"]
        return published

    def close_broker(self) -> None:
        httpx.post(f"{self.url}/test/close").raise_for_status()


def routes_for(broker: Broker, gate: Gate) -> APIRouter:
    """The STOMP endpoint plus test-only routes that act on ``broker`` from the server's event loop."""
    routes = APIRouter()
    routes.include_router(router(broker, gate.authenticate, gate.authorize))

    @routes.post("/test/publish")
    async def publish(destination: str, namespace: str, view: View, request: Request) -> None:
        broker.publish(destination, await request.body(), namespace, view)

    @routes.post("/test/flood")
    async def flood(destination: str, namespace: str, size: int, most: int) -> dict[str, int]:
        # Random content, so WebSocket compression cannot make the messages small enough to never back up.
        body = json.dumps(base64.b64encode(os.urandom(size * 3 // 4)).decode()).encode()
        published = 0
        while broker.sessions and published < most:
            broker.publish(destination, body, namespace)
            published += 1
            await asyncio.sleep(0)  # lets the session's writer push what it can into the socket
        return {"published": published}

    @routes.post("/test/close")
    async def close() -> None:
        await broker.close()

    return routes


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[FastAPI, str]]:
    """One server for the module (stopping one takes a fifth of a second); each test mounts its own broker."""
    app = FastAPI()
    with serve_in_thread(app) as url:
        yield app, url


@pytest.fixture
def serve(server: tuple[FastAPI, str]) -> Callable[..., Served]:
    """Mount a new Broker (keyword arguments go to it) under a path of its own; its URL is the API base URL."""
    app, url = server

    def start(**broker_args: Any) -> Served:
        broker, gate = Broker(NAMESPACE, **broker_args), Gate()
        prefix = f"/{uuid.uuid4().hex}"
        app.include_router(routes_for(broker, gate), prefix=prefix)
        return Served(url + prefix, broker, gate)

    return start


@pytest.fixture
def esi(serve: Callable[..., Served]) -> Served:
    served: Served = serve()
    return served


def eventually(condition: Callable[[], bool], timeout: float = 5) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


def read_until_refused(messages: Subscription, into: list[Message]) -> None:
    while (message := messages.next(timeout=5)) is not None:
        into.append(message)


def metric(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


class Raw:
    """A bare WebSocket speaking STOMP by hand."""

    def __init__(self, connection: ClientConnection) -> None:
        self.connection = connection
        self.parser = FrameParser()
        self.frames: deque[Frame] = deque()

    def send(self, command: str, headers: dict[str, str] | None = None, body: bytes = b"") -> None:
        self.connection.send(encode(Frame(command, headers or {}, body)).decode())

    def receive(self, timeout: float = 5) -> Frame:
        while not self.frames:
            data = self.connection.recv(timeout)
            self.frames.extend(self.parser.feed(data.encode() if isinstance(data, str) else data))
        return self.frames.popleft()

    def connect(self, headers: dict[str, str] | None = None) -> Frame:
        self.send("CONNECT", {"accept-version": "1.2", "host": "esi", **(headers or {})})
        return self.receive()

    def closed_with(self) -> int | None:
        """The close code, once the server has closed the WebSocket."""
        with pytest.raises(ConnectionClosed) as closed:
            self.receive()
        return closed.value.rcvd.code if closed.value.rcvd else None


@contextlib.contextmanager
def raw(
    url: str, *, query: str = "", headers: dict[str, str] | None = None, subprotocols: tuple[str, ...] = ("v12.stomp",)
) -> Iterator[Raw]:
    offered = [Subprotocol(p) for p in subprotocols] or None
    with ws_connect(websocket_url(url) + query, subprotocols=offered, additional_headers=headers) as connection:
        yield Raw(connection)


def test_a_subscriber_receives_what_is_published_to_its_topic(esi: Served) -> None:
    delivered_before = metric("esi_stomp_messages_delivered_total")
    with subscribe(esi.url, ["/topic/jobs"], token=ALICE) as messages:
        esi.publish("/topic/jobs", {"action": "ADDED", "resource": "j1"})

        message = messages.next(timeout=5)

    assert message is not None
    assert message.json() == {"action": "ADDED", "resource": "j1"}
    assert message.destination == "/topic/jobs"
    assert message.headers["content-type"] == "application/json"
    assert message.message_id
    eventually(lambda: metric("esi_stomp_messages_delivered_total") == delivered_before + 1)


def test_an_object_topic_gets_only_that_objects_messages(esi: Served) -> None:
    with subscribe(esi.url, ["/topic/testbeds/tb1"], token=ALICE) as messages:
        esi.publish("/topic/testbeds", {"resource": "tb1"})
        esi.publish("/topic/testbeds/tb2", {"resource": "tb2"})
        esi.publish("/topic/testbeds/tb1", {"resource": "tb1 in detail"})

        message = messages.next(timeout=5)

    assert message is not None
    assert (message.destination, message.json()) == ("/topic/testbeds/tb1", {"resource": "tb1 in detail"})


def test_one_session_gets_each_of_its_topics_in_publish_order(esi: Served) -> None:
    with subscribe(esi.url, ["/topic/jobs", "/topic/jobs/j1"], token=ALICE) as messages:
        esi.publish("/topic/jobs/j1", 1)
        esi.publish("/topic/jobs", 2)

        received = [messages.next(timeout=5) for _ in range(2)]

    assert [(m.destination, m.json()) for m in received if m] == [("/topic/jobs/j1", 1), ("/topic/jobs", 2)]
    assert len({m.subscription for m in received if m}) == 2


def test_namespaces_are_kept_apart(esi: Served) -> None:
    with (
        subscribe(esi.url, ["/topic/jobs"], token=ALICE) as default,
        subscribe(esi.url, ["/topic/jobs"], token=ALICE, namespace="team-a") as team_a,
    ):
        esi.publish("/topic/jobs", "for esi")
        esi.publish("/topic/jobs", "for team-a", namespace="team-a")

        first_default, first_team_a = default.next(timeout=5), team_a.next(timeout=5)

    assert [m.json() if m else None for m in (first_default, first_team_a)] == ["for esi", "for team-a"]


def test_each_view_gets_only_the_messages_published_in_it(esi: Served) -> None:
    with (
        subscribe(esi.url, ["/topic/jobs"], token=ALICE) as original,
        subscribe(esi.url, ["/topic/jobs"], token=ALICE, view="esi") as rich,
    ):
        esi.publish("/topic/jobs", "original's fields", view="original")
        esi.publish("/topic/jobs", "esi's view", view="esi")

        first_original, first_rich = original.next(timeout=5), rich.next(timeout=5)
        assert original.next(timeout=0.2) is None
        assert rich.next(timeout=0.2) is None

    assert [m.json() if m else None for m in (first_original, first_rich)] == ["original's fields", "esi's view"]


def test_an_unknown_view_is_refused_naming_the_views(esi: Served) -> None:
    with raw(esi.url) as client:
        client.connect({"Authorization": f"Bearer {ALICE}"})
        client.send("SUBSCRIBE", {"id": "1", "destination": "/topic/jobs", "view": "full"})

        error = client.receive()

    assert error.command == "ERROR"
    assert error.headers["message"] == "unknown view 'full': the view header is original or esi"


def test_each_subscription_is_authorized_as_watch_on_its_resource_and_namespace(esi: Served) -> None:
    with subscribe(esi.url, ["/topic/jobs", "/topic/testbeds/tb1"], token=ALICE, namespace="team-a"):
        pass
    with subscribe(esi.url, ["/topic/schedulings"], token=ALICE):
        pass

    assert esi.gate.authorized == [
        ("alice", "watch", "batchjobs", "team-a"),
        ("alice", "watch", "testbeds", "team-a"),
        ("alice", "watch", "schedulings", NAMESPACE),
    ]


def test_after_unsubscribing_a_topic_its_messages_stop(esi: Served) -> None:
    with subscribe(esi.url, ["/topic/jobs", "/topic/schedulings"], token=ALICE) as messages:
        messages.unsubscribe("/topic/jobs")
        esi.publish("/topic/jobs", "job change")
        esi.publish("/topic/schedulings", "scheduling change")

        message = messages.next(timeout=5)

    assert message is not None
    assert message.json() == "scheduling change"


def test_disconnect_with_a_receipt_is_answered_then_closed_normally(esi: Served) -> None:
    with raw(esi.url) as client:
        assert client.connect({"Authorization": f"Bearer {ALICE}"}).command == "CONNECTED"
        client.send("DISCONNECT", {"receipt": "bye-1"})

        assert client.receive() == Frame("RECEIPT", {"receipt-id": "bye-1"})
        assert client.closed_with() == 1000
    eventually(lambda: esi.broker.sessions == 0)


def test_connected_names_the_version_server_session_and_negotiated_heartbeats(serve: Callable[..., Served]) -> None:
    esi = serve(heartbeat_ms=(4000, 6000))
    with raw(esi.url) as client:
        connected = client.connect({"passcode": ALICE, "heart-beat": "5000,1000"})

    assert connected.headers["version"] == "1.2"
    assert connected.headers["heart-beat"] == "4000,6000"
    assert connected.headers["server"].startswith("esi")
    assert connected.headers["session"]


def test_send_is_refused_as_esi_takes_no_messages(esi: Served) -> None:
    with raw(esi.url) as client:
        client.connect({"passcode": ALICE})
        client.send("SEND", {"destination": "/app/anything", "receipt": "r1"}, b"{}")

        error = client.receive()

        assert error.command == "ERROR"
        assert error.headers["message"].startswith("esi accepts no messages; subscribe to /topic/")
        assert error.headers["receipt-id"] == "r1"
        assert client.closed_with() == 1008


def test_an_unknown_destination_is_refused_by_name(esi: Served) -> None:
    with pytest.raises(StompError, match="unknown destination '/topic/nodes'"):  # noqa: SIM117
        with subscribe(esi.url, ["/topic/nodes"], token=ALICE):
            pass
    eventually(lambda: esi.broker.sessions == 0)


@pytest.mark.parametrize(
    ("token", "destination", "message"),
    [
        pytest.param(None, "/topic/jobs", "unauthenticated: no bearer token", id="no token"),
        pytest.param("stolen", "/topic/jobs", "unauthenticated: token not recognised", id="unknown token"),
        pytest.param(BOB, "/topic/schedulings/s1", "forbidden: bob may not watch schedulings in esi", id="not allowed"),
        pytest.param(
            API_DOWN,
            "/topic/jobs",
            "unavailable: the Kubernetes API server did not answer; try again later",
            id="authenticator unavailable",
        ),
    ],
)
def test_refusals_say_why(esi: Served, token: str | None, destination: str, message: str) -> None:
    with pytest.raises(StompError) as refused:  # noqa: SIM117
        with subscribe(esi.url, [destination], token=token):
            pass

    assert refused.value.message == message
    assert refused.value.frame is not None
    assert refused.value.frame.command == "ERROR"


@pytest.mark.parametrize(
    ("query", "upgrade", "connect"),
    [
        pytest.param("", {"Authorization": f"Bearer {ALICE}"}, {}, id="upgrade header"),
        pytest.param(f"?access_token={ALICE}", {}, {}, id="query parameter"),
        pytest.param("", {}, {"Authorization": f"Bearer {ALICE}"}, id="connect header"),
        pytest.param("", {}, {"passcode": ALICE}, id="passcode"),
        pytest.param("", {"Authorization": f"Bearer {ALICE}"}, {"passcode": "stolen"}, id="upgrade header first"),
        pytest.param(f"?access_token={ALICE}", {}, {"passcode": "stolen"}, id="query before connect"),
        pytest.param("", {}, {"Authorization": f"Bearer {ALICE}", "passcode": "stolen"}, id="bearer before passcode"),
    ],
)
def test_the_token_is_found_where_clients_can_put_it(
    esi: Served, query: str, upgrade: dict[str, str], connect: dict[str, str]
) -> None:
    with raw(esi.url, query=query, headers=upgrade) as client:
        assert client.connect(connect).command == "CONNECTED"


def test_a_client_without_stomp_one_two_is_refused_with_the_version_esi_speaks(esi: Served) -> None:
    with raw(esi.url, subprotocols=("v11.stomp", "v10.stomp")) as client:
        client.send("CONNECT", {"accept-version": "1.0,1.1", "passcode": ALICE})

        error = client.receive()

        assert error.command == "ERROR"
        assert error.headers["version"] == "1.2"
        assert error.headers["message"] == "unsupported STOMP version 1.0,1.1: esi speaks 1.2"


@pytest.mark.parametrize(
    ("offered", "chosen"),
    [(("v10.stomp", "v12.stomp", "v11.stomp"), "v12.stomp"), (("v11.stomp",), "v11.stomp"), ((), None)],
    ids=["v12 preferred", "v11 alone", "none"],
)
def test_the_stomp_subprotocol_is_chosen_from_those_offered(
    esi: Served, offered: tuple[str, ...], chosen: str | None
) -> None:
    with raw(esi.url, subprotocols=offered, query=f"?access_token={ALICE}") as client:
        assert client.connection.subprotocol == chosen
        assert client.connect().command == "CONNECTED"


def test_the_stomp_command_connects_like_connect(esi: Served) -> None:
    with raw(esi.url) as client:
        client.send("STOMP", {"accept-version": "1.1,1.2", "host": "esi", "passcode": ALICE})

        assert client.receive().command == "CONNECTED"


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        pytest.param({"destination": "/topic/jobs"}, "SUBSCRIBE needs a non-empty id header", id="no id"),
        pytest.param({"id": "0"}, "SUBSCRIBE needs a non-empty destination header", id="no destination"),
        pytest.param({"id": "1", "destination": "/topic/jobs"}, "subscription id '1' is already in use", id="same id"),
        pytest.param(
            {"id": "0", "destination": "/topic/jobs", "ack": "client"},
            "ack mode 'client' is not supported: esi delivers with ack:auto only",
            id="ack client",
        ),
        pytest.param(
            {"id": "0", "destination": "/topic/jobs", "namespace": ""}, "the namespace header is empty", id="no ns"
        ),
        pytest.param(
            {"id": "0", "destination": "/topic/jobs/a/b"},
            "unknown destination '/topic/jobs/a/b': subscribe to /topic/testbeds, /topic/jobs, /topic/schedulings, "
            "or one of those followed by /<name>",
            id="nested name",
        ),
    ],
)
def test_subscriptions_esi_cannot_serve_are_refused(esi: Served, headers: dict[str, str], message: str) -> None:
    with raw(esi.url) as client:
        client.connect({"passcode": ALICE})
        client.send("SUBSCRIBE", {"id": "1", "destination": "/topic/testbeds", "receipt": "first"})
        assert client.receive() == Frame("RECEIPT", {"receipt-id": "first"})

        client.send("SUBSCRIBE", headers)

        assert client.receive().headers["message"] == message
        assert client.closed_with() == 1008


def test_frames_before_connect_are_refused(esi: Served) -> None:
    with raw(esi.url) as client:
        client.send("SUBSCRIBE", {"id": "0", "destination": "/topic/jobs"})

        assert client.receive().headers["message"] == "expected CONNECT or STOMP, got SUBSCRIBE"


def test_a_malformed_frame_is_refused_with_the_reason(esi: Served) -> None:
    with raw(esi.url) as client:
        client.connection.send("SUBSCRIBE\nid\n\n\0")

        assert client.receive().headers["message"] == "malformed frame: header line without ':': 'id'"


def test_a_client_that_never_connects_is_closed(esi: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stomp, "CONNECT_TIMEOUT_S", 0.1)
    with raw(esi.url) as client:
        assert client.receive().headers["message"] == "no CONNECT frame within 0.1 s"
        assert client.closed_with() == 1008


def test_the_server_sends_heartbeats_at_the_negotiated_period(serve: Callable[..., Served]) -> None:
    esi = serve(heartbeat_ms=(100, 0))
    with raw(esi.url) as client:
        assert client.connect({"passcode": ALICE, "heart-beat": "0,100"}).headers["heart-beat"] == "100,0"
        started = time.monotonic()

        beats = [client.connection.recv(timeout=1) for _ in range(3)]

        assert beats == ["\n", "\n", "\n"]
        assert time.monotonic() - started >= 0.1  # paced (beats at about 0.1, 0.2, 0.3 s), not a burst


def test_a_silent_client_is_disconnected_after_twice_its_period(serve: Callable[..., Served]) -> None:
    esi = serve(heartbeat_ms=(0, 50))
    with raw(esi.url) as client:
        assert client.connect({"passcode": ALICE, "heart-beat": "50,0"}).headers["heart-beat"] == "0,50"

        error = client.receive()

        assert error.headers["message"] == "heart-beat timeout: nothing received for 100 ms"
        assert client.closed_with() == 1008


def test_the_clients_heartbeats_keep_a_quiet_session_open(serve: Callable[..., Served]) -> None:
    # Heart-beats every 300 ms, each side waiting twice that: a heart-beat may come 300 ms late (a busy machine,
    # the server and this client sharing one interpreter) before either side gives up.
    esi = serve(heartbeat_ms=(300, 300))
    with subscribe(esi.url, ["/topic/jobs"], token=ALICE, heartbeat_ms=300) as messages:
        # Longer than either side waits (2 x 300 ms) without messages: only heart-beats keep the session.
        assert messages.next(timeout=0.8) is None
        esi.publish("/topic/jobs", "still here")

        message = messages.next(timeout=5)

    assert message is not None
    assert message.json() == "still here"


def test_a_slow_consumer_is_disconnected_and_its_buffer_dropped(serve: Callable[..., Served]) -> None:
    esi = serve(buffer_limit=4)
    slow_before = metric("esi_stomp_slow_consumers_disconnected_total")
    with subscribe(esi.url, ["/topic/testbeds"], token=ALICE) as messages:
        # The client reads nothing while esi publishes, until the socket, then the session's buffer, are full.
        published = esi.flood("/topic/testbeds", size=64 * 1024, most=2000)

        assert esi.broker.sessions == 0
        assert metric("esi_stomp_slow_consumers_disconnected_total") == slow_before + 1
        received: list[Message] = []
        with pytest.raises(StompError, match="slow consumer: more than 4 messages waiting"):
            read_until_refused(messages, received)

    # What was in the socket arrives; the 4 buffered messages and the one that overflowed them never do.
    assert len(received) == published - 4 - 1


def test_broker_close_ends_every_session(esi: Served) -> None:
    sessions_before = metric("esi_stomp_sessions")
    with subscribe(esi.url, ["/topic/jobs"], token=ALICE) as messages:
        assert esi.broker.sessions == 1
        assert metric("esi_stomp_sessions") == sessions_before + 1

        esi.close_broker()

        with pytest.raises(StompError, match="close code 1001"):
            messages.next(timeout=5)
    assert esi.broker.sessions == 0
    assert metric("esi_stomp_sessions") == sessions_before


def test_the_async_client_subscribes_and_receives(esi: Served) -> None:
    async def scenario() -> Any:
        async with (
            asyncio.timeout(5),
            asubscribe(esi.url, ["/topic/schedulings/s1", "/topic/jobs"], token=ALICE) as messages,
        ):
            await messages.unsubscribe("/topic/jobs")
            await asyncio.to_thread(esi.publish, "/topic/jobs", "not wanted")
            await asyncio.to_thread(esi.publish, "/topic/schedulings/s1", {"action": "MODIFIED"})
            async for message in messages:
                return message.json()
        return None

    assert asyncio.run(scenario()) == {"action": "MODIFIED"}


def test_a_cancelled_async_subscriber_stays_cancelled_through_its_close(esi: Served) -> None:
    assert_caller_stays_cancelled(lambda: asubscribe(esi.url, ["/topic/schedulings"], token=ALICE, heartbeat_ms=1000))
    eventually(lambda: esi.broker.sessions == 0)


def test_the_async_client_reports_refusals(esi: Served) -> None:
    async def scenario() -> None:
        async with asubscribe(esi.url, ["/topic/schedulings"], token=BOB):
            pass

    with pytest.raises(StompError, match="forbidden: bob may not watch schedulings"):
        asyncio.run(scenario())


def test_an_unreachable_server_is_a_stomp_error() -> None:
    with pytest.raises(StompError, match="cannot open a WebSocket"):  # noqa: SIM117
        with subscribe("http://127.0.0.1:9", ["/topic/jobs"], connect_timeout=1):
            pass


@contextlib.contextmanager
def silent_server(heartbeat: str) -> Iterator[tuple[str, list[Frame], dict[str, str]]]:
    """A hand-made STOMP server: it answers CONNECT with ``heartbeat`` and confirms receipts, nothing else.

    Yields its URL, the frames it received and what the client's upgrade request carried.
    """
    received: list[Frame] = []
    upgrade: dict[str, str] = {}

    def handler(connection: ServerConnection) -> None:
        assert connection.request is not None
        upgrade["Authorization"] = connection.request.headers.get("Authorization", "")
        upgrade["subprotocol"] = connection.subprotocol or ""
        parser = FrameParser()
        with contextlib.suppress(ConnectionClosed):
            for data in connection:
                for frame in parser.feed(data.encode() if isinstance(data, str) else data):
                    received.append(frame)
                    if frame.command == "CONNECT":
                        answer = Frame("CONNECTED", {"version": "1.2", "heart-beat": heartbeat})
                    elif "receipt" in frame.headers:
                        answer = Frame("RECEIPT", {"receipt-id": frame.headers["receipt"]})
                    else:
                        continue
                    connection.send(encode(answer).decode())

    with ws_serve(handler, "127.0.0.1", 0, subprotocols=[Subprotocol("v12.stomp")]) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.socket.getsockname()[1]}", received, upgrade
        finally:
            server.shutdown()
            thread.join()


def test_the_client_sends_its_token_on_the_upgrade_and_in_connect() -> None:
    with (
        silent_server("0,0") as (url, received, upgrade),
        subscribe(url, ["/topic/jobs"], token=ALICE, namespace="team-a", heartbeat_ms=3000),
    ):
        pass

    assert upgrade == {"Authorization": f"Bearer {ALICE}", "subprotocol": "v12.stomp"}
    connect, subscription, disconnect = received
    assert connect.headers == {
        "accept-version": "1.2",
        "host": "127.0.0.1",
        "heart-beat": "3000,3000",
        "Authorization": f"Bearer {ALICE}",
    }
    assert subscription.command == "SUBSCRIBE"
    assert {k: subscription.headers[k] for k in ("destination", "ack", "namespace")} == {
        "destination": "/topic/jobs",
        "ack": "auto",
        "namespace": "team-a",
    }
    assert disconnect.command == "DISCONNECT"


def test_the_client_reports_a_server_that_falls_silent() -> None:
    with (
        silent_server("50,50") as (url, _, _),
        subscribe(url, ["/topic/jobs"], heartbeat_ms=50) as messages,
        pytest.raises(StompError, match=re.escape("esi sent nothing, not even a heart-beat, for 0.1 s")),
    ):
        messages.next(timeout=5)
