"""The AWS event-stream decoder (dsh_llm.transport.eventstream), checked against
the tests' own encoder (tests/eventstream_frames.py) and, when botocore is
installed, against botocore's parser as a second opinion."""

from __future__ import annotations

import binascii
import datetime
import itertools
import struct
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.transport.eventstream import MAX_HEADERS_BYTES
from dsh_llm.transport.eventstream import EventMessage
from dsh_llm.transport.eventstream import EventStreamDecoder
from tests.eventstream_frames import Typed
from tests.eventstream_frames import body
from tests.eventstream_frames import error
from tests.eventstream_frames import event
from tests.eventstream_frames import exception
from tests.eventstream_frames import flip
from tests.eventstream_frames import frame
from tests.eventstream_frames import headers_bytes
from tests.eventstream_frames import raw_frame

EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
STAMP = datetime.datetime(2026, 12, 1, 8, 30, 15, 250_000, tzinfo=datetime.UTC)
ID = uuid.UUID("12345678-1234-5678-1234-567812345678")

EVERY_TYPE = [
    ("yes", True),
    ("no", False),
    ("byte", Typed(2, -7)),
    ("short", Typed(3, -30_000)),
    ("int", Typed(4, 2_000_000_000)),
    ("long", Typed(5, -(2**62))),
    ("bytes", b"\x00\xffraw"),
    ("text", "caf\u00e9 \u5177"),
    ("when", STAMP),
    ("id", ID),
]

BODY = body(
    [
        event("messageStart", {"role": "assistant"}),
        event(
            "contentBlockDelta",
            {"contentBlockIndex": 0, "delta": {"text": "caf\u00e9 \u5177"}},
        ),
        frame(EVERY_TYPE, b"\x00binary\xff"),
        frame([], b""),
        exception("throttlingException", {"message": "slow down"}),
        error("InternalFailure", "boom"),
    ]
)


def _decode(pieces):
    decoder = EventStreamDecoder(provider="Bedrock")
    out = []
    for piece in pieces:
        out.extend(decoder.feed(piece))
    out.extend(decoder.close())
    return out


EXPECTED = _decode([BODY])


def test_every_header_type_and_payload_decodes():
    message = EXPECTED[2]
    assert message.headers == {
        "yes": True,
        "no": False,
        "byte": -7,
        "short": -30_000,
        "int": 2_000_000_000,
        "long": -(2**62),
        "bytes": b"\x00\xffraw",
        "text": "caf\u00e9 \u5177",
        "when": STAMP,
        "id": ID,
    }
    assert list(message.headers) == [name for name, _ in EVERY_TYPE]
    assert message.payload == b"\x00binary\xff"
    assert EXPECTED[3] == EventMessage({}, b"")


def test_the_bedrock_headers_have_properties():
    start, delta, _, _, thrown, failed = EXPECTED
    assert (start.message_type, start.event_type) == ("event", "messageStart")
    assert start.content_type == "application/json"
    assert start.payload == b'{"role":"assistant"}'
    assert delta.exception_type is None
    assert (thrown.message_type, thrown.exception_type) == (
        "exception",
        "throttlingException",
    )
    assert failed.message_type == "error"
    assert failed.headers[":error-code"] == "InternalFailure"


def test_one_byte_reads_give_the_same_frames():
    assert _decode(BODY[i : i + 1] for i in range(len(BODY))) == EXPECTED


@given(cuts=st.sets(st.integers(0, len(BODY)), max_size=12))
def test_any_split_gives_the_same_frames(cuts):
    bounds = [0, *sorted(cuts), len(BODY)]
    assert _decode(BODY[a:b] for a, b in itertools.pairwise(bounds)) == EXPECTED


def test_feed_returns_frames_as_they_complete():
    one = event("metadata", {"usage": {}})
    decoder = EventStreamDecoder()
    assert decoder.feed(one[:5]) == []
    assert decoder.feed(one[5:-1]) == []
    assert [m.event_type for m in decoder.feed(one[-1:] + one + one[:3])] == [
        "metadata",
        "metadata",
    ]
    assert [m.event_type for m in decoder.feed(one[3:])] == ["metadata"]
    assert decoder.close() == []


