"""OpenAICompatAdapter failures over real loopback HTTP: the error bodies of
OpenAI, vLLM, llama.cpp and Ollama (as each server sends them), the three
meanings of a 429, retry hints, credentials, and a server that rejects
``stream_options``. Each failure is checked as raised and as the runtime's one
``error`` finish."""

from __future__ import annotations

import json
import traceback
from typing import Any

import pytest

from dsh_llm.adapters.openai_compat import OpenAICompatAdapter
from dsh_llm.errors import ERROR_CODES
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import Finish
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import create_user_message
from dsh_llm.retry import DEFAULT_RETRY_POLICY
from dsh_llm.runtime import LlmRuntime
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import RecordedRequest
from dsh_llm.testing import Reply
from dsh_llm.testing import sse_events
from dsh_llm.validator import validate_stream

from .chat_chunks import finish
from .chat_chunks import text

ROUTE = "local"


def _options(**fields: Any) -> GenerateOptions:
    fields.setdefault("messages", (create_user_message("hi"),))
    return GenerateOptions(provider=ROUTE, model="m", **fields)


def _error_reply(status: int, body: Any, **headers: str) -> Reply:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return Reply(
        status=status,
        reason="Error",
        headers={"content-type": "application/json", **headers},
        body=data,
        framing="length",
    )


def _failure(server: LoopbackServer, reply: Reply, **options: Any) -> LlmError:
    server.enqueue(reply)
    with OpenAICompatAdapter(f"{server.url}/v1", **options) as adapter:
        stream = adapter.stream(_options())
        with pytest.raises(LlmError) as caught:
            next(stream)
    return caught.value


