"""Replaying recorded wire bodies through a translator, as the read loop would
(test helper shared by the Gemini and Ollama translator tests)."""

from __future__ import annotations

import random
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from typing import Any
from typing import Protocol

from dsh_llm.errors import LlmError
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TokenUsage
from dsh_llm.validator import validate_stream

SPLITS: tuple[str, ...] = ("whole", "1", "7", "random-a", "random-b")
"""The split plans every fixture is replayed under."""


class Translator(Protocol):
    finished: bool

    def feed(self, event: Any) -> list[StreamChunk]: ...

    def close(self) -> list[StreamChunk]: ...

    @property
    def usage_so_far(self) -> TokenUsage | None: ...

    def before_failure(self) -> list[StreamChunk]: ...


class Decoder(Protocol):
    def feed(self, data: bytes) -> list[Any]: ...

    def close(self) -> list[Any]: ...


def pieces(body: bytes, split: str) -> Iterator[bytes]:
    """``body`` cut as ``split`` says: whole, every n bytes, or random cuts
    (seeded by the plan's name, so a failure replays)."""
    if split == "whole":
        yield body
        return
    if split.isdigit():
        size = int(split)
        for start in range(0, len(body), size):
            yield body[start : start + size]
        return
    rng = random.Random(f"{split}:{len(body)}")
    start = 0
    while start < len(body):
        size = rng.randint(1, 40)
        yield body[start : start + size]
        start += size


def replay(
    body: bytes,
    split: str,
    decoder: Decoder,
    translator: Translator,
) -> list[StreamChunk]:
    """The chunks a runtime consumer sees for ``body``: the translator's, and
    for a raised ``LlmError`` what the read loop and runtime add (what the
    translator owes before the failure, then the error finish). Checked
    with ``validate_stream(strict=True)``."""
    out: list[StreamChunk] = []
    try:
        for data in pieces(body, split):
            for event in decoder.feed(data):
                if not translator.finished:
                    out.extend(translator.feed(event))
        for event in decoder.close():
            if not translator.finished:
                out.extend(translator.feed(event))
        if not translator.finished:
            out.extend(translator.close())
    except LlmError as exc:
        out.extend(translator.before_failure())
        out.append(Finish(reason=FinishReason.error(exc.failure)))
    return list(validate_stream(out, strict=True))


def feed_all(
    translator: Translator, events: Iterable[Any], *, close: bool = True
) -> list[StreamChunk]:
    """Feed ``events`` directly; close at the end when ``close``."""
    out: list[StreamChunk] = []
    for event in events:
        out.extend(translator.feed(event))
    if close and not translator.finished:
        out.extend(translator.close())
    return out


Factory = Callable[[], Translator]
