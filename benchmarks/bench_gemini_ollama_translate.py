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

import json
from functools import partial

from _harness import arguments
from _harness import best_of
from _wires import cut
from _wires import gemini_events
from _wires import ollama_events

from dsh_llm.adapters.gemini.translate import GeminiTranslator
from dsh_llm.adapters.ollama.translate import OllamaTranslator
from dsh_llm.transport.ndjson import NdjsonDecoder
from dsh_llm.transport.sse import SseDecoder

GEMINI = "gemini-3-flash-preview"
OLLAMA = "qwen3"
READ = 4096


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


def main(argv: list[str] | None = None) -> None:
    args = arguments(__doc__.splitlines()[0], 50_000, 5, argv)
    rows = []
    for wire, events, raw, translated in (
        ("Gemini SSE", gemini_events(args.events, GEMINI), _raw_sse, _translated_sse),
        (
            "Ollama NDJSON",
            ollama_events(args.events, OLLAMA),
            _raw_ndjson,
            _translated_ndjson,
        ),
    ):
        reads = cut(b"".join(events), READ)
        best = best_of(
            [("raw", partial(raw, reads)), ("ours", partial(translated, reads))],
            args.events,
            args.repeat,
        )
        rows.append((wire, best["raw"].wall, best["ours"].wall))
    print(f"{args.events} events, {READ}-byte reads, best of {args.repeat}")
    print(f"{'wire':<15} {'raw floor us/ev':>16} {'translator us/ev':>17} {'ratio':>6}")
    for wire, floor, ours in rows:
        per = 1e6 / args.events
        print(
            f"{wire:<15} {floor * per:>16.2f} {ours * per:>17.2f} {ours / floor:>6.2f}"
        )


if __name__ == "__main__":
    main()
