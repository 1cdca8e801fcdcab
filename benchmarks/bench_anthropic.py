"""Benchmark: AnthropicAdapter's cost per streamed event, over HTTP.

Run ``python benchmarks/bench_anthropic.py`` (options: ``--events N``,
``--repeat R``). It prints one table and is not a test.

A Messages-shaped response (``message_start``, one text block of ``--events``
``text_delta`` events of about 130 bytes each, a ``ping`` every 100 events,
``content_block_stop``, ``message_delta``, ``message_stop``) is served by
``dsh_llm.testing.LoopbackServer`` in a child process (so the server never
competes with the client for the GIL), once chunked with one HTTP chunk per
event (what Anthropic sends) and once close-delimited. Each client streams it
whole and counts text deltas:

- ``raw floor``: a plain socket, ``recv``, chunk framing stripped, split on
  blank lines, ``json.loads`` of each ``data:`` line; nothing else.
- ``AnthropicAdapter``: ``adapter.stream(options)`` to the last chunk.
- ``anthropic SDK``: ``Anthropic(base_url=...).messages.create(stream=True)``,
  when the ``anthropic`` package is installed (it is not a dependency).

Clients run in interleaved rounds; the best of ``--repeat`` rounds is kept.
Targets (issue 15): at most 2x the raw floor per event, faster than the SDK.
"""

from __future__ import annotations

import json

from _floor import read_floor
from _harness import FLOOR
from _harness import Client
from _harness import Clients
from _harness import arguments
from _harness import both_kinds
from _harness import print_throughput
from _harness import text_deltas
from _harness import throughput
from _harness import version_line
from _wires import anthropic_events

from dsh_llm.adapters.anthropic import PROVIDER_ROUTE
from dsh_llm.adapters.anthropic import AnthropicAdapter
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import create_user_message
from dsh_llm.testing import Reply

MODEL = "claude-haiku-4-5"
PATH = "/v1/messages"


# --- the server process -----------------------------------------------------------


def _replies(count: int) -> dict[str, Reply]:
    return both_kinds(PATH, anthropic_events(count, MODEL))


# --- clients ----------------------------------------------------------------------


def _raw_floor(port: int, path: str) -> int:
    """Socket reads, chunk framing stripped, split on blank lines, json.loads."""
    deltas = 0

    def consume(parts: list[bytes]) -> bool:
        nonlocal deltas
        for part in parts:
            payload = json.loads(part[part.index(b"data: ") + 6 :])
            kind = payload["type"]
            if kind == "message_stop":
                return True
            if kind == "content_block_delta" and payload["delta"]["text"]:
                deltas += 1
        return False

    read_floor(port, path, b"\n\n", consume)
    return deltas


def _adapter_client(base: str) -> Client:
    adapter = AnthropicAdapter("sk-bench", base_url=base)
    options = GenerateOptions(
        provider=PROVIDER_ROUTE, model=MODEL, messages=(create_user_message("hi"),)
    )
    return text_deltas(adapter.stream, options)


def _sdk_client(base: str) -> Client | None:
    try:
        from anthropic import Anthropic
    except ImportError:
        return None
    client = Anthropic(base_url=base, api_key="sk-bench", max_retries=0)

    def run() -> int:
        count = 0
        stream = client.messages.create(
            model=MODEL,
            max_tokens=1024,
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
        )
        for event in stream:
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                count += 1
        return count

    return run


def _clients(port: int, kind: str) -> Clients:
    base = f"http://127.0.0.1:{port}/{kind}"
    return [
        (FLOOR, lambda: _raw_floor(port, f"/{kind}{PATH}")),
        ("AnthropicAdapter", _adapter_client(base)),
        ("anthropic SDK", _sdk_client(base)),
    ]


def main(argv: list[str] | None = None) -> int:
    args = arguments(__doc__.splitlines()[0], 50_000, 5, argv)
    version_line(args.events, args.repeat)
    rows = throughput(args.events, args.repeat, _replies, _clients)
    print_throughput(args.events, rows, [("body", 9)])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
