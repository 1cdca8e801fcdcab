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
- The source is closed as ``validate_stream`` closes it: whenever tracing stops
  before the source is exhausted (a violation, ``close()``, a source exception).
- A ``chunks`` that is not iterable raises ``TypeError`` at the call.
"""

from __future__ import annotations

import sys
from collections.abc import Generator
from collections.abc import Iterable
from collections.abc import Iterator
from typing import IO

from dsh_llm.protocol import StreamChunk
from dsh_llm.serde import chunk_to_json
from dsh_llm.sources import chunk_source
from dsh_llm.sources import close_source
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
    stream: Iterable[StreamChunk],
    *,
    out: IO[str] | None = None,
    strict: bool = True,
) -> Generator[StreamChunk, None, None]:
    """Yield the chunks of ``stream`` unchanged, printing each one and checking
    the order.

    Args:
        label: Printed in brackets at the start of every line, e.g. a provider.
        stream: The chunks to trace (an adapter's stream, a list...).
        out: Where to write; ``sys.stderr`` (looked up when tracing starts) when
            ``None``.
        strict: ``False`` checks the lenient TypeScript rules instead; the closing
            line then ends with ``(lenient)``.

    Yields:
        Each chunk, after its line was written.

    Raises:
        LlmError: code ``INVARIANT`` at the first violation.
        TypeError: at the call, when ``stream`` is not iterable.
    """
    return _traced(label, chunk_source(stream, "trace_stream", "stream"), out, strict)


def _traced(
    label: str, source: Iterator[StreamChunk], out: IO[str] | None, strict: bool
) -> Generator[StreamChunk, None, None]:
    printed = _Printed(label, source, sys.stderr if out is None else out)
    yield from validate_stream(printed, strict=strict)
    mode = "" if strict else " (lenient)"
    printed.write(f"[{label}] total chunks {printed.total}, order check passed{mode}")


class _Printed:
    """The source, each chunk printed as it is taken; ``close()`` closes the
    source, so ``validate_stream`` closing this closes the source too."""

    __slots__ = ("_label", "_out", "_source", "total")

    def __init__(self, label: str, source: Iterator[StreamChunk], out: IO[str]) -> None:
        self._label = label
        self._source = source
        self._out = out
        self.total = 0

    def __iter__(self) -> Iterator[StreamChunk]:
        return self

    def __next__(self) -> StreamChunk:
        chunk = next(self._source)
        self.total += 1
        self.write(f"[{self._label}] #{self.total} {_render(chunk)}")
        return chunk

    def write(self, line: str) -> None:
        self._out.write(line + "\n")
        self._out.flush()

    def close(self) -> None:
        close_source(self._source)
