"""OllamaAdapter against a real Ollama server.

Skipped unless ``DSH_LLM_OLLAMA_URL`` names the server's root::

    ollama serve & ollama pull qwen3:0.6b
    DSH_LLM_OLLAMA_URL=http://127.0.0.1:11434 pytest -m live tests/adapters/ollama

``DSH_LLM_OLLAMA_MODEL`` picks the model (default: the first ``/api/tags`` lists).
"""

from __future__ import annotations

import os

import pytest

from dsh_llm.adapters.ollama import PROVIDER_ROUTE
from dsh_llm.adapters.ollama import OllamaAdapter
from dsh_llm.assembler import collect
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import create_user_message
from dsh_llm.validator import validate_stream

BASE_URL = os.environ.get("DSH_LLM_OLLAMA_URL", "")

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(not BASE_URL, reason="DSH_LLM_OLLAMA_URL is not set"),
]


def test_list_models_then_a_short_answer_streams_strictly():
    with OllamaAdapter(BASE_URL) as adapter:
        model = os.environ.get("DSH_LLM_OLLAMA_MODEL") or (
            adapter.list_models(PROVIDER_ROUTE)[0].id
        )
        options = GenerateOptions(
            provider=PROVIDER_ROUTE,
            model=model,
            messages=(create_user_message("Say hello in one word."),),
            max_tokens=256,
        )
        result = collect(validate_stream(adapter.stream(options), strict=True))
    assert result.finish.kind in ("stop", "max-tokens")
    assert result.usage is not None
    assert result.usage.output_tokens
