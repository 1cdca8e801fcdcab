"""``watch_stream`` reports each call exactly once, however its stream ends,
and closes its source when it stops before the source's end."""

from __future__ import annotations

import contextvars
from collections.abc import Iterator

import pytest

from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.observe.watch import CallRecord
from dsh_llm.observe.watch import watch_stream
from dsh_llm.protocol import BlockStart
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TextDelta

from .replies import options

CHUNKS: list[StreamChunk] = [
    BlockStart(index=0, block_type="text"),
    TextDelta(index=0, text="a"),
    Finish(reason=FinishReason.STOP),
]


class Source:
    """A generator-backed source that records whether it was closed."""

    def __init__(self, chunks: list[StreamChunk], error: Exception | None = None):
        self.closed = False
        self._chunks = chunks
        self._error = error

    def __iter__(self) -> Iterator[StreamChunk]:
        try:
            yield from self._chunks
            if self._error is not None:
                raise self._error
        finally:
            self.closed = True


def _ticks() -> Iterator[float]:
    yield from (float(n) for n in range(100))


def test_a_whole_stream_is_reported_once_at_its_finish() -> None:
    records: list[CallRecord] = []
    clock = _ticks()
    stream = watch_stream(
        options(), Source(CHUNKS), records.append, attempt=3, clock=lambda: next(clock)
    )

    seen = [next(stream), next(stream), next(stream)]
    assert len(records) == 1  # before the consumer asks past the finish
    assert list(stream) == []

    assert seen == CHUNKS
    (record,) = records
    assert record.ended == "finished"
    assert record.attempt == 3
    assert record.time_to_first_chunk_s == 1.0
    assert record.duration_s == 2.0  # clock: start 0, first chunk 1, finish 2
    assert record.finish == FinishReason.STOP
    assert record.error_code is None


def test_closing_early_closes_the_source_and_reports_closed() -> None:
    records: list[CallRecord] = []
    source = Source(CHUNKS)
    stream = watch_stream(options(), source, records.append)
    next(stream)
    stream.close()

    assert source.closed
    assert [r.ended for r in records] == ["closed"]
    assert records[0].finish is None


def test_a_raising_source_is_reported_with_its_code() -> None:
    records: list[CallRecord] = []
    error = LlmError("broken", ErrorCode.INVARIANT)
    stream = watch_stream(options(), Source(CHUNKS[:2], error), records.append)

    with pytest.raises(LlmError):
        list(stream)

    (record,) = records
    assert record.ended == "raised"
    assert record.error is error
    assert record.error_code == ErrorCode.INVARIANT.value


def test_an_observer_that_raises_closes_the_source() -> None:
    records: list[CallRecord] = []
    source = Source(CHUNKS)

    def refuse(chunk: StreamChunk) -> None:
        raise RuntimeError("observer failed")

    stream = watch_stream(options(), source, records.append, on_chunk=refuse)
    with pytest.raises(RuntimeError):
        next(stream)

    assert source.closed
    assert [r.ended for r in records] == ["raised"]
    assert records[0].error_code == ErrorCode.UNKNOWN.value


def test_a_stream_never_pulled_reports_nothing() -> None:
    records: list[CallRecord] = []
    watch_stream(options(), Source(CHUNKS), records.append).close()
    assert records == []


_WHERE: contextvars.ContextVar[str] = contextvars.ContextVar("where", default="out")


def test_the_source_runs_in_the_context_enter_gives_and_the_consumer_never_does() -> (
    None
):
    seen: list[str] = []

    def source() -> Iterator[StreamChunk]:
        try:
            for chunk in CHUNKS:
                seen.append(_WHERE.get())
                yield chunk
        finally:
            seen.append(f"closed {_WHERE.get()}")

    def enter() -> contextvars.Context:
        context = contextvars.copy_context()
        context.run(_WHERE.set, "in")
        return context

    records: list[CallRecord] = []
    stream = watch_stream(options(), source(), records.append, enter=enter)
    consumer = []
    for _ in range(2):
        next(stream)
        consumer.append(_WHERE.get())
    stream.close()
    assert seen == ["in", "in", "closed in"]
    assert consumer == ["out", "out"]
    assert [r.ended for r in records] == ["closed"]


def test_an_enter_that_raises_closes_the_source_and_reports_nothing() -> None:
    source = Source(CHUNKS)
    iterator = iter(source)
    next(iterator)  # started, so closing it runs its finally

    def enter() -> contextvars.Context:
        raise RuntimeError("no tracer")

    records: list[CallRecord] = []
    with pytest.raises(RuntimeError, match="no tracer"):
        list(watch_stream(options(), iterator, records.append, enter=enter))
    assert source.closed
    assert records == []
