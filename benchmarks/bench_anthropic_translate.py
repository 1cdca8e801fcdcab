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

The two run in interleaved rounds and the best of ``--repeat`` is kept. The
adapter's end-to-end row (HTTP, the read loop, the anthropic SDK beside it)
belongs to the adapter's benchmark.
"""

from __future__ import annotations

import json

from _harness import arguments
from _harness import best_of
from _wires import anthropic_events
from _wires import cut

from dsh_llm.adapters.anthropic.translate import MessagesTranslator
from dsh_llm.protocol import TextDelta
from dsh_llm.transport.sse import SseDecoder

MODEL = "claude-sonnet-5"
READ = 16 * 1024


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


def main(argv: list[str] | None = None) -> None:
    args = arguments(__doc__.splitlines()[0], 100_000, 5, argv)
    reads = cut(b"".join(anthropic_events(args.events, MODEL)), READ)
    best = best_of(
        [
            ("floor", lambda: _floor(reads)),
            ("MessagesTranslator", lambda: _translator(reads)),
        ],
        args.events,
        args.repeat,
    )
    floor = best["floor"].wall
    print(f"{args.events} text_delta events, best of {args.repeat}")
    print(f"{'client':<20} {'total s':>9} {'us/event':>9} {'x floor':>8}")
    for name, timing in best.items():
        seconds = timing.wall
        per = seconds / args.events * 1e6
        print(f"{name:<20} {seconds:>9.3f} {per:>9.2f} {seconds / floor:>8.2f}")


if __name__ == "__main__":
    main()
