"""A two-turn Gemini tool loop whose calls carry no id (LiteLLM's Gemini route,
Vertex AI): the ids a translator makes up never repeat one the conversation
already holds, through any adapter that speaks the Gemini wire."""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Iterator

from dsh_llm.assembler import collect
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import Message
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import create_tool_result_message
from dsh_llm.protocol import create_user_message
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply
from dsh_llm.testing import sse_event

_CALL_WITHOUT_ID = {
    "candidates": [
        {
            "content": {"parts": [{"functionCall": {"name": "f", "args": {}}}]},
            "finishReason": "STOP",
        }
    ]
}


def assert_made_ids_are_fresh_each_turn(
    server: LoopbackServer,
    stream: Callable[[GenerateOptions], Iterator[StreamChunk]],
    options: Callable[[tuple[Message, ...]], GenerateOptions],
) -> None:
    """Serve two turns that each call ``f`` without an id; the second turn's
    call must get a new id (``call_1``), not the first turn's again."""
    server.enqueue(Reply(body=(sse_event(_CALL_WITHOUT_ID),)))
    server.enqueue(Reply(body=(sse_event(_CALL_WITHOUT_ID),)))
    first = create_user_message("go")
    turn = collect(stream(options((first,))))
    result = create_tool_result_message(turn.tool_calls[0].id, "done")
    again = collect(stream(options((first, turn.message, result))))
    assert [c.id for c in turn.tool_calls] == ["call_0"]
    assert [c.id for c in again.tool_calls] == ["call_1"]
