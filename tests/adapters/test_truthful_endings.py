"""Truthful endings over real loopback servers (issue 13): a cut answer is never
a success whatever the framing, an ``event: error`` frame is an in-stream
failure, and the usage billed before a failure reaches the runtime's consumer
right before its error finish."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from dsh_llm.adapters.openai_compat import OpenAICompatAdapter
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import Finish
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol import UsageChunk
from dsh_llm.protocol import create_user_message
from dsh_llm.runtime import LlmRuntime
from dsh_llm.testing import Cut
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply
from dsh_llm.testing import sse_event
from dsh_llm.validator import validate_stream

FRAMINGS = pytest.mark.parametrize("framing", ["chunked", "close", "length"])


def _text(text: str) -> dict[str, Any]:
    choice = {"index": 0, "delta": {"content": text}, "finish_reason": None}
    return {"choices": [choice]}


def _usage(prompt: int, completion: int) -> dict[str, Any]:
    return {
        "choices": [],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion},
    }


def _options() -> GenerateOptions:
    return GenerateOptions(
        provider="local", model="m", messages=(create_user_message("hi"),)
    )


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:
        yield srv
        assert srv.wait_until_idle(), "a connection was left open"


@pytest.fixture
def adapter(server: LoopbackServer) -> Iterator[OpenAICompatAdapter]:
    with OpenAICompatAdapter(f"{server.url}/v1", stream_idle_timeout_ms=2000) as a:
        yield a


def _adapter_run(adapter: OpenAICompatAdapter) -> tuple[list[StreamChunk], Any]:
    chunks: list[StreamChunk] = []
    try:
        for chunk in validate_stream(adapter.stream(_options()), strict=True):
            chunks.append(chunk)
    except LlmError as exc:
        return chunks, exc
    return chunks, None


def _runtime_run(adapter: OpenAICompatAdapter) -> list[StreamChunk]:
    runtime = LlmRuntime()
    runtime.register_adapter(["local"], adapter)
    return list(validate_stream(runtime.stream(_options()), strict=True))


@pytest.mark.parametrize("framing", ["chunked", "close"])
def test_a_cut_mid_body_gets_the_same_code_whatever_the_framing(
    server, adapter, framing
):
    # A clean FIN: for a chunked body, before its zero-size chunk.
    server.enqueue(Reply(body=(sse_event(_text("Once upon")), Cut()), framing=framing))
    chunks, error = _adapter_run(adapter)
    assert isinstance(error, LlmError)
    assert error.code == ErrorCode.STREAM_CLOSED
    assert not any(isinstance(c, Finish) for c in chunks)


@FRAMINGS
def test_done_without_any_finish_reason_is_a_cut_whatever_the_framing(
    server, adapter, framing
):
    body = (sse_event(_text("Once upon a")), b"data: [DONE]\n\n")
    server.enqueue(Reply(body=body, framing=framing))
    chunks, error = _adapter_run(adapter)
    assert isinstance(error, LlmError)
    assert error.code == ErrorCode.STREAM_CLOSED
    # The cut text block stays open: raised, never a finish of the adapter's.
    assert [c.type for c in chunks] == ["block-start", "text-delta"]


@pytest.mark.parametrize("done", [True, False], ids=["then-done", "then-eof"])
@pytest.mark.parametrize(
    "data",
    [
        b'{"message":"Overloaded","type":"overloaded_error"}',
        b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
    ],
    ids=["flat", "nested"],
)
def test_an_event_error_frame_is_an_in_stream_failure(server, adapter, data, done):
    body = (
        sse_event(_text("partial")),
        b"event: error\ndata: " + data + b"\n\n",
        *((b"data: [DONE]\n\n",) if done else ()),
    )
    server.enqueue(Reply(body=body))
    chunks, error = _adapter_run(adapter)
    assert isinstance(error, LlmError)
    assert not any(isinstance(c, Finish) for c in chunks)
    assert error.message == "Overloaded"
    # Overloaded is a server-side failure: the default policy retries it.
    assert error.code == ErrorCode.SERVER


def test_an_event_error_frame_with_plain_text_keeps_its_message(server, adapter):
    server.enqueue(Reply(body=(b"event: error\ndata: upstream went away\n\n",)))
    chunks, error = _adapter_run(adapter)
    assert chunks == []
    assert isinstance(error, LlmError)
    assert error.message == "upstream went away"
    assert error.code == ErrorCode.SERVER


@pytest.mark.parametrize("framing", ["chunked", "close"])
def test_the_runtime_passes_usage_billed_before_a_cut_before_its_error_finish(
    server, adapter, framing
):
    body = (sse_event(_text("partial")), sse_event(_usage(100, 50)), Cut())
    server.enqueue(Reply(body=body, framing=framing))
    chunks = _runtime_run(adapter)
    usage, end = chunks[-2:]
    assert usage == UsageChunk(
        usage=TokenUsage(input_tokens=100, output_tokens=50, cache_read_tokens=None)
    )
    assert isinstance(end, Finish)
    assert end.reason.kind == "error"
    assert end.reason.failure is not None
    assert end.reason.failure.code == ErrorCode.STREAM_CLOSED


def test_the_runtime_passes_usage_billed_before_an_in_stream_error(server, adapter):
    body = (
        sse_event(_text("partial")),
        sse_event(_usage(12, 4)),
        sse_event({"error": {"message": "boom", "type": "server_error"}}),
        b"data: [DONE]\n\n",
    )
    server.enqueue(Reply(body=body))
    chunks = _runtime_run(adapter)
    assert chunks[-2] == UsageChunk(
        usage=TokenUsage(input_tokens=12, output_tokens=4, cache_read_tokens=None)
    )
    end = chunks[-1]
    assert isinstance(end, Finish)
    assert end.reason.failure is not None
    assert end.reason.failure.message == "boom"


def test_counts_never_reported_stay_unknown_before_the_error_finish(server, adapter):
    body = (
        sse_event(_text("partial")),
        sse_event({"choices": [], "usage": {"prompt_tokens": 8}}),
        Cut(),
    )
    server.enqueue(Reply(body=body))
    chunks = _runtime_run(adapter)
    usage = chunks[-2]
    assert isinstance(usage, UsageChunk)
    assert usage.usage.input_tokens == 8
    assert usage.usage.output_tokens is None
