"""Each hosted service for real: a short text answer through its profile.

One test per service, skipped unless the service's key variable is set
(``GROQ_API_KEY``, ``MISTRAL_API_KEY``... as ``docs/hosted-services.md`` lists
them), e.g.::

    GROQ_API_KEY=... pytest -m live tests/adapters/test_hosted_services_live.py

``DSH_LLM_LIVE_<SERVICE>_MODEL`` (``DSH_LLM_LIVE_GROQ_MODEL``) picks the model;
the default is the first of the service's catalog.
"""

from __future__ import annotations

import os

import pytest

from dsh_llm.adapters.chat.services import SERVICE_NAMES
from dsh_llm.adapters.chat.services import service
from dsh_llm.adapters.openai_compat import OpenAICompatAdapter
from dsh_llm.assembler import collect
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import create_user_message
from dsh_llm.validator import validate_stream

pytestmark = pytest.mark.live


@pytest.mark.parametrize("name", SERVICE_NAMES)
def test_live_text_answer_is_strict_and_counts_its_tokens(name):
    profile = service(name)
    if not os.environ.get(profile.api_key_env):
        pytest.skip(f"{profile.api_key_env} is not set")
    model = os.environ.get(f"DSH_LLM_LIVE_{name.upper()}_MODEL") or profile.models[0].id
    options = GenerateOptions(
        provider=name,
        model=model,
        messages=(create_user_message("Reply with the single word: pong"),),
        max_tokens=256,
    )
    with OpenAICompatAdapter.for_service(name, stream_idle_timeout_ms=120_000) as live:
        reply = collect(validate_stream(live.stream(options), strict=True))
    assert reply.text.strip()
    assert reply.usage is not None
    assert reply.usage.output_tokens
