"""Token counting before the call: each wire's own endpoint asked about the
request ``stream()`` would send (tests/fixtures/count_tokens, written from the
providers' API references), over a loopback server; the wires without one, the
refusals before I/O, and what a bad answer raises."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dsh_llm.adapter import LlmAdapter
from dsh_llm.adapters._wire.adapter import COUNT_TOKENS_TIMEOUT_MS
from dsh_llm.adapters.anthropic import AnthropicAdapter
from dsh_llm.adapters.bedrock import BedrockAdapter
from dsh_llm.adapters.deepseek import DeepSeekAdapter
from dsh_llm.adapters.gemini import GeminiAdapter
from dsh_llm.adapters.ollama import OllamaAdapter
from dsh_llm.adapters.openai_compat import OpenAICompatAdapter
from dsh_llm.adapters.openai_responses import OpenAIResponsesAdapter
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import ToolSchema
from dsh_llm.runtime import LlmRuntime
from dsh_llm.signal import AbortController
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply

FIXTURES = Path(__file__).parent.parent / "fixtures" / "count_tokens"
KEY = "sk-count-0123456789abcdef"
LOOKUP = ToolSchema(
    name="lookup",
    description="Look a clause up.",
    parameters={"type": "object", "properties": {"clause": {"type": "string"}}},
)


def _case(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        (FIXTURES / f"{name}.json").read_text(encoding="utf-8")
    )
    return data


def _options(model: str, **fields: Any) -> GenerateOptions:
    fields.setdefault("system", "Be brief.")
    fields.setdefault("tools", [LOOKUP])
    fields.setdefault("tool_choice", "auto")
    return GenerateOptions.from_prompt(model, "How long is the contract?", **fields)


def _json(body: Any, status: int = 200, **headers: str) -> Reply:
    return Reply(
        status=status,
        reason="OK" if status == 200 else "Refused",
        headers={"content-type": "application/json", **headers},
        body=json.dumps(body).encode(),
        framing="length",
    )


Factory = Callable[[LoopbackServer], Any]

ADAPTERS: dict[str, Factory] = {
    "anthropic": lambda server: AnthropicAdapter(api_key=KEY, base_url=server.url),
    "gemini": lambda server: GeminiAdapter(api_key=KEY, base_url=server.url),
    "responses": lambda server: OpenAIResponsesAdapter(
        f"{server.url}/v1", api_key=KEY, server="openai"
    ),
    "bedrock": lambda server: BedrockAdapter(
        KEY, base_url=server.url, region="us-west-2"
    ),
}
KEY_HEADERS = {
    "anthropic": ("x-api-key", KEY),
    "gemini": ("x-goog-api-key", KEY),
    "responses": ("authorization", f"Bearer {KEY}"),
    "bedrock": ("authorization", f"Bearer {KEY}"),
}
# The fields each family's stream request sends that do not change the input.
SAMPLING = {
    "anthropic": {"max_tokens": 50},
    "gemini": {"temperature": 0.2},
    "responses": {"max_tokens": 50, "temperature": 0.2, "cache_key": "k"},
    "bedrock": {"max_tokens": 50, "temperature": 0.2},
}


@pytest.mark.parametrize("name", sorted(ADAPTERS))
def test_the_wire_endpoint_counts_the_request_stream_would_send(
    server: LoopbackServer, name: str
) -> None:
    case = _case(name)
    server.enqueue(_json(case["answer"]))
    with ADAPTERS[name](server) as adapter:
        count = adapter.count_tokens(_options(case["model"], **SAMPLING[name]))
    assert count == case["count"]
    (request,) = server.requests
    assert request.method == "POST"
    assert request.path == case["path"]
    assert request.json() == case["request"]
    assert request.header("accept") == "application/json"
    assert request.header("content-type") == "application/json"
    header, value = KEY_HEADERS[name]
    assert request.header(header) == value


def test_anthropic_counts_with_the_stream_headers(server: LoopbackServer) -> None:
    server.enqueue(_json({"input_tokens": 7}))
    with AnthropicAdapter(
        api_key=KEY, base_url=server.url, beta=("token-counting-2024-11-01",)
    ) as adapter:
        adapter.count_tokens(_options("claude-sonnet-4-5"))
    request = server.requests[0]
    assert request.header("anthropic-version") == "2023-06-01"
    assert request.header("anthropic-beta") == "token-counting-2024-11-01"


@pytest.mark.parametrize(
    "build",
    [
        lambda server: DeepSeekAdapter(api_key=KEY, base_url=server.url),
        lambda server: OpenAICompatAdapter(f"{server.url}/v1"),
        lambda server: OllamaAdapter(server.url),
        lambda server: OpenAIResponsesAdapter(f"{server.url}/v1", server="vllm"),
    ],
    ids=["deepseek", "openai-compatible", "ollama", "responses-vllm"],
)
def test_a_wire_without_a_counting_endpoint_refuses_before_any_io(
    server: LoopbackServer, build: Factory
) -> None:
    with build(server) as adapter, pytest.raises(LlmError) as caught:
        adapter.count_tokens(_options("m"))
    assert caught.value.code == ErrorCode.UNSUPPORTED_OPTION
    assert "token-counting endpoint" in caught.value.message
    assert server.requests == ()


def test_what_stream_would_refuse_is_refused_before_the_count(
    server: LoopbackServer,
) -> None:
    with AnthropicAdapter(api_key=KEY, base_url=server.url) as adapter:
        with pytest.raises(LlmError) as caught:
            adapter.count_tokens(_options("claude-sonnet-4-5", cache_key="k"))
        assert caught.value.code == ErrorCode.UNSUPPORTED_OPTION
        with pytest.raises(LlmError) as missing:
            AnthropicAdapter(base_url=server.url, environ={}).count_tokens(
                _options("claude-sonnet-4-5")
            )
        assert missing.value.code == ErrorCode.MISSING_CREDENTIAL
    assert server.requests == ()


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        (_json({"type": "error", "error": {"type": "x"}}, status=401), "AUTH"),
        (_json({"tokens": 3}), "MALFORMED_RESPONSE"),
        (_json({"input_tokens": -1}), "MALFORMED_RESPONSE"),
        (_json([1, 2]), "MALFORMED_RESPONSE"),
        (
            Reply(
                headers={"content-type": "application/json"},
                body=b"<html>",
                framing="length",
            ),
            "MALFORMED_RESPONSE",
        ),
    ],
    ids=["401", "no-count", "negative", "not-an-object", "not-json"],
)
def test_an_answer_without_a_count_or_a_refusal_raises_its_code(
    server: LoopbackServer, reply: Reply, code: str
) -> None:
    server.enqueue(reply)
    with (
        AnthropicAdapter(api_key=KEY, base_url=server.url) as adapter,
        pytest.raises(LlmError) as caught,
    ):
        adapter.count_tokens(_options("claude-sonnet-4-5"))
    assert caught.value.code == code


def test_a_refusal_never_shows_the_key_it_echoes(server: LoopbackServer) -> None:
    echo = {"type": "error", "error": {"type": "invalid_request_error"}}
    echo["error"]["message"] = f"bad key {KEY}"
    server.enqueue(_json(echo, status=400, **{"request-id": f"req-{KEY}"}))
    with (
        AnthropicAdapter(api_key=KEY, base_url=server.url) as adapter,
        pytest.raises(LlmError) as caught,
    ):
        adapter.count_tokens(_options("claude-sonnet-4-5"))
    assert caught.value.code == ErrorCode.INVALID_REQUEST
    assert KEY not in caught.value.message
    assert KEY not in (caught.value.request_id or "")


def test_a_count_is_bounded_by_the_configured_timeout(server: LoopbackServer) -> None:
    server.enqueue(Reply(header_delay=None))
    with (
        AnthropicAdapter(
            api_key=KEY, base_url=server.url, total_timeout_ms=300
        ) as adapter,
        pytest.raises(LlmError) as caught,
    ):
        adapter.count_tokens(_options("claude-sonnet-4-5"))
    assert caught.value.code == ErrorCode.TIMEOUT
    assert "300ms" in caught.value.message
    assert COUNT_TOKENS_TIMEOUT_MS == 60_000


def test_an_aborted_signal_stops_the_count(server: LoopbackServer) -> None:
    controller = AbortController()
    controller.abort()
    with (
        AnthropicAdapter(api_key=KEY, base_url=server.url) as adapter,
        pytest.raises(LlmError) as caught,
    ):
        adapter.count_tokens(_options("claude-sonnet-4-5", signal=controller.signal))
    assert caught.value.code == ErrorCode.ABORTED
    assert server.requests == ()


# --- the runtime ------------------------------------------------------------------


def test_the_runtime_counts_through_the_route_adapter(server: LoopbackServer) -> None:
    server.enqueue(_json({"input_tokens": 42}))
    runtime = LlmRuntime()
    with AnthropicAdapter(api_key=KEY, base_url=server.url) as adapter:
        runtime.register_adapter(["anthropic"], adapter)
        options = _options("claude-sonnet-4-5", provider="anthropic")
        assert runtime.count_tokens(options) == 42
        with pytest.raises(LlmError) as missing:
            runtime.count_tokens(options.evolve(provider="elsewhere"))
    assert missing.value.code == ErrorCode.NO_ADAPTER


class _Plain(LlmAdapter):
    def stream(self, options: GenerateOptions) -> Any:
        chunks: list[StreamChunk] = []
        return iter(chunks)


class _Broken(_Plain):
    def count_tokens(self, options: GenerateOptions) -> int:
        raise RuntimeError("tokenizer missing")


def test_an_adapter_that_cannot_count_refuses_through_the_runtime() -> None:
    runtime = LlmRuntime()
    runtime.register_adapter(["plain"], _Plain())
    runtime.register_adapter(["broken"], _Broken())
    with pytest.raises(LlmError) as refused:
        runtime.count_tokens(GenerateOptions.from_prompt("m", "Hi", provider="plain"))
    assert refused.value.code == ErrorCode.UNSUPPORTED_OPTION
    with pytest.raises(LlmError) as broken:
        runtime.count_tokens(GenerateOptions.from_prompt("m", "Hi", provider="broken"))
    assert broken.value.code == ErrorCode.UNKNOWN
    assert "tokenizer missing" in broken.value.message
    with pytest.raises(TypeError):
        runtime.count_tokens("Hi")  # type: ignore[arg-type]
