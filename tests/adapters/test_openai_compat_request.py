"""What OpenAICompatAdapter sends, checked with ``responses``: the URL, headers and
credentials, the body (key order, ``stream_options``, the output-cap field,
``tool_choice``, reasoning effort and passback), and the refusals that happen
before any I/O."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import responses

from dsh_llm.adapters.openai_compat import OpenAICompatAdapter
from dsh_llm.credentials import Secret
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import ImageBlock
from dsh_llm.protocol import ImageRef
from dsh_llm.protocol import ReasoningBlock
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.protocol import ToolSchema
from dsh_llm.protocol import create_assistant_message
from dsh_llm.protocol import create_tool_result_message
from dsh_llm.protocol import create_user_message
from dsh_llm.testing import sse_body
from dsh_llm.transport.attribution import user_agent
from dsh_llm.validator import validate_stream

from .chat_chunks import finish
from .chat_chunks import text

BASE = "http://gpu-box.test:8000/v1"
SSE = sse_body([text("ok"), finish()])
TOOLS = (
    ToolSchema(
        name="get_weather",
        description="Weather for a city",
        parameters={"type": "object", "properties": {"city": {"type": "string"}}},
    ),
    ToolSchema(name="now", description="The time", parameters={"type": "object"}),
)


@pytest.fixture
def mocked() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        for url in (
            f"{BASE}/chat/completions",
            "https://gateway.test/openai/deployments/d1/chat/completions",
            "http://localhost:11434/chat/completions",
        ):
            mock.add(responses.POST, url, body=SSE, content_type="text/event-stream")
        yield mock


def _options(**fields: Any) -> GenerateOptions:
    fields.setdefault("messages", (create_user_message("hi"),))
    fields.setdefault("model", "qwen3-8b")
    return GenerateOptions(provider="local", **fields)


def _send(
    mock: responses.RequestsMock,
    adapter: OpenAICompatAdapter | None = None,
    **fields: Any,
) -> Any:
    """Stream one request; return the recorded ``PreparedRequest``."""
    with adapter or OpenAICompatAdapter(BASE) as used:
        list(validate_stream(used.stream(_options(**fields)), strict=True))
    return mock.calls[-1].request


def _body(request: Any) -> dict[str, Any]:
    assert isinstance(request.body, bytes)
    body: dict[str, Any] = json.loads(request.body)
    return body


def _refused(adapter: OpenAICompatAdapter, **fields: Any) -> LlmError:
    with adapter, pytest.raises(LlmError) as caught:
        next(adapter.stream(_options(**fields)))
    return caught.value


# --- URL, headers, credentials --------------------------------------------------------


@pytest.mark.parametrize(
    ("base", "url"),
    [
        (BASE, f"{BASE}/chat/completions"),
        (f"{BASE}/", f"{BASE}/chat/completions"),
        (f"{BASE}//", f"{BASE}/chat/completions"),
        ("http://localhost:11434", "http://localhost:11434/chat/completions"),
        (
            "https://gateway.test/openai/deployments/d1?api-version=2025-01-01",
            "https://gateway.test/openai/deployments/d1/chat/completions"
            "?api-version=2025-01-01",
        ),
    ],
)
def test_chat_completions_is_appended_with_exactly_one_slash(mocked, base, url):
    request = _send(mocked, OpenAICompatAdapter(base))
    assert request.url == url


def test_headers_without_a_key(mocked):
    request = _send(mocked)
    headers = {k.lower(): v for k, v in request.headers.items()}
    assert "authorization" not in headers
    assert headers["user-agent"] == user_agent()
    assert headers["accept"] == "text/event-stream"
    assert headers["accept-encoding"] == "identity"
    assert headers["content-type"] == "application/json"


@pytest.mark.parametrize(
    "key", ["sk-explicit", Secret("sk-explicit"), "  sk-explicit\n"]
)
def test_an_explicit_key_is_a_bearer_token(mocked, key):
    request = _send(mocked, OpenAICompatAdapter(BASE, api_key=key))
    assert request.headers["authorization"] == "Bearer sk-explicit"


def test_a_key_from_the_environment(mocked):
    adapter = OpenAICompatAdapter(
        BASE, api_key_env="OPENROUTER_API_KEY", environ={"OPENROUTER_API_KEY": "sk-or"}
    )
    assert _send(mocked, adapter).headers["authorization"] == "Bearer sk-or"


def test_extra_headers_are_sent_beside_the_attribution(mocked):
    adapter = OpenAICompatAdapter(
        BASE,
        api_key="sk-x",
        headers={"HTTP-Referer": "https://example.test", "X-Title": "My App"},
    )
    request = _send(mocked, adapter)
    assert request.headers["http-referer"] == "https://example.test"
    assert request.headers["x-title"] == "My App"
    assert request.headers["user-agent"] == user_agent()
    assert request.headers["authorization"] == "Bearer sk-x"


def test_a_gateway_header_may_carry_the_credential_instead(mocked):
    adapter = OpenAICompatAdapter(BASE, headers={"api-key": "azure-secret"})
    request = _send(mocked, adapter)
    assert request.headers["api-key"] == "azure-secret"
    assert "authorization" not in {k.lower() for k in request.headers}


# --- body -----------------------------------------------------------------------------


def test_body_key_order_and_defaults(mocked):
    body = _body(
        _send(mocked, tools=TOOLS, tool_choice="auto", temperature=0.2, stop=("END",))
    )
    assert list(body) == [
        "model",
        "messages",
        "stream",
        "stream_options",
        "tools",
        "tool_choice",
        "temperature",
        "stop",
    ]
    assert body["model"] == "qwen3-8b"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["tools"][0] == {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
            },
        },
    }


def test_include_usage_false_leaves_stream_options_out(mocked):
    body = _body(_send(mocked, OpenAICompatAdapter(BASE, include_usage=False)))
    assert list(body) == ["model", "messages", "stream"]


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        ("now", {"type": "function", "function": {"name": "now"}}),
    ],
)
def test_tool_choice_values(mocked, choice, wire):
    assert _body(_send(mocked, tools=TOOLS, tool_choice=choice))["tool_choice"] == wire


def test_no_tool_choice_is_omitted(mocked):
    body = _body(_send(mocked, tools=TOOLS))
    assert "tool_choice" not in body
    assert len(body["tools"]) == 2


def test_the_output_cap_is_the_request_then_the_catalog_then_absent(mocked):
    adapter = OpenAICompatAdapter(
        BASE, models=[{"id": "qwen3-8b", "maxTokens": 4096}, "other"]
    )
    with adapter:
        for fields, expected in (
            ({"max_tokens": 100}, 100),
            ({}, 4096),
            ({"model": "other"}, None),
            ({"model": "unlisted"}, None),
        ):
            list(adapter.stream(_options(**fields)))
            assert _body(mocked.calls[-1].request).get("max_tokens") == expected


def test_the_output_cap_field_can_be_max_completion_tokens(mocked):
    adapter = OpenAICompatAdapter(BASE, max_tokens_field="max_completion_tokens")
    body = _body(_send(mocked, adapter, max_tokens=64))
    assert body["max_completion_tokens"] == 64
    assert "max_tokens" not in body


def test_a_configured_reasoning_effort_is_passed_through(mocked):
    adapter = OpenAICompatAdapter(BASE, reasoning_efforts=["low", "medium", "high"])
    body = _body(_send(mocked, adapter, reasoning_effort="medium"))
    assert body["reasoning_effort"] == "medium"
    assert list(body)[:5] == [
        "model",
        "messages",
        "stream",
        "stream_options",
        "reasoning_effort",
    ]


def test_no_effort_requested_sends_none(mocked):
    adapter = OpenAICompatAdapter(BASE, reasoning_efforts=["high"])
    assert "reasoning_effort" not in _body(_send(mocked, adapter))


@pytest.mark.parametrize("efforts", [None, ["low", "high"]])
def test_an_effort_the_server_is_not_configured_for_raises_before_io(mocked, efforts):
    error = _refused(
        OpenAICompatAdapter(BASE, reasoning_efforts=efforts), reasoning_effort="max"
    )
    assert error.code == ErrorCode.UNSUPPORTED_REASONING_EFFORT
    assert '"max"' in error.message
    assert len(mocked.calls) == 0


def _history() -> tuple[Any, ...]:
    return (
        create_user_message("weather?"),
        create_assistant_message(
            (
                ReasoningBlock(text="use the tool"),
                TextBlock(text="Checking."),
                ToolCallBlock(
                    id="call_1", name="get_weather", arguments='{"city":"Oslo"}'
                ),
            ),
            provider="local",
            model="qwen3-8b",
        ),
        create_tool_result_message("call_1", "12C"),
    )


def test_reasoning_is_not_sent_back_by_default(mocked):
    messages = _body(_send(mocked, messages=_history(), tools=TOOLS))["messages"]
    assert messages == [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "12C"},
    ]


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_reasoning_goes_back_in_the_configured_field(mocked, field):
    adapter = OpenAICompatAdapter(BASE, reasoning_passback_field=field)
    messages = _body(_send(mocked, adapter, messages=_history(), tools=TOOLS))[
        "messages"
    ]
    assert messages[1][field] == "use the tool"


def test_the_system_prompt_comes_first(mocked):
    messages = _body(_send(mocked, system="Be brief."))["messages"]
    assert messages[0] == {"role": "system", "content": "Be brief."}


def test_session_id_and_purpose_travel_as_documented_headers(mocked):
    request = _send(mocked, session_id="s-123", purpose="compaction")
    assert b"s-123" not in request.body
    assert b"compaction" not in request.body
    assert request.headers["x-session-id"] == "s-123"
    assert request.headers["x-dsh-llm-purpose"] == "compaction"
    assert not any(k.lower().startswith("x-deepseek") for k in request.headers)


def test_no_routing_header_without_session_id_or_purpose(mocked):
    request = _send(mocked)
    assert "x-session-id" not in request.headers
    assert "x-dsh-llm-purpose" not in request.headers


def test_a_session_id_no_header_can_carry_is_invalid_request(mocked):
    with pytest.raises(LlmError) as caught:
        _send(mocked, session_id="s 1\n")
    assert caught.value.code == ErrorCode.INVALID_REQUEST


def test_an_image_is_unsupported_content_before_any_io(mocked):
    image = ImageBlock(
        attachment=ImageRef(
            attachment_id="sha256:" + "b" * 64,
            media_type="image/png",
            bytes=10,
            width=2,
            height=2,
        )
    )
    error = _refused(
        OpenAICompatAdapter(BASE, api_key_env="UNSET_KEY", environ={}),
        messages=(create_user_message([image]),),
    )
    # The content is refused before the missing key is even looked at.
    assert error.code == ErrorCode.UNSUPPORTED_CONTENT
    assert len(mocked.calls) == 0
    # And before an effort the adapter does not offer (docs/local-servers.md).
    error = _refused(
        OpenAICompatAdapter(BASE, environ={}),
        messages=(create_user_message([image]),),
        reasoning_effort="high",
    )
    assert error.code == ErrorCode.UNSUPPORTED_CONTENT
