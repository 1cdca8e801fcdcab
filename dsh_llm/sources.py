"""Chunk sources: taking the iterable a consumer reads chunks from, and releasing it.

Every consumer of a stream that may stop before the end (the validator, the
tracer, the assembler, the runtime's adapter stage, the async bridge) takes its
source and releases it the same way. Contracts callers may rely on:

- ``chunk_source(chunks, caller, argument="chunks")`` is ``iter(chunks)``; an
  object that is not iterable at all raises ``TypeError`` naming ``caller``'s
  ``argument``,
  while a ``TypeError`` raised by the iterable's own ``__iter__`` propagates.
- ``close_source(source)`` calls ``source.close()`` when it has a callable one (a
  generator, an adapter's stream, a response) and does nothing otherwise; what
  ``close()`` raises propagates.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Iterator
from typing import TypeVar

__all__ = ["chunk_source", "close_source"]

T = TypeVar("T")


def chunk_source(
    chunks: Iterable[T], caller: str, argument: str = "chunks"
) -> Iterator[T]:
    """``iter(chunks)``, or a ``TypeError`` naming ``caller``'s ``argument``.

    Raises:
        TypeError: when ``chunks`` is not iterable.
    """
    try:
        return iter(chunks)
    except TypeError:
        if hasattr(type(chunks), "__iter__"):
            raise  # raised by the iterable's own __iter__: not a misuse of ours
        raise TypeError(
            f"{caller}() expects {argument} to be an iterable of stream chunks (a "
            f"list, a generator, an adapter's stream), got {type(chunks).__name__}"
        ) from None


def close_source(source: object) -> None:
    """Call ``source.close()`` when it has one (generators and responses do)."""
    close = getattr(source, "close", None)
    if callable(close):
        close()
