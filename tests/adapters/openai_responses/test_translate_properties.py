"""Property: whatever order a server interleaves its items' events in, with or
without their ``done`` events, the translator's exit is a strict stream that
keeps every fragment of every item, in order."""

from __future__ import annotations

import re
from typing import Any

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from dsh_llm.adapters.openai_responses.translate import ResponsesTranslator
from dsh_llm.protocol import BlockEnd
from dsh_llm.protocol import Finish
from dsh_llm.protocol import ReasoningBlock
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.validator import validate_stream

KINDS = ("message", "reasoning", "function_call")


def _events(position: int, kind: str, count: int, done: bool) -> list[dict[str, Any]]:
    iid = f"it{position}"
    pieces = [f"<{position}.{k}>" for k in range(count)]
    added: dict[str, Any] = {"id": iid, "type": kind}
    if kind == "function_call":
        added.update(call_id=f"call{position}", name="f", arguments="")
    out: list[dict[str, Any]] = [
        {"type": "response.output_item.added", "output_index": position, "item": added}
    ]
    if kind == "message":
        out.append(
            {
                "type": "response.content_part.added",
                "item_id": iid,
                "content_index": 0,
                "part": {"type": "output_text", "text": ""},
            }
        )
    delta_type = {
        "message": "response.output_text.delta",
        "reasoning": "response.reasoning_summary_text.delta",
        "function_call": "response.function_call_arguments.delta",
    }[kind]
    for piece in pieces:
        out.append(
            {
                "type": delta_type,
                "item_id": iid,
                "content_index": 0,
                "summary_index": 0,
                "delta": piece,
            }
        )
    if done:
        final = {**added, "status": "completed"}
        if kind == "function_call":
            final["arguments"] = "".join(pieces)
        out.append(
            {
                "type": "response.output_item.done",
                "output_index": position,
                "item": final,
            }
        )
    return out


@st.composite
def streams(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[tuple[str, int]]]:
    specs = draw(
        st.lists(
            st.tuples(st.sampled_from(KINDS), st.integers(0, 3), st.booleans()),
            min_size=1,
            max_size=4,
        )
    )
    queues = [
        _events(i, kind, count, done) for i, (kind, count, done) in enumerate(specs)
    ]
    merged: list[dict[str, Any]] = []
    while any(queues):
        live = [q for q in queues if q]
        merged.append(draw(st.sampled_from(live)).pop(0))
    merged.append(
        {"type": "response.completed", "response": {"output": [], "usage": None}}
    )
    return merged, [(kind, count) for kind, count, _ in specs]


@settings(max_examples=300, deadline=None)
@given(streams())
def test_any_interleaving_gives_a_strict_lossless_stream(drawn):
    events, specs = drawn
    translator = ResponsesTranslator()
    chunks = [chunk for event in events for chunk in translator.feed_payload(event)]
    assert list(validate_stream(chunks, strict=True)) == chunks
    assert isinstance(chunks[-1], Finish)
    ends = [c.block for c in chunks if isinstance(c, BlockEnd)]
    texts = "".join(b.text for b in ends if isinstance(b, TextBlock))
    thoughts = "".join(b.text for b in ends if isinstance(b, ReasoningBlock))
    calls = {str(b.id): b.arguments for b in ends if isinstance(b, ToolCallBlock)}
    for position, (kind, count) in enumerate(specs):
        pieces = [f"<{position}.{k}>" for k in range(count)]
        if kind == "function_call":
            assert calls[f"call{position}"] == ("".join(pieces) or "{}")
        else:
            seen = texts if kind == "message" else thoughts
            assert re.findall(rf"<{position}\.\d+>", seen) == pieces
    has_call = any(kind == "function_call" for kind, _ in specs)
    # Every item opens a block (a message once it has text, the others at
    # added): a stream of messages without text is the empty answer.
    has_block = any(kind != "message" or count for kind, count in specs)
    reason = chunks[-1].reason
    if has_block:
        assert reason.kind == ("tool-calls" if has_call else "stop")
    else:
        assert reason.failure is not None
        assert reason.failure.code == "EMPTY_RESPONSE"


def _final(position: int, kind: str, count: int) -> dict[str, Any]:
    text = "".join(f"<{position}.{k}>" for k in range(count))
    if kind == "message":
        return {"type": kind, "content": [{"type": "output_text", "text": text}]}
    if kind == "reasoning":
        summary = [{"type": "summary_text", "text": text}] if text else []
        return {"type": kind, "summary": summary}
    return {
        "type": kind,
        "call_id": f"call{position}",
        "name": "f",
        "arguments": text,
    }


@st.composite
def repeating_streams(
    draw: st.DrawFn,
) -> tuple[list[dict[str, Any]], list[tuple[str, int]]]:
    """Interleaved items whose ``done`` and terminal output repeat their whole
    text, every event naming its item by ``output_index`` and an ``item_id``
    that is either the item's own or new on every event (GitHub Copilot)."""
    specs = draw(
        st.lists(
            st.tuples(st.sampled_from(KINDS), st.integers(0, 3), st.booleans()),
            min_size=1,
            max_size=4,
        )
    )
    rotate = draw(st.booleans())
    serial = iter(range(10_000))

    def name(position: int) -> str:
        return f"it{position}.{next(serial)}" if rotate else f"it{position}"

    queues = []
    for position, (kind, count, done) in enumerate(specs):
        queue = []
        for event in _events(position, kind, count, done):
            event = {**event, "output_index": position}
            if "item_id" in event:
                event["item_id"] = name(position)
            else:
                item = {**event["item"], "id": name(position)}
                if event["type"] == "response.output_item.done":
                    item.update(_final(position, kind, count))
                event["item"] = item
            queue.append(event)
        queues.append(queue)
    merged: list[dict[str, Any]] = []
    while any(queues):
        live = [q for q in queues if q]
        merged.append(draw(st.sampled_from(live)).pop(0))
    output = [
        {**_final(position, kind, count), "id": name(position)}
        for position, (kind, count, _) in enumerate(specs)
    ]
    merged.append(
        {"type": "response.completed", "response": {"output": output, "usage": None}}
    )
    return merged, [(kind, count) for kind, count, _ in specs]


@settings(max_examples=300, deadline=None)
@given(repeating_streams())
def test_what_done_and_the_terminal_output_repeat_is_never_emitted_twice(drawn):
    events, specs = drawn
    translator = ResponsesTranslator()
    chunks = [chunk for event in events for chunk in translator.feed_payload(event)]
    assert list(validate_stream(chunks, strict=True)) == chunks
    assert isinstance(chunks[-1], Finish)
    ends = [c.block for c in chunks if isinstance(c, BlockEnd)]
    texts = "".join(b.text for b in ends if isinstance(b, TextBlock))
    thoughts = "".join(b.text for b in ends if isinstance(b, ReasoningBlock))
    calls = [b for b in ends if isinstance(b, ToolCallBlock)]
    # Each call once (blocks come in opening order, not output order).
    assert sorted(str(b.id) for b in calls) == [
        f"call{position}"
        for position, (kind, _) in enumerate(specs)
        if kind == "function_call"
    ]
    for position, (kind, count) in enumerate(specs):
        pieces = [f"<{position}.{k}>" for k in range(count)]
        if kind == "function_call":
            (call,) = [b for b in calls if str(b.id) == f"call{position}"]
            assert call.arguments == ("".join(pieces) or "{}")
        else:
            seen = texts if kind == "message" else thoughts
            assert re.findall(rf"<{position}\.\d+>", seen) == pieces
