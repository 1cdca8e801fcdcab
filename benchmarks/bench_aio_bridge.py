"""Benchmark of ``dsh_llm.aio.astream``: what the async bridge costs.

Two measurements, printed as tables:

1. Per-chunk cost of one 100,000-event stream, sync (``for chunk in
   source.stream(options)``) against async (``async for chunk in
   astream(source, options)``), for
   - ``DeepSeekAdapter`` against a ``LoopbackServer`` on 127.0.0.1 (the whole
     path: HTTP, SSE decoding, translation, the bridge), with the body sent as
     one content-length write or as one HTTP chunk per event;
   - an in-memory adapter yielding prebuilt chunks, which isolates the bridge's
     own cost (its difference to the sync row is the bridge overhead per chunk).
   The target is async at most 1.3x the sync per-chunk cost on the DeepSeek path.
2. Throughput of 64 concurrent streams through one ``DeepSeekAdapter``: 64 tasks
   on one event loop over ``astream`` against 64 plain threads.

The loopback server runs in a child process (``--serve``), so its threads do not
compete with the client for the GIL: the tables measure the client alone, as
against a remote server. ``--in-process`` runs it in the benchmark's own process
instead. Runs alternate sync and async and report the fastest of ``--repeat``
runs (the machine's noise only ever adds time); the client's CPU time (all its
threads) is shown beside it.

Usage::

    python benchmarks/bench_aio_bridge.py            # both tables
    python benchmarks/bench_aio_bridge.py --sweep    # also other batch/queue sizes
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from collections.abc import Iterator
from typing import Any

from dsh_llm import BlockEnd
from dsh_llm import BlockStart
from dsh_llm import Finish
from dsh_llm import FinishReason
from dsh_llm import GenerateOptions
from dsh_llm import LlmAdapter
from dsh_llm import StreamChunk
from dsh_llm import TextBlock
from dsh_llm import TextDelta
from dsh_llm import TokenUsage
from dsh_llm import UsageChunk
from dsh_llm import create_user_message
from dsh_llm.adapters.deepseek import PROVIDER_ROUTE
from dsh_llm.adapters.deepseek import DeepSeekAdapter
from dsh_llm.aio import DEFAULT_BATCH_SIZE
from dsh_llm.aio import DEFAULT_QUEUE_SIZE
from dsh_llm.aio import astream
from dsh_llm.aio import shutdown_shared_executor
from dsh_llm.testing.loopback import LoopbackServer
from dsh_llm.testing.loopback import RecordedRequest
from dsh_llm.testing.loopback import Reply
from dsh_llm.testing.loopback import sse_body

OPTIONS = GenerateOptions(
    provider=PROVIDER_ROUTE,
    model="deepseek-v4-flash",
    messages=[create_user_message("benchmark")],
    reasoning_effort="off",
)


def chat_body(events: int) -> bytes:
    """A DeepSeek SSE body: a role chunk, ``events`` text deltas, a finish with
    usage, and ``[DONE]``."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "bench",
            "object": "chat.completion.chunk",
            "model": "deepseek-v4-flash",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    payloads: list[dict[str, Any]] = [chunk({"role": "assistant", "content": ""})]
    payloads += [chunk({"content": f"w{i} "}) for i in range(events)]
    last = chunk({"content": ""}, "stop")
    last["usage"] = {"prompt_tokens": 3, "completion_tokens": events}
    payloads.append(last)
    return sse_body(payloads)


def chunked_reply(body: bytes) -> Reply:
    """``body`` sent as one HTTP chunk per SSE event."""
    events = [event + b"\n\n" for event in body.split(b"\n\n") if event]
    return Reply(body=events, framing="chunked")


def replies(events: int, stream_events: int) -> Callable[[RecordedRequest], Reply]:
    """The handler of the benchmark server: the base URL's first path segment
    picks the reply (``/length``: the ``events`` body as one content-length body,
    ``/chunked``: the same body one HTTP chunk per event, ``/small``: a
    ``stream_events`` body for the concurrency table)."""
    big = chat_body(events)
    by_kind = {
        "length": Reply(body=big, framing="length"),
        "chunked": chunked_reply(big),
        "small": Reply(body=chat_body(stream_events), framing="length"),
    }
    return lambda request: by_kind[request.path.split("/")[1]]


