"""Every family's request builder takes a conversation holding citations and
server tool blocks (issue 30): a family whose provider did not make them (the
blocks carry no ``data`` of its wire) leaves the server blocks out and sends
the text as it is, never failing on them."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from dsh_llm.adapters.anthropic.request import build_messages_request
from dsh_llm.adapters.bedrock.request import build_converse_request
from dsh_llm.adapters.chat.request import build_body
from dsh_llm.adapters.deepseek import PROFILE as DEEPSEEK
from dsh_llm.adapters.gemini.request import build_generate_request
from dsh_llm.adapters.ollama.request import build_chat_request
from dsh_llm.adapters.openai_responses.profiles import OPENAI
from dsh_llm.adapters.openai_responses.request import build_responses_request
from dsh_llm.protocol import CallId
from dsh_llm.protocol import Citation
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import ServerToolCallBlock
from dsh_llm.protocol import ServerToolResultBlock
from dsh_llm.protocol import Source
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import create_assistant_message
from dsh_llm.protocol import create_user_message

ANSWER = "It is sunny in Oslo."

# The blocks of a route whose wire none of the builders below replays.
CONVERSATION = (
    create_user_message("Weather in Oslo?"),
    create_assistant_message(
        (
            ServerToolCallBlock(
                id=CallId("srv_foreign_1"),
                name="google_search",
                input='{"queries":["weather Oslo"]}',
            ),
            ServerToolResultBlock(
                tool_call_id=CallId("srv_foreign_1"),
                name="google_search",
                sources=(Source(url="https://example.com/oslo", title="Oslo"),),
            ),
            TextBlock(
                text=ANSWER,
                citations=(
                    Citation(
                        kind="grounding",
                        url="https://example.com/oslo",
                        text_start=0,
                        text_end=20,
                    ),
                ),
            ),
        ),
        provider="elsewhere",
        model="m",
    ),
    create_user_message("And tomorrow?"),
)

BUILDERS: dict[str, tuple[str, Callable[[GenerateOptions], dict[str, Any]]]] = {
    "anthropic": (
        "claude-haiku-4-5",
        lambda options: build_messages_request(options, model_max_tokens=1024),
    ),
    "bedrock": (
        "anthropic.claude-haiku-4-5",
        lambda options: build_converse_request(options, max_tokens=1024, thinking=None),
    ),
    "chat": (
        "deepseek-chat",
        lambda options: build_body(options, profile=DEEPSEEK, max_tokens=None),
    ),
    "gemini": ("gemini-2.5-flash", build_generate_request),
    "ollama": ("llama3", build_chat_request),
    "responses": (
        "gpt-5.2",
        lambda options: build_responses_request(options, profile=OPENAI),
    ),
}


@pytest.mark.parametrize("family", sorted(BUILDERS))
def test_a_foreign_conversation_with_server_blocks_builds_without_them(
    family: str,
) -> None:
    model, build = BUILDERS[family]
    options = GenerateOptions(provider=family, model=model, messages=CONVERSATION)

    body = json.dumps(build(options))

    assert ANSWER in body
    assert "srv_foreign_1" not in body
    assert "example.com" not in body
