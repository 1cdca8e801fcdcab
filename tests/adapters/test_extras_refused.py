"""The adapters that do not send ``response_format``, ``extra_body`` or
``extra_headers`` yet refuse them (DESIGN rule 11), before any request."""

from __future__ import annotations

from typing import Any

import pytest

from dsh_llm.adapters.anthropic import AnthropicAdapter
from dsh_llm.adapters.gemini import GeminiAdapter
from dsh_llm.adapters.openai_responses import OpenAIResponsesAdapter
from dsh_llm.errors import ErrorCode, LlmError
from dsh_llm.protocol import GenerateOptions, ResponseFormat
from dsh_llm.testing import LoopbackServer

ADAPTERS: dict[str, Any] = {
    "anthropic": lambda url: AnthropicAdapter(
        base_url=url, environ={"ANTHROPIC_API_KEY": "sk-ant-test"}
    ),
    "gemini": lambda url: GeminiAdapter(
        base_url=url, environ={"GEMINI_API_KEY": "g-test"}
    ),
    "responses": lambda url: OpenAIResponsesAdapter(f"{url}/v1", server="vllm"),
}
FIELDS: dict[str, dict[str, Any]] = {
    "response_format": {
        "response_format": ResponseFormat(schema={"type": "object"}, name="r")
    },
    "extra_body": {"extra_body": {"top_k": 1}},
    "extra_headers": {"extra_headers": {"x-trace": "1"}},
}


@pytest.mark.parametrize("field", sorted(FIELDS))
@pytest.mark.parametrize("name", sorted(ADAPTERS))
def test_an_unsent_field_is_refused_before_any_request(name, field):
    with LoopbackServer() as server:
        adapter = ADAPTERS[name](server.url)
        options = GenerateOptions.from_prompt("m", "hi", **FIELDS[field])
        with adapter, pytest.raises(LlmError) as caught:
            list(adapter.stream(options))
        assert caught.value.code == ErrorCode.UNSUPPORTED_OPTION
        assert field in caught.value.message
        assert server.requests == ()
