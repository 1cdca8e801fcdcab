"""Benchmark: Responses API streaming cost per event, next to the raw floor and
the openai SDK.

Run ``python benchmarks/bench_openai_responses.py`` (options: ``--events N``,
``--repeat R``). It prints one table and is not a test.

A Responses-shaped stream of ``--events`` ``response.output_text.delta`` events
(each with its ``event:`` line, ``sequence_number``, ``item_id``, indexes,
``logprobs`` and ``obfuscation``, about 250 bytes), framed by the lifecycle
events OpenAI sends (``response.created`` ... ``output_text.done`` with the
whole text ... ``response.completed`` with usage), is served by
``dsh_llm.testing.LoopbackServer`` in a child process (so the server never
competes with the client for the GIL), chunked with one HTTP chunk per event
and close-delimited. Each client streams it whole and counts text deltas:

- ``raw floor``: a plain socket, ``recv``, chunk framing stripped, split on
  blank lines, ``json.loads`` of each ``data:`` payload; nothing else.
- ``OpenAIResponsesAdapter``: ``adapter.stream(options)`` to the last chunk.
- ``openai SDK``: ``OpenAI(base_url=...).responses.create(stream=True)``, when
  the ``openai`` package is installed (it is not a dependency).

Clients run in interleaved rounds; the best of ``--repeat`` rounds is kept.
Targets (issue 17): at most 2x the raw floor per event, faster than the SDK.
"""

from __future__ import annotations

import json
from typing import Any

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

from dsh_llm.adapters.openai_responses import OpenAIResponsesAdapter
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import create_user_message
from dsh_llm.testing import Reply

MODEL = "gpt-5.2"
ITEM = "msg_0c1b7e5a2f0d4e8b9a6c3d2e1f0a9b8c"


def _event(payload: dict[str, Any]) -> bytes:
    data = json.dumps(payload, separators=(",", ":"))
    return f"event: {payload['type']}\ndata: {data}\n\n".encode()


def _response(status: str, output: list[Any], usage: Any) -> dict[str, Any]:
    return {
        "id": "resp_0c1b7e5a2f0d4e8b",
        "object": "response",
        "created_at": 1767225600,
        "status": status,
        "model": MODEL,
        "output": output,
        "usage": usage,
        "store": False,
    }


def _events(count: int) -> list[bytes]:
    tokens = [f" tok{i % 1000}" for i in range(count)]
    text = "".join(tokens)
    item = {"type": "message", "id": ITEM, "status": "in_progress", "role": "assistant"}
    part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
    seq = iter(range(count + 100))
    events = [
        _event(
            {
                "type": "response.created",
                "sequence_number": next(seq),
                "response": _response("in_progress", [], None),
            }
        ),
        _event(
            {
                "type": "response.output_item.added",
                "sequence_number": next(seq),
                "output_index": 0,
                "item": {**item, "content": []},
            }
        ),
        _event(
            {
                "type": "response.content_part.added",
                "sequence_number": next(seq),
                "item_id": ITEM,
                "output_index": 0,
                "content_index": 0,
                "part": part,
            }
        ),
    ]
    events += [
        _event(
            {
                "type": "response.output_text.delta",
                "sequence_number": next(seq),
                "item_id": ITEM,
                "output_index": 0,
                "content_index": 0,
                "delta": token,
                "logprobs": [],
                "obfuscation": "q8Zx3",
            }
        )
        for token in tokens
    ]
    done_part = {**part, "text": text}
    done_item = {**item, "status": "completed", "content": [done_part]}
    usage = {
        "input_tokens": 20,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": count,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 20 + count,
    }
    events += [
        _event(
            {
                "type": "response.output_text.done",
                "sequence_number": next(seq),
                "item_id": ITEM,
                "output_index": 0,
                "content_index": 0,
                "text": text,
                "logprobs": [],
            }
        ),
        _event(
            {
                "type": "response.content_part.done",
                "sequence_number": next(seq),
                "item_id": ITEM,
                "output_index": 0,
                "content_index": 0,
                "part": done_part,
            }
        ),
        _event(
            {
                "type": "response.output_item.done",
                "sequence_number": next(seq),
                "output_index": 0,
                "item": done_item,
            }
        ),
        _event(
            {
                "type": "response.completed",
                "sequence_number": next(seq),
                "response": _response("completed", [done_item], usage),
            }
        ),
    ]
    return events


# --- the server process -----------------------------------------------------------


def _replies(count: int) -> dict[str, Reply]:
    return both_kinds("/responses", _events(count))


# --- clients ----------------------------------------------------------------------


def _raw_floor(port: int, path: str) -> int:
    """Socket reads, chunk framing stripped, split on blank lines, json.loads."""
    deltas = 0

    def consume(parts: list[bytes]) -> bool:
        nonlocal deltas
        for part in parts:
            payload = json.loads(part[part.index(b"\ndata: ") + 7 :])
            kind = payload["type"]
            if kind == "response.output_text.delta" and payload["delta"]:
                deltas += 1
            elif kind == "response.completed":
                return True
        return False

    read_floor(port, path, b"\n\n", consume)
    return deltas


def _adapter_client(base: str) -> Client:
    adapter = OpenAIResponsesAdapter(base, api_key="sk-bench", server="openai")
    options = GenerateOptions(
        provider="bench", model=MODEL, messages=(create_user_message("hi"),)
    )
    return text_deltas(adapter.stream, options)


def _openai_client(base: str) -> Client | None:
    try:
        from openai import OpenAI
    except ImportError:
        return None
    client = OpenAI(base_url=base, api_key="sk-bench", max_retries=0)

    def run() -> int:
        count = 0
        stream = client.responses.create(model=MODEL, input="hi", stream=True)
        for event in stream:
            if event.type == "response.output_text.delta" and event.delta:
                count += 1
        return count

    return run


def _clients(port: int, kind: str) -> Clients:
    base = f"http://127.0.0.1:{port}/{kind}"
    return [
        (FLOOR, lambda: _raw_floor(port, f"/{kind}/responses")),
        ("OpenAIResponsesAdapter", _adapter_client(base)),
        ("openai SDK", _openai_client(base)),
    ]


def main(argv: list[str] | None = None) -> int:
    args = arguments(__doc__.splitlines()[0], 100_000, 5, argv)
    version_line(args.events, args.repeat)
    rows = throughput(args.events, args.repeat, _replies, _clients)
    print_throughput(args.events, rows, [("body", 9)])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
