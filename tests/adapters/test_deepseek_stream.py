"""DeepSeekAdapter end to end against the loopback server: recorded streams, the
DeepSeek wire edge cases (keep-alive comments, an empty first reasoning chunk,
a trailing usage-only chunk...), HTTP and transport failures
(SPEC 8.6, 8.7), the watchdog and cancellation (SPEC 11 items 64, 67, 69-73).
Every stream is checked with ``validate_stream(strict=True)``."""

from __future__ import annotations

import json
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import pytest

from dsh_llm.adapters.deepseek import PROVIDER_ROUTE
from dsh_llm.adapters.deepseek import DeepSeekAdapter
from dsh_llm.assembler import collect
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import create_user_message
from dsh_llm.runtime import LlmRuntime
from dsh_llm.serde import chunk_to_dict
from dsh_llm.serde import read_jsonl
from dsh_llm.signal import AbortController
from dsh_llm.testing import Cut
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Pause
from dsh_llm.testing import Reply
from dsh_llm.testing import Stall
from dsh_llm.testing import sse_events
from dsh_llm.transport.attribution import user_agent
from dsh_llm.validator import validate_stream

from ..proxy_env import use_proxy
from .chat_chunks import FIRST
from .chat_chunks import finish
from .chat_chunks import only_usage
from .chat_chunks import reasoning
from .chat_chunks import text
from .chat_chunks import tool
from .chat_chunks import usage

FIXTURES = Path(__file__).parent.parent / "fixtures" / "deepseek"
NAMES = sorted(p.stem for p in FIXTURES.glob("*.sse"))


def _adapter(server: LoopbackServer, **options: Any) -> DeepSeekAdapter:
    options.setdefault("environ", {"DEEPSEEK_API_KEY": "sk-test"})
    return DeepSeekAdapter(base_url=server.url, **options)


def _options(**fields: Any) -> GenerateOptions:
    fields.setdefault("messages", (create_user_message("hi"),))
    return GenerateOptions(provider=PROVIDER_ROUTE, model="deepseek-v4-flash", **fields)


def _stream(adapter: DeepSeekAdapter, **fields: Any) -> list[Any]:
    return list(validate_stream(adapter.stream(_options(**fields))))


def _consumed(adapter: DeepSeekAdapter) -> list[Any]:
    """What a runtime consumer sees: the adapter's chunks, ended by the error
    finish of an ``LlmError`` it raises; strictly validated."""
    chunks: list[Any] = []
    try:
        chunks.extend(adapter.stream(_options()))
    except LlmError as error:
        chunks.append(Finish(reason=FinishReason.error(error.failure)))
    return list(validate_stream(chunks, strict=True))


def _failure(adapter: DeepSeekAdapter, **fields: Any) -> LlmError:
    chunks: list[Any] = []

    def drain() -> None:
        chunks.extend(validate_stream(adapter.stream(_options(**fields))))

    with pytest.raises(LlmError) as caught:
        drain()
    caught.value.chunks = chunks  # type: ignore[attr-defined]
    return caught.value


# --- recorded streams -----------------------------------------------------------------


@pytest.mark.parametrize("framing", ["chunked", "close", "length"])
@pytest.mark.parametrize("split", [None, 1], ids=["whole", "1-byte"])
@pytest.mark.parametrize("name", NAMES)
def test_recorded_stream_translates_to_its_expected_chunks(
    server, name, split, framing
):
    body = (FIXTURES / f"{name}.sse").read_bytes()
    expected = [
        chunk_to_dict(c) for c in read_jsonl(str(FIXTURES / f"{name}.chunks.jsonl"))
    ]
    server.enqueue(Reply(body=body, framing=framing, split=split))
    with _adapter(server) as adapter:
        assert [chunk_to_dict(c) for c in _consumed(adapter)] == expected


