"""Every adapter sends ``extra_body`` and ``extra_headers`` on the wire it
speaks: the extra field lands in the JSON body the server reads (merged last,
so it wins) and the extra header arrives lower-cased, over a real socket."""

from __future__ import annotations

from typing import Any

import pytest

from dsh_llm.adapters.anthropic import AnthropicAdapter
from dsh_llm.adapters.deepseek import DeepSeekAdapter
from dsh_llm.adapters.gemini import GeminiAdapter
from dsh_llm.adapters.ollama import OllamaAdapter
from dsh_llm.adapters.openai_compat import OpenAICompatAdapter
from dsh_llm.adapters.openai_responses import OpenAIResponsesAdapter
from dsh_llm.errors import LlmError
from dsh_llm.protocol import GenerateOptions
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply

ADAPTERS: dict[str, Any] = {
    "anthropic": lambda url: AnthropicAdapter(
        base_url=url, environ={"ANTHROPIC_API_KEY": "sk-ant-test"}
    ),
    "deepseek": lambda url: DeepSeekAdapter(
        base_url=url, environ={"DEEPSEEK_API_KEY": "sk-test"}
    ),
    "gemini": lambda url: GeminiAdapter(
        base_url=url, environ={"GEMINI_API_KEY": "g-test"}
    ),
    "ollama": lambda url: OllamaAdapter(url),
    "openai-compatible": lambda url: OpenAICompatAdapter(f"{url}/v1"),
    "responses": lambda url: OpenAIResponsesAdapter(f"{url}/v1", server="vllm"),
}
MODELS = {"deepseek": "deepseek-v4-flash", "gemini": "gemini-3-flash-preview"}


@pytest.mark.parametrize("name", sorted(ADAPTERS))
def test_extra_body_and_headers_reach_the_server(name):
    options = GenerateOptions.from_prompt(
        MODELS.get(name, "m"),
        "hi",
        extra_body={"seed": 7},
        extra_headers={"X-Trace-Id": "t-1"},
    )
    with LoopbackServer() as server:
        # The answer does not matter here, only what was sent.
        server.enqueue(Reply(status=400, body=b'{"error": "stop here"}'))
        with ADAPTERS[name](server.url) as adapter, pytest.raises(LlmError):
            for _ in adapter.stream(options):
                pass
        (request,) = server.requests
    assert request.json()["seed"] == 7
    names = [name for name, _ in request.headers]
    assert "x-trace-id" in names  # sent lower-cased
    assert request.header("x-trace-id") == "t-1"
