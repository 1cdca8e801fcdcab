"""The Anthropic Messages request builder (dsh_llm.adapters.anthropic.request):
exact bodies and headers, the refusals raised before any I/O, and replay of the
translator's own replay state."""

from __future__ import annotations

from typing import Any

import pytest

from dsh_llm.adapters.anthropic.catalog import BUDGET_THINKING
from dsh_llm.adapters.anthropic.catalog import CATALOG
from dsh_llm.adapters.anthropic.catalog import model_entry
from dsh_llm.adapters.anthropic.catalog import reasoning_info
from dsh_llm.adapters.anthropic.catalog import thinking_profile
from dsh_llm.adapters.anthropic.request import BUDGET_TOKENS
from dsh_llm.adapters.anthropic.request import build_messages_request
from dsh_llm.adapters.anthropic.request import request_headers
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import CallId
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import ImageBlock
from dsh_llm.protocol import ImageRef
from dsh_llm.protocol import Message
from dsh_llm.protocol import ModelSource
from dsh_llm.protocol import ReasoningBlock
from dsh_llm.protocol import ReplayEnvelope
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.protocol import ToolSchema
from dsh_llm.protocol import create_assistant_message
from dsh_llm.protocol import create_tool_result_message
from dsh_llm.protocol import create_user_message
from dsh_llm.transport.attribution import user_agent

from .replay import FIXTURES
from .replay import recorded_turn