def test_runtime_stream_shows_the_text_chunk_kinds_and_sends_attribution(server):
    server.enqueue(
        Reply(body=sse_events([FIRST, text("hello"), finish("stop", usage(3, 1))]))
    )
    runtime = LlmRuntime()
    with _adapter(server) as adapter:
        runtime.register_adapter([PROVIDER_ROUTE], adapter)
        chunks = list(validate_stream(runtime.stream(_options())))
    assert [c.type for c in chunks] == [
        "block-start",
        "text-delta",
        "block-end",
        "usage",
        "finish",
    ]
    result = collect(chunks)
    assert result.text == "hello"
    assert (result.usage.input_tokens, result.usage.output_tokens) == (3, 1)  # type: ignore[union-attr]
    (request,) = server.requests
    body = request.json()
    assert (body["model"], body["max_tokens"], body["reasoning_effort"]) == (
        "deepseek-v4-flash",
        256000,
        "high",
    )
    assert body["stream_options"] == {"include_usage": True}
    assert request.header("user-agent") == user_agent()
    assert request.header("authorization") == "Bearer sk-test"
    names = {name for name, _ in request.headers}
    assert not any(
        n.startswith(("x-deepseek-harness", "http-referer", "x-title")) for n in names
    )


# --- DeepSeek wire edge cases --------------------------------------------------------


def test_keepalive_comments_before_the_first_token_emit_nothing(server):
    body = (
        b": keep-alive\n\n",
        Pause(seconds=0.02),
        b": keep-alive\n\n",
        *sse_events([FIRST, text("ok"), finish()]),
    )
    server.enqueue(Reply(body=body))
    with _adapter(server) as adapter:
        assert [c.type for c in _stream(adapter)] == [
            "block-start",
            "text-delta",
            "block-end",
            "usage",
            "finish",
        ]


def test_null_content_and_empty_reasoning_open_no_block_and_no_empty_delta(server):
    payloads = [FIRST, reasoning(""), text(""), text("x"), finish()]
    server.enqueue(Reply(body=sse_events(payloads)))
    with _adapter(server) as adapter:
        chunks = _stream(adapter)
    assert [c.type for c in chunks].count("text-delta") == 1
    assert all(getattr(c, "text", "x") != "" for c in chunks)


def test_a_stream_that_stops_mid_reasoning_with_the_socket_open_times_out(server):
    server.enqueue(
        Reply(
            body=(*sse_events([FIRST, reasoning("thinking...")], done=False), Stall())
        )
    )
    with _adapter(server, stream_idle_timeout_ms=150) as adapter:
        error = _failure(adapter)
    assert error.code == ErrorCode.TIMEOUT
    assert error.message == "DeepSeek stream idle timeout after 150ms"
    assert [c.type for c in error.chunks] == ["block-start", "reasoning-delta"]  # type: ignore[attr-defined]


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
        error = _failure(adapter)
    assert error.code == ErrorCode.TIMEOUT
    assert "only keep-alive comments" in error.message


def test_sse_comments_keep_an_idle_read_alive(server):
    # Four quiet spells of 200 ms, each a third of the idle bound, 800 ms in all.
    body = (
        *(step for _ in range(4) for step in (b": keep-alive\n\n", Pause(seconds=0.2))),
        *sse_events([FIRST, text("late"), finish()]),
    )
    server.enqueue(Reply(body=body))
    with _adapter(server, stream_idle_timeout_ms=600) as adapter:
        assert [c.type for c in _stream(adapter)] == [
            "block-start",
            "text-delta",
            "block-end",
            "usage",
            "finish",
        ]


def test_the_idle_watchdog_closes_a_silent_body(server):
    server.enqueue(Reply(body=(Stall(),)))
    with _adapter(server, stream_idle_timeout_ms=120) as adapter:
        assert _failure(adapter).code == ErrorCode.TIMEOUT


def test_total_timeout_ends_a_stream_that_never_finishes(server):
    server.enqueue(
        Reply(body=sse_events([text("x")] * 200, done=False), write_delay=0.01)
    )
    with _adapter(server, stream_idle_timeout_ms=1000, total_timeout_ms=150) as adapter:
        error = _failure(adapter)
    assert error.code == ErrorCode.TIMEOUT
    assert error.message == "DeepSeek stream exceeded its total timeout of 150ms"


