"""``logging_middleware``: one INFO line per model call.

Contracts callers may rely on:

- One record per call on the logger (default ``dsh_llm.observe``), at INFO
  for a call that finished without failure and at WARNING for an ``error`` or
  ``aborted`` finish or a raised exception; written when the stream ends
  (exhausted, closed early, failed), never when ``stream()`` returns.
- The line names the route, model, attempt (``dsh_llm.routing.current_attempt``),
  time to first chunk and duration in ms, the usage (``-`` for a count not
  reported) and ``finish=<kind>`` or ``error=<code>``; a closed-early stream
  says ``finish=closed``. The same facts are on the record as
  ``record.llm_call`` (a ``dsh_llm.observe.watch.CallRecord``) for structured
  handlers.
- No API key (the middleware never sees one) and no message content, unless
  ``include_content=True``: then the answer's text, cut to
  ``max_content_chars``, is appended as ``content=<repr>``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from collections.abc import Iterable

from dsh_llm.observe.watch import CallRecord
from dsh_llm.observe.watch import watch_stream
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TextDelta
from dsh_llm.protocol import TokenUsage
from dsh_llm.routing import current_attempt
from dsh_llm.runtime import StreamMiddleware
from dsh_llm.runtime import StreamNext

__all__ = ["DEFAULT_LOGGER", "format_call", "format_token_usage", "logging_middleware"]

DEFAULT_LOGGER = "dsh_llm.observe"
"""The logger the middleware writes to unless told otherwise."""


def _count(value: int | None) -> str:
    return "-" if value is None else str(value)


def format_token_usage(usage: TokenUsage | None) -> str:
    """``in=3 out=1 cache_read=- cache_write=- reasoning=-`` (``-``: not
    reported); ``none`` when no usage came."""
    if usage is None:
        return "none"
    return (
        f"in={_count(usage.input_tokens)} out={_count(usage.output_tokens)} "
        f"cache_read={_count(usage.cache_read_tokens)} "
        f"cache_write={_count(usage.cache_write_tokens)} "
        f"reasoning={_count(usage.reasoning_tokens)}"
    )


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.1f}"


def format_call(record: CallRecord) -> str:
    """The line ``logging_middleware`` writes for ``record`` (without content)."""
    code = record.error_code
    if code is not None:
        outcome = f"error={code}"
    elif record.finish is not None:
        outcome = f"finish={record.finish.kind}"
    else:
        outcome = "finish=closed" if record.ended == "closed" else "finish=none"
    return (
        f'llm call route="{record.provider}" model="{record.model}" '
        f"attempt={record.attempt} ttfc_ms={_ms(record.time_to_first_chunk_s)} "
        f"duration_ms={_ms(record.duration_s)} "
        f"usage=[{format_token_usage(record.usage)}] {outcome}"
    )


def logging_middleware(
    logger: logging.Logger | str = DEFAULT_LOGGER,
    *,
    include_content: bool = False,
    max_content_chars: int = 200,
    clock: Callable[[], float] = time.perf_counter,
) -> StreamMiddleware:
    """Middleware logging one line per call (see the module docstring).

    Args:
        logger: The logger or its name.
        include_content: Append the answer's text (opt-in: it may be private).
        max_content_chars: The most characters of text appended.
        clock: Monotonic seconds, for the timings.
    """
    target = logging.getLogger(logger) if isinstance(logger, str) else logger
    if max_content_chars < 0:
        raise ValueError("max_content_chars must not be negative")

    def middleware(
        options: GenerateOptions, next_: StreamNext
    ) -> Iterable[StreamChunk]:
        attempt = current_attempt()
        pieces: list[str] = []
        size = 0

        def keep_text(chunk: StreamChunk) -> None:
            nonlocal size
            if isinstance(chunk, TextDelta) and size < max_content_chars:
                piece = chunk.text[: max_content_chars - size]
                pieces.append(piece)
                size += len(piece)

        def done(record: CallRecord) -> None:
            failed = record.error_code is not None
            level = logging.WARNING if failed else logging.INFO
            if not target.isEnabledFor(level):
                return
            line = format_call(record)
            if include_content:
                line += f" content={''.join(pieces)!r}"
            target.log(level, "%s", line, extra={"llm_call": record})

        return watch_stream(
            options,
            next_(),
            done,
            attempt=attempt,
            on_chunk=keep_text if include_content else None,
            clock=clock,
        )

    return middleware
