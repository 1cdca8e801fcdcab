"""The Ollama /api/chat request (dsh_llm.adapters.ollama.request): exact bodies,
the effort table, refusals before any I/O, and a recorded answer sent back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dsh_llm.adapters.ollama.request import EFFORT_THINK
from dsh_llm.adapters.ollama.request import build_chat_request
from dsh_llm.adapters.ollama.translate import OllamaTranslator
from dsh_llm.assembler import BlockAssembler
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import CallId
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import ImageBlock
from dsh_llm.protocol import ImageRef
from dsh_llm.protocol import Message
from dsh_llm.protocol import ModelSource
from dsh_llm.protocol import ReasoningBlock
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.protocol import ToolResultBlock
from dsh_llm.protocol import ToolSchema
from dsh_llm.protocol import UserSource
from dsh_llm.protocol import create_assistant_message
from dsh_llm.protocol import create_message
from dsh_llm.protocol import create_tool_result_message
from dsh_llm.protocol import create_user_message
from dsh_llm.transport.ndjson import NdjsonDecoder

from ..wire_replay import replay

FIXTURES = Path(__file__).parent.parent.parent / "fixtures" / "ollama"
WEATHER = ToolSchema(
    name="get_weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


def options(*messages: Message, **fields: Any) -> GenerateOptions:
    fields.setdefault("messages", messages or (create_user_message("hi"),))
    fields.setdefault("model", "qwen3")
    return GenerateOptions(provider="ollama", **fields)


def test_a_simple_request_body():
    assert build_chat_request(options()) == {
        "model": "qwen3",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
    }


def test_a_full_conversation_body_in_key_order():
    call = ToolCallBlock(
        id=CallId("call_1"), name="get_weather", arguments='{"unit":"c","city":"Oslo"}'
    )
    conversation = (
        create_message(
            "system",
            [TextBlock(text="Be brief.")],
            ModelSource(provider="p", model="m"),
        ),
        create_user_message("Weather in Oslo?"),
        create_assistant_message(
            [ReasoningBlock(text="Need the tool."), TextBlock(text="Checking."), call],
            provider="ollama",
            model="qwen3",
        ),
        create_tool_result_message("call_1", "12 °C"),
        create_user_message("Thanks"),
    )
    body = build_chat_request(
        options(
            *conversation,
            system="You are terse.",
            tools=(WEATHER,),
            tool_choice="auto",
            temperature=0.3,
            max_tokens=256,
            stop=("###",),
            reasoning_effort="high",
        ),
        keep_alive="10m",
    )
    assert list(body) == [
        "model",
        "messages",
        "stream",
        "tools",
        "think",
        "options",
        "keep_alive",
    ]
    assert body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Oslo?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "thinking": "Need the tool.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "function": {
                        "index": 0,
                        "name": "get_weather",
                        "arguments": {"unit": "c", "city": "Oslo"},
                    },
                }
            ],
        },
        {
            "role": "tool",
            "content": "12 °C",
            "tool_name": "get_weather",
            "tool_call_id": "call_1",
        },
        {"role": "user", "content": "Thanks"},
    ]
    assert list(body["messages"][3]["tool_calls"][0]["function"]["arguments"]) == [
        "unit",
        "city",
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather for a city.",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                },
            },
        }
    ]
    assert body["think"] == "high"
    assert body["options"] == {"temperature": 0.3, "num_predict": 256, "stop": ["###"]}
    assert body["keep_alive"] == "10m"


def test_results_come_before_the_text_of_their_message():
    call = ToolCallBlock(id=CallId("c"), name="f", arguments="{}")
    mixed = create_message(
        "user",
        [
            TextBlock(text="and also"),
            ToolResultBlock(tool_call_id=CallId("c"), content=()),
        ],
        UserSource(),
    )
    body = build_chat_request(
        options(
            create_user_message("go"),
            create_assistant_message([call], provider="ollama", model="qwen3"),
            mixed,
        )
    )
    assert body["messages"][1] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "c", "function": {"index": 0, "name": "f", "arguments": {}}}
        ],
    }
    assert body["messages"][2:] == [
        {"role": "tool", "content": "", "tool_name": "f", "tool_call_id": "c"},
        {"role": "user", "content": "and also"},
    ]


@pytest.mark.parametrize(("effort", "think"), list(EFFORT_THINK.items()))
def test_the_effort_table(effort, think):
    assert build_chat_request(options(reasoning_effort=effort))["think"] == think


def test_tool_choice_none_is_honoured_by_not_sending_tools():
    body = build_chat_request(options(tools=(WEATHER,), tool_choice="none"))
    assert "tools" not in body


@pytest.mark.parametrize("keep_alive", ["5m", 0, -1, 300, 1.5])
def test_keep_alive_values(keep_alive):
    assert (
        build_chat_request(options(), keep_alive=keep_alive)["keep_alive"] == keep_alive
    )


def test_num_predict_falls_back_to_the_given_default():
    assert build_chat_request(options(), max_tokens=64)["options"] == {
        "num_predict": 64
    }
    body = build_chat_request(options(max_tokens=8), max_tokens=64)
    assert body["options"] == {"num_predict": 8}


IMAGE = ImageBlock(
    attachment=ImageRef(
        attachment_id="sha256:" + "0" * 64,
        media_type="image/png",
        bytes=10,
        width=1,
        height=1,
    )
)


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"messages": (create_user_message([IMAGE]),)}, ErrorCode.MISSING_ATTACHMENT),
        (
            {"messages": (create_message("system", [IMAGE], UserSource()),)},
            ErrorCode.UNSUPPORTED_CONTENT,
        ),
        ({"reasoning_effort": "minimal"}, ErrorCode.UNSUPPORTED_REASONING_EFFORT),
        (
            {"tools": (WEATHER,), "tool_choice": "required"},
            ErrorCode.UNSUPPORTED_OPTION,
        ),
        (
            {"tools": (WEATHER,), "tool_choice": "get_weather"},
            ErrorCode.UNSUPPORTED_OPTION,
        ),
        (
            {"messages": (create_tool_result_message("nowhere", "x"),)},
            ErrorCode.INVALID_REQUEST,
        ),
        (
            {
                "messages": (
                    create_assistant_message(
                        [ToolCallBlock(id=CallId("c"), name="f", arguments='"text"')],
                        provider="ollama",
                        model="qwen3",
                    ),
                )
            },
            ErrorCode.INVALID_REQUEST,
        ),
    ],
)
def test_what_cannot_be_sent_is_refused(fields, code):
    with pytest.raises(LlmError) as caught:
        build_chat_request(options(**fields))
    assert caught.value.code == code


@pytest.mark.parametrize("keep_alive", ["", "  ", True, float("inf"), [5]])
def test_a_bad_keep_alive_is_refused(keep_alive):
    with pytest.raises(LlmError) as caught:
        build_chat_request(options(), keep_alive=keep_alive)
    assert caught.value.code == ErrorCode.INVALID_REQUEST


def test_a_recorded_answer_goes_back_as_it_came():
    body = (FIXTURES / "tool_calls_with_ids.ndjson").read_bytes()
    chunks = replay(body, "whole", NdjsonDecoder(), OllamaTranslator())
    assembler = BlockAssembler()
    for chunk in chunks:
        assembler.push(chunk)
    answer = assembler.message(ModelSource(provider="ollama", model="qwen3"))
    request = build_chat_request(
        options(
            create_user_message("Weather and time in Oslo?"),
            answer,
            create_tool_result_message("call_x1", "12 °C"),
            create_tool_result_message("call_x2", "10:00"),
        )
    )
    assert request["messages"][1:] == [
        {
            "role": "assistant",
            "content": "",
            "thinking": "Need the weather tool.",
            "tool_calls": [
                {
                    "id": "call_x1",
                    "function": {
                        "index": 0,
                        "name": "get_weather",
                        "arguments": {"city": "Oslo", "unit": "celsius"},
                    },
                },
                {
                    "id": "call_x2",
                    "function": {
                        "index": 1,
                        "name": "get_time",
                        "arguments": {"zone": "Europe/Oslo"},
                    },
                },
            ],
        },
        {
            "role": "tool",
            "content": "12 °C",
            "tool_name": "get_weather",
            "tool_call_id": "call_x1",
        },
        {
            "role": "tool",
            "content": "10:00",
            "tool_name": "get_time",
            "tool_call_id": "call_x2",
        },
    ]


def test_a_result_answers_the_nearest_earlier_call_with_its_id():
    first = ToolCallBlock(id=CallId("c"), name="first_tool", arguments="{}")
    second = ToolCallBlock(id=CallId("c"), name="second_tool", arguments="{}")
    body = build_chat_request(
        options(
            create_user_message("a"),
            create_assistant_message([first], provider="ollama", model="qwen3"),
            create_tool_result_message("c", "1"),
            create_assistant_message([second], provider="ollama", model="qwen3"),
            create_tool_result_message("c", "2"),
        )
    )
    names = [m["tool_name"] for m in body["messages"] if m["role"] == "tool"]
    assert names == ["first_tool", "second_tool"]


def test_a_result_before_its_call_is_refused():
    call = ToolCallBlock(id=CallId("c"), name="f", arguments="{}")
    with pytest.raises(LlmError) as caught:
        build_chat_request(
            options(
                create_tool_result_message("c", "early"),
                create_assistant_message([call], provider="ollama", model="qwen3"),
            )
        )
    assert caught.value.code == ErrorCode.INVALID_REQUEST
