"""``otel_middleware`` with the SDK's in-memory exporter: a ``chat {model}``
span per call with the GenAI attributes, ended when the stream ends (exhausted,
closed early, aborted, failed), content only on opt-in."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from opentelemetry.trace import StatusCode

from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.observe.otel import otel_middleware
from dsh_llm.protocol import Finish
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TextDelta
from dsh_llm.routing import retrying
from dsh_llm.runtime import LlmRuntime
from dsh_llm.runtime import StreamNext
from dsh_llm.signal import AbortController
from dsh_llm.testing import LoopbackServer

from .replies import SECRET_ANSWER
from .replies import SECRET_PROMPT
from .replies import answer
from .replies import cut_after_text
from .replies import options
from .replies import slow_answer
from .replies import status


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    yield exporter
    exporter.shutdown()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider
    provider.shutdown()


def _only(exporter: InMemorySpanExporter) -> ReadableSpan:
    (span,) = exporter.get_finished_spans()
    return span


def _attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def test_a_call_gets_a_chat_span_with_the_genai_attributes(
    runtime: LlmRuntime,
    server: LoopbackServer,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    runtime.use(
        otel_middleware(tracer_provider=provider, provider_names={"local": "vllm"})
    )
    server.enqueue(answer())

    chunks = list(
        runtime.stream(options(temperature=0.5, max_tokens=100, stop=("END",)))
    )

    assert isinstance(chunks[-1], Finish)
    span = _only(exporter)
    assert span.name == "chat model-a"
    assert span.kind is SpanKind.CLIENT
    assert span.status.status_code is StatusCode.UNSET
    attributes = _attributes(span)
    ttfc = attributes.pop("gen_ai.response.time_to_first_chunk")
    assert isinstance(ttfc, float)
    assert ttfc > 0
    assert span.end_time is not None
    assert span.start_time is not None
    assert ttfc <= (span.end_time - span.start_time) / 1e9
    assert attributes == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "vllm",
        "gen_ai.request.model": "model-a",
        "gen_ai.request.temperature": 0.5,
        "gen_ai.request.max_tokens": 100,
        "gen_ai.request.stop_sequences": ("END",),
        # 6 uncached + 4 cached: the conventions count cached input in input.
        "gen_ai.usage.input_tokens": 10,
        "gen_ai.usage.output_tokens": 6,
        "gen_ai.usage.cache_read.input_tokens": 4,
        "gen_ai.usage.reasoning.output_tokens": 2,
        "gen_ai.response.finish_reasons": ("stop",),
        "dsh_llm.route": "local",
        "dsh_llm.attempt": 1,
        "dsh_llm.stream.ended": "finished",
    }


def test_the_span_ends_when_the_stream_ends_not_when_stream_returns(
    runtime: LlmRuntime,
    server: LoopbackServer,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    runtime.use(otel_middleware(tracer_provider=provider))
    server.enqueue(answer())

    stream = runtime.stream(options())
    first = next(stream)
    assert exporter.get_finished_spans() == ()
    rest = list(stream)

    assert [first, *rest][-1].type == "finish"
    assert len(exporter.get_finished_spans()) == 1


def test_closing_early_ends_the_span_without_an_error(
    runtime: LlmRuntime,
    server: LoopbackServer,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    runtime.use(otel_middleware(tracer_provider=provider))
    server.enqueue(slow_answer())
    stream = runtime.stream(options())
    for chunk in stream:
        if isinstance(chunk, TextDelta):
            break
    assert exporter.get_finished_spans() == ()
    stream.close()

    span = _only(exporter)
    attributes = _attributes(span)
    assert attributes["dsh_llm.stream.ended"] == "closed"
    assert "error.type" not in attributes
    assert "gen_ai.response.finish_reasons" not in attributes
    assert span.status.status_code is StatusCode.UNSET


def test_an_aborted_call_ends_the_span_with_aborted(
    runtime: LlmRuntime,
    server: LoopbackServer,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    runtime.use(otel_middleware(tracer_provider=provider))
    server.enqueue(slow_answer())
    controller = AbortController()
    chunks: list[StreamChunk] = []
    for chunk in runtime.stream(options(signal=controller.signal)):
        chunks.append(chunk)
        if isinstance(chunk, TextDelta):
            controller.abort()

    assert isinstance(chunks[-1], Finish)
    assert chunks[-1].reason.kind == "aborted"
    span = _only(exporter)
    attributes = _attributes(span)
    assert attributes["error.type"] == ErrorCode.ABORTED.value
    assert attributes["gen_ai.response.finish_reasons"] == ("aborted",)
    assert span.status.status_code is StatusCode.ERROR


@pytest.mark.parametrize(
    ("reply", "code"),
    [(status(503), ErrorCode.SERVER), (cut_after_text(), ErrorCode.TRANSPORT)],
)
def test_a_failed_call_sets_error_type_to_its_code(
    runtime: LlmRuntime,
    server: LoopbackServer,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    reply: Any,
    code: ErrorCode,
) -> None:
    runtime.use(otel_middleware(tracer_provider=provider))
    server.enqueue(reply)

    list(runtime.stream(options()))

    span = _only(exporter)
    assert _attributes(span)["error.type"] == code.value
    assert _attributes(span)["gen_ai.response.finish_reasons"] == ("error",)
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == code.value


def test_a_raised_error_ends_the_span_and_propagates(
    runtime: LlmRuntime, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    def broken(options: GenerateOptions, next_: StreamNext) -> Iterator[StreamChunk]:
        yield from ()
        raise LlmError("the middleware below failed", ErrorCode.INVARIANT)

    runtime.use(otel_middleware(tracer_provider=provider))
    runtime.use(broken)

    with pytest.raises(LlmError):
        list(runtime.stream(options()))

    span = _only(exporter)
    assert _attributes(span)["error.type"] == ErrorCode.INVARIANT.value
    assert _attributes(span)["dsh_llm.stream.ended"] == "raised"


def test_the_span_is_current_while_the_adapter_side_runs(
    runtime: LlmRuntime,
    server: LoopbackServer,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    seen: list[int] = []

    def look(options: GenerateOptions, next_: StreamNext) -> Iterator[StreamChunk]:
        for chunk in next_():
            seen.append(trace.get_current_span().get_span_context().span_id)
            yield chunk

    runtime.use(otel_middleware(tracer_provider=provider))
    runtime.use(look)
    server.enqueue(answer())

    list(runtime.stream(options()))

    span = _only(exporter)
    assert span.context is not None
    assert set(seen) == {span.context.span_id}
    assert trace.get_current_span().get_span_context().is_valid is False


def test_the_consumer_never_sees_the_span_and_closing_runs_inside_it(
    runtime: LlmRuntime,
    server: LoopbackServer,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    closed_in: list[int] = []

    def look(options: GenerateOptions, next_: StreamNext) -> Iterator[StreamChunk]:
        try:
            yield from next_()
        finally:
            closed_in.append(trace.get_current_span().get_span_context().span_id)

    runtime.use(otel_middleware(tracer_provider=provider))
    runtime.use(look)
    server.enqueue(answer())

    between: list[bool] = []
    stream = runtime.stream(options())
    for chunk in stream:
        between.append(trace.get_current_span().get_span_context().is_valid)
        if isinstance(chunk, TextDelta):
            break
    stream.close()

    span = _only(exporter)
    assert span.context is not None
    assert between
    assert not any(between)
    assert closed_in == [span.context.span_id]
    assert _attributes(span)["dsh_llm.stream.ended"] == "closed"


def test_nested_calls_nest_their_spans_and_a_stream_never_pulled_has_none(
    runtime: LlmRuntime,
    server: LoopbackServer,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    tracer = provider.get_tracer("test")
    runtime.use(otel_middleware(tracer_provider=provider))
    server.enqueue(answer())

    never = runtime.stream(options())
    with tracer.start_as_current_span("request handler") as parent:
        chunks = list(runtime.stream(options()))
    never.close()

    assert isinstance(chunks[-1], Finish)
    spans = {span.name: span for span in exporter.get_finished_spans()}
    assert sorted(spans) == ["chat model-a", "request handler"]
    child = spans["chat model-a"]
    assert child.parent is not None
    assert child.parent.span_id == parent.get_span_context().span_id


def test_content_is_recorded_only_on_opt_in(
    runtime: LlmRuntime,
    server: LoopbackServer,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    remove = runtime.use(otel_middleware(tracer_provider=provider))
    server.enqueue(answer())
    list(runtime.stream(options(system="be brief")))
    remove()
    runtime.use(otel_middleware(tracer_provider=provider, capture_content=True))
    server.enqueue(answer())
    list(runtime.stream(options(system="be brief")))

    plain, captured = exporter.get_finished_spans()
    assert SECRET_PROMPT not in repr(_attributes(plain))
    assert SECRET_ANSWER not in repr(_attributes(plain))
    attributes = _attributes(captured)
    assert json.loads(attributes["gen_ai.system_instructions"]) == [
        {"type": "text", "content": "be brief"}
    ]
    assert json.loads(attributes["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": SECRET_PROMPT}]}
    ]
    assert json.loads(attributes["gen_ai.output.messages"]) == [
        {
            "role": "assistant",
            "parts": [
                {"type": "reasoning", "content": "hmm"},
                {"type": "text", "content": SECRET_ANSWER},
            ],
            "finish_reason": "stop",
        }
    ]


def test_inside_retrying_each_attempt_is_a_span(
    runtime: LlmRuntime,
    server: LoopbackServer,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    runtime.use(
        retrying({"mode": "normal", "backoff": {"initialDelayMs": 1, "maxDelayMs": 2}})
    )
    runtime.use(otel_middleware(tracer_provider=provider))
    server.enqueue(status(429), answer())

    list(runtime.stream(options()))

    spans = exporter.get_finished_spans()
    assert [_attributes(s)["dsh_llm.attempt"] for s in spans] == [1, 2]
    assert _attributes(spans[0])["error.type"] == ErrorCode.RATE_LIMIT.value
    assert "error.type" not in _attributes(spans[1])


def test_the_span_ends_at_the_finish_even_if_the_consumer_never_closes(
    runtime: LlmRuntime,
    server: LoopbackServer,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    runtime.use(otel_middleware(tracer_provider=provider))
    server.enqueue(answer())
    stream = runtime.stream(options())

    while not isinstance(next(stream), Finish):
        pass

    assert _attributes(_only(exporter))["dsh_llm.stream.ended"] == "finished"
    stream.close()
    assert len(exporter.get_finished_spans()) == 1
