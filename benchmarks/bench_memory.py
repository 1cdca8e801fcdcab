"""Benchmark: peak memory over one long stream, against the size of its content.

Run ``python benchmarks/bench_memory.py`` (options: ``--events N ...``, default
10,000, 100,000 and 1,000,000; ``--clients NAME ...``). It prints one table and
is not a test (``tests/test_memory_bound.py`` asserts the bound with
``tracemalloc``).

The stream is OpenAI-shaped: half the events are text deltas, then one tool call
whose arguments stream in the other half (about 9 characters per fragment, so
about 0.9 MB of content per 100,000 events), then the finish, usage and
``[DONE]``. ``dsh_llm.testing.LoopbackServer`` serves it from a child process,
chunked, 16 events per HTTP chunk. Each client runs in a fresh child process
(``spawn``): it streams a short warm-up answer, resets the kernel's peak-RSS mark
(``/proc/self/clear_refs``), streams the long answer while checking the content
by length and CRC only (nothing kept by the caller), and reports its peak RSS
over the stream (``VmHWM`` minus the RSS at the reset):

- ``raw floor``: a plain socket, chunk framing stripped, split on blank lines,
  ``json.loads`` of each payload; nothing else.
- ``adapter``: ``OpenAICompatAdapter.stream(options)``.
- ``runtime``: the same adapter through ``LlmRuntime.stream``.
- ``validator``: the runtime's stream through ``validate_stream``.
- ``assembler``: the adapter into a ``BlockAssembler``, then ``message()``; it
  keeps the answer it assembles, so the text block is still held while the tool
  call streams.

``x content`` divides the peak by the content of the whole answer, ``x block``
by that of its largest block (issue 14's bound: at most 2.5x the largest open
block plus a constant).
"""

from __future__ import annotations

import argparse
import gc
import json
import multiprocessing
import resource
import sys
import zlib
from collections.abc import Callable, Iterable
from multiprocessing.connection import Connection
from typing import Any, Final

from _floor import read_floor
from _harness import server_process

from dsh_llm.testing import Reply, sse_event

MODEL: Final = "bench-model"
CYCLE: Final = 1_000
"""Distinct fragments, repeated: the server holds one cycle, not the stream."""
EVENTS_PER_CHUNK: Final = 16
WARM_UP_EVENTS: Final = 2_000
CLIENTS: Final = ("raw floor", "adapter", "runtime", "validator", "assembler")


