"""Tests for dsh_llm.validator: strict rules (docs/protocol.md, rules 1 to 8),
lenient rules (the TypeScript invariant.ts), laziness, error propagation and
bounded memory."""

from __future__ import annotations

import gc
import sys
import tracemalloc
import weakref
from collections.abc import Iterator

import pytest
from hypothesis import given

from dsh_llm import BlockEnd
from dsh_llm import BlockStart
from dsh_llm import CallId
from dsh_llm import ErrorCode
from dsh_llm import Finish
from dsh_llm import FinishReason
from dsh_llm import LlmError
from dsh_llm import LlmFailure
from dsh_llm import ReasoningBlock
from dsh_llm import ReasoningDelta
from dsh_llm import StreamChunk
from dsh_llm import TextBlock
from dsh_llm import TextDelta
from dsh_llm import TokenUsage
from dsh_llm import ToolCallBlock
from dsh_llm import ToolCallDelta
from dsh_llm import UsageChunk
from dsh_llm import assert_chunk_sequence
from dsh_llm import validate_stream
from dsh_llm.protocol import ImageBlock
from dsh_llm.protocol import ImageRef
from tests.stream_plans import Mutation
from tests.stream_plans import StreamPlan
from tests.stream_plans import broken_streams
from tests.stream_plans import stream_plans

USAGE = UsageChunk(usage=TokenUsage(input_tokens=3, output_tokens=None))
STOP = Finish(reason=FinishReason.STOP)
TOOL_CALLS = Finish(reason=FinishReason.TOOL_CALLS)
MAX_TOKENS = Finish(reason=FinishReason.MAX_TOKENS)
ERROR = Finish(
    reason=FinishReason.error(LlmFailure(message="server broke", code="SERVER"))
)
ABORTED = Finish(
    reason=FinishReason.aborted(LlmFailure(message="caller left", code="ABORTED"))
)


def start(index: int, block_type: str = "text") -> BlockStart:
    return BlockStart(index=index, block_type=block_type)


def text(index: int, value: str) -> TextDelta:
    return TextDelta(index=index, text=value)


def reasoning(index: int, value: str) -> ReasoningDelta:
    return ReasoningDelta(index=index, text=value)


def call(
    index: int, arguments: str, *, id: str | None = "c1", name: str | None = "echo"
) -> ToolCallDelta:
    return ToolCallDelta(
        index=index,
        id=None if id is None else CallId(id),
        name=name,
        arguments_delta=arguments,
    )


def end_text(index: int, value: str) -> BlockEnd:
    return BlockEnd(index=index, block=TextBlock(text=value))


def end_reasoning(index: int, value: str) -> BlockEnd:
    return BlockEnd(index=index, block=ReasoningBlock(text=value))


def end_call(
    index: int, arguments: str, *, id: str = "c1", name: str = "echo"
) -> BlockEnd:
    return BlockEnd(
        index=index, block=ToolCallBlock(id=CallId(id), name=name, arguments=arguments)
    )


def text_block(index: int, value: str) -> list[StreamChunk]:
    return [start(index), text(index, value), end_text(index, value)]


def call_block(index: int, arguments: str = "{}") -> list[StreamChunk]:
    return [
        start(index, "tool-call"),
        call(index, arguments),
        end_call(index, arguments),
    ]


def violation(chunks: list[StreamChunk], *, strict: bool = True) -> str:
    with pytest.raises(LlmError) as caught:
        assert_chunk_sequence(chunks, strict=strict)
    assert caught.value.code == ErrorCode.INVARIANT
    return caught.value.message


# --- valid strict streams ----------------------------------------------------

