"""The NDJSON reader (dsh_llm.transport.ndjson)."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.transport.ndjson import NdjsonDecoder
from dsh_llm.transport.ndjson import iter_ndjson

BODY = '{"a":1}\n\n{"b":"具"}\r\n{"c":[1,2]}'.encode()
VALUES = [{"a": 1}, {"b": "具"}, {"c": [1, 2]}]


def test_lines_decode_and_the_last_line_needs_no_newline():
    assert list(iter_ndjson([BODY])) == VALUES


def test_one_byte_reads_split_inside_utf8_characters():
    assert list(iter_ndjson(BODY[i : i + 1] for i in range(len(BODY)))) == VALUES


@given(cuts=st.sets(st.integers(0, len(BODY)), max_size=6))
def test_any_split_gives_the_same_values(cuts):
    bounds = [0, *sorted(cuts), len(BODY)]
    assert list(iter_ndjson(BODY[a:b] for a, b in itertools.pairwise(bounds))) == VALUES


def test_feed_returns_values_as_lines_complete():
    decoder = NdjsonDecoder()
    assert decoder.feed(b'{"a":') == []
    assert decoder.feed(b'1}\n{"b"') == [{"a": 1}]
    assert decoder.feed(b":2}\n") == [{"b": 2}]
    assert decoder.close() == []


def test_a_complete_line_that_is_not_json_is_malformed():
    with pytest.raises(LlmError, match="malformed NDJSON line from Ollama") as caught:
        list(iter_ndjson([b"{oops}\n"], provider="Ollama"))
    assert caught.value.code == ErrorCode.MALFORMED_RESPONSE


def test_a_line_nested_deeper_than_the_parser_follows_is_malformed():
    deep = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(LlmError) as caught:
        list(iter_ndjson([deep + b"\n"], provider="Ollama"))
    assert caught.value.code == ErrorCode.MALFORMED_RESPONSE
    with pytest.raises(LlmError) as caught:
        list(iter_ndjson([deep[:-1]], provider="Ollama"))
    assert caught.value.code == ErrorCode.STREAM_CLOSED


def test_a_truncated_last_line_is_stream_closed():
    with pytest.raises(LlmError, match="Ollama NDJSON stream ended") as caught:
        list(iter_ndjson([b'{"a":1}\n{"b":'], provider="Ollama"))
    assert caught.value.code == ErrorCode.STREAM_CLOSED


def test_blank_and_crlf_only_lines_are_skipped():
    body = b'\n\r\n{"a":1}\r\n\r\n \n{"b":2}\n\n'
    assert list(iter_ndjson([body])) == [{"a": 1}, {"b": 2}]


@pytest.mark.parametrize("split", [1, 2, 3, 4])
def test_one_leading_bom_is_removed_even_when_split(split):
    body = b'\xef\xbb\xbf{"a":1}\n{"b":2}'
    pieces = [body[i : i + split] for i in range(0, len(body), split)]
    assert list(iter_ndjson(pieces)) == [{"a": 1}, {"b": 2}]


def test_a_bom_later_in_the_body_is_not_removed():
    with pytest.raises(LlmError) as caught:
        list(iter_ndjson([b'{"a":1}\n\xef\xbb\xbf{"b":2}\n']))
    assert caught.value.code == ErrorCode.MALFORMED_RESPONSE


def test_a_body_that_is_only_a_bom_yields_nothing():
    assert list(iter_ndjson([b"\xef\xbb", b"\xbf"])) == []


def test_a_line_over_the_size_cap_is_malformed_after_the_lines_before_it():
    decoder = NdjsonDecoder(provider="Ollama", max_line_bytes=16)
    assert decoder.feed(b'{"a":1}\n' + b'{"b":"' + b"x" * 20 + b'"}\n') == [{"a": 1}]
    with pytest.raises(LlmError, match="line longer than 16 bytes") as caught:
        decoder.feed(b'{"c":3}\n')
    assert caught.value.code == ErrorCode.MALFORMED_RESPONSE
    with pytest.raises(LlmError):
        decoder.close()


def test_an_unterminated_line_over_the_cap_fails_before_the_body_ends():
    decoder = NdjsonDecoder(max_line_bytes=16)
    assert decoder.feed(b'{"a":"' + b"x" * 10) == []
    with pytest.raises(LlmError) as caught:
        decoder.feed(b"x" * 10)
    assert caught.value.code == ErrorCode.MALFORMED_RESPONSE


def test_a_tail_over_the_cap_after_complete_lines_fails_on_the_next_read():
    decoder = NdjsonDecoder(max_line_bytes=16)
    assert decoder.feed(b'{"a":1}\n' + b"y" * 30) == [{"a": 1}]
    with pytest.raises(LlmError) as caught:
        decoder.feed(b"\n")
    assert caught.value.code == ErrorCode.MALFORMED_RESPONSE


def test_a_line_exactly_at_the_cap_is_accepted():
    line = b'{"a":"' + b"x" * 8 + b'"}'
    assert len(line) == 16
    decoder = NdjsonDecoder(max_line_bytes=16)
    assert decoder.feed(line[:5]) == []
    assert decoder.feed(line[5:] + b"\n") == [{"a": "x" * 8}]


def test_a_long_line_over_many_reads_decodes_once_complete():
    value = {"t": "具" * 5000}
    body = json.dumps(value, ensure_ascii=False).encode() + b"\n"
    decoder = NdjsonDecoder()
    out = []
    for i in range(0, len(body), 3):
        out.extend(decoder.feed(body[i : i + 3]))
    assert out == [value]
    assert decoder.close() == []


def test_a_malformed_line_is_quoted_and_its_cause_holds_no_line():
    # Redaction is the read loop's work; the cause must not carry the line.
    decoder = NdjsonDecoder(provider="Ollama")
    with pytest.raises(LlmError) as caught:
        decoder.feed(b"{key sk-1}\n")
    assert "{key sk-1}" in caught.value.message
    cause = caught.value.__cause__
    assert type(cause) is ValueError
    assert "sk-1" not in str(cause)


def test_invalid_utf8_becomes_replacement_characters():
    assert list(iter_ndjson([b'{"a":"\xff"}\n'])) == [{"a": "\ufffd"}]
