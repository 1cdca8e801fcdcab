"""VertexAdapter against the real service. Skipped unless
``VERTEX_TEST_PROJECT`` and a model (``VERTEX_TEST_GEMINI_MODEL`` and/or
``VERTEX_TEST_CLAUDE_MODEL``) are set; the location is ``VERTEX_TEST_LOCATION``
(default ``global``); the credentials are the machine's Application Default
Credentials (or ``GOOGLE_OAUTH_ACCESS_TOKEN``)."""

from __future__ import annotations

import os

import pytest

from dsh_llm.adapters.vertex import PROVIDER_ROUTE
from dsh_llm.adapters.vertex import VertexAdapter
from dsh_llm.assembler import BlockAssembler
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import create_user_message
from dsh_llm.validator import validate_stream

PROJECT = os.environ.get("VERTEX_TEST_PROJECT")
LOCATION = os.environ.get("VERTEX_TEST_LOCATION", "global")
MODELS = [
    model
    for model in (
        os.environ.get("VERTEX_TEST_GEMINI_MODEL"),
        os.environ.get("VERTEX_TEST_CLAUDE_MODEL"),
    )
    if model
]

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(
        not (PROJECT and MODELS),
        reason="set VERTEX_TEST_PROJECT and VERTEX_TEST_GEMINI_MODEL or "
        "VERTEX_TEST_CLAUDE_MODEL to run",
    ),
]


@pytest.mark.parametrize("model", MODELS or ["unset"])
def test_a_short_answer_streams_and_finishes_with_usage(model: str) -> None:
    with VertexAdapter(project=PROJECT, location=LOCATION) as adapter:
        assembler = BlockAssembler()
        options = GenerateOptions(
            provider=PROVIDER_ROUTE,
            model=model,
            messages=(create_user_message("Say OK and nothing else."),),
            max_tokens=200,
        )
        for chunk in validate_stream(adapter.stream(options), strict=True):
            assembler.push(chunk)
    assert assembler.finish.kind == "stop"
    assert assembler.usage is not None
    assert assembler.usage.output_tokens
    assert "OK" in assembler.text.upper()