VALID_STRICT: dict[str, list[StreamChunk]] = {
    "reasoning, text and a tool call": [
        start(0, "reasoning"),
        reasoning(0, "think"),
        reasoning(0, "ing"),
        end_reasoning(0, "thinking"),
        *text_block(1, "Hello"),
        start(2, "tool-call"),
        call(2, '{"a":', id=None, name=None),
        call(2, "1}"),
        end_call(2, '{"a":1}'),
        USAGE,
        TOOL_CALLS,
    ],
    "empty generation": [USAGE, STOP],
    "empty deltas and an empty text block": [
        start(0),
        text(0, ""),
        text(0, "x"),
        text(0, ""),
        end_text(0, "x"),
        start(1),
        text(1, ""),
        end_text(1, ""),
        USAGE,
        STOP,
    ],
    "tool call ids unknown as None or empty at first": [
        start(0, "tool-call"),
        call(0, "", id=None, name=None),
        call(0, "{", id="", name=""),
        call(0, "}"),
        end_call(0, "{}"),
        USAGE,
        TOOL_CALLS,
    ],
    "max-tokens after a tool call": [*call_block(0), USAGE, MAX_TOKENS],
    "max-tokens after a truncated empty tool call": [
        start(0, "tool-call"),
        end_call(0, ""),
        USAGE,
        MAX_TOKENS,
    ],
    "max-tokens without a tool call": [*text_block(0, "cut"), USAGE, MAX_TOKENS],
    "open finish kind without tool calls": [
        *text_block(0, "x"),
        USAGE,
        Finish(reason=FinishReason(kind="content-filter")),
    ],
    "error finish with a block left open and no usage": [
        *text_block(0, "a"),
        start(1),
        text(1, "half"),
        ERROR,
    ],
    "aborted finish with an open tool call": [
        start(0, "tool-call"),
        call(0, '{"pa'),
        ABORTED,
    ],
    "error finish after usage": [*text_block(0, "a"), USAGE, ERROR],
    "usage billed before a failure, with a block left open": [
        *text_block(0, "a"),
        start(1),
        text(1, "half"),
        USAGE,
        ERROR,
    ],
    "usage billed before an abort, with a tool call left open": [
        start(0, "tool-call"),
        call(0, '{"ci'),
        USAGE,
        ABORTED,
    ],
    "a call without argument deltas normalised to {}": [
        start(0, "tool-call"),
        end_call(0, "{}"),
        USAGE,
        TOOL_CALLS,
    ],
    "a call with empty argument deltas normalised to {}": [
        start(0, "tool-call"),
        call(0, ""),
        end_call(0, "{}"),
        USAGE,
        TOOL_CALLS,
    ],
    "error finish alone": [ERROR],
    "error finish after a tool call": [*call_block(0), ERROR],
    "image block without deltas": [
        start(0, "image"),
        BlockEnd(
            index=0,
            block=ImageBlock(
                attachment=ImageRef(
                    attachment_id="sha256:" + "a" * 64,
                    media_type="image/png",
                    bytes=10,
                    width=2,
                    height=3,
                )
            ),
        ),
        USAGE,
        STOP,
    ],
}


@pytest.mark.parametrize("chunks", VALID_STRICT.values(), ids=VALID_STRICT.keys())
def test_valid_stream_passes_strict_and_lenient_mode_unchanged(chunks):
    for strict in (True, False):
        passed = list(validate_stream(chunks, strict=strict))
        assert len(passed) == len(chunks)
        assert all(a is b for a, b in zip(passed, chunks, strict=True))
        assert_chunk_sequence(chunks, strict=strict)


# --- strict violations: one per rule -----------------------------------------

