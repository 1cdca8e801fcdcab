"""AWS event-stream bodies (``application/vnd.amazon.eventstream``), decoded from
bytes as they arrive.

A frame is: total length and headers length (big-endian ``uint32`` each), the
CRC32 of those 8 bytes, the headers, the payload, and the CRC32 of everything
before it. Contracts callers may rely on:

- ``EventStreamDecoder.feed`` returns the frames a read completed (often none),
  whatever the split of the bytes (one byte at a time, many frames at once);
  buffering is linear in the bytes received.
- A bad prelude or message CRC, a total length below 16 bytes or above
  ``max_frame_bytes``, headers longer than ``MAX_HEADERS_BYTES`` or than the
  frame, a header of unknown type, a duplicate header or one that runs past
  its section, or a name or string that is not UTF-8: ``LlmError``
  ``MALFORMED_RESPONSE``, raised as soon as the prelude shows it (an absurd
  length is never waited for). The frames completed before it are returned
  first; the next call raises.
- ``close`` (end of body) with part of a frame left: ``STREAM_CLOSED``.
- ``EventMessage`` holds the typed headers (``bool``, ``int``, ``bytes``,
  ``str``, ``datetime`` for a timestamp, ``UUID``) and the raw payload; the
  ``:message-type``, ``:event-type``, ``:exception-type`` and ``:content-type``
  headers have properties. Decoding the payload is the translator's business.
"""

from __future__ import annotations

import datetime
import struct
import uuid
import zlib
from typing import Final
from typing import TypeAlias

from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError

__all__ = [
    "MAX_FRAME_BYTES",
    "MAX_HEADERS_BYTES",
    "EventMessage",
    "EventStreamDecoder",
    "HeaderValue",
]

PRELUDE_BYTES: Final = 12
"""Total length, headers length and the prelude's CRC32."""
MIN_FRAME_BYTES: Final = PRELUDE_BYTES + 4
"""A frame without headers or payload: the prelude and the message CRC32."""
MAX_HEADERS_BYTES: Final = 128 * 1024
"""The largest headers section accepted (what AWS SDKs accept)."""
MAX_FRAME_BYTES: Final = 24 * 1024 * 1024 + MAX_HEADERS_BYTES + MIN_FRAME_BYTES
"""The largest frame accepted by default: a 24 MiB payload (what AWS SDKs
accept), full headers, prelude and CRC."""

HeaderValue: TypeAlias = bool | int | bytes | str | datetime.datetime | uuid.UUID
"""A header's value, by its wire type (0-1 ``bool``; 2-5 ``int``; 6 ``bytes``;
7 ``str``; 8 ``datetime``, UTC, from milliseconds; 9 ``UUID``)."""

_PRELUDE: Final = struct.Struct(">II")
_UINT16: Final = struct.Struct(">H")
_CRC: Final = struct.Struct(">I")
_INTS: Final = {2: struct.Struct(">b"), 3: struct.Struct(">h"), 4: struct.Struct(">i")}
_INT64: Final = struct.Struct(">q")
_EPOCH: Final = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_STRING: Final = 7
_KNOWN_SECTIONS: Final = 64
_crc32 = zlib.crc32


class EventMessage:
    """One decoded frame: its headers and payload (compared by value)."""

    __slots__ = ("headers", "payload")

    def __init__(self, headers: dict[str, HeaderValue], payload: bytes) -> None:
        self.headers = headers
        """The typed headers, by name, in wire order."""
        self.payload = payload
        """The payload bytes, undecoded."""

    def _text(self, name: str) -> str | None:
        value = self.headers.get(name)
        return value if type(value) is str else None

    @property
    def message_type(self) -> str | None:
        """``:message-type`` (``event``, ``exception``, ``error``), if a string."""
        return self._text(":message-type")

    @property
    def event_type(self) -> str | None:
        """``:event-type`` (``contentBlockDelta``...), if a string."""
        return self._text(":event-type")

    @property
    def exception_type(self) -> str | None:
        """``:exception-type`` (``throttlingException``...), if a string."""
        return self._text(":exception-type")

    @property
    def content_type(self) -> str | None:
        """``:content-type`` (``application/json``), if a string."""
        return self._text(":content-type")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EventMessage):
            return NotImplemented
        return self.headers == other.headers and self.payload == other.payload

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        shown = self.payload[:60]
        more = "..." if len(self.payload) > len(shown) else ""
        return f"EventMessage(headers={self.headers!r}, payload={shown!r}{more})"


