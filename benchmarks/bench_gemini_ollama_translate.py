"""Benchmark: per-event cost of the Gemini and Ollama translators, in memory.

Run ``python benchmarks/bench_gemini_ollama_translate.py`` (options:
``--events N``, ``--repeat R``). It prints one table and is not a test.

A Gemini-shaped SSE body (one text part per event, running usage on each,
CRLF framing, a final ``STOP``) and an Ollama-shaped NDJSON body (one content
increment per line, a final ``done: true``) are built in memory and cut into
4 KiB reads. For each wire:

- ``raw floor``: split on the wire's separator and ``json.loads`` each payload,
  reading the text; nothing else.
- ``decoder + translator``: the transport's decoder (``SseDecoder`` /
  ``NdjsonDecoder``) feeding ``GeminiTranslator`` / ``OllamaTranslator`` to the
  finish.

The two run in alternating rounds and the best of ``--repeat`` is kept.
Target (issue 16): at most 2x the raw floor per event. The HTTP end-to-end
numbers are ``benchmarks/bench_gemini_ollama.py``'s.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

from dsh_llm.adapters._gemini.translate import GeminiTranslator
from dsh_llm.adapters._ollama.translate import OllamaTranslator
from dsh_llm.transport.ndjson import NdjsonDecoder
from dsh_llm.transport.sse import SseDecoder

READ = 4096


def _gemini_body(count: int) -> bytes:
    events = []
    for i in range(count):
        candidate = {
            "content": {"parts": [{"text": f" tok{i % 1000}"}], "role": "model"},
            "index": 0,
        }
        if i == count - 1:
            candidate["finishReason"] = "STOP"
        payload = {
            "candidates": [candidate],
            "usageMetadata": {
                "promptTokenCount": 20,
                "candidatesTokenCount": i,
                "totalTokenCount": 20 + i,
            },
            "modelVersion": "gemini-3-flash-preview",
            "responseId": "Zb1taZ7nLNmOz7IPk6f9-Ag",
        }
        events.append(
            b"data: "
            + json.dumps(payload, separators=(",", ": ")).encode()
            + b"\r\n\r\n"
        )
    return b"".join(events)


def _ollama_body(count: int) -> bytes:
    lines = [
        json.dumps(
            {
                "model": "qwen3",
                "created_at": "2026-01-01T10:00:00.000000Z",
                "message": {"role": "assistant", "content": f" tok{i % 1000}"},
                "done": False,
            },
            separators=(",", ":"),
        ).encode()
        for i in range(count)
    ]
    lines.append(
        b'{"model":"qwen3","created_at":"2026-01-01T10:00:01Z","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","prompt_eval_count":20,"eval_count":%d}'
        % count
    )
    return b"\n".join(lines) + b"\n"


def _reads(body: bytes) -> list[bytes]:
    return [body[i : i + READ] for i in range(0, len(body), READ)]


def _raw_sse(reads: list[bytes]) -> int:
    buf = b""
    seen = 0
    for data in reads:
        parts = (buf + data).split(b"\r\n\r\n")
        buf = parts.pop()
        for part in parts:
            if json.loads(part[6:])["candidates"][0]["content"]["parts"][0]["text"]:
                seen += 1
    return seen


def _translated_sse(reads: list[bytes]) -> int:
    decoder = SseDecoder(terminal_data=None, provider="Gemini")
    translator = GeminiTranslator()
    seen = 0
    for data in reads:
        for event in decoder.feed(data):
            seen += sum(1 for c in translator.feed(event) if c.type == "text-delta")
    return seen


def _raw_ndjson(reads: list[bytes]) -> int:
    buf = b""
    seen = 0
    for data in reads:
        lines = (buf + data).split(b"\n")
        buf = lines.pop()
        for line in lines:
            if json.loads(line)["message"]["content"]:
                seen += 1
    return seen


def _translated_ndjson(reads: list[bytes]) -> int:
    decoder = NdjsonDecoder(provider="Ollama")
    translator = OllamaTranslator()
    seen = 0
    for data in reads:
        for value in decoder.feed(data):
            seen += sum(1 for c in translator.feed(value) if c.type == "text-delta")
    return seen


def _once(
    run: Callable[[list[bytes]], int], reads: list[bytes], expected: int
) -> float:
    start = time.perf_counter()
    seen = run(reads)
    elapsed = time.perf_counter() - start
    if seen != expected:
        raise SystemExit(f"{run.__name__} saw {seen} deltas, expected {expected}")
    return elapsed


def _interleaved(
    raw: Callable[[list[bytes]], int],
    ours: Callable[[list[bytes]], int],
    reads: list[bytes],
    expected: int,
    repeat: int,
) -> tuple[float, float]:
    """Best times of ``raw`` and ``ours``, run in alternating rounds so a busy
    machine slows both alike."""
    best_raw = best_ours = float("inf")
    for _ in range(repeat):
        best_raw = min(best_raw, _once(raw, reads, expected))
        best_ours = min(best_ours, _once(ours, reads, expected))
    return best_raw, best_ours


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rows = []
    for wire, body, raw, translated in (
        ("Gemini SSE", _gemini_body(args.events), _raw_sse, _translated_sse),
        ("Ollama NDJSON", _ollama_body(args.events), _raw_ndjson, _translated_ndjson),
    ):
        reads = _reads(body)
        floor, ours = _interleaved(raw, translated, reads, args.events, args.repeat)
        rows.append((wire, floor, ours))
    print(f"{args.events} events, {READ}-byte reads, best of {args.repeat}")
    print(f"{'wire':<15} {'raw floor us/ev':>16} {'translator us/ev':>17} {'ratio':>6}")
    for wire, floor, ours in rows:
        per = 1e6 / args.events
        print(
            f"{wire:<15} {floor * per:>16.2f} {ours * per:>17.2f} {ours / floor:>6.2f}"
        )


if __name__ == "__main__":
    main()
