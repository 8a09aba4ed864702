"""STOMP 1.2 over WebSocket at ``/scheduler``: where external schedulers hear of Testbed, BatchJob and
Scheduling changes as they happen, instead of polling the REST API; the topics and payloads are the original
ESI's (docs/compatibility.md#stomp-topics).

``Broker`` keeps the subscriptions; ``router`` is the WebSocket endpoint that serves one session per
connection. Clients only subscribe: esi has no application destinations, so SEND is refused.

Behaviour a client can rely on:

* Versions: CONNECT (or STOMP) must offer 1.2 in ``accept-version``; a client offering only 1.0/1.1 (or no
  ``accept-version``, which means 1.0) gets an ERROR with ``version:1.2`` rather than a session in a dialect
  esi does not speak. Any of the subprotocols ``v12.stomp``, ``v11.stomp``, ``v10.stomp`` (or none) is accepted
  on the upgrade; ``v12.stomp`` is chosen when offered.
* Authentication: the token is taken from, in this order, the upgrade's ``Authorization: Bearer`` header, the
  ``access_token`` query parameter (browsers cannot set upgrade headers), CONNECT's ``Authorization: Bearer``
  header, CONNECT's ``passcode``. Each SUBSCRIBE is authorized as ``watch`` on the topic's resource
  (``testbeds``, ``batchjobs`` for ``/topic/jobs``, ``schedulings``) in its namespace: the ``namespace``
  header, else the broker's default. A refusal is an ERROR (``unauthenticated: …`` / ``forbidden: …``).
* Destinations: ``/topic/testbeds``, ``/topic/jobs``, ``/topic/schedulings`` and ``/topic/<those>/<name>``.
* Views: a SUBSCRIBE without a ``view`` header gets the original ESI's payloads, exactly its fields (its
  clients map them strictly); ``view:esi`` gets esi's view, the original's fields and esi's own (the REST
  ``?view=esi``). Each view's subscribers hear only of changes they can see.
* Acknowledgement: ``ack:auto`` only (esi keeps no message once written); other modes, ACK and NACK get an
  ERROR, as do transactions (BEGIN/COMMIT/ABORT), which only make sense for SEND.
* UNSUBSCRIBE of an id that is not subscribed is a no-op, so a client may repeat it safely.
* Every ERROR closes the session (STOMP requires it); frames with a ``receipt`` header get a RECEIPT, or an
  ERROR carrying ``receipt-id``.
* Heart-beats: CONNECTED's ``heart-beat`` holds the negotiated periods (server sends every, server expects
  every). A client silent for twice its period is considered dead and disconnected.
* Slow consumers: each session buffers at most ``buffer_limit`` frames the socket has not taken. A publish
  that would exceed this closes the session (with a best-effort ``slow consumer`` ERROR) and drops its buffer,
  so one stuck client cannot grow the server's memory; the client reconnects and re-reads state over REST.

``Broker.publish`` is synchronous and must be called on the event loop that serves the endpoint.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import re
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from importlib import metadata
from typing import TypeVar

from fastapi import APIRouter, WebSocket
from prometheus_client import Counter, Gauge
from starlette.websockets import WebSocketDisconnect, WebSocketDisconnected

from api.auth import AuthUnavailable, Principal, Refusal, bearer_token
from esi.wire.rest import View
from esi.wire.stomp_frames import (
    Frame,
    FrameParser,
    StompProtocolError,
    encode,
    negotiate_heartbeat,
    parse_accept_version,
    parse_heartbeat,
)

__all__ = [
    "MESSAGES_DELIVERED",
    "SESSIONS",
    "SLOW_CONSUMERS",
    "SUBPROTOCOLS",
    "TOPIC_RESOURCES",
    "Authenticate",
    "Authorize",
    "Broker",
    "router",
]

log = logging.getLogger(__name__)
T = TypeVar("T")

Authenticate = Callable[[str | None], Awaitable[Principal]]
# (principal, verb, resource, namespace); returns if allowed, raises Refusal if not.
Authorize = Callable[[Principal, str, str, str], Awaitable[None]]

SUBPROTOCOLS = ("v12.stomp", "v11.stomp", "v10.stomp")
# Topic name → the esi resource a subscriber must be allowed to watch; topics say "jobs" for BatchJobs.
TOPIC_RESOURCES = {"testbeds": "testbeds", "jobs": "batchjobs", "schedulings": "schedulings"}
_DESTINATION = re.compile(r"/topic/(?P<topic>[a-z]+)(?:/(?P<name>[^/]+))?")
_DESTINATIONS_HELP = "/topic/testbeds, /topic/jobs, /topic/schedulings, or one of those followed by /<name>"

# Clients send only small control frames; anything bigger is a mistake or an attack.
CLIENT_FRAME_LIMIT = 64 * 1024
CONNECT_TIMEOUT_S = 10.0
# How long a closing session may take to hand its last frames (RECEIPT, ERROR) to a client that does not read.
CLOSE_GRACE_S = 5.0

_NORMAL, _GOING_AWAY, _POLICY, _INTERNAL = 1000, 1001, 1008, 1011

try:
    _SERVER = f"esi/{metadata.version('esi')}"
except metadata.PackageNotFoundError:  # running from a source tree that was never installed
    _SERVER = "esi"

SESSIONS = Gauge("esi_stomp_sessions", "Connected STOMP sessions")
MESSAGES_DELIVERED = Counter("esi_stomp_messages_delivered", "MESSAGE frames written to subscribers' sockets")
SLOW_CONSUMERS = Counter(
    "esi_stomp_slow_consumers_disconnected", "STOMP sessions closed because they fell behind by buffer_limit frames"
)


class Broker:
    """Which session subscribed to what, and the fan-out of published messages to them."""

    def __init__(
        self, default_namespace: str, buffer_limit: int = 1000, heartbeat_ms: tuple[int, int] = (10000, 10000)
    ) -> None:
        if buffer_limit < 1:
            raise ValueError(f"buffer_limit must be at least 1, got {buffer_limit}")
        self.default_namespace = default_namespace
        self.buffer_limit = buffer_limit
        self.heartbeat_ms = heartbeat_ms
        self.closed = False
        self._open: set[_Session] = set()  # every WebSocket being served, connected or not
        self._connected: set[_Session] = set()  # CONNECTED and not closing: the ones publish may reach
        self._routes: dict[tuple[str, str, View], dict[_Subscription, None]] = {}
        self._message_ids = itertools.count(1)

    @property
    def sessions(self) -> int:
        """Connected sessions that are not closing."""
        return len(self._connected)

    def publish(self, destination: str, body: bytes, namespace: str, view: View = View.ORIGINAL) -> None:
        """Queue a MESSAGE for every subscription to ``destination`` in ``namespace`` in ``view``; never waits."""
        for subscription in list(self._routes.get((namespace, destination, view), ())):
            subscription.session.deliver(subscription, body, str(next(self._message_ids)))

    async def close(self) -> None:
        """Close every session (WebSocket code 1001) and wait until they are gone; refuse new ones."""
        self.closed = True
        sessions = list(self._open)
        for session in sessions:
            session.close(_GOING_AWAY, "esi is shutting down")
        await asyncio.gather(*(session.finished.wait() for session in sessions))

    def _attach(self, session: _Session) -> None:
        self._connected.add(session)
        SESSIONS.inc()

    def _detach(self, session: _Session) -> None:
        for subscription in list(session.subscriptions.values()):
            self._unroute(subscription)
        if session in self._connected:
            self._connected.remove(session)
            SESSIONS.dec()

    def _route(self, subscription: _Subscription) -> None:
        self._routes.setdefault(subscription.route, {})[subscription] = None

    def _unroute(self, subscription: _Subscription) -> None:
        key = subscription.route
        subscribers = self._routes.get(key, {})
        subscribers.pop(subscription, None)
        if not subscribers:
            self._routes.pop(key, None)


def router(broker: Broker, authenticate: Authenticate, authorize: Authorize) -> APIRouter:
    """The ``/scheduler`` WebSocket endpoint, serving ``broker``'s subscriptions."""
    routes = APIRouter(tags=["stomp"])

    @routes.websocket("/scheduler")
    async def scheduler(websocket: WebSocket) -> None:
        if broker.closed:
            await websocket.close(_GOING_AWAY)
            return
        offered = websocket.scope.get("subprotocols", [])
        await websocket.accept(subprotocol=next((p for p in SUBPROTOCOLS if p in offered), None))
        await _Session(broker, websocket, authenticate, authorize).run()

    return routes


