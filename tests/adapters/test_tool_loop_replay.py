"""Issue 26.16: ``collect()``'s ``reply.message`` is ready for the next turn.

A user who runs the tools themselves appends ``reply.message`` and the tool's
result to the conversation and streams again. For each of the six wire families,
over a loopback server: turn one answers with the state the provider needs back
(Claude's signed thinking, Gemini's ``thoughtSignature``, Responses' encrypted
reasoning item, DeepSeek's reasoning content, Ollama's thinking) and a tool
call; turn two's request body must carry that state and the call, exactly.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import attrs
import pytest

from dsh_llm.adapter import LlmAdapter
from dsh_llm.adapters.anthropic import AnthropicAdapter
from dsh_llm.adapters.deepseek import DeepSeekAdapter
from dsh_llm.adapters.gemini import GeminiAdapter
from dsh_llm.adapters.ollama import OllamaAdapter
from dsh_llm.adapters.openai_compat import OpenAICompatAdapter
from dsh_llm.adapters.openai_responses import OpenAIResponsesAdapter
from dsh_llm.assembler import collect
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import ToolSchema
from dsh_llm.protocol import create_tool_result_message
from dsh_llm.protocol import create_user_message
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply
from dsh_llm.testing import sse_event

KEY = "loop-key-0123456789"
WEATHER = ToolSchema(
    name="weather",
    description="The weather in a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
SIGNATURE = "EqQBCkYIBxgCKkBsig-0123456789"
THOUGHT = "c2lnbmVkLXRob3VnaHQtMDEyMzQ1Njc4OQ=="
ENCRYPTED = "gAAAAABencrypted-reasoning-0123456789"


@attrs.frozen
class Family:
    """One family's two turns: how to build it, what turn one says, and what
    turn two's body must hold."""

    name: str
    model: str
    build: Callable[[str], LlmAdapter]
    first: Callable[[], tuple[bytes, ...]]
    second: Callable[[], tuple[bytes, ...]]
    check: Callable[[dict[str, Any]], None]


def _sse(*payloads: dict[str, Any], done: bool = False) -> tuple[bytes, ...]:
    events = tuple(sse_event(p) for p in payloads)
    return (*events, b"data: [DONE]\n\n") if done else events


def _named(event: str, payload: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(payload)}\n\n".encode()


# --- chat completions: DeepSeek and a generic OpenAI-compatible server ----------------


def _chat_first() -> tuple[bytes, ...]:
    head = {"id": "c1", "object": "chat.completion.chunk", "model": "m"}
    return _sse(
        {**head, "choices": [{"index": 0, "delta": {"role": "assistant"}}]},
        {
            **head,
            "choices": [{"index": 0, "delta": {"reasoning_content": "Need the tool."}}],
        },
        {
            **head,
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "call_w1",
                                "type": "function",
                                "function": {
                                    "name": "weather",
                                    "arguments": '{"city": "Oslo"}',
                                },
                            }
                        ]
                    },
                }
            ],
        },
        {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        {
            **head,
            "choices": [],
            "usage": {"prompt_tokens": 9, "completion_tokens": 7, "total_tokens": 16},
        },
        done=True,
    )


