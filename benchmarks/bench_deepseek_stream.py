"""Benchmark: DeepSeek streaming cost per event and time to each delta.

Run ``python benchmarks/bench_deepseek_stream.py`` (options: ``--events N``,
``--repeat R``). It prints two tables and is not a test.

1. **Throughput.** A 100,000-event DeepSeek-shaped response (one text delta per
   event, about 270 bytes each, usage, ``[DONE]``) is served by
   ``dsh_llm.testing.LoopbackServer`` running in a child process (so the server
   never competes with the client for the GIL), once chunked with one HTTP
   chunk per event (what providers send) and once close-delimited (HTTP/1.0).
   Each client streams it whole and counts deltas:

   - ``raw floor``: a plain socket, ``recv``, chunk framing stripped, split on
     blank lines, ``json.loads`` of each payload; nothing else.
   - ``DeepSeekAdapter``: ``adapter.stream(options)`` to the last chunk.
   - ``LlmRuntime.stream``: the same adapter registered in an ``LlmRuntime``,
     streamed through ``runtime.stream(options)``; ``cpu x adapter`` is the
     runtime's own overhead over the bare adapter.
   - ``openai SDK``: ``OpenAI(base_url=...).chat.completions.create(stream=True)``,
     when the ``openai`` package is installed (it is not a dependency).

   Clients run in interleaved rounds; the best of ``--repeat`` rounds is kept,
   for the wall-clock time and for the client's CPU time (``time.process_time``,
   which a loaded machine disturbs far less); ``cpu x adapter`` compares CPU
   times with the bare adapter's.

2. **Latency.** The server (in-process) sends the headers, then six events 20 ms
   apart, recording ``time.perf_counter()`` right before each write; the client
   records when the matching delta is yielded. The first delta and the later
   ones are reported separately (median and worst over ``--repeat`` streams).

Targets (issue 5): at most 2x the raw floor per event, faster per event than the
openai SDK, under 5 ms to the first delta on both body kinds; (issue 14) at most
1.1x the bare adapter through ``LlmRuntime.stream``.
"""

from __future__ import annotations

import json
import statistics
import time
from typing import Any

from _floor import read_floor
from _harness import FLOOR
from _harness import KINDS
from _harness import Client
from _harness import Clients
from _harness import Row
from _harness import arguments
from _harness import both_kinds
from _harness import print_throughput
from _harness import text_deltas
from _harness import throughput
from _harness import version_line

from dsh_llm import LlmRuntime
from dsh_llm.adapters.deepseek import PROVIDER_ROUTE
from dsh_llm.adapters.deepseek import DeepSeekAdapter
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import TextDelta
from dsh_llm.protocol import create_user_message
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Mark
from dsh_llm.testing import Pause
from dsh_llm.testing import Reply
from dsh_llm.testing import sse_event

MODEL = "deepseek-v4-flash"
ADAPTER = "DeepSeekAdapter"


def _payload(
    content: str | None, finish: str | None = None, usage: Any = None
) -> dict[str, Any]:
    return {
        "id": "chatcmpl-5f1d0c",
        "object": "chat.completion.chunk",
        "created": 1767225600,
        "model": MODEL,
        "system_fingerprint": "fp_8802369eaa_prod0623",
        "choices": [
            {
                "index": 0,
                "delta": {"content": content, "reasoning_content": None},
                "logprobs": None,
                "finish_reason": finish,
            }
        ],
        "usage": usage,
    }


def _events(count: int) -> list[bytes]:
    first = _payload(None)
    first["choices"][0]["delta"]["role"] = "assistant"
    events = [sse_event(first)]
    events += [sse_event(_payload(f" tok{i % 1000}")) for i in range(count)]
    usage = {
        "prompt_tokens": 20,
        "completion_tokens": count,
        "total_tokens": 20 + count,
    }
    events.append(sse_event(_payload("", "stop", usage)))
    events.append(b"data: [DONE]\n\n")
    return events


# --- the server process -----------------------------------------------------------


def _replies(count: int) -> dict[str, Reply]:
    return both_kinds("/chat/completions", _events(count))


# --- clients ----------------------------------------------------------------------


