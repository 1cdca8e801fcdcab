"""build_responses_request: exact bodies per profile, refusals before any I/O,
and the replay round trip (reasoning with encrypted_content goes back before
the function call it preceded)."""

from __future__ import annotations

from typing import Any

import pytest

from dsh_llm.adapters.openai_responses.profiles import LLAMACPP
from dsh_llm.adapters.openai_responses.profiles import LMSTUDIO
from dsh_llm.adapters.openai_responses.profiles import OLLAMA
from dsh_llm.adapters.openai_responses.profiles import OPENAI
from dsh_llm.adapters.openai_responses.profiles import OPENROUTER
from dsh_llm.adapters.openai_responses.profiles import PROFILES
from dsh_llm.adapters.openai_responses.profiles import VLLM
from dsh_llm.adapters.openai_responses.profiles import guess_server
from dsh_llm.adapters.openai_responses.profiles import profile_for
from dsh_llm.adapters.openai_responses.request import build_responses_request
from dsh_llm.adapters.openai_responses.request import output_cap
from dsh_llm.assembler import assemble_stream
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import CallId
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import ImageBlock
from dsh_llm.protocol import ImageRef
from dsh_llm.protocol import Message
from dsh_llm.protocol import ReasoningBlock
from dsh_llm.protocol import ReplayEnvelope
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.protocol import ToolSchema
from dsh_llm.protocol import create_assistant_message
from dsh_llm.protocol import create_tool_result_message
from dsh_llm.protocol import create_user_message

from .test_translate_fixtures import replay

WEATHER = ToolSchema(
    name="get_weather",
    description="Weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


def _options(**fields: Any) -> GenerateOptions:
    fields.setdefault("messages", (create_user_message("hi"),))
    return GenerateOptions(provider="r", model="gpt-5.2", **fields)


@pytest.mark.parametrize("profile", list(PROFILES.values()), ids=list(PROFILES))
def test_a_plain_request_is_stateless_streaming_with_encrypted_reasoning(profile):
    body = build_responses_request(_options(), profile=profile)
    assert body == {
        "model": "gpt-5.2",
        "input": [
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "hi"}],
            }
        ],
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "stream": True,
    }
    assert list(body) == ["model", "input", "store", "include", "stream"]


@pytest.mark.parametrize("profile", list(PROFILES.values()), ids=list(PROFILES))
def test_every_field_in_its_place_for_every_profile(profile):
    body = build_responses_request(
        _options(
            system="Be brief.",
            tools=(WEATHER,),
            tool_choice="auto",
            reasoning_effort="high",
            max_tokens=256,
            temperature=0.2,
        ),
        profile=profile,
    )
    assert list(body) == [
        "model",
        "instructions",
        "input",
        "tools",
        "tool_choice",
        "reasoning",
        "max_output_tokens",
        "temperature",
        "store",
        "include",
        "stream",
    ]
    assert body["instructions"] == "Be brief."
    assert body["tools"] == [
        {
            "type": "function",
            "name": "get_weather",
            "description": "Weather for a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
            },
            "strict": False,
        }
    ]
    assert body["tool_choice"] == "auto"
    assert body["reasoning"] == {"effort": "high", "summary": "auto"}
    assert (body["max_output_tokens"], body["temperature"]) == (256, 0.2)


def test_a_named_tool_choice_is_a_flat_function_object():
    body = build_responses_request(
        _options(tools=(WEATHER,), tool_choice="get_weather"), profile=OPENAI
    )
    assert body["tool_choice"] == {"type": "function", "name": "get_weather"}


