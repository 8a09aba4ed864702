"""Hear of esi's changes from a scheduler: subscribe to its STOMP topics over WebSocket, sync or async.

::

    with subscribe("http://localhost:8082", ["/topic/schedulings/mine"], token=token) as messages:
        for message in messages:
            print(message.json()["action"])

``subscribe``/``asubscribe`` return only once esi has confirmed every subscription (each SUBSCRIBE carries a
receipt), so whatever happens after that is delivered: read the current state over REST *after* subscribing
and no change is lost in between. Heart-beats are sent in the background; a server silent for twice its
heart-beat period counts as gone.

Exceptions::

    StompError      esi refused (ERROR frame: unknown destination, not allowed, slow consumer, …), the
                    WebSocket could not be opened, or the connection ended; .frame is the ERROR frame if any
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from urllib.parse import urlsplit, urlunsplit

from websockets.asyncio.client import ClientConnection as AsyncConnection
from websockets.asyncio.client import connect as async_connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus, InvalidURI
from websockets.sync.client import ClientConnection
from websockets.sync.client import connect as sync_connect
from websockets.typing import Subprotocol

from esi.wire.stomp_frames import (
    DEFAULT_MAX_FRAME_BYTES,
    Frame,
    FrameParser,
    Message,
    StompProtocolError,
    encode,
    negotiate_heartbeat,
    parse_heartbeat,
)

__all__ = ["AsyncSubscription", "StompError", "Subscription", "asubscribe", "subscribe", "websocket_url"]

ENDPOINT = "/scheduler"
_SUBPROTOCOLS = [Subprotocol("v12.stomp")]
# How long unsubscribe and close wait for esi's receipt; closing drops the connection after it regardless.
_RECEIPT_TIMEOUT_S = 2.0


class StompError(Exception):
    """esi refused or ended the session; the message is the server's when it sent one."""

    def __init__(self, message: str, frame: Frame | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.frame = frame


def websocket_url(url: str) -> str:
    """The STOMP endpoint of the esi API at ``url`` (``http(s)://host:port[/prefix]``)."""
    parts = urlsplit(url)
    scheme = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}.get(parts.scheme)
    if scheme is None or not parts.netloc:
        raise StompError(f"not an esi API URL: {url!r} (expected http://host:port or https://host:port)")
    return urlunsplit((scheme, parts.netloc, parts.path.rstrip("/") + ENDPOINT, "", ""))


