"""Benchmark: per-event cost of GeminiAdapter and OllamaAdapter over HTTP.

Run ``python benchmarks/bench_gemini_ollama.py`` (options: ``--events N``,
``--repeat R``). It prints one table and is not a test.

A Gemini-shaped SSE response (one text part per event, running
``usageMetadata`` on each, CRLF framing, a final ``STOP``) and an Ollama-shaped
NDJSON response (one content increment per line, a final ``done: true`` with
counts) are served by ``dsh_llm.testing.LoopbackServer`` in a child process (so
the server never competes with the client for the GIL), chunked with one HTTP
chunk per event and close-delimited. For each wire and framing:

- ``raw floor``: a plain socket, ``recv``, chunk framing stripped, split on the
  wire's separator, ``json.loads`` of each payload and its text read; nothing
  else.
- ``GeminiAdapter`` / ``OllamaAdapter``: ``adapter.stream(options)`` to the
  last chunk (request built, read loop, decoder, translator, strict chunks).

Clients run in interleaved rounds; the best of ``--repeat`` is kept. Target
(issue 16): at most 2x the raw floor per event.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial

from _floor import read_floor
from _harness import FLOOR
from _harness import KINDS
from _harness import Clients
from _harness import Row
from _harness import arguments
from _harness import best_of
from _harness import print_throughput
from _harness import server_process
from _harness import text_deltas
from _harness import version_line
from _wires import gemini_events
from _wires import ollama_events

from dsh_llm.adapters.gemini import GeminiAdapter
from dsh_llm.adapters.ollama import OllamaAdapter
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import create_user_message
from dsh_llm.testing import Reply

GEMINI_MODEL = "gemini-3-flash-preview"
OLLAMA_MODEL = "qwen3:8b"
SSE = b"\r\n\r\n"
"""Gemini's event separator (it frames its SSE with CRLF)."""


# --- the server process -----------------------------------------------------------


def _gemini_path(framing: str) -> str:
    return f"/{framing}/v1beta/models/{GEMINI_MODEL}:streamGenerateContent?alt=sse"


def _replies(count: int) -> dict[str, Reply]:
    gemini = tuple(gemini_events(count, GEMINI_MODEL))
    ollama = tuple(ollama_events(count, OLLAMA_MODEL))
    replies = {}
    for framing in KINDS:
        replies[_gemini_path(framing)] = Reply(body=gemini, framing=framing)
        replies[f"/{framing}/api/chat"] = Reply(body=ollama, framing=framing)
    return replies


# --- clients ----------------------------------------------------------------------


def _gemini_text(payload: bytes) -> str | None:
    if not payload.startswith(b"data: "):
        return None
    parts = json.loads(payload[6:])["candidates"][0]["content"]["parts"]
    return parts[0].get("text") if parts else None


def _ollama_text(payload: bytes) -> str | None:
    return json.loads(payload)["message"]["content"] or None


def _raw_floor(
    port: int, path: str, separator: bytes, text_of: Callable[[bytes], str | None]
) -> int:
    """Socket reads, chunk framing stripped, split on ``separator``, json.loads."""
    deltas = 0

    def consume(parts: list[bytes]) -> bool:
        nonlocal deltas
        for part in parts:
            if part and text_of(part):
                deltas += 1
        # Neither wire has an end marker of its own: the body's end ends it.
        return False

    read_floor(port, path, separator, consume)
    return deltas


def throughput(count: int, repeat: int) -> list[Row]:
    """One row per framing, wire and client, grouped by wire and framing."""
    rows = []
    messages = (create_user_message("hi"),)
    with server_process(_replies, count) as port:
        for framing in KINDS:
            base = f"http://127.0.0.1:{port}/{framing}"
            gemini = GeminiAdapter("bench-key", base_url=base)
            ollama = OllamaAdapter(base)
            gemini_options = GenerateOptions(
                provider="gemini", model=GEMINI_MODEL, messages=messages
            )
            ollama_options = GenerateOptions(
                provider="ollama", model=OLLAMA_MODEL, messages=messages
            )
            gemini_path = _gemini_path(framing)
            ollama_path = f"/{framing}/api/chat"
            wires: dict[str, Clients] = {
                "gemini": [
                    (FLOOR, partial(_raw_floor, port, gemini_path, SSE, _gemini_text)),
                    ("GeminiAdapter", text_deltas(gemini.stream, gemini_options)),
                ],
                "ollama": [
                    (
                        FLOOR,
                        partial(_raw_floor, port, ollama_path, b"\n", _ollama_text),
                    ),
                    ("OllamaAdapter", text_deltas(ollama.stream, ollama_options)),
                ],
            }
            for wire, clients in wires.items():
                best = best_of(clients, count, repeat)
                rows += [
                    Row((wire, framing), name, timing) for name, timing in best.items()
                ]
            gemini.close()
            ollama.close()
    return rows


def main(argv: list[str] | None = None) -> int:
    args = arguments(__doc__.splitlines()[0], 50_000, 3, argv)
    version_line(args.events, args.repeat)
    rows = throughput(args.events, args.repeat)
    print_throughput(args.events, rows, [("wire", 7), ("body", 8)])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
