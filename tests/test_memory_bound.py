"""Memory over a long stream: peak traced memory stays within 2.5x the largest
open block's content plus a constant, whatever the number of deltas (issue 14).

Each stream is one block of a million one-character deltas, generated lazily
(the same payload or chunk object again and again, so the source itself holds
nothing per event), measured with ``tracemalloc`` over the whole stream: the
chat translator fed payloads directly (text, and a tool call's arguments over
a quarter of the deltas),
``validate_stream``, ``BlockAssembler`` (closed and never-closed blocks) and
``LlmRuntime.stream`` over an in-process adapter. The block-end a generated
source yields carries the whole text, built once at the end: that copy is part
of the peak, as it is in a real stream. Before ``dsh_llm.protocol.text_buffer``, a list
entry kept per fragment (a ``StringIO`` in the validator) made these peaks 3 to
17 times the content; ``LlmRuntime.stream`` already held nothing per event.
"""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any, Final

import pytest

from dsh_llm import BlockAssembler, LlmRuntime, validate_stream
from dsh_llm.adapter import LlmAdapter
from dsh_llm.adapters.chat.request import WireProfile
from dsh_llm.adapters.chat.translate import ChatCompletionsTranslator
from dsh_llm.protocol import (
    BlockEnd,
    BlockStart,
    Finish,
    FinishReason,
    GenerateOptions,
    LlmFailure,
    StreamChunk,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    UsageChunk,
    create_user_message,
)

DELTAS: Final = 1_000_000
"""One-character deltas in the block: its content is ``DELTAS`` bytes of text."""
CONSTANT: Final = 256 * 1024
"""The allowance that does not grow with the stream (buffers, small objects)."""


def _peak(run: Callable[[], object]) -> int:
    """The peak traced memory while ``run`` streams, in bytes.

    The cycle collector is off meanwhile: a stream must free what it is done
    with by reference counting alone (a cycle per event would show here), and
    collections over the test session's heap would only slow the run.
    """
    gc.collect()
    gc.disable()
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        gc.enable()


def _assert_bounded(peak: int, content: int = DELTAS) -> None:
    limit = 2.5 * content + CONSTANT
    assert peak <= limit, (
        f"peak {peak:,} bytes over a block of {content:,} chars: "
        f"{peak / content:.2f}x, above 2.5x plus {CONSTANT:,}"
    )


def _text_stream(count: int = DELTAS, *, closed: bool = True) -> Iterator[StreamChunk]:
    """One text block of ``count`` one-character deltas, then usage and finish
    (an error finish when ``closed`` is false, leaving the block open)."""
    yield BlockStart(index=0, block_type="text")
    delta = TextDelta(index=0, text="x")
    for _ in range(count):
        yield delta
    if not closed:
        failure = LlmFailure(message="cut", code="STREAM_CLOSED")
        yield Finish(reason=FinishReason.error(failure))
        return
    yield BlockEnd(index=0, block=TextBlock(text="x" * count))
    yield UsageChunk(usage=TokenUsage.unknown())
    yield Finish(reason=FinishReason.STOP)


def _translated(payload: dict[str, Any], count: int) -> Callable[[], object]:
    def run() -> object:
        translator = ChatCompletionsTranslator(WireProfile(provider="test"))
        feed = translator.feed_payload
        for _ in range(count):
            feed(payload)
        # The provider's own finish reason: without one the answer was cut short.
        feed({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        end = translator.done()
        block = next(chunk for chunk in end if isinstance(chunk, BlockEnd)).block
        return block

    return run


def test_translator_text_block() -> None:
    payload = {"choices": [{"index": 0, "delta": {"content": "x"}}]}
    _assert_bounded(_peak(_translated(payload, DELTAS)))


def test_translator_tool_call_arguments() -> None:
    # A quarter of the deltas: argument deltas cost more, and the overhead per
    # fragment this test catches shows as surely.
    count = DELTAS // 4
    call = {"index": 0, "id": "call_1", "function": {"name": "f", "arguments": "x"}}
    payload = {"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}

    def run() -> None:
        block = _translated(payload, count)()
        assert isinstance(block, ToolCallBlock)
        assert block.arguments == "x" * count

    _assert_bounded(_peak(run), count)


def test_validate_stream() -> None:
    def run() -> None:
        for _ in validate_stream(_text_stream()):
            pass

    _assert_bounded(_peak(run))


@pytest.mark.parametrize(
    ("closed", "count"),
    [(True, DELTAS), (False, DELTAS // 4)],
    ids=["closed", "never-closed"],
)
def test_block_assembler(closed: bool, count: int) -> None:
    # A block never closed is assembled from the deltas: the join is the
    # second copy.
    def run() -> None:
        assembler = BlockAssembler()
        for chunk in _text_stream(count, closed=closed):
            assembler.push(chunk)
        (block,) = assembler.blocks()
        assert isinstance(block, TextBlock)
        assert block.text == "x" * count

    _assert_bounded(_peak(run), count)


class _LongAnswer(LlmAdapter):
    """An in-process adapter streaming one long text block."""

    def stream(self, options: GenerateOptions) -> Iterator[StreamChunk]:
        yield from _text_stream()


def test_runtime_stream() -> None:
    runtime = LlmRuntime()
    runtime.register_adapter(["long"], _LongAnswer())
    options = GenerateOptions(
        provider="long", model="m", messages=(create_user_message("hi"),)
    )

    def run() -> None:
        count = sum(1 for _ in runtime.stream(options))
        assert count == DELTAS + 4

    _assert_bounded(_peak(run))
