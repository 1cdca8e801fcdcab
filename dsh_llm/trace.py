"""Tracing: print a chunk stream line by line while checking its order.

``trace_stream(label, chunks)`` is a lazy pass-through generator for debugging an
adapter or a recorded stream. Contracts callers may rely on:

- Each chunk is written as ``[label] #n <json>`` before it is checked and yielded,
  so the offending chunk of a violation is the last line printed. ``n`` counts
  from 1 and matches the ``chunk #n`` positions of ``dsh_llm.validator``
  messages; ``<json>`` is ``dsh_llm.serde.chunk_to_json(chunk)`` (the TypeScript
  JSON shape). Each line is flushed as it is written.
- The stream is validated (strictly by default); at the end a closing line
  ``[label] total chunks N, order check passed`` is written, or the violation is
  raised as ``LlmError`` with code ``INVARIANT`` and no closing line.
- Exceptions raised by the source propagate unchanged, without a closing line.
"""

from __future__ import annotations

import sys
from collections.abc import Generator, Iterable, Iterator
from typing import IO

from dsh_llm.protocol import StreamChunk
from dsh_llm.serde import chunk_to_json
from dsh_llm.validator import validate_stream

__all__ = ["trace_stream"]


def _render(chunk: object) -> str:
    try:
        return chunk_to_json(chunk)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        # Not a chunk: print what it is; the validator names the violation next.
        return repr(chunk)


def trace_stream(
    label: str,
    chunks: Iterable[StreamChunk],
    *,
    out: IO[str] | None = None,
    strict: bool = True,
) -> Generator[StreamChunk, None, None]:
    """Yield ``chunks`` unchanged, printing each one and checking the order.

    Args:
        label: Printed in brackets at the start of every line, e.g. a provider.
        chunks: The stream to trace.
        out: Where to write; ``sys.stderr`` (looked up when tracing starts) when
            ``None``.
        strict: ``False`` checks the lenient TypeScript rules instead; the closing
            line then ends with ``(lenient)``.

    Yields:
        Each chunk, after its line was written.

    Raises:
        LlmError: code ``INVARIANT`` at the first violation.
    """
    stream = sys.stderr if out is None else out
    total = 0

    def printed() -> Iterator[StreamChunk]:
        nonlocal total
        for chunk in chunks:
            total += 1
            stream.write(f"[{label}] #{total} {_render(chunk)}\n")
            stream.flush()
            yield chunk

    yield from validate_stream(printed(), strict=strict)
    mode = "" if strict else " (lenient)"
    stream.write(f"[{label}] total chunks {total}, order check passed{mode}\n")
    stream.flush()