STRICT_VIOLATIONS: dict[str, tuple[list[StreamChunk], tuple[str, ...]]] = {
    "delta without block-start": (
        [text(0, "x"), USAGE, STOP],
        ("chunk #1 (text-delta, index 0): delta without block-start", "rule"),
    ),
    "delta for a later index without block-start": (
        [*text_block(0, "a"), reasoning(1, "x")],
        ("chunk #4 (reasoning-delta, index 1): delta without block-start",),
    ),
    "duplicate block-start of an open block": (
        [start(0), start(0)],
        ("chunk #2 (block-start, index 0): duplicate block-start", "already open"),
    ),
    "duplicate block-start reopening a closed block": (
        [*text_block(0, "a"), start(0)],
        ("chunk #4 (block-start, index 0): duplicate block-start", "never reopened"),
    ),
    "delta after block-end": (
        [*text_block(0, "a"), text(0, "b")],
        ("chunk #4 (text-delta, index 0): delta after block-end", "already closed"),
    ),
    "delta of another type": (
        [start(0, "reasoning"), text(0, "x")],
        (
            "chunk #2 (text-delta, index 0): delta type mismatch",
            "which is a reasoning block",
            "rule 4",
        ),
    ),
    "tool-call delta into a text block": (
        [start(0), call(0, "{}")],
        ("chunk #2 (tool-call-delta, index 0): delta type mismatch",),
    ),
    "block-end of another type": (
        [start(0), end_reasoning(0, "")],
        (
            "chunk #2 (block-end, index 0): block-end type mismatch",
            "is a text block but its block-end carries a reasoning block",
        ),
    ),
    "block-end without block-start": (
        [end_text(0, "")],
        ("chunk #1 (block-end, index 0): block-end without block-start",),
    ),
    "duplicate block-end": (
        [*text_block(0, "a"), end_text(0, "a")],
        ("chunk #4 (block-end, index 0): duplicate block-end",),
    ),
    "block left open at a stop finish": (
        [start(0), text(0, "a"), STOP],
        (
            "chunk #3 (finish): block left open",
            "a stop finish came while block 0 is open",
        ),
    ),
    "block left open at a max-tokens finish": (
        [start(0, "tool-call"), call(0, "{"), MAX_TOKENS],
        ("chunk #3 (finish): block left open",),
    ),
    "blocks interleaved": (
        [start(0), text(0, "a"), start(1, "reasoning")],
        (
            "chunk #3 (block-start, index 1): blocks interleaved",
            "block 1 starts while block 0 is still open",
            "rule 3",
        ),
    ),
    "first index not 0": (
        [start(1)],
        (
            "chunk #1 (block-start, index 1): index out of order",
            "expected block index 0, got 1",
            "rule 2",
        ),
    ),
    "index skipped": (
        [*text_block(0, "a"), start(2)],
        (
            "chunk #4 (block-start, index 2): index out of order",
            "expected block index 1",
        ),
    ),
    "block-end text differs": (
        [start(0), text(0, "ab"), end_text(0, "abc")],
        (
            "chunk #3 (block-end, index 0): block-end differs from deltas",
            "its text 'abc' (3 chars) is not the concatenated deltas 'ab' (2 chars)",
            "first difference at offset 2",
            "rule 5",
        ),
    ),
    "block-end of a long text differs": (
        [start(0), text(0, "x" * 50), end_text(0, "x" * 49 + "y")],
        (
            "block-end differs from deltas",
            "its text 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'... (50 chars)",
            "first difference at offset 49",
        ),
    ),
    "block-end reasoning differs": (
        [start(0, "reasoning"), reasoning(0, "x"), end_reasoning(0, "y")],
        ("block-end differs from deltas", "its text 'y'"),
    ),
    "block-end arguments differ": (
        [start(0, "tool-call"), call(0, '{"a":1}'), end_call(0, '{"a":2}')],
        (
            "chunk #3 (block-end, index 0): block-end differs from deltas",
            "its arguments '{\"a\":2}'",
        ),
    ),
    "block-end id differs": (
        [start(0, "tool-call"), call(0, "{}", id="c1"), end_call(0, "{}", id="c2")],
        ("block-end differs from deltas", "its id 'c2' is not the id 'c1'"),
    ),
    "block-end name differs": (
        [start(0, "tool-call"), call(0, "{}"), end_call(0, "{}", name="other")],
        ("block-end differs from deltas", "its name 'other' is not the name 'echo'"),
    ),
    "tool-call id changes between deltas": (
        [start(0, "tool-call"), call(0, "{", id="c1"), call(0, "}", id="c2")],
        ("chunk #3 (tool-call-delta, index 0): tool-call id changed",),
    ),
    "tool-call name changes between deltas": (
        [start(0, "tool-call"), call(0, "{"), call(0, "}", name="other")],
        ("chunk #3 (tool-call-delta, index 0): tool-call name changed",),
    ),
    "usage missing": (
        [*text_block(0, "a"), STOP],
        ("chunk #4 (finish): usage missing", "rule 7"),
    ),
    "usage missing on an empty generation": (
        [STOP],
        ("chunk #1 (finish): usage missing",),
    ),
    "usage repeated": (
        [USAGE, USAGE, STOP],
        ("chunk #2 (usage): usage repeated", "usage already came at chunk #1"),
    ),
    "usage after finish": (
        [STOP, USAGE],
        ("chunk #1 (finish): usage missing",),
    ),
    "usage after an error finish": (
        [ERROR, USAGE],
        (
            "chunk #2 (usage): usage after finish",
            "finish is not last: the finish at chunk #1",
        ),
    ),
    "usage while a block is open before a stop finish": (
        [start(0), USAGE, STOP],
        (
            "chunk #2 (usage): usage while a block is open",
            "before chunk #3 (finish)",
            "right before an error or aborted finish",
        ),
    ),
    "usage while a block is open before a delta": (
        [start(0), text(0, "a"), USAGE, text(0, "b"), ERROR],
        ("chunk #3 (usage): usage while a block is open", "before chunk #4"),
    ),
    "usage while a block is open before its block-end": (
        [start(0), text(0, "a"), USAGE, end_text(0, "a"), ERROR],
        ("chunk #3 (usage): usage while a block is open",),
    ),
    "usage while a block is open before another usage": (
        [start(0), USAGE, USAGE, ERROR],
        ("chunk #2 (usage): usage while a block is open",),
    ),
    "arguments other than {} after no argument deltas": (
        [start(0, "tool-call"), end_call(0, "[]"), USAGE, TOOL_CALLS],
        ("chunk #2 (block-end, index 0): block-end differs from deltas",),
    ),
    "tool call without a name": (
        [start(0, "tool-call"), call(0, "{}", name=None), end_call(0, "{}", name="")],
        (
            "chunk #3 (block-end, index 0): tool call without a name",
            "rule 5",
        ),
    ),
    "block after usage": (
        [USAGE, *text_block(0, "a"), STOP],
        (
            "chunk #2 (block-start, index 0): block after usage",
            "after the usage at chunk #1",
        ),
    ),
    "finish missing": (
        [*text_block(0, "a"), USAGE],
        ("end of stream after 4 chunks: finish missing", "rule 7"),
    ),
    "finish missing on an empty stream": (
        [],
        ("end of stream after 0 chunks: finish missing",),
    ),
    "finish missing after one chunk": (
        [USAGE],
        ("end of stream after 1 chunk: finish missing",),
    ),
    "finish missing with a block open": (
        [start(0), text(0, "a")],
        ("finish missing", "block 0 is still open"),
    ),
    "finish repeated": (
        [USAGE, STOP, STOP],
        ("chunk #3 (finish): finish repeated", "the finish at chunk #2"),
    ),
    "finish not last": (
        [USAGE, STOP, start(0)],
        ("chunk #3 (block-start, index 0): block-start after finish", "not last"),
    ),
    "tool-calls finish without a tool-call block": (
        [*text_block(0, "a"), USAGE, TOOL_CALLS],
        (
            "chunk #5 (finish): tool-calls finish without a tool-call block",
            "rule 8",
        ),
    ),
    "tool-call block with a stop finish": (
        [*call_block(0), USAGE, STOP],
        ("chunk #5 (finish): tool-call block with a stop finish", "rule 8"),
    ),
    "tool-call block with an open finish kind": (
        [*call_block(0), USAGE, Finish(reason=FinishReason(kind="content-filter"))],
        ("tool-call block with a content-filter finish",),
    ),
    "tool-result block in a stream": (
        [start(0, "tool-result")],
        (
            "chunk #1 (block-start, index 0): unknown block type",
            'block 0 has the type "tool-result"',
            "text, reasoning, tool-call, image, server-tool-call and "
            "server-tool-result blocks only",
        ),
    ),
    "block of an unknown type": (
        [*text_block(0, "a"), start(1, "video")],
        ("chunk #4 (block-start, index 1): unknown block type", '"video"'),
    ),
    "tool call without arguments": (
        [start(0, "tool-call"), call(0, ""), end_call(0, ""), USAGE, TOOL_CALLS],
        (
            "chunk #5 (finish): tool call without arguments",
            "tool-call block 0 ended at chunk #3 with empty arguments",
            'arguments == "{}"',
            "rule 6",
        ),
    ),
}


