"""The chat-completions request (dsh_llm.adapters.chat.request): ``WireProfile``,
the messages and body builders and the JSON encoding (the shared
``dsh_llm.adapters.encode_body``), without I/O."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from dsh_llm.adapters import encode_body
from dsh_llm.adapters.chat.request import WireProfile
from dsh_llm.adapters.chat.request import build_body
from dsh_llm.adapters.chat.request import build_messages
from dsh_llm.adapters.chat.request import tool_choice_wire
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import ImageBlock
from dsh_llm.protocol import ImageRef
from dsh_llm.protocol import ReasoningBlock
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.protocol import ToolResultBlock
from dsh_llm.protocol import ToolSchema
from dsh_llm.protocol import create_assistant_message
from dsh_llm.protocol import create_tool_result_message
from dsh_llm.protocol import create_user_message

PROFILE = WireProfile(provider="Test")


def _options(*messages: Any, **fields: Any) -> GenerateOptions:
    return GenerateOptions(
        provider="p",
        model="m",
        messages=messages or (create_user_message("hi"),),
        **fields,
    )


def _assistant(*blocks: Any) -> Any:
    return create_assistant_message(blocks, provider="p", model="m")


def test_user_text_blocks_are_joined_and_the_system_prompt_comes_first():
    options = _options(
        create_user_message([TextBlock(text="a"), TextBlock(text="b")]),
        system="be brief",
    )
    assert build_messages(options, profile=PROFILE) == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "ab"},
    ]


def test_history_system_messages_keep_their_role():
    from dsh_llm.protocol import PluginSource
    from dsh_llm.protocol import create_message

    options = _options(
        create_message("system", [TextBlock(text="rules")], PluginSource(plugin="x"))
    )
    assert build_messages(options, profile=PROFILE) == [
        {"role": "system", "content": "rules"}
    ]


def test_reasoning_goes_back_on_plain_and_tool_call_turns():
    options = _options(
        _assistant(ReasoningBlock(text="r1"), TextBlock(text="hello")),
        _assistant(
            ReasoningBlock(text="r2"),
            ToolCallBlock(id="c1", name="f", arguments="{}"),
            ToolCallBlock(id="c2", name="g", arguments='{"x":1}'),
        ),
        _assistant(ToolCallBlock(id="c3", name="f", arguments="{}")),
        _assistant(TextBlock(text="no reasoning")),
    )
    assert build_messages(options, profile=PROFILE) == [
        {"role": "assistant", "content": "hello", "reasoning_content": "r1"},
        {
            "role": "assistant",
            "content": "",
            "reasoning_content": "r2",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "f", "arguments": "{}"},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "g", "arguments": '{"x":1}'},
                },
            ],
        },
        {
            "role": "assistant",
            "content": "",
            "reasoning_content": "",
            "tool_calls": [
                {
                    "id": "c3",
                    "type": "function",
                    "function": {"name": "f", "arguments": "{}"},
                }
            ],
        },
        {"role": "assistant", "content": "no reasoning"},
    ]


def test_assistant_content_is_empty_string_never_null():
    options = _options(_assistant(), _assistant(ReasoningBlock(text="only")))
    assert [m["content"] for m in build_messages(options, profile=PROFILE)] == ["", ""]


def test_a_profile_without_passback_never_sends_reasoning():
    profile = WireProfile(provider="X", reasoning_passback_field=None)
    options = _options(
        _assistant(
            ReasoningBlock(text="r"), ToolCallBlock(id="c", name="f", arguments="{}")
        )
    )
    assert "reasoning_content" not in build_messages(options, profile=profile)[0]


def test_tool_results_become_tool_messages_after_the_user_text():
    results = create_tool_result_message("c1", "72F")
    empty = create_tool_result_message("c2", [])
    mixed = create_user_message(
        [
            TextBlock(text="and also"),
            ToolResultBlock(tool_call_id="c3", content=(TextBlock(text="ok"),)),
            ReasoningBlock(text="skipped"),
        ]
    )
    options = _options(mixed, results, empty, create_user_message([]))
    assert build_messages(options, profile=PROFILE) == [
        {"role": "user", "content": "and also"},
        {"role": "tool", "tool_call_id": "c3", "content": "ok"},
        {"role": "tool", "tool_call_id": "c1", "content": "72F"},
        {"role": "tool", "tool_call_id": "c2", "content": "(no output)"},
        {"role": "user", "content": ""},
    ]


def test_replies_to_tool_calls_come_before_the_user_text_beside_them():
    calls = _assistant(
        ToolCallBlock(id="c1", name="f", arguments="{}"),
        ToolCallBlock(id="c2", name="g", arguments="{}"),
    )
    first = create_tool_result_message("c1", "one")
    mixed = create_user_message(
        [
            TextBlock(text="now summarise"),
            ToolResultBlock(tool_call_id="c2", content=(TextBlock(text="two"),)),
        ]
    )
    messages = build_messages(_options(calls, first, mixed), profile=PROFILE)
    assert [m["role"] for m in messages] == ["assistant", "tool", "tool", "user"]
    assert messages[2] == {"role": "tool", "tool_call_id": "c2", "content": "two"}
    assert messages[3] == {"role": "user", "content": "now summarise"}
    # Right after the assistant turn too.
    direct = build_messages(_options(calls, mixed), profile=PROFILE)
    assert [m["role"] for m in direct] == ["assistant", "tool", "user"]


def test_an_image_anywhere_is_unsupported_content():
    image = ImageBlock(
        attachment=ImageRef(
            attachment_id="sha256:" + "a" * 64,
            media_type="image/png",
            bytes=3,
            width=1,
            height=1,
        )
    )
    nested = ToolResultBlock(tool_call_id="c", content=(image,))
    for message in (create_user_message([image]), create_user_message([nested])):
        with pytest.raises(LlmError) as caught:
            build_messages(_options(message), profile=PROFILE)
        assert caught.value.code == ErrorCode.UNSUPPORTED_CONTENT


TOOLS = (
    ToolSchema(
        name="get_weather", description="Weather", parameters={"type": "object"}
    ),
    ToolSchema(
        name="now", description="Time", parameters={"type": "object", "properties": {}}
    ),
)


def test_body_key_order_and_optional_fields():
    options = _options(tools=TOOLS, tool_choice="now", temperature=0.5, stop=("END",))
    body = build_body(
        options,
        profile=PROFILE,
        max_tokens=100,
        extra={"thinking": {"type": "disabled"}},
    )
    assert list(body) == [
        "model",
        "messages",
        "stream",
        "stream_options",
        "thinking",
        "tools",
        "tool_choice",
        "temperature",
        "max_tokens",
        "stop",
    ]
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["tools"][0] == {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather",
            "parameters": {"type": "object"},
        },
    }
    assert body["tool_choice"] == {"type": "function", "function": {"name": "now"}}
    assert body["stop"] == ["END"]


def test_optional_fields_are_omitted_not_null():
    body = build_body(
        _options(tools=()),
        profile=WireProfile(provider="X", include_usage=False),
        max_tokens=None,
    )
    assert list(body) == ["model", "messages", "stream"]


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        (None, None),
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        ("f", {"type": "function", "function": {"name": "f"}}),
    ],
)
def test_tool_choice_mapping(choice, wire):
    assert tool_choice_wire(choice) == wire


def test_tool_choice_without_tools_is_omitted():
    assert "tool_choice" not in build_body(
        _options(tool_choice="none"), profile=PROFILE, max_tokens=None
    )


def test_a_body_that_is_not_json_is_invalid_request():
    options = _options(
        tools=(ToolSchema(name="t", description="", parameters={"x": math.nan}),)
    )
    body = build_body(options, profile=PROFILE, max_tokens=None)
    with pytest.raises(LlmError) as caught:
        encode_body(body, provider="Test")
    assert caught.value.code == ErrorCode.INVALID_REQUEST


def test_encode_body_is_compact_utf8():
    assert encode_body({"a": "é"}, provider="Test") == '{"a":"é"}'.encode()


def test_encode_body_escapes_a_lone_surrogate_so_the_body_is_utf8():
    encoded = encode_body({"a": "x\ud83d"}, provider="Test")
    assert encoded == b'{"a":"x\\ud83d"}'
    assert json.loads(encoded) == {"a": "x\ud83d"}