def test_an_empty_body_has_no_frames():
    assert _decode([]) == []
    assert _decode([b""]) == []


@given(
    headers=st.lists(
        st.tuples(
            st.text(min_size=1, max_size=20).filter(
                lambda name: len(name.encode()) < 256
            ),
            st.one_of(
                st.booleans(),
                st.integers(-(2**31), 2**31 - 1),
                st.binary(max_size=40),
                st.text(max_size=40),
                st.uuids(),
            ),
        ),
        max_size=6,
        unique_by=lambda pair: pair[0],
    ),
    payload=st.binary(max_size=300),
    cuts=st.sets(st.integers(0, 400), max_size=8),
)
def test_any_frame_round_trips_under_any_split(headers, payload, cuts):
    data = frame(headers, payload) * 2
    bounds = [0, *sorted(c for c in cuts if c < len(data)), len(data)]
    frames = _decode(data[a:b] for a, b in itertools.pairwise(bounds))
    assert frames == [EventMessage(dict(headers), payload)] * 2


# --- what is refused ----------------------------------------------------------------


def _failure(data: bytes, *, max_frame_bytes: int | None = None) -> LlmError:
    decoder = (
        EventStreamDecoder(provider="Bedrock")
        if max_frame_bytes is None
        else EventStreamDecoder(provider="Bedrock", max_frame_bytes=max_frame_bytes)
    )

    def run() -> None:
        decoder.feed(data)
        decoder.close()

    with pytest.raises(LlmError) as caught:
        run()
    return caught.value


@pytest.mark.parametrize("at", [0, 3, 4, 7, 8, 11])
def test_a_corrupt_prelude_is_malformed(at):
    failure = _failure(flip(event("metadata", {}), at))
    assert failure.code == ErrorCode.MALFORMED_RESPONSE
    assert "Bedrock" in failure.message


def test_every_corrupt_byte_after_the_prelude_is_malformed():
    one = event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "x"}})
    for at in range(12, len(one)):
        failure = _failure(flip(one, at))
        assert failure.code == ErrorCode.MALFORMED_RESPONSE, at
        assert "CRC" in failure.message


def _prelude(total: int, headers: int) -> bytes:
    head = struct.pack(">II", total, headers)
    return head + struct.pack(">I", binascii.crc32(head))


@pytest.mark.parametrize(
    ("total", "headers"),
    [
        (0, 0),
        (15, 0),
        (2**32 - 1, 0),
        (64 * 1024 * 1024, 0),
        (100, 85),
        (MAX_HEADERS_BYTES + 1000, MAX_HEADERS_BYTES + 1),
    ],
)
def test_an_absurd_length_is_malformed_at_once(total, headers):
    # Only the prelude is sent: the decoder must not wait for the rest.
    failure = _failure(_prelude(total, headers))
    assert failure.code == ErrorCode.MALFORMED_RESPONSE
    assert "length" in failure.message


def test_a_frame_over_the_configured_cap_is_malformed():
    big = frame([], b"x" * 100)
    assert _failure(big, max_frame_bytes=64).code == ErrorCode.MALFORMED_RESPONSE
    decoder = EventStreamDecoder(max_frame_bytes=len(big))
    assert decoder.feed(big) == [EventMessage({}, b"x" * 100)]