class _Session:
    """The client's side of the conversation without I/O: frames to send, what received bytes mean."""

    def __init__(
        self, host: str, destinations: Sequence[str], token: str | None, namespace: str | None, view: str | None
    ) -> None:
        self.host = host
        self.destinations = list(destinations)
        self.token = token
        self.namespace = namespace
        self.view = view
        self.parser = FrameParser(DEFAULT_MAX_FRAME_BYTES)
        self.messages: deque[Message] = deque()
        self.subscriptions: dict[str, str] = {}  # destination → subscription id
        self.receipts_awaited: set[str] = set()
        self.connected = False
        self.send_every_s = 0.0
        self.expect_every_s = 0.0
        self.last_received = time.monotonic()
        self._heartbeat_ms = 0
        self._ids = itertools.count(1)

    def connect(self, heartbeat_ms: int) -> str:
        self._heartbeat_ms = heartbeat_ms
        headers = {"accept-version": "1.2", "host": self.host, "heart-beat": f"{heartbeat_ms},{heartbeat_ms}"}
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token}"
        return _text(Frame("CONNECT", headers))

    def subscribe(self, destination: str) -> str:
        subscription_id = f"sub-{next(self._ids)}"
        headers = {"id": subscription_id, "destination": destination, "ack": "auto"}
        if self.namespace is not None:
            headers["namespace"] = self.namespace
        if self.view is not None:
            headers["view"] = self.view
        self.subscriptions[destination] = subscription_id
        return self._with_receipt(Frame("SUBSCRIBE", headers))

    def unsubscribe(self, destination: str) -> str:
        subscription_id = self.subscriptions.pop(destination, None)
        if subscription_id is None:
            raise ValueError(f"not subscribed to {destination!r}")
        # Messages already received for it are dropped too: after unsubscribe, none of them shows up.
        self.messages = deque(m for m in self.messages if m.subscription != subscription_id)
        return self._with_receipt(Frame("UNSUBSCRIBE", {"id": subscription_id}))

    def disconnect(self) -> str:
        return self._with_receipt(Frame("DISCONNECT"))

    def _with_receipt(self, frame: Frame) -> str:
        receipt = f"r-{next(self._ids)}"
        self.receipts_awaited.add(receipt)
        return _text(Frame(frame.command, {**frame.headers, "receipt": receipt}))

    def received(self, data: str | bytes) -> None:
        self.last_received = time.monotonic()
        try:
            frames = self.parser.feed(data.encode() if isinstance(data, str) else data)
        except StompProtocolError as err:
            raise StompError(f"esi sent a malformed frame: {err}") from err
        for frame in frames:
            if frame.command == "ERROR":
                raise StompError(frame.headers.get("message", "esi sent an ERROR frame"), frame)
            if frame.command == "CONNECTED":
                self._connected(frame)
            elif frame.command == "RECEIPT":
                self.receipts_awaited.discard(frame.headers.get("receipt-id", ""))
            elif frame.command == "MESSAGE":
                message = Message.from_frame(frame)
                if message.subscription in self.subscriptions.values():
                    self.messages.append(message)

    def _connected(self, frame: Frame) -> None:
        try:
            server = parse_heartbeat(frame.headers.get("heart-beat"))
        except StompProtocolError as err:
            raise StompError(f"esi sent a malformed CONNECTED frame: {err}", frame) from err
        # Seen from the server's side, what it sends is what this client expects, and the reverse.
        expects, sends = negotiate_heartbeat((self._heartbeat_ms, self._heartbeat_ms), server)
        self.send_every_s, self.expect_every_s = sends / 1000, expects / 1000
        self.connected = True

    def wait_until(self, deadline: float | None) -> float | None:
        """When to stop waiting for the server: the caller's deadline, or when its silence means it is gone."""
        silent_at = self.last_received + 2 * self.expect_every_s if self.expect_every_s else None
        return min((d for d in (deadline, silent_at) if d is not None), default=None)

    def check_silence(self) -> None:
        if self.expect_every_s and time.monotonic() >= self.last_received + 2 * self.expect_every_s:
            raise StompError(f"esi sent nothing, not even a heart-beat, for {2 * self.expect_every_s:g} s")


def _text(frame: Frame) -> str:
    return encode(frame).decode()


def _closed(err: ConnectionClosed) -> StompError:
    reason = f": {err.rcvd.reason}" if err.rcvd is not None and err.rcvd.reason else ""
    code = err.rcvd.code if err.rcvd is not None else "none"
    return StompError(f"the connection to esi ended (WebSocket close code {code}{reason})")


def _refused(url: str, err: Exception) -> StompError:
    if isinstance(err, InvalidStatus):
        return StompError(f"esi refused the WebSocket at {url}: HTTP {err.response.status_code}")
    return StompError(f"cannot open a WebSocket to {url}: {err}")


def _upgrade_headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token is not None else {}