def serve(events: int, stream_events: int) -> int:
    """Child process mode: print the server's URL, serve until stdin closes."""
    with LoopbackServer(handler=replies(events, stream_events)) as server:
        print(server.url, flush=True)
        sys.stdin.read()
    return 0


@contextlib.contextmanager
def benchmark_server(
    events: int, stream_events: int, *, in_process: bool
) -> Iterator[str]:
    """The URL of a loopback server playing ``replies``."""
    if in_process:
        with LoopbackServer(handler=replies(events, stream_events)) as server:
            yield server.url
        return
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(events), str(stream_events)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdin is not None
    assert child.stdout is not None
    try:
        yield child.stdout.readline().strip()
    finally:
        child.stdin.close()
        child.wait(30)
        child.stdout.close()


class MemoryAdapter(LlmAdapter):
    """Yields a prebuilt, valid text stream: no I/O, almost no work per chunk."""

    def __init__(self, deltas: int) -> None:
        pieces = [f"w{i} " for i in range(deltas)]
        self.chunks: list[StreamChunk] = [
            BlockStart(index=0, block_type="text"),
            *(TextDelta(index=0, text=piece) for piece in pieces),
            BlockEnd(index=0, block=TextBlock(text="".join(pieces))),
            UsageChunk(usage=TokenUsage(input_tokens=3, output_tokens=deltas)),
            Finish(reason=FinishReason(kind="stop")),
        ]

    def stream(self, options: GenerateOptions) -> Iterator[StreamChunk]:
        yield from self.chunks


# --- measuring ----------------------------------------------------------------------


class Sample:
    """Fastest wall time and its CPU time over repeated runs, plus chunk counts."""

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []
        self.chunks = 0
        self.hops: list[int] = []

    def add(self, wall: float, cpu: float, chunks: int) -> None:
        self.wall.append(wall)
        self.cpu.append(cpu)
        self.chunks = chunks

    @property
    def best_us(self) -> float:
        return min(self.wall) / self.chunks * 1e6

    @property
    def median_us(self) -> float:
        return statistics.median(self.wall) / self.chunks * 1e6

    @property
    def cpu_us(self) -> float:
        return min(self.cpu) / self.chunks * 1e6


def timed(run: Callable[[], int], sample: Sample) -> None:
    wall0, cpu0 = time.perf_counter(), time.process_time()
    chunks = run()
    sample.add(time.perf_counter() - wall0, time.process_time() - cpu0, chunks)


def sync_count(source: LlmAdapter) -> int:
    count = 0
    for _ in source.stream(OPTIONS):
        count += 1
    return count


def async_count(
    source: LlmAdapter, batch_size: int, queue_size: int, hops: list[int]
) -> int:
    async def main() -> int:
        loop = asyncio.get_running_loop()
        original = loop.call_soon_threadsafe
        wakes = 0

        def counting(*args: Any, **kwargs: Any) -> Any:
            nonlocal wakes
            wakes += 1
            return original(*args, **kwargs)

        loop.call_soon_threadsafe = counting  # type: ignore[method-assign,assignment]
        count = 0
        async for _ in astream(
            source, OPTIONS, batch_size=batch_size, queue_size=queue_size
        ):
            count += 1
        hops.append(wakes)
        return count

    return asyncio.run(main())


def compare(
    source: LlmAdapter, repeat: int, batch_size: int, queue_size: int
) -> tuple[Sample, Sample]:
    sync, bridged = Sample(), Sample()
    sync_count(source)  # warm up connections, imports and caches
    for _ in range(repeat):
        timed(lambda: sync_count(source), sync)
        timed(
            lambda: async_count(source, batch_size, queue_size, bridged.hops),
            bridged,
        )
    if sync.chunks != bridged.chunks:
        raise SystemExit(f"chunk counts differ: {sync.chunks} != {bridged.chunks}")
    return sync, bridged


def overhead_rows(
    url: str, events: int, repeat: int, batch_size: int, queue_size: int
) -> list[tuple[str, Sample, Sample]]:
    rows: list[tuple[str, Sample, Sample]] = []
    for kind, name in (
        ("length", "DeepSeek, loopback, one body"),
        ("chunked", "DeepSeek, loopback, chunk/event"),
    ):
        with DeepSeekAdapter(
            api_key="sk-benchmark", base_url=f"{url}/{kind}"
        ) as adapter:
            rows.append((name, *compare(adapter, repeat, batch_size, queue_size)))
    rows.append(
        (
            "in-memory adapter",
            *compare(MemoryAdapter(events), repeat, batch_size, queue_size),
        )
    )
    return rows


