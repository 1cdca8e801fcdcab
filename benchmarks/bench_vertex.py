"""Benchmark: VertexAdapter's cost per streamed event, over HTTP, for both
publishers.

Run ``python benchmarks/bench_vertex.py`` (options: ``--events N``,
``--repeat R``). It prints one table and is not a test.

The Gemini benchmark's body (one text part per event, running
``usageMetadata``, CRLF framing, a final ``STOP``) at a Gemini model's Vertex
path, and the Anthropic benchmark's body (one text block of ``text_delta``
events, a ``ping`` every 100) at a Claude model's ``streamRawPredict`` path,
are served by ``dsh_llm.testing.LoopbackServer`` in a child process, chunked
with one HTTP chunk per event and close-delimited. For each wire and framing:

- ``raw floor``: a plain socket, ``recv``, chunk framing stripped, split on the
  wire's separator, ``json.loads`` of each ``data:`` payload and its text read;
  nothing else.
- ``VertexAdapter``: ``adapter.stream(options)`` to the last chunk (an access
  token given, so no credentials are loaded: a token is per request, not per
  event).

Clients run in interleaved rounds; the best of ``--repeat`` is kept (wall
clock, and this process's CPU time). Target (issue 28): at most 2x the raw
floor per event.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any

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
from _wires import anthropic_events
from _wires import gemini_events

from dsh_llm.adapters.vertex import PROVIDER_ROUTE
from dsh_llm.adapters.vertex import VertexAdapter
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import create_user_message
from dsh_llm.testing import Reply

GEMINI = "gemini-3-flash-preview"
CLAUDE = "claude-haiku-4-5@20251001"
ROOT = "/v1/projects/bench/locations/us-east5/publishers"
PATHS = {
    "gemini": f"{ROOT}/google/models/{GEMINI}:streamGenerateContent?alt=sse",
    "claude": f"{ROOT}/anthropic/models/{CLAUDE}:streamRawPredict",
}
SEPARATORS = {"gemini": b"\r\n\r\n", "claude": b"\n\n"}


# --- the server process -----------------------------------------------------------


def _replies(count: int) -> dict[str, Reply]:
    bodies = {
        "gemini": tuple(gemini_events(count, GEMINI)),
        "claude": tuple(anthropic_events(count, "claude-haiku-4-5-20251001")),
    }
    return {
        f"/{framing}{PATHS[wire]}": Reply(body=body, framing=framing)
        for framing in KINDS
        for wire, body in bodies.items()
    }


# --- clients ----------------------------------------------------------------------


def _gemini_text(payload: dict[str, Any]) -> bool:
    parts = payload["candidates"][0]["content"]["parts"]
    return bool(parts and parts[0].get("text"))


def _claude_text(payload: dict[str, Any]) -> bool:
    return payload["type"] == "content_block_delta" and bool(payload["delta"]["text"])


def _raw_floor(
    port: int, path: str, separator: bytes, is_text: Callable[[dict[str, Any]], bool]
) -> int:
    """Socket reads, chunk framing stripped, split on ``separator``, json.loads
    of each ``data:`` line."""
    deltas = 0

    def consume(parts: list[bytes]) -> bool:
        nonlocal deltas
        for part in parts:
            at = part.find(b"data: ")
            if at >= 0 and is_text(json.loads(part[at + 6 :])):
                deltas += 1
        # Neither floor stops early: the body's end ends it.
        return False

    read_floor(port, path, separator, consume)
    return deltas


def throughput(count: int, repeat: int) -> list[Row]:
    """One row per framing, wire and client, grouped by wire and framing."""
    rows = []
    messages = (create_user_message("hi"),)
    texts = {"gemini": _gemini_text, "claude": _claude_text}
    models = {"gemini": GEMINI, "claude": CLAUDE}
    with server_process(_replies, count) as port:
        for framing in KINDS:
            adapter = VertexAdapter(
                "ya29.bench-token",
                base_url=f"http://127.0.0.1:{port}/{framing}",
                project="bench",
                location="us-east5",
                environ={},
            )
            for wire in ("gemini", "claude"):
                options = GenerateOptions(
                    provider=PROVIDER_ROUTE, model=models[wire], messages=messages
                )
                path = f"/{framing}{PATHS[wire]}"
                clients: Clients = [
                    (
                        FLOOR,
                        partial(_raw_floor, port, path, SEPARATORS[wire], texts[wire]),
                    ),
                    ("VertexAdapter", text_deltas(adapter.stream, options)),
                ]
                best = best_of(clients, count, repeat)
                rows += [
                    Row((wire, framing), name, timing) for name, timing in best.items()
                ]
            adapter.close()
    return rows


def main(argv: list[str] | None = None) -> int:
    args = arguments(__doc__.splitlines()[0], 50_000, 5, argv)
    version_line(args.events, args.repeat)
    rows = throughput(args.events, args.repeat)

    def cpu(row: Row, floor: Row) -> str:
        used = row.timing.cpu
        return f" {used / args.events * 1e6:>7.2f} {used / floor.timing.cpu:>11.2f}"

    print_throughput(
        args.events,
        rows,
        [("wire", 7), ("body", 8)],
        ("  cpu µs cpu x floor", cpu),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
