"""The SSE shim (dsh_llm.transport.sse): the WHATWG event-stream framing rules,
the sseclient-py gaps it closes (comments, BOM, an unterminated final event,
blocking reads), and byte-split invariance.

Every fixture is decoded whole, split into 1-byte reads (so splits fall inside
UTF-8 characters and inside CRLF pairs), split at random points (hypothesis),
and served by the loopback server one byte per write, chunked and
close-delimited."""

from __future__ import annotations

import itertools
from collections.abc import Iterable

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply
from dsh_llm.transport.call import StreamingCall
from dsh_llm.transport.session import NoAuth
from dsh_llm.transport.session import create_session
from dsh_llm.transport.session import stream_headers
from dsh_llm.transport.sse import DONE
from dsh_llm.transport.sse import MAX_EVENT_BYTES
from dsh_llm.transport.sse import SseDecoder
from dsh_llm.transport.sse import SseEvent
from dsh_llm.transport.sse import iter_sse
from dsh_llm.transport.sse import parse_block_with_sseclient


@attrs.frozen
class Case:
    name: str
    body: bytes
    data: tuple[str, ...] = ()
    comments: tuple[str, ...] = ()
    closed: bool = False
    terminal: str | None = DONE


CASES = [
    Case("lf", b'data: {"a":1}\n\ndata: [DONE]\n\n', ('{"a":1}', DONE)),
    Case("crlf", b'data: {"a":1}\r\n\r\ndata: [DONE]\r\n\r\n', ('{"a":1}', DONE)),
    Case("cr", b"data: 1\r\rdata: [DONE]\r\r", ("1", DONE)),
    Case(
        "mixed endings", b"data: 1\n\r\ndata: 2\r\n\ndata: [DONE]\r\r", ("1", "2", DONE)
    ),
    Case("leading bom", b"\xef\xbb\xbfdata: 1\n\ndata: [DONE]\n\n", ("1", DONE)),
    Case(
        "bom only at the start",
        b"data: 1\n\n\xef\xbb\xbfdata: 2\n\ndata: [DONE]\n\n",
        ("1", DONE),
    ),
    Case("multi-line data", b"data: a\ndata: b\n\ndata: [DONE]\n\n", ("a\nb", DONE)),
    Case("no space after colon", b"data:x\n\ndata:[DONE]\n\n", ("x", DONE)),
    Case("only one space removed", b"data:  x\n\ndata: [DONE]\n\n", (" x", DONE)),
    Case(
        "comments are not events",
        b": keep-alive\n\ndata: 1\n\n:ping\n\ndata: [DONE]\n\n",
        ("1", DONE),
        ("keep-alive", "ping"),
    ),
    Case(
        "comment inside a block",
        b": c\ndata: x\n\ndata: [DONE]\n\n",
        ("x", DONE),
        ("c",),
    ),
    Case("field without colon", b"data\n\ndata: [DONE]\n\n", ("", DONE)),
    Case("no data dispatches nothing", b"event: x\n\ndata: [DONE]\n\n", (DONE,)),
    Case(
        "unknown field ignored", b"foo: bar\ndata: x\n\ndata: [DONE]\n\n", ("x", DONE)
    ),
    Case("field names are case-sensitive", b"Data: x\n\ndata: [DONE]\n\n", (DONE,)),
    Case("leading blank lines", b"\n\n\ndata: x\n\n\n\ndata: [DONE]\n\n", ("x", DONE)),
    Case(
        "utf-8 across reads",
        "data: 具体 😀 é\n\ndata: [DONE]\n\n".encode(),
        ("具体 😀 é", DONE),
    ),
    Case(
        "invalid utf-8 replaced",
        b"data: a\xffb\n\ndata: [DONE]\n\n",
        ("a\ufffdb", DONE),
    ),
    Case(
        "line separators are data",
        "data: a\u2028b\x85c\x0bd\n\ndata: [DONE]\n\n".encode(),
        ("a\u2028b\x85c\x0bd", DONE),
    ),
    Case("done stops", b"data: [DONE]\n\ndata: {}\n\n", (DONE,)),
    Case("done with whitespace", b"data:  [DONE] \n\n", (" [DONE] ",)),
    Case(
        "complete done line without blank line",
        b'data: {"a":1}\n\ndata: [DONE]\n',
        ('{"a":1}', DONE),
    ),
    Case("done line with crlf at eof", b"data: [DONE]\r\n", (DONE,)),
    Case(
        "done without newline",
        b'data: {"a":1}\n\ndata: [DONE]',
        ('{"a":1}',),
        closed=True,
    ),
    Case("truncated json", b'data: {"a":1}\n\ndata: {"b":', ('{"a":1}',), closed=True),
    Case("complete line without blank", b"data: {}\n", closed=True),
    Case("empty body", b"", closed=True),
    Case("body without done", b"data: {}\n\n", ("{}",), closed=True),
    Case("no terminal needed", b"data: a\n\ndata: b\n\n", ("a", "b"), terminal=None),
    Case("trailing comment tail", b"data: a\n\n: bye\n", ("a",), terminal=None),
    Case(
        "tail without terminal",
        b"data: a\n\ndata: b",
        ("a",),
        closed=True,
        terminal=None,
    ),
]


