"""BedrockAdapter against the real service. Skipped unless AWS credentials (or
a Bedrock API key) and ``BEDROCK_TEST_MODEL`` (a model id or inference profile
the account may call) are set; the region is the environment's."""

from __future__ import annotations

import os

import pytest

from dsh_llm.adapters.bedrock import PROVIDER_ROUTE
from dsh_llm.adapters.bedrock import BedrockAdapter
from dsh_llm.assembler import BlockAssembler
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import create_user_message
from dsh_llm.validator import validate_stream

MODEL = os.environ.get("BEDROCK_TEST_MODEL")
CREDENTIALS = bool(
    os.environ.get("AWS_BEARER_TOKEN_BEDROCK")
    or os.environ.get("AWS_ACCESS_KEY_ID")
    or os.environ.get("AWS_PROFILE")
)

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(
        not (MODEL and CREDENTIALS),
        reason="set BEDROCK_TEST_MODEL and AWS credentials to run",
    ),
]


def test_a_short_answer_streams_and_finishes_with_usage() -> None:
    assert MODEL is not None
    with BedrockAdapter() as adapter:
        assembler = BlockAssembler()
        options = GenerateOptions(
            provider=PROVIDER_ROUTE,
            model=MODEL,
            messages=(create_user_message("Say OK and nothing else."),),
            max_tokens=50,
        )
        for chunk in validate_stream(adapter.stream(options), strict=True):
            assembler.push(chunk)
    assert assembler.finish.kind == "stop"
    assert assembler.usage is not None
    assert assembler.usage.output_tokens
    assert "OK" in assembler.text.upper()