@pytest.mark.parametrize(
    ("chunks", "fragments"),
    STRICT_VIOLATIONS.values(),
    ids=STRICT_VIOLATIONS.keys(),
)
def test_strict_mode_names_each_violation(chunks, fragments):
    message = violation(chunks)
    for fragment in fragments:
        assert fragment in message


def test_not_a_chunk_is_a_violation_in_both_modes():
    for strict in (True, False):
        message = violation([{"type": "text-delta"}], strict=strict)  # type: ignore[list-item]
        assert message.startswith("chunk #1: not a stream chunk: dict")


def test_index_forced_outside_its_domain_is_a_violation_in_both_modes():
    # Only reachable by going around the value's validator.
    chunk = start(0)
    object.__setattr__(chunk, "index", -1)
    for strict in (True, False):
        message = violation([chunk], strict=strict)
        assert "invalid index" in message
        assert "non-negative safe integer, got -1" in message


def test_a_text_block_without_a_delta_fails_strict_and_passes_lenient():
    chunks: list[StreamChunk] = [*text_block(0, "a"), start(1), end_text(1, "")]
    chunks += [USAGE, STOP]
    message = violation(chunks)
    assert message.startswith(
        "chunk #5 (block-end, index 1): text block without a delta: text block 1 "
        "ends without a text-delta"
    )
    assert "(rule 1)" in message
    assert_chunk_sequence(chunks, strict=False)
    # A reasoning block may carry no text (a signed or redacted thought).
    assert_chunk_sequence(
        [start(0, "reasoning"), end_reasoning(0, ""), USAGE, STOP], strict=True
    )


