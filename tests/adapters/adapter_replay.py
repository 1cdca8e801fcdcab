"""What a consumer of an adapter's stream sees, as the ``.chunks.jsonl`` fixtures
record it (test helper shared by the Gemini and Ollama adapter tests): the
adapter's chunks, and for a raised ``LlmError`` the error finish the runtime
adds.

The read loop yields the usage reported so far right before it raises, even
while a block is open (billed tokens are never lost); the fixtures, written for
the translator alone, record that usage only when no block is open. ``consumed``
checks that such a usage chunk comes only right before the failure and is the
only usage chunk, then leaves it out of the sequence compared."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from dsh_llm.errors import LlmError
from dsh_llm.protocol import (
    BlockEnd,
    BlockStart,
    Finish,
    FinishReason,
    StreamChunk,
    UsageChunk,
)
from dsh_llm.serde import chunk_to_dict
from dsh_llm.validator import validate_stream

FRAMINGS = ("chunked", "close", "length")
"""Every body framing the loopback server offers."""
SPLITS: tuple[int | None, ...] = (None, 1, 7)
"""Whole bodies, then one write per byte, then per 7 bytes."""
SPLIT_IDS = ("whole", "1-byte", "7-byte")


def consumed(stream: Iterator[StreamChunk]) -> list[StreamChunk]:
    """``stream``'s chunks, ended by the error finish of an ``LlmError`` it
    raised, checked with ``validate_stream(strict=True)``."""
    out: list[StreamChunk] = []
    try:
        out.extend(stream)
    except LlmError as exc:
        if out and type(out[-1]) is UsageChunk and _open_blocks(out[:-1]):
            assert UsageChunk not in {type(c) for c in out[:-1]}, out
            out.pop()
        out.append(Finish(reason=FinishReason.error(exc.failure)))
    return list(validate_stream(out, strict=True))


def _open_blocks(chunks: Iterable[StreamChunk]) -> int:
    count = 0
    for chunk in chunks:
        if isinstance(chunk, BlockStart):
            count += 1
        elif isinstance(chunk, BlockEnd):
            count -= 1
    return count


def as_dicts(chunks: Iterable[StreamChunk]) -> list[dict[str, Any]]:
    """The chunks as their JSON Lines dictionaries."""
    return [chunk_to_dict(chunk) for chunk in chunks]
