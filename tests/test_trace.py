"""Tests for dsh_llm.trace.trace_stream."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest

from dsh_llm import BlockEnd
from dsh_llm import BlockStart
from dsh_llm import ErrorCode
from dsh_llm import Finish
from dsh_llm import FinishReason
from dsh_llm import LlmError
from dsh_llm import StreamChunk
from dsh_llm import TextBlock
from dsh_llm import TextDelta
from dsh_llm import TokenUsage
from dsh_llm import UsageChunk
from dsh_llm import trace_stream
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


class ClosingSource:
    """A generator source whose ``finally`` records that it was closed."""

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


def test_a_violation_closes_the_source_before_it_is_raised():
    source = ClosingSource([VALID[0], VALID[2], VALID[1], *VALID[3:]])
    stream = trace_stream("t", source.stream, out=io.StringIO())
    assert next(stream) == VALID[0]
    assert not source.closed
    with pytest.raises(LlmError) as caught:
        next(stream)
    assert caught.value.code == ErrorCode.INVARIANT
    assert source.closed


def test_closing_the_trace_early_closes_the_source():
    source = ClosingSource(VALID)
    out = io.StringIO()
    stream = trace_stream("t", source.stream, out=out)
    assert next(stream) == VALID[0]
    stream.close()
    assert source.closed
    assert len(out.getvalue().splitlines()) == 1  # no closing line


def test_a_source_exception_leaves_the_source_closed():
    failure = OSError("connection reset")
    source = ClosingSource(VALID[:2], failure)
    with pytest.raises(OSError, match="connection reset") as caught:
        list(trace_stream("t", source.stream, out=io.StringIO()))
    assert caught.value is failure
    assert source.closed


class IteratorWithClose:
    def __init__(self, chunks: list[StreamChunk]) -> None:
        self.chunks = iter(chunks)
        self.close_calls = 0

    def __iter__(self) -> IteratorWithClose:
        return self

    def __next__(self) -> StreamChunk:
        return next(self.chunks)

    def close(self) -> None:
        self.close_calls += 1


def test_a_non_generator_source_is_closed_at_a_violation_only():
    broken = IteratorWithClose([VALID[1]])
    with pytest.raises(LlmError, match="delta without block-start"):
        list(trace_stream("t", broken, out=io.StringIO()))
    complete = IteratorWithClose(VALID)
    assert list(trace_stream("t", complete, out=io.StringIO())) == VALID
    assert (broken.close_calls, complete.close_calls) == (1, 0)


@pytest.mark.parametrize("value", [None, 5], ids=["none", "int"])
def test_a_non_iterable_is_a_type_error_naming_the_argument(value):
    out = io.StringIO()
    with pytest.raises(TypeError) as caught:
        trace_stream("t", value, out=out)  # type: ignore[arg-type]
    assert str(caught.value) == (
        "trace_stream() expects stream to be an iterable of stream chunks (a list, "
        f"a generator, an adapter's stream), got {type(value).__name__}"
    )
    assert out.getvalue() == ""
