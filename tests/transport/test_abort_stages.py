"""An abort ends a call at every stage of the request (issue 13): resolving the
host, the TCP connect, the TLS handshake, sending a large body, waiting for the
response headers, reading. Each call below could only end by the abort or by the
1.5 s idle bound; it must end ``ABORTED``, sooner after the abort than that
bound. The connect has its own bound, apart from the idle one. How fast an abort is, per
stage, is measured by ``benchmarks/bench_cancel.py``."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from collections.abc import Iterator
from typing import Any

import pytest

from dsh_llm.adapters.openai_compat import OpenAICompatAdapter
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import create_user_message
from dsh_llm.signal import AbortController
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply
from dsh_llm.testing import Stall
from dsh_llm.testing import sse_event
from dsh_llm.transport.call import StreamingCall
from dsh_llm.transport.session import NoAuth
from dsh_llm.transport.session import create_session

IDLE_MS = 1500
STUCK_MS = 10_000
ABORT_AFTER_S = 0.3


class _Silent:
    """A TCP server that accepts connections and never reads or writes: a TLS
    client waits for the server's hello, a large body fills the buffers."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.listener.settimeout(0.02)
        self.accepted: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            self.accepted.append(conn)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.listener.close()
        for conn in self.accepted:
            conn.close()


@pytest.fixture
def silent() -> Iterator[_Silent]:
    server = _Silent()
    yield server
    server.close()


@pytest.fixture
def full_backlog() -> Iterator[tuple[str, int]]:
    """An address whose accept queue is full: a connect to it never completes."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    address = listener.getsockname()
    filler = socket.create_connection(address, timeout=5)
    yield address
    filler.close()
    listener.close()


def _options(**fields: Any) -> GenerateOptions:
    return GenerateOptions(
        provider="local", model="m", messages=(create_user_message("hi"),), **fields
    )


def _aborted_after(
    base_url: str, when: Callable[[], bool] = lambda: True, **fields: Any
) -> tuple[LlmError, float]:
    """Run one call, abort it once ``when()`` holds (and ABORT_AFTER_S passed);
    return its error and how long the call went on after the abort."""
    controller = AbortController()
    aborted_at: list[float] = []

    def abort() -> None:
        deadline = time.monotonic() + 5
        time.sleep(ABORT_AFTER_S)
        while not when() and time.monotonic() < deadline:
            time.sleep(0.005)
        aborted_at.append(time.monotonic())
        controller.abort()

    timer = threading.Thread(target=abort, daemon=True)
    timer.start()
    with (
        OpenAICompatAdapter(base_url, stream_idle_timeout_ms=IDLE_MS) as adapter,
        pytest.raises(LlmError) as caught,
    ):
        list(adapter.stream(_options(signal=controller.signal, **fields)))
    ended = time.monotonic()
    timer.join(5)
    assert aborted_at, "the call ended before the abort"
    return caught.value, ended - aborted_at[0]


def _ended_by_the_abort(error: LlmError, elapsed: float) -> None:
    assert error.code == ErrorCode.ABORTED, error
    assert elapsed < IDLE_MS / 1000, f"took {elapsed:.2f}s: the abort did not end it"


def test_an_abort_ends_a_slow_name_resolution(monkeypatch):
    release = threading.Event()
    real = socket.getaddrinfo

    def slow(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "slow-dns.invalid":
            release.wait(10)
        return real("127.0.0.1", *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", slow)
    try:
        error, elapsed = _aborted_after("http://slow-dns.invalid:9/v1")
    finally:
        release.set()
    _ended_by_the_abort(error, elapsed)


def test_an_abort_ends_a_tcp_connect_in_progress(full_backlog):
    host, port = full_backlog
    error, elapsed = _aborted_after(f"http://{host}:{port}/v1")
    _ended_by_the_abort(error, elapsed)


def test_an_abort_ends_a_tls_handshake(silent):
    error, elapsed = _aborted_after(
        f"https://127.0.0.1:{silent.port}/v1", when=lambda: bool(silent.accepted)
    )
    _ended_by_the_abort(error, elapsed)


def test_an_abort_ends_the_sending_of_a_large_body(silent):
    huge = "x" * (16 * 1024 * 1024)
    error, elapsed = _aborted_after(
        f"http://127.0.0.1:{silent.port}/v1",
        when=lambda: bool(silent.accepted),
        system=huge,
    )
    _ended_by_the_abort(error, elapsed)


def test_an_abort_ends_a_wait_for_the_response_headers():
    with LoopbackServer() as server:
        server.enqueue(Reply(header_delay=None))
        error, elapsed = _aborted_after(
            f"{server.url}/v1", when=lambda: bool(server.requests)
        )
        assert server.wait_until_idle()
    _ended_by_the_abort(error, elapsed)


def test_an_abort_ends_a_read():
    chunk = {"choices": [{"index": 0, "delta": {"content": "a"}}]}
    with LoopbackServer() as server:
        server.enqueue(Reply(body=(sse_event(chunk), Stall())))
        error, elapsed = _aborted_after(f"{server.url}/v1")
        assert server.wait_until_idle()
    _ended_by_the_abort(error, elapsed)


def test_the_connect_has_its_own_bound_apart_from_the_idle_one(full_backlog):
    host, port = full_backlog
    with create_session() as session:
        call = StreamingCall(
            session,
            url=f"http://{host}:{port}/v1/chat/completions",
            body=b"{}",
            headers={},
            auth=NoAuth(),
            provider="Test",
            endpoint=f"http://{host}:{port}/v1",
            signal=None,
            idle_timeout_ms=300_000,
            keepalive_timeout_ms=None,
            total_timeout_ms=None,
            connect_timeout_ms=200,
        )
        started = time.monotonic()
        with call, pytest.raises(LlmError) as caught:
            call.open()
        elapsed = time.monotonic() - started
    assert caught.value.code == ErrorCode.TIMEOUT
    assert caught.value.message == (
        f"Test API request to http://{host}:{port}/v1 failed: no connection "
        "within 200ms"
    )
    assert elapsed < 30, "the connect waited for the idle bound"


def test_cancelled_astreams_in_a_tls_handshake_free_the_shared_executor(silent):
    # Issue 13's knock-on: cancelled astreams stuck in a handshake held the
    # shared executor's threads, so a healthy stream waited for its first chunk.
    import asyncio

    from dsh_llm.aio import astream

    chunk = {"choices": [{"index": 0, "delta": {"content": "a"}}]}

    async def main(adapter: OpenAICompatAdapter, healthy: OpenAICompatAdapter) -> float:
        async def consume() -> None:
            async for _ in astream(adapter, _options()):
                pass

        tasks = [asyncio.create_task(consume()) for _ in range(64)]
        deadline = time.monotonic() + 10
        while len(silent.accepted) < len(tasks) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        for task in tasks:
            task.cancel()
        started = time.monotonic()
        await asyncio.gather(*tasks, return_exceptions=True)
        async for item in astream(healthy, _options()):
            del item
            break
        return time.monotonic() - started

    with LoopbackServer() as server:
        server.enqueue(Reply(body=(sse_event(chunk), b"data: [DONE]\n\n")))
        with (
            OpenAICompatAdapter(
                f"https://127.0.0.1:{silent.port}/v1", stream_idle_timeout_ms=STUCK_MS
            ) as adapter,
            OpenAICompatAdapter(f"{server.url}/v1") as healthy,
        ):
            elapsed = asyncio.run(main(adapter, healthy))
    # Without the abort reaching the handshakes, it waits for the 10 s bound.
    assert elapsed < STUCK_MS / 2000, f"the healthy stream waited {elapsed:.2f}s"