def _raw_floor(port: int, path: str) -> int:
    """Socket reads, chunk framing stripped, split on blank lines, json.loads."""
    deltas = 0

    def consume(parts: list[bytes]) -> bool:
        nonlocal deltas
        for part in parts:
            payload = part[6:]
            if payload == b"[DONE]":
                return True
            content = json.loads(payload)["choices"][0]["delta"]["content"]
            if content:
                deltas += 1
        return False

    read_floor(port, path, b"\n\n", consume)
    return deltas


def _options() -> GenerateOptions:
    return GenerateOptions(
        provider=PROVIDER_ROUTE, model=MODEL, messages=(create_user_message("hi"),)
    )


def _adapter_client(base: str) -> Client:
    return text_deltas(DeepSeekAdapter("sk-bench", base_url=base).stream, _options())


def _runtime_client(base: str) -> Client:
    runtime = LlmRuntime()
    runtime.register_adapter(
        [PROVIDER_ROUTE], DeepSeekAdapter("sk-bench", base_url=base)
    )
    return text_deltas(runtime.stream, _options())


def _openai_client(base: str) -> Client | None:
    try:
        from openai import OpenAI
    except ImportError:
        return None
    client = OpenAI(base_url=base, api_key="sk-bench", max_retries=0)

    def run() -> int:
        count = 0
        stream = client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hi"}], stream=True
        )
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                count += 1
        return count

    return run


def _clients(port: int, kind: str) -> Clients:
    base = f"http://127.0.0.1:{port}/{kind}"
    return [
        (FLOOR, lambda: _raw_floor(port, f"/{kind}/chat/completions")),
        (ADAPTER, _adapter_client(base)),
        ("LlmRuntime.stream", _runtime_client(base)),
        ("openai SDK", _openai_client(base)),
    ]


def latency(repeat: int) -> list[tuple[str, list[float], list[float]]]:
    gap = 0.02
    body: list[Any] = [Pause(seconds=gap)]
    for i in range(6):
        body += [Mark(name=f"e{i}"), sse_event(_payload(f"t{i}")), Pause(seconds=gap)]
    body += [sse_event(_payload("", "stop")), b"data: [DONE]\n\n"]
    rows: list[tuple[str, list[float], list[float]]] = []
    for framing in KINDS:
        first: list[float] = []
        later: list[float] = []
        with LoopbackServer() as server:
            server.handler = lambda _request, framing=framing: Reply(
                body=tuple(body), framing=framing
            )
            adapter = DeepSeekAdapter("sk-bench", base_url=server.url)
            options = _options()
            for _ in range(repeat):
                seen: list[float] = []
                for chunk in adapter.stream(options):
                    if isinstance(chunk, TextDelta):
                        seen.append(time.perf_counter())
                marks = [server.marks[f"e{i}"] for i in range(6)]
                delays = [(t - m) * 1000 for t, m in zip(seen, marks, strict=True)]
                first.append(delays[0])
                later.extend(delays[1:])
            adapter.close()
        rows.append((framing, first, later))
    return rows


def main(argv: list[str] | None = None) -> int:
    args = arguments(__doc__.splitlines()[0], 100_000, 5, argv)
    version_line(args.events, args.repeat)
    rows = throughput(args.events, args.repeat, _replies, _clients)
    events = args.events
    bare = {row.group: row.timing.cpu for row in rows if row.client == ADAPTER}

    def cpu_cells(row: Row, floor: Row) -> str:
        cpu = row.timing.cpu
        over = "" if row.client == FLOOR else f"{cpu / bare[row.group]:.2f}"
        return f" {cpu / events * 1e6:>7.2f} {cpu / floor.timing.cpu:>11.2f} {over:>13}"

    extra = f" {'cpu µs':>7} {'cpu x floor':>11} {'cpu x adapter':>13}"
    print_throughput(events, rows, [("body", 9)], extra=(extra, cpu_cells))
    print()
    print(f"{'body':<9} {'delta':<7} {'median ms':>10} {'worst ms':>9}")
    for framing, first, later in latency(max(args.repeat * 4, 10)):
        for label, values in (("first", first), ("later", later)):
            median = statistics.median(values)
            print(f"{framing:<9} {label:<7} {median:>10.3f} {max(values):>9.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
