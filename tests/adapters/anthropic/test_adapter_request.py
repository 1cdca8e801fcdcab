"""What AnthropicAdapter sends, checked with ``responses``: the URL (base URL from
the argument, ``ANTHROPIC_BASE_URL``, the public default), the exact headers and
bodies, the configured version, beta features and default effort, and the
refusals that happen before any I/O."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import responses

from dsh_llm.adapters import CatalogModel
from dsh_llm.adapters.anthropic import AnthropicAdapter
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import ImageBlock
from dsh_llm.protocol import ImageRef
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.protocol import ToolSchema
from dsh_llm.protocol import create_assistant_message
from dsh_llm.protocol import create_user_message
from dsh_llm.transport.attribution import user_agent
from dsh_llm.validator import validate_stream

from .replay import FIXTURES

BASE = "https://anthropic.test"
SSE = (FIXTURES / "text.sse").read_bytes()
KEY = "sk-ant-request-test"
TOOLS = (
    ToolSchema(
        name="get_weather", description="Weather", parameters={"type": "object"}
    ),
)


@pytest.fixture
def mocked() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        for root in (BASE, "https://api.anthropic.com", f"{BASE}/proxy"):
            mock.add(
                responses.POST,
                f"{root}/v1/messages",
                body=SSE,
                content_type="text/event-stream",
            )
        yield mock


def _adapter(**config: Any) -> AnthropicAdapter:
    config.setdefault("base_url", BASE)
    config.setdefault("environ", {"ANTHROPIC_API_KEY": KEY})
    return AnthropicAdapter(**config)


def _options(**fields: Any) -> GenerateOptions:
    fields.setdefault("messages", (create_user_message("hi"),))
    fields.setdefault("model", "claude-haiku-4-5")
    return GenerateOptions(provider="anthropic", **fields)


def _send(adapter: AnthropicAdapter, **fields: Any) -> None:
    with adapter:
        list(validate_stream(adapter.stream(_options(**fields)), strict=True))


def _body(mock: responses.RequestsMock, n: int = -1) -> dict[str, Any]:
    body = mock.calls[n].request.body
    assert isinstance(body, bytes)
    return json.loads(body)


def _refused(adapter: AnthropicAdapter, **fields: Any) -> LlmError:
    with adapter, pytest.raises(LlmError) as caught:
        next(adapter.stream(_options(**fields)))
    return caught.value


def test_exact_url_headers_and_body(mocked: responses.RequestsMock) -> None:
    _send(_adapter(), system="Be brief.", max_tokens=100, stop=("END",))
    request = mocked.calls[0].request
    assert request.url == f"{BASE}/v1/messages"
    headers = {name.lower(): value for name, value in request.headers.items()}
    assert headers == {
        "user-agent": user_agent(),
        "accept": "text/event-stream",
        "accept-encoding": "identity",
        "content-type": "application/json",
        "anthropic-version": "2023-06-01",
        "x-api-key": KEY,
        "connection": "keep-alive",
        "content-length": str(len(request.body)),
    }
    assert request.body == (
        b'{"model":"claude-haiku-4-5","max_tokens":100,"system":"Be brief.",'
        b'"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],'
        b'"stream":true,"stop_sequences":["END"]}'
    )


def test_the_version_beta_and_explicit_key_are_configurable(
    mocked: responses.RequestsMock,
) -> None:
    adapter = AnthropicAdapter(
        "sk-explicit",
        base_url=BASE,
        anthropic_version="2025-06-01",
        beta=["interleaved-thinking-2025-05-14", "context-1m"],
        environ={"ANTHROPIC_API_KEY": "sk-from-env"},
    )
    _send(adapter)
    headers = mocked.calls[0].request.headers
    assert headers["anthropic-version"] == "2025-06-01"
    assert headers["anthropic-beta"] == "interleaved-thinking-2025-05-14,context-1m"
    assert headers["x-api-key"] == "sk-explicit"
    assert "authorization" not in {name.lower() for name in headers}


def test_the_base_url_comes_from_the_argument_then_the_environment_then_public(
    mocked: responses.RequestsMock,
) -> None:
    env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": f"{BASE}/proxy/"}
    _send(AnthropicAdapter(environ=env))
    _send(AnthropicAdapter(base_url=BASE, environ=env))
    _send(AnthropicAdapter(environ={"ANTHROPIC_API_KEY": KEY}))
    assert [call.request.url for call in mocked.calls] == [
        f"{BASE}/proxy/v1/messages",
        f"{BASE}/v1/messages",
        "https://api.anthropic.com/v1/messages",
    ]


def test_max_tokens_is_the_requests_then_the_models_then_the_configured_default(
    mocked: responses.RequestsMock,
) -> None:
    _send(_adapter(), max_tokens=321)
    _send(_adapter(), model="claude-sonnet-5")
    _send(_adapter(), model="claude-unlisted-1")
    _send(_adapter(max_tokens=999), model="claude-unlisted-1")
    _send(
        _adapter(models=[CatalogModel(id="my-claude", max_tokens=4321)]),
        model="my-claude",
    )
    assert [_body(mocked, n)["max_tokens"] for n in range(5)] == [
        321,
        64000,
        8192,
        999,
        4321,
    ]


def test_budget_and_adaptive_thinking_and_the_configured_effort(
    mocked: responses.RequestsMock,
) -> None:
    _send(_adapter(), reasoning_effort="medium")
    _send(_adapter(), model="claude-sonnet-5", reasoning_effort="xhigh")
    _send(_adapter(reasoning_effort="low"))
    _send(_adapter(reasoning_effort="low"), reasoning_effort="off")
    bodies = [_body(mocked, n) for n in range(4)]
    assert bodies[0]["thinking"] == {"type": "enabled", "budget_tokens": 8192}
    assert (bodies[1]["thinking"], bodies[1]["output_config"]) == (
        {"type": "adaptive"},
        {"effort": "xhigh"},
    )
    assert bodies[2]["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert "thinking" not in bodies[3]


def test_tools_tool_calls_and_temperature_shapes(
    mocked: responses.RequestsMock,
) -> None:
    turn = create_assistant_message(
        (
            TextBlock(text="Let me check."),
            ToolCallBlock(id="toolu_1", name="get_weather", arguments='{"c": 1}'),
        ),
        provider="anthropic",
        model="claude-haiku-4-5",
    )
    _send(
        _adapter(),
        messages=(create_user_message("hi"), turn),
        tools=TOOLS,
        tool_choice="get_weather",
        temperature=0.25,
    )
    body = _body(mocked)
    assert body["tools"] == [
        {
            "name": "get_weather",
            "description": "Weather",
            "input_schema": {"type": "object"},
        }
    ]
    assert body["tool_choice"] == {"type": "tool", "name": "get_weather"}
    assert body["temperature"] == 0.25
    assert body["messages"][1] == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me check."},
            {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "get_weather",
                "input": {"c": 1},
            },
        ],
    }


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        (
            {"reasoning_effort": "high", "temperature": 0.5},
            ErrorCode.UNSUPPORTED_OPTION,
        ),
        (
            {"reasoning_effort": "high", "tools": TOOLS, "tool_choice": "required"},
            ErrorCode.UNSUPPORTED_OPTION,
        ),
        (
            {"model": "claude-sonnet-5", "temperature": 0.5},
            ErrorCode.UNSUPPORTED_OPTION,
        ),
        ({"reasoning_effort": "xhigh"}, ErrorCode.UNSUPPORTED_REASONING_EFFORT),
        (
            {"model": "claude-opus-5-5", "reasoning_effort": "off"},
            ErrorCode.UNSUPPORTED_REASONING_EFFORT,
        ),
        (
            {
                "messages": (
                    create_assistant_message(
                        (ToolCallBlock(id="t", name="f", arguments="{not json"),),
                        provider="anthropic",
                        model="claude-haiku-4-5",
                    ),
                )
            },
            ErrorCode.INVALID_REQUEST,
        ),
    ],
)
def test_refusals_happen_before_any_request(
    mocked: responses.RequestsMock, fields: dict[str, Any], code: ErrorCode
) -> None:
    assert _refused(_adapter(), **fields).code == code
    assert len(mocked.calls) == 0


@pytest.mark.parametrize(
    ("model", "code"),
    [
        ("claude-3-haiku-20240307", ErrorCode.UNSUPPORTED_CONTENT),  # unlisted
        ("claude-haiku-4-5", ErrorCode.MISSING_ATTACHMENT),  # no store set
    ],
)
def test_an_image_is_refused_before_the_key_is_read(
    mocked: responses.RequestsMock, model: str, code: ErrorCode
) -> None:
    image = ImageBlock(
        attachment=ImageRef(
            attachment_id="sha256:" + "a" * 64,
            media_type="image/png",
            bytes=10,
            width=2,
            height=3,
        )
    )
    error = _refused(
        _adapter(environ={}),
        model=model,
        messages=(create_user_message((TextBlock(text="see"), image)),),
    )
    assert error.code == code
    assert len(mocked.calls) == 0