WEATHER = ToolSchema(
    name="get_weather",
    description="Weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
OPUS = thinking_profile("claude-opus-5")
ALWAYS_ON = thinking_profile("claude-opus-5-5")


def options(*messages: Message, **fields: Any) -> GenerateOptions:
    return GenerateOptions(
        provider="anthropic",
        model=fields.pop("model", "claude-haiku-4-5"),
        messages=messages or (create_user_message("Hi"),),
        **fields,
    )


def build(opts: GenerateOptions, **kwargs: Any) -> dict[str, Any]:
    return build_messages_request(
        opts, model_max_tokens=kwargs.pop("cap", 4096), **kwargs
    )


def refusal(opts: GenerateOptions, **kwargs: Any) -> str:
    with pytest.raises(LlmError) as caught:
        build(opts, **kwargs)
    return caught.value.code


# --- headers and the simplest body ---------------------------------------------------


def test_headers_carry_the_version_and_attribution_but_never_the_key() -> None:
    headers = request_headers(beta=["a-1", "b-2"])
    assert headers == {
        "user-agent": user_agent(),
        "accept": "text/event-stream",
        "accept-encoding": "identity",
        "content-type": "application/json",
        "anthropic-version": "2023-06-01",
        "anthropic-beta": "a-1,b-2",
    }
    assert "anthropic-beta" not in request_headers()
    assert (
        request_headers(anthropic_version="2025-01-01")["anthropic-version"]
        == "2025-01-01"
    )


# --- thinking ------------------------------------------------------------------------


@pytest.mark.parametrize("effort", ["low", "medium", "high", "max"])
def test_budget_efforts_send_their_budget(effort: str) -> None:
    body = build(options(reasoning_effort=effort), cap=64_000)
    assert body["thinking"] == {
        "type": "enabled",
        "budget_tokens": BUDGET_TOKENS[effort],
    }
    assert "output_config" not in body


def test_a_budget_is_cut_below_max_tokens_and_refused_when_no_room_is_left() -> None:
    body = build(options(reasoning_effort="max", max_tokens=5000))
    assert body["thinking"]["budget_tokens"] == 4999
    assert refusal(options(reasoning_effort="low", max_tokens=1024)) == (
        ErrorCode.UNSUPPORTED_OPTION
    )


def test_effort_off_and_no_effort_send_no_thinking_on_a_budget_model() -> None:
    assert "thinking" not in build(options(reasoning_effort="off"))
    assert "thinking" not in build(options())


def test_the_default_effort_applies_when_the_request_names_none() -> None:
    body = build(options(), default_effort="high", cap=64_000)
    assert body["thinking"]["budget_tokens"] == BUDGET_TOKENS["high"]
    assert "thinking" not in build(
        options(reasoning_effort="off"), default_effort="high"
    )


def test_adaptive_models_take_output_config_effort() -> None:
    body = build(
        options(model="claude-opus-5", reasoning_effort="xhigh"), thinking=OPUS
    )
    assert body["thinking"] == {"type": "adaptive"}
    assert body["output_config"] == {"effort": "xhigh"}
    assert list(body).index("output_config") == list(body).index("thinking") + 1
    off = build(options(model="claude-opus-5", reasoning_effort="off"), thinking=OPUS)
    assert off["thinking"] == {"type": "disabled"}


def test_an_effort_the_model_does_not_offer_is_refused() -> None:
    assert refusal(options(reasoning_effort="xhigh")) == (
        ErrorCode.UNSUPPORTED_REASONING_EFFORT
    )
    assert refusal(
        options(model="claude-opus-5-5", reasoning_effort="off"), thinking=ALWAYS_ON
    ) == (ErrorCode.UNSUPPORTED_REASONING_EFFORT)
    assert refusal(options(), default_effort="bogus") == (
        ErrorCode.UNSUPPORTED_REASONING_EFFORT
    )


def test_a_session_title_asks_for_the_least_thinking() -> None:
    title = options(purpose="session-title", reasoning_effort="high")
    assert "thinking" not in build(title)
    adaptive = build(title.evolve(model="claude-opus-5-5"), thinking=ALWAYS_ON)
    assert adaptive["output_config"] == {"effort": "low"}


def test_compaction_changes_nothing_on_the_wire() -> None:
    assert build(options(purpose="compaction")) == build(options())


# --- refusals before any I/O ---------------------------------------------------------


@pytest.mark.parametrize("choice", ["required", "get_weather"])
def test_a_forced_tool_choice_is_refused_while_the_model_thinks(choice: str) -> None:
    assert refusal(
        options(tools=[WEATHER], tool_choice=choice, reasoning_effort="low")
    ) == (ErrorCode.UNSUPPORTED_OPTION)
    # An always-on model thinks without an effort too.
    assert refusal(
        options(model="claude-opus-5-5", tools=[WEATHER], tool_choice=choice),
        thinking=ALWAYS_ON,
    ) == (ErrorCode.UNSUPPORTED_OPTION)


def test_temperature_is_refused_while_the_model_thinks_or_above_one() -> None:
    assert refusal(options(temperature=0.2, reasoning_effort="low")) == (
        ErrorCode.UNSUPPORTED_OPTION
    )
    assert refusal(
        options(model="claude-sonnet-5", temperature=0.2),
        thinking=thinking_profile("claude-sonnet-5"),
    ) == (ErrorCode.UNSUPPORTED_OPTION)
    assert refusal(options(temperature=1.5)) == ErrorCode.UNSUPPORTED_OPTION
    assert build(options(temperature=1))["temperature"] == 1


def test_an_image_without_attachments_is_missing_even_inside_a_tool_result() -> None:
    image = ImageBlock(
        attachment=ImageRef(
            attachment_id="sha256:" + "0" * 64,
            media_type="image/png",
            bytes=10,
            width=1,
            height=1,
        )
    )
    assert refusal(options(create_user_message([image]))) == (
        ErrorCode.MISSING_ATTACHMENT
    )
    nested = create_tool_result_message("toolu_1", [image])
    assert refusal(options(nested)) == ErrorCode.MISSING_ATTACHMENT


def test_a_session_id_too_long_for_metadata_is_invalid_request() -> None:
    assert refusal(options(session_id="s" * 257)) == ErrorCode.INVALID_REQUEST
    assert build(options(session_id="s" * 256))["metadata"] == {"user_id": "s" * 256}


@pytest.mark.parametrize("arguments", ['{"city": ', "[1, 2]", '"Oslo"'])
def test_assistant_call_arguments_must_be_a_json_object(arguments: str) -> None:
    call = create_assistant_message(
        [ToolCallBlock(id=CallId("toolu_1"), name="get_weather", arguments=arguments)],
        provider="anthropic",
        model="claude-haiku-4-5",
    )
    assert refusal(options(create_user_message("Hi"), call)) == (
        ErrorCode.INVALID_REQUEST
    )


# --- turns ---------------------------------------------------------------------------


def test_tool_results_merge_into_one_user_turn_before_its_text() -> None:
    call = create_assistant_message(
        [
            TextBlock(text="Checking."),
            ToolCallBlock(id=CallId("toolu_a"), name="get_weather", arguments=""),
            ToolCallBlock(
                id=CallId("toolu_b"), name="get_weather", arguments='{"city": "Rome"}'
            ),
        ],
        provider="anthropic",
        model="claude-haiku-4-5",
    )
    messages = (
        create_user_message("Weather?"),
        call,
        create_user_message("Thanks in advance."),
        create_tool_result_message("toolu_a", "Sunny"),
        create_tool_result_message("toolu_b", "", is_error=True),
    )
    assert build(options(*messages))["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Weather?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking."},
                {
                    "type": "tool_use",
                    "id": "toolu_a",
                    "name": "get_weather",
                    "input": {},
                },
                {
                    "type": "tool_use",
                    "id": "toolu_b",
                    "name": "get_weather",
                    "input": {"city": "Rome"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "Sunny"},
                {"type": "tool_result", "tool_use_id": "toolu_b", "is_error": True},
                {"type": "text", "text": "Thanks in advance."},
            ],
        },
    ]