def print_overhead(
    rows: list[tuple[str, Sample, Sample]],
    events: int,
    batch_size: int,
    queue_size: int,
) -> None:
    print(
        f"\nPer-chunk cost, one {events:,}-event stream "
        f"(batch_size={batch_size}, queue_size={queue_size}; best of runs, "
        "CPU of all threads in brackets)\n"
    )
    header = (
        f"{'source':<33} {'sync us/chunk':>15} {'async us/chunk':>16} "
        f"{'ratio':>6} {'bridge ns/chunk':>16} {'loop hops':>10}"
    )
    print(header)
    print("-" * len(header))
    for name, sync, bridged in rows:
        ratio = bridged.best_us / sync.best_us
        overhead_ns = (bridged.best_us - sync.best_us) * 1000
        hops = statistics.median(bridged.hops)
        print(
            f"{name:<33} {sync.best_us:>6.2f} [{sync.cpu_us:>5.2f}] "
            f"{bridged.best_us:>7.2f} [{bridged.cpu_us:>5.2f}] {ratio:>6.2f} "
            f"{overhead_ns:>16.0f} {hops:>10.0f}"
        )


# --- concurrency ---------------------------------------------------------------------


def concurrent_streams(url: str, streams: int, events: int, repeat: int) -> None:
    results: dict[str, list[float]] = {"async (astream)": [], "threads": []}
    expected = events + 4
    with DeepSeekAdapter(
        api_key="sk-benchmark", base_url=f"{url}/small", pool_maxsize=streams
    ) as adapter:

        async def one() -> int:
            return sum([1 async for _ in astream(adapter, OPTIONS)])

        async def many() -> list[int]:
            return await asyncio.gather(*(one() for _ in range(streams)))

        def run_threads() -> list[int]:
            with concurrent.futures.ThreadPoolExecutor(max_workers=streams) as pool:
                return list(pool.map(lambda _: sync_count(adapter), range(streams)))

        run_threads()  # warm the connection pool
        for _ in range(repeat):
            modes: tuple[tuple[str, Callable[[], list[int]]], ...] = (
                ("async (astream)", lambda: asyncio.run(many())),
                ("threads", run_threads),
            )
            for name, run in modes:
                started = time.perf_counter()
                counts = run()
                results[name].append(time.perf_counter() - started)
                if counts != [expected] * streams:
                    raise SystemExit(f"{name}: wrong chunk counts {set(counts)}")
    total = streams * expected
    print(
        f"\nThroughput, {streams} concurrent streams of {events:,} events through one "
        f"DeepSeekAdapter ({total:,} chunks; best of {repeat})\n"
    )
    header = f"{'mode':<18} {'seconds':>9} {'chunks/s':>11} {'streams/s':>10}"
    print(header)
    print("-" * len(header))
    for name, walls in results.items():
        best = min(walls)
        print(f"{name:<18} {best:>9.3f} {total / best:>11,.0f} {streams / best:>10.1f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Benchmark of the async bridge.")
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE)
    parser.add_argument("--queue-size", type=int, default=DEFAULT_QUEUE_SIZE)
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--stream-events", type=int, default=2_000)
    parser.add_argument(
        "--sweep", action="store_true", help="also compare batch and queue sizes"
    )
    parser.add_argument(
        "--in-process", action="store_true", help="run the server in this process"
    )
    parser.add_argument("--serve", nargs=2, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        return serve(*args.serve)
    where = "this process" if args.in_process else "a child process"
    print(f"Python {sys.version.split()[0]}, loopback server in {where}")
    with benchmark_server(
        args.events, args.stream_events, in_process=args.in_process
    ) as url:
        configs = [(args.batch_size, args.queue_size)]
        if args.sweep:
            configs += [(16, 4), (64, 8), (1024, 8), (256, 64)]
        for batch_size, queue_size in configs:
            rows = overhead_rows(url, args.events, args.repeat, batch_size, queue_size)
            print_overhead(rows, args.events, batch_size, queue_size)
        concurrent_streams(url, args.streams, args.stream_events, args.repeat)
    shutdown_shared_executor()
    return 0


if __name__ == "__main__":
    sys.exit(main())