@dataclass(frozen=True, eq=False)
class _Subscription:
    id: str
    destination: str
    namespace: str
    view: View
    session: _Session

    @property
    def route(self) -> tuple[str, str, View]:
        return (self.namespace, self.destination, self.view)


class _Refused(Exception):
    """What the client did cannot be served: answered with an ERROR frame, then the session closes."""

    def __init__(self, message: str, **headers: str) -> None:
        super().__init__(message)
        self.message = message
        self.headers = headers


class _Session:
    """One WebSocket connection: a reader handling the client's frames, a writer draining the outbox."""

    _ids = itertools.count(1)

    def __init__(self, broker: Broker, websocket: WebSocket, authenticate: Authenticate, authorize: Authorize) -> None:
        self.id = f"s{next(self._ids)}"
        self.subscriptions: dict[str, _Subscription] = {}
        self.finished = asyncio.Event()
        self._broker = broker
        self._websocket = websocket
        self._authenticate = authenticate
        self._authorize = authorize
        self._parser = FrameParser(CLIENT_FRAME_LIMIT)
        self._principal: Principal | None = None
        self._outbox: deque[Frame] = deque()
        self._wakeup = asyncio.Event()
        self._closing = asyncio.Event()
        self._close_code = _NORMAL
        self._disconnected = False
        self._send_every_s = 0.0
        self._expect_every_s = 0.0

    async def run(self) -> None:
        self._broker._open.add(self)
        if self._broker.closed:  # it closed while this WebSocket was being accepted
            self.close(_GOING_AWAY, "esi is shutting down")
        reader = asyncio.create_task(self._read())
        writer = asyncio.create_task(self._write())
        give_up = asyncio.create_task(self._give_up())
        try:
            done, _ = await asyncio.wait({reader, writer, give_up}, return_when=asyncio.FIRST_COMPLETED)
            if reader in done and not self._disconnected:
                # The reader stopped because the session is closing: the writer still sends what is queued.
                await asyncio.wait({writer, give_up}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (reader, writer, give_up):
                task.cancel()
            await asyncio.gather(reader, writer, give_up, return_exceptions=True)
            self._broker._detach(self)
            self._broker._open.discard(self)
            self.finished.set()
            log.info("STOMP session %s ended (WebSocket code %d)", self.id, self._close_code)

    def deliver(self, subscription: _Subscription, body: bytes, message_id: str) -> None:
        if len(self._outbox) >= self._broker.buffer_limit:
            SLOW_CONSUMERS.inc()
            log.warning("STOMP session %s is a slow consumer: %d frames unsent", self.id, len(self._outbox))
            # Dropping what is queued is what keeps memory bounded; the ERROR is best effort.
            self._outbox.clear()
            self._fail(
                f"slow consumer: more than {self._broker.buffer_limit} messages waiting; "
                "reconnect and re-read the current state"
            )
            return
        headers = {
            "subscription": subscription.id,
            "message-id": message_id,
            "destination": subscription.destination,
            "content-type": "application/json",
        }
        self._outbox.append(Frame("MESSAGE", headers, body))
        self._wakeup.set()

    def close(self, code: int, reason: str) -> None:
        """Stop taking messages, send what is queued, then close the WebSocket with ``code``."""
        if self._closing.is_set():
            return
        log.info("closing STOMP session %s: %s", self.id, reason)
        self._close_code = code
        self._closing.set()
        self._wakeup.set()
        self._broker._detach(self)

    def _send(self, frame: Frame) -> None:
        self._outbox.append(frame)
        self._wakeup.set()

    def _fail(self, message: str, *, code: int = _POLICY, headers: Mapping[str, str] | None = None) -> None:
        if self._closing.is_set():  # one ERROR per session: the first reason is the one that counts
            return
        self._send(Frame("ERROR", {"message": message, **(headers or {})}))
        self.close(code, message)

    async def _give_up(self) -> None:
        await self._closing.wait()
        await asyncio.sleep(CLOSE_GRACE_S)

    async def _write(self) -> None:
        try:
            while True:
                if self._outbox:
                    frame = self._outbox.popleft()
                    data = encode(frame)
                    try:
                        text = data.decode()
                    except UnicodeDecodeError:
                        await self._websocket.send_bytes(data)
                    else:
                        # Text frames where possible: that is what browser STOMP clients handle everywhere.
                        await self._websocket.send_text(text)
                    if frame.command == "MESSAGE":
                        MESSAGES_DELIVERED.inc()
                elif self._closing.is_set():
                    await self._websocket.close(self._close_code)
                    return
                else:
                    self._wakeup.clear()
                    try:
                        async with asyncio.timeout(self._send_every_s or None):
                            await self._wakeup.wait()
                    except TimeoutError:
                        await self._websocket.send_text("\n")
        except (WebSocketDisconnect, WebSocketDisconnected):
            self._disconnected = True

    async def _read(self) -> None:
        try:
            while not self._closing.is_set():
                data = await self._receive()
                if data is None:
                    return
                try:
                    frames = self._parser.feed(data)
                except StompProtocolError as err:
                    self._fail(f"malformed frame: {err}")
                    return
                for frame in frames:
                    if self._closing.is_set():
                        return
                    await self._handle(frame)
        except Exception:  # a bug, or an authenticator failing unexpectedly: tell the client, keep the trace
            log.exception("STOMP session %s failed", self.id)
            self._fail("internal error in esi; see its log", code=_INTERNAL)

    async def _receive(self) -> bytes | None:
        """The next WebSocket message's bytes; None once the client is gone or the session is closing."""
        if self._principal is None:
            timeout, silence = CONNECT_TIMEOUT_S, f"no CONNECT frame within {CONNECT_TIMEOUT_S:g} s"
        else:
            timeout = 2 * self._expect_every_s
            silence = f"heart-beat timeout: nothing received for {timeout * 1000:.0f} ms"
        try:
            async with asyncio.timeout(timeout or None):
                message = await self._websocket.receive()
        except TimeoutError:
            log.warning("STOMP session %s: %s", self.id, silence)
            self._fail(silence)
            return None
        if message["type"] == "websocket.disconnect":
            self._disconnected = True
            self.close(_NORMAL, "the client disconnected")
            return None
        text: str | None = message.get("text")
        return text.encode() if text is not None else message.get("bytes") or b""

    async def _handle(self, frame: Frame) -> None:
        receipt = frame.headers.get("receipt")
        try:
            if self._principal is None:
                await self._connect(frame)
            else:
                await self._dispatch(frame)
        except _Refused as refused:
            receipt_id = {"receipt-id": receipt} if receipt is not None else {}
            self._fail(refused.message, headers={**refused.headers, **receipt_id})
            return
        if receipt is not None:
            self._send(Frame("RECEIPT", {"receipt-id": receipt}))
        if frame.command == "DISCONNECT":
            self.close(_NORMAL, "the client sent DISCONNECT")

    async def _connect(self, frame: Frame) -> None:
        if frame.command not in {"CONNECT", "STOMP"}:
            raise _Refused(f"expected CONNECT or STOMP, got {frame.command}")
        versions = parse_accept_version(frame.headers.get("accept-version"))
        if "1.2" not in versions:
            raise _Refused(f"unsupported STOMP version {','.join(versions)}: esi speaks 1.2", version="1.2")
        try:
            client_heartbeat = parse_heartbeat(frame.headers.get("heart-beat"))
        except StompProtocolError as err:
            raise _Refused(f"malformed frame: {err}") from err
        principal = await self._guarded(self._authenticated(frame))
        if self._closing.is_set():  # closed while authentication was pending
            return
        sends, expects = negotiate_heartbeat(client_heartbeat, self._broker.heartbeat_ms)
        self._principal = principal
        self._send_every_s, self._expect_every_s = sends / 1000, expects / 1000
        self._broker._attach(self)
        log.info("STOMP session %s connected for %s", self.id, principal.name)
        headers = {"version": "1.2", "heart-beat": f"{sends},{expects}", "server": _SERVER, "session": self.id}
        self._send(Frame("CONNECTED", headers))

    async def _authenticated(self, frame: Frame) -> Principal:
        return await self._authenticate(self._token(frame))

    def _token(self, frame: Frame) -> str | None:
        websocket = self._websocket
        return (
            bearer_token(websocket.headers.get("authorization"))
            or websocket.query_params.get("access_token")
            or bearer_token(frame.headers.get("Authorization") or frame.headers.get("authorization"))
            or frame.headers.get("passcode")
            or None
        )

    async def _dispatch(self, frame: Frame) -> None:
        match frame.command:
            case "SUBSCRIBE":
                await self._subscribe(frame)
            case "UNSUBSCRIBE":
                subscription = self.subscriptions.pop(_required(frame, "id"), None)
                if subscription is not None:
                    self._broker._unroute(subscription)
            case "DISCONNECT":
                pass  # _handle answers the receipt, then closes
            case "SEND":
                raise _Refused(f"esi accepts no messages; subscribe to {_DESTINATIONS_HELP}")
            case "ACK" | "NACK":
                raise _Refused(f"nothing to {frame.command}: esi delivers with ack:auto only")
            case "BEGIN" | "COMMIT" | "ABORT":
                raise _Refused(f"{frame.command}: esi has no transactions, as it accepts no messages")
            case "CONNECT" | "STOMP":
                raise _Refused("already connected")
            case _:
                raise _Refused(f"{frame.command} is a frame servers send, not clients")

    async def _subscribe(self, frame: Frame) -> None:
        subscription_id = _required(frame, "id")
        destination = _required(frame, "destination")
        namespace = frame.headers.get("namespace", self._broker.default_namespace)
        if subscription_id in self.subscriptions:
            raise _Refused(f"subscription id {subscription_id!r} is already in use")
        if (ack := frame.headers.get("ack", "auto")) != "auto":
            raise _Refused(f"ack mode {ack!r} is not supported: esi delivers with ack:auto only")
        if not namespace:
            raise _Refused("the namespace header is empty")
        try:
            view = View(frame.headers.get("view", View.ORIGINAL))
        except ValueError:
            views = " or ".join(v.value for v in View)
            raise _Refused(f"unknown view {frame.headers['view']!r}: the view header is {views}") from None
        match = _DESTINATION.fullmatch(destination)
        resource = TOPIC_RESOURCES.get(match["topic"]) if match else None
        if resource is None:
            raise _Refused(f"unknown destination {destination!r}: subscribe to {_DESTINATIONS_HELP}")
        assert self._principal is not None  # only connected sessions dispatch
        await self._guarded(self._authorize(self._principal, "watch", resource, namespace))
        if self._closing.is_set():  # closed while authorization was pending
            return
        subscription = _Subscription(subscription_id, destination, namespace, view, self)
        self.subscriptions[subscription_id] = subscription
        self._broker._route(subscription)

    async def _guarded(self, decision: Awaitable[T]) -> T:
        """The authenticator's answer, its refusals turned into the ERROR the client reads."""
        try:
            return await decision
        except Refusal as refusal:
            wording = {401: "unauthenticated", 403: "forbidden"}.get(refusal.status, "refused")
            raise _Refused(f"{wording}: {refusal.reason}") from refusal
        except AuthUnavailable as err:
            raise _Refused(f"unavailable: {err.reason}; try again later") from err


def _required(frame: Frame, header: str) -> str:
    value = frame.headers.get(header)
    if not value:
        raise _Refused(f"{frame.command} needs a non-empty {header} header")
    return value
