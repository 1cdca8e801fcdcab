"""The transport's read loop (dsh_llm.transport.read_loop) over real loopback
servers: usage kept before a failure, empty events as keep-alives, and secrets
redacted from what a translator reports."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests

from dsh_llm.adapters.openai_compat import OpenAICompatAdapter
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import LlmFailure
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol import UsageChunk
from dsh_llm.protocol import create_user_message
from dsh_llm.signal import AbortController
from dsh_llm.testing import Cut
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Pause
from dsh_llm.testing import Reply
from dsh_llm.testing import Stall
from dsh_llm.testing import sse_event
from dsh_llm.transport.call import StreamingCall
from dsh_llm.transport.session import BearerAuth
from dsh_llm.transport.session import create_session

KEY = "sk_identifier_like_secret_0123456789"


def _text(text: str) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"content": text}}]}


def _usage(prompt: int, completion: int) -> dict[str, Any]:
    return {
        "choices": [],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion},
    }


def _options(**fields: Any) -> GenerateOptions:
    return GenerateOptions(
        provider="local", model="m", messages=(create_user_message("hi"),), **fields
    )


def _run(adapter: OpenAICompatAdapter, **fields: Any) -> tuple[list[StreamChunk], Any]:
    chunks: list[StreamChunk] = []
    try:
        for chunk in adapter.stream(_options(**fields)):
            chunks.append(chunk)
    except LlmError as exc:
        return chunks, exc
    return chunks, None


@pytest.fixture
def adapter(server: LoopbackServer) -> Iterator[OpenAICompatAdapter]:
    with OpenAICompatAdapter(
        f"{server.url}/v1", stream_idle_timeout_ms=300
    ) as instance:
        yield instance


@pytest.mark.parametrize("framing", ["chunked", "close"])
def test_usage_reported_before_a_cut_comes_right_before_the_failure(
    server, adapter, framing
):
    body = (sse_event(_text("partial")), sse_event(_usage(100, 50)), Cut())
    server.enqueue(Reply(body=body, framing=framing))
    chunks, error = _run(adapter)
    assert isinstance(error, LlmError)
    assert chunks[-1] == UsageChunk(
        usage=TokenUsage(input_tokens=100, output_tokens=50, cache_read_tokens=None)
    )
    assert [type(c).__name__ for c in chunks[:-1]] == ["BlockStart", "TextDelta"]


def test_usage_reported_before_an_abort_comes_right_before_the_failure(server, adapter):
    # One write, so one read brings both events: the usage is known before the
    # consumer aborts (an event not read yet when the abort comes is never read).
    body = (sse_event(_text("partial")) + sse_event(_usage(7, 3)), Stall())
    server.enqueue(Reply(body=body))
    controller = AbortController()
    stream = adapter.stream(_options(signal=controller.signal))
    seen = [next(stream), next(stream)]
    controller.abort()
    with pytest.raises(LlmError) as caught:
        seen.extend(stream)
    assert caught.value.code == ErrorCode.ABORTED
    assert seen[-1] == UsageChunk(
        usage=TokenUsage(input_tokens=7, output_tokens=3, cache_read_tokens=None)
    )


def test_no_usage_chunk_before_a_failure_when_none_was_reported(server, adapter):
    server.enqueue(Reply(body=(sse_event(_text("partial")), Cut())))
    chunks, error = _run(adapter)
    assert isinstance(error, LlmError)
    assert not any(isinstance(c, UsageChunk) for c in chunks)


def test_empty_data_events_are_keep_alives_not_progress(server):
    # Each empty event arrives well inside the idle bound, but none is data, so
    # the keep-alive bound ends the stream.
    body = tuple(
        b"data:\n\n" if i % 2 == 0 else Pause(seconds=0.03) for i in range(400)
    )
    server.enqueue(Reply(body=body))
    with OpenAICompatAdapter(
        f"{server.url}/v1",
        stream_idle_timeout_ms=1000,
        stream_keepalive_timeout_ms=1500,
    ) as adapter:
        chunks, error = _run(adapter)
    assert isinstance(error, LlmError)
    assert error.code == ErrorCode.TIMEOUT
    assert "only keep-alive" in error.message
    assert chunks == []


def test_an_echoed_identifier_like_key_never_becomes_a_finish_code(server):
    # A finish_reason that is exactly the key would be upper-cased into a code.
    body = (
        sse_event(_text("x")),
        sse_event({"choices": [{"index": 0, "delta": {}, "finish_reason": KEY}]}),
        b"data: [DONE]\n\n",
    )
    server.enqueue(Reply(body=body))
    with OpenAICompatAdapter(f"{server.url}/v1", api_key=KEY) as adapter:
        chunks, error = _run(adapter)
    assert error is None
    end = chunks[-1]
    assert isinstance(end, Finish)
    assert end.reason.failure is not None
    assert end.reason.failure.code == ErrorCode.UNKNOWN_FINISH_REASON
    assert KEY not in repr(end)
    assert KEY.upper() not in repr(end)


def test_redacted_leaves_an_error_without_secrets_as_it_is():
    with create_session() as session:
        call = StreamingCall(
            session,
            url="http://127.0.0.1:9/v1/chat/completions",
            body=b"{}",
            headers={},
            auth=BearerAuth(KEY),
            provider="Test",
            endpoint="http://127.0.0.1:9/v1",
            signal=None,
            idle_timeout_ms=100,
            keepalive_timeout_ms=None,
            total_timeout_ms=None,
        )
        plain = LlmError("nothing secret", ErrorCode.SERVER)
        assert call.redacted(plain) is plain
        cause = ValueError(f"quoted {KEY}")
        leaky = LlmError(f"bad key {KEY}", ErrorCode.AUTH, status=401, cause=cause)
        clean = call.redacted(leaky)
        assert clean.message == "bad key ***"
        assert (clean.code, clean.status) == ("AUTH", 401)
        assert KEY not in repr(clean.__cause__)
        finish = Finish(
            reason=FinishReason.error(LlmFailure(message=f"x {KEY}", code="SERVER"))
        )
        assert call.redacted_finish(finish).reason.failure == LlmFailure(
            message="x ***", code="SERVER"
        )
        ok = Finish(reason=FinishReason.STOP)
        assert call.redacted_finish(ok) is ok
        # A raised in-stream failure whose code spells the key, as a finish's may.
        spelled = LlmError(f"bad {KEY}", KEY.upper())
        clean = call.redacted(spelled)
        assert (clean.message, clean.code) == ("bad ***", "UNKNOWN_FINISH_REASON")
    assert isinstance(session, requests.Session)


def test_an_abort_after_the_provider_s_finish_keeps_the_whole_answer(
    server: LoopbackServer,
) -> None:
    from dsh_llm.adapters.anthropic import AnthropicAdapter

    events = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "m",
                    "usage": {"input_tokens": 2, "output_tokens": 1},
                },
            },
        ),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "all"},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": 3},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    body = b"".join(sse_event(payload) for _name, payload in events)
    server.enqueue(Reply(body=body))  # one write: one read brings every event
    controller = AbortController()
    chunks: list[StreamChunk] = []
    with AnthropicAdapter(api_key="k", base_url=server.url) as adapter:
        for chunk in adapter.stream(_options(signal=controller.signal)):
            chunks.append(chunk)
            if chunk.type == "text-delta":
                controller.abort()  # after the last word: only the ending is left
    finish = chunks[-1]
    assert isinstance(finish, Finish)
    assert finish.reason == FinishReason.STOP
    assert [type(c).__name__ for c in chunks] == [
        "BlockStart",
        "TextDelta",
        "BlockEnd",
        "UsageChunk",
        "Finish",
    ]
