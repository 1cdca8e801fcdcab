"""Cassette files: the format round-trips every byte, the loader is strict and
names the key path, and redaction keeps every secret out."""

from __future__ import annotations

import base64
import json

import pytest

from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.testing.cassette import FORMAT_VERSION
from dsh_llm.testing.cassette import BodyRead
from dsh_llm.testing.cassette import Cassette
from dsh_llm.testing.cassette import CassetteRequest
from dsh_llm.testing.cassette import CassetteResponse
from dsh_llm.testing.cassette import redact_exchange

from .sse_cassettes import CASSETTES

KEY = "sk-live-4f9a8b7c6d5e4f3a2b1c"


def _cassette(*reads: bytes, **response: object) -> Cassette:
    return Cassette(
        request=CassetteRequest(
            method="POST",
            url="http://127.0.0.1:8000/v1/chat/completions",
            headers=[("content-type", "application/json")],
            body=b'{"model":"m"}',
        ),
        response=CassetteResponse(
            status=200,
            headers=[("content-type", "text/event-stream")],
            at_ms=3.5,
            reads=[BodyRead(at_ms=10.0 + i, data=r) for i, r in enumerate(reads)],
            end_ms=20.0,
            **response,  # type: ignore[arg-type]
        ),
        base_path="/v1",
    )


def test_round_trip_keeps_every_byte_and_text_stays_readable(tmp_path):
    cafe = "data: café ☕\n\n".encode()
    inside_e = cafe.index("é".encode()) + 1
    split_inside_e = (cafe[:inside_e], cafe[inside_e:])  # é's two bytes apart
    cassette = _cassette(*split_inside_e, b"\xff\xfe binary")
    path = tmp_path / "c.jsonl"
    cassette.dump(path)
    text = path.read_text(encoding="utf-8")
    assert Cassette.load(path) == cassette
    assert Cassette.loads(text).dumps() == text
    lines = [json.loads(line) for line in text.splitlines()]
    assert lines[0] == {"dshCassette": FORMAT_VERSION, "basePath": "/v1"}
    reads = [line["read"] for line in lines if "read" in line]
    # A read that is not valid UTF-8 alone is stored as base64, never mangled.
    assert set(reads[0]) == {"atMs", "base64"}
    assert base64.b64decode(reads[0]["base64"]) == cafe[:inside_e]
    assert set(reads[2]) == {"atMs", "base64"}
    assert cassette.response.body.decode("utf-8", "replace").startswith("data: café ☕")


def test_a_whole_utf8_read_is_text_in_the_file(tmp_path):
    cassette = _cassette("data: café\n\n".encode())
    text = cassette.dumps()
    assert '"text":"data: café\\n\\n"' in text
    assert Cassette.loads(text).response.body == "data: café\n\n".encode()


def test_every_committed_cassette_loads_and_round_trips():
    paths = sorted(CASSETTES.rglob("*.jsonl"))
    assert len(paths) >= 15
    for path in paths:
        text = path.read_text(encoding="utf-8")
        assert Cassette.loads(text).dumps() == text, path


GOOD = _cassette(b"data: x\n\n").dumps().splitlines()


def _with_line(index: int, value: object) -> str:
    lines = list(GOOD)
    lines[index] = json.dumps(value)
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "the file is empty"),
        ("not json\n", "line 1: $: not JSON"),
        (
            _with_line(0, {"dshCassette": 2}),
            "line 1: $.dshCassette: unsupported version 2",
        ),
        (_with_line(0, {"version": 1}), "line 1: $: the first line must be the header"),
        (_with_line(0, {"dshCassette": 1, "extra": 1}), "line 1: $.extra: unknown key"),
        (
            _with_line(1, {"request": {"method": "POST", "url": "u", "headers": []}}),
            "line 2: $.request.body: missing",
        ),
        (
            _with_line(
                1,
                {
                    "request": {
                        "method": "POST",
                        "url": "u",
                        "headers": [["a"]],
                        "body": {"text": ""},
                    }
                },
            ),
            "line 2: $.request.headers[0]: must be a [name, value] pair of strings",
        ),
        (
            _with_line(
                2,
                {
                    "response": {
                        "atMs": 1,
                        "status": 700,
                        "reason": "OK",
                        "framing": "chunked",
                        "headers": [],
                    }
                },
            ),
            "line 3: $.response.status: must be an integer 100..599, got 700",
        ),
        (
            _with_line(
                2,
                {
                    "response": {
                        "atMs": 1,
                        "status": 200,
                        "reason": "OK",
                        "framing": "gzip",
                        "headers": [],
                    }
                },
            ),
            "line 3: $.response.framing: must be one of chunked, length, close",
        ),
        (
            _with_line(3, {"read": {"atMs": -1, "text": "x"}}),
            "line 4: $.read.atMs: must be a number >= 0",
        ),
        (
            _with_line(3, {"read": {"atMs": 1.0, "text": "x"}}),
            "line 4: $.read.atMs: goes back in time",
        ),
        (
            _with_line(3, {"read": {"atMs": 11, "base64": "!!"}}),
            "line 4: $.read.base64: is not valid base64",
        ),
        (
            _with_line(3, {"read": {"atMs": 11, "text": "x", "base64": "eA=="}}),
            'line 4: $.read: needs exactly one of "text" and "base64"',
        ),
        (
            _with_line(3, {"end": {"ended": "complete"}}),
            'line 4: $: expected a "read" line',
        ),
        (
            _with_line(4, {"end": {"ended": "done"}}),
            "line 5: $.end.ended: must be one of",
        ),
        (
            _with_line(4, {"read": {"atMs": 12, "text": "x"}}),
            'line 5: $: the last line must be "end"',
        ),
        (
            "\n".join(GOOD[:2]) + "\n",
            "a cassette needs request, response and end lines",
        ),
    ],
)
def test_a_bad_file_raises_invalid_cassette_naming_line_and_key(text, expected):
    with pytest.raises(LlmError) as caught:
        Cassette.loads(text, name="bad.jsonl")
    assert caught.value.code == ErrorCode.INVALID_CASSETTE
    assert caught.value.message.startswith("invalid cassette bad.jsonl: ")
    assert expected in caught.value.message


