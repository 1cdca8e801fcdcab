"""``watch_stream``: pass a stream through and report how the call went.

Contracts callers may rely on:

- Chunks pass unchanged and in order; nothing is buffered.
- ``on_end(record)`` runs exactly once, when the stream ends however it ends:
  at its finish, right before the finish is handed over (``ended="finished"``;
  also at the end of a stream without a finish), when the consumer closes it
  before the finish (``"closed"``, after the source was closed), or when it
  raises (``"raised"``; the exception propagates after ``on_end``). A stream
  never iterated reports nothing.
- Times come from ``clock`` (seconds, monotonic): ``time_to_first_chunk_s``
  from the first pull to the first chunk of any type, ``duration_s`` from the
  first pull to the end.
- The record holds the call's facts (route, model, usage, finish, error code),
  never message content; ``on_chunk`` sees each chunk for callers that want
  content.
- What ``on_end`` raises propagates (an observer is the caller's code).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterable
from typing import Literal

import attrs

from dsh_llm.errors import normalize_llm_failure
from dsh_llm.protocol import (
    Finish,
    FinishReason,
    GenerateOptions,
    StreamChunk,
    TokenUsage,
    UsageChunk,
)

__all__ = ["CallRecord", "Ended", "watch_stream"]

Ended = Literal["finished", "closed", "raised"]
"""How a watched stream ended."""


@attrs.frozen(kw_only=True)
class CallRecord:
    """One observed call."""

    provider: str
    """The route called."""
    model: str
    """The model asked for."""
    attempt: int
    """``dsh_llm.routing.current_attempt()`` when the call started."""
    time_to_first_chunk_s: float | None
    """Seconds to the first chunk, ``None`` when none came."""
    duration_s: float
    """Seconds from the first pull to the end."""
    usage: TokenUsage | None
    """The usage chunk's usage, ``None`` when none came."""
    finish: FinishReason | None
    """The finish reason, ``None`` when no finish came."""
    ended: Ended
    """How the stream ended."""
    error: BaseException | None = attrs.field(default=None, eq=False)
    """What the stream raised, when ``ended == "raised"``."""

    @property
    def error_code(self) -> str | None:
        """The failure's code: that of an ``error``/``aborted`` finish, of a raised
        ``LlmError`` (``UNKNOWN`` for another exception), else ``None``."""
        if self.finish is not None and self.finish.failure is not None:
            return self.finish.failure.code
        if self.error is not None:
            return normalize_llm_failure(self.error).code
        return None


def watch_stream(
    options: GenerateOptions,
    chunks: Iterable[StreamChunk],
    on_end: Callable[[CallRecord], object],
    *,
    attempt: int = 1,
    on_chunk: Callable[[StreamChunk], object] | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> Generator[StreamChunk, None, None]:
    """Yield ``chunks`` and call ``on_end`` once with the call's ``CallRecord``."""
    started = clock()
    first: float | None = None
    usage: TokenUsage | None = None
    finish: FinishReason | None = None
    reported = False

    def report(ended: Ended, error: BaseException | None = None) -> None:
        nonlocal reported
        if reported:
            return
        reported = True
        on_end(
            CallRecord(
                provider=options.provider,
                model=options.model,
                attempt=attempt,
                time_to_first_chunk_s=first,
                duration_s=clock() - started,
                usage=usage,
                finish=finish,
                ended=ended,
                error=error,
            )
        )

    iterator = iter(chunks)
    try:
        for chunk in iterator:
            if first is None:
                first = clock() - started
            if isinstance(chunk, UsageChunk):
                usage = chunk.usage
            elif isinstance(chunk, Finish):
                finish = chunk.reason
            if on_chunk is not None:
                on_chunk(chunk)
            if finish is not None:
                # The finish is terminal: report before handing it over, so a
                # consumer that stops there without closing still ends the call.
                report("finished")
            yield chunk
    except GeneratorExit:
        try:
            _close(iterator)
        finally:
            report("closed")
        raise
    except BaseException as exc:
        try:
            _close(iterator)  # an observer raised; a failed source is closed already
        finally:
            report("raised", exc)
        raise
    report("finished")


def _close(iterator: Iterable[StreamChunk]) -> None:
    close = getattr(iterator, "close", None)
    if callable(close):
        close()
