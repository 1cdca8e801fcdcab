"""Benchmark: what each wire family's translator costs per event, in memory.

Run ``python benchmarks/bench_translators.py`` (``--events N``, default 50,000;
``--repeat R``, default 7). It prints one table and is not a test.

Each family's benchmark body (the same streams the HTTP benchmarks serve: one
text delta per event) is held in memory and cut into 16 KiB reads. Per family:

- ``floor``: the transport's decoder plus ``json.loads`` of each payload;
- ``translator``: the transport's decoder feeding the family's translator (and,
  through it, the block writer) to the finish, counting text deltas.

The rows run in interleaved rounds and the best CPU time of ``--repeat`` is kept
(CPU, not wall clock: a loaded machine disturbs it far less). ``x floor`` is the
translator's cost over its own floor; the writer sits on this path, so this is
the table the per-event cost of the seam is read from.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from _harness import arguments
from _wires import anthropic_events
from _wires import cut
from _wires import gemini_events
from _wires import ollama_events
from bench_deepseek_stream import _events as chat_events
from bench_openai_responses import _events as responses_events

from dsh_llm.adapters.anthropic.translate import MessagesTranslator
from dsh_llm.adapters.chat.translate import ChatCompletionsTranslator
from dsh_llm.adapters.deepseek import PROFILE as DEEPSEEK_PROFILE
from dsh_llm.adapters.gemini.translate import GeminiTranslator
from dsh_llm.adapters.ollama.translate import OllamaTranslator
from dsh_llm.adapters.openai_responses.profiles import OPENAI
from dsh_llm.adapters.openai_responses.translate import ResponsesTranslator
from dsh_llm.protocol import TextDelta
from dsh_llm.transport.ndjson import NdjsonDecoder
from dsh_llm.transport.sse import DONE
from dsh_llm.transport.sse import SseDecoder

READ = 16 * 1024

Decoder = Callable[[], Any]

TRANSLATORS: dict[str, Callable[[], Any]] = {
    "chat": lambda: ChatCompletionsTranslator(DEEPSEEK_PROFILE),
    "anthropic": MessagesTranslator,
    "gemini": GeminiTranslator,
    "ollama": OllamaTranslator,
    "responses": lambda: ResponsesTranslator(OPENAI),
}

_FAMILIES: tuple[tuple[str, Callable[[int], list[bytes]], Decoder], ...] = (
    (
        "chat",
        chat_events,
        partial(SseDecoder, terminal_data=DONE, provider="DeepSeek"),
    ),
    (
        "anthropic",
        lambda n: anthropic_events(n, "claude-sonnet-5"),
        partial(SseDecoder, terminal_data=None, provider="Anthropic"),
    ),
    (
        "gemini",
        lambda n: gemini_events(n, "gemini-3-flash-preview"),
        partial(SseDecoder, terminal_data=None, provider="Gemini"),
    ),
    (
        "ollama",
        lambda n: ollama_events(n, "qwen3"),
        partial(NdjsonDecoder, provider="Ollama"),
    ),
    (
        "responses",
        responses_events,
        partial(SseDecoder, terminal_data=None, provider="OpenAI"),
    ),
)


def _payload(event: Any) -> Any:
    data = getattr(event, "data", None)
    if data is None:
        return event  # NDJSON: already decoded
    return None if data.strip() == DONE else json.loads(data)


def _floor(reads: list[bytes], decoder: Decoder, family: str) -> None:
    decode = decoder()
    for piece in reads:
        for event in decode.feed(piece):
            _payload(event)


def _translated(reads: list[bytes], decoder: Decoder, family: str) -> None:
    decode = decoder()
    translator = TRANSLATORS[family]()
    count = 0
    for piece in reads:
        for event in decode.feed(piece):
            for chunk in translator.feed(event):
                if type(chunk) is TextDelta:
                    count += 1
    for event in decode.close():
        translator.feed(event)
    translator.close()  # a wire that ends at the end of the body (Gemini)
    if not translator.finished or count < len(reads):
        raise SystemExit(f"{family}: the translator did not finish the stream")


Run = Callable[[list[bytes], Decoder, str], None]


def _best_cpu(runs: tuple[Run, ...], args: tuple[Any, ...], repeat: int) -> list[float]:
    best = [float("inf")] * len(runs)
    for _ in range(repeat):
        for at, run in enumerate(runs):
            start = time.process_time()
            run(*args)
            best[at] = min(best[at], time.process_time() - start)
    return best


def main(argv: list[str] | None = None) -> None:
    args = arguments(__doc__.splitlines()[0], 50_000, 7, argv)
    rows = []
    for family, events, decoder in _FAMILIES:
        reads = cut(b"".join(events(args.events)), READ)
        floor, ours = _best_cpu(
            (_floor, _translated), (reads, decoder, family), args.repeat
        )
        rows.append((family, floor, ours))
    print(f"{args.events:,} text events per family, best CPU of {args.repeat}")
    print(f"{'family':<10} {'floor us/ev':>12} {'translator us/ev':>17} {'x floor':>8}")
    per = 1e6 / args.events
    for family, floor, ours in rows:
        print(
            f"{family:<10} {floor * per:>12.2f} {ours * per:>17.2f} "
            f"{ours / floor:>8.2f}"
        )


if __name__ == "__main__":
    main()