def _with_raw_line(index: int, text: str) -> str:
    lines = list(GOOD)
    lines[index] = text
    return "\n".join(lines) + "\n"


DEEP = "[" * 100_000


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            _with_raw_line(0, '{"dshCassette": 1' + "0" * 5000 + "}"),
            "line 1: $: holds a number too long to read",
        ),
        (_with_raw_line(0, DEEP), "line 1: $: is nested too deeply"),
        (_with_raw_line(2, DEEP + "]" * 100_000), "line 3: $: is nested too deeply"),
        (
            _with_raw_line(3, '{"read": {"atMs": 1' + "0" * 400 + ', "text": "x"}}'),
            "line 4: $.read.atMs: must be a number >= 0, got a very long number",
        ),
        (
            _with_line(0, {"dshCassette": "x" * 10_000}),
            'line 1: $.dshCassette: unsupported version "xxxxxxxxxxxxxxxxxxxxxx'
            "xxxxxxxxxxxxxx... (this library reads 1)",
        ),
        (
            _with_line(4, {"end": {"ended": ["complete"]}}),
            "line 5: $.end.ended: must be one of complete, cut, client-closed, "
            "got an array",
        ),
    ],
)
def test_a_hostile_file_is_invalid_cassette_and_nothing_else_escapes(text, expected):
    with pytest.raises(LlmError) as caught:
        Cassette.loads(text, name="bad.jsonl")
    assert caught.value.code == ErrorCode.INVALID_CASSETTE
    assert expected in caught.value.message
    assert len(caught.value.message) < 200


def test_a_request_body_no_reader_can_take_is_not_json():
    deep = _cassette(b"data: x\n\n").request
    for body in (DEEP.encode(), b'{"n": 1' + b"0" * 5000 + b"}"):
        assert CassetteRequest(method="POST", url=deep.url, body=body).json() is None


def test_a_missing_or_non_utf8_file_is_invalid_cassette(tmp_path):
    with pytest.raises(LlmError) as caught:
        Cassette.load(tmp_path / "nope.jsonl")
    assert caught.value.code == ErrorCode.INVALID_CASSETTE
    assert "cannot read cassette" in caught.value.message
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b"\xe9\n")
    with pytest.raises(LlmError, match="the file is not UTF-8"):
        Cassette.load(path)


def test_redaction_removes_the_key_from_headers_url_and_bodies_even_across_reads():
    body = f'data: {{"echo":"your key {KEY} is wrong"}}\n\n'.encode()
    # Every byte its own read: the key spans many reads.
    reads = [BodyRead(at_ms=float(i), data=body[i : i + 1]) for i in range(len(body))]
    cassette = Cassette(
        request=CassetteRequest(
            method="POST",
            url=f"https://user:pa55word-long@example.com/v1/chat?api_key={KEY}&x=1",
            headers=[
                ("authorization", f"Bearer {KEY}"),
                ("x-goog-api-key", "goog-secret-value-123"),
                ("cookie", "session=abcdefghijklmnop"),
                ("x-title", "my app"),
            ],
            body=f'{{"note":"{KEY}"}}'.encode(),
        ),
        response=CassetteResponse(
            status=200,
            headers=[("x-echo", f"key={KEY}"), ("set-cookie", "s=abcdefghijklmnop")],
            reads=reads,
        ),
    )
    redacted = redact_exchange(cassette)
    text = redacted.dumps()
    for secret in (KEY, "pa55word-long", "goog-secret-value-123", "abcdefghijklmnop"):
        assert secret not in text
        assert secret[:16] not in text
    assert dict(redacted.request.headers)["authorization"] == "***"
    assert dict(redacted.request.headers)["x-title"] == "my app"
    assert dict(redacted.response.headers)["x-echo"] == "key=***"
    assert redacted.response.body == b'data: {"echo":"your key *** is wrong"}\n\n'
    assert "api_key=***" in redacted.request.url
    assert "x=1" in redacted.request.url
    # Reads untouched by the key keep their own arrival time.
    assert redacted.response.reads[0] == reads[0]


def test_redaction_leaves_an_exchange_without_secrets_unchanged():
    cassette = _cassette(b"data: plain\n\n")
    assert redact_exchange(cassette) == cassette
