"""Tests of ``dsh_llm.aio``: the async bridge, against in-memory sources.

Every test drives its own event loop with plain ``asyncio.run``. The sources
(``tests/aio_sources.py``) are real ``LlmAdapter`` subclasses whose generators
record which thread ran them and when they were closed, so the bridge is
exercised as a black box. Signals and early exits are in
``tests/test_aio_exits.py``; loopback HTTP cancellation is covered in
``tests/test_concurrency.py``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import gc
import subprocess
import sys
import textwrap
import threading
import time
import weakref
from collections.abc import Callable
from collections.abc import Iterator

import pytest

from dsh_llm import ErrorCode
from dsh_llm import Finish
from dsh_llm import GenerateOptions
from dsh_llm import LlmAdapter
from dsh_llm import LlmError
from dsh_llm import LlmRuntime
from dsh_llm import StreamChunk
from dsh_llm import TextDelta
from dsh_llm import validate_stream
from dsh_llm.aio import DEFAULT_BATCH_SIZE
from dsh_llm.aio import DEFAULT_QUEUE_SIZE
from dsh_llm.aio import AsyncChunkStream
from dsh_llm.aio import astream
from dsh_llm.aio import shutdown_shared_executor
from tests.aio_sources import OPTIONS
from tests.aio_sources import EndlessAdapter
from tests.aio_sources import ScriptedAdapter
from tests.aio_sources import collect
from tests.aio_sources import text_stream
from tests.aio_sources import worker_threads


@pytest.fixture(autouse=True, scope="module")
def _shared_executor_is_shut_down_after_the_module() -> Iterator[None]:
    yield
    shutdown_shared_executor()


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


def test_a_failed_source_is_freed_without_the_cyclic_collector() -> None:
    # What a failed generator's frame holds (an HTTP response, say) must go
    # as soon as the caller drops the error, as it does on the sync path.
    class Resource:
        pass

    held: list[weakref.ref[Resource]] = []

    class Failing:
        def stream(self, options: GenerateOptions) -> Iterator[StreamChunk]:
            resource = Resource()
            held.append(weakref.ref(resource))
            yield from text_stream(2)[:1]
            raise LlmError("wire broke", ErrorCode.TRANSPORT)

    async def main() -> None:
        with contextlib.suppress(LlmError):
            await collect(astream(Failing(), OPTIONS))

    gc.disable()
    try:
        asyncio.run(main())
        # The executor thread that ran the source may still be unwinding its
        # last frame on a loaded machine: wait for it (reference counting, not
        # the cyclic collector, frees the resource).
        deadline = time.monotonic() + 5
        while held[0]() is not None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert held[0]() is None
    finally:
        gc.enable()


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


def test_astream_over_a_runtime_is_the_bridge_over_runtime_stream() -> None:
    runtime = LlmRuntime()
    runtime.register_adapter(["mem"], ScriptedAdapter(text_stream(3)))
    stream = astream(runtime, OPTIONS)
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
