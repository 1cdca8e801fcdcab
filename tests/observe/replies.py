"""Scripted replies shared by the observability tests."""

from __future__ import annotations

from typing import Any

from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import create_user_message
from dsh_llm.testing import Cut
from dsh_llm.testing import Reply
from dsh_llm.testing import Stall
from dsh_llm.testing import sse_events

from ..adapters.chat_chunks import finish
from ..adapters.chat_chunks import reasoning
from ..adapters.chat_chunks import text
from ..adapters.chat_chunks import usage

SECRET_PROMPT = "my very private question"
SECRET_ANSWER = "a private answer"


def options(**fields: Any) -> GenerateOptions:
    fields.setdefault("messages", (create_user_message(SECRET_PROMPT),))
    return GenerateOptions(provider="local", model="model-a", **fields)


def answer(words: str = SECRET_ANSWER) -> Reply:
    """Reasoning, text, then a stop with usage (10 prompt tokens, 4 of them
    cached; 6 completion tokens, 2 of them reasoning)."""
    return Reply(
        body=sse_events(
            [
                reasoning("hmm"),
                text(words),
                finish(
                    "stop",
                    usage(
                        10,
                        6,
                        prompt_tokens_details={"cached_tokens": 4},
                        completion_tokens_details={"reasoning_tokens": 2},
                    ),
                ),
            ]
        )
    )


def slow_answer() -> Reply:
    """Text, then a stall until the client leaves (for early close and abort)."""
    return Reply(
        body=(
            *sse_events([text("first")], done=False),
            Stall(),
            *sse_events([finish("stop", usage(1, 1))]),
        )
    )


def cut_after_text() -> Reply:
    return Reply(body=(*sse_events([text("par")], done=False), Cut(reset=True)))


def status(code: int) -> Reply:
    return Reply(
        status=code,
        reason="Nope",
        headers={"content-type": "application/json"},
        body=b'{"error":{"message":"busy"}}',
        framing="length",
    )
