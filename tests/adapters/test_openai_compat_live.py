"""OpenAICompatAdapter against a real OpenAI-compatible server.

Skipped unless ``DSH_LLM_LIVE_BASE_URL`` names the server's API root, e.g.::

    python -m llama_cpp.server --model qwen2.5-0.5b-instruct-q4_k_m.gguf \\
        --chat_format chatml-function-calling &
    DSH_LLM_LIVE_BASE_URL=http://127.0.0.1:8000/v1 pytest -m live

``DSH_LLM_LIVE_MODEL`` picks the model (default: the first id ``GET /models``
lists); ``DSH_LLM_LIVE_API_KEY_ENV`` names the variable holding a key (default:
no key, as local servers need none). See ``docs/local-servers.md``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest
import requests

from dsh_llm.adapters.openai_compat import OpenAICompatAdapter
from dsh_llm.assembler import collect
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import ToolSchema
from dsh_llm.protocol import create_user_message
from dsh_llm.validator import validate_stream

BASE_URL = os.environ.get("DSH_LLM_LIVE_BASE_URL", "")
KEY_ENV = os.environ.get("DSH_LLM_LIVE_API_KEY_ENV") or None

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(not BASE_URL, reason="DSH_LLM_LIVE_BASE_URL is not set"),
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
        pytest.skip("the server lists no model; set DSH_LLM_LIVE_MODEL")
    return str(models[0]["id"])


@pytest.fixture(scope="module")
def model() -> str:
    return os.environ.get("DSH_LLM_LIVE_MODEL") or _first_model()


@pytest.fixture
def adapter() -> Iterator[OpenAICompatAdapter]:
    with OpenAICompatAdapter(
        BASE_URL,
        api_key_env=KEY_ENV,
        display_name="live server",
        stream_idle_timeout_ms=180_000,
    ) as live:
        yield live


def test_live_text_stream_is_strict_and_assembles(adapter, model):
    options = GenerateOptions(
        provider="live",
        model=model,
        messages=(create_user_message("Reply with one short sentence about tea."),),
        max_tokens=64,
        temperature=0,
    )
    chunks = list(validate_stream(adapter.stream(options), strict=True))
    result = collect(chunks)
    assert result.text.strip() or result.reasoning.strip()
    assert result.finish.kind in ("stop", "max-tokens")
    assert [c.type for c in chunks][-2:] == ["usage", "finish"]


def test_live_forced_tool_call_is_strict_and_assembles(adapter, model):
    options = GenerateOptions(
        provider="live",
        model=model,
        messages=(create_user_message("What is the weather in Paris right now?"),),
        tools=(WEATHER,),
        tool_choice="get_weather",
        max_tokens=256,
        temperature=0,
    )
    chunks = list(validate_stream(adapter.stream(options), strict=True))
    result = collect(chunks)
    assert result.finish.kind == "tool-calls"
    call = result.tool_calls[0]
    assert call.name == "get_weather"
    assert isinstance(json.loads(call.arguments), dict)