def test_reasoning_without_this_familys_replay_state_is_not_sent() -> None:
    foreign = Message(
        role="assistant",
        content=(ReasoningBlock(text="hmm"), TextBlock(text="Hello")),
        source=ModelSource(
            provider="deepseek",
            model="m",
            replay_state=ReplayEnvelope(
                response={"wire": "chat"},
                blocks=({"type": "thinking", "signature": "s"}, None),
            ),
        ),
    )
    only_reasoning = create_assistant_message(
        [ReasoningBlock(text="x"), TextBlock(text="")],
        provider="anthropic",
        model="m",
    )
    turns = build(options(create_user_message("Hi"), foreign, only_reasoning))[
        "messages"
    ]
    assert turns[1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Hello"}],
    }
    assert len(turns) == 2


def _turn_from(name: str) -> Message:
    return recorded_turn(name, "claude-haiku-4-5")


def test_a_thinking_turn_round_trips_with_its_signature_before_the_tool_use() -> None:
    first = _turn_from("interleaved_blocks")
    body = build(
        options(
            create_user_message("Look up a and b."),
            first,
            create_tool_result_message("toolu_01First", "A"),
            create_tool_result_message("toolu_01Second", "B"),
            tools=[WEATHER],
        ),
        cap=64_000,
    )
    signature = (
        (FIXTURES / "interleaved_blocks.sse")
        .read_text()
        .split('"signature_delta","signature":"')[1]
    ).split('"')[0]
    assert body["messages"][1] == {
        "role": "assistant",
        "content": [
            {
                "type": "thinking",
                "thinking": "Two calls, in parallel.",
                "signature": signature,
            },
            {
                "type": "tool_use",
                "id": "toolu_01First",
                "name": "lookup",
                "input": {"q": "a"},
            },
            {
                "type": "tool_use",
                "id": "toolu_01Second",
                "name": "lookup",
                "input": {"q": "b"},
            },
        ],
    }
    assert [b["type"] for b in body["messages"][2]["content"]] == [
        "tool_result",
        "tool_result",
    ]


def test_redacted_thinking_round_trips_in_its_original_order() -> None:
    turn = _turn_from("redacted_thinking")
    content = build(options(create_user_message("Q"), turn))["messages"][1]["content"]
    assert [block["type"] for block in content] == [
        "redacted_thinking",
        "thinking",
        "text",
    ]
    assert content[0]["data"].startswith("EmwKAhgB")
    assert content[1]["thinking"] == "Answer briefly."


def test_an_omitted_thinking_block_is_sent_back_with_empty_text() -> None:
    turn = _turn_from("thinking_omitted_then_tool_use")
    content = build(options(create_user_message("Q"), turn))["messages"][1]["content"]
    assert content[0]["type"] == "thinking"
    assert content[0]["thinking"] == ""
    assert content[0]["signature"]
    assert content[1]["type"] == "tool_use"


# --- catalog -------------------------------------------------------------------------


def test_the_catalog_takes_images_with_unique_ids_and_sane_bounds() -> None:
    assert len({entry.id for entry in CATALOG}) == len(CATALOG)
    for entry in CATALOG:
        assert entry.input_modalities == ("text", "image")
        assert 0 < entry.default_max_tokens <= entry.max_output_tokens
        assert entry.max_output_tokens < entry.context_window
        assert entry.thinking.default_effort in (*entry.thinking.efforts, "off")
    assert model_entry("claude-haiku-4-5") is not None
    assert model_entry("claude-unknown") is None
    assert thinking_profile("claude-unknown") is BUDGET_THINKING


def test_thinking_of_another_model_is_not_replayed() -> None:
    turn = _turn_from("thinking_signature_text")
    same = build(options(create_user_message("Q"), turn))["messages"][1]["content"]
    assert [block["type"] for block in same] == ["thinking", "text"]
    other = build(options(create_user_message("Q"), turn, model="claude-sonnet-5"))
    assert [block["type"] for block in other["messages"][1]["content"]] == ["text"]


def test_reasoning_info_lists_the_profile_efforts_and_its_default() -> None:
    info = reasoning_info(OPUS)
    assert [effort.id for effort in info.efforts] == list(OPUS.efforts)
    assert info.default_effort == "high"
    assert reasoning_info(OPUS, "low").default_effort == "low"
    assert reasoning_info(ALWAYS_ON, "off").default_effort == "medium"
    assert reasoning_info(BUDGET_THINKING).default_effort == "off"
