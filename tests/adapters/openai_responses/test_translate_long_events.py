"""Long events (``SseEvent.raw``, from the family's decoder) translate exactly as
the same events decoded as text: a long string equal to a text the stream holds
is taken from it (the event's bytes then cleared), any other is decoded."""

from __future__ import annotations

import gc
import itertools
import json
import sys
import tracemalloc
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

import dsh_llm.adapters.openai_responses.translate as translate
from dsh_llm.adapters.openai_responses.family import FAMILY
from dsh_llm.adapters.openai_responses.translate import RAW_EVENT_BYTES
from dsh_llm.adapters.openai_responses.translate import ResponsesTranslator
from dsh_llm.errors import LlmError
from dsh_llm.protocol import BlockEnd
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol.text_buffer import TextBuffer
from dsh_llm.transport.sse import SseDecoder
from dsh_llm.transport.sse import SseEvent

# Spaces (where a long string is cut into windows), what JSON escapes, and
# characters of 2, 3 and 4 UTF-8 bytes (where text without spaces is cut);
# NUL too (no stand-in may be mistaken).
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


def _document_strings(value: Any) -> Iterator[tuple[str, bool]]:
    """The strings of ``value`` in the order ``json.dumps`` writes them, and
    whether each is a key."""
    if isinstance(value, str):
        yield value, False
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key, True
            yield from _document_strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _document_strings(item)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | _TEXT | st.just(""),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(_TEXT | st.just(""), inner, max_size=3)
    ),
    max_leaves=8,
)


@given(value=_JSON, ascii_only=st.booleans(), indent=st.sampled_from([None, 1]))
def test_strings_are_found_by_their_quotes(
    value: Any, ascii_only: bool, indent: int | None
) -> None:
    if not ascii_only:
        value = json.loads(json.dumps(value).replace("\\ud83d", "x"))
    raw = bytearray(
        json.dumps(value, ensure_ascii=ascii_only, indent=indent).encode(
            "utf-8", "surrogatepass"
        )
    )
    found = [
        (json.loads(raw[start:end].decode("utf-8", "surrogatepass")), key)
        for start, end, key in translate._strings(raw)
    ]
    assert found == list(_document_strings(value))


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


def _answer(text: str, final: str, deltas: int = 1) -> bytes:
    """A message streamed in ``deltas`` deltas, then two final texts."""
    where = {"item_id": "m", "output_index": 0, "content_index": 0}
    message = {"type": "message", "id": "m", "role": "assistant"}
    part = {"type": "output_text", "text": final}
    done = {**message, "status": "completed", "content": [part]}
    return b"".join(
        _named(name, payload, False)
        for name, payload in [
            ("response.output_item.added", {"output_index": 0, "item": message}),
            *(
                ("response.output_text.delta", {**where, "delta": piece})
                for piece in _split(text, deltas)
            ),
            ("response.content_part.done", {**where, "part": part}),
            ("response.output_item.done", {"output_index": 0, "item": done}),
        ]
    )


def _split(text: str, count: int) -> list[str]:
    size = -(-len(text) // count)
    return [text[at : at + size] for at in range(0, len(text), size)]


_LONG = "caf\u00e9 \U0001f680 " * 60_000
"""480,000 characters: its final texts are long events."""


def _final_texts(text: str, final: str) -> tuple[list[StreamChunk], float]:
    """The chunks of ``_answer(text, final)`` in 1,000 deltas through the
    family's decoder, and the peak memory its two final texts (long events)
    cost above decoding the streamed text once, in strings of ``text``."""
    string = sys.getsizeof(text)
    once = TextBuffer()
    for piece in _split(text, 1_000):
        once.append(piece)
    events = FAMILY.decoder("OpenAI").feed(_answer(text, final, 1_000))
    assert [event.raw is not None for event in events[-3:]] == [False, True, True]
    assert all(len(event.raw or b"") > RAW_EVENT_BYTES for event in events[-2:])
    translator = ResponsesTranslator()
    chunks = [chunk for event in events[:-2] for chunk in translator.feed(event)]
    gc.collect()
    tracemalloc.start()
    try:
        assert once.value() == text
        decoding = tracemalloc.get_traced_memory()[1]
        del once
        tracemalloc.reset_peak()
        start = tracemalloc.get_traced_memory()[0]
        chunks += [chunk for event in events[-2:] for chunk in translator.feed(event)]
        peak = tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()
    # The events' bytes were let go before any text was taken.
    assert [len(event.raw or b"") for event in events[-2:]] == [0, 0]
    return chunks, (peak - decoding) / string


@pytest.mark.parametrize(
    "text",
    [
        "caf\u00e9 \U0001f680 " * 60_000,
        "長い答え、é\U0001f680。" * 60_000,  # no space: cut before a character
    ],
)
def test_a_long_final_text_equal_to_the_deltas_is_their_string_not_a_copy(
    text: str,
) -> None:
    chunks, extra = _final_texts(text, text)
    assert [c.block for c in chunks if type(c) is BlockEnd] == [TextBlock(text=text)]
    # Taken from the deltas (the first while the block was open, the second
    # from the string its block-end carries): what decoding the streamed text
    # once costs, and little more. Decoded from the events, each would cost
    # its JSON string and the text beside it, 2x more at least.
    assert extra < 0.5, f"the final texts cost {extra:.2f}x the string more"


@pytest.mark.parametrize(
    "final",
    [_LONG + "more", "other " * 80_000],  # the rest is added; a contradiction
)
def test_a_long_final_text_that_differs_is_decoded_as_any_other(final: str) -> None:
    body = _answer(_LONG, final)
    expected = _outcome(iter(SseDecoder(terminal_data=None).feed(body)))
    assert _outcome(iter(FAMILY.decoder("OpenAI").feed(body))) == expected