TIME = ToolSchema(
    name="get_time",
    description="The time in a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


def test_a_named_tool_choice_goes_to_llama_server_as_required_with_that_tool_alone():
    body = build_responses_request(
        _options(tools=(WEATHER, TIME), tool_choice="get_time"), profile=LLAMACPP
    )
    assert body["tool_choice"] == "required"
    assert [tool["name"] for tool in body["tools"]] == ["get_time"]


@pytest.mark.parametrize("choice", ["auto", "none", "required"])
def test_llama_server_gets_every_tool_for_a_choice_that_names_none(choice):
    body = build_responses_request(
        _options(tools=(WEATHER, TIME), tool_choice=choice), profile=LLAMACPP
    )
    assert body["tool_choice"] == choice
    assert [tool["name"] for tool in body["tools"]] == ["get_weather", "get_time"]


@pytest.mark.parametrize(
    ("fields", "default", "cap"),
    [
        ({}, None, None),
        ({}, 99, 99),
        ({"max_tokens": 5}, 99, 5),
        ({"max_tokens": 5, "extra_body": {"max_output_tokens": 7}}, 99, 7),
        ({"extra_body": {"max_output_tokens": "7"}}, 99, None),
    ],
)
def test_output_cap_is_the_cap_the_body_sends(fields, default, cap):
    options = _options(**fields)
    assert output_cap(options, default) == cap
    body = build_responses_request(options, profile=LLAMACPP, max_output_tokens=default)
    sent = body.get("max_output_tokens")
    assert (sent if type(sent) is int else None) == cap


def test_effort_none_sends_no_summary_and_the_default_cap_applies():
    body = build_responses_request(
        _options(reasoning_effort="none"), profile=OPENAI, max_output_tokens=99
    )
    assert body["reasoning"] == {"effort": "none"}
    assert body["max_output_tokens"] == 99
    body = build_responses_request(
        _options(max_tokens=5), profile=OPENAI, max_output_tokens=99
    )
    assert body["max_output_tokens"] == 5


def _image_message() -> Message:
    ref = ImageRef(
        attachment_id="sha256:" + "a" * 64,
        media_type="image/png",
        bytes=10,
        width=1,
        height=1,
    )
    return create_user_message([TextBlock(text="look"), ImageBlock(attachment=ref)])


@pytest.mark.parametrize("profile", [OPENAI, VLLM, OLLAMA])
def test_an_image_without_its_bytes_is_a_missing_attachment(profile):
    with pytest.raises(LlmError) as caught:
        build_responses_request(_options(messages=(_image_message(),)), profile=profile)
    assert caught.value.code == ErrorCode.MISSING_ATTACHMENT
    assert "sha256:" + "a" * 64 in caught.value.message


@pytest.mark.parametrize(
    ("fields", "profile", "code"),
    [
        ({"stop": ("END",)}, OPENAI, ErrorCode.UNSUPPORTED_OPTION),
        ({"stop": ("END",)}, VLLM, ErrorCode.UNSUPPORTED_OPTION),
        (
            {"tools": (WEATHER,), "tool_choice": "required"},
            OLLAMA,
            ErrorCode.UNSUPPORTED_OPTION,
        ),
        (
            {"tools": (WEATHER,), "tool_choice": "get_weather"},
            OLLAMA,
            ErrorCode.UNSUPPORTED_OPTION,
        ),
        ({"reasoning_effort": "turbo"}, OPENAI, ErrorCode.UNSUPPORTED_REASONING_EFFORT),
        ({"reasoning_effort": "minimal"}, VLLM, ErrorCode.UNSUPPORTED_REASONING_EFFORT),
        (
            {"reasoning_effort": "max"},
            OPENROUTER,
            ErrorCode.UNSUPPORTED_REASONING_EFFORT,
        ),
        (
            {"reasoning_effort": "xhigh"},
            LMSTUDIO,
            ErrorCode.UNSUPPORTED_REASONING_EFFORT,
        ),
        (
            {"reasoning_effort": "none"},
            LLAMACPP,
            ErrorCode.UNSUPPORTED_REASONING_EFFORT,
        ),
    ],
)
def test_fields_a_server_cannot_honour_are_refused(fields, profile, code):
    with pytest.raises(LlmError) as caught:
        build_responses_request(_options(**fields), profile=profile)
    assert caught.value.code == code


def test_ollama_takes_auto_and_its_efforts():
    body = build_responses_request(
        _options(tools=(WEATHER,), tool_choice="auto", reasoning_effort="minimal"),
        profile=OLLAMA,
    )
    assert body["tool_choice"] == "auto"


def test_tool_results_come_before_the_text_and_empty_output_has_a_placeholder():
    call = ToolCallBlock(
        id=CallId("call_1"), name="get_weather", arguments='{"city":"Lyon"}'
    )
    assistant = create_assistant_message(
        [TextBlock(text="Checking."), call], provider="x", model="m"
    )
    result = create_tool_result_message("call_1", "")
    body = build_responses_request(
        _options(messages=(create_user_message("weather?"), assistant, result)),
        profile=OPENAI,
    )
    assert body["input"][1:] == [
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Checking."}],
        },
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"city":"Lyon"}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "(no output)"},
    ]


def test_reasoning_without_this_familys_envelope_is_not_sent():
    foreign = ReplayEnvelope(
        response={"wire": "other"}, blocks=({"type": "reasoning", "id": "rs_1"}, None)
    )
    message = create_assistant_message(
        [ReasoningBlock(text="thinking"), TextBlock(text="Hi")],
        provider="x",
        model="m",
        replay_state=foreign,
    )
    body = build_responses_request(_options(messages=(message,)), profile=OPENAI)
    assert [item["type"] for item in body["input"]] == ["message"]


def _replayed(name: str, model: str = "gpt-5.2") -> Message:
    """The assistant message a caller keeps from fixture ``name``."""
    chunks, _ = replay(name)
    assembler, _ = assemble_stream(iter(chunks))
    return create_assistant_message(
        assembler.blocks(),
        provider="r",
        model=model,
        replay_state=assembler.replay_state,
    )


