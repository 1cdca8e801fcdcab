"""Prompt-caching controls on every wire: where a breakpoint, a cache key and a
cached-content reference land (the request bodies in tests/fixtures/caching,
written from each provider's API reference), and the refusals of the wires that
have no such thing (UNSUPPORTED_OPTION, before any I/O)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest

from dsh_llm import collect
from dsh_llm.adapters.anthropic import AnthropicAdapter
from dsh_llm.adapters.anthropic.request import MAX_CACHE_BREAKPOINTS
from dsh_llm.adapters.anthropic.request import build_messages_request
from dsh_llm.adapters.bedrock.request import build_converse_request
from dsh_llm.adapters.chat.request import WireProfile
from dsh_llm.adapters.chat.request import build_body
from dsh_llm.adapters.deepseek import PROFILE as DEEPSEEK
from dsh_llm.adapters.gemini import GeminiAdapter
from dsh_llm.adapters.gemini.request import build_generate_request
from dsh_llm.adapters.ollama.request import build_chat_request
from dsh_llm.adapters.openai_responses.profiles import OPENAI
from dsh_llm.adapters.openai_responses.profiles import VLLM
from dsh_llm.adapters.openai_responses.request import build_responses_request
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import CacheBreakpoint
from dsh_llm.protocol import CallId
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import Message
from dsh_llm.protocol import ModelSource
from dsh_llm.protocol import ReasoningBlock
from dsh_llm.protocol import ReplayEnvelope
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.protocol import UserSource
from dsh_llm.protocol import create_assistant_message
from dsh_llm.protocol import create_message
from dsh_llm.protocol import create_tool_result_message
from dsh_llm.protocol import create_user_message
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply

FIXTURES = Path(__file__).parent.parent / "fixtures" / "caching"
MODEL = "claude-sonnet-4-5"


def _cached(message: Message, ttl: str | None = None) -> Message:
    return attrs.evolve(message, cache=CacheBreakpoint(ttl=ttl))


def _conversation(*, breakpoints: bool) -> tuple[Message, ...]:
    system = create_message(
        "system", [TextBlock(text="You review contracts.")], UserSource()
    )
    document = create_user_message("The contract: ... it ends on 31 May.")
    if breakpoints:
        system, document = _cached(system, "1h"), _cached(document)
    return (
        system,
        document,
        create_assistant_message("Noted.", provider="p", model=MODEL),
        create_user_message("When does it end?"),
    )


def _options(**fields: Any) -> GenerateOptions:
    messages = fields.pop("messages", None) or _conversation(breakpoints=False)
    return GenerateOptions(model=MODEL, messages=messages, system="Be brief.", **fields)


def _fixture(name: str) -> Any:
    return json.loads((FIXTURES / f"{name}.request.json").read_text(encoding="utf-8"))


GENERIC = WireProfile(provider="Server")


def _anthropic(options: GenerateOptions) -> dict[str, Any]:
    return build_messages_request(options, model_max_tokens=1024)


def _bedrock(options: GenerateOptions) -> dict[str, Any]:
    return build_converse_request(options, max_tokens=1024, thinking=None)


def _gemini(options: GenerateOptions) -> dict[str, Any]:
    return build_generate_request(options)


def _chat(options: GenerateOptions) -> dict[str, Any]:
    return build_body(options, profile=GENERIC, max_tokens=None)


def _deepseek(options: GenerateOptions) -> dict[str, Any]:
    return build_body(options, profile=DEEPSEEK, max_tokens=None)


def _responses(options: GenerateOptions) -> dict[str, Any]:
    return build_responses_request(options, profile=OPENAI)


def _ollama(options: GenerateOptions) -> dict[str, Any]:
    return build_chat_request(options)


Builder = Callable[[GenerateOptions], dict[str, Any]]


# --- where each control lands -----------------------------------------------------


def test_anthropic_breakpoints_are_cache_control_on_the_last_block() -> None:
    body = _anthropic(_options(messages=_conversation(breakpoints=True)))
    assert body == _fixture("anthropic")


def test_bedrock_breakpoints_are_cache_points_after_the_message() -> None:
    body = _bedrock(_options(messages=_conversation(breakpoints=True)))
    assert body == _fixture("bedrock")


def test_gemini_cached_content_names_the_cache() -> None:
    body = _gemini(_options(cached_content="cachedContents/contract-7"))
    assert body == _fixture("gemini")


def test_chat_completions_cache_key_is_prompt_cache_key() -> None:
    assert _chat(_options(cache_key="contracts-v2")) == _fixture("openai_compat")


def test_responses_cache_key_is_prompt_cache_key() -> None:
    assert _responses(_options(cache_key="contracts-v2")) == _fixture("responses")


@pytest.mark.parametrize(
    "build", [_anthropic, _bedrock, _gemini, _chat, _responses, _ollama]
)
def test_a_request_without_caching_controls_sends_none(build: Builder) -> None:
    text = json.dumps(build(_options()))
    for name in ("cache_control", "cachePoint", "cachedContent", "prompt_cache_key"):
        assert name not in text


# --- refusals ---------------------------------------------------------------------

REFUSALS: list[tuple[str, Builder, dict[str, Any], str]] = [
    ("anthropic key", _anthropic, {"cache_key": "k"}, "cache_key"),
    ("anthropic content", _anthropic, {"cached_content": "c"}, "cached_content"),
    ("bedrock key", _bedrock, {"cache_key": "k"}, "cache_key"),
    ("bedrock content", _bedrock, {"cached_content": "c"}, "cached_content"),
    ("gemini key", _gemini, {"cache_key": "k"}, "cache_key"),
    ("chat content", _chat, {"cached_content": "c"}, "cached_content"),
    ("deepseek key", _deepseek, {"cache_key": "k"}, "cache_key"),
    ("responses content", _responses, {"cached_content": "c"}, "cached_content"),
    ("ollama key", _ollama, {"cache_key": "k"}, "cache_key"),
    ("ollama content", _ollama, {"cached_content": "c"}, "cached_content"),
]


@pytest.mark.parametrize(
    ("build", "fields", "named"),
    [case[1:] for case in REFUSALS],
    ids=[case[0] for case in REFUSALS],
)
def test_a_control_the_wire_lacks_is_refused(
    build: Builder, fields: dict[str, Any], named: str
) -> None:
    with pytest.raises(LlmError) as caught:
        build(_options(**fields))
    assert caught.value.code == ErrorCode.UNSUPPORTED_OPTION
    assert named in caught.value.message


@pytest.mark.parametrize("build", [_gemini, _chat, _deepseek, _responses, _ollama])
def test_a_breakpoint_is_refused_where_the_wire_has_none(build: Builder) -> None:
    with pytest.raises(LlmError) as caught:
        build(_options(messages=_conversation(breakpoints=True)))
    assert caught.value.code == ErrorCode.UNSUPPORTED_OPTION
    assert "cache breakpoint of message 0" in caught.value.message


def test_responses_sends_the_key_on_every_server_profile() -> None:
    body = build_responses_request(_options(cache_key="k"), profile=VLLM)
    assert body["prompt_cache_key"] == "k"


# --- the breakpoint rules of Anthropic and Bedrock --------------------------------


@pytest.mark.parametrize("build", [_anthropic, _bedrock])
def test_a_lifetime_other_than_5m_or_1h_is_refused(build: Builder) -> None:
    messages = (_cached(create_user_message("Hi"), "2h"),)
    with pytest.raises(LlmError) as caught:
        build(_options(messages=messages))
    assert caught.value.code == ErrorCode.UNSUPPORTED_OPTION
    assert "'2h'" in caught.value.message


@pytest.mark.parametrize("build", [_anthropic, _bedrock])
def test_a_breakpoint_on_a_message_that_sends_nothing_is_refused(
    build: Builder,
) -> None:
    empty = create_message("system", [TextBlock(text="")], UserSource())
    messages = (_cached(empty), create_user_message("Hi"))
    with pytest.raises(LlmError) as caught:
        build(_options(messages=messages))
    assert caught.value.code == ErrorCode.UNSUPPORTED_OPTION
    assert "message 0" in caught.value.message


def test_anthropic_takes_at_most_four_breakpoints() -> None:
    turns = [
        _cached(
            create_user_message(f"q{n}")
            if n % 2 == 0
            else create_assistant_message(f"a{n}", provider="p", model=MODEL)
        )
        for n in range(MAX_CACHE_BREAKPOINTS)
    ]
    assert _anthropic(_options(messages=turns))
    with pytest.raises(LlmError) as caught:
        _anthropic(_options(messages=[*turns, _cached(create_user_message("more"))]))
    assert caught.value.code == ErrorCode.UNSUPPORTED_OPTION
    assert "at most 4" in caught.value.message


def test_anthropic_puts_the_breakpoint_past_a_trailing_thinking_block() -> None:
    replayed = Message(
        role="assistant",
        content=(TextBlock(text="It ends in May."), ReasoningBlock(text="checked")),
        source=ModelSource(
            provider="anthropic",
            model=MODEL,
            replay_state=ReplayEnvelope(
                response={"wire": "anthropic-messages", "model": MODEL},
                blocks=(None, {"type": "thinking", "signature": "sig"}),
            ),
        ),
    )
    body = _anthropic(
        _options(messages=[create_user_message("When?"), _cached(replayed)])
    )
    content = body["messages"][1]["content"]
    assert [block["type"] for block in content] == ["text", "thinking"]
    assert content[0]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in content[1]


def test_anthropic_breakpoint_on_a_tool_result_marks_the_result() -> None:
    call = create_assistant_message(
        [ToolCallBlock(id=CallId("call-1"), name="calc", arguments="{}")],
        provider="p",
        model=MODEL,
    )
    result = _cached(create_tool_result_message("call-1", "42"), "5m")
    body = _anthropic(_options(messages=[create_user_message("Compute"), call, result]))
    last = body["messages"][-1]["content"][-1]
    assert last["type"] == "tool_result"
    assert last["cache_control"] == {"type": "ephemeral", "ttl": "5m"}


def test_bedrock_keeps_tool_results_first_beside_a_cache_point() -> None:
    cached_text = _cached(create_user_message("See the result."))
    result = create_tool_result_message("call-1", "42")
    body = _bedrock(_options(messages=[cached_text, result]))
    content = body["messages"][0]["content"]
    assert [next(iter(block)) for block in content] == [
        "toolResult",
        "text",
        "cachePoint",
    ]


# --- over HTTP: the request carries the control, the usage shows its effect ------

ANTHROPIC_FIXTURES = Path(__file__).parent.parent / "fixtures" / "anthropic"
GEMINI_FIXTURES = Path(__file__).parent.parent / "fixtures" / "gemini"


def test_an_anthropic_breakpoint_is_sent_and_the_cache_counts_come_back(
    server: LoopbackServer,
) -> None:
    server.enqueue(Reply(body=(ANTHROPIC_FIXTURES / "cache_usage.sse").read_bytes()))
    options = _options(messages=_conversation(breakpoints=True), provider="anthropic")
    with AnthropicAdapter(api_key="k", base_url=server.url) as adapter:
        reply = collect(adapter.stream(options))
    (request,) = server.requests
    sent = request.json()
    assert sent["system"][1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert sent["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}
    assert reply.usage is not None
    assert (reply.usage.cache_write_tokens, reply.usage.cache_read_tokens) == (
        300,
        1800,
    )


def test_a_gemini_cached_content_is_sent_and_its_tokens_come_back(
    server: LoopbackServer,
) -> None:
    body = (GEMINI_FIXTURES / "usage_running_totals_cached.sse").read_bytes()
    server.enqueue(Reply(body=body))
    options = _options(cached_content="cachedContents/contract-7", provider="gemini")
    with GeminiAdapter(api_key="k", base_url=server.url) as adapter:
        reply = collect(adapter.stream(options))
    assert server.requests[0].json()["cachedContent"] == "cachedContents/contract-7"
    assert reply.usage is not None
    assert reply.usage.cache_read_tokens