def _chat_second() -> tuple[bytes, ...]:
    head = {"id": "c2", "object": "chat.completion.chunk", "model": "m"}
    return _sse(
        {**head, "choices": [{"index": 0, "delta": {"content": "Sunny."}}]},
        {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {
            **head,
            "choices": [],
            "usage": {"prompt_tokens": 20, "completion_tokens": 2, "total_tokens": 22},
        },
        done=True,
    )


def _chat_check(body: dict[str, Any]) -> None:
    assistant = body["messages"][1]
    assert assistant["role"] == "assistant"
    assert assistant["reasoning_content"] == "Need the tool."
    (call,) = assistant["tool_calls"]
    assert call["id"] == "call_w1"
    assert call["function"] == {"name": "weather", "arguments": '{"city": "Oslo"}'}
    assert body["messages"][2] == {
        "role": "tool",
        "tool_call_id": "call_w1",
        "content": "12 C, sunny",
    }


# --- Anthropic Messages -----------------------------------------------------------


def _anthropic_first() -> tuple[bytes, ...]:
    return (
        _named(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-sonnet-5",
                    "content": [],
                    "usage": {"input_tokens": 9, "output_tokens": 1},
                },
            },
        ),
        _named(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "thinking", "thinking": "", "signature": ""},
            },
        ),
        _named(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "thinking_delta", "thinking": "Need the tool."},
            },
        ),
        _named(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "signature_delta", "signature": SIGNATURE},
            },
        ),
        _named("content_block_stop", {"type": "content_block_stop", "index": 0}),
        _named(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {
                    "type": "tool_use",
                    "id": "toolu_w1",
                    "name": "weather",
                    "input": {},
                },
            },
        ),
        _named(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {
                    "type": "input_json_delta",
                    "partial_json": '{"city": "Oslo"}',
                },
            },
        ),
        _named("content_block_stop", {"type": "content_block_stop", "index": 1}),
        _named(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use"},
                "usage": {"output_tokens": 12},
            },
        ),
        _named("message_stop", {"type": "message_stop"}),
    )


def _anthropic_second() -> tuple[bytes, ...]:
    return (
        _named(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_2",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-sonnet-5",
                    "content": [],
                    "usage": {"input_tokens": 30, "output_tokens": 1},
                },
            },
        ),
        _named(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        _named(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "Sunny."},
            },
        ),
        _named("content_block_stop", {"type": "content_block_stop", "index": 0}),
        _named(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": 2},
            },
        ),
        _named("message_stop", {"type": "message_stop"}),
    )


def _anthropic_check(body: dict[str, Any]) -> None:
    assistant = body["messages"][1]
    assert assistant["role"] == "assistant"
    assert assistant["content"] == [
        {"type": "thinking", "thinking": "Need the tool.", "signature": SIGNATURE},
        {
            "type": "tool_use",
            "id": "toolu_w1",
            "name": "weather",
            "input": {"city": "Oslo"},
        },
    ]
    (result,) = body["messages"][2]["content"]
    assert result["type"] == "tool_result"
    assert result["tool_use_id"] == "toolu_w1"


# --- Gemini ---------------------------------------------------------------------------


def _gemini_first() -> tuple[bytes, ...]:
    return _sse(
        {
            "candidates": [
                {
                    "content": {
                        "role": "model",
                        "parts": [
                            {"text": "Need the tool.", "thought": True},
                            {
                                "functionCall": {
                                    "name": "weather",
                                    "args": {"city": "Oslo"},
                                },
                                "thoughtSignature": THOUGHT,
                            },
                        ],
                    },
                    "finishReason": "STOP",
                }
            ],
            "usageMetadata": {
                "promptTokenCount": 9,
                "candidatesTokenCount": 5,
                "thoughtsTokenCount": 4,
                "totalTokenCount": 18,
            },
            "responseId": "r1",
        }
    )


def _gemini_second() -> tuple[bytes, ...]:
    return _sse(
        {
            "candidates": [
                {
                    "content": {"role": "model", "parts": [{"text": "Sunny."}]},
                    "finishReason": "STOP",
                }
            ],
            "usageMetadata": {
                "promptTokenCount": 20,
                "candidatesTokenCount": 2,
                "totalTokenCount": 22,
            },
        }
    )


def _gemini_check(body: dict[str, Any]) -> None:
    model_turn = body["contents"][1]
    assert model_turn["role"] == "model"
    calls = [p for p in model_turn["parts"] if "functionCall" in p]
    assert calls == [
        {
            "functionCall": {"name": "weather", "args": {"city": "Oslo"}},
            "thoughtSignature": THOUGHT,
        }
    ]
    (response,) = body["contents"][2]["parts"]
    assert response["functionResponse"]["name"] == "weather"


