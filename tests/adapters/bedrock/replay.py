"""Bedrock fixtures: ``<case>.events.json`` (the frames, as documented shapes)
encoded by the tests' own encoder, with ``<case>.chunks.jsonl`` beside them
(test helper)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dsh_llm.adapters.bedrock.translate import ConverseStreamTranslator
from dsh_llm.protocol import StreamChunk
from dsh_llm.serde import chunk_to_dict
from dsh_llm.serde import read_jsonl
from dsh_llm.transport.eventstream import EventStreamDecoder
from tests.adapters.wire_replay import replay
from tests.eventstream_frames import error
from tests.eventstream_frames import event
from tests.eventstream_frames import exception

FIXTURES = Path(__file__).resolve().parent.parent.parent / "fixtures" / "bedrock"
"""The cases: ``<case>.events.json`` with ``<case>.chunks.jsonl`` beside it."""
MODEL = "us.anthropic.claude-haiku-4-5-20251001-v1:0"
"""The model the fixtures' requests name."""


def fixture_names() -> list[str]:
    """Every case, sorted."""
    return sorted(
        path.name.removesuffix(".events.json")
        for path in FIXTURES.glob("*.events.json")
    )


def encode(frames: list[dict[str, Any]]) -> bytes:
    """The wire bytes of a case's frames."""
    out = b""
    for spec in frames:
        if "event" in spec:
            out += event(spec["event"], spec["payload"])
        elif "exception" in spec:
            out += exception(spec["exception"], spec["payload"])
        else:
            out += error(spec["error"], spec["message"])
    return out


def fixture_body(name: str) -> bytes:
    """The wire bytes of case ``name``."""
    frames = json.loads((FIXTURES / f"{name}.events.json").read_text(encoding="utf-8"))
    return encode(frames)


def expected(name: str) -> list[dict[str, Any]]:
    """The chunks case ``name`` gives, as dicts."""
    return [
        chunk_to_dict(c) for c in read_jsonl(str(FIXTURES / f"{name}.chunks.jsonl"))
    ]


def translated(body: bytes, split: str = "whole") -> list[StreamChunk]:
    """What a runtime consumer sees for ``body`` cut as ``split`` says (strictly
    validated)."""
    return replay(
        body,
        split,
        EventStreamDecoder(provider="Amazon Bedrock"),
        ConverseStreamTranslator(model=MODEL),
    )
