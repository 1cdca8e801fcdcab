"""Tests of ``dsh_llm.aio``: the async bridge, against in-memory sources.

Every test drives its own event loop with plain ``asyncio.run``. The sources are
real ``LlmAdapter`` subclasses whose generators record which thread ran them and
when they were closed, so the bridge is exercised as a black box. Loopback HTTP
cancellation is covered in ``tests/test_concurrency.py``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import gc
import logging
import subprocess
import sys
import textwrap
import threading
import time
import weakref
from collections.abc import Callable, Iterator

import pytest

from dsh_llm import (
    AbortController,
    AbortSignal,
    BlockEnd,
    BlockStart,
    ErrorCode,
    Finish,
    FinishReason,
    GenerateOptions,
    LlmAdapter,
    LlmError,
    LlmRuntime,
    StreamChunk,
    TextBlock,
    TextDelta,
    TokenUsage,
    UsageChunk,
    create_user_message,
    validate_stream,
)
from dsh_llm.aio import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_QUEUE_SIZE,
    SHARED_EXECUTOR_THREAD_PREFIX,
    AsyncChunkStream,
    astream,
    shutdown_shared_executor,
)

OPTIONS = GenerateOptions(
    provider="mem", model="m", messages=[create_user_message("hi")]
)


def text_stream(deltas: int) -> list[StreamChunk]:
    """A strict-valid stream: one text block of ``deltas`` deltas, usage, finish."""
    pieces = [f"t{i} " for i in range(deltas)]
    return [
        BlockStart(index=0, block_type="text"),
        *(TextDelta(index=0, text=piece) for piece in pieces),
        BlockEnd(index=0, block=TextBlock(text="".join(pieces))),
        UsageChunk(usage=TokenUsage(input_tokens=1, output_tokens=deltas)),
        Finish(reason=FinishReason(kind="stop")),
    ]


class Recorder:
    """What a source's generator saw: threads, chunks produced, how it ended."""

    def __init__(self) -> None:
        self.threads: list[int] = []
        self.thread_names: list[str] = []
        self.produced = 0
        self.calls = 0
        self.signals: list[AbortSignal | None] = []
        self.closed = threading.Event()
        self.closed_at: float | None = None
        self.exit: BaseException | None = None

    def step(self) -> None:
        self.threads.append(threading.get_ident())
        self.thread_names.append(threading.current_thread().name)

    def close(self, exit_exc: BaseException | None = None) -> None:
        self.step()
        self.exit = exit_exc
        self.closed_at = time.perf_counter()
        self.closed.set()


class ScriptedAdapter(LlmAdapter):
    """Yields a script of chunks; optional delay per chunk; optional final error."""

    def __init__(
        self,
        chunks: list[StreamChunk],
        *,
        delay: float = 0.0,
        error: BaseException | None = None,
        on_close: BaseException | None = None,
    ) -> None:
        self.chunks = chunks
        self.delay = delay
        self.error = error
        self.on_close = on_close
        self.recorder = Recorder()

    def stream(self, options: GenerateOptions) -> Iterator[StreamChunk]:
        rec = self.recorder
        rec.calls += 1
        rec.signals.append(options.signal)
        exit_exc: BaseException | None = None
        try:
            rec.step()
            for chunk in self.chunks:
                if self.delay:
                    time.sleep(self.delay)
                rec.produced += 1
                yield chunk
                rec.step()
            if self.error is not None:
                raise self.error
        except GeneratorExit as exc:
            exit_exc = exc
            raise
        finally:
            rec.close(exit_exc)
            if self.on_close is not None and exit_exc is not None:
                raise self.on_close


class EndlessAdapter(LlmAdapter):
    """Yields text deltas forever (only a consumer leaving ends it)."""

    def __init__(self) -> None:
        self.recorder = Recorder()

    def stream(self, options: GenerateOptions) -> Iterator[StreamChunk]:
        rec = self.recorder
        rec.calls += 1
        exit_exc: BaseException | None = None
        try:
            rec.step()
            yield BlockStart(index=0, block_type="text")
            while True:
                rec.produced += 1
                yield TextDelta(index=0, text="x")
                rec.step()
        except GeneratorExit as exc:
            exit_exc = exc
            raise
        finally:
            rec.close(exit_exc)


