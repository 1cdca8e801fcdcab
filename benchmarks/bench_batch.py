"""Benchmark of ``dsh_llm.batch.run_jsonl``: requests per second and the library's
overhead per request, next to a bare ``ThreadPoolExecutor`` loop.

A ``LoopbackServer`` in a child process (so its threads do not compete for this
process's GIL) answers every request with the same short chat-completions stream
(one text delta, ``stop``, usage). The same ``OpenAICompatAdapter`` (a pool of 64
connections) serves every variant:

- ``bare ThreadPoolExecutor``: the README's recipe, ``pool.map`` of
  ``collect(adapter.stream(options))`` over the prompts, 64 threads, nothing
  written;
- ``bare call_with_retry``: the same loop through ``LlmRuntime`` and
  ``call_with_retry`` (what ``run_jsonl`` sends each request through), to show
  which part of the overhead is the runtime's and which the batch's own;
- ``run_jsonl (fsync)``: ``run_jsonl`` at concurrency 64 from a requests file
  into a results file, each row forced to disk (the default);
- ``run_jsonl (no fsync)``: the same with ``fsync=False``.

The table gives wall time, requests per second, and the overhead per request
against the bare loop: wall time (what a run takes longer, per request) and this
process's CPU time (what the library spends per request: parsing the line,
``call_with_retry``, the limiter, the row's JSON, the write).

Usage::

    python benchmarks/bench_batch.py [--requests 10000] [--concurrency 64]
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

from dsh_llm import GenerateOptions, LlmRuntime, collect, create_user_message
from dsh_llm.adapters.openai_compat import OpenAICompatAdapter
from dsh_llm.batch import run_jsonl
from dsh_llm.call import call_with_retry
from dsh_llm.serde import compact_json
from dsh_llm.testing import LoopbackServer, RecordedRequest, Reply, sse_events

ROUTE = "bench"
MODEL = "echo-1"


def _reply() -> Reply:
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
        )
    )


def serve() -> None:
    """Child process: serve the fixed reply until stdin closes."""
    reply = _reply()

    def handler(_: RecordedRequest) -> Reply:
        return reply

    with LoopbackServer(handler=handler) as server:
        print(server.port, flush=True)
        sys.stdin.read()


def _measure(run: Callable[[], int]) -> tuple[float, float, int]:
    wall, cpu = time.perf_counter(), time.process_time()
    done = run()
    return time.perf_counter() - wall, time.process_time() - cpu, done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve()
        return
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        port = int(child.stdout.readline())
        _bench(f"http://127.0.0.1:{port}/v1", args.requests, args.concurrency)
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(10)


def _bench(url: str, count: int, concurrency: int) -> None:
    adapter = OpenAICompatAdapter(url, models=[MODEL], pool_maxsize=concurrency)
    runtime = LlmRuntime()
    runtime.register_adapter([ROUTE], adapter)
    prompts = [f"prompt {n}" for n in range(count)]
    work = Path(tempfile.mkdtemp(prefix="bench-batch-"))
    requests = work / "requests.jsonl"
    with requests.open("w", encoding="utf-8") as out:
        for n, prompt in enumerate(prompts):
            row = {"id": n, "provider": ROUTE, "model": MODEL, "prompt": prompt}
            out.write(compact_json(row) + "\n")

    def answer(prompt: str) -> str:
        options = GenerateOptions(
            provider=ROUTE, model=MODEL, messages=(create_user_message(prompt),)
        )
        return collect(adapter.stream(options)).text

    def through_runtime(prompt: str) -> str:
        options = GenerateOptions(
            provider=ROUTE, model=MODEL, messages=(create_user_message(prompt),)
        )
        return call_with_retry(runtime, options).text

    def bare() -> int:
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            return sum(text == "ok" for text in pool.map(answer, prompts))

    def bare_runtime() -> int:
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            return sum(text == "ok" for text in pool.map(through_runtime, prompts))

    def batch(fsync: bool) -> Callable[[], int]:
        def run() -> int:
            results = work / f"results-{fsync}.jsonl"
            summary = run_jsonl(
                requests,
                results,
                runtime=runtime,
                concurrency=concurrency,
                fsync=fsync,
            )
            return summary.succeeded

        return run

    # Warm the connection pool and the imports before timing anything.
    for prompt in prompts[: concurrency * 2]:
        answer(prompt)
    rows: list[tuple[str, float, float, int]] = []
    for name, run in (
        ("bare ThreadPoolExecutor", bare),
        ("bare call_with_retry", bare_runtime),
        ("run_jsonl (fsync)", batch(True)),
        ("run_jsonl (no fsync)", batch(False)),
    ):
        wall, cpu, done = _measure(run)
        rows.append((name, wall, cpu, done))
    adapter.close()

    _, bare_wall, bare_cpu, _ = rows[0]
    print(f"{count} requests, concurrency {concurrency}, server in a child process")
    header = (
        f"{'variant':<24} {'ok':>6} {'wall s':>7} {'req/s':>7} "
        f"{'+wall us/req':>13} {'cpu us/req':>11} {'+cpu us/req':>12}"
    )
    print(header)
    print("-" * len(header))
    for name, wall, cpu, done in rows:
        extra_wall = (wall - bare_wall) / count * 1e6
        extra_cpu = (cpu - bare_cpu) / count * 1e6
        print(
            f"{name:<24} {done:>6} {wall:>7.2f} {count / wall:>7.0f} "
            f"{extra_wall:>13.0f} {cpu / count * 1e6:>11.0f} {extra_cpu:>12.0f}"
        )


if __name__ == "__main__":
    main()