@pytest.mark.parametrize(
    "section",
    [
        bytes([4]) + b"name" + bytes([42]),  # unknown type
        bytes([0]) + bytes([7]) + b"\x00\x00",  # empty name
        bytes([4]) + b"name",  # no type
        bytes([4]) + b"name" + bytes([7]) + b"\x00\x09abc",  # string past the end
        bytes([4]) + b"name" + bytes([5]) + b"\x00\x01",  # long past the end
        bytes([4]) + b"name" + bytes([9]) + b"\x00" * 15,  # uuid past the end
        bytes([2]) + b"\xff\xfe" + bytes([0]),  # name not UTF-8
        bytes([1]) + b"n" + bytes([7]) + b"\x00\x02\xff\xfe",  # value not UTF-8
        headers_bytes([("twice", "a"), ("twice", "b")]),
        headers_bytes([("when", Typed(8, 2**62))]),  # timestamp out of range
    ],
)
def test_a_header_section_that_cannot_be_read_is_malformed(section):
    failure = _failure(raw_frame(section, b"{}"))
    assert failure.code == ErrorCode.MALFORMED_RESPONSE


def test_frames_before_a_bad_one_come_first_then_it_raises():
    good = event("messageStart", {"role": "assistant"})
    decoder = EventStreamDecoder()
    assert len(decoder.feed(good + good + flip(good, 20))) == 2
    with pytest.raises(LlmError) as caught:
        decoder.feed(good)
    assert caught.value.code == ErrorCode.MALFORMED_RESPONSE
    with pytest.raises(LlmError):
        decoder.close()


def test_a_timestamp_reads_as_utc_from_milliseconds():
    (message,) = _decode([frame([("t", Typed(8, -1500))])])
    assert message.headers["t"] == EPOCH - datetime.timedelta(milliseconds=1500)


@pytest.mark.parametrize("keep", [1, 11, 12, 20, -5, -1])
def test_a_body_ending_inside_a_frame_is_stream_closed(keep):
    one = event("messageStop", {"stopReason": "end_turn"})
    decoder = EventStreamDecoder(provider="Bedrock")
    assert decoder.feed(one + one[:keep]) == [
        EventMessage(_decode([one])[0].headers, b'{"stopReason":"end_turn"}')
    ]
    with pytest.raises(LlmError, match="Bedrock event stream ended inside") as caught:
        decoder.close()
    assert caught.value.code == ErrorCode.STREAM_CLOSED


def test_the_repr_shows_the_start_of_the_payload():
    (message,) = _decode([frame([("a", "b")], b"x" * 100)])
    assert repr(message) == (
        "EventMessage(headers={'a': 'b'}, payload=b'" + "x" * 60 + "'...)"
    )


# --- botocore's parser as a second opinion --------------------------------------------


def test_botocore_reads_the_test_encoder_as_the_decoder_does():
    eventstream = pytest.importorskip("botocore.eventstream")
    buffer = eventstream.EventStreamBuffer()
    buffer.add_data(BODY)
    theirs = list(buffer)
    assert len(theirs) == len(EXPECTED)
    for mine, other in zip(EXPECTED, theirs, strict=True):
        assert mine.payload == other.payload
        normalised = {
            name: (
                EPOCH + datetime.timedelta(milliseconds=value)
                if name == "when"
                else uuid.UUID(bytes=value)
                if name == "id"
                else value
            )
            for name, value in other.headers.items()
        }
        assert mine.headers == normalised


@given(payload=st.binary(max_size=200), text=st.text(max_size=30))
def test_botocore_and_the_decoder_agree_on_any_frame(payload, text):
    eventstream = pytest.importorskip("botocore.eventstream")
    data = frame([(":event-type", text), ("n", Typed(3, 7))], payload)
    buffer = eventstream.EventStreamBuffer()
    buffer.add_data(data)
    (theirs,) = list(buffer)
    (mine,) = _decode([data])
    assert (mine.headers, mine.payload) == (theirs.headers, theirs.payload)


def test_botocore_also_refuses_what_the_decoder_refuses():
    eventstream = pytest.importorskip("botocore.eventstream")
    bad = flip(event("metadata", {}), 30)
    buffer = eventstream.EventStreamBuffer()
    buffer.add_data(bad)
    with pytest.raises(eventstream.ParserError):
        list(buffer)
    assert _failure(bad).code == ErrorCode.MALFORMED_RESPONSE
