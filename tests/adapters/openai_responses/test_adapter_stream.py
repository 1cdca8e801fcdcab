"""OpenAIResponsesAdapter end to end over the loopback server: every recorded
fixture under every framing and split, strict-validated and compared with its
``.chunks.jsonl``; HTTP failures to stable codes; secrets the server echoes;
the watchdog; cancellation; a reasoning + tool-call conversation round-trip."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh_llm.adapters.openai_responses import OpenAIResponsesAdapter
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import BlockEnd
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import create_assistant_message
from dsh_llm.protocol import create_tool_result_message
from dsh_llm.protocol import create_user_message
from dsh_llm.runtime import LlmRuntime
from dsh_llm.serde import chunk_to_dict
from dsh_llm.serde import read_jsonl
from dsh_llm.signal import AbortController
from dsh_llm.testing import Cassette
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Pause
from dsh_llm.testing import Reply
from dsh_llm.testing import Stall
from dsh_llm.validator import validate_stream

from .test_translate_fixtures import server_of

FIXTURES = Path(__file__).parents[2] / "fixtures" / "openai_responses"
NAMES = sorted(p.stem for p in FIXTURES.glob("*.sse"))
FAILED = (
    "ollama_runner_error_eof",
    "openai_error_only",
    "openai_error_then_failed",
    "openai_failed_only",
    "openai_failed_then_error",
    "openrouter_upstream_error_payload",
    "vllm_engine_error",
)
"""Fixtures whose stream fails: ``adapter.stream()`` raises (an error event, a
``response.failed``, a body that ends before a terminal event)."""
KEY = "sk-resp-0123456789abcdef"
ROUTE = "responses-test"


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:
        yield srv
        assert srv.wait_until_idle(), "a connection was left open"


def _adapter(loopback: LoopbackServer, **options: Any) -> OpenAIResponsesAdapter:
    options.setdefault("server", "openai")
    return OpenAIResponsesAdapter(f"{loopback.url}/v1", **options)


def _options(**fields: Any) -> GenerateOptions:
    fields.setdefault("messages", (create_user_message("hi"),))
    return GenerateOptions(provider=ROUTE, model="gpt-5.2", **fields)


def _drain(
    adapter: OpenAIResponsesAdapter, **fields: Any
) -> tuple[list[StreamChunk], LlmError | None]:
    chunks: list[StreamChunk] = []
    try:
        for chunk in adapter.stream(_options(**fields)):
            chunks.append(chunk)
    except LlmError as exc:
        return chunks, exc
    return chunks, None


def _event(payload: dict[str, Any]) -> bytes:
    return f"event: {payload['type']}\ndata: {json.dumps(payload)}\n\n".encode()


def _completed(output: list[Any], **response: Any) -> dict[str, Any]:
    return {
        "type": "response.completed",
        "response": {
            "id": "resp_1",
            "model": "gpt-5.2",
            "status": "completed",
            "output": output,
            "usage": {"input_tokens": 5, "output_tokens": 2},
            **response,
        },
    }


def _text_body(text: str) -> bytes:
    item = {"type": "message", "id": "m1", "role": "assistant", "content": []}
    return b"".join(
        _event(payload)
        for payload in (
            {"type": "response.output_item.added", "output_index": 0, "item": item},
            {
                "type": "response.output_text.delta",
                "item_id": "m1",
                "output_index": 0,
                "content_index": 0,
                "delta": text,
            },
            _completed([]),
        )
    )


# --- recorded streams -----------------------------------------------------------------


@pytest.mark.parametrize("framing", ["chunked", "close", "length"])
@pytest.mark.parametrize("split", [None, 1, 7], ids=["whole", "1-byte", "7-byte"])
@pytest.mark.parametrize("name", NAMES)
def test_every_fixture_replays_to_its_expected_strict_chunks(
    server, name, split, framing
):
    body = (FIXTURES / f"{name}.sse").read_bytes()
    expected = [
        chunk_to_dict(c) for c in read_jsonl(str(FIXTURES / f"{name}.chunks.jsonl"))
    ]
    server.enqueue(Reply(body=body, framing=framing, split=split))
    with _adapter(server, server=server_of(name)) as adapter:
        chunks, error = _drain(adapter)
    # A failure is raised after what came before it (the usage reported
    # included); the runtime makes it the last finish, as the fixture shows.
    assert (error is not None) == (name in FAILED)
    if error is not None:
        chunks = [*chunks, Finish(reason=FinishReason.error(error.failure))]
    assert [chunk_to_dict(c) for c in chunks] == expected
    assert list(validate_stream(chunks, strict=True)) == chunks


def test_the_request_goes_to_the_responses_endpoint_with_the_key(server):
    server.enqueue(Reply(body=_text_body("hello")))
    with _adapter(server, api_key=KEY) as adapter:
        chunks, error = _drain(adapter)
    assert error is None
    assert [c.type for c in chunks][-2:] == ["usage", "finish"]
    (request,) = server.requests
    assert request.path == "/v1/responses"
    assert request.header("authorization") == f"Bearer {KEY}"
    assert request.header("accept") == "text/event-stream"
    assert request.json()["store"] is False


LLAMA_SERVER_CUT = Path(__file__).parents[2] / (
    "fixtures/cassettes/llama-server-responses/length.jsonl"
)


@pytest.mark.parametrize(
    ("options", "fields", "kind"),
    [
        # llama-server's own cut: completed, 16 output tokens of a cap of 16.
        ({"server": "llamacpp"}, {"max_tokens": 16}, "max-tokens"),
        (
            {"server": "llamacpp", "models": [{"id": "gpt-5.2", "maxTokens": 16}]},
            {},
            "max-tokens",
        ),
        ({"server": "llamacpp"}, {"max_tokens": 17}, "stop"),
        ({"server": "llamacpp"}, {}, "stop"),
        # Without the profile the wire's completed stands...
        ({"server": "openai"}, {"max_tokens": 16}, "stop"),
        # ...unless the user says the server does not mark a cut (LiteLLM's
        # openai/ route in front of llama-server), or says it does.
        (
            {"server": "openai", "unmarked_cap_cut": True},
            {"max_tokens": 16},
            "max-tokens",
        ),
        ({"server": "llamacpp", "unmarked_cap_cut": False}, {"max_tokens": 16}, "stop"),
    ],
)
def test_the_llamacpp_profile_reads_a_cut_at_the_cap_the_request_sent(
    server, options, fields, kind
):
    body = Cassette.load(LLAMA_SERVER_CUT).response.body
    server.enqueue(Reply(body=body))
    with _adapter(server, **options) as adapter:
        chunks, error = _drain(adapter, **fields)
    assert error is None
    assert chunks[-1].reason.kind == kind  # type: ignore[union-attr]
    sent = server.requests[0].json().get("max_output_tokens")
    assert sent == (fields.get("max_tokens") or (16 if "models" in options else None))


def test_a_keepalive_comment_and_an_empty_event_produce_nothing(server):
    body = b": keep-alive\n\n" + b"data:\n\n" + _text_body("x")
    server.enqueue(Reply(body=body))
    with _adapter(server) as adapter:
        chunks, error = _drain(adapter)
    assert error is None
    assert [c.type for c in chunks] == [
        "block-start",
        "text-delta",
        "block-end",
        "usage",
        "finish",
    ]


# --- failures -------------------------------------------------------------------------


def _error_reply(status: int, error: dict[str, Any], **headers: str) -> Reply:
    return Reply(
        status=status,
        reason="Error",
        headers={"content-type": "application/json", **headers},
        body=json.dumps({"error": error}).encode(),
        framing="length",
    )


@pytest.mark.parametrize(
    ("status", "error", "code"),
    [
        (
            401,
            {"message": "Incorrect API key", "type": "invalid_request_error"},
            "AUTH",
        ),
        (
            400,
            {
                "message": "Your input exceeds the context window of this model.",
                "type": "invalid_request_error",
                "code": "context_length_exceeded",
            },
            "CONTEXT_WINDOW_EXCEEDED",
        ),
        (
            429,
            {
                "message": "Rate limit reached",
                "type": "requests",
                "code": "rate_limit_exceeded",
            },
            "RATE_LIMIT",
        ),
        (
            429,
            {
                "message": "You exceeded your current quota",
                "type": "insufficient_quota",
                "code": "insufficient_quota",
            },
            "QUOTA",
        ),
        (
            400,
            {
                "message": "Unsupported parameter: 'stop'",
                "type": "invalid_request_error",
            },
            "INVALID_REQUEST",
        ),
        (500, {"message": "The server had an error", "type": "server_error"}, "SERVER"),
        (404, {"message": "model not found"}, "HTTP_404"),
    ],
    ids=["401", "400-context", "429", "429-quota", "400", "500", "404"],
)
def test_http_statuses_become_stable_codes_with_the_request_id(
    server, status, error, code
):
    server.enqueue(_error_reply(status, error, **{"x-request-id": "req_42"}))
    with _adapter(server) as adapter:
        chunks, failure = _drain(adapter)
    assert chunks == []
    assert failure is not None
    assert (failure.code, failure.message) == (code, error["message"])
    assert failure.failure.status == status
    assert failure.failure.request_id == "req_42"


def test_a_retry_after_hint_is_kept(server):
    server.enqueue(
        _error_reply(
            429,
            {"message": "slow down", "code": "rate_limit_exceeded"},
            **{"retry-after": "3"},
        )
    )
    with _adapter(server) as adapter:
        _, failure = _drain(adapter)
    assert failure is not None
    assert failure.failure.provider_retry_after_ms == 3000.0


def _printed(error: BaseException) -> str:
    parts, node = [], error
    while node is not None:
        parts += [str(node), repr(node)]
        node = node.__cause__  # type: ignore[assignment]
    return "\n".join(parts)


def test_a_key_the_server_echoes_in_an_http_error_is_redacted(server):
    server.enqueue(_error_reply(401, {"message": f"Incorrect API key provided: {KEY}"}))
    with _adapter(server, api_key=KEY) as adapter:
        _, failure = _drain(adapter)
    assert failure is not None
    assert failure.message == "Incorrect API key provided: ***"
    assert KEY not in _printed(failure)


def test_a_key_echoed_by_an_in_stream_error_event_is_redacted(server):
    error = {
        "type": "error",
        "code": "invalid_api_key",
        "message": f"key {KEY} was revoked",
        "sequence_number": 1,
    }
    server.enqueue(Reply(body=_event(error)))
    runtime = LlmRuntime()
    with _adapter(server, environ={"RESP_KEY": KEY}, api_key_env="RESP_KEY") as adapter:
        runtime.register_adapter([ROUTE], adapter)
        chunks = list(validate_stream(runtime.stream(_options()), strict=True))
    end = chunks[-1]
    assert isinstance(end, Finish)
    assert end.reason.failure is not None
    assert end.reason.failure.message == "key *** was revoked"
    assert end.reason.failure.code == "INVALID_API_KEY"
    assert KEY not in repr(chunks)


def test_a_key_used_as_the_error_code_is_not_the_code(server):
    error = {"type": "error", "code": KEY, "message": f"bad {KEY}"}
    server.enqueue(Reply(body=_event(error)))
    with _adapter(server, api_key=KEY) as adapter:
        chunks, failure = _drain(adapter)
    assert chunks == []
    assert failure is not None
    assert failure.code == ErrorCode.UNKNOWN_FINISH_REASON
    assert failure.message == "bad ***"
    assert KEY not in _printed(failure)
    assert KEY.upper() not in _printed(failure)


def test_eof_before_a_terminal_event_is_stream_closed(server):
    body = _text_body("cut")
    server.enqueue(Reply(body=body[: body.index(b"event: response.completed")]))
    with _adapter(server) as adapter:
        chunks, failure = _drain(adapter)
    assert failure is not None
    assert failure.code == ErrorCode.STREAM_CLOSED
    assert [c.type for c in chunks] == ["block-start", "text-delta"]


def test_a_payload_that_is_not_json_is_malformed_response(server):
    server.enqueue(Reply(body=b"event: response.created\ndata: {not json\n\n"))
    with _adapter(server) as adapter:
        _, failure = _drain(adapter)
    assert failure is not None
    assert failure.code == ErrorCode.MALFORMED_RESPONSE


def test_a_missing_key_variable_fails_before_any_request(server):
    with _adapter(server, api_key_env="NO_SUCH_KEY", environ={}) as adapter:
        _, failure = _drain(adapter)
    assert failure is not None
    assert failure.code == ErrorCode.MISSING_CREDENTIAL
    assert "NO_SUCH_KEY" in failure.message
    assert server.requests == ()


def test_a_refused_option_fails_before_any_request(server):
    with _adapter(server, server="ollama") as adapter:
        _, failure = _drain(adapter, stop=("END",))
    assert failure is not None
    assert failure.code == ErrorCode.UNSUPPORTED_OPTION
    assert server.requests == ()


# --- watchdog and cancellation --------------------------------------------------------


def _first_events() -> bytes:
    body = _text_body("partial")
    return body[: body.index(b"event: response.completed")]


def test_the_idle_timeout_ends_a_silent_stream(server):
    server.enqueue(Reply(body=(_first_events(), Stall())))
    with _adapter(server, stream_idle_timeout_ms=150) as adapter:
        chunks, failure = _drain(adapter)
    assert failure is not None
    assert failure.code == ErrorCode.TIMEOUT
    assert failure.message == "OpenAI (Responses API) stream idle timeout after 150ms"
    assert [c.type for c in chunks] == ["block-start", "text-delta"]


def test_keepalives_alone_cannot_hold_the_stream_past_the_keepalive_bound(server):
    # A keep-alive every 30 ms, far inside the 1 s idle bound whatever the
    # machine's load, for longer than the 1.5 s keep-alive bound.
    body = tuple(
        b": keep-alive\n\n" if i % 2 == 0 else Pause(seconds=0.03) for i in range(400)
    )
    server.enqueue(Reply(body=body))
    with _adapter(
        server, stream_idle_timeout_ms=1000, stream_keepalive_timeout_ms=1500
    ) as adapter:
        _, failure = _drain(adapter)
    assert failure is not None
    assert failure.code == ErrorCode.TIMEOUT
    assert "only keep-alive comments" in failure.message


def test_an_abort_mid_stream_ends_a_blocked_read_with_aborted(server):
    server.enqueue(Reply(body=(_first_events(), Stall())))
    controller = AbortController()
    with _adapter(server, stream_idle_timeout_ms=60_000) as adapter:
        stream = adapter.stream(_options(signal=controller.signal))
        assert next(stream).type == "block-start"
        assert next(stream).type == "text-delta"
        threading.Timer(0.05, controller.abort).start()
        with pytest.raises(LlmError) as caught:
            next(stream)
    assert caught.value.code == ErrorCode.ABORTED
    assert caught.value.message == "OpenAI (Responses API) request aborted by caller"


def test_an_abort_through_the_runtime_is_one_aborted_finish(server):
    server.enqueue(Reply(body=(_first_events(), Stall())))
    controller = AbortController()
    runtime = LlmRuntime()
    with _adapter(server, stream_idle_timeout_ms=60_000) as adapter:
        runtime.register_adapter([ROUTE], adapter)
        timer = threading.Timer(0.1, controller.abort)
        timer.start()
        chunks = list(
            validate_stream(
                runtime.stream(_options(signal=controller.signal)), strict=True
            )
        )
        timer.join()
    end = chunks[-1]
    assert isinstance(end, Finish)
    assert end.reason.kind == "aborted"


# --- replay round trip ----------------------------------------------------------------


def test_reasoning_and_a_tool_call_round_trip_to_the_next_request(server):
    server.enqueue(
        Reply(body=(FIXTURES / "openai_full_turn.sse").read_bytes()),
        Reply(body=_text_body("Sunny in Lyon.")),
    )
    with _adapter(server) as adapter:
        chunks, error = _drain(adapter)
        assert error is None
        end = chunks[-1]
        assert isinstance(end, Finish)
        blocks = tuple(c.block for c in chunks if isinstance(c, BlockEnd))
        assistant = create_assistant_message(
            blocks, provider=ROUTE, model="gpt-5.2", replay_state=end.replay_state
        )
        call = blocks[2]
        result = create_tool_result_message(call.id, "sunny")  # type: ignore[union-attr]
        messages = (create_user_message("Weather in Lyon?"), assistant, result)
        _, error = _drain(adapter, messages=messages)
    assert error is None
    second = server.requests[1].json()["input"]
    assert [item["type"] for item in second] == [
        "message",
        "reasoning",
        "message",
        "function_call",
        "function_call_output",
    ]
    assert second[1]["id"] == "rs_7"
    assert second[1]["encrypted_content"] == "gAAAAABpQ-enc"
    assert (second[3]["call_id"], second[3]["arguments"]) == (
        "call_k2",
        '{"city":"Lyon"}',
    )
    assert second[4] == {
        "type": "function_call_output",
        "call_id": "call_k2",
        "output": "sunny",
    }
