"""Newline-delimited JSON (NDJSON) bodies, decoded from bytes as they arrive.

Contracts callers may rely on:

- Lines are split on ``\\n`` in **bytes** (a trailing ``\\r`` is dropped), then
  decoded as UTF-8, so a multi-byte character or a line split across reads is
  never cut. Blank lines are skipped.
- ``NdjsonDecoder.feed`` returns the values of the lines a read completed;
  ``close`` parses a last line that has no newline.
- A complete line that is not JSON raises ``LlmError`` ``MALFORMED_RESPONSE``. A
  last line without newline that is not JSON is a truncated body: ``STREAM_CLOSED``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from dsh_llm.errors import ErrorCode, LlmError

__all__ = ["NdjsonDecoder", "iter_ndjson"]


class NdjsonDecoder:
    """Incremental NDJSON decoder.

    Args:
        provider: Display name used in error messages.
    """

    __slots__ = ("_buf", "_provider")

    def __init__(self, *, provider: str = "NDJSON") -> None:
        self._buf = b""
        self._provider = provider

    def feed(self, data: bytes) -> list[Any]:
        """Feed the next bytes; return the decoded values of completed lines.

        Raises:
            LlmError: ``MALFORMED_RESPONSE`` for a complete line that is not JSON.
        """
        if b"\n" not in data:
            self._buf += data
            return []
        lines = (self._buf + data).split(b"\n")
        self._buf = lines.pop()
        return [self._decode(line) for line in lines if line.strip()]

    def close(self) -> list[Any]:
        """End of body: decode a last line that has no newline.

        Raises:
            LlmError: ``STREAM_CLOSED`` when that line is not complete JSON.
        """
        tail, self._buf = self._buf, b""
        if not tail.strip():
            return []
        try:
            return [json.loads(tail.decode("utf-8", "replace"))]
        except (ValueError, RecursionError) as exc:
            raise LlmError(
                f"{self._provider} NDJSON stream ended inside an unterminated line",
                ErrorCode.STREAM_CLOSED,
                cause=exc,
            ) from exc

    def _decode(self, line: bytes) -> Any:
        text = line.decode("utf-8", "replace")
        try:
            return json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise LlmError(
                f"malformed NDJSON line from {self._provider}: {text[:120]!r}",
                ErrorCode.MALFORMED_RESPONSE,
                cause=exc,
            ) from exc


def iter_ndjson(chunks: Iterable[bytes], *, provider: str = "NDJSON") -> Iterator[Any]:
    """Yield each JSON value of an NDJSON body given as byte chunks.

    Raises:
        LlmError: ``MALFORMED_RESPONSE`` or ``STREAM_CLOSED`` (see the module).
    """
    decoder = NdjsonDecoder(provider=provider)
    for data in chunks:
        yield from decoder.feed(data)
    yield from decoder.close()
