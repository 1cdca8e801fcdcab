"""AnthropicAdapter end to end against the loopback server: every recorded stream
under each framing and split, HTTP errors to stable codes with the request id,
an echoed key redacted, cancellation, the watchdog, usage before a failure, and
a thinking + tool-call conversation replayed to the next request. Every stream
is checked with ``validate_stream(strict=True)``."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from typing import Literal

import pytest

from dsh_llm.adapters.anthropic import PROVIDER_ROUTE
from dsh_llm.adapters.anthropic import AnthropicAdapter
from dsh_llm.assembler import BlockAssembler
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import BlockEnd
from dsh_llm.protocol import BlockStart
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import ModelSource
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TextDelta
from dsh_llm.protocol import ToolSchema
from dsh_llm.protocol import UsageChunk
from dsh_llm.protocol import create_tool_result_message
from dsh_llm.protocol import create_user_message
from dsh_llm.runtime import LlmRuntime
from dsh_llm.serde import chunk_to_dict
from dsh_llm.serde import read_jsonl
from dsh_llm.signal import AbortController
from dsh_llm.testing import Cassette
from dsh_llm.testing import Cut
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Pause
from dsh_llm.testing import Reply
from dsh_llm.testing import Stall
from dsh_llm.transport.attribution import user_agent
from dsh_llm.validator import validate_stream

from .replay import FIXTURES
from .replay import fixture_names

KEY = "sk-ant-test-0123456789abcdef"
MODEL = "claude-haiku-4-5"
NAMES = fixture_names()


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:
        yield srv
        # Nothing leaks: every connection the adapter opened is closed again.
        assert srv.wait_until_idle(), "a connection was left open"


def _adapter(server: LoopbackServer, **options: Any) -> AnthropicAdapter:
    options.setdefault("environ", {"ANTHROPIC_API_KEY": KEY})
    return AnthropicAdapter(base_url=server.url, **options)


def _options(**fields: Any) -> GenerateOptions:
    fields.setdefault("messages", (create_user_message("hi"),))
    fields.setdefault("model", MODEL)
    return GenerateOptions(provider=PROVIDER_ROUTE, **fields)


def _outcome(adapter: AnthropicAdapter, **fields: Any) -> list[StreamChunk]:
    """The strict-validated chunks, a raised ``LlmError`` ending them as the
    error finish the runtime makes of it (as ``replay.replay`` does)."""
    chunks: list[StreamChunk] = []
    try:
        for chunk in validate_stream(adapter.stream(_options(**fields)), strict=True):
            chunks.append(chunk)
    except LlmError as error:
        chunks.append(Finish(reason=FinishReason.error(error.failure)))
    return chunks


def _failure(adapter: AnthropicAdapter, **fields: Any) -> tuple[LlmError, list[Any]]:
    chunks: list[Any] = []

    def drain() -> None:
        chunks.extend(validate_stream(adapter.stream(_options(**fields))))

    with pytest.raises(LlmError) as caught:
        drain()
    return caught.value, chunks


def _event(payload: dict[str, Any]) -> bytes:
    return f"event: {payload['type']}\ndata: {json.dumps(payload)}\n\n".encode()


def _start(model: str = MODEL) -> dict[str, Any]:
    return {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "usage": {"input_tokens": 12, "output_tokens": 1},
        },
    }


def _text_start(index: int = 0) -> dict[str, Any]:
    return {
        "type": "content_block_start",
        "index": index,
        "content_block": {"type": "text", "text": ""},
    }


def _text(piece: str, index: int = 0) -> dict[str, Any]:
    return {
        "type": "content_block_delta",
        "index": index,
        "delta": {"type": "text_delta", "text": piece},
    }


def _stop(index: int = 0) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def _end(reason: str = "end_turn", output: int = 5) -> list[dict[str, Any]]:
    return [
        {
            "type": "message_delta",
            "delta": {"stop_reason": reason, "stop_sequence": None},
            "usage": {"output_tokens": output},
        },
        {"type": "message_stop"},
    ]


def _body(*payloads: dict[str, Any]) -> bytes:
    return b"".join(_event(p) for p in payloads)


PING = b'event: ping\ndata: {"type": "ping"}\n\n'


# --- recorded streams -----------------------------------------------------------------


@pytest.mark.parametrize("framing", ["chunked", "close", "length"])
@pytest.mark.parametrize("split", [None, 1, 7], ids=["whole", "1-byte", "7-bytes"])
@pytest.mark.parametrize("name", NAMES)
def test_recorded_stream_through_the_adapter_gives_its_expected_chunks(
    server: LoopbackServer,
    name: str,
    split: int | None,
    framing: Literal["chunked", "close", "length"],
) -> None:
    body = (FIXTURES / f"{name}.sse").read_bytes()
    expected = [
        chunk_to_dict(c) for c in read_jsonl(str(FIXTURES / f"{name}.chunks.jsonl"))
    ]
    server.enqueue(Reply(body=body, framing=framing, split=split))
    with _adapter(server) as adapter:
        assert [chunk_to_dict(c) for c in _outcome(adapter)] == expected


def test_the_request_goes_to_v1_messages_with_key_version_and_attribution(
    server: LoopbackServer,
) -> None:
    server.enqueue(
        Reply(body=_body(_start(), _text_start(), _text("ok"), _stop(), *_end()))
    )
    with _adapter(server) as adapter:
        chunks = _outcome(adapter)
    assert [c.type for c in chunks] == [
        "block-start",
        "text-delta",
        "block-end",
        "usage",
        "finish",
    ]
    assert chunks[-1].reason.kind == "stop"  # type: ignore[union-attr]
    (request,) = server.requests
    assert (request.method, request.path) == ("POST", "/v1/messages")
    assert request.header("x-api-key") == KEY
    assert request.header("anthropic-version") == "2023-06-01"
    assert request.header("user-agent") == user_agent()
    assert request.header("authorization") is None
    assert request.json() == {
        "model": MODEL,
        "max_tokens": 32000,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "stream": True,
    }


def test_through_the_runtime_the_route_streams_and_resolves(
    server: LoopbackServer,
) -> None:
    server.enqueue(
        Reply(body=_body(_start(), _text_start(), _text("hey"), _stop(), *_end()))
    )
    runtime = LlmRuntime()
    with _adapter(server) as adapter:
        registration = runtime.register_adapter([PROVIDER_ROUTE], adapter)
        try:
            chunks = list(validate_stream(runtime.stream(_options()), strict=True))
        finally:
            registration.dispose()
    assert [c.text for c in chunks if isinstance(c, TextDelta)] == ["hey"]
    assert chunks[-1].reason.kind == "stop"  # type: ignore[union-attr]


# --- HTTP errors ----------------------------------------------------------------------


def _error_body(kind: str, message: str) -> bytes:
    return json.dumps(
        {
            "type": "error",
            "error": {"type": kind, "message": message},
            "request_id": "req_body_1",
        }
    ).encode()


LITELLM_CUT = (
    Path(__file__).parents[2]
    / "fixtures/cassettes/litellm-llama-server-messages/length.jsonl"
)


@pytest.mark.parametrize(
    ("options", "fields", "kind"),
    [
        # LiteLLM's openai/ route over llama-server: a cut at 16 says end_turn.
        ({"unmarked_cap_cut": True}, {"max_tokens": 16}, "max-tokens"),
        (
            {"unmarked_cap_cut": True, "models": [{"id": MODEL, "maxTokens": 16}]},
            {},
            "max-tokens",
        ),
        (
            {"unmarked_cap_cut": True},
            {"max_tokens": 99, "extra_body": {"max_tokens": 16}},
            "max-tokens",
        ),
        ({"unmarked_cap_cut": True}, {"max_tokens": 17}, "stop"),
        ({}, {"max_tokens": 16}, "stop"),
    ],
)
def test_an_unmarked_cap_cut_is_max_tokens_only_when_the_user_says_so(
    server: LoopbackServer,
    options: dict[str, Any],
    fields: dict[str, Any],
    kind: str,
) -> None:
    server.enqueue(Reply(body=Cassette.load(LITELLM_CUT).response.body))
    with _adapter(server, **options) as adapter:
        chunks = _outcome(adapter, **fields)
    finish = chunks[-1]
    assert isinstance(finish, Finish)
    assert finish.reason.kind == kind


@pytest.mark.parametrize(
    ("status", "kind", "code"),
    [
        (400, "invalid_request_error", ErrorCode.INVALID_REQUEST),
        (401, "authentication_error", ErrorCode.AUTH),
        (403, "permission_error", ErrorCode.AUTH),
        (404, "not_found_error", ErrorCode.INVALID_REQUEST),
        (413, "request_too_large", ErrorCode.INVALID_REQUEST),
        (429, "rate_limit_error", ErrorCode.RATE_LIMIT),
        (500, "api_error", ErrorCode.SERVER),
        (529, "overloaded_error", ErrorCode.SERVER),
    ],
)
def test_http_errors_map_to_stable_codes_keeping_the_request_id(
    server: LoopbackServer, status: int, kind: str, code: ErrorCode
) -> None:
    headers = {"content-type": "application/json", "request-id": f"req_{status}"}
    if status == 429:
        headers["retry-after"] = "7"
    server.enqueue(
        Reply(
            status=status,
            headers=headers,
            body=_error_body(kind, f"the {kind} message"),
            framing="length",
        )
    )
    with _adapter(server) as adapter:
        error, chunks = _failure(adapter)
    assert chunks == []
    assert (error.code, error.status, error.message) == (
        code,
        status,
        f"the {kind} message",
    )
    assert error.request_id == f"req_{status}"
    assert error.provider_retry_after_ms == (7000 if status == 429 else None)


def test_a_prompt_too_long_400_is_context_window_exceeded(
    server: LoopbackServer,
) -> None:
    body = _error_body(
        "invalid_request_error", "prompt is too long: 201234 tokens > 200000 maximum"
    )
    server.enqueue(Reply(status=400, body=body, framing="length"))
    with _adapter(server) as adapter:
        error, _ = _failure(adapter)
    assert error.code == ErrorCode.CONTEXT_WINDOW_EXCEEDED
    assert error.request_id == "req_body_1"


def test_an_echoed_key_is_redacted_from_an_http_error(server: LoopbackServer) -> None:
    body = _error_body("authentication_error", f"invalid x-api-key: {KEY}")
    server.enqueue(Reply(status=401, body=body, framing="length"))
    with _adapter(server) as adapter:
        error, _ = _failure(adapter)
    assert error.code == ErrorCode.AUTH
    assert error.message == "invalid x-api-key: ***"
    assert KEY not in str(error.__cause__)
    assert KEY not in repr(adapter)


def test_an_echoed_key_is_redacted_from_an_in_stream_error(
    server: LoopbackServer,
) -> None:
    error_event = {
        "type": "error",
        "error": {"type": "overloaded_error", "message": f"busy for {KEY}"},
    }
    server.enqueue(Reply(body=_body(_start(), error_event)))
    with _adapter(server) as adapter:
        chunks = _outcome(adapter)
    finish = chunks[-1]
    assert isinstance(finish, Finish)
    assert finish.reason.failure is not None
    assert (finish.reason.failure.code, finish.reason.failure.message) == (
        ErrorCode.SERVER,
        "busy for ***",
    )


def test_a_missing_key_fails_before_any_request(server: LoopbackServer) -> None:
    with _adapter(server, environ={}) as adapter:
        error, _ = _failure(adapter)
    assert error.code == ErrorCode.MISSING_CREDENTIAL
    assert "ANTHROPIC_API_KEY" in error.message
    assert server.requests == ()


def test_a_refused_option_fails_before_any_request(server: LoopbackServer) -> None:
    with _adapter(server) as adapter:
        error, _ = _failure(adapter, reasoning_effort="high", temperature=0.5)
    assert error.code == ErrorCode.UNSUPPORTED_OPTION
    assert server.requests == ()


# --- transport: cancellation, watchdog, usage before a failure ----------------------


def test_an_abort_mid_stream_ends_it_with_aborted(server: LoopbackServer) -> None:
    head = _body(_start(), _text_start(), _text("Hel"))
    server.enqueue(Reply(body=(head, Stall(seconds=5))))
    controller = AbortController()
    seen: list[Any] = []
    with _adapter(server) as adapter:
        stream = validate_stream(adapter.stream(_options(signal=controller.signal)))

        def drain() -> None:
            for chunk in stream:
                seen.append(chunk)
                if isinstance(chunk, TextDelta):
                    threading.Timer(0.05, controller.abort).start()

        with pytest.raises(LlmError) as caught:
            drain()
    assert caught.value.code == ErrorCode.ABORTED
    assert caught.value.message == "Anthropic request aborted by caller"
    assert [c.type for c in seen] == ["block-start", "text-delta", "usage"]


def test_a_silent_stream_ends_with_the_idle_timeout(server: LoopbackServer) -> None:
    server.enqueue(Reply(body=(_body(_start(), _text_start(), _text("x")), Stall())))
    with _adapter(server, stream_idle_timeout_ms=150) as adapter:
        error, chunks = _failure(adapter)
    assert error.code == ErrorCode.TIMEOUT
    assert error.message == "Anthropic stream idle timeout after 150ms"
    # The input usage message_start reported is not lost.
    assert isinstance(chunks[-1], UsageChunk)
    assert chunks[-1].usage.input_tokens == 12


def test_pings_keep_an_idle_read_alive(server: LoopbackServer) -> None:
    # Four quiet spells of 200 ms, each a third of the idle bound, 800 ms in all.
    body = (
        _body(_start()),
        *(step for _ in range(4) for step in (PING, Pause(seconds=0.2))),
        _body(_text_start(), _text("late"), _stop(), *_end()),
    )
    server.enqueue(Reply(body=body))
    with _adapter(server, stream_idle_timeout_ms=600) as adapter:
        chunks = _outcome(adapter)
    assert [c.text for c in chunks if isinstance(c, TextDelta)] == ["late"]
    assert chunks[-1].reason.kind == "stop"  # type: ignore[union-attr]


def test_pings_alone_cannot_hold_the_stream_past_the_keepalive_bound(
    server: LoopbackServer,
) -> None:
    # A ping every 30 ms, far inside the 1 s idle bound whatever the machine's
    # load, for longer than the 1.5 s keep-alive bound.
    body = (
        _body(_start()),
        *(PING if i % 2 == 0 else Pause(seconds=0.03) for i in range(400)),
    )
    server.enqueue(Reply(body=body))
    with _adapter(
        server, stream_idle_timeout_ms=1000, stream_keepalive_timeout_ms=1500
    ) as adapter:
        error, _ = _failure(adapter)
    assert error.code == ErrorCode.TIMEOUT
    assert "only keep-alive comments" in error.message


def test_a_cut_connection_yields_the_usage_so_far_then_fails(
    server: LoopbackServer,
) -> None:
    head = _body(_start(), _text_start(), _text("a"), _stop())
    server.enqueue(Reply(body=(head, Cut()), framing="close"))
    with _adapter(server) as adapter:
        error, chunks = _failure(adapter)
    assert error.code in (ErrorCode.STREAM_CLOSED, ErrorCode.TRANSPORT)
    assert [type(c) for c in chunks] == [BlockStart, TextDelta, BlockEnd, UsageChunk]


# --- replay: thinking and a tool call round-trip ------------------------------------

SIGNATURE = "EqQBCkYIBxgCKkB0c2lnbmF0dXJlLWZvci1yb3VuZC10cmlw"
TOOLS = (
    ToolSchema(
        name="get_weather",
        description="Weather for a city",
        parameters={"type": "object", "properties": {"city": {"type": "string"}}},
    ),
)


def _thinking_then_tool_use() -> bytes:
    return _body(
        _start(),
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "Need the weather."},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "signature_delta", "signature": SIGNATURE},
        },
        _stop(0),
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "get_weather",
                "input": {},
            },
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '{"city": "Oslo"}'},
        },
        _stop(1),
        *_end("tool_use", 30),
    )


def test_a_thinking_and_tool_call_turn_is_sent_back_with_its_signature(
    server: LoopbackServer,
) -> None:
    server.enqueue(Reply(body=_thinking_then_tool_use()))
    server.enqueue(
        Reply(body=_body(_start(), _text_start(), _text("4C"), _stop(), *_end()))
    )
    question = create_user_message("Weather in Oslo?")
    with _adapter(server) as adapter:
        assembler = BlockAssembler()
        for chunk in validate_stream(
            adapter.stream(
                _options(messages=(question,), tools=TOOLS, reasoning_effort="low")
            ),
            strict=True,
        ):
            assembler.push(chunk)
        assert assembler.finish.kind == "tool-calls"
        answer = assembler.message(
            ModelSource(
                provider=PROVIDER_ROUTE,
                model=MODEL,
                replay_state=assembler.replay_state,
            )
        )
        result = create_tool_result_message("toolu_1", "4C and clear")
        chunks = _outcome(
            adapter,
            messages=(question, answer, result),
            tools=TOOLS,
            reasoning_effort="low",
        )
    assert chunks[-1].reason.kind == "stop"  # type: ignore[union-attr]
    second = server.requests[1].json()
    assert second["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert second["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Weather in Oslo?"}]},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "thinking",
                    "thinking": "Need the weather.",
                    "signature": SIGNATURE,
                },
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "get_weather",
                    "input": {"city": "Oslo"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": "4C and clear",
                }
            ],
        },
    ]