class BlockingAdapter(LlmAdapter):
    """Yields one chunk, then blocks like a stalled HTTP read until its signal
    aborts, then raises ``ABORTED`` as a network adapter does."""

    def __init__(self) -> None:
        self.recorder = Recorder()
        self.aborted_at: float | None = None
        self.blocked = threading.Event()

    def stream(self, options: GenerateOptions) -> Iterator[StreamChunk]:
        rec = self.recorder
        rec.calls += 1
        signal = options.signal
        assert signal is not None

        def on_abort() -> None:
            self.aborted_at = time.perf_counter()

        signal.add_listener(on_abort)
        try:
            rec.step()
            yield BlockStart(index=0, block_type="text")
            self.blocked.set()
            if not signal.wait(10.0):
                raise AssertionError("the signal never aborted")
            raise LlmError("mem request aborted by caller", ErrorCode.ABORTED)
        finally:
            rec.close()


@pytest.fixture(autouse=True, scope="module")
def _shared_executor_is_shut_down_after_the_module() -> Iterator[None]:
    yield
    shutdown_shared_executor()


async def collect(stream: AsyncChunkStream) -> list[StreamChunk]:
    return [chunk async for chunk in stream]


def worker_threads() -> list[threading.Thread]:
    return [
        t
        for t in threading.enumerate()
        if t.name.startswith(SHARED_EXECUTOR_THREAD_PREFIX)
    ]


# --- chunks ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("batch_size", "queue_size"),
    [(1, 1), (3, 2), (DEFAULT_BATCH_SIZE, DEFAULT_QUEUE_SIZE)],
)
def test_yields_every_chunk_of_an_adapter_in_order(
    batch_size: int, queue_size: int
) -> None:
    expected = text_stream(2000)
    adapter = ScriptedAdapter(expected)
    got = asyncio.run(
        collect(astream(adapter, OPTIONS, batch_size=batch_size, queue_size=queue_size))
    )
    assert got == expected
    assert list(validate_stream(got)) == got


def test_yields_every_chunk_when_the_producer_is_slower_than_the_consumer() -> None:
    expected = text_stream(30)
    adapter = ScriptedAdapter(expected, delay=0.002)
    got = asyncio.run(collect(astream(adapter, OPTIONS, batch_size=4, queue_size=2)))
    assert got == expected


def test_yields_a_runtime_stream_with_its_failure_finish() -> None:
    runtime = LlmRuntime()
    failure = LlmError("mem is down", ErrorCode.SERVER, status=503)
    adapter = ScriptedAdapter(text_stream(3)[:2], error=failure)
    runtime.register_adapter(["mem"], adapter)
    got = asyncio.run(collect(astream(runtime, OPTIONS)))
    assert got[:2] == text_stream(3)[:2]
    last = got[-1]
    assert isinstance(last, Finish)
    assert last.reason.kind == "error"
    assert last.reason.failure == failure.failure
    assert list(validate_stream(got)) == got


def test_nothing_runs_before_the_first_anext() -> None:
    adapter = ScriptedAdapter(text_stream(1))
    stream = astream(adapter, OPTIONS)
    time.sleep(0.05)
    assert adapter.recorder.calls == 0
    assert "not started" in repr(stream)

    async def first() -> StreamChunk:
        async with contextlib.aclosing(stream):
            return await anext(stream)

    assert asyncio.run(first()) == text_stream(1)[0]
    assert adapter.recorder.calls == 1


def test_repr_tells_the_state() -> None:
    adapter = ScriptedAdapter(text_stream(1))
    stream = astream(adapter, OPTIONS)

    async def main() -> None:
        await anext(stream)
        assert "running" in repr(stream) or "finished" in repr(stream)
        await collect(stream)
        assert "finished" in repr(stream)

    asyncio.run(main())
    assert "ScriptedAdapter" in repr(stream)


# --- threads and executors -----------------------------------------------------------


