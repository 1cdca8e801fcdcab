"""Newline-delimited JSON (NDJSON) bodies, decoded from bytes as they arrive.

Contracts callers may rely on:

- Lines are split on ``\\n`` in **bytes** (a trailing ``\\r`` is whitespace to
  JSON), then decoded as UTF-8 with invalid bytes replaced by U+FFFD, so a
  multi-byte character or a line split across reads, anywhere, is never cut.
  Blank lines are skipped; one UTF-8 BOM at the start of the body is removed.
- ``NdjsonDecoder.feed`` returns the values of the lines a read completed;
  ``close`` parses a last line that has no newline. Buffering is linear in the
  bytes received, however many reads bring a line.
- A complete line that is not JSON raises ``LlmError`` ``MALFORMED_RESPONSE``
  (its start quoted; the cause is a plain ``ValueError``, never the line).
  A last line without newline that is not JSON is a truncated body:
  ``STREAM_CLOSED``.
- **Size.** A line longer than ``max_line_bytes`` (``MAX_LINE_BYTES``, 64 MiB,
  the SSE decoder's event cap) raises ``MALFORMED_RESPONSE`` instead of
  growing without bound; the values of the lines before it are returned first
  and the next call raises.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Iterator
from typing import Any
from typing import Final

from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.transport.sse import decode_json
from dsh_llm.transport.sse import strip_bom

__all__ = ["MAX_LINE_BYTES", "NdjsonDecoder", "iter_ndjson"]

MAX_LINE_BYTES: Final = 64 * 1024 * 1024
"""The longest line a decoder accepts by default."""

_NOT_JSON: Final = "malformed NDJSON line from {provider}: {start!r}"
_CUT: Final = "{provider} NDJSON stream ended inside an unterminated line"
"""A last line without its newline that is not JSON: the body was cut short."""


class NdjsonDecoder:
    """Incremental NDJSON decoder.

    Args:
        provider: Display name used in error messages.
        max_line_bytes: The longest line accepted (``MAX_LINE_BYTES``).
    """

    __slots__ = (
        "_bom_pending",
        "_max_line_bytes",
        "_oversize",
        "_pending",
        "_pending_size",
        "_provider",
    )

    def __init__(
        self,
        *,
        provider: str = "NDJSON",
        max_line_bytes: int = MAX_LINE_BYTES,
    ) -> None:
        self._provider = provider
        self._max_line_bytes = max_line_bytes
        # The reads since the last newline, joined once a newline arrives.
        self._pending: list[bytes] = []
        self._pending_size = 0
        self._bom_pending: bytes | None = b""
        self._oversize: LlmError | None = None

    def feed(self, data: bytes) -> list[Any]:
        """Feed the next bytes; return the decoded values of completed lines.

        Raises:
            LlmError: ``MALFORMED_RESPONSE`` for a complete line that is not
                JSON, or a line over ``max_line_bytes``.
        """
        if self._oversize is not None:
            raise self._oversize
        if self._bom_pending is not None:
            self._bom_pending, data = strip_bom(self._bom_pending, data)
            if not data:
                return []
        if b"\n" not in data:
            if data:
                self._pending.append(data)
                self._pending_size += len(data)
                if self._pending_size > self._max_line_bytes:
                    raise self._too_long()
            return []
        if self._pending:
            data = b"".join((*self._pending, data))
            self._pending.clear()
            self._pending_size = 0
        lines = data.split(b"\n")
        tail = lines.pop()
        values: list[Any] = []
        for line in lines:
            if len(line) > self._max_line_bytes:
                self._oversize = self._too_long()
                break
            if line.strip():
                values.append(
                    decode_json(
                        line.decode("utf-8", "replace"), self._provider, _NOT_JSON
                    )
                )
        else:
            if tail:
                self._pending.append(tail)
                self._pending_size = len(tail)
                if self._pending_size > self._max_line_bytes:
                    self._oversize = self._too_long()
        if self._oversize is not None and not values:
            raise self._oversize
        return values

    def close(self) -> list[Any]:
        """End of body: decode a last line that has no newline.

        Raises:
            LlmError: ``STREAM_CLOSED`` when that line is not complete JSON;
                ``MALFORMED_RESPONSE`` after an oversize line.
        """
        if self._oversize is not None:
            raise self._oversize
        tail = b"".join(self._pending)
        self._pending.clear()
        self._pending_size = 0
        if self._bom_pending:
            tail = self._bom_pending + tail
            self._bom_pending = None
        if not tail.strip():
            return []
        text = tail.decode("utf-8", "replace")
        return [decode_json(text, self._provider, _CUT, ErrorCode.STREAM_CLOSED)]

    def _too_long(self) -> LlmError:
        return LlmError(
            f"{self._provider} NDJSON stream has a line longer than "
            f"{self._max_line_bytes} bytes",
            ErrorCode.MALFORMED_RESPONSE,
        )


def iter_ndjson(
    chunks: Iterable[bytes],
    *,
    provider: str = "NDJSON",
    max_line_bytes: int = MAX_LINE_BYTES,
) -> Iterator[Any]:
    """Yield each JSON value of an NDJSON body given as byte chunks.

    Raises:
        LlmError: ``MALFORMED_RESPONSE`` or ``STREAM_CLOSED`` (see the module).
    """
    decoder = NdjsonDecoder(provider=provider, max_line_bytes=max_line_bytes)
    for data in chunks:
        yield from decoder.feed(data)
    yield from decoder.close()
