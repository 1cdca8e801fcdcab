"""The chunked-body decoder (dsh_llm.transport.chunked)."""

from __future__ import annotations

import http.client
import io
import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_llm.transport.chunked import ChunkedBodyReader


def _frame(*pieces: bytes, trailer: bytes = b"") -> bytes:
    body = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces)
    return body + b"0\r\n" + trailer + b"\r\n"


def _reads(data: bytes, cuts: list[int]) -> io.BytesIO:
    class Pieces(io.BytesIO):
        def __init__(self) -> None:
            super().__init__()
            bounds = [0, *sorted(cuts), len(data)]
            self._pieces = [data[a:b] for a, b in itertools.pairwise(bounds) if b > a]

        def read1(self, size: int = -1) -> bytes:
            return self._pieces.pop(0) if self._pieces else b""

    return Pieces()


def _decode(
    data: bytes, cuts: list[int] | None = None
) -> tuple[bytes, ChunkedBodyReader]:
    source = _reads(data, cuts or [])
    reader = ChunkedBodyReader(source.read1)
    out = b""
    while True:
        piece = reader.read()
        if not piece:
            return out, reader
        out += piece


def test_many_chunks_arrive_in_one_read():
    reads = []
    data = _frame(b"data: 1\n\n", b"data: 2\n\n", b"data: 3\n\n")
    source = _reads(data, [])
    reader = ChunkedBodyReader(source.read1)
    reads.append(reader.read())
    assert reads == [b"data: 1\n\ndata: 2\n\ndata: 3\n\n"]
    assert reader.read() == b""
    assert reader.done
    assert reader.clean


def test_one_byte_reads_give_the_same_payload():
    data = _frame(b"abc", b"defg", trailer=b"X-T: 1\r\n")
    assert _decode(data, list(range(1, len(data))))[0] == b"abcdefg"


@given(
    pieces=st.lists(st.binary(min_size=1, max_size=40), max_size=8),
    data=st.data(),
)
def test_any_read_split_gives_the_payload(pieces, data):
    framed = _frame(*pieces)
    cuts = data.draw(st.lists(st.integers(1, max(len(framed) - 1, 1)), max_size=12))
    payload, reader = _decode(framed, cuts)
    assert payload == b"".join(pieces)
    assert reader.done


def test_extensions_and_trailers_are_skipped():
    data = b"3;name=value\r\nabc\r\n0\r\nX-Checksum: 1\r\nX-Other: 2\r\n\r\n"
    payload, reader = _decode(data)
    assert payload == b"abc"
    assert reader.clean


def test_bytes_after_the_terminator_make_it_unclean():
    payload, reader = _decode(_frame(b"abc") + b"HTTP/1.1 200 OK\r\n")
    assert payload == b"abc"
    assert reader.done
    assert not reader.clean


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b"zz\r\nabc\r\n", http.client.HTTPException),
        (b"-1\r\n", http.client.HTTPException),
        (b"3\r\nabcXY", http.client.HTTPException),
        (b"3\r\nab", http.client.IncompleteRead),
        (b"3\r\nabc\r\n", http.client.IncompleteRead),
        (b"1" * 5000, http.client.HTTPException),
        (b"0\r\n" + b"x" * 5000, http.client.HTTPException),
    ],
)
def test_bad_or_truncated_framing_raises(data, error):
    with pytest.raises(error):
        _decode(data)


def test_data_split_across_reads_must_still_end_with_crlf():
    # The chunk's data ends in one read and its (missing) CRLF is checked in the next.
    with pytest.raises(http.client.HTTPException, match="not followed by CRLF"):
        _decode(b"3\r\nabcXY\r\n0\r\n\r\n", cuts=[5])