def test_tool_calls_after_reasoning_in_thinking_mode(server):
    server.enqueue(
        Reply(
            body=sse_events(
                [
                    FIRST,
                    reasoning("r"),
                    tool(0, id="call_0", name="f", args=""),
                    tool(0, args='{"a":1}'),
                    finish("tool_calls", usage(9, 4)),
                ]
            ),
            split=3,
        )
    )
    with _adapter(server) as adapter:
        result = collect(_stream(adapter))
    assert result.reasoning == "r"
    assert [(c.id, c.name, c.arguments) for c in result.tool_calls] == [
        ("call_0", "f", '{"a":1}')
    ]
    assert result.finish.kind == "tool-calls"


# --- HTTP errors (SPEC 8.6) -----------------------------------------------------------


def _error_reply(status: int, body: bytes, **headers: str) -> Reply:
    return Reply(
        status=status,
        reason="Error",
        headers={"content-type": "application/json", **headers},
        body=body,
        framing="length",
    )


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (401, "AUTH"),
        (403, "AUTH"),
        (429, "RATE_LIMIT"),
        (400, "INVALID_REQUEST"),
        (422, "INVALID_REQUEST"),
        (500, "SERVER"),
        (503, "SERVER"),
        (418, "HTTP_418"),
    ],
)
def test_http_status_becomes_an_error_finish_with_the_body_message(
    server, status, code
):
    error = {"message": f"failed with {status}", "type": "t", "code": "c"}
    body = json.dumps({"error": error}).encode()
    server.enqueue(_error_reply(status, body))
    runtime = LlmRuntime()
    with _adapter(server) as adapter:
        runtime.register_adapter([PROVIDER_ROUTE], adapter)
        (chunk,) = list(validate_stream(runtime.stream(_options())))
    assert isinstance(chunk, Finish)
    assert chunk.reason.kind == "error"
    failure = chunk.reason.failure
    assert failure is not None
    assert (failure.message, failure.code, failure.status) == (
        f"failed with {status}",
        code,
        status,
    )


def test_context_overflow_400_is_context_window_exceeded(server):
    body = (
        b'{"error":{"message":"This model\'s maximum context length is 131072 '
        b'tokens. However, you requested 140000 tokens.","type":'
        b'"invalid_request_error","param":null,"code":"invalid_request_error"}}'
    )
    server.enqueue(_error_reply(400, body))
    with _adapter(server) as adapter:
        assert _failure(adapter).code == ErrorCode.CONTEXT_WINDOW_EXCEEDED


def test_missing_reasoning_passback_400_stays_invalid_request(server):
    body = (
        b'{"error":{"message":"The reasoning_content in the thinking mode must be '
        b'passed back to the API.","type":"invalid_request_error",'
        b'"code":"invalid_request_error"}}'
    )
    server.enqueue(_error_reply(400, body))
    with _adapter(server) as adapter:
        assert _failure(adapter).code == ErrorCode.INVALID_REQUEST


def test_insufficient_balance_402_is_quota(server):
    server.enqueue(
        _error_reply(
            402, b'{"error":{"message":"Insufficient Balance","type":"unknown_error"}}'
        )
    )
    with _adapter(server) as adapter:
        assert _failure(adapter).code == ErrorCode.QUOTA


def test_an_empty_error_body_uses_the_status_as_cause(server):
    server.enqueue(_error_reply(500, b""))
    with _adapter(server) as adapter:
        error = _failure(adapter)
    assert (error.code, error.message) == ("SERVER", "DeepSeek API error (HTTP 500)")
    assert str(error.__cause__) == "DeepSeek HTTP 500"


