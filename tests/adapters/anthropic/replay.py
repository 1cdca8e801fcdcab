"""Replays recorded Anthropic wire bytes through ``SseDecoder`` and
``MessagesTranslator`` the way the transport's read loop drives them (test helper).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

from dsh_llm.adapters.anthropic.translate import MessagesTranslator
from dsh_llm.assembler import BlockAssembler
from dsh_llm.errors import LlmError
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import Message
from dsh_llm.protocol import ModelSource
from dsh_llm.protocol import StreamChunk
from dsh_llm.transport.sse import SseDecoder

FIXTURES = Path(__file__).resolve().parent.parent.parent / "fixtures" / "anthropic"
"""The recorded streams: ``<case>.sse`` with ``<case>.chunks.jsonl`` beside it."""


def fixture_names() -> list[str]:
    """Every recorded case, sorted."""
    return sorted(path.stem for path in FIXTURES.glob("*.sse"))


def pieces(body: bytes, split: int | str | None, seed: int = 0) -> Iterator[bytes]:
    """``body`` whole (``None``), in ``split``-byte pieces, or in random pieces
    (``"random"``, 1 to 64 bytes, seeded)."""
    if split is None:
        yield body
        return
    if split == "random":
        rng = random.Random(seed)
        at = 0
        while at < len(body):
            size = rng.randint(1, 64)
            yield body[at : at + size]
            at += size
        return
    assert isinstance(split, int)
    for at in range(0, len(body), split):
        yield body[at : at + split]


def replay(chunks_of_body: Iterator[bytes] | list[bytes]) -> list[StreamChunk]:
    """The chunks a read loop yields for this body: the translator's output and,
    when it raises (an error frame, a cut stream), what it owes before the
    failure (the usage reported so far) and the error finish the runtime makes of
    the raised ``LlmError``."""
    decoder = SseDecoder(terminal_data=None, provider="Anthropic")
    translator = MessagesTranslator()
    out: list[StreamChunk] = []
    try:
        for piece in chunks_of_body:
            for event in decoder.feed(piece):
                if not translator.finished:
                    out.extend(translator.feed(event))
        for event in decoder.close():
            out.extend(translator.feed(event))
        out.extend(translator.close())
    except LlmError as error:
        out.extend(translator.before_failure())
        out.append(Finish(reason=FinishReason.error(error.failure)))
    return out


def recorded_turn(name: str, model: str) -> Message:
    """The assistant message ``collect()`` makes of fixture ``name``, as
    ``model`` answered it (its replay state kept for the next turn)."""
    assembler = BlockAssembler()
    for chunk in replay([(FIXTURES / f"{name}.sse").read_bytes()]):
        assembler.push(chunk)
    return assembler.message(
        ModelSource(
            provider="anthropic", model=model, replay_state=assembler.replay_state
        )
    )
