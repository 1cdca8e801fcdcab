"""Tests of ``dsh_llm.aio``: signals, cancellation and leaving a stream early,
against the in-memory sources of ``tests/aio_sources.py``."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import gc
import logging
import threading
import time
import weakref
from collections.abc import Iterator

import pytest

from dsh_llm import AbortController
from dsh_llm import Finish
from dsh_llm import GenerateOptions
from dsh_llm import LlmError
from dsh_llm import StreamChunk
from dsh_llm import TextDelta
from dsh_llm.aio import AsyncChunkStream
from dsh_llm.aio import astream
from dsh_llm.aio import shutdown_shared_executor
from tests.aio_sources import OPTIONS
from tests.aio_sources import BlockingAdapter
from tests.aio_sources import EndlessAdapter
from tests.aio_sources import ScriptedAdapter
from tests.aio_sources import collect
from tests.aio_sources import text_stream

# Cancellation must end the stream far sooner than any timeout would (the
# stalled servers here never end by themselves). How fast it is (the 100 ms
# target) is measured by benchmarks/bench_cancel.py, not asserted here.
PROMPTLY = 2.0


@pytest.fixture(autouse=True, scope="module")
def _shared_executor_is_shut_down_after_the_module() -> Iterator[None]:
    yield
    shutdown_shared_executor()


# --- signals and early exits ----------------------------------------------------------


def test_source_receives_a_signal_derived_from_the_callers() -> None:
    controller = AbortController()
    adapter = ScriptedAdapter(text_stream(1))
    stream = astream(adapter, OPTIONS.evolve(signal=controller.signal))
    asyncio.run(collect(stream))
    (received,) = adapter.recorder.signals
    assert received is stream.signal
    assert received is not controller.signal
    assert not received.aborted
    controller.abort("stop")
    assert stream.signal.aborted
    assert stream.signal.reason == "stop"


def test_callers_abort_reaches_a_blocked_source() -> None:
    controller = AbortController()
    adapter = BlockingAdapter()

    async def main() -> None:
        stream = astream(adapter, OPTIONS.evolve(signal=controller.signal))
        async with contextlib.aclosing(stream):
            await anext(stream)
            asyncio.get_running_loop().call_later(0.02, controller.abort)
            await anext(stream)

    with pytest.raises(LlmError) as caught:
        asyncio.run(main())
    assert caught.value.code == "ABORTED"
    assert adapter.recorder.closed.is_set()


def test_cancelling_the_task_aborts_the_request_and_the_worker_finishes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    adapter = BlockingAdapter()
    cancelled_at = 0.0

    async def consume() -> None:
        async for _ in astream(adapter, OPTIONS):
            pass

    async def main() -> None:
        nonlocal cancelled_at
        task = asyncio.create_task(consume())
        await asyncio.to_thread(adapter.blocked.wait, 5.0)
        await asyncio.sleep(0.01)
        cancelled_at = time.perf_counter()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with caplog.at_level(logging.DEBUG):
        asyncio.run(main())
    assert adapter.aborted_at is not None
    assert adapter.aborted_at - cancelled_at < PROMPTLY
    assert adapter.recorder.closed.wait(1.0)
    assert adapter.recorder.closed_at is not None
    assert adapter.recorder.closed_at - cancelled_at < PROMPTLY
    assert set(adapter.recorder.threads) == {adapter.recorder.threads[0]}
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_break_and_aclose_close_the_generator_on_its_worker_before_returning() -> None:
    adapter = EndlessAdapter()

    async def main() -> None:
        stream = astream(adapter, OPTIONS, batch_size=8, queue_size=2)
        async with contextlib.aclosing(stream):
            async for chunk in stream:
                if isinstance(chunk, TextDelta):
                    break
        assert adapter.recorder.closed.is_set()
        assert stream.signal.aborted
        with pytest.raises(StopAsyncIteration):
            await anext(stream)
        await stream.aclose()

    asyncio.run(main())
    rec = adapter.recorder
    assert isinstance(rec.exit, GeneratorExit)
    assert set(rec.threads) == {rec.threads[0]}
    assert rec.threads[0] != threading.get_ident()


def test_aclose_of_a_blocked_source_aborts_it_promptly() -> None:
    adapter = BlockingAdapter()

    async def main() -> float:
        stream = astream(adapter, OPTIONS)
        await anext(stream)
        await asyncio.to_thread(adapter.blocked.wait, 5.0)
        started = time.perf_counter()
        await stream.aclose()
        assert adapter.recorder.closed.is_set()
        return started

    started = asyncio.run(main())
    assert adapter.aborted_at is not None
    assert adapter.aborted_at - started < PROMPTLY


def test_dropping_the_iterator_aborts_the_request_and_closes_the_generator() -> None:
    adapter = EndlessAdapter()
    refs: list[weakref.ref[AsyncChunkStream]] = []

    async def main() -> None:
        stream = astream(adapter, OPTIONS, batch_size=4, queue_size=1)
        refs.append(weakref.ref(stream))
        async for _ in stream:
            break
        del stream

    asyncio.run(main())
    gc.collect()
    assert refs[0]() is None
    assert adapter.recorder.closed.wait(1.0)
    assert isinstance(adapter.recorder.exit, GeneratorExit)
    assert set(adapter.recorder.threads) == {adapter.recorder.threads[0]}


def test_a_stream_left_referenced_after_its_loop_ends_stops_when_dropped() -> None:
    adapter = EndlessAdapter()
    streams: list[AsyncChunkStream] = []

    async def main() -> None:
        stream = astream(adapter, OPTIONS, batch_size=4, queue_size=1)
        streams.append(stream)
        await anext(stream)

    asyncio.run(main())
    time.sleep(0.02)
    assert not adapter.recorder.closed.is_set()
    produced = adapter.recorder.produced
    assert produced <= 2 * 4 + 1
    streams.clear()
    assert adapter.recorder.closed.wait(1.0)


def test_a_closed_loop_stops_a_worker_that_wants_to_wake_it() -> None:
    adapter = ScriptedAdapter(text_stream(3), delay=0.05)
    loop = asyncio.new_event_loop()
    stream = astream(adapter, OPTIONS)
    task = loop.create_task(collect(stream))
    # The consumer starts the worker and sleeps on its first chunk.
    loop.run_until_complete(asyncio.sleep(0.01))
    loop.close()
    assert adapter.recorder.closed.wait(1.0)
    assert stream.signal.aborted
    # The task can never run again; it is discarded on purpose.
    task._log_destroy_pending = False  # type: ignore[attr-defined]
    del task


def test_aclose_before_the_first_anext_never_calls_the_source() -> None:
    adapter = ScriptedAdapter(text_stream(1))

    async def main() -> None:
        stream = astream(adapter, OPTIONS)
        await stream.aclose()
        with pytest.raises(StopAsyncIteration):
            await anext(stream)

    asyncio.run(main())
    assert adapter.recorder.calls == 0


def test_a_stream_closed_while_waiting_for_a_thread_never_calls_the_source() -> None:
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    busy = BlockingAdapter()
    queued = ScriptedAdapter(text_stream(1))

    async def main() -> None:
        first = astream(busy, OPTIONS, executor=pool)
        await anext(first)
        second = astream(queued, OPTIONS, executor=pool)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(anext(second), 0.05)
        await second.aclose()
        await first.aclose()

    try:
        asyncio.run(main())
    finally:
        pool.shutdown(wait=True)
    assert queued.recorder.calls == 0


def test_aclose_raises_what_closing_the_generator_raised() -> None:
    failure = RuntimeError("cleanup failed")
    adapter = ScriptedAdapter(text_stream(50), on_close=failure)

    async def main() -> None:
        stream = astream(adapter, OPTIONS, batch_size=2, queue_size=1)
        await anext(stream)
        with pytest.raises(RuntimeError) as caught:
            await stream.aclose()
        assert caught.value is failure
        await stream.aclose()

    asyncio.run(main())


def test_a_cleanup_failure_of_a_dropped_stream_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    adapter = ScriptedAdapter(text_stream(50), on_close=RuntimeError("cleanup failed"))

    async def main() -> None:
        stream = astream(adapter, OPTIONS, batch_size=2, queue_size=1)
        await anext(stream)

    with caplog.at_level(logging.ERROR, logger="dsh_llm"):
        asyncio.run(main())
        gc.collect()
        assert adapter.recorder.closed.wait(1.0)
        deadline = time.monotonic() + 1.0
        while not caplog.records and time.monotonic() < deadline:
            time.sleep(0.01)
    (record,) = caplog.records
    assert "abandoned astream() source" in record.getMessage()
    assert record.exc_info is not None
    assert str(record.exc_info[1]) == "cleanup failed"


def test_a_source_still_running_after_its_finish_is_aborted_after_the_grace() -> None:
    # The finish is queued, so leaving does not abort at once (an adapter may be
    # reading the rest of its body); a source that goes on is aborted anyway.
    saw_abort: list[bool] = []

    class Lingering:
        def stream(self, options: GenerateOptions) -> Iterator[StreamChunk]:
            yield from text_stream(2)
            assert options.signal is not None
            saw_abort.append(options.signal.wait(10.0))

    async def main() -> None:
        stream = astream(Lingering(), OPTIONS)
        async for chunk in stream:
            if isinstance(chunk, Finish):
                break
        await stream.aclose()

    asyncio.run(main())
    assert saw_abort == [True]


def test_a_finished_request_left_by_a_cancelled_task_is_aborted_once_dropped() -> None:
    # Cancelled after its finish: the delayed abort is scheduled on a loop that
    # asyncio.run closes at once; dropping the iterator must still abort it.
    saw_abort: list[bool] = []
    left = threading.Event()

    class Lingering:
        def stream(self, options: GenerateOptions) -> Iterator[StreamChunk]:
            yield from text_stream(2)
            assert options.signal is not None
            saw_abort.append(options.signal.wait(10.0))
            left.set()

    streams: list[AsyncChunkStream] = []

    async def main() -> None:
        stream = astream(Lingering(), OPTIONS)
        streams.append(stream)
        finished = asyncio.Event()

        async def consume() -> None:
            async for chunk in stream:
                if isinstance(chunk, Finish):
                    finished.set()

        task = asyncio.create_task(consume())
        await finished.wait()
        await asyncio.sleep(0.01)  # the task now waits for more
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    asyncio.run(main())
    streams.clear()
    gc.collect()
    assert left.wait(PROMPTLY)
    assert saw_abort == [True]