def _openai_error(message: str, kind: str, code: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


# --- the three 429s -------------------------------------------------------------------


def test_a_rate_limit_429_keeps_the_retry_hint_from_retry_after_ms(server):
    body = _openai_error(
        "Rate limit reached for gpt-x on requests per min (RPM): Limit 3, Used 3. "
        "Please try again in 1.2s.",
        "requests",
        "rate_limit_exceeded",
    )
    error = _failure(
        server,
        _error_reply(
            429,
            body,
            **{
                "retry-after-ms": "1200",
                "retry-after": "2",
                "x-request-id": "req_abc",
            },
        ),
    )
    assert error.code == ErrorCode.RATE_LIMIT
    assert error.failure.provider_retry_after_ms == 1200
    assert error.failure.request_id == "req_abc"
    assert error.status == 429
    assert ERROR_CODES[ErrorCode.RATE_LIMIT].retry_may_help


def test_a_rate_limit_429_with_retry_after_seconds(server):
    body = _openai_error("Rate limit reached", "tokens", "rate_limit_exceeded")
    error = _failure(server, _error_reply(429, body, **{"retry-after": "3"}))
    assert (error.code, error.failure.provider_retry_after_ms) == ("RATE_LIMIT", 3000)


def test_insufficient_quota_429_is_quota_and_not_retried(server):
    body = _openai_error(
        "You exceeded your current quota, please check your plan and billing details.",
        "insufficient_quota",
        "insufficient_quota",
    )
    error = _failure(server, _error_reply(429, body))
    assert error.code == ErrorCode.QUOTA
    assert not ERROR_CODES[ErrorCode.QUOTA].retry_may_help
    assert ErrorCode.QUOTA not in DEFAULT_RETRY_POLICY.retryable_codes


def test_request_too_large_429_is_invalid_request(server):
    body = _openai_error(
        "Request too large for gpt-x in organization org-1 on tokens per min (TPM): "
        "Limit 30000, Requested 52011.",
        "tokens",
        "rate_limit_exceeded",
    )
    error = _failure(server, _error_reply(429, body, **{"retry-after": "1"}))
    assert (error.code, error.status) == ("INVALID_REQUEST", 429)
    assert error.message.startswith("Request too large")
    assert ErrorCode.INVALID_REQUEST not in DEFAULT_RETRY_POLICY.retryable_codes


# --- other statuses and bodies --------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "body", "code", "message"),
    [
        (
            400,
            _openai_error(
                "This model's maximum context length is 128000 tokens. However, your "
                "messages resulted in 130000 tokens.",
                "invalid_request_error",
                "context_length_exceeded",
            ),
            "CONTEXT_WINDOW_EXCEEDED",
            "This model's maximum context length is 128000 tokens. However, your "
            "messages resulted in 130000 tokens.",
        ),
        (
            400,
            {
                "error": {
                    "code": 400,
                    "message": "the request exceeds the available context size, try "
                    "increasing it",
                    "type": "exceed_context_size_error",
                }
            },
            "CONTEXT_WINDOW_EXCEEDED",
            "the request exceeds the available context size, try increasing it",
        ),
        (
            400,
            {
                "object": "error",
                "message": "temperature must be non-negative",
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            },
            "INVALID_REQUEST",
            "temperature must be non-negative",
        ),
        (
            401,
            _openai_error(
                "Incorrect API key provided.",
                "invalid_request_error",
                "invalid_api_key",
            ),
            "AUTH",
            "Incorrect API key provided.",
        ),
        (
            401,
            {
                "error": {
                    "code": 401,
                    "message": "Invalid API Key",
                    "type": "authentication_error",
                }
            },
            "AUTH",
            "Invalid API Key",
        ),
        (
            403,
            _openai_error(
                "Country, region, or territory not supported",
                "request_forbidden",
                "unsupported_country_region_territory",
            ),
            "AUTH",
            "Country, region, or territory not supported",
        ),
        (
            404,
            {
                "error": {
                    "message": 'model "qwen3:8b" not found, try pulling it first',
                    "type": "not_found_error",
                    "param": None,
                    "code": None,
                }
            },
            "HTTP_404",
            'model "qwen3:8b" not found, try pulling it first',
        ),
        (
            500,
            {
                "error": {
                    "code": 500,
                    "message": "Cannot use tools with stream",
                    "type": "server_error",
                }
            },
            "SERVER",
            "Cannot use tools with stream",
        ),
        (
            503,
            {
                "error": {
                    "code": 503,
                    "message": "Loading model",
                    "type": "unavailable_error",
                }
            },
            "SERVER",
            "Loading model",
        ),
        (
            502,
            b"<html>Bad Gateway</html>",
            "SERVER",
            "OpenAI-compatible API error (HTTP 502)",
        ),
    ],
    ids=[
        "openai-context",
        "llamacpp-context-int-code",
        "vllm-flat",
        "openai-401",
        "llamacpp-401",
        "openai-403",
        "ollama-404",
        "llamacpp-500",
        "llamacpp-loading-503",
        "proxy-502-html",
    ],
)
def test_http_error_bodies_are_classified(server, status, body, code, message):
    error = _failure(server, _error_reply(status, body))
    assert (error.code, error.message, error.status) == (code, message, status)


def test_a_http_error_through_the_runtime_is_one_error_finish(server):
    body = _openai_error("Rate limit reached", "requests", "rate_limit_exceeded")
    server.enqueue(_error_reply(429, body, **{"retry-after-ms": "250"}))
    runtime = LlmRuntime()
    with OpenAICompatAdapter(f"{server.url}/v1") as adapter:
        runtime.register_adapter([ROUTE], adapter)
        (chunk,) = list(validate_stream(runtime.stream(_options())))
    assert isinstance(chunk, Finish)
    failure = chunk.reason.failure
    assert failure is not None
    assert (failure.code, failure.status, failure.provider_retry_after_ms) == (
        "RATE_LIMIT",
        429,
        250,
    )


def test_the_display_name_is_used_in_messages(server):
    error = _failure(server, _error_reply(500, b""), display_name="vLLM (gpu-1)")
    assert error.message == "vLLM (gpu-1) API error (HTTP 500)"


