"""Conversation over a loopback server: the messages are kept across turns (the
system prompt and options too), the reply's reasoning goes back, and a failed
turn leaves the conversation as it was."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dsh_llm.adapters.openai_compat import OpenAICompatAdapter
from dsh_llm.conversation import Conversation
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import Finish
from dsh_llm.protocol import ModelSource
from dsh_llm.protocol import TextDelta
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply
from dsh_llm.testing import sse_body

from ..adapters.chat_chunks import finish
from ..adapters.chat_chunks import reasoning
from ..adapters.chat_chunks import text
from ..adapters.chat_chunks import tool


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as running:
        yield running


def _reply(*payloads: object) -> Reply:
    return Reply(body=sse_body([*payloads, finish("stop")]))


def test_turns_keep_the_messages_system_and_options(server):
    server.enqueue(_reply(reasoning("think"), text("Red.")), _reply(text("Blue.")))
    adapter = OpenAICompatAdapter(
        server.url, reasoning_passback_field="reasoning_content"
    )
    with adapter:
        chat = Conversation(adapter, "m", system="Be brief.", temperature=0)
        assert chat.send("A colour?").text == "Red."
        assert chat.send("Another?").text == "Blue."
    assert [m.role for m in chat.messages] == ["user", "assistant"] * 2
    source = chat.messages[1].source
    assert isinstance(source, ModelSource)
    assert (source.provider, source.model) == ("direct", "m")
    second = server.requests[1].json()
    assert second["temperature"] == 0
    assert second["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "A colour?"},
        {"role": "assistant", "content": "Red.", "reasoning_content": "think"},
        {"role": "user", "content": "Another?"},
    ]


def test_stream_yields_the_chunks_and_commits_at_the_end(server):
    server.enqueue(_reply(text("Hi"), text(" there")))
    with OpenAICompatAdapter(server.url) as adapter:
        chat = Conversation(adapter, "m")
        turn = chat.stream("hello")
        seen = [c.text for c in turn if isinstance(c, TextDelta)]
    assert seen == ["Hi", " there"]
    assert chat.messages[-1].text == "Hi there"
    assert chat.last is not None
    assert chat.last.text == "Hi there"


def test_a_turn_left_early_is_not_committed(server):
    server.enqueue(_reply(text("Hi")))
    with OpenAICompatAdapter(server.url) as adapter:
        chat = Conversation(adapter, "m")
        turn = chat.stream("hello")
        next(turn)
        turn.close()
    assert chat.messages == []


def test_a_failed_turn_raises_and_leaves_the_messages(server):
    server.enqueue(_reply(text("ok")), Reply(status=503, body=b"{}"))
    with OpenAICompatAdapter(server.url) as adapter:
        chat = Conversation(adapter, "m")
        chat.send("one")
        with pytest.raises(LlmError) as caught:
            chat.send("two")
    assert caught.value.code == ErrorCode.SERVER
    assert [m.text for m in chat.messages] == ["one", "ok"]


def test_tool_turns_are_kept(server):
    server.enqueue(
        Reply(
            body=sse_body(
                [
                    tool(0, id="c1", name="add", args='{"a": 1, "b": 2}'),
                    finish("tool_calls"),
                ]
            )
        ),
        _reply(text("3")),
    )

    def add(a: int, b: int) -> int:
        """Adds."""
        return a + b

    with OpenAICompatAdapter(server.url) as adapter:
        chat = Conversation(adapter, "m", tools=[add])
        chunks = list(chat.stream("1+2?"))
    assert sum(isinstance(c, Finish) for c in chunks) == 2
    assert [m.role for m in chat.messages] == ["user", "assistant", "user", "assistant"]
    assert chat.messages[2].content[0].content[0].text == "3"  # type: ignore[union-attr]