def test_one_worker_thread_runs_and_closes_the_whole_generator() -> None:
    adapter = EndlessAdapter()
    pool = concurrent.futures.ThreadPoolExecutor(
        max_workers=4, thread_name_prefix="own"
    )

    async def main() -> None:
        stream = astream(adapter, OPTIONS, executor=pool, batch_size=2, queue_size=1)
        async with contextlib.aclosing(stream):
            count = 0
            async for _ in stream:
                count += 1
                # Let the worker fill the queue and wait, again and again.
                await asyncio.sleep(0)
                if count == 200:
                    break

    try:
        asyncio.run(main())
    finally:
        pool.shutdown(wait=True)
    rec = adapter.recorder
    assert rec.closed.is_set()
    assert isinstance(rec.exit, GeneratorExit)
    assert len(rec.threads) > 200
    assert set(rec.threads) == {rec.threads[0]}
    assert rec.threads[0] != threading.get_ident()
    assert rec.thread_names[0].startswith("own")


def test_shared_executor_threads_are_named_reused_and_shut_down() -> None:
    shutdown_shared_executor()
    assert worker_threads() == []
    names: set[str] = set()

    async def main() -> None:
        for _ in range(30):
            adapter = ScriptedAdapter(text_stream(2))
            await collect(astream(adapter, OPTIONS))
            names.update(adapter.recorder.thread_names)

    asyncio.run(main())
    assert all(name.startswith("dsh-llm-aio-") for name in names)
    # Sequential streams reuse an idle thread instead of starting one each (a
    # new one only when the next stream starts before the last worker is idle).
    assert 1 <= len(names) <= 10
    assert 1 <= len(worker_threads()) <= 10
    shutdown_shared_executor()
    assert worker_threads() == []
    shutdown_shared_executor()


def test_a_new_shared_executor_is_created_after_shutdown() -> None:
    shutdown_shared_executor()
    adapter = ScriptedAdapter(text_stream(1))
    assert asyncio.run(collect(astream(adapter, OPTIONS))) == text_stream(1)
    assert len(worker_threads()) == 1


def test_hands_over_batches_not_one_loop_hop_per_chunk() -> None:
    chunks = text_stream(20_000)
    hops = 0

    async def main() -> list[StreamChunk]:
        nonlocal hops
        loop = asyncio.get_running_loop()
        original = loop.call_soon_threadsafe

        def counting(*args: object, **kwargs: object) -> object:
            nonlocal hops
            hops += 1
            return original(*args, **kwargs)  # type: ignore[arg-type]

        loop.call_soon_threadsafe = counting  # type: ignore[method-assign,assignment]
        try:
            return await collect(astream(ScriptedAdapter(chunks), OPTIONS))
        finally:
            del loop.call_soon_threadsafe

    assert asyncio.run(main()) == chunks
    assert 1 <= hops <= len(chunks) // 20


class PacedAdapter(LlmAdapter):
    """Yields bursts of chunks separated by pauses, noting when each was made."""

    def __init__(self, bursts: int, burst: int, pause: float) -> None:
        self.bursts = bursts
        self.burst = burst
        self.pause = pause
        self.made: list[float] = []

    def stream(self, options: GenerateOptions) -> Iterator[StreamChunk]:
        for _ in range(self.bursts):
            for _ in range(self.burst):
                self.made.append(time.perf_counter())
                yield TextDelta(index=0, text="x")
            time.sleep(self.pause)


@pytest.mark.parametrize("burst", [1, 3])
def test_a_chunk_before_a_pause_is_handed_over_without_waiting_for_the_next(
    burst: int,
) -> None:
    adapter = PacedAdapter(bursts=6, burst=burst, pause=0.1)
    received: list[float] = []

    async def main() -> None:
        async for _ in astream(adapter, OPTIONS):
            received.append(time.perf_counter())

    asyncio.run(main())
    assert len(received) == len(adapter.made) == 6 * burst
    delays = [got - made for got, made in zip(received, adapter.made, strict=True)]
    # Well under the 100 ms pause: no chunk waited for the next burst.
    assert max(delays) < 0.05


