"""Long events (``SseEvent.raw``, from the family's decoder) translate exactly as
the same events decoded as text: a long string equal to a text the stream holds
is taken from it (the event's bytes then cleared), any other is decoded."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dsh_llm.adapters.openai_responses.translate as translate
from dsh_llm.adapters.openai_responses.family import FAMILY
from dsh_llm.adapters.openai_responses.translate import (
    RAW_EVENT_BYTES,
    ResponsesTranslator,
)
from dsh_llm.errors import LlmError
from dsh_llm.protocol import BlockEnd, StreamChunk, TextBlock
from dsh_llm.transport.sse import SseDecoder, SseEvent

# Spaces (where a long string is cut into windows), what JSON escapes, and
# characters of 2, 3 and 4 UTF-8 bytes; NUL too (no stand-in may be mistaken).
_CHARS = st.sampled_from(
    [
        " ",
        " ",
        "a",
        "b",
        '"',
        "\\",
        "\n",
        "\t",
        "/",
        "é",
        "\u2028",
        "\U0001f680",
        "\x00",
        "\ud83d",
    ]
)
_TEXT = st.text(alphabet=_CHARS, min_size=1, max_size=60)


def _named(name: str, payload: dict[str, Any], ascii_only: bool) -> bytes:
    data = json.dumps({"type": name, **payload}, ensure_ascii=ascii_only)
    return f"event: {name}\ndata: {data}\n\n".encode("utf-8", "surrogatepass")


def _finals(streamed: str, draw: st.DrawFn) -> str:
    """What a final text says: the deltas, more, less, or something else."""
    return draw(
        st.sampled_from(
            [streamed, streamed, streamed + "tail", streamed[: len(streamed) // 2]]
        )
        | _TEXT
    )


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    """A message and a call, each streamed in pieces, then every final text
    (from OpenAI each repeats the whole text), as UTF-8 or ASCII JSON."""
    ascii_only = draw(st.booleans())
    text = draw(_TEXT)
    arguments = draw(_TEXT)
    if not ascii_only:
        # A lone surrogate has no UTF-8: only ASCII JSON (an escape) holds it.
        text = text.replace("\ud83d", "x")
        arguments = arguments.replace("\ud83d", "x")
    cuts = draw(st.lists(st.integers(1, 59), max_size=4))

    def pieces(whole: str) -> list[str]:
        points = sorted({cut for cut in cuts if cut < len(whole)})
        return [whole[a:b] for a, b in itertools.pairwise([0, *points, len(whole)])]

    def final(streamed: str) -> str:
        chosen = _finals(streamed, draw)
        return chosen if ascii_only else chosen.replace("\ud83d", "x")

    where = {"item_id": "m", "output_index": 0, "content_index": 0}
    message = {"type": "message", "id": "m", "role": "assistant"}
    call = {"type": "function_call", "id": "f", "call_id": "c", "name": "get"}
    events: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"response": {"id": "r", "output": []}}),
        ("response.output_item.added", {"output_index": 0, "item": message}),
        ("response.content_part.added", {**where, "part": {"type": "output_text"}}),
    ]
    events += [
        ("response.output_text.delta", {**where, "delta": p}) for p in pieces(text)
    ]
    part = {"type": "output_text", "text": final(text)}
    done = {**message, "status": "completed", "content": [part]}
    events += [
        ("response.output_text.done", {**where, "text": final(text)}),
        ("response.content_part.done", {**where, "part": part}),
        ("response.output_item.done", {"output_index": 0, "item": done}),
        ("response.output_item.added", {"output_index": 1, "item": call}),
    ]
    events += [
        ("response.function_call_arguments.delta", {"item_id": "f", "delta": p})
        for p in pieces(arguments)
    ]
    called = {**call, "status": "completed", "arguments": final(arguments)}
    events += [
        (
            "response.function_call_arguments.done",
            {"item_id": "f", "output_index": 1, "arguments": final(arguments)},
        ),
        ("response.output_item.done", {"output_index": 1, "item": called}),
        (
            "response.completed",
            {"response": {"id": "r", "status": "completed", "output": [done, called]}},
        ),
    ]
    return b"".join(_named(name, payload, ascii_only) for name, payload in events)


def _outcome(events: Iterator[SseEvent]) -> tuple[list[StreamChunk], str | None]:
    translator = ResponsesTranslator()
    chunks: list[StreamChunk] = []
    try:
        for event in events:
            chunks.extend(translator.feed(event))
    except LlmError as exc:
        return chunks, f"{exc.code}: {exc.message}"
    return chunks, None


@settings(max_examples=500)
@given(body=bodies(), window=st.integers(4, 40), literal=st.integers(0, 30))
def test_long_events_translate_as_the_same_events_decoded_as_text(
    body: bytes, window: int, literal: int
) -> None:
    expected = _outcome(iter(SseDecoder(terminal_data=None).feed(body)))
    with pytest.MonkeyPatch.context() as patch:
        # Small enough that these short strings are long ones, cut in windows.
        patch.setattr(translate, "_WINDOW", window)
        patch.setattr(translate, "_LONG_LITERAL", literal)
        decoder = SseDecoder(terminal_data=None, raw_over=0)
        got = _outcome(iter(decoder.feed(body)))
    assert got == expected


def _answer(text: str, final: str) -> bytes:
    """A message streamed in one delta, then two final texts."""
    where = {"item_id": "m", "output_index": 0, "content_index": 0}
    message = {"type": "message", "id": "m", "role": "assistant"}
    part = {"type": "output_text", "text": final}
    done = {**message, "status": "completed", "content": [part]}
    return b"".join(
        _named(name, payload, False)
        for name, payload in [
            ("response.output_item.added", {"output_index": 0, "item": message}),
            ("response.output_text.delta", {**where, "delta": text}),
            ("response.content_part.done", {**where, "part": part}),
            ("response.output_item.done", {"output_index": 0, "item": done}),
        ]
    )


_LONG = "caf\u00e9 \U0001f680 " * 60_000
"""480,000 characters: its final texts are long events."""


def test_a_long_final_text_equal_to_the_deltas_is_their_string_not_a_copy() -> None:
    events = FAMILY.decoder("OpenAI").feed(_answer(_LONG, _LONG))
    # The delta is a long event too: no text equals it, so it is decoded.
    assert [event.raw is not None for event in events] == [False, True, True, True]
    sizes = [len(event.raw or b"") for event in events]
    assert min(sizes[2:]) > RAW_EVENT_BYTES
    translator = ResponsesTranslator()
    chunks = [chunk for event in events for chunk in translator.feed(event)]
    (ended,) = [c for c in chunks if type(c) is BlockEnd]
    assert ended.block == TextBlock(text=_LONG)
    # Both taken from the deltas (the first while its block was open, the
    # second from the string the block-end carries): no copy was decoded, and
    # each event's bytes were let go before the text was taken.
    assert [len(event.raw or b"") for event in events[2:]] == [0, 0]


@pytest.mark.parametrize(
    "final",
    [_LONG + "more", "other " * 80_000],  # the rest is added; a contradiction
)
def test_a_long_final_text_that_differs_is_decoded_as_any_other(final: str) -> None:
    body = _answer(_LONG, final)
    events = FAMILY.decoder("OpenAI").feed(body)
    expected = _outcome(iter(SseDecoder(terminal_data=None).feed(body)))
    assert _outcome(iter(events)) == expected
    # Decoded whole: nothing was cleared.
    assert all(len(event.raw) > RAW_EVENT_BYTES for event in events if event.raw)