def _payload(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1767225600,
        "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _text(i: int) -> str:
    return f" token{i % CYCLE:03d}"


def _argument(i: int) -> str:
    return f"arg{i % CYCLE:03d},"


def _grouped(events: list[bytes]) -> list[bytes]:
    return [
        b"".join(events[i : i + EVENTS_PER_CHUNK])
        for i in range(0, len(events), EVENTS_PER_CHUNK)
    ]


def _body(count: int) -> tuple[bytes, ...]:
    """The stream of ``count`` events; the body repeats one cycle's chunks."""
    half = count // 2
    cycle = min(CYCLE, half)
    text = _grouped([sse_event(_payload({"content": _text(i)})) for i in range(cycle)])
    call = {"index": 0, "id": "call_bench", "type": "function"}
    opening = dict(call, function={"name": "write", "arguments": ""})
    arguments = _grouped(
        [
            sse_event(
                _payload({"tool_calls": [{"index": 0, "function": {"arguments": a}}]})
            )
            for a in map(_argument, range(cycle))
        ]
    )
    repeats = half // cycle
    usage = {"prompt_tokens": 20, "completion_tokens": count, "total_tokens": count}
    end = _payload({}, "tool_calls")
    end_usage = dict(_payload({}), choices=[], usage=usage)
    return (
        sse_event(_payload({"role": "assistant", "content": ""})),
        *(text * repeats),
        sse_event(_payload({"tool_calls": [opening]})),
        *(arguments * repeats),
        sse_event(end) + sse_event(end_usage) + b"data: [DONE]\n\n",
    )


def content_sizes(count: int) -> tuple[int, int]:
    """The answer's content in UTF-8 bytes: the whole of it, its largest block."""
    half = count // 2
    cycle = min(CYCLE, half)
    repeats = half // cycle
    text = sum(len(_text(i)) for i in range(cycle)) * repeats
    arguments = sum(len(_argument(i)) for i in range(cycle)) * repeats
    return text + arguments, max(text, arguments)


# --- the server process -----------------------------------------------------------


def _replies(counts: list[int]) -> dict[str, Reply]:
    bodies = {f"/s{count}/chat/completions": _body(count) for count in counts}
    bodies["/warm/chat/completions"] = _body(WARM_UP_EVENTS)
    return {path: Reply(body=body, framing="chunked") for path, body in bodies.items()}


# --- clients (each in its own process) ----------------------------------------------


class _Check:
    """Length and CRC of the content a client saw; nothing else is kept."""

    def __init__(self) -> None:
        self.size = 0
        self.crc = 0

    def add(self, text: str) -> None:
        data = text.encode()
        self.size += len(data)
        self.crc = zlib.crc32(data, self.crc)


def _raw_floor(port: int, path: str, check: _Check) -> None:
    """Socket reads, chunk framing stripped, split on blank lines, json.loads."""

    def consume(parts: list[bytes]) -> bool:
        for part in parts:
            payload = part[6:]
            if payload == b"[DONE]":
                return True
            for choice in json.loads(payload)["choices"]:
                delta = choice["delta"]
                if delta.get("content"):
                    check.add(delta["content"])
                for call in delta.get("tool_calls") or ():
                    check.add(call["function"]["arguments"])
        return False

    read_floor(port, path, b"\n\n", consume)


def _client(name: str, port: int) -> Callable[[str, _Check], None]:
    from dsh_llm import BlockAssembler, LlmRuntime, validate_stream
    from dsh_llm.adapters.openai_compat import OpenAICompatAdapter
    from dsh_llm.protocol import (
        GenerateOptions,
        StreamChunk,
        TextDelta,
        ToolCallDelta,
        create_user_message,
    )

    if name == "raw floor":
        return lambda path, check: _raw_floor(port, path + "/chat/completions", check)

    adapters: dict[str, OpenAICompatAdapter] = {}

    def adapter_for(path: str) -> OpenAICompatAdapter:
        if path not in adapters:
            adapters[path] = OpenAICompatAdapter(
                f"http://127.0.0.1:{port}{path}", api_key="sk-bench"
            )
        return adapters[path]

    options = GenerateOptions(
        provider="bench", model=MODEL, messages=(create_user_message("hi"),)
    )

    def consume(chunks: Iterable[StreamChunk], check: _Check) -> None:
        for chunk in chunks:
            if type(chunk) is TextDelta:
                check.add(chunk.text)
            elif type(chunk) is ToolCallDelta:
                check.add(chunk.arguments_delta)

    def run(path: str, check: _Check) -> None:
        adapter = adapter_for(path)
        if name == "adapter":
            consume(adapter.stream(options), check)
        elif name in ("runtime", "validator"):
            runtime = LlmRuntime()
            runtime.register_adapter(["bench"], adapter)
            stream = runtime.stream(options)
            consume(validate_stream(stream) if name == "validator" else stream, check)
        elif name == "assembler":
            assembler = BlockAssembler()
            for chunk in adapter.stream(options):
                assembler.push(chunk)
            message = assembler.message()
            check.add(message.text)
            for call in message.tool_calls:
                check.add(call.arguments)
        else:
            raise SystemExit(f"unknown client {name!r}")

    return run


def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _reset_peak() -> bool:
    """Reset the kernel's peak-RSS mark to the current RSS (Linux 4.0+)."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as clear:
            clear.write("5")
    except OSError:
        return False
    return True


def _measure(pipe: Connection, name: str, port: int, count: int) -> None:
    run = _client(name, port)
    run("/warm", _Check())
    gc.collect()
    exact = _reset_peak()
    before = _status_kib("VmRSS") if exact else None
    if before is None:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    check = _Check()
    run(f"/s{count}", check)
    peak = _status_kib("VmHWM") if exact else None
    if peak is None:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    pipe.send((max(peak - before, 0) * 1024, check.size, check.crc, exact))


def measure(name: str, port: int, count: int) -> tuple[int, int, int, bool]:
    """Peak RSS over one stream of ``count`` events in a fresh process, with the
    content size and CRC the client saw, and whether the peak mark was reset."""
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    process = context.Process(target=_measure, args=(child, name, port, count))
    process.start()
    result: tuple[int, int, int, bool] = parent.recv()
    process.join(30)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--events", type=int, nargs="+", default=[10_000, 100_000, 1_000_000]
    )
    parser.add_argument("--clients", nargs="+", default=list(CLIENTS), choices=CLIENTS)
    args = parser.parse_args(argv)

    mib = 1024 * 1024
    print(f"Python {sys.version.split()[0]}; peak RSS over one stream, fresh process")
    print()
    print(
        f"{'events':>9}  {'client':<10} {'content MiB':>11} {'peak MiB':>9} "
        f"{'x content':>9} {'x block':>8}"
    )
    with server_process(_replies, args.events, spawn=True) as port:
        for count in args.events:
            total, block = content_sizes(count)
            crcs = set()
            for name in args.clients:
                peak, size, crc, exact = measure(name, port, count)
                if size != total:
                    raise SystemExit(f"{name} saw {size} bytes, expected {total}")
                crcs.add(crc)
                mark = "" if exact else " (ru_maxrss)"
                print(
                    f"{count:>9,}  {name:<10} {total / mib:>11.2f} {peak / mib:>9.2f} "
                    f"{peak / total:>9.2f} {peak / block:>8.2f}{mark}"
                )
            if len(crcs) != 1:
                raise SystemExit("the clients saw different content")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