def _decode(
    pieces: Iterable[bytes], case: Case
) -> tuple[list[SseEvent], list[str], bool]:
    comments: list[str] = []
    events: list[SseEvent] = []
    try:
        for event in iter_sse(
            pieces,
            on_comment=comments.append,
            terminal_data=case.terminal,
            provider="Test",
        ):
            events.append(event)
    except LlmError as exc:
        if exc.code != ErrorCode.STREAM_CLOSED:
            raise
        return events, comments, True
    return events, comments, False


def _check(case: Case, pieces: Iterable[bytes]) -> None:
    events, comments, closed = _decode(pieces, case)
    assert tuple(e.data for e in events) == case.data
    assert tuple(comments) == case.comments
    assert closed == case.closed


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_fixture_whole(case):
    _check(case, [case.body])


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_fixture_one_byte_per_read(case):
    _check(case, [case.body[i : i + 1] for i in range(len(case.body))])


@given(data=st.data())
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_fixture_any_split(case, data):
    cuts = sorted(data.draw(st.sets(st.integers(0, len(case.body)), max_size=8)))
    bounds = [0, *cuts, len(case.body)]
    _check(case, [case.body[a:b] for a, b in itertools.pairwise(bounds)])


def _served_events(case: Case, framing: str) -> tuple[list[SseEvent], list[str], bool]:
    with LoopbackServer() as server:
        server.enqueue(Reply(body=case.body or (), framing=framing, split=1))
        session = create_session()
        call = StreamingCall(
            session,
            url=f"{server.url}/sse",
            body=b"{}",
            headers=stream_headers(),
            auth=NoAuth(),
            provider="Test",
            endpoint=server.url,
            signal=None,
            idle_timeout_ms=5000,
            keepalive_timeout_ms=None,
            total_timeout_ms=None,
        )
        try:
            call.open()
            return _decode(call.chunks(), case)
        finally:
            call.close()
            session.close()


@pytest.mark.parametrize("framing", ["chunked", "close"])
@pytest.mark.parametrize("case", [c for c in CASES if c.body], ids=lambda c: c.name)
def test_fixture_served_one_byte_per_write(case, framing):
    events, comments, closed = _served_events(case, framing)
    assert tuple(e.data for e in events) == case.data
    assert tuple(comments) == case.comments
    assert closed == case.closed


def test_event_type_id_and_retry_are_kept():
    decoder = SseDecoder(terminal_data=None)
    events = decoder.feed(
        b"event: add\nid: 7\nretry: 100\ndata: a\n\n"
        b"data: b\n\n"
        b"id: x\x00y\nretry: 1x\ndata: c\n\n"
    )
    assert events == [
        SseEvent("a", "add", "7", 100),
        SseEvent("b", "message", "7"),
        SseEvent("c", "message", "7", None),
    ]


def test_old_llama_cpp_error_field_is_surfaced():
    events = list(
        iter_sse(
            [b'error: {"code":400,"message":"too long"}\n\ndata: [DONE]\n\n'],
            provider="Test",
        )
    )
    assert events[0].error == '{"code":400,"message":"too long"}'
    assert events[0].data == ""
    assert events[1].data == DONE


def test_error_field_next_to_data_keeps_both():
    (event,) = SseDecoder(terminal_data=None).feed(b"error: boom\ndata: x\n\n")
    assert (event.data, event.error) == ("x", "boom")


def test_messages_name_the_provider():
    with pytest.raises(
        LlmError, match=r"^\[STREAM_CLOSED\] Acme SSE stream ended without \[DONE\]$"
    ):
        list(iter_sse([b"data: {}\n\n"], provider="Acme"))
    with pytest.raises(LlmError, match="Acme SSE stream ended without"):
        list(iter_sse([b"data: {"], provider="Acme"))
    with pytest.raises(LlmError, match="inside an unterminated event"):
        list(iter_sse([b"data: {"], provider="Acme", terminal_data=None))


