"""Tests for dsh_llm.trace.trace_stream."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest

from dsh_llm import (
    BlockEnd,
    BlockStart,
    ErrorCode,
    Finish,
    FinishReason,
    LlmError,
    StreamChunk,
    TextBlock,
    TextDelta,
    TokenUsage,
    UsageChunk,
    trace_stream,
)
from dsh_llm.serde import chunk_to_json

VALID: list[StreamChunk] = [
    BlockStart(index=0, block_type="text"),
    TextDelta(index=0, text="héllo"),
    BlockEnd(index=0, block=TextBlock(text="héllo")),
    UsageChunk(usage=TokenUsage(input_tokens=1, output_tokens=None)),
    Finish(reason=FinishReason.STOP),
]


def test_prints_each_chunk_numbered_from_one_then_the_summary():
    out = io.StringIO()
    passed = list(trace_stream("deepseek", VALID, out=out))
    assert passed == VALID
    expected = [f"[deepseek] #{n} {chunk_to_json(c)}" for n, c in enumerate(VALID, 1)]
    expected.append("[deepseek] total chunks 5, order check passed")
    assert out.getvalue().splitlines() == expected
    assert '"text":"héllo"' in out.getvalue()


def test_each_line_is_written_before_its_chunk_is_yielded():
    out = io.StringIO()
    stream = trace_stream("t", VALID, out=out)
    next(stream)
    assert out.getvalue() == f"[t] #1 {chunk_to_json(VALID[0])}\n"


def test_violation_is_raised_after_printing_the_offending_chunk_without_summary():
    out = io.StringIO()
    broken = [VALID[0], VALID[2], VALID[1]]  # delta after block-end
    with pytest.raises(LlmError) as caught:
        list(trace_stream("t", broken, out=out))
    assert caught.value.code == ErrorCode.INVARIANT
    assert caught.value.message.startswith("chunk #2 (block-end, index 0)")
    lines = out.getvalue().splitlines()
    assert lines[-1] == f"[t] #2 {chunk_to_json(VALID[2])}"
    assert "order check passed" not in out.getvalue()


def test_missing_finish_is_raised_after_every_chunk_was_printed():
    out = io.StringIO()
    with pytest.raises(LlmError, match="finish missing"):
        list(trace_stream("t", VALID[:-1], out=out))
    assert len(out.getvalue().splitlines()) == 4


def test_lenient_trace_accepts_what_strict_rejects():
    out = io.StringIO()
    no_usage = [*VALID[:3], VALID[4]]
    list(trace_stream("t", no_usage, out=out, strict=False))
    assert out.getvalue().endswith("[t] total chunks 4, order check passed (lenient)\n")
    with pytest.raises(LlmError, match="usage missing"):
        list(trace_stream("t", no_usage, out=io.StringIO()))


def test_writes_to_stderr_by_default(capsys):
    list(trace_stream("t", VALID))
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.endswith("[t] total chunks 5, order check passed\n")


def test_source_exception_propagates_without_summary():
    out = io.StringIO()
    failure = OSError("socket closed")

    def source() -> Iterator[StreamChunk]:
        yield VALID[0]
        raise failure

    with pytest.raises(OSError, match="socket closed") as caught:
        list(trace_stream("t", source(), out=out))
    assert caught.value is failure
    assert out.getvalue().splitlines() == [f"[t] #1 {chunk_to_json(VALID[0])}"]


def test_foreign_object_is_printed_then_rejected():
    out = io.StringIO()
    with pytest.raises(LlmError, match="not a stream chunk"):
        list(trace_stream("t", [{"type": "rogue"}], out=out))  # type: ignore[list-item]
    assert out.getvalue() == "[t] #1 {'type': 'rogue'}\n"
