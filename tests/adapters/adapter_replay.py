"""What a consumer of an adapter's stream sees, as the ``.chunks.jsonl`` fixtures
record it (test helper shared by the Gemini and Ollama adapter tests): the
adapter's chunks, and for a raised ``LlmError`` the error finish the runtime
adds (right after the usage the read loop yields before it raises, even while
a block is open: billed tokens are never lost)."""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Iterator
from typing import Any

from dsh_llm.errors import LlmError
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import StreamChunk
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
        out.append(Finish(reason=FinishReason.error(exc.failure)))
    return list(validate_stream(out, strict=True))


def as_dicts(chunks: Iterable[StreamChunk]) -> list[dict[str, Any]]:
    """The chunks as their JSON Lines dictionaries."""
    return [chunk_to_dict(chunk) for chunk in chunks]