class Subscription:
    """An open STOMP session; iterate it for messages, or call ``next`` to wait with a timeout."""

    def __init__(self, connection: ClientConnection, session: _Session) -> None:
        self._connection = connection
        self._session = session
        # websockets refuses concurrent sends; the heart-beat thread sends alongside the caller.
        self._send_lock = threading.Lock()
        self._stop = threading.Event()
        self._heartbeats: threading.Thread | None = None
        self._closed = False

    def __iter__(self) -> Iterator[Message]:
        while True:
            message = self.next()
            assert message is not None  # without a timeout, next waits for one
            yield message

    def next(self, timeout: float | None = None) -> Message | None:
        """The next message; None if none came within ``timeout`` seconds (None: wait as long as it takes)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._session.messages:
            if not self._receive(deadline):
                return None
        return self._session.messages.popleft()

    def unsubscribe(self, destination: str) -> None:
        """Stop receiving ``destination``'s messages, once esi confirms; ValueError if not subscribed to it."""
        self._send(self._session.unsubscribe(destination))
        self._await_receipts(time.monotonic() + _RECEIPT_TIMEOUT_S, f"UNSUBSCRIBE {destination}")

    def close(self) -> None:
        """DISCONNECT (waiting briefly for esi's receipt) and close the WebSocket; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        try:
            self._send(self._session.disconnect())
            self._await_receipts(time.monotonic() + _RECEIPT_TIMEOUT_S, "DISCONNECT")
        except StompError:
            pass  # the session is over either way; the server may have ended it first
        finally:
            self._connection.close()
            if self._heartbeats is not None:
                self._heartbeats.join()

    def _start(self, heartbeat_ms: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        self._send(self._session.connect(heartbeat_ms))
        self._wait(lambda: self._session.connected, deadline, "CONNECTED")
        if self._session.send_every_s:
            self._heartbeats = threading.Thread(target=self._beat, name="esi-stomp-heartbeat", daemon=True)
            self._heartbeats.start()
        for destination in self._session.destinations:
            self._send(self._session.subscribe(destination))
        self._await_receipts(deadline, "subscription receipts")

    def _beat(self) -> None:
        while not self._stop.wait(self._session.send_every_s):
            try:
                self._send("\n")
            except StompError:
                return

    def _send(self, text: str) -> None:
        try:
            with self._send_lock:
                self._connection.send(text)
        except ConnectionClosed as err:
            raise _closed(err) from err

    def _await_receipts(self, deadline: float, what: str) -> None:
        self._wait(lambda: not self._session.receipts_awaited, deadline, what)

    def _wait(self, condition: Callable[[], bool], deadline: float, what: str) -> None:
        while not condition():
            if not self._receive(deadline):
                raise StompError(f"esi did not answer in time (waiting for {what})")

    def _receive(self, deadline: float | None) -> bool:
        """Take in one WebSocket message; False if ``deadline`` passed first."""
        until = self._session.wait_until(deadline)
        try:
            data = self._connection.recv(timeout=None if until is None else max(0.0, until - time.monotonic()))
        except TimeoutError:
            self._session.check_silence()
            return False
        except ConnectionClosed as err:
            raise _closed(err) from err
        self._session.received(data)
        return True


class AsyncSubscription:
    """The asyncio twin of ``Subscription``: ``async for message in subscription``."""

    def __init__(self, connection: AsyncConnection, session: _Session) -> None:
        self._connection = connection
        self._session = session
        self._heartbeats: asyncio.Task[None] | None = None
        self._closed = False

    def __aiter__(self) -> AsyncIterator[Message]:
        return self

    async def __anext__(self) -> Message:
        message = await self.next()
        assert message is not None  # without a timeout, next waits for one
        return message

    async def next(self, timeout: float | None = None) -> Message | None:
        """The next message; None if none came within ``timeout`` seconds (None: wait as long as it takes)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._session.messages:
            if not await self._receive(deadline):
                return None
        return self._session.messages.popleft()

    async def unsubscribe(self, destination: str) -> None:
        """Stop receiving ``destination``'s messages, once esi confirms; ValueError if not subscribed to it."""
        await self._send(self._session.unsubscribe(destination))
        await self._await_receipts(time.monotonic() + _RECEIPT_TIMEOUT_S, f"UNSUBSCRIBE {destination}")

    async def close(self) -> None:
        """DISCONNECT (waiting briefly for esi's receipt) and close the WebSocket; safe to call twice. A cancelled
        caller closes the WebSocket without the DISCONNECT."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._heartbeats is not None:
                self._heartbeats.cancel()
                await asyncio.wait([self._heartbeats])  # not awaited: that would swallow a cancellation of the caller
            await self._send(self._session.disconnect())
            await self._await_receipts(time.monotonic() + _RECEIPT_TIMEOUT_S, "DISCONNECT")
        except StompError:
            pass  # the session is over either way; the server may have ended it first
        finally:
            await self._connection.close()

    async def _start(self, heartbeat_ms: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        await self._send(self._session.connect(heartbeat_ms))
        await self._wait(lambda: self._session.connected, deadline, "CONNECTED")
        if self._session.send_every_s:
            self._heartbeats = asyncio.create_task(self._beat(), name="esi-stomp-heartbeat")
        for destination in self._session.destinations:
            await self._send(self._session.subscribe(destination))
        await self._await_receipts(deadline, "subscription receipts")

    async def _beat(self) -> None:
        with contextlib.suppress(StompError):
            while True:
                await asyncio.sleep(self._session.send_every_s)
                await self._send("\n")

    async def _send(self, text: str) -> None:
        try:
            await self._connection.send(text)
        except ConnectionClosed as err:
            raise _closed(err) from err

    async def _await_receipts(self, deadline: float, what: str) -> None:
        await self._wait(lambda: not self._session.receipts_awaited, deadline, what)

    async def _wait(self, condition: Callable[[], bool], deadline: float, what: str) -> None:
        while not condition():
            if not await self._receive(deadline):
                raise StompError(f"esi did not answer in time (waiting for {what})")

    async def _receive(self, deadline: float | None) -> bool:
        """Take in one WebSocket message; False if ``deadline`` passed first."""
        until = self._session.wait_until(deadline)
        try:
            async with asyncio.timeout(None if until is None else max(0.0, until - time.monotonic())):
                data = await self._connection.recv()
        except TimeoutError:
            self._session.check_silence()
            return False
        except ConnectionClosed as err:
            raise _closed(err) from err
        self._session.received(data)
        return True


@contextmanager
def subscribe(
    url: str,
    destinations: Sequence[str],
    *,
    token: str | None = None,
    namespace: str | None = None,
    view: str | None = None,
    heartbeat_ms: int = 10000,
    connect_timeout: float = 10,
) -> Iterator[Subscription]:
    """Subscribe to ``destinations`` (``/topic/...``) of the esi API at ``url``, in ``namespace`` (None: esi's
    default) and ``view`` (None: the original's payloads; ``esi``: esi's view); the block runs once every
    subscription is confirmed."""
    ws_url = websocket_url(url)
    with contextlib.ExitStack() as stack:
        try:
            connection = stack.enter_context(
                sync_connect(
                    ws_url,
                    subprotocols=_SUBPROTOCOLS,
                    additional_headers=_upgrade_headers(token),
                    open_timeout=connect_timeout,
                    max_size=DEFAULT_MAX_FRAME_BYTES,
                )
            )
        except (OSError, InvalidHandshake, InvalidURI, TimeoutError) as err:
            raise _refused(ws_url, err) from err
        subscription = Subscription(
            connection, _Session(urlsplit(url).hostname or "", destinations, token, namespace, view)
        )
        stack.callback(subscription.close)
        subscription._start(heartbeat_ms, connect_timeout)
        yield subscription


@asynccontextmanager
async def asubscribe(
    url: str,
    destinations: Sequence[str],
    *,
    token: str | None = None,
    namespace: str | None = None,
    view: str | None = None,
    heartbeat_ms: int = 10000,
    connect_timeout: float = 10,
) -> AsyncIterator[AsyncSubscription]:
    """``subscribe`` for asyncio."""
    ws_url = websocket_url(url)
    async with contextlib.AsyncExitStack() as stack:
        try:
            connection = await stack.enter_async_context(
                async_connect(
                    ws_url,
                    subprotocols=_SUBPROTOCOLS,
                    additional_headers=_upgrade_headers(token),
                    open_timeout=connect_timeout,
                    max_size=DEFAULT_MAX_FRAME_BYTES,
                )
            )
        except (OSError, InvalidHandshake, InvalidURI, TimeoutError) as err:
            raise _refused(ws_url, err) from err
        subscription = AsyncSubscription(
            connection, _Session(urlsplit(url).hostname or "", destinations, token, namespace, view)
        )
        stack.push_async_callback(subscription.close)
        await subscription._start(heartbeat_ms, connect_timeout)
        yield subscription
