"""Benchmark: what the production middleware stack costs per streamed event.

Run ``python benchmarks/bench_observe.py`` (options: ``--events N``, default
100,000; ``--repeat R``, default 5). It prints two tables and is not a test.

1. **Over HTTP.** A DeepSeek-shaped response of ``--events`` text deltas is served
   by ``dsh_llm.testing.LoopbackServer`` in a child process, chunked with one HTTP
   chunk per event. Each client streams it whole and counts its deltas:

   - ``adapter``: ``DeepSeekAdapter.stream(options)``, the reference;
   - ``runtime``: the adapter through ``LlmRuntime.stream``, no middleware;
   - ``+ logging``, ``+ otel``: the runtime with ``logging_middleware`` (a logger
     at INFO with a handler) or ``otel_middleware`` (an SDK ``TracerProvider``,
     so every span records) alone;
   - ``full stack``: ``failover`` (two routes), ``retrying``,
     ``logging_middleware`` and ``otel_middleware``, in that order (routing
     outer, observability inner, as ``docs/observability.md`` recommends).

   Clients run in interleaved rounds and the best wall and CPU time of each is
   kept; ``x adapter`` and ``cpu x adapter`` divide by the adapter's.
2. **In memory.** The same stacks over an adapter that yields prebuilt chunks,
   so only the runtime and the middleware are left: nanoseconds per chunk, and
   over the bare generator.

Target (issue 27): the full stack at most 1.1x the bare adapter per event.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from collections.abc import Iterator
from typing import Any

from _harness import Timing
from _harness import arguments
from _harness import best_of
from _harness import server_process
from _harness import text_deltas
from opentelemetry.sdk.trace import TracerProvider

from dsh_llm import LlmRuntime
from dsh_llm.adapter import LlmAdapter
from dsh_llm.adapters.deepseek import PROVIDER_ROUTE
from dsh_llm.adapters.deepseek import DeepSeekAdapter
from dsh_llm.observe.logging import logging_middleware
from dsh_llm.observe.otel import otel_middleware
from dsh_llm.protocol import BlockEnd
from dsh_llm.protocol import BlockStart
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import TextDelta
from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol import UsageChunk
from dsh_llm.protocol import create_user_message
from dsh_llm.routing import failover
from dsh_llm.routing import retrying
from dsh_llm.testing import Reply
from dsh_llm.testing import sse_event

MODEL = "deepseek-v4-flash"
ALIAS = "chat"
BACKUP = "backup"
ADAPTER = "adapter"
TARGET = 1.1


def _payload(content: str, finish: str | None = None, usage: Any = None) -> Any:
    return {
        "id": "chatcmpl-5f1d0c",
        "object": "chat.completion.chunk",
        "created": 1767225600,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "delta": {"content": content},
                "logprobs": None,
                "finish_reason": finish,
            }
        ],
        "usage": usage,
    }


def _replies(count: int) -> dict[str, Reply]:
    events = [sse_event(_payload(f" tok{i % 1000}")) for i in range(count)]
    usage = {"prompt_tokens": 20, "completion_tokens": count, "total_tokens": count}
    events.append(sse_event(_payload("", "stop", usage)))
    events.append(b"data: [DONE]\n\n")
    return {"/chat/completions": Reply(body=tuple(events), framing="chunked")}


def _options(route: str) -> GenerateOptions:
    return GenerateOptions(
        provider=route, model=MODEL, messages=(create_user_message("hi"),)
    )


def _logger() -> logging.Logger:
    logger = logging.getLogger("bench.observe")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    if not logger.handlers:
        logger.addHandler(logging.StreamHandler(_Discard()))
    return logger


class _Discard:
    def write(self, _: str) -> int:
        return 0

    def flush(self) -> None:
        pass


Stack = Callable[[LlmRuntime], str]
"""Adds middleware to a runtime; returns the route to stream."""


def _bare(_: LlmRuntime) -> str:
    return PROVIDER_ROUTE


def _with_logging(runtime: LlmRuntime) -> str:
    runtime.use(logging_middleware(_logger()))
    return PROVIDER_ROUTE


def _with_otel(runtime: LlmRuntime) -> str:
    runtime.use(otel_middleware(tracer_provider=TracerProvider()))
    return PROVIDER_ROUTE


def _full(runtime: LlmRuntime) -> str:
    runtime.use(failover(ALIAS, [(PROVIDER_ROUTE, None), (BACKUP, None)]))
    runtime.use(retrying({"mode": "normal", "maxRetries": 2}))
    runtime.use(logging_middleware(_logger()))
    runtime.use(otel_middleware(tracer_provider=TracerProvider()))
    return ALIAS


STACKS: list[tuple[str, Stack]] = [
    ("runtime", _bare),
    ("+ logging", _with_logging),
    ("+ otel", _with_otel),
    ("full stack", _full),
]


def _runtime(make: Callable[[], LlmAdapter], stack: Stack) -> tuple[LlmRuntime, str]:
    runtime = LlmRuntime()
    runtime.register_adapter([PROVIDER_ROUTE], make())
    runtime.register_adapter([BACKUP], make())
    return runtime, stack(runtime)


def _http_rows(events: int, repeat: int) -> dict[str, Timing]:
    with server_process(_replies, events) as port:
        base = f"http://127.0.0.1:{port}"

        def make() -> LlmAdapter:
            return DeepSeekAdapter("sk-bench", base_url=base)

        clients: list[tuple[str, Callable[[], int] | None]] = [
            (ADAPTER, text_deltas(make().stream, _options(PROVIDER_ROUTE)))
        ]
        for name, stack in STACKS:
            runtime, route = _runtime(make, stack)
            clients.append((name, text_deltas(runtime.stream, _options(route))))
        return best_of(clients, events, repeat)


class _Prebuilt(LlmAdapter):
    """Yields the same prebuilt chunks for every call: no I/O, no parsing."""

    def __init__(self, chunks: tuple[StreamChunk, ...]) -> None:
        self._chunks = chunks

    def stream(self, options: GenerateOptions) -> Iterator[StreamChunk]:
        yield from self._chunks


def _chunks(count: int) -> tuple[StreamChunk, ...]:
    text = "x" * count
    return (
        BlockStart(index=0, block_type="text"),
        *(TextDelta(index=0, text="x") for _ in range(count)),
        BlockEnd(index=0, block=TextBlock(text=text)),
        UsageChunk(usage=TokenUsage(input_tokens=1, output_tokens=count)),
        Finish(reason=FinishReason.STOP),
    )


def _memory_rows(events: int, repeat: int) -> dict[str, Timing]:
    chunks = _chunks(events)

    def make() -> LlmAdapter:
        return _Prebuilt(chunks)

    clients: list[tuple[str, Callable[[], int] | None]] = [
        (ADAPTER, text_deltas(make().stream, _options(PROVIDER_ROUTE)))
    ]
    for name, stack in STACKS:
        runtime, route = _runtime(make, stack)
        clients.append((name, text_deltas(runtime.stream, _options(route))))
    return best_of(clients, events, repeat)


def _print(title: str, events: int, rows: dict[str, Timing], unit: str) -> None:
    print(title)
    bare = rows[ADAPTER]
    scale = 1e9 if unit == "ns" else 1e6
    print(
        f"{'client':<12} {'events/s':>11} {unit + '/event':>10} {'x adapter':>10} "
        f"{'cpu ' + unit:>8} {'cpu x adapter':>14}"
    )
    for name, timing in rows.items():
        wall, cpu = timing
        print(
            f"{name:<12} {events / wall:>11,.0f} {wall / events * scale:>10.2f} "
            f"{wall / bare.wall:>10.2f} {cpu / events * scale:>8.2f} "
            f"{cpu / bare.cpu:>14.2f}"
        )


def main(argv: list[str] | None = None) -> int:
    args = arguments(__doc__.splitlines()[0], 100_000, 5, argv)
    print(
        f"{args.events:,} events, best of {args.repeat} interleaved rounds; "
        f"target: full stack <= {TARGET}x adapter"
    )
    print()
    started = time.perf_counter()
    _print(
        "over HTTP (DeepSeekAdapter, chunked, server in a child process)",
        args.events,
        _http_rows(args.events, args.repeat),
        "µs",
    )
    print()
    _print(
        "in memory (prebuilt chunks: the runtime and the middleware alone)",
        args.events,
        _memory_rows(args.events, args.repeat),
        "ns",
    )
    print()
    print(f"({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