def test_interleaved_typescript_stream_fails_strict_and_passes_lenient():
    chunks: list[StreamChunk] = [
        start(0),
        text(0, "a"),
        start(1, "reasoning"),
        reasoning(1, "b"),
        end_reasoning(1, "b"),
        end_text(0, "a"),
        *call_block(2),
        USAGE,
        STOP,
    ]
    assert "blocks interleaved" in violation(chunks)
    assert_chunk_sequence(chunks, strict=False)


# --- lenient mode (the TypeScript invariant.ts rules) -------------------------

LENIENT_VIOLATIONS: dict[str, tuple[list[StreamChunk], str]] = {
    "repeated block-start": (
        [start(0), start(0)],
        "chunk #2 (block-start, index 0): repeated block-start index 0",
    ),
    "delta without open block": (
        [text(0, "x")],
        "text delta at index 0 requires an open text block, got None",
    ),
    "delta of another type": (
        [start(0, "reasoning"), text(0, "x")],
        "requires an open text block, got reasoning",
    ),
    "block-end without open block": (
        [end_text(0, "")],
        "chunk #1 (block-end, index 0): block-end index 0 has no open block",
    ),
    "block-end of another type": (
        [start(0), end_reasoning(0, "")],
        "block-end index 0 closes reasoning, expected text",
    ),
    "usage twice": ([USAGE, USAGE], "chunk #2 (usage): emitted usage more than once"),
    "finish with an open block": (
        [start(0), STOP],
        "chunk #2 (finish): finished with 1 open block(s)",
    ),
    "usage after finish": (
        [STOP, USAGE],
        "chunk #2 (usage): emitted usage after terminal finish",
    ),
    "no finish": ([], "ended without a terminal finish chunk"),
    "no finish after one chunk": (
        [USAGE],
        "end of stream after 1 chunk: ended without a terminal finish chunk",
    ),
    "delta after block-end": (
        [*text_block(0, "a"), text(0, "b")],
        "requires an open text block, got None",
    ),
}


@pytest.mark.parametrize(
    ("chunks", "fragment"), LENIENT_VIOLATIONS.values(), ids=LENIENT_VIOLATIONS.keys()
)
def test_lenient_mode_reports_each_typescript_violation(chunks, fragment):
    assert fragment in violation(chunks, strict=False)


@pytest.mark.parametrize(
    "chunks",
    [
        [*text_block(0, "a"), STOP],  # usage missing
        [start(3), end_text(3, ""), USAGE, STOP],  # index order
        [start(0), text(0, "a"), end_text(0, "b"), USAGE, STOP],  # content
        [*call_block(0), USAGE, STOP],  # rule 8
        [*text_block(0, "a"), start(0), end_text(0, "b"), USAGE, STOP],  # index reuse
        [start(0), start(1), end_text(0, ""), end_text(1, ""), STOP],  # interleaving
        [start(0), start(1), ABORTED],  # open blocks at an abort
    ],
    ids=["usage", "order", "content", "rule-8", "reuse", "interleave", "abort"],
)
def test_lenient_mode_accepts_what_only_strict_mode_forbids(chunks):
    assert_chunk_sequence(chunks, strict=False)
    with pytest.raises(LlmError):
        assert_chunk_sequence(chunks)


# --- laziness and propagation ------------------------------------------------


class RecordingSource:
    """An iterator that counts how many chunks were taken from it."""

    def __init__(self, chunks: list[StreamChunk]) -> None:
        self.chunks = chunks
        self.taken = 0

    def __iter__(self) -> Iterator[StreamChunk]:
        for chunk in self.chunks:
            self.taken += 1
            yield chunk


