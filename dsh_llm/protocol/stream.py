"""``ChunkStream``: a call's chunks, with the options that asked for them.

``WireAdapter.stream`` and ``LlmRuntime.stream`` return one, so whoever
assembles the stream (``dsh_llm.collect``) knows which route and model answered
and can keep the reply's replay state for the next turn.

- Iterating it iterates the call's own generator (``iter(stream)`` gives that
  generator: no extra hop per chunk); ``next(stream)`` works too.
- ``close()`` closes the call (its response, its adapter).
- ``options`` are the request as the caller gave it.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator

from dsh_llm.protocol.chunks import StreamChunk
from dsh_llm.protocol.request import GenerateOptions


class ChunkStream(Iterator[StreamChunk]):
    """A call's chunks and its ``options`` (see the module docstring)."""

    __slots__ = ("_chunks", "options")

    def __init__(
        self, chunks: Generator[StreamChunk, None, None], options: GenerateOptions
    ) -> None:
        self._chunks = chunks
        self.options = options
        """The request the chunks answer."""

    def __iter__(self) -> Iterator[StreamChunk]:
        return self._chunks

    def __next__(self) -> StreamChunk:
        return next(self._chunks)

    def close(self) -> None:
        """Stop the call: its response and iterators are closed."""
        self._chunks.close()

    def __repr__(self) -> str:
        return (
            f"<ChunkStream provider={self.options.provider!r} "
            f"model={self.options.model!r}>"
        )
