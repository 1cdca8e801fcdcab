"""The conformance kit (``dsh_llm.testing.assert_adapter_conforms``) run on
``BedrockAdapter`` with cassettes of the fixtures: re-split and re-framed bodies
give the same chunks, every cut of the binary stream fails with one code
whatever the framing, a stall times out, an abort aborts, HTTP errors map."""

from __future__ import annotations

from typing import Any

import pytest

from dsh_llm.adapters.bedrock import BedrockAdapter
from dsh_llm.testing import assert_adapter_conforms
from dsh_llm.testing.cassette import BodyRead
from dsh_llm.testing.cassette import Cassette
from dsh_llm.testing.cassette import CassetteRequest
from dsh_llm.testing.cassette import CassetteResponse

from .replay import fixture_body

KEY = "ABSK-conformance-0123456789"
CASES = (
    "text",
    "tool_use",
    "reasoning_signature_tool_use",
    "redacted_reasoning",
    "max_tokens_cut_block",
    "throttling_mid_block",
)


def _factory(base_url: str, **options: Any) -> BedrockAdapter:
    return BedrockAdapter(KEY, base_url=base_url, region="us-east-1", **options)


def _cassette(name: str) -> Cassette:
    body = fixture_body(name)
    # Reads of about one frame's size, as a socket would give them.
    reads = tuple(
        BodyRead(at_ms=float(i), data=body[at : at + 97])
        for i, at in enumerate(range(0, len(body), 97))
    )
    return Cassette(
        request=CassetteRequest(
            method="POST",
            url="https://bedrock-runtime.us-east-1.amazonaws.com/model/m/converse-stream",
            headers=(("content-type", "application/json"),),
            body=b'{"messages": []}',
        ),
        response=CassetteResponse(
            status=200,
            headers=(("content-type", "application/vnd.amazon.eventstream"),),
            reads=reads,
        ),
        adapter="dsh_llm.adapters.bedrock:BedrockAdapter",
    )


@pytest.mark.parametrize("name", CASES)
def test_bedrock_adapter_conforms(name: str) -> None:
    report = assert_adapter_conforms(_factory, _cassette(name))
    assert "stall after half the events" in report.variants
    assert "abort while waiting" in report.variants
    assert any(variant.startswith("cut ") for variant in report.variants)
    assert "http 429 with Retry-After" in report.variants