# --- Ollama native --------------------------------------------------------------------


def _ndjson(*lines: dict[str, Any]) -> tuple[bytes, ...]:
    return tuple(json.dumps(line).encode() + b"\n" for line in lines)


def _ollama_first() -> tuple[bytes, ...]:
    head = {"model": "qwen3", "created_at": "2026-12-06T00:00:00Z"}
    return _ndjson(
        {
            **head,
            "message": {
                "role": "assistant",
                "content": "",
                "thinking": "Need the tool.",
            },
            "done": False,
        },
        {
            **head,
            "message": {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"function": {"name": "weather", "arguments": {"city": "Oslo"}}}
                ],
            },
            "done": False,
        },
        {
            **head,
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": "stop",
            "prompt_eval_count": 9,
            "eval_count": 7,
        },
    )


def _ollama_second() -> tuple[bytes, ...]:
    head = {"model": "qwen3", "created_at": "2026-12-06T00:00:01Z"}
    return _ndjson(
        {**head, "message": {"role": "assistant", "content": "Sunny."}, "done": False},
        {
            **head,
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": "stop",
            "prompt_eval_count": 20,
            "eval_count": 2,
        },
    )


def _ollama_check(body: dict[str, Any]) -> None:
    assistant = body["messages"][1]
    assert assistant["role"] == "assistant"
    assert assistant["thinking"] == "Need the tool."
    (call,) = assistant["tool_calls"]
    assert call["function"]["name"] == "weather"
    assert call["function"]["arguments"] == {"city": "Oslo"}
    tool = body["messages"][2]
    assert tool["role"] == "tool"
    assert tool["content"] == "12 C, sunny"


# --- OpenAI Responses ----------------------------------------------------------------


def _responses_first() -> tuple[bytes, ...]:
    reasoning = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "Need the tool."}],
        "encrypted_content": ENCRYPTED,
    }
    call = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_w1",
        "name": "weather",
        "arguments": '{"city": "Oslo"}',
        "status": "completed",
    }
    response = {"id": "resp_1", "object": "response", "model": "gpt-5.2"}
    return _sse(
        {
            "type": "response.created",
            "response": {**response, "status": "in_progress", "output": []},
        },
        {"type": "response.output_item.added", "output_index": 0, "item": reasoning},
        {"type": "response.output_item.done", "output_index": 0, "item": reasoning},
        {
            "type": "response.output_item.added",
            "output_index": 1,
            "item": {**call, "arguments": "", "status": "in_progress"},
        },
        {
            "type": "response.function_call_arguments.delta",
            "item_id": "fc_1",
            "output_index": 1,
            "delta": '{"city": "Oslo"}',
        },
        {"type": "response.output_item.done", "output_index": 1, "item": call},
        {
            "type": "response.completed",
            "response": {
                **response,
                "status": "completed",
                "output": [reasoning, call],
                "usage": {
                    "input_tokens": 9,
                    "output_tokens": 7,
                    "total_tokens": 16,
                    "output_tokens_details": {"reasoning_tokens": 4},
                },
            },
        },
    )


def _responses_second() -> tuple[bytes, ...]:
    message = {
        "type": "message",
        "id": "msg_2",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Sunny.", "annotations": []}],
    }
    response = {"id": "resp_2", "object": "response", "model": "gpt-5.2"}
    return _sse(
        {"type": "response.output_item.added", "output_index": 0, "item": message},
        {
            "type": "response.output_text.delta",
            "item_id": "msg_2",
            "output_index": 0,
            "content_index": 0,
            "delta": "Sunny.",
        },
        {"type": "response.output_item.done", "output_index": 0, "item": message},
        {
            "type": "response.completed",
            "response": {
                **response,
                "status": "completed",
                "output": [message],
                "usage": {"input_tokens": 20, "output_tokens": 2, "total_tokens": 22},
            },
        },
    )


