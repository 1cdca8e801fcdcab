"""``FakeAdapter``: scripted chunks for tests of code that consumes streams.

Test the code that reads a stream (a UI, an agent loop, middleware) with a real
``LlmAdapter`` instead of mocking the library. Contracts callers may rely on:

- ``FakeAdapter(chunks)`` yields the given chunks, in order, for every call (a
  fresh iteration each time); ``FakeAdapter.from_cassette(cassette, factory)``
  replays a cassette once through the real adapter ``factory`` builds (as
  ``dsh_llm.testing.replay.replay_chunks`` does) and then yields those chunks
  without any I/O. The chunks are checked with the strict validator when the
  adapter is built, so a script that breaks the protocol fails at once
  (``INVARIANT``); pass ``strict=False`` to script a broken stream on purpose.
- ``raises`` makes the stream raise that ``LlmError`` after the chunks (a
  provider failure as the runtime sees it).
- The signal is honoured: before each chunk, and during ``delay_s`` (the pause
  before each chunk, a cancellable wait), an aborted ``options.signal`` ends
  the stream by raising ``LlmError`` ``"fake request aborted by caller"``
  (``ABORTED``), as a real adapter does.
- ``calls`` records every ``GenerateOptions`` received, in order.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dsh_llm.adapter import LlmAdapter
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import StreamChunk
from dsh_llm.testing.cassette import Cassette
from dsh_llm.testing.replay import AdapterFactory
from dsh_llm.testing.replay import replay_chunks
from dsh_llm.validator import assert_chunk_sequence

__all__ = ["FakeAdapter"]


class FakeAdapter(LlmAdapter):
    """An adapter that yields scripted chunks (see the module docstring).

    Args:
        chunks: The chunks each call yields.
        raises: Raised after the chunks, when given.
        delay_s: Seconds to wait before each chunk (cancellable by the signal).
        strict: Check the script against the strict rules at construction
            (``False`` skips the check).
    """

    def __init__(
        self,
        chunks: Iterable[StreamChunk],
        *,
        raises: LlmError | None = None,
        delay_s: float = 0.0,
        strict: bool = True,
    ) -> None:
        self.chunks: tuple[StreamChunk, ...] = tuple(chunks)
        """The scripted chunks."""
        self.raises = raises
        """The error raised after the chunks, if any."""
        self.delay_s = delay_s
        """The pause before each chunk."""
        self.calls: list[GenerateOptions] = []
        """Every request received, in order."""
        if strict and raises is None:
            assert_chunk_sequence(self.chunks, strict=True)

    @classmethod
    def from_cassette(
        cls,
        cassette: Cassette | str | Path,
        adapter_factory: AdapterFactory,
        **factory_options: Any,
    ) -> FakeAdapter:
        """A fake yielding what ``adapter_factory``'s adapter reads from
        ``cassette`` (replayed once, now). When the real adapter fails, every
        call raises that ``LlmError`` instead (a cassette of a 429, say)."""
        try:
            chunks = replay_chunks(cassette, adapter_factory, **factory_options)
        except LlmError as exc:
            if exc.code in (ErrorCode.INVARIANT, ErrorCode.INVALID_CASSETTE):
                raise
            return cls((), raises=exc)
        return cls(chunks)

    def stream(self, options: GenerateOptions) -> Iterator[StreamChunk]:
        """Yield the scripted chunks (see the module docstring)."""
        self.calls.append(options)
        return self._play(options)

    def _play(self, options: GenerateOptions) -> Iterator[StreamChunk]:
        signal = options.signal
        for chunk in self.chunks:
            if signal is not None and (
                signal.aborted or (self.delay_s > 0 and signal.wait(self.delay_s))
            ):
                raise LlmError("fake request aborted by caller", ErrorCode.ABORTED)
            if signal is None and self.delay_s > 0:
                time.sleep(self.delay_s)
            yield chunk
        if self.raises is not None:
            raise self.raises
