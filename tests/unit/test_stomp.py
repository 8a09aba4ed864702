"""STOMP 1.2 frames: what goes on the wire, what comes back out of it however it is cut, and why bad input
is refused."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from esi.wire.stomp_frames import (
    BODY_COMMANDS,
    CLIENT_COMMANDS,
    SERVER_COMMANDS,
    Frame,
    FrameParser,
    Message,
    StompProtocolError,
    encode,
    negotiate_heartbeat,
    parse_accept_version,
    parse_heartbeat,
)


def parse_all(data: bytes, parser: FrameParser | None = None) -> list[Frame]:
    return (parser or FrameParser()).feed(data)


def test_a_message_is_encoded_with_its_length_and_a_nul() -> None:
    frame = Frame("MESSAGE", {"destination": "/topic/jobs", "subscription": "0"}, b'{"a":1}')

    assert encode(frame) == b'MESSAGE\ndestination:/topic/jobs\nsubscription:0\ncontent-length:7\n\n{"a":1}\0'


def test_a_frame_without_body_has_no_content_length() -> None:
    assert encode(Frame("RECEIPT", {"receipt-id": "r1"})) == b"RECEIPT\nreceipt-id:r1\n\n\0"


def test_the_encoder_states_the_true_length_whatever_the_caller_wrote() -> None:
    frame = Frame("SEND", {"content-length": "99", "destination": "/x"}, b"abc")

    assert encode(frame) == b"SEND\ncontent-length:3\ndestination:/x\n\nabc\0"


def test_header_names_and_values_are_escaped() -> None:
    frame = Frame("MESSAGE", {"a:b": "line\none\r\\two:three"})

    wire = encode(frame)

    assert b"a\\cb:line\\none\\r\\\\two\\cthree\n" in wire
    assert parse_all(wire) == [frame]


def test_connect_headers_are_not_escaped_so_one_zero_peers_can_read_them() -> None:
    frame = Frame("CONNECT", {"passcode": "a:b\\c", "host": "esi"})

    wire = encode(frame)

    assert wire == b"CONNECT\npasscode:a:b\\c\nhost:esi\n\n\0"
    assert parse_all(wire) == [frame]


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        pytest.param({"host": "a\nb"}, "line breaks", id="line break in a value"),
        pytest.param({"pass:code": "x"}, "':' in its name", id="colon in a name"),
    ],
)
def test_unescapable_connected_headers_are_refused(headers: dict[str, str], reason: str) -> None:
    with pytest.raises(StompProtocolError, match=reason):
        encode(Frame("CONNECTED", headers))


@pytest.mark.parametrize(
    ("frame", "reason"),
    [
        pytest.param(Frame("HELLO"), "unknown command", id="unknown command"),
        pytest.param(Frame("SUBSCRIBE", {}, b"x"), "SUBSCRIBE frames must not have a body", id="body where none"),
        pytest.param(Frame("SEND", {"": "x"}), "empty header name", id="empty header name"),
    ],
)
def test_frames_that_break_the_rules_are_not_encoded(frame: Frame, reason: str) -> None:
    with pytest.raises(StompProtocolError, match=reason):
        encode(frame)


def test_content_length_carries_a_body_with_nul_bytes() -> None:
    frame = Frame("MESSAGE", {"destination": "/d"}, b"a\0b\0")

    (parsed,) = parse_all(encode(frame))

    assert parsed.body == b"a\0b\0"


def test_without_content_length_the_body_ends_at_the_first_nul() -> None:
    assert parse_all(b"SEND\ndestination:/d\n\nhello\0SEND\n\n\0") == [
        Frame("SEND", {"destination": "/d"}, b"hello"),
        Frame("SEND", {}),
    ]


def test_heartbeat_end_of_lines_between_frames_are_skipped() -> None:
    frame = encode(Frame("RECEIPT", {"receipt-id": "1"}))

    frames = parse_all(b"\n\r\n" + frame + b"\n\n\r\n" + frame + b"\n")

    assert [f.headers["receipt-id"] for f in frames] == ["1", "1"]


def test_heartbeats_alone_make_no_frame() -> None:
    parser = FrameParser()

    assert parser.feed(b"\n") == []
    assert parser.feed(b"\r") == []
    assert parser.feed(b"\n\n") == []
    assert parser.feed(b"DISCONNECT\n\n\0") == [Frame("DISCONNECT")]


def test_lines_may_end_with_crlf() -> None:
    assert parse_all(b"SUBSCRIBE\r\nid:0\r\ndestination:/topic/jobs\r\n\r\n\0") == [
        Frame("SUBSCRIBE", {"id": "0", "destination": "/topic/jobs"})
    ]


def test_the_first_of_repeated_headers_counts() -> None:
    assert parse_all(b"MESSAGE\nfoo:World\nfoo:Hello\n\n\0")[0].headers == {"foo": "World"}


def test_frames_fed_one_byte_at_a_time_come_out_whole() -> None:
    frames = [
        Frame("MESSAGE", {"destination": "/d", "subscription": "s"}, b"body with \0 inside"),
        Frame("ERROR", {"message": "no:pe"}),
        Frame("SEND", {"destination": "/e"}, b"x"),
    ]
    wire = b"\n".join(encode(f) for f in frames)
    parser = FrameParser()

    parsed = [frame for i in range(len(wire)) for frame in parser.feed(wire[i : i + 1])]

    assert [(f.command, f.body) for f in parsed] == [(f.command, f.body) for f in frames]


@pytest.mark.parametrize(
    ("wire", "reason"),
    [
        pytest.param(b"HELLO\n\n\0", "unknown command 'HELLO'", id="unknown command"),
        pytest.param(b"SEND\ndestination\n\n\0", "header line without ':'", id="header without colon"),
        pytest.param(b"SEND\n:x\n\n\0", "without a name", id="header without name"),
        pytest.param(b"SEND\nd:a\\tb\n\n\0", "undefined escape sequence '\\\\\\\\t'", id="undefined escape"),
        pytest.param(b"SEND\nd:a\\\n\n\0", "undefined escape sequence", id="lone backslash"),
        pytest.param(b"SEND\nd:\xff\n\n\0", "not UTF-8", id="header not utf-8"),
        pytest.param(b"SEND\ncontent-length:-1\n\n\0", "non-negative integer, got '-1'", id="negative length"),
        pytest.param(b"SEND\ncontent-length:2\n\nabc\0", "no NUL after the 2 bytes", id="length too short"),
        pytest.param(b"SUBSCRIBE\nid:0\n\nx\0", "SUBSCRIBE frames must not have a body", id="body where none"),
    ],
)
def test_malformed_frames_are_refused_with_the_reason(wire: bytes, reason: str) -> None:
    with pytest.raises(StompProtocolError, match=reason):
        parse_all(wire)


@pytest.mark.parametrize(
    "wire",
    [
        pytest.param(b"SEND\ncontent-length:1000\n\n", id="announced length"),
        pytest.param(b"SEND\n\n" + b"x" * 200, id="body without nul"),
        pytest.param(b"SEND\nh:" + b"x" * 200, id="head without end"),
    ],
)
def test_a_frame_larger_than_the_limit_is_refused_before_it_is_complete(wire: bytes) -> None:
    with pytest.raises(StompProtocolError, match="exceeds the limit of 100 bytes"):
        FrameParser(max_frame_bytes=100).feed(wire)


def test_a_frame_of_exactly_the_limit_is_accepted() -> None:
    wire = encode(Frame("SEND", {}, b"x" * 50))

    assert FrameParser(max_frame_bytes=len(wire)).feed(wire)[0].body == b"x" * 50


@pytest.mark.parametrize(
    ("client", "server", "expected"),
    [
        pytest.param((0, 0), (10000, 10000), (0, 0), id="client does none"),
        pytest.param((5000, 20000), (10000, 10000), (20000, 10000), id="the slower side sets each period"),
        pytest.param((15000, 1000), (10000, 10000), (10000, 15000), id="client sends slower than server wants"),
        pytest.param((1000, 1000), (0, 0), (0, 0), id="server does none"),
        pytest.param((1000, 0), (10000, 10000), (0, 10000), id="client wants none"),
    ],
)
def test_heartbeat_negotiation(client: tuple[int, int], server: tuple[int, int], expected: tuple[int, int]) -> None:
    assert negotiate_heartbeat(client, server) == expected


@pytest.mark.parametrize(
    ("value", "expected"), [(None, (0, 0)), ("0,0", (0, 0)), ("10000, 5000", (10000, 5000))], ids=str
)
def test_heartbeat_headers_parse(value: str | None, expected: tuple[int, int]) -> None:
    assert parse_heartbeat(value) == expected


@pytest.mark.parametrize("value", ["10000", "a,b", "-1,0", "1,2,3", ""])
def test_malformed_heartbeat_headers_are_refused(value: str) -> None:
    with pytest.raises(StompProtocolError, match="two non-negative integers"):
        parse_heartbeat(value)


def test_accept_version_lists_versions_and_absence_means_one_zero() -> None:
    assert parse_accept_version("1.1, 1.2") == ("1.1", "1.2")
    assert parse_accept_version(None) == ("1.0",)


def test_a_message_frame_becomes_a_message_with_json_body() -> None:
    frame = Frame(
        "MESSAGE", {"destination": "/topic/jobs", "subscription": "s1", "message-id": "7"}, b'{"action":"ADDED"}'
    )

    message = Message.from_frame(frame)

    assert (message.destination, message.subscription, message.message_id) == ("/topic/jobs", "s1", "7")
    assert message.json() == {"action": "ADDED"}


def test_a_message_without_its_headers_is_refused() -> None:
    with pytest.raises(StompProtocolError, match="without subscription, message-id"):
        Message.from_frame(Frame("MESSAGE", {"destination": "/d"}))


# Frames as a peer may send them: header names other than content-length (the encoder owns it); CONNECT and
# CONNECTED headers without what they cannot carry unescaped.
_text = st.text(max_size=20)
_escaped_headers = st.dictionaries(_text.filter(lambda n: n and n != "content-length"), _text, max_size=5)
_plain_text = st.text(st.characters(codec="utf-8", exclude_characters="\r\n"), max_size=20)
_plain_headers = st.dictionaries(
    _plain_text.filter(lambda n: n and ":" not in n and n != "content-length"), _plain_text, max_size=5
)


@st.composite
def frames(draw: st.DrawFn) -> Frame:
    command = draw(st.sampled_from(sorted(CLIENT_COMMANDS | SERVER_COMMANDS)))
    headers = draw(_plain_headers if command in {"CONNECT", "CONNECTED"} else _escaped_headers)
    body = draw(st.binary(max_size=50)) if command in BODY_COMMANDS else b""
    return Frame(command, headers, body)


@given(st.lists(frames(), max_size=4), st.lists(st.integers(min_value=0, max_value=400), max_size=6), st.booleans())
def test_any_frames_cut_anywhere_parse_back_to_themselves(sent: list[Frame], cuts: list[int], heartbeats: bool) -> None:
    separator = b"\r\n\n" if heartbeats else b""
    wire = separator + separator.join(encode(frame) for frame in sent)
    parser = FrameParser()
    bounds = [0, *sorted(min(cut, len(wire)) for cut in cuts), len(wire)]

    received = [frame for start, end in itertools.pairwise(bounds) for frame in parser.feed(wire[start:end])]

    expected = [
        Frame(f.command, {**f.headers, "content-length": str(len(f.body))} if f.body else f.headers, f.body)
        for f in sent
    ]
    assert received == expected