def _responses_check(body: dict[str, Any]) -> None:
    items = body["input"]
    reasoning = [item for item in items if item.get("type") == "reasoning"]
    assert len(reasoning) == 1
    assert reasoning[0]["encrypted_content"] == ENCRYPTED
    assert reasoning[0]["id"] == "rs_1"
    calls = [item for item in items if item.get("type") == "function_call"]
    assert [(c["call_id"], c["name"], c["arguments"]) for c in calls] == [
        ("call_w1", "weather", '{"city": "Oslo"}')
    ]
    # The reasoning goes back right before the call it preceded.
    assert items.index(reasoning[0]) + 1 == items.index(calls[0])
    (output,) = [item for item in items if item.get("type") == "function_call_output"]
    assert output["call_id"] == "call_w1"
    assert output["output"] == "12 C, sunny"


FAMILIES = (
    Family(
        name="deepseek",
        model="deepseek-v4-pro",
        build=lambda url: DeepSeekAdapter(
            environ={"DEEPSEEK_API_KEY": KEY}, base_url=url
        ),
        first=_chat_first,
        second=_chat_second,
        check=_chat_check,
    ),
    Family(
        name="openai-compatible",
        model="qwen3-8b",
        # A generic server gets reasoning back only when told its field.
        build=lambda url: OpenAICompatAdapter(
            url, api_key=KEY, reasoning_passback_field="reasoning_content"
        ),
        first=_chat_first,
        second=_chat_second,
        check=_chat_check,
    ),
    Family(
        name="anthropic",
        model="claude-sonnet-5",
        build=lambda url: AnthropicAdapter(
            environ={"ANTHROPIC_API_KEY": KEY}, base_url=url
        ),
        first=_anthropic_first,
        second=_anthropic_second,
        check=_anthropic_check,
    ),
    Family(
        name="gemini",
        model="gemini-2.5-flash",
        build=lambda url: GeminiAdapter(environ={"GEMINI_API_KEY": KEY}, base_url=url),
        first=_gemini_first,
        second=_gemini_second,
        check=_gemini_check,
    ),
    Family(
        name="ollama",
        model="qwen3",
        build=lambda url: OllamaAdapter(url),
        first=_ollama_first,
        second=_ollama_second,
        check=_ollama_check,
    ),
    Family(
        name="openai-responses",
        model="gpt-5.2",
        build=lambda url: OpenAIResponsesAdapter(url, api_key=KEY),
        first=_responses_first,
        second=_responses_second,
        check=_responses_check,
    ),
)


@pytest.fixture(params=FAMILIES, ids=lambda family: family.name)
def family(request: pytest.FixtureRequest) -> Family:
    return request.param  # type: ignore[no-any-return]


def test_reply_message_carries_the_replay_state_into_the_next_turn(
    family: Family, server: LoopbackServer
) -> None:
    server.enqueue(Reply(body=family.first()))
    server.enqueue(Reply(body=family.second()))
    question = create_user_message("Weather in Oslo?")
    with family.build(server.url) as adapter:

        def options(*messages: Any) -> GenerateOptions:
            return GenerateOptions(
                provider="route",
                model=family.model,
                messages=messages,
                tools=(WEATHER,),
            )

        # The README's path: collect() of the adapter's stream, nothing else.
        reply = collect(adapter.stream(options(question)))
        assert reply.finish.kind == "tool-calls"
        (call,) = reply.tool_calls
        assert call.name == "weather"
        assert json.loads(call.arguments) == {"city": "Oslo"}
        # The user runs the tool themselves and sends reply.message back as is.
        result = create_tool_result_message(call.id, "12 C, sunny")
        answer = collect(adapter.stream(options(question, reply.message, result)))
    assert answer.text == "Sunny."
    assert len(server.requests) == 2
    family.check(json.loads(server.requests[1].body))
