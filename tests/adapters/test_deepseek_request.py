"""What DeepSeekAdapter sends (SPEC 8.2, 8.3; items 57-60, 64, 66, 68), checked
with ``responses``: URL, headers, body, the thinking rules, and the refusals that
happen before any I/O."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import responses

from dsh_llm.adapters import CatalogModel
from dsh_llm.adapters.deepseek import DeepSeekAdapter
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import ImageBlock
from dsh_llm.protocol import ImageRef
from dsh_llm.protocol import ToolSchema
from dsh_llm.protocol import create_user_message
from dsh_llm.testing import sse_body
from dsh_llm.transport.attribution import user_agent
from dsh_llm.validator import validate_stream

from .chat_chunks import FIRST
from .chat_chunks import finish
from .chat_chunks import text

BASE = "https://api.deepseek.test"
SSE = sse_body([FIRST, text("ok"), finish()])
TOOLS = (
    ToolSchema(
        name="get_weather", description="Weather", parameters={"type": "object"}
    ),
)


@pytest.fixture
def mocked() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        mock.add(
            responses.POST,
            f"{BASE}/chat/completions",
            body=SSE,
            content_type="text/event-stream",
        )
        mock.add(
            responses.POST,
            f"{BASE}/v1/chat/completions",
            body=SSE,
            content_type="text/event-stream",
        )
        yield mock


def _adapter(**config: Any) -> DeepSeekAdapter:
    config.setdefault("base_url", BASE)
    config.setdefault("environ", {"DEEPSEEK_API_KEY": "sk-test"})
    return DeepSeekAdapter(**config)


def _options(**fields: Any) -> GenerateOptions:
    fields.setdefault("messages", (create_user_message("hi"),))
    fields.setdefault("model", "deepseek-v4-flash")
    return GenerateOptions(provider="deepseek-official", **fields)


def _send(adapter: DeepSeekAdapter, **fields: Any) -> None:
    with adapter:
        list(validate_stream(adapter.stream(_options(**fields))))


def _body(mock: responses.RequestsMock, n: int = -1) -> dict[str, Any]:
    body = mock.calls[n].request.body
    assert isinstance(body, bytes)
    return json.loads(body)


def _refused(adapter: DeepSeekAdapter, **fields: Any) -> LlmError:
    with adapter, pytest.raises(LlmError) as caught:
        list(validate_stream(adapter.stream(_options(**fields))))
    return caught.value


def test_the_url_has_exactly_one_slash(mocked):
    _send(_adapter(base_url=f"{BASE}/"))
    _send(_adapter(base_url=f"{BASE}/v1/"))
    assert [c.request.url for c in mocked.calls] == [
        f"{BASE}/chat/completions",
        f"{BASE}/v1/chat/completions",
    ]


def test_headers_carry_auth_attribution_and_stream_accept(mocked):
    _send(_adapter())
    headers = mocked.calls[0].request.headers
    assert headers["authorization"] == "Bearer sk-test"
    assert headers["content-type"] == "application/json"
    assert headers["accept"] == "text/event-stream"
    assert headers["accept-encoding"] == "identity"
    assert headers["user-agent"] == user_agent()
    assert not any(name.lower().startswith("x-deepseek-harness") for name in headers)


def test_session_id_and_compaction_travel_as_routing_headers_only(mocked):
    _send(_adapter(), session_id="s-1", purpose="compaction")
    headers = mocked.calls[0].request.headers
    assert headers["x-deepseek-harness-session-id"] == "s-1"
    assert headers["x-deepseek-harness-compact"] == "1"
    assert "s-1" not in json.dumps(_body(mocked))


def test_the_body_has_stream_flags_system_first_and_sampling_fields(mocked):
    _send(
        _adapter(),
        reasoning_effort="off",
        system="be brief",
        temperature=0.3,
        max_tokens=50,
        stop=("END",),
        tools=TOOLS,
    )
    body = _body(mocked)
    assert list(body) == [
        "model",
        "messages",
        "stream",
        "stream_options",
        "thinking",
        "tools",
        "temperature",
        "max_tokens",
        "stop",
    ]
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"][0] == {"role": "system", "content": "be brief"}
    assert (body["temperature"], body["max_tokens"], body["stop"]) == (0.3, 50, ["END"])
    assert body["tools"][0]["function"]["name"] == "get_weather"


@pytest.mark.parametrize(
    ("config", "fields"),
    [
        ({}, {"reasoning_effort": "low"}),
        ({}, {"reasoning_effort": "high"}),
        ({}, {"reasoning_effort": "max"}),
        ({"reasoning_effort": "high"}, {}),
        ({"thinking": "enabled"}, {}),
        (
            {"thinking": "enabled", "reasoning_effort": "off"},
            {"reasoning_effort": "max"},
        ),
    ],
    ids=["low", "high", "max", "configured-effort", "enabled-deployment", "override"],
)
def test_temperature_with_thinking_enabled_is_refused_before_io(mocked, config, fields):
    # DeepSeek's thinking mode silently ignores temperature, and a field that
    # cannot be honoured raises (rule 11 of docs/protocol.md).
    error = _refused(_adapter(**config), temperature=0.2, **fields)
    assert error.code == ErrorCode.UNSUPPORTED_OPTION
    assert 'reasoning_effort="off"' in error.message
    assert "temperature" in error.message
    assert len(mocked.calls) == 0


@pytest.mark.parametrize(
    ("config", "fields"),
    [
        ({}, {"reasoning_effort": "off"}),
        ({"reasoning_effort": "off"}, {}),
        ({"thinking": "disabled"}, {}),
        ({"reasoning_effort": "max"}, {"reasoning_effort": "off"}),
        ({}, {"purpose": "session-title", "reasoning_effort": "high"}),
        ({"thinking": "enabled"}, {"purpose": "session-title"}),
    ],
    ids=[
        "effort-off",
        "configured-off",
        "disabled-deployment",
        "request-off-over-config",
        "session-title",
        "session-title-on-enabled-deployment",
    ],
)
def test_temperature_is_sent_with_thinking_disabled(mocked, config, fields):
    _send(_adapter(**config), temperature=0.2, **fields)
    body = _body(mocked)
    assert (body["temperature"], body["thinking"]) == (0.2, {"type": "disabled"})


def test_temperature_without_an_effort_is_refused_in_the_default_thinking_mode(
    mocked,
):
    error = _refused(_adapter(), temperature=0.2)
    assert error.code == ErrorCode.UNSUPPORTED_OPTION
    assert len(mocked.calls) == 0


def test_thinking_enabled_without_temperature_is_sent(mocked):
    _send(_adapter(), reasoning_effort="high")
    body = _body(mocked)
    assert "temperature" not in body
    assert body["thinking"] == {"type": "enabled"}


@pytest.mark.parametrize(
    "session_id", [" s-1", "s-1\t", "s-1\n", "s-\u00e9", "s-\U0001f600", "s\x01"]
)
def test_a_session_id_no_header_can_carry_is_refused_before_io(mocked, session_id):
    error = _refused(_adapter(), session_id=session_id)
    assert error.code == ErrorCode.INVALID_REQUEST
    assert "session_id" in error.message
    assert len(mocked.calls) == 0


def test_empty_tools_are_omitted(mocked):
    _send(_adapter(), tools=())
    assert "tools" not in _body(mocked)


def test_max_tokens_defaults_to_the_model_cap_then_the_profile(mocked):
    models = [CatalogModel(id="small", max_tokens=1000), CatalogModel(id="big")]
    _send(_adapter(models=models, max_tokens=9000), model="small")
    _send(_adapter(models=models, max_tokens=9000), model="big")
    _send(_adapter(), model="anything")
    _send(_adapter(), max_tokens=7)
    assert [_body(mocked, n)["max_tokens"] for n in range(4)] == [1000, 9000, 256000, 7]


@pytest.mark.parametrize(
    ("config", "fields", "expected"),
    [
        (
            {},
            {"reasoning_effort": "low"},
            {"thinking": {"type": "enabled"}, "reasoning_effort": "low"},
        ),
        (
            {},
            {"reasoning_effort": "high"},
            {"thinking": {"type": "enabled"}, "reasoning_effort": "high"},
        ),
        (
            {},
            {"reasoning_effort": "max"},
            {"thinking": {"type": "enabled"}, "reasoning_effort": "max"},
        ),
        ({}, {"reasoning_effort": "off"}, {"thinking": {"type": "disabled"}}),
        (
            {"reasoning_effort": "off"},
            {"reasoning_effort": "max"},
            {"thinking": {"type": "enabled"}, "reasoning_effort": "max"},
        ),
        (
            {"reasoning_effort": "low"},
            {},
            {"thinking": {"type": "enabled"}, "reasoning_effort": "low"},
        ),
        (
            {"thinking": "disabled"},
            {"reasoning_effort": "off"},
            {"thinking": {"type": "disabled"}},
        ),
        ({"thinking": "disabled"}, {}, {"thinking": {"type": "disabled"}}),
        # The default effort (configured, else high) is applied by the adapter
        # itself, as LlmRuntime would fill it in.
        (
            {"thinking": "enabled"},
            {},
            {"thinking": {"type": "enabled"}, "reasoning_effort": "high"},
        ),
        ({}, {}, {"thinking": {"type": "enabled"}, "reasoning_effort": "high"}),
        (
            {"reasoning_effort": "max"},
            {"purpose": "session-title", "reasoning_effort": "high"},
            {"thinking": {"type": "disabled"}},
        ),
        (
            {"thinking": "disabled"},
            {"purpose": "session-title"},
            {"thinking": {"type": "disabled"}},
        ),
    ],
)
def test_thinking_and_effort_on_the_wire(mocked, config, fields, expected):
    _send(_adapter(**config), **fields)
    body = _body(mocked)
    assert {
        k: body[k] for k in ("thinking", "reasoning_effort") if k in body
    } == expected


def test_an_effort_deepseek_does_not_know_is_refused_before_io(mocked):
    error = _refused(_adapter(), reasoning_effort="medium")
    assert error.code == ErrorCode.UNSUPPORTED_REASONING_EFFORT
    assert error.message == 'DeepSeek does not support reasoning effort "medium"'
    assert len(mocked.calls) == 0


@pytest.mark.parametrize("effort", ["low", "high", "max"])
def test_a_disabled_deployment_refuses_efforts_before_io(mocked, effort):
    error = _refused(_adapter(thinking="disabled"), reasoning_effort=effort)
    assert error.code == ErrorCode.UNSUPPORTED_REASONING_EFFORT
    assert (
        error.message
        == f'DeepSeek deployment does not support reasoning effort "{effort}"'
    )
    assert len(mocked.calls) == 0


@pytest.mark.parametrize("choice", ["required", "get_weather"])
def test_forced_tool_choice_in_thinking_mode_is_refused_before_io(mocked, choice):
    error = _refused(
        _adapter(), tools=TOOLS, tool_choice=choice, reasoning_effort="high"
    )
    assert error.code == ErrorCode.UNSUPPORTED_OPTION
    assert "thinking mode" in error.message
    assert len(mocked.calls) == 0


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("required", "required"),
        ("get_weather", {"type": "function", "function": {"name": "get_weather"}}),
        ("auto", "auto"),
        ("none", "none"),
    ],
)
def test_tool_choice_is_sent_when_thinking_is_off(mocked, choice, wire):
    _send(_adapter(), tools=TOOLS, tool_choice=choice, reasoning_effort="off")
    assert _body(mocked)["tool_choice"] == wire


def test_auto_tool_choice_is_fine_in_thinking_mode(mocked):
    _send(_adapter(), tools=TOOLS, tool_choice="auto", reasoning_effort="max")
    assert _body(mocked)["tool_choice"] == "auto"


_IMAGE = ImageBlock(
    attachment=ImageRef(
        attachment_id="sha256:" + "a" * 64,
        media_type="image/png",
        bytes=3,
        width=1,
        height=1,
    )
)


@pytest.mark.parametrize(
    "model", ["deepseek-v4-flash", "unlisted", "deepseek-v4-flash-vision-exp"]
)
def test_images_are_refused_before_credentials_and_io(mocked, model):
    adapter = _adapter(environ={})
    error = _refused(adapter, model=model, messages=(create_user_message([_IMAGE]),))
    assert error.code == ErrorCode.UNSUPPORTED_CONTENT
    assert len(mocked.calls) == 0


def test_a_missing_key_names_the_variable_and_sends_nothing(mocked):
    for environ in ({}, {"DEEPSEEK_API_KEY": ""}):
        error = _refused(_adapter(environ=environ))
        assert error.code == ErrorCode.MISSING_CREDENTIAL
        assert "DEEPSEEK_API_KEY" in error.message
    error = _refused(_adapter(environ={"OTHER": "x"}, api_key_env="OTHER_KEY"))
    assert "OTHER_KEY" in error.message
    assert len(mocked.calls) == 0


@pytest.mark.parametrize("raw", ["   ", "sk-\u00e9t\u00e9", "sk bad"])
def test_an_unusable_environment_key_is_invalid_credential_without_echo(mocked, raw):
    error = _refused(_adapter(environ={"DEEPSEEK_API_KEY": raw}))
    assert error.code == ErrorCode.INVALID_CREDENTIAL
    assert "DEEPSEEK_API_KEY" in error.message
    assert raw.strip() not in error.message or raw.strip() == ""
    assert len(mocked.calls) == 0


def test_the_key_is_read_per_request_from_a_live_environment(mocked):
    environ: dict[str, str] = {}
    adapter = _adapter(environ=environ)
    with adapter:
        with pytest.raises(LlmError):
            list(validate_stream(adapter.stream(_options())))
        environ["DEEPSEEK_API_KEY"] = " sk-later \n"
        list(validate_stream(adapter.stream(_options())))
    assert mocked.calls[0].request.headers["authorization"] == "Bearer sk-later"


def test_an_explicit_key_wins_over_the_environment(mocked):
    _send(_adapter(api_key="sk-explicit", environ={"DEEPSEEK_API_KEY": "sk-env"}))
    assert mocked.calls[0].request.headers["authorization"] == "Bearer sk-explicit"
