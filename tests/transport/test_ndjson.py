"""The NDJSON reader (dsh_llm.transport.ndjson)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_llm.errors import ErrorCode, LlmError
from dsh_llm.transport.ndjson import NdjsonDecoder, iter_ndjson

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