def test_retry_after_and_request_id_are_kept(server):
    server.enqueue(
        _error_reply(
            429,
            b'{"error":{"message":"slow down"}}',
            **{"retry-after": "2", "x-request-id": "req-429"},
        )
    )
    with _adapter(server) as adapter:
        error = _failure(adapter)
    assert error.failure.provider_retry_after_ms == 2000
    assert error.failure.request_id == "req-429"


# --- transport failures, abort, watchdog (SPEC 8.7) -----------------------------------


def test_an_unreachable_endpoint_is_transport_naming_the_base_url():
    with DeepSeekAdapter("k", base_url="http://127.0.0.1:1") as adapter:
        error = _failure(adapter)
    assert (error.code, error.message) == (
        "TRANSPORT",
        "DeepSeek API request to http://127.0.0.1:1 failed: connection refused",
    )
    assert error.__cause__ is not None


def test_a_pre_aborted_signal_gives_an_aborted_finish_without_a_request(server):
    controller = AbortController()
    controller.abort()
    runtime = LlmRuntime()
    with _adapter(server) as adapter:
        runtime.register_adapter([PROVIDER_ROUTE], adapter)
        (chunk,) = list(
            validate_stream(runtime.stream(_options(signal=controller.signal)))
        )
    assert chunk.reason.kind == "aborted"  # type: ignore[union-attr]
    assert chunk.reason.failure.code == "ABORTED"  # type: ignore[union-attr]
    assert server.requests == ()


def test_a_response_without_body_is_empty_response(server):
    server.enqueue(Reply(status=204, reason="No Content", framing="length"))
    with _adapter(server) as adapter:
        error = _failure(adapter)
    assert (error.code, error.message) == (
        "EMPTY_RESPONSE",
        "DeepSeek API returned no response body",
    )


def test_a_clean_close_mid_chunked_body_is_stream_closed_like_any_cut(server):
    server.enqueue(
        Reply(body=(*sse_events([text("par")], done=False), Pause(seconds=0.02), Cut()))
    )
    with _adapter(server) as adapter:
        error = _failure(adapter)
    assert error.code == ErrorCode.STREAM_CLOSED
    assert error.message == (
        f"DeepSeek API stream from {server.url} ended before the end of its chunked "
        "body"
    )


def test_a_reset_mid_body_is_transport(server):
    server.enqueue(
        Reply(
            body=(
                *sse_events([text("par")], done=False),
                Pause(seconds=0.02),
                Cut(reset=True),
            )
        )
    )
    with _adapter(server) as adapter:
        error = _failure(adapter)
    assert error.code == ErrorCode.TRANSPORT


@pytest.mark.parametrize("framing", ["chunked", "close"])
def test_done_without_a_finish_reason_is_raised_after_the_usage(server, framing):
    # [DONE] after content, no finish_reason: a cut answer, raised (never a
    # finish of the adapter's), after the usage the server already reported.
    body = sse_events([FIRST, text("Once upon"), finish(None, usage(5, 2))])
    server.enqueue(Reply(body=body, framing=framing))
    with _adapter(server) as adapter:
        error = _failure(adapter)
    assert error.code == ErrorCode.STREAM_CLOSED
    assert error.message == (
        "DeepSeek ended its stream with [DONE] but no finish_reason: the answer "
        "was cut short"
    )
    assert [c.type for c in error.chunks] == [  # type: ignore[attr-defined]
        "block-start",
        "text-delta",
        "usage",
    ]
    assert error.chunks[-1].usage.input_tokens == 5  # type: ignore[attr-defined]


@pytest.mark.parametrize("framing", ["chunked", "close"])
def test_a_body_that_ends_without_done_is_stream_closed(server, framing):
    server.enqueue(
        Reply(
            body=sse_events([FIRST, text("x"), finish()], done=False), framing=framing
        )
    )
    with _adapter(server) as adapter:
        error = _failure(adapter)
    assert error.code == ErrorCode.STREAM_CLOSED
    assert error.message == "DeepSeek stream ended before [DONE]"


