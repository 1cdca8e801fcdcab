"""AzureOpenAIAdapter against a real Azure OpenAI resource. Skipped unless
``AZURE_OPENAI_ENDPOINT`` and ``AZURE_OPENAI_TEST_DEPLOYMENT`` (a chat model's
deployment) are set, and either ``AZURE_OPENAI_API_KEY`` or
``AZURE_OPENAI_TEST_ENTRA=1`` (sign-in through azure-identity);
``AZURE_OPENAI_TEST_API_VERSION`` also runs the deployment paths."""

from __future__ import annotations

import os

import pytest

from dsh_llm.adapters.azure import PROVIDER_ROUTE
from dsh_llm.adapters.azure import AzureOpenAIAdapter
from dsh_llm.assembler import BlockAssembler
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import create_user_message
from dsh_llm.validator import validate_stream

DEPLOYMENT = os.environ.get("AZURE_OPENAI_TEST_DEPLOYMENT")
ENTRA = os.environ.get("AZURE_OPENAI_TEST_ENTRA") == "1"
API_VERSION = os.environ.get("AZURE_OPENAI_TEST_API_VERSION")
READY = bool(
    DEPLOYMENT
    and os.environ.get("AZURE_OPENAI_ENDPOINT")
    and (os.environ.get("AZURE_OPENAI_API_KEY") or ENTRA)
)

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(
        not READY,
        reason="set AZURE_OPENAI_ENDPOINT, AZURE_OPENAI_TEST_DEPLOYMENT and "
        "AZURE_OPENAI_API_KEY (or AZURE_OPENAI_TEST_ENTRA=1) to run",
    ),
]

LAYOUTS = [None] + ([API_VERSION] if API_VERSION else [])


@pytest.mark.parametrize("api_version", LAYOUTS, ids=lambda v: v or "v1")
@pytest.mark.parametrize("wire", ["chat", "responses"])
def test_a_short_answer_streams_and_finishes_with_usage(
    wire: str, api_version: str | None
) -> None:
    assert DEPLOYMENT is not None
    auth = "entra-id" if ENTRA else "api-key"
    with AzureOpenAIAdapter(wire=wire, api_version=api_version, auth=auth) as adapter:
        assembler = BlockAssembler()
        options = GenerateOptions(
            provider=PROVIDER_ROUTE,
            model=DEPLOYMENT,
            messages=(create_user_message("Say OK and nothing else."),),
            max_tokens=2000,
        )
        for chunk in validate_stream(adapter.stream(options), strict=True):
            assembler.push(chunk)
    assert assembler.finish.kind == "stop"
    assert assembler.usage is not None
    assert assembler.usage.output_tokens
    assert "OK" in assembler.text.upper()
