"""Benchmark: the Anthropic Messages translator's cost per event, without HTTP.

Run ``python benchmarks/bench_anthropic_translate.py`` (options: ``--events N``,
``--repeat R``). It prints one table and is not a test.

A Messages-shaped body (``message_start``, one text block of ``--events``
``text_delta`` events of about 130 bytes each, a ping every 100 events,
``message_delta``, ``message_stop``) is held in memory and cut into 16 KiB reads.
Each row decodes the whole body with ``SseDecoder``:

- ``floor``: ``SseDecoder`` plus ``json.loads`` of each payload, nothing else;
- ``MessagesTranslator``: ``SseDecoder`` plus ``MessagesTranslator.feed`` of each
  event, counting text deltas.

The best of ``--repeat`` rounds is kept. The adapter's end-to-end row (HTTP, the
read loop, the anthropic SDK beside it) belongs to the adapter's benchmark.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

from dsh_llm.adapters._anthropic.translate import MessagesTranslator
from dsh_llm.protocol import TextDelta
from dsh_llm.transport.sse import SseDecoder

READ = 16 * 1024


def _event(name: str, payload: object) -> bytes:
    data = json.dumps(payload, separators=(",", ":"))
    return f"event: {name}\ndata: {data}\n\n".encode()


def _body(count: int) -> bytes:
    parts = [
        _event(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_bench",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-sonnet-5",
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 20, "output_tokens": 1},
                },
            },
        ),
        _event(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
    ]
    for i in range(count):
        if i % 100 == 99:
            parts.append(b'event: ping\ndata: {"type": "ping"}\n\n')
        parts.append(
            _event(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": f" tok{i % 1000}"},
                },
            )
        )
    parts.append(
        _event("content_block_stop", {"type": "content_block_stop", "index": 0})
    )
    parts.append(
        _event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": count},
            },
        )
    )
    parts.append(_event("message_stop", {"type": "message_stop"}))
    return b"".join(parts)


def _reads(body: bytes) -> list[bytes]:
    return [body[at : at + READ] for at in range(0, len(body), READ)]


def _floor(reads: list[bytes]) -> int:
    decoder = SseDecoder(terminal_data=None)
    count = 0
    for piece in reads:
        for event in decoder.feed(piece):
            payload = json.loads(event.data)
            if payload["type"] == "content_block_delta":
                count += 1
    return count


def _translator(reads: list[bytes]) -> int:
    decoder = SseDecoder(terminal_data=None)
    translator = MessagesTranslator()
    count = 0
    for piece in reads:
        for event in decoder.feed(piece):
            for chunk in translator.feed(event):
                if type(chunk) is TextDelta:
                    count += 1
    assert translator.finished
    return count


def _best(
    run: Callable[[list[bytes]], int], reads: list[bytes], want: int, r: int
) -> float:
    best = float("inf")
    for _ in range(r):
        start = time.perf_counter()
        got = run(reads)
        best = min(best, time.perf_counter() - start)
        if got != want:
            raise SystemExit(f"saw {got} deltas, expected {want}")
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    reads = _reads(_body(args.events))
    floor = _best(_floor, reads, args.events, args.repeat)
    translated = _best(_translator, reads, args.events, args.repeat)
    print(f"{args.events} text_delta events, best of {args.repeat}")
    print(f"{'client':<20} {'total s':>9} {'us/event':>9} {'x floor':>8}")
    for name, seconds in (("floor", floor), ("MessagesTranslator", translated)):
        per = seconds / args.events * 1e6
        print(f"{name:<20} {seconds:>9.3f} {per:>9.2f} {seconds / floor:>8.2f}")


if __name__ == "__main__":
    main()