def test_slow_consumer_back_pressures_the_worker() -> None:
    batch_size, queue_size = 4, 2
    adapter = ScriptedAdapter(text_stream(400))
    most_ahead = 0

    async def main() -> int:
        nonlocal most_ahead
        consumed = 0
        stream = astream(adapter, OPTIONS, batch_size=batch_size, queue_size=queue_size)
        async for _ in stream:
            consumed += 1
            await asyncio.sleep(0.0005)
            most_ahead = max(most_ahead, adapter.recorder.produced - consumed)
        return consumed

    assert asyncio.run(main()) == len(text_stream(400))
    # Queued batches, the batch being read and the chunk the worker holds while
    # it waits for room; without back-pressure it would run ~400 ahead.
    bound = (queue_size + 1) * batch_size + 1
    assert 0 < most_ahead <= bound


# --- errors ----------------------------------------------------------------------


def test_llm_error_crosses_the_bridge_unchanged_after_the_chunks_before_it() -> None:
    error = LlmError(
        "mem rate limited",
        ErrorCode.RATE_LIMIT,
        status=429,
        provider_retry_after_ms=1500.0,
        request_id="req-1",
    )
    head = text_stream(5)[:4]
    adapter = ScriptedAdapter(head, error=error)
    got: list[StreamChunk] = []

    async def main() -> None:
        async for chunk in astream(adapter, OPTIONS, batch_size=2):
            got.append(chunk)

    with pytest.raises(LlmError) as caught:
        asyncio.run(main())
    assert caught.value is error
    assert caught.value.code == "RATE_LIMIT"
    assert caught.value.failure == error.failure
    assert caught.value.status == 429
    assert caught.value.provider_retry_after_ms == 1500.0
    assert caught.value.request_id == "req-1"
    assert got == head


@pytest.mark.parametrize("error", [ValueError("bad"), KeyError("k"), SystemExit(3)])
def test_any_exception_crosses_the_bridge_unchanged(error: BaseException) -> None:
    adapter = ScriptedAdapter([], error=error)

    async def main() -> None:
        await collect(astream(adapter, OPTIONS))

    with pytest.raises(type(error)) as caught:
        asyncio.run(main())
    assert caught.value is error


def test_an_exception_from_calling_stream_crosses_the_bridge() -> None:
    error = TypeError("options rejected")

    class Eager:
        def stream(self, options: GenerateOptions) -> Iterator[StreamChunk]:
            raise error

    async def main() -> None:
        await collect(astream(Eager(), OPTIONS))

    with pytest.raises(TypeError) as caught:
        asyncio.run(main())
    assert caught.value is error


def test_the_stream_is_exhausted_after_its_error() -> None:
    adapter = ScriptedAdapter([], error=ValueError("once"))

    async def main() -> None:
        stream = astream(adapter, OPTIONS)
        with pytest.raises(ValueError, match="once"):
            await anext(stream)
        with pytest.raises(StopAsyncIteration):
            await anext(stream)

    asyncio.run(main())


def test_stop_async_iteration_from_the_source_becomes_runtime_error() -> None:
    adapter = ScriptedAdapter(text_stream(1)[:1], error=StopAsyncIteration())

    async def main() -> list[StreamChunk]:
        return await collect(astream(adapter, OPTIONS))

    with pytest.raises(RuntimeError, match="StopAsyncIteration"):
        asyncio.run(main())


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
    assert adapter.aborted_at - cancelled_at < 0.1
    assert adapter.recorder.closed.wait(1.0)
    assert adapter.recorder.closed_at is not None
    assert adapter.recorder.closed_at - cancelled_at < 0.1
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


def test_aclose_of_a_blocked_source_aborts_it_within_100_ms() -> None:
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
    assert adapter.aborted_at - started < 0.1


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


# --- misuse ----------------------------------------------------------------------


