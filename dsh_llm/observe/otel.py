"""``otel_middleware``: an OpenTelemetry GenAI client span per model call.

Needs the optional extra ``pip install 'dsh-llm[otel]'``; this is the only
module that imports OpenTelemetry, and nothing in the core imports it.
Contracts callers may rely on:

- One ``CLIENT`` span per call, named ``chat {model}``, with the GenAI
  semantic-convention attributes (``docs/observability.md`` lists them):
  ``gen_ai.operation.name``, ``gen_ai.provider.name``, ``gen_ai.request.*``,
  ``gen_ai.usage.*`` (input counts cached input too, as the conventions ask;
  cache and reasoning counts only when reported), ``gen_ai.response.finish_reasons``,
  ``gen_ai.response.time_to_first_chunk`` (seconds) and ``error.type`` (the
  failure's code).
- The span starts when the stream is first pulled and ends when the stream
  ends: exhausted, closed early by the consumer, aborted or failed; never
  when ``stream()`` returns. It is the current span while the adapter runs
  (each pull, and closing it), so HTTP instrumentation nests under it, and
  never while the consumer's own code runs between chunks.
- The stream stays one generator layer (``dsh_llm.observe.watch``): the span is
  made current by running each pull in a ``contextvars.Context`` that holds it
  (OpenTelemetry's default, contextvars-based runtime context), not by an
  attach and a detach around every chunk.
- An ``error``/``aborted`` finish or a raised exception sets ``error.type`` and
  the ERROR status (its description is the code, never a message). A stream
  closed before its finish is not an error: ``dsh_llm.stream.ended`` says
  ``closed``.
- Message content (``gen_ai.system_instructions``, ``gen_ai.input.messages``,
  ``gen_ai.output.messages``, JSON as the conventions shape them) is recorded
  only with ``capture_content=True``.
"""

from __future__ import annotations

import contextvars
import json
import time
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
from typing import Any
from typing import Final

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span
from opentelemetry.trace import SpanKind
from opentelemetry.trace import Status
from opentelemetry.trace import StatusCode
from opentelemetry.trace import Tracer

from dsh_llm._version import __version__
from dsh_llm.errors import LlmError
from dsh_llm.observe.watch import CallRecord
from dsh_llm.observe.watch import watch_stream
from dsh_llm.protocol import BlockEnd
from dsh_llm.protocol import ContentBlock
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import Message
from dsh_llm.protocol import ReasoningBlock
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.protocol import ToolResultBlock
from dsh_llm.routing import current_attempt
from dsh_llm.runtime import StreamMiddleware
from dsh_llm.runtime import StreamNext

__all__ = ["INSTRUMENTATION_NAME", "otel_middleware"]

INSTRUMENTATION_NAME: Final = "dsh_llm"
"""The instrumentation scope name of the tracer."""
OPERATION: Final = "chat"
"""``gen_ai.operation.name`` of every span."""


def _request_attributes(
    options: GenerateOptions, provider_name: str, attempt: int
) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": OPERATION,
        "gen_ai.provider.name": provider_name,
        "gen_ai.request.model": options.model,
        "dsh_llm.route": options.provider,
        "dsh_llm.attempt": attempt,
    }
    if options.temperature is not None:
        attributes["gen_ai.request.temperature"] = options.temperature
    if options.max_tokens is not None:
        attributes["gen_ai.request.max_tokens"] = options.max_tokens
    if options.stop is not None:
        attributes["gen_ai.request.stop_sequences"] = list(options.stop)
    if options.session_id is not None:
        attributes["gen_ai.conversation.id"] = options.session_id
    return attributes


def _usage_attributes(record: CallRecord) -> dict[str, Any]:
    usage = record.usage
    if usage is None:
        return {}
    attributes: dict[str, Any] = {}
    if usage.input_tokens is not None:
        # The conventions count cached input inside input_tokens; ours are disjoint.
        attributes["gen_ai.usage.input_tokens"] = (
            usage.input_tokens
            + (usage.cache_read_tokens or 0)
            + (usage.cache_write_tokens or 0)
        )
    if usage.output_tokens is not None:
        attributes["gen_ai.usage.output_tokens"] = usage.output_tokens
    if usage.cache_read_tokens is not None:
        attributes["gen_ai.usage.cache_read.input_tokens"] = usage.cache_read_tokens
    if usage.cache_write_tokens is not None:
        attributes["gen_ai.usage.cache_creation.input_tokens"] = (
            usage.cache_write_tokens
        )
    if usage.reasoning_tokens is not None:
        attributes["gen_ai.usage.reasoning.output_tokens"] = usage.reasoning_tokens
    return attributes


def _error_type(record: CallRecord) -> str | None:
    if record.finish is not None and record.finish.failure is not None:
        return record.finish.failure.code
    error = record.error
    if error is None:
        return None
    if isinstance(error, LlmError):
        return error.code
    cls = type(error)
    return f"{cls.__module__}.{cls.__qualname__}"


