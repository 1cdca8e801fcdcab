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
- ``enter()``, when given, runs once at the first pull, before the clock
  starts; a ``contextvars.Context`` it returns is the one the source runs in:
  every pull and its closing go through ``Context.run``, so the source sees
  what ``enter`` set (a span as the current one) and the consumer never does.
- What ``on_end`` raises propagates (an observer is the caller's code).
- It is one generator layer, with no per-chunk work but its bookkeeping: it sits
  on the per-token path of every observed call.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable
from collections.abc import Generator
from collections.abc import Iterable
from collections.abc import Iterator
from typing import Final
from typing import Literal

import attrs

from dsh_llm.errors import normalize_llm_failure
from dsh_llm.protocol import BlockEnd
from dsh_llm.protocol import BlockStart
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import ReasoningDelta
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TextDelta
from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol import ToolCallDelta
from dsh_llm.protocol import UsageChunk

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


_PLAIN: Final = frozenset(
    {BlockStart, TextDelta, ReasoningDelta, ToolCallDelta, BlockEnd}
)
"""Chunks that change nothing in the record: one set lookup passes them."""


def watch_stream(
    options: GenerateOptions,
    chunks: Iterable[StreamChunk],
    on_end: Callable[[CallRecord], object],
    *,
    attempt: int = 1,
    on_chunk: Callable[[StreamChunk], object] | None = None,
    clock: Callable[[], float] = time.perf_counter,
    enter: Callable[[], contextvars.Context | None] | None = None,
) -> Generator[StreamChunk, None, None]:
    """Yield ``chunks`` and call ``on_end`` once with the call's ``CallRecord``
    (see the module docstring for ``enter``)."""
    try:
        context = None if enter is None else enter()
    except BaseException:
        _close(iter(chunks), None)  # nothing will pull the source: release it
        raise
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

    iterator: Iterator[StreamChunk] = iter(chunks)
    pull = iterator.__next__
    run = None if context is None else context.run
    try:
        while True:
            try:
                chunk = pull() if run is None else run(pull)
            except StopIteration:
                break
            if first is None:
                first = clock() - started
            if on_chunk is not None:
                on_chunk(chunk)
            if chunk.__class__ in _PLAIN and finish is None:
                yield chunk
                continue
            if isinstance(chunk, UsageChunk):
                usage = chunk.usage
            elif isinstance(chunk, Finish):
                finish = chunk.reason
            if finish is not None:
                # The finish is terminal: report before handing it over, so a
                # consumer that stops there without closing still ends the call.
                report("finished")
            yield chunk
    except GeneratorExit:
        try:
            _close(iterator, context)
        finally:
            report("closed")
        raise
    except BaseException as exc:
        try:
            _close(iterator, context)  # an observer raised; a failed source is closed
        finally:
            report("raised", exc)
        raise
    report("finished")


def _close(
    iterator: Iterator[StreamChunk], context: contextvars.Context | None
) -> None:
    close = getattr(iterator, "close", None)
    if not callable(close):
        return
    if context is None:
        close()
    else:
        context.run(close)