def test_nothing_is_parsed_after_the_terminal_event():
    decoder = SseDecoder()
    assert [e.data for e in decoder.feed(b"data: [DONE]\n\n")] == [DONE]
    assert decoder.terminated
    assert decoder.feed(b"data: late\n\n") == []
    assert decoder.close() == []


def test_a_split_bom_is_still_removed():
    decoder = SseDecoder(terminal_data=None)
    assert decoder.feed(b"\xef") == []
    assert decoder.feed(b"\xbb") == []
    assert decoder.feed(b"\xbfdata: x\n\n") == [SseEvent("x")]


def test_a_lone_partial_bom_at_eof_is_a_truncated_body():
    decoder = SseDecoder()
    decoder.feed(b"\xef\xbb")
    with pytest.raises(LlmError) as caught:
        decoder.close()
    assert caught.value.code == ErrorCode.STREAM_CLOSED


def test_crlf_split_across_reads_is_one_line_ending():
    decoder = SseDecoder(terminal_data=None)
    assert decoder.feed(b"data: a\r") == []
    assert decoder.feed(b"\n\r") == [SseEvent("a")]
    assert decoder.feed(b"\ndata: b\r\n\r\n") == [SseEvent("b")]


# --- the fast path equals sseclient-py ------------------------------------------------

_VALUE = st.binary(max_size=40).filter(lambda b: b"\n" not in b and b"\r" not in b)


@given(value=_VALUE)
def test_single_data_line_fast_path_equals_sseclient(value):
    block = b"data:" + value
    (event,) = SseDecoder(terminal_data=None).feed(block + b"\n\n")
    parsed = parse_block_with_sseclient(block)
    assert parsed is not None
    assert (event.data, event.event) == (parsed[0], parsed[1])


@given(name=_VALUE, value=_VALUE)
def test_event_then_data_line_fast_path_equals_sseclient(name, value):
    block = b"event:" + name + b"\ndata:" + value
    (event,) = SseDecoder(terminal_data=None).feed(block + b"\n\n")
    parsed = parse_block_with_sseclient(block)
    assert parsed is not None
    assert (event.data, event.event) == (parsed[0], parsed[1] or "message")


_FIELD = st.sampled_from([b"data", b"event", b"id", b"retry", b"foo", b"Data", b""])
_LINE = st.one_of(
    st.builds(lambda f, v: f + b":" + v, _FIELD, _VALUE),
    st.builds(lambda f: f, _FIELD.filter(bool)),
)


@given(lines=st.lists(_LINE, min_size=1, max_size=5))
def test_any_block_decodes_as_sseclient_parses_it(lines):
    block = b"\n".join(lines)
    if not block.strip(b"\n") or b"\n\n" in block:
        return
    events = SseDecoder(terminal_data=None).feed(block + b"\n\n")
    parsed = parse_block_with_sseclient(block.lstrip(b"\n"))
    if parsed is None:
        assert events == []
    else:
        (event,) = events
        assert (event.data, event.event) == (parsed[0], parsed[1] or "message")


_EVENT = st.lists(_LINE, min_size=1, max_size=4).map(
    lambda ls: b"\n".join(ls) + b"\n\n"
)
_ENDING = st.sampled_from([b"\n", b"\r\n", b"\r"])


@given(events=st.lists(_EVENT, max_size=6), ending=_ENDING, data=st.data())
def test_decoding_does_not_depend_on_splits_or_line_endings(events, ending, data):
    body = b"".join(events).replace(b"\n", ending)
    whole = SseDecoder(terminal_data=None).feed(body)
    cuts = sorted(data.draw(st.sets(st.integers(0, len(body)), max_size=10)))
    bounds = [0, *cuts, len(body)]
    decoder = SseDecoder(terminal_data=None)
    pieces: list[SseEvent] = []
    for a, b in itertools.pairwise(bounds):
        pieces.extend(decoder.feed(body[a:b]))
    assert pieces == whole
    lf = SseDecoder(terminal_data=None).feed(b"".join(events))
    assert whole == lf


def _as_text(event: SseEvent) -> SseEvent:
    """``event`` with a ``raw`` data decoded as every other event's."""
    if event.raw is None:
        return event
    return event._replace(data=event.raw.decode("utf-8", "replace"), raw=None)


@given(
    events=st.lists(_EVENT, max_size=6),
    ending=_ENDING,
    raw_over=st.integers(0, 60),
    data=st.data(),
)
def test_raw_over_keeps_long_data_lines_as_bytes_and_nothing_else_changes(
    events, ending, raw_over, data
):
    body = b"".join(events).replace(b"\n", ending)
    expected = SseDecoder(terminal_data=None).feed(body)
    cuts = sorted(data.draw(st.sets(st.integers(0, len(body)), max_size=10)))
    decoder = SseDecoder(terminal_data=None, raw_over=raw_over)
    got: list[SseEvent] = []
    for a, b in itertools.pairwise([0, *cuts, len(body)]):
        got.extend(decoder.feed(body[a:b]))
    assert [_as_text(event) for event in got] == expected
    assert all(event.data == "" for event in got if event.raw is not None)


