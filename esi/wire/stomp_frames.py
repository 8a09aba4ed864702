"""STOMP 1.2 frames, without any I/O: what esi's WebSocket endpoint and its client both speak.

A frame is a command, ordered headers and a body. ``encode`` turns one into bytes; ``FrameParser`` turns a
byte stream, fed in whatever pieces the transport delivers, back into frames. The rules followed are those
of the STOMP 1.2 specification:

* header names and values are escaped (``\\\\``, ``\\r``, ``\\n``, ``\\c``) in every frame except CONNECT and
  CONNECTED, which 1.0 clients and servers must still be able to read;
* a body is delimited by ``content-length`` when the header is present (so it may contain NUL), else by the
  first NUL; only SEND, MESSAGE and ERROR frames may have one;
* end-of-line bytes between frames are heart-beats and are skipped;
* when a header is repeated, the first occurrence counts.

Malformed input raises ``StompProtocolError`` naming what is wrong. A parser that raised is left in an
undefined state: STOMP requires closing the connection after a protocol error anyway.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "BODY_COMMANDS",
    "CLIENT_COMMANDS",
    "DEFAULT_MAX_FRAME_BYTES",
    "HEARTBEAT",
    "SERVER_COMMANDS",
    "Frame",
    "FrameParser",
    "Message",
    "StompProtocolError",
    "encode",
    "negotiate_heartbeat",
    "parse_accept_version",
    "parse_heartbeat",
]

CLIENT_COMMANDS = frozenset(
    {"SEND", "SUBSCRIBE", "UNSUBSCRIBE", "BEGIN", "COMMIT", "ABORT", "ACK", "NACK", "DISCONNECT", "CONNECT", "STOMP"}
)
SERVER_COMMANDS = frozenset({"CONNECTED", "MESSAGE", "RECEIPT", "ERROR"})
BODY_COMMANDS = frozenset({"SEND", "MESSAGE", "ERROR"})
# Frames whose headers are never escaped, so that a 1.0 peer can read the version negotiation.
_UNESCAPED_COMMANDS = frozenset({"CONNECT", "CONNECTED"})
HEARTBEAT = b"\n"
# Large enough for a testbed's full representation with thousands of slots, small enough to bound memory.
DEFAULT_MAX_FRAME_BYTES = 8 * 1024 * 1024

_ESCAPES = str.maketrans({"\\": "\\\\", "\r": "\\r", "\n": "\\n", ":": "\\c"})
_UNESCAPES = {"\\": "\\", "r": "\r", "n": "\n", "c": ":"}
_ESCAPE_SEQUENCE = re.compile(r"\\(.?)", re.DOTALL)
_HEAD_END = re.compile(rb"\r?\n\r?\n")
_DIGITS = re.compile(r"[0-9]+")


class StompProtocolError(ValueError):
    """Bytes or a frame that break STOMP 1.2; the message says how."""


@dataclass(frozen=True)
class Frame:
    """One STOMP frame. ``headers`` keep their order; ``encode`` sets ``content-length`` itself."""

    command: str
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""

    def header(self, name: str) -> str | None:
        return self.headers.get(name)


@dataclass(frozen=True)
class Message:
    """What a subscriber receives: one MESSAGE frame's body and where it came from."""

    destination: str
    subscription: str
    message_id: str
    headers: Mapping[str, str]
    body: bytes

    @classmethod
    def from_frame(cls, frame: Frame) -> Message:
        if frame.command != "MESSAGE":
            raise StompProtocolError(f"expected a MESSAGE frame, got {frame.command}")
        missing = [name for name in ("destination", "subscription", "message-id") if name not in frame.headers]
        if missing:
            raise StompProtocolError(f"MESSAGE frame without {', '.join(missing)} header(s)")
        return cls(
            destination=frame.headers["destination"],
            subscription=frame.headers["subscription"],
            message_id=frame.headers["message-id"],
            headers=frame.headers,
            body=frame.body,
        )

    def json(self) -> Any:
        """The body decoded as JSON (esi sends nothing else)."""
        return json.loads(self.body)


def encode(frame: Frame) -> bytes:
    """The frame as bytes on the wire, NUL-terminated, with ``content-length`` whenever it has a body."""
    if frame.command not in CLIENT_COMMANDS | SERVER_COMMANDS:
        raise StompProtocolError(f"unknown command {frame.command!r}")
    if frame.body and frame.command not in BODY_COMMANDS:
        raise StompProtocolError(f"{frame.command} frames must not have a body")
    headers = dict(frame.headers)
    # Always state the length, so a body may contain NUL and the receiver need not scan for the end.
    if frame.body or "content-length" in headers:
        headers["content-length"] = str(len(frame.body))
    escaped = frame.command not in _UNESCAPED_COMMANDS
    lines = [frame.command]
    for name, value in headers.items():
        if not name:
            raise StompProtocolError(f"{frame.command} frame with an empty header name")
        if escaped:
            lines.append(f"{name.translate(_ESCAPES)}:{value.translate(_ESCAPES)}")
            continue
        if ":" in name or any(eol in name + value for eol in "\r\n"):
            raise StompProtocolError(
                f"{frame.command} headers are not escaped, so header {name!r} cannot carry ':' in its name "
                "or line breaks"
            )
        lines.append(f"{name}:{value}")
    return "\n".join(lines).encode() + b"\n\n" + frame.body + b"\0"