@pytest.mark.parametrize("framing", ["chunked", "close"])
def test_an_empty_200_body_is_stream_closed(server, framing):
    server.enqueue(Reply(body=b"", framing=framing))
    with _adapter(server) as adapter:
        assert _failure(adapter).code == ErrorCode.STREAM_CLOSED


def test_a_truncated_final_event_is_stream_closed_not_malformed(server):
    server.enqueue(
        Reply(
            body=b'data: {"choices":[{"delta":{"content":"a"}}]}\n\ndata: {"choi',
            framing="close",
        )
    )
    with _adapter(server) as adapter:
        assert _failure(adapter).code == ErrorCode.STREAM_CLOSED


def test_a_payload_that_is_not_json_is_malformed_response(server):
    server.enqueue(Reply(body=b"data: {bad json\n\n"))
    with _adapter(server) as adapter:
        error = _failure(adapter)
    assert error.code == ErrorCode.MALFORMED_RESPONSE
    assert "malformed SSE payload" in error.message


def test_mid_stream_abort_gives_one_aborted_finish_and_closes_the_socket(server):
    server.enqueue(Reply(body=sse_events([FIRST] + [text("x")] * 50), write_delay=0.05))
    runtime = LlmRuntime()
    controller = AbortController()
    with _adapter(server) as adapter:
        runtime.register_adapter([PROVIDER_ROUTE], adapter)
        timer = threading.Timer(0.12, controller.abort)
        timer.start()
        chunks = list(
            validate_stream(runtime.stream(_options(signal=controller.signal)))
        )
        timer.join()
    finishes = [c for c in chunks if isinstance(c, Finish)]
    assert len(finishes) == 1
    assert finishes[0] is chunks[-1]
    assert finishes[0].reason.kind == "aborted"
    assert finishes[0].reason.failure.code == "ABORTED"  # type: ignore[union-attr]


def test_abort_from_another_thread_ends_a_blocked_read_promptly(server):
    server.enqueue(Reply(body=(*sse_events([FIRST, text("a")], done=False), Stall())))
    controller = AbortController()
    with _adapter(server, stream_idle_timeout_ms=60_000) as adapter:
        stream = adapter.stream(_options(signal=controller.signal))
        assert next(stream).type == "block-start"
        assert next(stream).type == "text-delta"
        threading.Timer(0.05, controller.abort).start()
        start = time.monotonic()
        with pytest.raises(LlmError) as caught:
            next(stream)
        elapsed = time.monotonic() - start
    assert caught.value.code == ErrorCode.ABORTED
    assert caught.value.message == "DeepSeek request aborted by caller"
    assert elapsed < 5  # far below the 60 s watchdog: the socket was shut down


def test_an_abort_stops_the_stream_even_when_the_rest_was_already_read(server):
    # The whole body arrives in one write, so one socket read brings every
    # event: the abort must still stop the stream at the next chunk.
    body = b"".join(sse_events([FIRST] + [text("x")] * 20 + [finish()]))
    server.enqueue(Reply(body=body))
    controller = AbortController()
    with _adapter(server) as adapter:
        stream = adapter.stream(_options(signal=controller.signal))
        assert next(stream).type == "block-start"
        assert next(stream).type == "text-delta"
        controller.abort()
        with pytest.raises(LlmError) as caught:
            next(stream)
    assert caught.value.code == ErrorCode.ABORTED
    assert caught.value.message == "DeepSeek request aborted by caller"


def test_closing_the_stream_early_closes_the_response(server):
    server.enqueue(Reply(body=(*sse_events([FIRST, text("a")], done=False), Stall())))
    with _adapter(server) as adapter:
        stream = adapter.stream(_options())
        next(stream)
        stream.close()  # type: ignore[attr-defined]
        assert server.wait_until_idle()


def test_the_connection_is_reused_between_calls(server):
    payloads = [FIRST, text("a"), finish()]
    server.enqueue(Reply(body=sse_events(payloads)), Reply(body=sse_events(payloads)))
    with _adapter(server) as adapter:
        _stream(adapter)
        _stream(adapter)
    assert server.connections_opened == 1


