"""The conformance kit (``dsh_llm.testing.assert_adapter_conforms``) run on
``AzureOpenAIAdapter`` on both wires, with cassettes of the Azure fixtures
(one read per SSE event): re-split and noisy bodies give the same chunks,
every cut fails with one code whatever the framing, a stall times out, an
abort aborts, HTTP errors map (429 with its ``Retry-After``)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from dsh_llm.adapters.azure import AzureOpenAIAdapter
from dsh_llm.testing import assert_adapter_conforms
from dsh_llm.testing.cassette import BodyRead
from dsh_llm.testing.cassette import Cassette
from dsh_llm.testing.cassette import CassetteRequest
from dsh_llm.testing.cassette import CassetteResponse

from .replay import body

KEY = "azure-conformance-0123456789"
_EVENT_END = re.compile(rb"\n\n")
CASES = (
    ("chat", "chat_prompt_filter_results_first", None),
    ("chat", "chat_async_filter_blocked", "2024-10-21"),
    ("chat", "chat_tool_call", None),
    ("responses", "responses_reasoning_text", None),
    ("responses", "responses_function_call", "2025-04-01-preview"),
    ("responses", "responses_incomplete_content_filter", None),
)


def _cassette(name: str, wire: str) -> Cassette:
    raw = body(name)
    reads: list[BodyRead] = []
    start = 0
    for match in _EVENT_END.finditer(raw):
        reads.append(BodyRead(at_ms=float(len(reads)), data=raw[start : match.end()]))
        start = match.end()
    assert start == len(raw)
    path = "/openai/v1/chat/completions" if wire == "chat" else "/openai/v1/responses"
    return Cassette(
        request=CassetteRequest(
            method="POST",
            url=f"https://contoso.openai.azure.com{path}",
            headers=(("content-type", "application/json"),),
            body=json.dumps({"model": "dep", "stream": True}).encode(),
        ),
        response=CassetteResponse(
            status=200,
            headers=(("content-type", "text/event-stream"),),
            reads=tuple(reads),
        ),
        adapter="dsh_llm.adapters.azure:AzureOpenAIAdapter",
    )


@pytest.mark.parametrize(("wire", "name", "api_version"), CASES)
def test_azure_adapter_conforms(wire: str, name: str, api_version: str | None) -> None:
    def factory(base_url: str, **options: Any) -> AzureOpenAIAdapter:
        return AzureOpenAIAdapter(
            KEY,
            base_url=base_url,
            wire=wire,
            api_version=api_version,
            environ={},
            **options,
        )

    report = assert_adapter_conforms(factory, _cassette(name, wire))
    assert "stall after half the events" in report.variants
    assert "abort while waiting" in report.variants
    assert any(variant.startswith("cut ") for variant in report.variants)
    assert "http 429 with Retry-After" in report.variants
