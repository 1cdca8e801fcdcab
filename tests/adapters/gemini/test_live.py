"""GeminiAdapter against the real Gemini API.

Skipped unless ``GEMINI_API_KEY`` is set::

    GEMINI_API_KEY=... pytest -m live tests/adapters/gemini/test_live.py

``DSH_LLM_GEMINI_MODEL`` picks the model (default ``gemini-2.5-flash``).
"""

from __future__ import annotations

import os

import pytest

from dsh_llm.adapters.gemini import PROVIDER_ROUTE
from dsh_llm.adapters.gemini import GeminiAdapter
from dsh_llm.assembler import collect
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import ToolSchema
from dsh_llm.protocol import create_user_message
from dsh_llm.validator import validate_stream

MODEL = os.environ.get("DSH_LLM_GEMINI_MODEL", "gemini-2.5-flash")

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(
        not os.environ.get("GEMINI_API_KEY"), reason="GEMINI_API_KEY is not set"
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


def test_a_short_answer_streams_strictly_with_usage():
    options = GenerateOptions(
        provider=PROVIDER_ROUTE,
        model=MODEL,
        messages=(create_user_message("Say hello in one word."),),
        max_tokens=256,
    )
    with GeminiAdapter() as adapter:
        result = collect(validate_stream(adapter.stream(options), strict=True))
    assert result.finish.kind in ("stop", "max-tokens")
    assert result.usage is not None
    assert result.usage.input_tokens


def test_a_forced_tool_call_arrives_whole():
    options = GenerateOptions(
        provider=PROVIDER_ROUTE,
        model=MODEL,
        messages=(create_user_message("What is the weather in Oslo?"),),
        tools=(WEATHER,),
        tool_choice="get_weather",
    )
    with GeminiAdapter() as adapter:
        result = collect(validate_stream(adapter.stream(options), strict=True))
    assert result.finish.kind == "tool-calls"
    assert result.tool_calls[0].name == "get_weather"