def test_the_connection_is_reused_through_the_runtime_and_after_a_break(server):
    payloads = [FIRST, text("a"), finish()]
    server.handler = lambda request: Reply(body=sse_events(payloads))
    runtime = LlmRuntime()
    with _adapter(server) as adapter:
        runtime.register_adapter([PROVIDER_ROUTE], adapter)
        for _ in range(3):
            # The runtime stops reading at the finish.
            assert list(runtime.stream(_options()))[-1].type == "finish"
        for chunk in adapter.stream(_options()):
            if isinstance(chunk, Finish):
                break  # a consumer that stops at the finish, too
    assert server.connections_opened == 1


def test_concurrent_streams_from_many_threads(server):
    server.handler = lambda request: Reply(
        body=sse_events(
            [FIRST, text(request.json()["messages"][0]["content"]), finish()]
        ),
        write_delay=0.005,
    )
    results: dict[int, str] = {}
    with _adapter(server, pool_maxsize=4) as adapter:

        def run(n: int) -> None:
            chunks = list(
                validate_stream(
                    adapter.stream(_options(messages=(create_user_message(f"m{n}"),)))
                )
            )
            results[n] = collect(chunks).text

        threads = [threading.Thread(target=run, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert results == {n: f"m{n}" for n in range(8)}


def test_an_in_stream_error_is_exactly_one_error_finish_through_the_runtime(server):
    body = (FIXTURES / "in_stream_error.sse").read_bytes()
    server.enqueue(Reply(body=body))
    runtime = LlmRuntime()
    with _adapter(server) as adapter:
        runtime.register_adapter([PROVIDER_ROUTE], adapter)
        chunks = list(validate_stream(runtime.stream(_options())))
    finishes = [c for c in chunks if isinstance(c, Finish)]
    assert len(finishes) == 1
    assert finishes[0].reason.failure.code == "SERVER"  # type: ignore[union-attr]


def test_a_loopback_base_url_is_reached_with_a_dead_environment_proxy(
    server, monkeypatch
):
    use_proxy(monkeypatch)  # HTTP_PROXY, HTTPS_PROXY, ALL_PROXY: nobody listens
    server.enqueue(Reply(body=sse_events([FIRST, text("local"), finish()])))
    with _adapter(server) as adapter:
        assert collect(_stream(adapter)).text == "local"
    (request,) = server.requests
    assert request.path == "/chat/completions"


# --- the end of the stream ------------------------------------------------------------


def test_the_generator_ends_promptly_when_the_body_stays_open_after_done(server):
    payloads = [FIRST, text("a"), finish()]
    server.enqueue(
        Reply(body=(*sse_events(payloads), Stall(seconds=5))),
        Reply(body=sse_events(payloads)),
    )
    with _adapter(server) as adapter:
        finished_at = ended_at = 0.0
        for item in adapter.stream(_options()):
            if isinstance(item, Finish):
                finished_at = time.monotonic()
        ended_at = time.monotonic()
        # The old drain held StopIteration back for a whole second.
        assert ended_at - finished_at < 0.5
        # The open body's connection was closed, not returned to the pool.
        assert server.wait_until_idle(2)
        _stream(adapter)
    assert server.connections_opened == 2


# --- secrets the server echoes back, answers that are not a stream --------------------

KEY = "sk-SUPERSECRETKEY1234567890"


def _printed(error: BaseException) -> str:
    parts = ["".join(traceback.format_exception(error))]
    node: BaseException | None = error
    while node is not None:
        parts += [str(node), repr(node)]
        node = node.__cause__
    return "\n".join(parts)


@pytest.mark.parametrize("source", ["api_key", "environ"])
def test_a_key_the_server_echoes_is_redacted(server, source):
    body = json.dumps(
        {"error": {"message": f"Incorrect API key provided: {KEY}", "type": "auth"}}
    ).encode()
    server.enqueue(_error_reply(401, body), _error_reply(401, body))
    options: dict[str, Any] = (
        {"api_key": KEY}
        if source == "api_key"
        else {"environ": {"DEEPSEEK_API_KEY": KEY}}
    )
    runtime = LlmRuntime()
    with _adapter(server, **options) as adapter:
        error = _failure(adapter)
        runtime.register_adapter([PROVIDER_ROUTE], adapter)
        (end,) = list(validate_stream(runtime.stream(_options())))
    assert (error.code, error.message) == ("AUTH", "Incorrect API key provided: ***")
    assert KEY not in _printed(error)
    assert isinstance(end, Finish)
    assert end.reason.failure is not None
    assert end.reason.failure.message == "Incorrect API key provided: ***"


def test_an_in_stream_error_echoing_the_key_is_redacted(server):
    error = {"error": {"message": f"key {KEY} revoked", "type": "authentication"}}
    server.enqueue(Reply(body=sse_events([FIRST, text("a"), error])))
    runtime = LlmRuntime()
    with _adapter(server, api_key=KEY) as adapter:
        runtime.register_adapter([PROVIDER_ROUTE], adapter)
        chunks = list(validate_stream(runtime.stream(_options())))
    end = chunks[-1]
    assert isinstance(end, Finish)
    assert end.reason.failure is not None
    assert (end.reason.failure.message, end.reason.failure.code) == (
        "key *** revoked",
        "AUTH",
    )


@pytest.mark.parametrize(
    ("content_type", "body", "code", "message"),
    [
        (
            "application/json",
            b'{"choices":[{"message":{"content":"hi"}}]}',
            "MALFORMED_RESPONSE",
            "DeepSeek API answered application/json instead of an event stream "
            "(does the server support streaming?)",
        ),
        (
            "text/html",
            b"<html>Bad gateway</html>",
            "MALFORMED_RESPONSE",
            "DeepSeek API answered text/html instead of an event stream "
            "(does the server support streaming?)",
        ),
        (
            "application/json",
            b'{"error":{"message":"Insufficient Balance","type":"unknown_error"}}',
            "QUOTA",
            "Insufficient Balance",
        ),
    ],
    ids=["json-completion", "html", "json-error"],
)
def test_a_200_answer_that_is_not_an_event_stream(
    server, content_type, body, code, message
):
    server.enqueue(
        Reply(headers={"content-type": content_type}, body=body, framing="length")
    )
    with _adapter(server) as adapter:
        error = _failure(adapter)
    assert (error.code, error.message) == (code, message)


def test_an_abort_after_the_last_word_keeps_the_provider_s_finish(server):
    # The finish reason and the usage came with the last word; only [DONE] is
    # missing when the caller aborts: the answer is whole (issue 26.13).
    last = b"".join(
        sse_events([text("whole"), finish("stop"), only_usage(usage(3, 2))], done=False)
    )
    server.enqueue(Reply(body=(*sse_events([FIRST], done=False), last, Stall())))
    controller = AbortController()
    chunks = []
    with _adapter(server) as adapter:
        for chunk in adapter.stream(_options(signal=controller.signal)):
            chunks.append(chunk)
            if chunk.type == "text-delta":
                controller.abort()
    assert [c.type for c in chunks] == [
        "block-start",
        "text-delta",
        "block-end",
        "usage",
        "finish",
    ]
    assert chunks[-1].reason == FinishReason.STOP
    assert chunks[-2].usage.output_tokens == 2


def test_an_abort_before_the_finish_reason_still_aborts(server):
    server.enqueue(
        Reply(body=(*sse_events([FIRST, text("half")], done=False), Stall()))
    )
    controller = AbortController()
    with _adapter(server) as adapter:
        stream = adapter.stream(_options(signal=controller.signal))
        assert [next(stream).type, next(stream).type] == ["block-start", "text-delta"]
        controller.abort()
        with pytest.raises(LlmError) as caught:
            next(stream)
    assert caught.value.code == ErrorCode.ABORTED