def test_an_unreachable_server_is_transport_naming_the_redacted_base_url():
    with (
        OpenAICompatAdapter("http://user:pw@127.0.0.1:1/v1") as adapter,
        pytest.raises(LlmError) as caught,
    ):
        next(adapter.stream(_options()))
    assert caught.value.code == ErrorCode.TRANSPORT
    assert caught.value.message == (
        "OpenAI-compatible API request to http://***@127.0.0.1:1/v1 failed: "
        "connection refused"
    )
    assert "pw" not in caught.value.message


# --- credentials ----------------------------------------------------------------------


def test_a_named_but_unset_key_variable_is_missing_credential_without_a_request(
    server,
):
    for environ in ({}, {"MY_KEY": ""}):
        with (
            OpenAICompatAdapter(
                f"{server.url}/v1", api_key_env="MY_KEY", environ=environ
            ) as adapter,
            pytest.raises(LlmError) as caught,
        ):
            next(adapter.stream(_options()))
        assert caught.value.code == ErrorCode.MISSING_CREDENTIAL
        assert "MY_KEY" in caught.value.message
        assert f'route "{ROUTE}"' in caught.value.message
    assert server.requests == ()


def test_a_key_variable_no_header_can_carry_is_invalid_credential(server):
    with (
        OpenAICompatAdapter(
            f"{server.url}/v1", api_key_env="MY_KEY", environ={"MY_KEY": "sk bad\u00e9"}
        ) as adapter,
        pytest.raises(LlmError) as caught,
    ):
        next(adapter.stream(_options()))
    assert caught.value.code == ErrorCode.INVALID_CREDENTIAL
    assert "sk bad" not in caught.value.message
    assert server.requests == ()


def test_the_key_variable_is_read_at_each_request(server):
    environ: dict[str, str] = {}
    server.handler = lambda request: Reply(body=sse_events([text("ok"), finish()]))
    with OpenAICompatAdapter(
        f"{server.url}/v1", api_key_env="MY_KEY", environ=environ
    ) as adapter:
        with pytest.raises(LlmError):
            next(adapter.stream(_options()))
        environ["MY_KEY"] = "sk-first"
        list(adapter.stream(_options()))
        environ["MY_KEY"] = "sk-second"
        list(adapter.stream(_options()))
    assert [r.header("authorization") for r in server.requests] == [
        "Bearer sk-first",
        "Bearer sk-second",
    ]


def test_a_local_server_gets_no_authorization_header(server):
    server.enqueue(Reply(body=sse_events([text("ok"), finish()])))
    with OpenAICompatAdapter(f"{server.url}/v1") as adapter:
        list(validate_stream(adapter.stream(_options())))
    (request,) = server.requests
    assert request.header("authorization") is None
    assert request.path == "/v1/chat/completions"


# --- servers that reject stream_options -----------------------------------------------


def _strict_server(request: RecordedRequest) -> Reply:
    """A server (older vLLM, some proxies) that rejects ``stream_options``."""
    if "stream_options" in request.json():
        return _error_reply(
            400,
            {
                "object": "error",
                "message": "[{'type': 'extra_forbidden', 'loc': ('body', "
                "'stream_options'), 'msg': 'Extra inputs are not permitted'}]",
                "type": "BadRequestError",
                "code": 400,
            },
        )
    return Reply(body=sse_events([text("fine"), finish()]))


def test_include_usage_false_serves_a_server_that_rejects_stream_options(server):
    server.handler = _strict_server
    with (
        OpenAICompatAdapter(f"{server.url}/v1") as adapter,
        pytest.raises(LlmError) as caught,
    ):
        next(adapter.stream(_options()))
    assert caught.value.code == ErrorCode.INVALID_REQUEST
    with OpenAICompatAdapter(f"{server.url}/v1", include_usage=False) as adapter:
        chunks = list(validate_stream(adapter.stream(_options()), strict=True))
    assert [c.type for c in chunks][-2:] == ["usage", "finish"]
    assert "stream_options" not in server.requests[-1].json()


# --- secrets the server echoes back ---------------------------------------------------

KEY = "sk-SUPERSECRETKEY1234567890"