class EventStreamDecoder:
    """Incremental event-stream decoder (see the module docstring).

    Args:
        provider: Display name used in error messages.
        max_frame_bytes: The longest frame accepted (``MAX_FRAME_BYTES``).
    """

    __slots__ = ("_buffer", "_failed", "_known", "_max_frame", "_need", "_provider")

    def __init__(
        self, *, provider: str = "AWS", max_frame_bytes: int = MAX_FRAME_BYTES
    ) -> None:
        self._provider = provider
        self._max_frame = max_frame_bytes
        self._buffer = bytearray()
        # Bytes the frame at the head of the buffer needs (0: prelude not read).
        self._need = 0
        self._failed: LlmError | None = None
        # Header sections already read: a stream repeats a few of them (every
        # text delta has the same three headers), so each is parsed once.
        self._known: dict[bytes, dict[str, HeaderValue]] = {}

    def feed(self, data: bytes) -> list[EventMessage]:
        """Feed the next bytes; return the frames they completed.

        Raises:
            LlmError: ``MALFORMED_RESPONSE`` (see the module docstring).
        """
        if self._failed is not None:
            raise self._failed
        buffer = self._buffer
        buffer += data
        size = len(buffer)
        need = self._need
        if size < (need or PRELUDE_BYTES):
            return []
        frames: list[EventMessage] = []
        pos = 0
        view = memoryview(buffer)
        try:
            while True:
                if not need:
                    if size - pos < PRELUDE_BYTES:
                        break
                    need = self._prelude(view, pos)
                if size - pos < need:
                    break
                frames.append(self._frame(view, pos, need))
                pos += need
                need = 0
        except LlmError as exc:
            # Its traceback would keep views of the buffer (and the buffer) alive.
            self._failed = exc.with_traceback(None)
        view.release()
        if self._failed is not None:
            self._buffer = bytearray()
            if not frames:
                raise self._failed
            return frames
        self._need = need
        if pos:
            del buffer[:pos]
        return frames

    def close(self) -> list[EventMessage]:
        """End of body: nothing may be left of a frame.

        Raises:
            LlmError: ``STREAM_CLOSED`` when part of a frame is left;
                ``MALFORMED_RESPONSE`` after a bad frame.
        """
        if self._failed is not None:
            raise self._failed
        left = len(self._buffer)
        if not left:
            return []
        self._buffer = bytearray()
        self._need = 0
        raise LlmError(
            f"{self._provider} event stream ended inside a frame ({left} bytes "
            "of it received)",
            ErrorCode.STREAM_CLOSED,
        )

    # -- one frame -----------------------------------------------------------------

    def _malformed(self, what: str) -> LlmError:
        return LlmError(
            f"{self._provider} sent a malformed event-stream frame: {what}",
            ErrorCode.MALFORMED_RESPONSE,
        )

    def _prelude(self, view: memoryview, pos: int) -> int:
        """The frame's total length, once its prelude is checked."""
        total, headers = _PRELUDE.unpack_from(view, pos)
        (crc,) = _CRC.unpack_from(view, pos + 8)
        if _crc32(view[pos : pos + 8]) != crc:
            raise self._malformed("its prelude CRC does not match")
        if total < MIN_FRAME_BYTES or total > self._max_frame:
            raise self._malformed(
                f"a total length of {total} bytes (accepted: {MIN_FRAME_BYTES} to "
                f"{self._max_frame})"
            )
        if headers > MAX_HEADERS_BYTES or headers > total - MIN_FRAME_BYTES:
            raise self._malformed(
                f"a headers length of {headers} bytes in a frame of {total}"
            )
        return int(total)

    def _frame(self, view: memoryview, pos: int, total: int) -> EventMessage:
        end = pos + total - 4
        (crc,) = _CRC.unpack_from(view, end)
        if _crc32(view[pos:end]) != crc:
            raise self._malformed("its message CRC does not match")
        (headers_length,) = _CRC.unpack_from(view, pos + 4)
        start = pos + PRELUDE_BYTES
        body = start + headers_length
        section = bytes(view[start:body])
        headers = self._known.get(section)
        if headers is None:
            headers = self._headers(memoryview(section))
            if len(self._known) >= _KNOWN_SECTIONS:
                self._known.clear()
            self._known[section] = headers
        return EventMessage(dict(headers), bytes(view[body:end]))

    def _headers(self, view: memoryview) -> dict[str, HeaderValue]:
        headers: dict[str, HeaderValue] = {}
        pos = 0
        end = len(view)
        try:
            while pos < end:
                size = view[pos]
                name = str(view[pos + 1 : pos + 1 + size], "utf-8")
                pos += 1 + size
                if not size or pos >= end:
                    raise self._malformed("a header without a name or a type")
                kind = view[pos]
                pos += 1
                value: HeaderValue
                if kind == _STRING or kind == 6:
                    (length,) = _UINT16.unpack_from(view, pos)
                    pos += 2
                    raw = view[pos : pos + length]
                    pos += length
                    value = str(raw, "utf-8") if kind == _STRING else bytes(raw)
                elif kind <= 1:
                    value = kind == 0
                elif kind in _INTS:
                    packer = _INTS[kind]
                    (value,) = packer.unpack_from(view, pos)
                    pos += packer.size
                elif kind == 5 or kind == 8:
                    (number,) = _INT64.unpack_from(view, pos)
                    pos += 8
                    value = (
                        number
                        if kind == 5
                        else _EPOCH + datetime.timedelta(milliseconds=number)
                    )
                elif kind == 9:
                    value = uuid.UUID(bytes=bytes(view[pos : pos + 16]))
                    pos += 16
                else:
                    raise self._malformed(f"a header of unknown type {kind}")
                if pos > end:
                    raise self._malformed(f"a header {name!r} longer than its section")
                if name in headers:
                    raise self._malformed(f"a second {name!r} header")
                headers[name] = value
        except (struct.error, UnicodeDecodeError, ValueError, OverflowError):
            # The header section is cut short or holds bytes no type allows.
            failure = self._malformed("a header that cannot be read")
        else:
            return headers
        raise failure
