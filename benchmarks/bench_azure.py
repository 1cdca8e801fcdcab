"""Benchmark: AzureOpenAIAdapter's cost per streamed event, over HTTP, on both
wires.

Run ``python benchmarks/bench_azure.py`` (options: ``--events N``,
``--repeat R``). It prints one table and is not a test.

Two Azure-shaped streams of ``--events`` text deltas are served by
``dsh_llm.testing.LoopbackServer`` in a child process, chunked with one HTTP
chunk per event and close-delimited, at the v1 API's paths:

- ``chat``: the prompt-annotation chunk (``prompt_filter_results``, empty
  ``choices``), one ``chat.completion.chunk`` per token carrying Azure's
  ``content_filter_results`` (about 420 bytes), the ``stop`` chunk, the usage
  chunk and ``[DONE]``.
- ``responses``: the Responses lifecycle with one ``response.output_text.delta``
  per token (about 250 bytes) and ``response.completed`` with usage.

Each client streams its wire whole and counts text deltas:

- ``raw floor``: a plain socket, ``recv``, chunk framing stripped, split on
  blank lines, ``json.loads`` of each payload; nothing else.
- ``AzureOpenAIAdapter``: ``adapter.stream(options)`` to the last chunk, with
  an API key (an Entra ID token is fetched once per hour, not per event).

Clients run in interleaved rounds; the best of ``--repeat`` rounds is kept.
Target (issue 28): at most 2x the raw floor per event, on each wire.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from _floor import read_floor
from _harness import FLOOR
from _harness import KINDS
from _harness import Client
from _harness import Row
from _harness import arguments
from _harness import best_of
from _harness import both_kinds
from _harness import print_throughput
from _harness import server_process
from _harness import text_deltas
from _harness import version_line

from dsh_llm.adapters.azure import PROVIDER_ROUTE
from dsh_llm.adapters.azure import AzureOpenAIAdapter
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import create_user_message
from dsh_llm.testing import Reply

DEPLOYMENT = "gpt-4o-bench"
WIRES = {"chat": "/openai/v1/chat/completions", "responses": "/openai/v1/responses"}
SAFE = {
    "hate": {"filtered": False, "severity": "safe"},
    "self_harm": {"filtered": False, "severity": "safe"},
    "sexual": {"filtered": False, "severity": "safe"},
    "violence": {"filtered": False, "severity": "safe"},
}
ITEM = "msg_67cb3252cfac8190865744873aada798"


def _data(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


def _chunk(delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
    return {
        "choices": [
            {
                "content_filter_results": SAFE if delta.get("content") else {},
                "delta": delta,
                "finish_reason": finish,
                "index": 0,
                "logprobs": None,
            }
        ],
        "created": 1736407895,
        "id": "chatcmpl-AnhIt2rw8vL8czymkCwEOKKTg7HPc",
        "model": "gpt-4o-2024-11-20",
        "object": "chat.completion.chunk",
        "system_fingerprint": "fp_5154047bf2",
    }


def chat_events(count: int) -> list[bytes]:
    """An Azure chat-completions stream of ``count`` text deltas."""
    prompt = {
        "choices": [],
        "created": 0,
        "id": "",
        "model": "",
        "object": "",
        "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": SAFE}],
    }
    events = [_data(prompt), _data(_chunk({"role": "assistant", "content": ""}, None))]
    events += [
        _data(_chunk({"content": f" tok{i % 1000}"}, None)) for i in range(count)
    ]
    events.append(_data(_chunk({}, "stop")))
    usage = {**_chunk({}, None), "choices": []}
    usage["usage"] = {
        "completion_tokens": count,
        "prompt_tokens": 20,
        "prompt_tokens_details": {"cached_tokens": 0},
        "total_tokens": 20 + count,
    }
    events.append(_data(usage))
    events.append(b"data: [DONE]\n\n")
    return events


def _event(payload: dict[str, Any]) -> bytes:
    data = json.dumps(payload, separators=(",", ":"))
    return f"event: {payload['type']}\ndata: {data}\n\n".encode()


def responses_events(count: int) -> list[bytes]:
    """An Azure Responses stream of ``count`` text deltas."""
    seq = iter(range(count + 10))
    response = {"id": "resp_67cb32528d6881909eb2859a55e18a85", "object": "response"}
    item = {"type": "message", "id": ITEM, "status": "in_progress", "role": "assistant"}
    events = [
        _event(
            {
                "type": "response.created",
                "sequence_number": next(seq),
                "response": {**response, "status": "in_progress", "output": []},
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
    ]
    tokens = [f" tok{i % 1000}" for i in range(count)]
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
    done = {
        **item,
        "status": "completed",
        "content": [
            {"type": "output_text", "annotations": [], "text": "".join(tokens)}
        ],
    }
    events.append(
        _event(
            {
                "type": "response.output_item.done",
                "sequence_number": next(seq),
                "output_index": 0,
                "item": done,
            }
        )
    )
    events.append(
        _event(
            {
                "type": "response.completed",
                "sequence_number": next(seq),
                "response": {
                    **response,
                    "status": "completed",
                    "output": [done],
                    "usage": {"input_tokens": 20, "output_tokens": count},
                },
            }
        )
    )
    return events


def _replies(count: int) -> dict[str, Reply]:
    return {
        **both_kinds(WIRES["chat"], chat_events(count)),
        **both_kinds(WIRES["responses"], responses_events(count)),
    }


# --- clients ----------------------------------------------------------------------


def _chat_floor(port: int, path: str) -> int:
    deltas = 0

    def consume(parts: list[bytes]) -> bool:
        nonlocal deltas
        for part in parts:
            data = part[6:]
            if data == b"[DONE]":
                return True
            choices = json.loads(data)["choices"]
            if choices and choices[0]["delta"].get("content"):
                deltas += 1
        return False

    read_floor(port, path, b"\n\n", consume)
    return deltas


def _responses_floor(port: int, path: str) -> int:
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


def _adapter_client(base: str, wire: str) -> Client:
    adapter = AzureOpenAIAdapter(
        "azure-bench-key-0123456789", base_url=base, wire=wire, environ={}
    )
    options = GenerateOptions(
        provider=PROVIDER_ROUTE,
        model=DEPLOYMENT,
        messages=(create_user_message("hi"),),
    )
    return text_deltas(adapter.stream, options)


def main(argv: list[str] | None = None) -> int:
    args = arguments(__doc__.splitlines()[0], 50_000, 5, argv)
    version_line(args.events, args.repeat)
    floors = {"chat": _chat_floor, "responses": _responses_floor}
    rows: list[Row] = []
    with server_process(_replies, args.events) as port:
        for kind in KINDS:
            for wire, path in WIRES.items():
                floor = floors[wire]
                clients = [
                    (FLOOR, functools.partial(floor, port, f"/{kind}{path}")),
                    (
                        "AzureOpenAIAdapter",
                        _adapter_client(f"http://127.0.0.1:{port}/{kind}", wire),
                    ),
                ]
                best = best_of(clients, args.events, args.repeat)
                rows += [Row((kind, wire), name, t) for name, t in best.items()]

    def cpu(row: Row, floor: Row) -> str:
        used = row.timing.cpu
        return f" {used / args.events * 1e6:>7.2f} {used / floor.timing.cpu:>11.2f}"

    print_throughput(
        args.events,
        rows,
        [("body", 9), ("wire", 10)],
        ("  cpu µs cpu x floor", cpu),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
