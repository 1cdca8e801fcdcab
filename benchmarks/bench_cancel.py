"""Benchmark of cancellation: how long an abort takes to end a stream and close
its HTTP connection.

A ``LoopbackServer`` answers every request with the start of a DeepSeek stream
and then stalls (the connection stays open, nothing more is sent), so the only
way out is the cancellation under test. For each way of cancelling, the table
gives the time from the cancelling call to

- *ended*: the consumer sees the end (``LlmError`` ``ABORTED``, an ``aborted``
  finish, ``CancelledError`` or the return from ``aclose()``);
- *closed*: the server sees the connection closed by the client.

Ways of cancelling:

- ``sync signal``: ``AbortController.abort()`` from another thread while
  ``adapter.stream(options)`` waits in a read;
- ``runtime signal``: the same through ``LlmRuntime.stream`` (ends with an
  ``aborted`` finish);
- ``sync close``: ``stream.close()`` on the adapter's generator between reads;
- ``astream cancel``: ``task.cancel()`` on a task in ``async for`` over
  ``dsh_llm.aio.astream``;
- ``astream aclose``: ``break`` then ``aclose()``;
- ``astream signal``: the caller's ``AbortSignal`` aborted from the event loop.

A second table aborts a call at each stage of the request (issue 13), from
another thread once the call has been in that stage for 50 ms, and gives the
time from ``abort()`` until the call raised ``ABORTED``:

- ``resolve``: ``getaddrinfo`` is slow (replaced here by one that blocks);
- ``connect``: the server's accept queue is full, so the TCP connect hangs;
- ``tls``: an ``https://`` server that accepts and never answers the hello;
- ``body``: a 32 MiB body to a server that never reads;
- ``headers``: a server that never sends the response headers;
- ``read``: a stream that stalls after its first event.

The target (issues 5, 7 and 13) is 100 ms at worst for each, ended and closed.
The unit tests check that cancellation ends the stream and closes the
connection; this script measures how fast.

Usage::

    python benchmarks/bench_cancel.py [--repeat 30]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import statistics
import threading
import time
from collections.abc import Callable
from collections.abc import Iterator
from typing import Any

from dsh_llm import AbortController
from dsh_llm import GenerateOptions
from dsh_llm import LlmError
from dsh_llm import LlmRuntime
from dsh_llm import TextDelta
from dsh_llm.adapters.deepseek import PROVIDER_ROUTE
from dsh_llm.adapters.deepseek import DeepSeekAdapter
from dsh_llm.adapters.openai_compat import OpenAICompatAdapter
from dsh_llm.aio import astream
from dsh_llm.aio import shutdown_shared_executor
from dsh_llm.protocol import Finish
from dsh_llm.protocol import create_user_message
from dsh_llm.signal import AbortSignal
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import RecordedRequest
from dsh_llm.testing import Reply
from dsh_llm.testing import Stall
from dsh_llm.testing import sse_events

TARGET_MS = 100.0

_FIRST = {
    "id": "c1",
    "object": "chat.completion.chunk",
    "model": "deepseek-v4-flash",
    "choices": [{"index": 0, "delta": {"content": "a"}, "finish_reason": None}],
}


def _stalled(request: RecordedRequest) -> Reply:
    return Reply(body=(*sse_events([_FIRST], done=False), Stall()))


def _options(signal: AbortSignal | None = None) -> GenerateOptions:
    return GenerateOptions(
        provider=PROVIDER_ROUTE,
        model="deepseek-v4-flash",
        messages=(create_user_message("hi"),),
        signal=signal,
    )


class _Bench:
    def __init__(self, server: LoopbackServer, adapter: DeepSeekAdapter) -> None:
        self.server = server
        self.adapter = adapter
        self.runtime = LlmRuntime()
        self.runtime.register_adapter([PROVIDER_ROUTE], adapter)

    def closed_after(self, started: float) -> float:
        """Seconds from ``started`` until every connection the server accepted
        is closed (polled every 0.2 ms)."""
        server = self.server
        deadline = time.perf_counter() + 5
        while server.connections_closed < server.connections_opened:
            if time.perf_counter() > deadline:
                raise RuntimeError("the connection was not closed within 5 s")
            time.sleep(0.0002)
        return time.perf_counter() - started

    def _first_text(self, stream: Iterator[Any]) -> None:
        for chunk in stream:
            if isinstance(chunk, TextDelta):
                return
        raise RuntimeError("the stream ended before its first text")

    def sync_signal(self, through_runtime: bool) -> tuple[float, float]:
        controller = AbortController()
        source = self.runtime if through_runtime else self.adapter
        stream = iter(source.stream(_options(controller.signal)))
        self._first_text(stream)
        started = 0.0

        def abort() -> None:
            nonlocal started
            time.sleep(0.02)  # let the reader block on the socket
            started = time.perf_counter()
            controller.abort()

        thread = threading.Thread(target=abort)
        thread.start()
        try:
            last = list(stream)[-1]
            if not (isinstance(last, Finish) and last.reason.kind == "aborted"):
                raise RuntimeError(f"expected an aborted finish, got {last!r}")
        except LlmError as exc:
            if exc.code != "ABORTED":
                raise
        ended = time.perf_counter() - started
        thread.join()
        return ended, self.closed_after(started)

    def sync_close(self) -> tuple[float, float]:
        stream = self.adapter.stream(_options())
        self._first_text(stream)
        started = time.perf_counter()
        stream.close()  # type: ignore[attr-defined]
        ended = time.perf_counter() - started
        return ended, self.closed_after(started)

    def astream_way(self, way: str) -> tuple[float, float]:
        async def main() -> tuple[float, float]:
            controller = AbortController()
            stream = astream(self.adapter, _options(controller.signal))
            first = asyncio.Event()

            async def consume() -> None:
                async for chunk in stream:
                    if isinstance(chunk, TextDelta):
                        first.set()

            if way == "aclose":
                async for chunk in stream:
                    if isinstance(chunk, TextDelta):
                        break
                started = time.perf_counter()
                await stream.aclose()
                return started, time.perf_counter() - started
            task = asyncio.create_task(consume())
            await first.wait()
            await asyncio.sleep(0.02)
            started = time.perf_counter()
            if way == "cancel":
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            else:
                controller.abort()
                with contextlib.suppress(LlmError):
                    await task
            return started, time.perf_counter() - started

        started, ended = asyncio.run(main())
        return ended, self.closed_after(started)


def _abort_in_stage(
    base_url: str, reached: Callable[[], bool], fields: dict[str, Any]
) -> float:
    """Seconds from ``abort()`` until a call to ``base_url`` raised ``ABORTED``;
    the abort comes 50 ms after ``reached()`` first holds."""
    controller = AbortController()
    started = 0.0

    def abort() -> None:
        nonlocal started
        while not reached():
            time.sleep(0.001)
        time.sleep(0.05)  # let the call block in its stage
        started = time.perf_counter()
        controller.abort()

    thread = threading.Thread(target=abort)
    options = GenerateOptions(
        provider="local",
        model="m",
        messages=(create_user_message("hi"),),
        signal=controller.signal,
        **fields,
    )
    with OpenAICompatAdapter(base_url, stream_idle_timeout_ms=10_000) as adapter:
        thread.start()
        try:
            list(adapter.stream(options))
        except LlmError as exc:
            if exc.code != "ABORTED":
                raise
        else:
            raise RuntimeError("the call was not aborted")
        ended = time.perf_counter() - started
    thread.join()
    return ended


@contextlib.contextmanager
def _stage_servers() -> Iterator[
    dict[str, tuple[str, Callable[[], Callable[[], bool]], dict[str, Any]]]
]:
    """For each stage: the base URL that holds a call there, a function called
    before each run that returns "the call has reached the stage", and the
    request fields."""
    full = socket.socket()
    full.bind(("127.0.0.1", 0))
    full.listen(0)
    filler = socket.create_connection(full.getsockname())
    silent = socket.create_server(("127.0.0.1", 0))
    silent.settimeout(0.02)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                conn, _ = silent.accept()
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                accepted.append(conn)

    acceptor = threading.Thread(target=accept)
    acceptor.start()
    real = socket.getaddrinfo

    def slow(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "slow-dns.invalid":
            time.sleep(2)
        return real("127.0.0.1", *args, **kwargs)

    socket.getaddrinfo = slow  # type: ignore[assignment]
    silent_port = silent.getsockname()[1]
    host, port = full.getsockname()
    try:
        with LoopbackServer() as server:
            server.handler = lambda request: (
                Reply(header_delay=None)
                if request.path.endswith("/headers/v1/chat/completions")
                else _stalled(request)
            )

            def connected() -> Callable[[], bool]:
                seen = len(accepted)
                return lambda: len(accepted) > seen

            def always() -> Callable[[], bool]:
                return lambda: True

            huge = {"system": "x" * (32 * 1024 * 1024)}
            yield {
                "resolve": ("http://slow-dns.invalid:9/v1", always, {}),
                "connect": (f"http://{host}:{port}/v1", always, {}),
                "tls": (f"https://127.0.0.1:{silent_port}/v1", connected, {}),
                "body": (f"http://127.0.0.1:{silent_port}/v1", connected, huge),
                "headers": (f"{server.url}/headers/v1", always, {}),
                "read": (f"{server.url}/v1", always, {}),
            }
    finally:
        socket.getaddrinfo = real  # type: ignore[assignment]
        stop.set()
        acceptor.join()
        for conn in (filler, full, silent, *accepted):
            conn.close()


def _stage_row(name: str, runs: list[float]) -> str:
    ended = [e * 1000 for e in runs]
    verdict = "met" if max(ended) <= TARGET_MS else "MISSED"
    return f"{name:<16} {statistics.median(ended):>9.2f} {max(ended):>9.2f}   {verdict}"


def _row(name: str, runs: list[tuple[float, float]]) -> str:
    ended = [e * 1000 for e, _ in runs]
    closed = [c * 1000 for _, c in runs]
    worst = max(max(ended), max(closed))
    verdict = "met" if worst <= TARGET_MS else "MISSED"
    return (
        f"{name:<16} {statistics.median(ended):>9.2f} {max(ended):>9.2f} "
        f"{statistics.median(closed):>9.2f} {max(closed):>9.2f}   {verdict}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    with (
        LoopbackServer() as server,
        DeepSeekAdapter(api_key="sk-bench", base_url=server.url) as adapter,
    ):
        server.handler = _stalled
        bench = _Bench(server, adapter)
        ways: list[tuple[str, Callable[[], tuple[float, float]]]] = [
            ("sync signal", lambda: bench.sync_signal(through_runtime=False)),
            ("runtime signal", lambda: bench.sync_signal(through_runtime=True)),
            ("sync close", bench.sync_close),
            ("astream cancel", lambda: bench.astream_way("cancel")),
            ("astream aclose", lambda: bench.astream_way("aclose")),
            ("astream signal", lambda: bench.astream_way("signal")),
        ]
        print(f"{args.repeat} runs each; times in ms from the cancelling call")
        print()
        print("way              ended med ended max closed med closed max   target")
        for name, run in ways:
            print(_row(name, [run() for _ in range(args.repeat)]))
    stage_repeat = max(1, args.repeat // 3)
    print()
    print(f"abort at each stage: {stage_repeat} runs each; ms from abort()")
    print()
    print("stage            ended med ended max   target")
    with _stage_servers() as stages:
        for name, (url, arm, fields) in stages.items():
            runs = [_abort_in_stage(url, arm(), fields) for _ in range(stage_repeat)]
            print(_stage_row(name, runs))
    shutdown_shared_executor()


if __name__ == "__main__":
    main()
