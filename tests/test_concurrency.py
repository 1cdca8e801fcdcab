"""Concurrency of the sync core and of the async bridge against real sockets.

One ``DeepSeekAdapter`` (and one ``LlmRuntime`` over it) serves many threads at
once against a ``LoopbackServer``; each request names its own stream id, and the
server answers with text built from that id, so a stream that received another
stream's bytes is caught. Leaks are counted on the server side (connections
opened and closed) and with ``threading.active_count()``. The async tests cancel
or abandon ``dsh_llm.aio.astream`` iterators mid-response and time how fast the
server sees the connection close.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from collections.abc import Iterator
from typing import Any

import pytest

from dsh_llm import AbortController
from dsh_llm import ErrorCode
from dsh_llm import Finish
from dsh_llm import GenerateOptions
from dsh_llm import LlmError
from dsh_llm import LlmRuntime
from dsh_llm import StreamChunk
from dsh_llm import TextDelta
from dsh_llm import collect
from dsh_llm import create_user_message
from dsh_llm import validate_stream
from dsh_llm.adapters.deepseek import PROVIDER_ROUTE
from dsh_llm.adapters.deepseek import DeepSeekAdapter
from dsh_llm.aio import SHARED_EXECUTOR_THREAD_PREFIX
from dsh_llm.aio import astream
from dsh_llm.aio import shutdown_shared_executor
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Pause
from dsh_llm.testing import RecordedRequest
from dsh_llm.testing import Reply
from dsh_llm.testing import Stall
from dsh_llm.testing import sse_events

from .adapters.chat_chunks import FIRST
from .adapters.chat_chunks import finish
from .adapters.chat_chunks import text
from .adapters.chat_chunks import usage

PARTS = 3

# Cancellation must end the stream far sooner than any timeout would (the
# stalled servers here never end by themselves). How fast it is (the 100 ms
# target) is measured by benchmarks/bench_cancel.py, not asserted here.
PROMPTLY = 2.0


def options(stream_id: str, **fields: Any) -> GenerateOptions:
    return GenerateOptions(
        provider=PROVIDER_ROUTE,
        model="deepseek-v4-flash",
        messages=[create_user_message(stream_id)],
        **fields,
    )


def expected_text(stream_id: str) -> str:
    return "".join(f"{stream_id}/{part} " for part in range(PARTS))


def echo(pause: float = 0.0) -> Callable[[RecordedRequest], Reply]:
    """A handler answering each request with text made of its stream id, with an
    optional pause mid-body that keeps every connection busy at once."""

    def handler(request: RecordedRequest) -> Reply:
        stream_id = request.json()["messages"][-1]["content"]
        events = sse_events(
            [
                FIRST,
                *(text(f"{stream_id}/{part} ") for part in range(PARTS)),
                finish("stop", usage(2, PARTS)),
            ]
        )
        body: tuple[Any, ...] = events
        if pause:
            body = (*events[:2], Pause(seconds=pause), *events[2:])
        return Reply(body=body)

    return handler


def checked_text(chunks: list[StreamChunk]) -> str:
    """The text of a strict-valid stream that ended with ``stop``."""
    assert list(validate_stream(chunks)) == chunks
    last = chunks[-1]
    assert isinstance(last, Finish)
    assert last.reason.kind == "stop"
    return "".join(c.text for c in chunks if isinstance(c, TextDelta))


def run_threads(count: int, work: Callable[[int], None]) -> None:
    """Run ``work(i)`` on ``count`` threads that start together; re-raise the
    first failure."""
    barrier = threading.Barrier(count)
    errors: list[BaseException] = []

    def body(i: int) -> None:
        try:
            barrier.wait(10)
            work(i)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads)
    if errors:
        raise errors[0]


def wait_for(predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def idle_connections(server: LoopbackServer) -> int:
    return server.connections_opened - server.connections_closed


def adapter_for(server: LoopbackServer, **fields: Any) -> DeepSeekAdapter:
    return DeepSeekAdapter(api_key="sk-test", base_url=server.url, **fields)


# --- the sync core ------------------------------------------------------------------


def test_32_threads_stream_at_once_through_one_adapter(server: LoopbackServer) -> None:
    server.handler = echo(pause=0.05)
    results: dict[str, str] = {}
    with adapter_for(server, pool_maxsize=32) as adapter:

        def work(i: int) -> None:
            for round_ in range(3):
                stream_id = f"a{i}-{round_}"
                chunks = list(adapter.stream(options(stream_id)))
                results[stream_id] = checked_text(chunks)

        run_threads(32, work)
    assert len(results) == 96
    assert all(got == expected_text(key) for key, got in results.items())
    assert server.wait_until_idle()


def test_32_threads_stream_at_once_through_one_runtime(server: LoopbackServer) -> None:
    server.handler = echo(pause=0.05)
    results: dict[str, str] = {}
    with adapter_for(server, pool_maxsize=32) as adapter:
        runtime = LlmRuntime()
        runtime.register_adapter([PROVIDER_ROUTE], adapter)

        def work(i: int) -> None:
            for round_ in range(3):
                stream_id = f"r{i}-{round_}"
                chunks = list(runtime.stream(options(stream_id)))
                results[stream_id] = checked_text(chunks)
                assert collect(chunks).text == expected_text(stream_id)

        run_threads(32, work)
    assert len(results) == 96
    assert all(got == expected_text(key) for key, got in results.items())
    assert server.wait_until_idle()


@pytest.mark.parametrize("pool_maxsize", [2, 8, 32])
def test_the_pool_keeps_at_most_pool_maxsize_idle_connections_until_closed(
    server: LoopbackServer, pool_maxsize: int
) -> None:
    # The first 32 requests are answered only once all 32 have arrived, so 32
    # connections are open at once.
    gate = threading.Barrier(32)
    answer = echo()

    def handler(request: RecordedRequest) -> Reply:
        if len(server.requests) <= 32:
            gate.wait(10)
        return answer(request)

    server.handler = handler
    adapter = adapter_for(server, pool_maxsize=pool_maxsize)
    try:

        def work(i: int) -> None:
            checked_text(list(adapter.stream(options(f"p{i}"))))

        run_threads(32, work)
        assert server.connections_opened == 32
        assert wait_for(lambda: idle_connections(server) == pool_maxsize)
        # The kept connections are reused, not replaced.
        run_threads(pool_maxsize, work)
        assert server.connections_opened == 32
        assert idle_connections(server) == pool_maxsize
    finally:
        adapter.close()
    assert server.wait_until_idle()


def test_1000_streams_leave_no_connection_or_thread_behind(
    server: LoopbackServer,
) -> None:
    server.handler = echo()
    pool_maxsize = 8
    baseline = threading.active_count()
    done: list[int] = []
    with adapter_for(server, pool_maxsize=pool_maxsize) as adapter:
        runtime = LlmRuntime()
        runtime.register_adapter([PROVIDER_ROUTE], adapter)

        def work(i: int) -> None:
            for n in range(i, 1000, 32):
                stream_id = f"k{n}"
                source = adapter if n % 2 else runtime
                assert checked_text(list(source.stream(options(stream_id)))) == (
                    expected_text(stream_id)
                )
                done.append(n)

        run_threads(32, work)
        assert sorted(done) == list(range(1000))
        assert len(server.requests) == 1000
        # Only the pool's idle keep-alive connections (and their server
        # threads) remain while the adapter is open; the server may take a
        # moment to see the close of a connection the pool discarded.
        assert wait_for(lambda: 0 < idle_connections(server) <= pool_maxsize)
        assert wait_for(lambda: threading.active_count() <= baseline + pool_maxsize)
    assert server.wait_until_idle()
    assert wait_for(lambda: threading.active_count() == baseline)


def test_abort_from_another_thread_ends_every_concurrent_stream(
    server: LoopbackServer,
) -> None:
    server.handler = lambda request: Reply(
        body=(*sse_events([FIRST, text("a")], done=False), Stall())
    )
    controller = AbortController()
    codes: list[str] = []
    with adapter_for(server, pool_maxsize=16) as adapter:

        def work(i: int) -> None:
            stream = adapter.stream(options(f"s{i}", signal=controller.signal))
            with pytest.raises(LlmError) as caught:
                for _ in stream:
                    pass
            codes.append(caught.value.code)

        timer = threading.Timer(0.3, controller.abort)
        timer.start()
        try:
            run_threads(16, work)
        finally:
            timer.cancel()
    assert codes == [ErrorCode.ABORTED.value] * 16
    assert server.wait_until_idle()


# --- the async bridge over real sockets ---------------------------------------------


@pytest.fixture
def no_worker_threads_after() -> Iterator[None]:
    yield
    shutdown_shared_executor()
    assert not [
        t
        for t in threading.enumerate()
        if t.name.startswith(SHARED_EXECUTOR_THREAD_PREFIX)
    ]


def stalled(request: RecordedRequest) -> Reply:
    return Reply(body=(*sse_events([FIRST, text("a")], done=False), Stall()))


def closed_within(server: LoopbackServer, started: float, limit: float) -> bool:
    assert wait_for(lambda: server.connections_closed == server.connections_opened)
    return time.perf_counter() - started < limit


@pytest.mark.usefixtures("no_worker_threads_after")
def test_64_concurrent_async_streams_are_complete_valid_and_correct(
    server: LoopbackServer,
) -> None:
    server.handler = echo(pause=0.02)
    with adapter_for(server, pool_maxsize=64) as adapter:
        runtime = LlmRuntime()
        runtime.register_adapter([PROVIDER_ROUTE], adapter)

        async def one(n: int) -> tuple[str, str]:
            stream_id = f"x{n}"
            source = adapter if n % 2 else runtime
            chunks = [chunk async for chunk in astream(source, options(stream_id))]
            return stream_id, checked_text(chunks)

        async def main() -> list[tuple[str, str]]:
            return await asyncio.gather(*(one(n) for n in range(128)))

        results = asyncio.run(main())
    assert len(results) == 128
    assert all(got == expected_text(stream_id) for stream_id, got in results)
    assert server.wait_until_idle()


@pytest.mark.usefixtures("no_worker_threads_after")
def test_cancelling_the_task_closes_the_http_response_promptly(
    server: LoopbackServer,
) -> None:
    server.handler = stalled
    with adapter_for(server) as adapter:
        started = 0.0

        async def consume(first: asyncio.Event) -> None:
            async for _ in astream(adapter, options("c")):
                first.set()

        async def main() -> None:
            nonlocal started
            first = asyncio.Event()
            task = asyncio.create_task(consume(first))
            await first.wait()
            await asyncio.sleep(0.05)
            assert server.connections_closed == 0
            started = time.perf_counter()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(main())
        assert closed_within(server, started, PROMPTLY)


@pytest.mark.usefixtures("no_worker_threads_after")
def test_leaving_astream_at_the_finish_keeps_the_connection_for_reuse(
    server: LoopbackServer,
) -> None:
    # The body's end comes 20 ms after [DONE]: the consumer leaves at the
    # finish while the adapter is still reading it.
    server.handler = lambda request: Reply(
        body=(
            *sse_events([FIRST, text("a"), finish("stop", usage(1, 1))]),
            Pause(seconds=0.02),
        )
    )
    with adapter_for(server) as adapter:
        runtime = LlmRuntime()
        runtime.register_adapter([PROVIDER_ROUTE], adapter)

        async def main() -> None:
            for n in range(6):
                source = runtime if n % 2 else adapter
                stream = astream(source, options(f"f{n}"))
                async with contextlib.aclosing(stream):
                    async for chunk in stream:
                        if isinstance(chunk, Finish):
                            assert chunk.reason.kind == "stop"
                            break

        asyncio.run(main())
    assert server.connections_opened == 1
    assert server.wait_until_idle()


@pytest.mark.usefixtures("no_worker_threads_after")
def test_break_and_aclose_close_the_http_response_promptly(
    server: LoopbackServer,
) -> None:
    server.handler = stalled
    with adapter_for(server) as adapter:

        async def main() -> float:
            stream = astream(adapter, options("b"))
            async with contextlib.aclosing(stream):
                async for chunk in stream:
                    if isinstance(chunk, TextDelta):
                        break
                await asyncio.sleep(0.05)
                assert server.connections_closed == 0
                started = time.perf_counter()
            return started

        started = asyncio.run(main())
        assert closed_within(server, started, PROMPTLY)


@pytest.mark.usefixtures("no_worker_threads_after")
def test_dropping_the_iterator_closes_the_http_response_promptly(
    server: LoopbackServer,
) -> None:
    server.handler = stalled
    with adapter_for(server) as adapter:

        async def main() -> float:
            async for chunk in astream(adapter, options("g")):
                if isinstance(chunk, TextDelta):
                    await asyncio.sleep(0.05)
                    assert server.connections_closed == 0
                    started = time.perf_counter()
                    break
            # Leaving the loop dropped the last reference to the iterator; no
            # garbage collection is needed to close it.
            return started

        started = asyncio.run(main())
        assert closed_within(server, started, PROMPTLY)


@pytest.mark.usefixtures("no_worker_threads_after")
def test_an_abort_through_the_callers_signal_crosses_as_aborted_llm_error(
    server: LoopbackServer,
) -> None:
    server.handler = stalled
    controller = AbortController()
    with adapter_for(server) as adapter:

        async def main() -> None:
            stream = astream(adapter, options("e", signal=controller.signal))
            async with contextlib.aclosing(stream):
                async for chunk in stream:
                    if isinstance(chunk, TextDelta):
                        asyncio.get_running_loop().call_later(0.02, controller.abort)

        with pytest.raises(LlmError) as caught:
            asyncio.run(main())
    assert caught.value.code == "ABORTED"
    assert caught.value.message == "DeepSeek request aborted by caller"
    assert server.wait_until_idle()


@pytest.mark.usefixtures("no_worker_threads_after")
def test_an_http_error_crosses_the_bridge_with_its_facts(
    server: LoopbackServer,
) -> None:
    server.enqueue(
        Reply(
            status=429,
            reason="Too Many Requests",
            headers={
                "content-type": "application/json",
                "retry-after": "2",
                "x-request-id": "req-429",
            },
            body=b'{"error": {"message": "slow down", "type": "rate_limit"}}',
            framing="length",
        )
    )
    server.enqueue(
        Reply(
            status=429,
            reason="Too Many Requests",
            headers={
                "content-type": "application/json",
                "retry-after": "2",
                "x-request-id": "req-429",
            },
            body=b'{"error": {"message": "slow down", "type": "rate_limit"}}',
            framing="length",
        )
    )
    with adapter_for(server) as adapter:
        with pytest.raises(LlmError) as sync_caught:
            list(adapter.stream(options("h")))

        async def main() -> None:
            async for _ in astream(adapter, options("h")):
                pass

        with pytest.raises(LlmError) as async_caught:
            asyncio.run(main())
    assert async_caught.value.code == sync_caught.value.code == "RATE_LIMIT"
    assert async_caught.value.failure == sync_caught.value.failure
    assert async_caught.value.status == 429