def test_iterating_from_another_event_loop_raises() -> None:
    adapter = EndlessAdapter()
    stream = astream(adapter, OPTIONS, batch_size=1, queue_size=1)

    async def first() -> None:
        await anext(stream)
        await anext(stream)

    async def elsewhere() -> None:
        # One-chunk batches: the batch in hand is read, the worker is needed.
        with pytest.raises(RuntimeError, match="event loop"):
            await anext(stream)
        await stream.aclose()

    asyncio.run(first())
    asyncio.run(elsewhere())
    assert adapter.recorder.closed.is_set()


def test_two_tasks_awaiting_one_stream_at_once_raise() -> None:
    adapter = ScriptedAdapter(text_stream(2), delay=0.05)

    async def main() -> None:
        stream = astream(adapter, OPTIONS)
        async with contextlib.aclosing(stream):
            first = asyncio.create_task(anext(stream))
            await asyncio.sleep(0.01)
            with pytest.raises(RuntimeError, match="already awaited"):
                await anext(stream)
            assert await first == text_stream(2)[0]

    asyncio.run(main())


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: astream(object(), OPTIONS), TypeError, "stream"),  # type: ignore[arg-type]
        (lambda: astream(ScriptedAdapter([]), {}), TypeError, "GenerateOptions"),  # type: ignore[arg-type]
        (
            lambda: astream(ScriptedAdapter([]), OPTIONS, executor=object()),  # type: ignore[arg-type]
            TypeError,
            "thread pool",
        ),
        (
            lambda: astream(ScriptedAdapter([]), OPTIONS, batch_size=0),
            ValueError,
            "batch_size",
        ),
        (
            lambda: astream(ScriptedAdapter([]), OPTIONS, queue_size=-1),
            ValueError,
            "queue_size",
        ),
        (
            lambda: astream(ScriptedAdapter([]), OPTIONS, batch_size=True),
            ValueError,
            "batch_size",
        ),
        (
            lambda: astream(ScriptedAdapter([]), OPTIONS, queue_size=2.0),  # type: ignore[arg-type]
            ValueError,
            "queue_size",
        ),
    ],
)
def test_bad_arguments_are_refused_at_once(
    call: Callable[[], object], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        call()


def test_a_process_pool_is_refused() -> None:
    pool = concurrent.futures.ProcessPoolExecutor(max_workers=1)
    try:
        with pytest.raises(TypeError, match="thread pool"):
            astream(ScriptedAdapter([]), OPTIONS, executor=pool)
    finally:
        pool.shutdown()


def test_a_shut_down_executor_fails_the_first_anext() -> None:
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    pool.shutdown()
    adapter = ScriptedAdapter(text_stream(1))

    async def main() -> None:
        stream = astream(adapter, OPTIONS, executor=pool)
        with pytest.raises(RuntimeError, match="shutdown"):
            await anext(stream)
        with pytest.raises(StopAsyncIteration):
            await anext(stream)

    asyncio.run(main())
    assert adapter.recorder.calls == 0


@pytest.mark.skipif(
    not hasattr(LlmRuntime, "astream"), reason="LlmRuntime.astream not wired yet"
)
def test_runtime_astream_is_the_bridge_over_runtime_stream() -> None:
    runtime = LlmRuntime()
    runtime.register_adapter(["mem"], ScriptedAdapter(text_stream(3)))
    stream = runtime.astream(OPTIONS)  # type: ignore[attr-defined]
    assert isinstance(stream, AsyncChunkStream)
    assert asyncio.run(collect(stream)) == text_stream(3)


def test_interpreter_exit_aborts_an_abandoned_running_stream() -> None:
    script = textwrap.dedent(
        """
        import asyncio
        from dsh_llm import GenerateOptions, LlmAdapter, TextDelta, create_user_message
        from dsh_llm.aio import astream

        class Endless(LlmAdapter):
            def stream(self, options):
                try:
                    while True:
                        yield TextDelta(index=0, text="x")
                finally:
                    print("closed", flush=True)

        OPTIONS = GenerateOptions(
            provider="p", model="m", messages=[create_user_message("hi")]
        )
        KEPT = []

        async def main():
            stream = astream(Endless(), OPTIONS, batch_size=2, queue_size=1)
            KEPT.append(stream)
            await anext(stream)

        asyncio.run(main())
        print("main done", flush=True)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["main", "done", "closed"]
