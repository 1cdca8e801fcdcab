"""An AWS event-stream encoder written for the tests, apart from the decoder
under test (``dsh_llm.transport.eventstream``): it follows the framing as AWS
documents it (big-endian lengths, CRC32 of the prelude, CRC32 of the whole
message before its last four bytes), with ``binascii.crc32``.

- ``frame(headers, payload)``: one frame; ``headers`` is a list of ``(name,
  value)`` where the value's Python type picks the wire type (``Typed`` forces
  one: a byte, a short, a timestamp...).
- ``event(event_type, payload)``, ``exception(exception_type, payload)`` and
  ``error(code, message)``: the frames Bedrock sends (a JSON payload, the
  ``:message-type``, ``:event-type``/``:exception-type`` and ``:content-type``
  headers).
- ``body(frames)`` joins frames; ``flip(data, at)`` changes one byte.
"""

from __future__ import annotations

import binascii
import datetime
import json
import struct
import uuid
from collections.abc import Iterable
from typing import Any
from typing import NamedTuple


class Typed(NamedTuple):
    """A header value with its wire type named (0-9)."""

    kind: int
    value: Any


def _value(value: Any) -> bytes:
    if isinstance(value, Typed):
        kind, raw = value.kind, value.value
    elif isinstance(value, bool):
        kind, raw = (0 if value else 1), None
    elif isinstance(value, int):
        kind, raw = 4, value
    elif isinstance(value, bytes):
        kind, raw = 6, value
    elif isinstance(value, str):
        kind, raw = 7, value
    elif isinstance(value, datetime.datetime):
        kind, raw = 8, value
    elif isinstance(value, uuid.UUID):
        kind, raw = 9, value
    else:
        raise TypeError(type(value))
    out = bytes([kind])
    if kind in (0, 1):
        return out
    if kind in (2, 3, 4, 5):
        return out + struct.pack({2: ">b", 3: ">h", 4: ">i", 5: ">q"}[kind], raw)
    if kind == 6:
        return out + struct.pack(">H", len(raw)) + raw
    if kind == 7:
        encoded = raw.encode("utf-8")
        return out + struct.pack(">H", len(encoded)) + encoded
    if kind == 8:
        millis = (
            raw
            if isinstance(raw, int)
            else round(
                (raw - datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC))
                / datetime.timedelta(milliseconds=1)
            )
        )
        return out + struct.pack(">q", millis)
    if kind == 9:
        return out + raw.bytes
    raise ValueError(kind)


def headers_bytes(headers: Iterable[tuple[str, Any]]) -> bytes:
    """The headers section for ``headers``."""
    out = b""
    for name, value in headers:
        encoded = name.encode("utf-8")
        out += bytes([len(encoded)]) + encoded + _value(value)
    return out


def raw_frame(header_section: bytes, payload: bytes) -> bytes:
    """A frame around an already encoded headers section."""
    total = 12 + len(header_section) + len(payload) + 4
    prelude = struct.pack(">II", total, len(header_section))
    prelude += struct.pack(">I", binascii.crc32(prelude))
    message = prelude + header_section + payload
    return message + struct.pack(">I", binascii.crc32(message))


def frame(headers: Iterable[tuple[str, Any]], payload: bytes = b"") -> bytes:
    """One frame of ``headers`` and ``payload``."""
    return raw_frame(headers_bytes(headers), payload)


def _json(payload: Any) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode()


def event(event_type: str, payload: Any) -> bytes:
    """A Bedrock event frame (JSON payload)."""
    return frame(
        [
            (":event-type", event_type),
            (":content-type", "application/json"),
            (":message-type", "event"),
        ],
        _json(payload),
    )


def exception(exception_type: str, payload: Any) -> bytes:
    """A Bedrock exception frame (JSON payload)."""
    return frame(
        [
            (":exception-type", exception_type),
            (":content-type", "application/json"),
            (":message-type", "exception"),
        ],
        _json(payload),
    )


def error(code: str, message: str) -> bytes:
    """A generic event-stream error frame (no payload)."""
    return frame(
        [
            (":error-code", code),
            (":error-message", message),
            (":message-type", "error"),
        ]
    )


def body(frames: Iterable[bytes]) -> bytes:
    """The frames as one body."""
    return b"".join(frames)


def flip(data: bytes, at: int) -> bytes:
    """``data`` with the byte at ``at`` changed."""
    return data[:at] + bytes([data[at] ^ 0x5A]) + data[at + 1 :]
