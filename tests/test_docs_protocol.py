"""docs/protocol.md stays true: its JSON shapes are what ``dsh_llm.serde`` writes
and reads, its example stream passes both validator modes, its validator message
is the validator's, its messages for bad JSON are serde's, and its rule numbers
are the ones the validator cites."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import CHUNK_TYPES
from dsh_llm.protocol import BlockEnd
from dsh_llm.protocol import BlockStart
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import TextDelta
from dsh_llm.serde import chunk_from_dict
from dsh_llm.serde import chunk_to_dict
from dsh_llm.validator import validate_stream

DOC = Path(__file__).resolve().parent.parent / "docs" / "protocol.md"
TEXT = DOC.read_text(encoding="utf-8")


def _fenced(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", TEXT, re.MULTILINE | re.DOTALL)


def _table_json() -> list[str]:
    """Every ``{...}`` code span of the chunk table."""
    section = TEXT.split("## The seven chunks", 1)[1].split("\n## ", 1)[0]
    rows = "\n".join(line for line in section.splitlines() if line.startswith("| "))
    return re.findall(r"`(\{[^`]*\})`", rows)


def test_every_chunk_type_has_a_row_with_its_json():
    shapes = [json.loads(span) for span in _table_json()]
    chunk_types = {shape["type"] for shape in shapes if "type" in shape}
    assert chunk_types >= set(CHUNK_TYPES)


def test_every_json_shape_shown_is_exactly_what_serde_writes():
    shown = [json.loads(span) for span in _table_json()]
    shown += [json.loads(block) for block in _fenced("json")]
    chunks = [s for s in shown if s.get("type") in CHUNK_TYPES]
    assert len(chunks) >= 8
    for shape in chunks:
        assert chunk_to_dict(chunk_from_dict(shape)) == shape


def test_the_example_stream_passes_both_modes_and_round_trips():
    (block,) = _fenced("jsonl")
    lines = [json.loads(line) for line in block.splitlines()]
    chunks = [chunk_from_dict(line) for line in lines]
    assert list(validate_stream(chunks)) == chunks
    assert list(validate_stream(chunks, strict=False)) == chunks
    assert [chunk_to_dict(chunk) for chunk in chunks] == lines


def test_the_validator_message_shown_is_the_validators():
    (message,) = (b.strip() for b in _fenced("text"))
    stream = [
        BlockStart(index=0, block_type="text"),
        TextDelta(index=0, text="Hi"),
        BlockEnd(index=0, block=TextBlock(text="Hi")),
        BlockStart(index=1, block_type="text"),
        TextDelta(index=1, text="Ok"),
        BlockEnd(index=1, block=TextBlock(text="Ok")),
        TextDelta(index=1, text="late"),
    ]
    with pytest.raises(LlmError) as caught:
        list(validate_stream(stream))
    assert caught.value.code == ErrorCode.INVARIANT
    assert caught.value.message == message


def test_the_messages_shown_for_bad_json_are_what_serde_raises():
    section = TEXT.split("## Reading chunks from JSON", 1)[1].split("\n## ", 1)[0]
    examples = re.findall(r"^- `(\{.*\})` gives `(.*)`$", section, re.MULTILINE)
    assert len(examples) >= 5
    for data, message in examples:
        with pytest.raises(LlmError) as caught:
            chunk_from_dict(json.loads(data))
        assert caught.value.code == ErrorCode.INVALID_CHUNK
        assert caught.value.message == message


def test_the_rules_are_numbered_one_to_eleven():
    rules = TEXT.split("## The rules", 1)[1].split("\n## ", 1)[0]
    numbers = [int(n) for n in re.findall(r"^(\d+)\. \*\*", rules, re.MULTILINE)]
    assert numbers == list(range(1, 12))
