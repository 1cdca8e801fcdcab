"""OpenAIResponsesAdapter against a real server that speaks ``POST /responses``.

Skipped unless ``DSH_LLM_RESPONSES_BASE_URL`` names the server's API root, e.g.::

    ollama serve & ollama pull gpt-oss:20b
    DSH_LLM_RESPONSES_BASE_URL=http://127.0.0.1:11434/v1 \\
        DSH_LLM_RESPONSES_MODEL=gpt-oss:20b pytest -m live

``DSH_LLM_RESPONSES_MODEL`` picks the model (default: the first id ``GET /models``
lists); ``DSH_LLM_RESPONSES_SERVER`` the profile (default: guessed from the URL);
``DSH_LLM_RESPONSES_API_KEY_ENV`` names the variable holding a key (default: no
key). ``docs/openai-responses.md`` lists each server's start command.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest
import requests

from dsh_llm.adapters.openai_responses import OpenAIResponsesAdapter
from dsh_llm.assembler import collect
from dsh_llm.protocol import BlockEnd
from dsh_llm.protocol import Finish
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import ToolSchema
from dsh_llm.protocol import create_assistant_message
from dsh_llm.protocol import create_tool_result_message
from dsh_llm.protocol import create_user_message
from dsh_llm.validator import validate_stream

BASE_URL = os.environ.get("DSH_LLM_RESPONSES_BASE_URL", "")
KEY_ENV = os.environ.get("DSH_LLM_RESPONSES_API_KEY_ENV") or None
SERVER = os.environ.get("DSH_LLM_RESPONSES_SERVER") or None

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(not BASE_URL, reason="DSH_LLM_RESPONSES_BASE_URL is not set"),
]

WEATHER = ToolSchema(
    name="get_weather",
    description="Get the current weather for a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string", "description": "The city name"}},
        "required": ["city"],
    },
)


def _first_model() -> str:
    headers = {}
    if KEY_ENV is not None:
        headers["authorization"] = f"Bearer {os.environ.get(KEY_ENV, '')}"
    with requests.get(
        f"{BASE_URL.rstrip('/')}/models", headers=headers, timeout=30
    ) as response:
        response.raise_for_status()
        models = response.json().get("data") or []
    if not models:
        pytest.skip("the server lists no model; set DSH_LLM_RESPONSES_MODEL")
    return str(models[0]["id"])


@pytest.fixture(scope="module")
def model() -> str:
    return os.environ.get("DSH_LLM_RESPONSES_MODEL") or _first_model()


@pytest.fixture
def adapter() -> Iterator[OpenAIResponsesAdapter]:
    with OpenAIResponsesAdapter(
        BASE_URL, api_key_env=KEY_ENV, server=SERVER, stream_idle_timeout_ms=180_000
    ) as live:
        yield live


def test_live_text_stream_is_strict_and_assembles(adapter, model):
    options = GenerateOptions(
        provider="live",
        model=model,
        messages=(create_user_message("Reply with one short sentence about tea."),),
        max_tokens=256,
    )
    chunks = list(validate_stream(adapter.stream(options), strict=True))
    result = collect(chunks)
    assert result.text.strip() or result.reasoning.strip()
    assert result.finish.kind in ("stop", "max-tokens")
    assert [c.type for c in chunks][-2:] == ["usage", "finish"]


def test_live_tool_call_round_trips_with_its_reasoning(adapter, model):
    question = create_user_message("What is the weather in Paris right now?")
    options = GenerateOptions(
        provider="live",
        model=model,
        messages=(question,),
        tools=(WEATHER,),
        max_tokens=1024,
    )
    chunks = list(validate_stream(adapter.stream(options), strict=True))
    result = collect(chunks)
    if result.finish.kind != "tool-calls":
        pytest.skip(f"the model answered without a tool call ({result.finish.kind})")
    call = result.tool_calls[0]
    assert call.name == "get_weather"
    assert isinstance(json.loads(call.arguments), dict)
    end = chunks[-1]
    assert isinstance(end, Finish)
    blocks = tuple(c.block for c in chunks if isinstance(c, BlockEnd))
    follow_up = GenerateOptions(
        provider="live",
        model=model,
        messages=(
            question,
            create_assistant_message(
                blocks, provider="live", model=model, replay_state=end.replay_state
            ),
            create_tool_result_message(call.id, "Sunny, 21 C"),
        ),
        tools=(WEATHER,),
        max_tokens=1024,
    )
    second = collect(list(validate_stream(adapter.stream(follow_up), strict=True)))
    assert second.finish.kind in ("stop", "max-tokens", "tool-calls")