@pytest.mark.parametrize("strict", [True, False])
def test_violation_is_raised_before_the_chunk_and_nothing_after_it_is_read(strict):
    source = RecordingSource([start(0), start(0), text(0, "never read"), STOP])
    stream = validate_stream(source, strict=strict)
    assert source.taken == 0  # lazy: nothing read before the first next()
    assert next(stream) == start(0)
    with pytest.raises(LlmError):
        next(stream)
    assert source.taken == 2


@pytest.mark.parametrize("strict", [True, False])
def test_source_exception_propagates_unchanged_without_a_missing_finish(strict):
    failure = RuntimeError("provider failed")

    def source() -> Iterator[StreamChunk]:
        yield start(0)
        raise failure

    with pytest.raises(RuntimeError) as caught:
        list(validate_stream(source(), strict=strict))
    assert caught.value is failure


def test_source_llm_error_keeps_its_code():
    def source() -> Iterator[StreamChunk]:
        yield from ()
        raise LlmError("timed out", ErrorCode.TIMEOUT)

    with pytest.raises(LlmError) as caught:
        list(validate_stream(source()))
    assert caught.value.code == ErrorCode.TIMEOUT


def test_closing_early_skips_the_end_check():
    stream = validate_stream([start(0), text(0, "a")])
    assert next(stream) == start(0)
    stream.close()  # no finish-missing violation


# --- closing the source ------------------------------------------------------


class ClosingSource:
    """A generator source whose ``finally`` records that it was closed (as an
    adapter's stream closes its HTTP response there)."""

    def __init__(self, chunks: list[StreamChunk], failure: Exception | None = None):
        self.chunks = chunks
        self.failure = failure
        self.closed = False
        self.stream = self.run()

    def run(self) -> Iterator[StreamChunk]:
        try:
            yield from self.chunks
            if self.failure is not None:
                raise self.failure
        finally:
            self.closed = True


@pytest.mark.parametrize("strict", [True, False])
def test_a_violation_closes_the_source_before_it_is_raised(strict):
    source = ClosingSource([start(0), start(0), text(0, "never read"), STOP])
    stream = validate_stream(source.stream, strict=strict)
    assert next(stream) == start(0)
    assert not source.closed
    with pytest.raises(LlmError) as caught:
        next(stream)
    # The traceback still references the validator's frame: the source must be
    # closed already, not when the exception is dropped.
    assert caught.value.code == ErrorCode.INVARIANT
    assert source.closed


@pytest.mark.parametrize("strict", [True, False])
def test_closing_the_validator_early_closes_the_source(strict):
    source = ClosingSource([start(0), text(0, "a"), text(0, "b")])
    stream = validate_stream(source.stream, strict=strict)
    assert next(stream) == start(0)
    stream.close()
    assert source.closed


@pytest.mark.parametrize("strict", [True, False])
def test_a_source_exception_leaves_the_source_closed(strict):
    failure = OSError("connection reset")
    source = ClosingSource([start(0)], failure)
    with pytest.raises(OSError, match="connection reset") as caught:
        list(validate_stream(source.stream, strict=strict))
    assert caught.value is failure
    assert source.closed


class IteratorWithClose:
    """A plain iterator (not a generator) with ``close()``, like a response."""

    def __init__(self, chunks: list[StreamChunk], failure: Exception | None = None):
        self.chunks = iter(chunks)
        self.failure = failure
        self.close_calls = 0

    def __iter__(self) -> IteratorWithClose:
        return self

    def __next__(self) -> StreamChunk:
        chunk = next(self.chunks, None)
        if chunk is not None:
            return chunk
        if self.failure is not None:
            raise self.failure
        raise StopIteration

    def close(self) -> None:
        self.close_calls += 1


def test_a_non_generator_source_is_closed_on_violation_and_on_its_own_error():
    violated = IteratorWithClose([text(0, "a")])
    with pytest.raises(LlmError):
        list(validate_stream(violated))
    assert violated.close_calls == 1
    failing = IteratorWithClose([start(0)], RuntimeError("boom"))
    with pytest.raises(RuntimeError, match="boom"):
        list(validate_stream(failing))
    assert failing.close_calls == 1