def test_raw_over_applies_to_one_data_line_after_an_event_line_or_not():
    long = "caf\u00e9 \U0001f680 ".encode() * 100
    decoder = SseDecoder(terminal_data=None, raw_over=100)
    body = (
        b"\n\ndata: " + long + b"\n\n"  # one data line
        b"event: big\ndata:" + long + b"\n\n"  # after an event line
        b"data: " + long + b"\ndata: x\n\n"  # two data lines: a str
        b"id: 7\ndata: " + long + b"\n\n"  # an id too: a str
        b"data: short\n\n"  # not over raw_over
    )
    # In many reads (the event grows in place) and in one.
    pieces = [body[at : at + 64] for at in range(0, len(body), 64)]
    for reads in (pieces, [body]):
        decoder = SseDecoder(terminal_data=None, raw_over=100)
        events = [event for read in reads for event in decoder.feed(read)]
        assert [(e.event, e.raw) for e in events] == [
            ("message", bytearray(long)),
            ("big", bytearray(long)),
            ("message", None),
            ("message", None),
            ("message", None),
        ]
        assert [e.data for e in events] == [
            "",
            "",
            long.decode() + "\nx",
            long.decode(),
            "short",
        ]
        assert events[3].id == "7"


# --- size ------------------------------------------------------------------------


def test_a_long_event_fed_in_many_reads_decodes_whole():
    decoder = SseDecoder(terminal_data=None)
    value = b"x" * 100_000
    body = b"data: " + value + b"\n\n"
    events = []
    for start in range(0, len(body), 7):
        events += decoder.feed(body[start : start + 7])
    assert [e.data for e in events] == [value.decode()]


def test_an_event_larger_than_the_cap_is_malformed_response():
    decoder = SseDecoder(terminal_data=None, provider="Test", max_event_bytes=1000)
    decoder.feed(b"data: " + b"x" * 600)
    with pytest.raises(LlmError) as caught:
        decoder.feed(b"x" * 600)
    assert caught.value.code == ErrorCode.MALFORMED_RESPONSE
    assert caught.value.message == "Test SSE stream has an event larger than 1000 bytes"


def test_the_cap_counts_an_unfinished_event_left_after_a_complete_one():
    decoder = SseDecoder(terminal_data=None, provider="Test", max_event_bytes=100)
    assert [e.data for e in decoder.feed(b"data: a\n\ndata: " + b"y" * 200)] == ["a"]
    with pytest.raises(LlmError) as caught:
        decoder.feed(b"y")
    assert caught.value.code == ErrorCode.MALFORMED_RESPONSE


def test_the_cap_holds_for_an_event_that_arrives_in_one_read():
    decoder = SseDecoder(terminal_data=None, provider="Test", max_event_bytes=10)
    with pytest.raises(LlmError) as caught:
        decoder.feed(b"data: 0123456789abcdef\n\n")
    assert caught.value.code == ErrorCode.MALFORMED_RESPONSE


def test_events_up_to_the_cap_pass_and_the_default_cap_is_64_mib():
    assert MAX_EVENT_BYTES == 64 * 1024 * 1024
    decoder = SseDecoder(terminal_data=None, max_event_bytes=100)
    block = b"data: " + b"z" * 94
    assert [e.data for e in decoder.feed(block + b"\n\n")] == ["z" * 94]


def test_events_before_an_oversize_one_come_out_first_then_it_raises():
    decoder = SseDecoder(terminal_data=None, provider="Test", max_event_bytes=20)
    events = decoder.feed(b"data: ok\n\ndata: " + b"x" * 40 + b"\n\n")
    assert [e.data for e in events] == ["ok"]
    with pytest.raises(LlmError) as caught:
        decoder.feed(b"data: more\n\n")
    assert caught.value.code == ErrorCode.MALFORMED_RESPONSE
    with pytest.raises(LlmError):
        decoder.close()


def test_nothing_after_the_terminal_event_is_measured():
    decoder = SseDecoder(provider="Test", max_event_bytes=20)
    events = decoder.feed(
        b"data: [DONE]\n\ndata: " + b"x" * 40 + b"\n\ndata: " + b"y" * 40
    )
    assert [e.data for e in events] == [DONE]
    assert decoder.close() == []
