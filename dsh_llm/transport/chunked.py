"""HTTP/1.1 chunked transfer decoding, many chunks per read.

``http.client`` (under urllib3) returns at most one HTTP chunk per ``read1``, and
providers send one chunk per event, so a fast stream pays the whole read stack
once per event. ``ChunkedBodyReader`` reads whatever the socket has (one
``read1`` of the connection's buffered reader) and strips the framing of every
chunk that arrived, so a stream that is ahead of its consumer is handed over in
large pieces, while a slow one still yields each chunk as soon as it arrives:
it never waits for more bytes than one read returns.

Contracts callers may rely on:

- ``read()`` returns the payload bytes one read made available (at least one
  byte), or ``b""`` once the terminating zero-size chunk and the trailer section
  were read (``done`` is then true).
- Bytes after the terminator are never payload. A server sends none before the
  next request (HTTP/1.1 without pipelining); ``clean`` tells whether that held,
  i.e. whether the connection may serve another request.
- A body that ends before its terminator raises ``http.client.IncompleteRead``;
  bad framing (a size that is not hex, data not followed by CRLF, an over-long
  size or trailer line) raises ``http.client.HTTPException``. Whatever the
  reader raises (a socket timeout included) propagates unchanged.
"""

from __future__ import annotations

import http.client
from collections.abc import Callable
from typing import Final

__all__ = ["ChunkedBodyReader"]

_MAX_LINE: Final = 4096
_SIZE: Final = 0
_DATA: Final = 1
_CRLF: Final = 2
_TRAILER: Final = 3
_DONE: Final = 4


class ChunkedBodyReader:
    """Decodes a chunked body read through ``read1`` (see the module docstring).

    Args:
        read1: The connection's buffered ``read1(size)`` (returns ``b""`` at EOF).
        size: Largest single read.
    """

    __slots__ = ("_buf", "_left", "_read1", "_size", "_state")

    def __init__(self, read1: Callable[[int], bytes], size: int = 65536) -> None:
        self._read1 = read1
        self._size = size
        self._buf = b""
        self._left = 0
        self._state = _SIZE

    @property
    def done(self) -> bool:
        """Whether the whole body (terminator and trailers) has been read."""
        return self._state == _DONE

    @property
    def clean(self) -> bool:
        """Whether the body is done and no byte past its end was read."""
        return self._state == _DONE and not self._buf

    def read(self) -> bytes:
        """The next payload bytes (see the module docstring)."""
        while self._state != _DONE:
            payload = self._parse()
            if payload:
                return payload
            if self._state == _DONE:
                break
            data = self._read1(self._size)
            if not data:
                raise http.client.IncompleteRead(b"")
            self._buf = self._buf + data if self._buf else data
        return b""

    def _parse(self) -> bytes:
        buf = self._buf
        end_of_buf = len(buf)
        find = buf.find
        pos = 0
        out: list[bytes] = []
        state = self._state
        left = self._left
        while True:
            if state == _SIZE:
                line_end = find(b"\r\n", pos)
                if line_end < 0:
                    if end_of_buf - pos > _MAX_LINE:
                        raise http.client.HTTPException("chunk size line too long")
                    break
                size = _chunk_size(buf[pos:line_end])
                start = line_end + 2
                if size == 0:
                    pos = start
                    state = _TRAILER
                    continue
                stop = start + size
                if stop + 2 <= end_of_buf:
                    # The whole chunk is here: the common case while streaming.
                    if buf[stop : stop + 2] != b"\r\n":
                        raise http.client.HTTPException(
                            "chunk data is not followed by CRLF"
                        )
                    out.append(buf[start:stop])
                    pos = stop + 2
                    continue
                pos = start
                left = size
                state = _DATA
            if state == _DATA:
                take = min(left, end_of_buf - pos)
                if take:
                    out.append(buf[pos : pos + take])
                    pos += take
                    left -= take
                if left:
                    break
                state = _CRLF
            if state == _CRLF:
                if end_of_buf - pos < 2:
                    break
                if buf[pos : pos + 2] != b"\r\n":
                    raise http.client.HTTPException(
                        "chunk data is not followed by CRLF"
                    )
                pos += 2
                state = _SIZE
                continue
            # _TRAILER: the only state left (_DONE is never parsed).
            line_end = find(b"\r\n", pos)
            if line_end < 0:
                if end_of_buf - pos > _MAX_LINE:
                    raise http.client.HTTPException("trailer line too long")
                break
            empty = line_end == pos
            pos = line_end + 2
            if empty:
                state = _DONE
                break
        self._buf = buf[pos:] if pos < end_of_buf else b""
        self._state = state
        self._left = left
        return b"".join(out) if len(out) != 1 else out[0]


def _chunk_size(line: bytes) -> int:
    try:
        size = int(line, 16)
    except ValueError:
        # A chunk extension (";name=value") or garbage.
        head = line.split(b";", 1)[0]
        try:
            size = int(head, 16)
        except ValueError:
            raise http.client.HTTPException(
                f"invalid chunk size {line[:20]!r}"
            ) from None
    if size < 0:
        raise http.client.HTTPException("negative chunk size")
    return size