def _printed(error: BaseException) -> str:
    """Every string a log could show of ``error`` and its cause chain."""
    parts = ["".join(traceback.format_exception(error))]
    node: BaseException | None = error
    while node is not None:
        parts += [str(node), repr(node)]
        node = node.__cause__
    return "\n".join(parts)


def _key_echo_reply() -> Reply:
    return _error_reply(
        401,
        _openai_error(
            f"Incorrect API key provided: {KEY}", "invalid_request_error", "invalid_key"
        ),
    )


@pytest.mark.parametrize(
    ("base", "options"),
    [
        ("{url}/v1", {"api_key": KEY}),
        ("{url}/v1", {"api_key_env": "LAB_KEY", "environ": {"LAB_KEY": KEY}}),
        ("{url}/v1", {"headers": {"X-Api-Key": KEY}}),
        ("{url}/v1", {"headers": {"X-Gateway-Token": f"Token {KEY}"}}),
        ("http://user:{key}@{host}/v1", {}),
    ],
    ids=["api-key", "api-key-env", "x-api-key", "token-header", "url-password"],
)
def test_a_secret_the_server_echoes_is_redacted_from_the_error(server, base, options):
    url = base.format(url=server.url, key=KEY, host=server.url.split("//")[1])
    server.enqueue(_key_echo_reply(), _key_echo_reply())
    with OpenAICompatAdapter(url, **options) as adapter:
        with pytest.raises(LlmError) as caught:
            next(adapter.stream(_options()))
        runtime = LlmRuntime()
        runtime.register_adapter([ROUTE], adapter)
        (end,) = list(validate_stream(runtime.stream(_options())))
    error = caught.value
    assert (error.code, error.message) == ("AUTH", "Incorrect API key provided: ***")
    assert KEY not in _printed(error)
    assert isinstance(end, Finish)
    assert end.reason.failure is not None
    assert end.reason.failure.message == "Incorrect API key provided: ***"
    assert KEY not in repr(end)


def test_an_in_stream_error_echoing_the_key_is_redacted(server):
    error = {"error": {"message": f"key {KEY} was revoked", "type": "auth_error"}}
    server.enqueue(Reply(body=sse_events([text("partial"), error])))
    runtime = LlmRuntime()
    with OpenAICompatAdapter(f"{server.url}/v1", api_key=KEY) as adapter:
        runtime.register_adapter([ROUTE], adapter)
        chunks = list(validate_stream(runtime.stream(_options())))
    end = chunks[-1]
    assert isinstance(end, Finish)
    assert end.reason.failure is not None
    assert end.reason.failure.message == "key *** was revoked"
    assert KEY not in repr(chunks)


# --- a 200 answer that is not an event stream -----------------------------------------


def test_a_json_completion_instead_of_a_stream_is_malformed_response(server):
    body = {"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}]}
    reply = Reply(
        headers={"content-type": "application/json"},
        body=json.dumps(body).encode(),
        framing="length",
    )
    error = _failure(server, reply)
    assert error.code == ErrorCode.MALFORMED_RESPONSE
    assert error.message == (
        "OpenAI-compatible API answered application/json instead of an event "
        "stream (does the server support streaming?)"
    )


def test_an_html_page_instead_of_a_stream_is_malformed_response(server):
    reply = Reply(
        headers={"content-type": "text/html; charset=utf-8"},
        body=b"<html><body>Welcome to the proxy</body></html>",
    )
    error = _failure(server, reply, display_name="gateway")
    assert error.code == ErrorCode.MALFORMED_RESPONSE
    assert error.message.startswith("gateway API answered text/html instead of")


def test_a_json_error_report_with_status_200_is_classified(server):
    body = {"object": "error", "message": "model not loaded", "code": 503}
    reply = Reply(
        headers={"content-type": "application/json"},
        body=json.dumps(body).encode(),
        framing="length",
    )
    error = _failure(server, reply)
    assert (error.code, error.message, error.status) == (
        "SERVER",
        "model not loaded",
        503,
    )