def test_a_turn_with_reasoning_and_a_call_round_trips():
    message = _replayed("openai_full_turn")
    result = create_tool_result_message("call_k2", "sunny")
    body = build_responses_request(
        _options(messages=(create_user_message("weather in Lyon?"), message, result)),
        profile=OPENAI,
    )
    assert body["input"][1:] == [
        {
            "type": "reasoning",
            "id": "rs_7",
            "summary": [{"type": "summary_text", "text": "Lyon forecast needed."}],
            "encrypted_content": "gAAAAABpQ-enc",
        },
        {
            "type": "message",
            "id": "msg_7",
            "role": "assistant",
            "status": "completed",
            "content": [
                {"type": "output_text", "text": "Let me check.", "annotations": []}
            ],
            "phase": "commentary",
        },
        {
            "type": "function_call",
            "id": "fc_7",
            "call_id": "call_k2",
            "name": "get_weather",
            "arguments": '{"city":"Lyon"}',
        },
        {"type": "function_call_output", "call_id": "call_k2", "output": "sunny"},
    ]


def test_openrouters_late_encrypted_reasoning_is_what_goes_back():
    body = build_responses_request(
        _options(messages=(_replayed("openrouter_out_of_order_done"),)),
        profile=OPENROUTER,
    )
    assert [item["type"] for item in body["input"]] == [
        "reasoning",
        "message",
        "function_call",
    ]
    assert body["input"][0]["encrypted_content"] == "gAAAAB-openrouter-late"


def test_vllm_raw_reasoning_goes_back_as_its_content():
    body = build_responses_request(
        _options(messages=(_replayed("vllm_raw_reasoning_repeated_fragment"),)),
        profile=VLLM,
    )
    assert body["input"][0] == {
        "type": "reasoning",
        "id": "a1f0c2d4",
        "summary": [],
        "content": [{"type": "reasoning_text", "text": "The user wants Lyon weather."}],
    }


def test_reasoning_with_nothing_to_replay_is_not_sent():
    envelope = ReplayEnvelope(
        response={"wire": "openai-responses"},
        blocks=({"type": "reasoning", "id": "rs_1", "summary": []}, None),
    )
    message = create_assistant_message(
        [ReasoningBlock(text="x"), TextBlock(text="Hi")],
        provider="r",
        model="m",
        replay_state=envelope,
    )
    body = build_responses_request(_options(messages=(message,)), profile=OPENAI)
    assert body["input"] == [
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Hi"}],
        }
    ]


def test_two_parts_of_one_message_go_back_as_one_item():
    entry = {"type": "message", "id": "msg_1", "part": "output_text"}
    refusal = {"type": "message", "id": "msg_1", "part": "refusal"}
    message = create_assistant_message(
        [TextBlock(text="a"), TextBlock(text="b")],
        provider="r",
        model="m",
        replay_state=ReplayEnvelope(
            response={"wire": "openai-responses"}, blocks=(entry, refusal)
        ),
    )
    body = build_responses_request(_options(messages=(message,)), profile=OPENAI)
    assert body["input"] == [
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [
                {"type": "output_text", "text": "a", "annotations": []},
                {"type": "refusal", "refusal": "b"},
            ],
        }
    ]


def test_ollama_plain_thinking_goes_back_unchanged():
    message = _replayed("ollama_thinking_zeros", "qwen3:8b")
    body = build_responses_request(_options(messages=(message,)), profile=OLLAMA)
    assert body["input"][0]["encrypted_content"] == "User asks for Lyon."


@pytest.mark.parametrize(
    ("url", "server"),
    [
        ("https://api.openai.com/v1", "openai"),
        ("https://openrouter.ai/api/v1", "openrouter"),
        ("http://127.0.0.1:11434/v1", "ollama"),
        ("http://localhost:1234/v1", "lmstudio"),
        ("http://gpu-box:8000/v1", "vllm"),
        ("https://gateway.example.com/v1", "openai"),
        # llama-server's default port: too common to read a cut into usage.
        ("http://127.0.0.1:8080/v1", "openai"),
        ("not a url", "openai"),
        ("http://[::1", "openai"),
    ],
)
def test_guess_server_from_the_base_url(url, server):
    assert guess_server(url) == server


def test_an_unknown_profile_name_is_a_value_error_listing_the_known_ones():
    known = "openai, vllm, ollama, lmstudio, openrouter, llamacpp"
    with pytest.raises(ValueError, match=known):
        profile_for("tgi")
    assert profile_for("vllm") is VLLM
    assert profile_for("llamacpp") is LLAMACPP
