"""AnthropicAdapter against the real Anthropic API.

Skipped unless ``ANTHROPIC_API_KEY`` is set (``ANTHROPIC_BASE_URL`` is honoured);
``DSH_LLM_LIVE_ANTHROPIC_MODEL`` picks the model (default ``claude-haiku-4-5``)::

    ANTHROPIC_API_KEY=sk-ant-... pytest -m live tests/adapters/anthropic
"""

from __future__ import annotations

import os

import pytest

from dsh_llm.adapters.anthropic import PROVIDER_ROUTE
from dsh_llm.adapters.anthropic import AnthropicAdapter
from dsh_llm.assembler import BlockAssembler
from dsh_llm.assembler import collect
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import ModelSource
from dsh_llm.protocol import ToolSchema
from dsh_llm.protocol import create_tool_result_message
from dsh_llm.protocol import create_user_message
from dsh_llm.validator import validate_stream

MODEL = os.environ.get("DSH_LLM_LIVE_ANTHROPIC_MODEL", "claude-haiku-4-5")

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(
        not os.environ.get("ANTHROPIC_API_KEY"), reason="ANTHROPIC_API_KEY is not set"
    ),
]

WEATHER = ToolSchema(
    name="get_weather",
    description="Get the current weather for a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)


def _options(**fields: object) -> GenerateOptions:
    return GenerateOptions(provider=PROVIDER_ROUTE, model=MODEL, **fields)  # type: ignore[arg-type]


def test_a_short_answer_streams_strictly_with_usage() -> None:
    with AnthropicAdapter() as adapter:
        options = _options(
            messages=(create_user_message("Reply with the single word: pong"),),
            max_tokens=50,
        )
        result = collect(validate_stream(adapter.stream(options), strict=True))
    assert "pong" in result.text.lower()
    assert result.finish.kind == "stop"
    assert result.usage is not None
    assert result.usage.input_tokens


def test_thinking_and_a_tool_call_round_trip() -> None:
    question = create_user_message("What is the weather in Oslo? Use the tool.")
    with AnthropicAdapter() as adapter:
        first = BlockAssembler()
        for chunk in validate_stream(
            adapter.stream(
                _options(
                    messages=(question,),
                    tools=(WEATHER,),
                    reasoning_effort="low",
                    max_tokens=4000,
                )
            ),
            strict=True,
        ):
            first.push(chunk)
        assert first.finish.kind == "tool-calls"
        (call,) = first.tool_calls
        answer = first.message(
            ModelSource(
                provider=PROVIDER_ROUTE, model=MODEL, replay_state=first.replay_state
            )
        )
        result = collect(
            validate_stream(
                adapter.stream(
                    _options(
                        messages=(
                            question,
                            answer,
                            create_tool_result_message(call.id, "4C and clear"),
                        ),
                        tools=(WEATHER,),
                        reasoning_effort="low",
                        max_tokens=4000,
                    )
                ),
                strict=True,
            )
        )
    assert result.finish.kind == "stop"
    assert "4" in result.text
