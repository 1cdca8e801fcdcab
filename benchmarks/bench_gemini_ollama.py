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

import argparse
import json
import multiprocessing
import socket
import sys
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from dsh_llm.adapters.gemini import GeminiAdapter
from dsh_llm.adapters.ollama import OllamaAdapter
from dsh_llm.protocol import GenerateOptions, TextDelta, create_user_message
from dsh_llm.testing import LoopbackServer, Reply

GEMINI_MODEL = "gemini-3-flash-preview"
OLLAMA_MODEL = "qwen3:8b"


def _gemini_events(count: int) -> list[bytes]:
    events = []
    for i in range(count):
        candidate: dict[str, Any] = {
            "content": {"parts": [{"text": f" tok{i % 1000}"}], "role": "model"},
            "index": 0,
        }
        if i == count - 1:
            candidate["finishReason"] = "STOP"
        payload = {
            "candidates": [candidate],
            "usageMetadata": {
                "promptTokenCount": 20,
                "candidatesTokenCount": i + 1,
                "totalTokenCount": 21 + i,
            },
            "modelVersion": GEMINI_MODEL,
            "responseId": "Zb1taZ7nLNmOz7IPk6f9-Ag",
        }
        data = json.dumps(payload, separators=(",", ": ")).encode()
        events.append(b"data: " + data + b"\r\n\r\n")
    return events


def _ollama_events(count: int) -> list[bytes]:
    lines = [
        json.dumps(
            {
                "model": OLLAMA_MODEL,
                "created_at": "2026-01-01T10:00:00.000000Z",
                "message": {"role": "assistant", "content": f" tok{i % 1000}"},
                "done": False,
            },
            separators=(",", ":"),
        ).encode()
        + b"\n"
        for i in range(count)
    ]
    done = {
        "model": OLLAMA_MODEL,
        "created_at": "2026-01-01T10:00:01Z",
        "message": {"role": "assistant", "content": ""},
        "done": True,
        "done_reason": "stop",
        "prompt_eval_count": 20,
        "eval_count": count,
    }
    lines.append(json.dumps(done, separators=(",", ":")).encode() + b"\n")
    return lines


# --- the server process -----------------------------------------------------------


def _serve(pipe: Connection, count: int) -> None:
    gemini = tuple(_gemini_events(count))
    ollama = tuple(_ollama_events(count))
    replies = {}
    for framing in ("chunked", "close"):
        path = f"/{framing}/v1beta/models/{GEMINI_MODEL}:streamGenerateContent?alt=sse"
        replies[path] = Reply(body=gemini, framing=framing)
        replies[f"/{framing}/api/chat"] = Reply(body=ollama, framing=framing)
    with LoopbackServer(handler=lambda request: replies[request.path]) as server:
        pipe.send(server.port)
        pipe.recv()


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
    with socket.create_connection(("127.0.0.1", port)) as sock:
        request = (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n"
            "Connection: close\r\n\r\n{}"
        )
        sock.sendall(request.encode())
        data = b""
        while b"\r\n\r\n" not in data:
            data += sock.recv(65536)
        head, _, rest = data.partition(b"\r\n\r\n")
        chunked = b"chunked" in head.lower()
        raw = bytearray(rest)
        body = b""
        done = False
        while True:
            if chunked:
                out = []
                pos = 0
                while True:
                    line_end = raw.find(b"\r\n", pos)
                    if line_end < 0:
                        break
                    size = int(raw[pos:line_end], 16)
                    if size == 0:
                        # The last chunk: the body is complete.
                        done = True
                        break
                    if len(raw) < line_end + 2 + size + 2:
                        break
                    out.append(bytes(raw[line_end + 2 : line_end + 2 + size]))
                    pos = line_end + 4 + size
                del raw[:pos]
                body += b"".join(out)
            else:
                body += bytes(raw)
                raw.clear()
            parts = body.split(separator)
            body = parts.pop()
            for part in parts:
                if part and text_of(part):
                    deltas += 1
            if done:
                break
            piece = sock.recv(65536)
            if not piece:
                break
            raw += piece
    return deltas


def _client(adapter: GeminiAdapter | OllamaAdapter, options: GenerateOptions) -> Any:
    def run() -> int:
        return sum(
            1 for chunk in adapter.stream(options) if isinstance(chunk, TextDelta)
        )

    return run


def _timed(run: Callable[[], int], expected: int) -> float:
    start = time.perf_counter()
    count = run()
    elapsed = time.perf_counter() - start
    if count != expected:
        raise SystemExit(f"client saw {count} deltas, expected {expected}")
    return elapsed


def throughput(count: int, repeat: int) -> list[tuple[str, str, str, float]]:
    parent, child = multiprocessing.Pipe()
    process = multiprocessing.Process(target=_serve, args=(child, count), daemon=True)
    process.start()
    port = parent.recv()
    rows = []
    messages = (create_user_message("hi"),)
    try:
        for framing in ("chunked", "close"):
            base = f"http://127.0.0.1:{port}/{framing}"
            gemini = GeminiAdapter("bench-key", base_url=base)
            ollama = OllamaAdapter(base)
            gemini_path = (
                f"/{framing}/v1beta/models/{GEMINI_MODEL}:streamGenerateContent?alt=sse"
            )
            wires: list[tuple[str, list[tuple[str, Callable[[], int]]]]] = [
                (
                    "gemini",
                    [
                        (
                            "raw floor",
                            lambda p=gemini_path: _raw_floor(
                                port, p, b"\r\n\r\n", _gemini_text
                            ),
                        ),
                        (
                            "GeminiAdapter",
                            _client(
                                gemini,
                                GenerateOptions(
                                    provider="gemini",
                                    model=GEMINI_MODEL,
                                    messages=messages,
                                ),
                            ),
                        ),
                    ],
                ),
                (
                    "ollama",
                    [
                        (
                            "raw floor",
                            lambda f=framing: _raw_floor(
                                port, f"/{f}/api/chat", b"\n", _ollama_text
                            ),
                        ),
                        (
                            "OllamaAdapter",
                            _client(
                                ollama,
                                GenerateOptions(
                                    provider="ollama",
                                    model=OLLAMA_MODEL,
                                    messages=messages,
                                ),
                            ),
                        ),
                    ],
                ),
            ]
            for wire, clients in wires:
                best = dict.fromkeys((name for name, _ in clients), float("inf"))
                # Interleaved rounds: a load change hits every client alike.
                for _ in range(repeat):
                    for name, client in clients:
                        best[name] = min(best[name], _timed(client, count))
                rows.extend((wire, framing, name, best[name]) for name, _ in clients)
            gemini.close()
            ollama.close()
    finally:
        parent.send("stop")
        process.join(10)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    version = sys.version.split()[0]
    print(f"Python {version}, {args.events:,} events, best of {args.repeat} rounds")
    print()
    rows = throughput(args.events, args.repeat)
    floors = {
        (wire, framing): seconds
        for wire, framing, name, seconds in rows
        if name == "raw floor"
    }
    print(
        f"{'wire':<7} {'body':<8} {'client':<14} {'events/s':>10} {'µs/event':>9} "
        f"{'x floor':>8}"
    )
    for wire, framing, name, seconds in rows:
        per_event = seconds / args.events * 1e6
        ratio = seconds / floors[(wire, framing)]
        rate = args.events / seconds
        print(
            f"{wire:<7} {framing:<8} {name:<14} {rate:>10,.0f} {per_event:>9.2f} "
            f"{ratio:>8.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
