"""Benchmark of ``dsh_llm.batch.run_jsonl`` against its floor: a plain
``ThreadPoolExecutor`` loop over the bare adapter at the same concurrency.

A ``LoopbackServer`` in a child process (so its threads do not compete for this
process's GIL) answers every request with the same short chat-completions stream
(one text delta, ``stop``, usage), after ``latency`` ms (0 and 50 by default).
The same ``OpenAICompatAdapter`` serves every variant, at each concurrency
(1, 8 and 32 by default):

- ``floor``: ``pool.map`` of ``collect(adapter.stream(options))`` over the
  prompts, ``concurrency`` threads, nothing written (the README's recipe);
- ``runtime``: the same loop through ``call_with_retry(runtime, options)``, the
  path every batch request takes (routes, retry policy), nothing read or
  written: what is left between it and ``run_jsonl`` is the batch's own cost;
- ``run_jsonl``: ``run_jsonl`` at the same concurrency from a requests file into
  a fresh results file, every row on disk (``fsync``) before it is counted done
  (the default);
- ``no fsync``: the same with ``fsync=False``.

The variants run in interleaved rounds (a load change on the machine hits each
alike) and the best wall time and the best CPU time of each are kept. The table
gives requests per second and ``x floor``, the variant's throughput over the
floor's (1.00 is as fast as the bare loop; the target is at least 0.90 for
``run_jsonl``), then this process's CPU time per request and ``cpu x floor``,
the floor's CPU time over the variant's (what a loaded machine disturbs least).

With latency the request count is cut to ``concurrency * 40`` at most, so a
round stays a few seconds long.

Usage::

    python benchmarks/bench_batch.py [--requests 2000] [--repeat 3]
        [--concurrency 1 8 32] [--latency 0 50]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from dsh_llm import GenerateOptions
from dsh_llm import LlmRuntime
from dsh_llm import collect
from dsh_llm import create_user_message
from dsh_llm.adapters.openai_compat import OpenAICompatAdapter
from dsh_llm.batch import run_jsonl
from dsh_llm.call import call_with_retry
from dsh_llm.serde import compact_json
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import RecordedRequest
from dsh_llm.testing import Reply
from dsh_llm.testing import sse_events

ROUTE = "bench"
MODEL = "echo-1"
TARGET = 0.9
"""The least ``x floor`` the batch runner should reach."""


def _reply(latency_ms: float) -> Reply:
    def event(delta: dict[str, object], finish: str | None = None) -> dict[str, object]:
        return {
            "id": "c1",
            "object": "chat.completion.chunk",
            "model": MODEL,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    usage = {
        "id": "c1",
        "object": "chat.completion.chunk",
        "model": MODEL,
        "choices": [],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
    }
    return Reply(
        body=sse_events(
            [event({"role": "assistant", "content": "ok"}), event({}, "stop"), usage]
        ),
        header_delay=latency_ms / 1000,
    )


def serve(latency_ms: float) -> None:
    """Child process: serve the fixed reply until stdin closes."""
    reply = _reply(latency_ms)

    def handler(_: RecordedRequest) -> Reply:
        return reply

    with LoopbackServer(handler=handler) as server:
        print(server.port, flush=True)
        sys.stdin.read()


class _Server:
    """The child process serving replies after ``latency_ms``."""

    def __init__(self, latency_ms: float) -> None:
        self.child = subprocess.Popen(
            [sys.executable, __file__, "--serve", str(latency_ms)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.child.stdout is not None
        self.url = f"http://127.0.0.1:{int(self.child.stdout.readline())}/v1"

    def close(self) -> None:
        assert self.child.stdin is not None
        self.child.stdin.close()
        self.child.wait(10)


def _variants(
    adapter: OpenAICompatAdapter, work: Path, count: int, concurrency: int
) -> list[tuple[str, Callable[[], int]]]:
    runtime = LlmRuntime()
    runtime.register_adapter([ROUTE], adapter)
    prompts = [f"prompt {n}" for n in range(count)]
    requests = work / f"requests-{count}.jsonl"
    with requests.open("w", encoding="utf-8") as out:
        for n, prompt in enumerate(prompts):
            row = {"id": n, "provider": ROUTE, "model": MODEL, "prompt": prompt}
            out.write(compact_json(row) + "\n")

    def answer(prompt: str) -> bool:
        options = GenerateOptions(
            provider=ROUTE, model=MODEL, messages=(create_user_message(prompt),)
        )
        return collect(adapter.stream(options)).text == "ok"

    def floor() -> int:
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            return sum(pool.map(answer, prompts))

    def through_runtime(prompt: str) -> bool:
        options = GenerateOptions(
            provider=ROUTE, model=MODEL, messages=(create_user_message(prompt),)
        )
        return call_with_retry(runtime, options).text == "ok"

    def runtime_loop() -> int:
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            return sum(pool.map(through_runtime, prompts))

    runs = [0]

    def batch(fsync: bool) -> Callable[[], int]:
        def run() -> int:
            runs[0] += 1
            results = work / f"results-{runs[0]}.jsonl"
            summary = run_jsonl(
                requests,
                results,
                runtime=runtime,
                concurrency=concurrency,
                fsync=fsync,
            )
            results.unlink()
            return summary.succeeded

        return run

    return [
        ("floor", floor),
        ("runtime", runtime_loop),
        ("run_jsonl", batch(True)),
        ("no fsync", batch(False)),
    ]


def _best(
    variants: list[tuple[str, Callable[[], int]]], count: int, repeat: int
) -> dict[str, tuple[float, float]]:
    """The best wall time and the best CPU time (this process) of each variant."""
    inf = float("inf")
    best = {name: (inf, inf) for name, _ in variants}
    for _ in range(repeat):
        for name, run in variants:
            started, cpu = time.perf_counter(), time.process_time()
            done = run()
            wall, cpu = time.perf_counter() - started, time.process_time() - cpu
            if done != count:
                raise SystemExit(f"{name}: {done} of {count} requests succeeded")
            best_wall, best_cpu = best[name]
            best[name] = (min(best_wall, wall), min(best_cpu, cpu))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--latency", type=float, nargs="+", default=[0.0, 50.0])
    parser.add_argument("--serve", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        serve(args.serve)
        return
    work = Path(tempfile.mkdtemp(prefix="bench-batch-"))
    version = sys.version.split()[0]
    print(f"Python {version}, best of {args.repeat} interleaved rounds, server in a")
    print(f"child process; target: run_jsonl >= {TARGET:.2f}x floor")
    print()
    header = (
        f"{'latency':>7} {'conc':>4} {'requests':>8} {'variant':<10} "
        f"{'wall s':>7} {'req/s':>7} {'x floor':>8} {'cpu us/req':>11} "
        f"{'cpu x floor':>11}"
    )
    print(header)
    print("-" * len(header))
    for latency in args.latency:
        server = _Server(latency)
        try:
            for concurrency in args.concurrency:
                count = args.requests
                if latency > 0:
                    count = min(count, concurrency * 40)
                adapter = OpenAICompatAdapter(
                    server.url, models=[MODEL], pool_maxsize=max(concurrency, 10)
                )
                try:
                    variants = _variants(adapter, work, count, concurrency)
                    # Warm the connection pool and the imports first.
                    variants[0][1]()
                    best = _best(variants, count, args.repeat)
                finally:
                    adapter.close()
                floor_wall, floor_cpu = best["floor"]
                for name, (wall, cpu) in best.items():
                    print(
                        f"{latency:>5.0f}ms {concurrency:>4} {count:>8} {name:<10} "
                        f"{wall:>7.2f} {count / wall:>7.0f} {floor_wall / wall:>8.2f} "
                        f"{cpu / count * 1e6:>11.0f} {floor_cpu / cpu:>11.2f}"
                    )
        finally:
            server.close()


if __name__ == "__main__":
    main()