def test_an_exhausted_source_is_not_closed_even_when_the_finish_is_missing():
    complete = IteratorWithClose(
        [start(0), text(0, "a"), end_text(0, "a"), USAGE, STOP]
    )
    assert len(list(validate_stream(complete))) == 5
    truncated = IteratorWithClose([start(0)])
    with pytest.raises(LlmError, match="finish missing"):
        list(validate_stream(truncated))
    assert (complete.close_calls, truncated.close_calls) == (0, 0)


def test_assert_chunk_sequence_closes_the_source_at_a_violation():
    source = ClosingSource([start(0), start(1), STOP])
    with pytest.raises(LlmError, match="blocks interleaved"):
        assert_chunk_sequence(source.stream)
    assert source.closed


# --- misuse ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda chunks: validate_stream(chunks), "validate_stream"),
        (lambda chunks: validate_stream(chunks, strict=False), "validate_stream"),
        (assert_chunk_sequence, "assert_chunk_sequence"),
    ],
    ids=["validate", "validate-lenient", "assert"],
)
@pytest.mark.parametrize("value", [None, 5], ids=["none", "int"])
def test_a_non_iterable_is_a_type_error_naming_the_argument(call, name, value):
    with pytest.raises(TypeError) as caught:
        call(value)  # raised at the call, before any next()
    message = str(caught.value)
    assert message.startswith(f"{name}() expects chunks to be an iterable of stream")
    assert message.endswith(f"got {type(value).__name__}")
    assert caught.value.__cause__ is None


# --- memory ------------------------------------------------------------------


def many_blocks(count: int) -> Iterator[StreamChunk]:
    for index in range(count):
        yield start(index)
        yield text(index, "x")
        yield end_text(index, "x")
    yield USAGE
    yield STOP


@pytest.mark.parametrize("strict", [True, False])
def test_validator_keeps_no_chunk_alive(strict):
    alive: list[weakref.ref[StreamChunk]] = []

    def tracked() -> Iterator[StreamChunk]:
        for chunk in many_blocks(200):
            alive.append(weakref.ref(chunk))
            yield chunk

    stream = validate_stream(tracked(), strict=strict)
    for _ in stream:
        pass
    gc.collect()
    assert sum(ref() is not None for ref in alive) <= 2  # module constants


def test_memory_stays_bounded_over_a_long_stream():
    # 60,000 chunks; keeping them would take several megabytes.
    tracemalloc.start()
    try:
        for _ in validate_stream(many_blocks(20_000)):
            pass
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 256 * 1024


def test_a_million_chunk_stream_is_validated_without_keeping_its_chunks():
    # 1,000,001 chunks. The interpreter's count of allocated memory blocks is
    # sampled at chunk 100,000 and at the end: keeping the chunks would add
    # about a million blocks in between.
    samples: list[int] = []

    def sampled() -> Iterator[StreamChunk]:
        for position, chunk in enumerate(many_blocks(333_333), start=1):
            if position in (100_000, 999_999):
                samples.append(sys.getallocatedblocks())
            yield chunk

    count = 0
    for _ in validate_stream(sampled()):
        count += 1
    assert count == 1_000_001
    first, last = samples
    assert last - first < 10_000


def test_open_block_text_is_the_only_growing_state():
    size = 200_000

    def one_long_block() -> Iterator[StreamChunk]:
        yield start(0)
        piece = text(0, "y")
        for _ in range(size):
            yield piece
        yield end_text(0, "y" * size)
        yield USAGE
        yield STOP

    assert_chunk_sequence(one_long_block())


# --- properties --------------------------------------------------------------


@given(stream_plans())
def test_generated_streams_pass_strict_and_lenient_mode(plan: StreamPlan):
    chunks = plan.chunks()
    assert tuple(validate_stream(chunks)) == chunks
    assert tuple(validate_stream(chunks, strict=False)) == chunks


@given(broken_streams())
def test_any_single_mutation_of_a_valid_stream_fails_strict_mode(mutation: Mutation):
    with pytest.raises(LlmError) as caught:
        assert_chunk_sequence(mutation.chunks)
    assert caught.value.code == ErrorCode.INVARIANT


def test_a_type_error_from_the_sources_own_iter_is_not_reworded():
    class Broken:
        def __iter__(self) -> Iterator[StreamChunk]:
            raise TypeError("broken __iter__")

    with pytest.raises(TypeError, match=r"^broken __iter__$"):
        validate_stream(Broken())