def _part(block: ContentBlock) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"type": "text", "content": block.text}
    if isinstance(block, ReasoningBlock):
        return {"type": "reasoning", "content": block.text}
    if isinstance(block, ToolCallBlock):
        return {
            "type": "tool_call",
            "id": block.id,
            "name": block.name,
            "arguments": block.arguments,
        }
    if isinstance(block, ToolResultBlock):
        return {
            "type": "tool_call_response",
            "id": block.tool_call_id,
            "response": [_part(inner) for inner in block.content],
        }
    return {"type": block.type}


def _messages(messages: Iterable[Message]) -> str:
    return json.dumps(
        [
            {"role": m.role, "parts": [_part(block) for block in m.content]}
            for m in messages
        ],
        ensure_ascii=False,
    )


class _TracedCall:
    """One call's span: started at the first pull (``enter``), ended with the
    stream (``done``)."""

    __slots__ = (
        "_attributes",
        "_capture",
        "_name",
        "_options",
        "_tracer",
        "blocks",
        "span",
    )

    def __init__(
        self,
        tracer: Tracer,
        options: GenerateOptions,
        attributes: dict[str, Any],
        capture_content: bool,
    ) -> None:
        self._tracer = tracer
        self._options = options
        self._name = f"{OPERATION} {options.model}"
        self._attributes = attributes
        self._capture = capture_content
        self.span: Span | None = None
        self.blocks: list[ContentBlock] = []

    def enter(self) -> contextvars.Context:
        """Start the span; the context the downstream stream runs in."""
        span = self._tracer.start_span(
            self._name, kind=SpanKind.CLIENT, attributes=self._attributes
        )
        self.span = span
        options = self._options
        if self._capture:
            if options.system is not None:
                span.set_attribute(
                    "gen_ai.system_instructions",
                    json.dumps(
                        [{"type": "text", "content": options.system}],
                        ensure_ascii=False,
                    ),
                )
            span.set_attribute("gen_ai.input.messages", _messages(options.messages))
        context = contextvars.copy_context()
        # Attached in the copy only: the copy is dropped with the stream, so
        # there is nothing to detach, and the consumer's context never sees it.
        context.run(otel_context.attach, trace.set_span_in_context(span))
        return context

    def keep_block(self, chunk: StreamChunk) -> None:
        if isinstance(chunk, BlockEnd):
            self.blocks.append(chunk.block)

    def done(self, record: CallRecord) -> None:
        span = self.span
        assert span is not None  # done comes after enter
        try:
            span.set_attributes(_usage_attributes(record))
            span.set_attribute("dsh_llm.stream.ended", record.ended)
            if record.time_to_first_chunk_s is not None:
                span.set_attribute(
                    "gen_ai.response.time_to_first_chunk",
                    record.time_to_first_chunk_s,
                )
            if record.finish is not None:
                span.set_attribute(
                    "gen_ai.response.finish_reasons", [record.finish.kind]
                )
            if self._capture:
                output: dict[str, Any] = {
                    "role": "assistant",
                    "parts": [_part(block) for block in self.blocks],
                }
                if record.finish is not None:
                    output["finish_reason"] = record.finish.kind
                span.set_attribute(
                    "gen_ai.output.messages", json.dumps([output], ensure_ascii=False)
                )
            error_type = _error_type(record)
            if error_type is not None:
                span.set_attribute("error.type", error_type)
                span.set_status(Status(StatusCode.ERROR, error_type))
        finally:
            span.end()


def otel_middleware(
    *,
    tracer: Tracer | None = None,
    tracer_provider: trace.TracerProvider | None = None,
    provider_names: Mapping[str, str] | None = None,
    capture_content: bool = False,
    clock: Callable[[], float] = time.perf_counter,
) -> StreamMiddleware:
    """Middleware giving every call a GenAI span (see the module docstring).

    Args:
        tracer: The tracer to use (default: ``INSTRUMENTATION_NAME``'s tracer
            from ``tracer_provider``, or the global provider).
        tracer_provider: Where the default tracer comes from.
        provider_names: Route to ``gen_ai.provider.name`` (``{"deepseek-official":
            "deepseek"}``); a route not listed is named by itself.
        capture_content: Record the messages and the answer (opt-in: they may
            be private).
        clock: Monotonic seconds, for the time to first chunk.
    """
    chosen = tracer or trace.get_tracer(
        INSTRUMENTATION_NAME, __version__, tracer_provider=tracer_provider
    )
    names = dict(provider_names or {})

    def middleware(
        options: GenerateOptions, next_: StreamNext
    ) -> Iterable[StreamChunk]:
        attempt = current_attempt()
        provider_name = names.get(options.provider, options.provider)
        call = _TracedCall(
            chosen,
            options,
            _request_attributes(options, provider_name, attempt),
            capture_content,
        )
        return watch_stream(
            options,
            next_(),
            call.done,
            attempt=attempt,
            on_chunk=call.keep_block if capture_content else None,
            clock=clock,
            enter=call.enter,
        )

    return middleware