class FrameParser:
    """Incremental parser: ``feed`` it bytes as they arrive, get back every frame they complete."""

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buffer = bytearray()
        # The current frame's command, headers and where its body starts, once its head is complete.
        self._head: tuple[str, dict[str, str], int] | None = None
        # How far the current body has been searched for its NUL, so fragments are not rescanned.
        self._scanned = 0

    def feed(self, data: bytes) -> list[Frame]:
        self._buffer += data
        frames = []
        while (frame := self._next_frame()) is not None:
            frames.append(frame)
        return frames

    def _next_frame(self) -> Frame | None:
        if self._head is None:
            self._skip_heartbeats()
            self._head = self._parse_head()
            if self._head is None:
                return None
        command, headers, body_start = self._head
        body_end = self._body_end(headers, body_start)
        if body_end is None:
            return None
        body = bytes(self._buffer[body_start:body_end])
        del self._buffer[: body_end + 1]
        self._head, self._scanned = None, 0
        if body and command not in BODY_COMMANDS:
            raise StompProtocolError(f"{command} frames must not have a body")
        return Frame(command, headers, body)

    def _skip_heartbeats(self) -> None:
        start = 0
        while True:
            if self._buffer.startswith(b"\n", start):
                start += 1
            elif self._buffer.startswith(b"\r\n", start):
                start += 2
            else:
                break
        del self._buffer[:start]

    def _parse_head(self) -> tuple[str, dict[str, str], int] | None:
        end = _HEAD_END.search(self._buffer)
        if end is None:
            self._check_size(len(self._buffer), "frame head")
            return None
        self._check_size(end.end(), "frame head")
        command_line, *header_lines = self._buffer[: end.start()].split(b"\n")
        command = command_line.rstrip(b"\r").decode("ascii", errors="replace")
        if command not in CLIENT_COMMANDS | SERVER_COMMANDS:
            raise StompProtocolError(f"unknown command {command[:40]!r}")
        headers: dict[str, str] = {}
        for raw in header_lines:
            name, value = _parse_header(raw.rstrip(b"\r"), escaped=command not in _UNESCAPED_COMMANDS)
            headers.setdefault(name, value)
        return command, headers, end.end()

    def _body_end(self, headers: Mapping[str, str], body_start: int) -> int | None:
        """Where the body ends (the index of its NUL), or None while it is incomplete."""
        length = headers.get("content-length")
        if length is not None:
            if not _DIGITS.fullmatch(length):
                raise StompProtocolError(f"content-length must be a non-negative integer, got {length!r}")
            body_end = body_start + int(length)
            self._check_size(body_end + 1, "frame")
            if len(self._buffer) <= body_end:
                return None
            if self._buffer[body_end] != 0:
                raise StompProtocolError(f"no NUL after the {length} bytes of body that content-length announced")
            return body_end
        nul = self._buffer.find(b"\0", max(body_start, self._scanned))
        if nul == -1:
            self._scanned = len(self._buffer)
            self._check_size(len(self._buffer), "frame")
            return None
        self._check_size(nul + 1, "frame")
        return nul

    def _check_size(self, size: int, what: str) -> None:
        if size > self.max_frame_bytes:
            raise StompProtocolError(f"{what} exceeds the limit of {self.max_frame_bytes} bytes")


def _parse_header(line: bytes | bytearray, *, escaped: bool) -> tuple[str, str]:
    try:
        text = line.decode()
    except UnicodeDecodeError as err:
        raise StompProtocolError(f"header line is not UTF-8: {bytes(line[:40])!r}") from err
    name, colon, value = text.partition(":")
    if not colon:
        raise StompProtocolError(f"header line without ':': {text[:40]!r}")
    if not name:
        raise StompProtocolError(f"header line without a name: {text[:40]!r}")
    if escaped:
        return _unescape(name), _unescape(value)
    return name, value


def _unescape(text: str) -> str:
    def replace(match: re.Match[str]) -> str:
        try:
            return _UNESCAPES[match.group(1)]
        except KeyError:
            raise StompProtocolError(f"undefined escape sequence {match.group(0)!r} in header {text[:40]!r}") from None

    return _ESCAPE_SEQUENCE.sub(replace, text)


def parse_heartbeat(value: str | None) -> tuple[int, int]:
    """A ``heart-beat`` header as (can send every ms, wants to receive every ms); absent means ``0,0``."""
    if value is None:
        return 0, 0
    parts = value.split(",")
    if len(parts) != 2 or not all(_DIGITS.fullmatch(part.strip()) for part in parts):
        raise StompProtocolError(f"heart-beat must be two non-negative integers 'x,y' in ms, got {value!r}")
    return int(parts[0]), int(parts[1])


def parse_accept_version(value: str | None) -> tuple[str, ...]:
    """The versions a CONNECT frame offers; a frame without ``accept-version`` comes from a 1.0 client."""
    if value is None:
        return ("1.0",)
    return tuple(version.strip() for version in value.split(",") if version.strip())


def negotiate_heartbeat(client: tuple[int, int], server: tuple[int, int]) -> tuple[int, int]:
    """Heart-beat periods in ms, as (server sends every, server expects every); 0 means none.

    Each side declares (can send every x, wants to receive every y). A direction is heart-beating only when
    the sender can and the receiver wants to, at the slower of the two periods.
    """
    client_sends, client_wants = client
    server_sends, server_wants = server
    sends = max(server_sends, client_wants) if server_sends and client_wants else 0
    expects = max(client_sends, server_wants) if client_sends and server_wants else 0
    return sends, expects
