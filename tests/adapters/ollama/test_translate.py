"""OllamaTranslator (dsh_llm.adapters.ollama.translate): recorded NDJSON bodies
in, the strict chunk sequence out, under every split (inside lines and inside
UTF-8 characters); usage and finish mapping; hostile lines."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from dsh_llm.adapters.ollama.translate import OllamaTranslator
from dsh_llm.adapters.ollama.translate import map_usage
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import BlockEnd
from dsh_llm.protocol import CallId
from dsh_llm.protocol import Finish
from dsh_llm.protocol import TextDelta
from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.protocol import ToolCallDelta
from dsh_llm.protocol import UsageChunk
from dsh_llm.serde import chunk_to_dict
from dsh_llm.serde import read_jsonl
from dsh_llm.transport.ndjson import NdjsonDecoder

from ..wire_replay import SPLITS
from ..wire_replay import feed_all
from ..wire_replay import pieces
from ..wire_replay import replay

FIXTURES = Path(__file__).parent.parent.parent / "fixtures" / "ollama"
NAMES = sorted(p.stem for p in FIXTURES.glob("*.ndjson"))


def translator(**options: Any) -> OllamaTranslator:
    return OllamaTranslator(new_call_id=lambda n: f"call_synth_{n}", **options)


def _expected(name: str) -> list[dict[str, Any]]:
    return [
        chunk_to_dict(c) for c in read_jsonl(str(FIXTURES / f"{name}.chunks.jsonl"))
    ]


def test_there_is_a_fixture_for_every_case():
    assert len(NAMES) >= 35
    for name in NAMES:
        assert (FIXTURES / f"{name}.chunks.jsonl").exists(), name


@pytest.mark.parametrize("split", SPLITS)
@pytest.mark.parametrize("name", NAMES)
def test_recorded_stream_translates_to_its_expected_chunks(name, split):
    body = (FIXTURES / f"{name}.ndjson").read_bytes()
    chunks = replay(body, split, NdjsonDecoder(provider="Ollama"), translator())
    assert [chunk_to_dict(c) for c in chunks] == _expected(name)


def test_splits_fall_inside_lines_and_inside_utf8_characters():
    body = (FIXTURES / "multibyte_text.ndjson").read_bytes()
    cuts = []
    position = 0
    for piece in pieces(body, "1"):
        position += len(piece)
        cuts.append(position)
    inside_a_character = [
        cut for cut in cuts if cut < len(body) and (body[cut] & 0xC0) == 0x80
    ]
    assert inside_a_character
    seven = list(pieces(body, "7"))
    assert any(b"\n" not in p and p for p in seven)


# --- ending -----------------------------------------------------------------------


def test_close_before_done_raises_stream_closed_never_stop():
    t = translator()
    t.feed({"message": {"role": "assistant", "content": "Hi"}, "done": False})
    with pytest.raises(LlmError) as caught:
        t.close()
    assert caught.value.code == ErrorCode.STREAM_CLOSED
    with pytest.raises(LlmError):
        translator().close()


def test_nothing_after_done_and_close_is_then_empty():
    t = translator()
    chunks = t.feed({"message": {"content": "Hi"}, "done": True, "done_reason": "stop"})
    assert isinstance(chunks[-1], Finish)
    assert t.feed({"message": {"content": "more"}, "done": False}) == []
    assert t.close() == []


def test_empty_response_as_stop():
    chunks = translator(empty_response_as_stop=True).feed(
        {"done": True, "done_reason": "stop", "eval_count": 1}
    )
    assert [c.type for c in chunks] == ["usage", "finish"]
    assert chunks[-1].reason.kind == "stop"  # type: ignore[union-attr]


def test_usage_so_far_is_none_until_the_done_line():
    t = translator()
    t.feed({"message": {"content": "a"}, "done": False, "eval_count": 5})
    assert t.usage_so_far is None
    t.feed(
        {"done": True, "done_reason": "stop", "prompt_eval_count": 4, "eval_count": 5}
    )
    assert t.usage_so_far == TokenUsage(input_tokens=4, output_tokens=5)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ({}, TokenUsage(input_tokens=None, output_tokens=None)),
        (
            {"prompt_eval_count": 0, "eval_count": 3},
            TokenUsage(input_tokens=0, output_tokens=3),
        ),
        (
            {"prompt_eval_count": 2**53, "eval_count": -1},
            TokenUsage(input_tokens=None, output_tokens=None),
        ),
        (
            {"prompt_eval_count": 4.0, "eval_count": "3"},
            TokenUsage(input_tokens=None, output_tokens=None),
        ),
        (
            {"prompt_eval_count": True},
            TokenUsage(input_tokens=None, output_tokens=None),
        ),
    ],
)
def test_map_usage_never_invents_a_count(line, expected):
    assert map_usage(line) == expected


# --- ids, errors, redaction -----------------------------------------------------


def test_default_synthesized_ids_are_unique_random_hex():
    t = OllamaTranslator()
    chunks = feed_all(
        t,
        [
            {
                "message": {
                    "tool_calls": [
                        {"function": {"name": "f"}},
                        {"function": {"name": "g"}},
                    ]
                }
            },
            {"done": True, "done_reason": "stop"},
        ],
    )
    ids = [
        c.block.id
        for c in chunks
        if isinstance(c, BlockEnd) and isinstance(c.block, ToolCallBlock)
    ]
    assert len(set(ids)) == 2
    assert all(re.fullmatch(r"call_[0-9a-f]{24}", i) for i in ids)


def test_each_call_is_one_block_with_one_delta_after_the_text_before_it():
    chunks = translator().feed(
        {
            "message": {
                "thinking": "t",
                "content": "c",
                "tool_calls": [
                    {"id": "a", "function": {"name": "f", "arguments": {"x": 1}}},
                    {"function": {"name": "g"}},
                ],
            }
        }
    )
    assert [(c.type, getattr(c, "index", None)) for c in chunks] == [
        ("block-start", 0),
        ("reasoning-delta", 0),
        ("block-end", 0),
        ("block-start", 1),
        ("text-delta", 1),
        ("block-end", 1),
        ("block-start", 2),
        ("tool-call-delta", 2),
        ("block-end", 2),
        ("block-start", 3),
        ("tool-call-delta", 3),
        ("block-end", 3),
    ]
    assert chunks[7] == ToolCallDelta(
        index=2, id=CallId("a"), name="f", arguments_delta='{"x":1}'
    )
    assert chunks[10] == ToolCallDelta(
        index=3, id=CallId("call_synth_1"), name="g", arguments_delta="{}"
    )


def test_string_arguments_are_passed_through_as_json_text():
    chunks = translator().feed(
        {
            "message": {
                "tool_calls": [
                    {"id": "c", "function": {"name": "f", "arguments": '{"a": 1}'}}
                ]
            }
        }
    )
    assert chunks[-1] == BlockEnd(
        index=0, block=ToolCallBlock(id=CallId("c"), name="f", arguments='{"a": 1}')
    )


def test_nan_arguments_are_malformed():
    with pytest.raises(LlmError) as caught:
        translator().feed(
            {
                "message": {
                    "tool_calls": [
                        {"function": {"name": "f", "arguments": {"x": float("nan")}}}
                    ]
                }
            }
        )
    assert caught.value.code == ErrorCode.MALFORMED_RESPONSE


def test_an_error_line_is_raised_with_ollama_message():
    # Redacting an echoed key is the read loop's work (test_adapter_stream.py).
    with pytest.raises(LlmError) as caught:
        translator().feed({"error": "upstream rejected the request"})
    assert caught.value.message == "upstream rejected the request"
    assert caught.value.code == ErrorCode.SERVER


def test_an_error_object_line_uses_its_message():
    with pytest.raises(LlmError) as caught:
        translator().feed({"error": {"message": "model requires more system memory"}})
    assert caught.value.message == "model requires more system memory"


def test_an_error_line_with_a_block_open_leaves_it_open_and_owes_nothing():
    t = translator()
    assert [c.type for c in t.feed({"message": {"content": "Hal"}})] == [
        "block-start",
        "text-delta",
    ]
    with pytest.raises(LlmError) as caught:
        t.feed({"error": "unexpected EOF", "message": {"content": "f"}})
    assert caught.value.code == ErrorCode.SERVER
    # Ollama reports usage only on its done line: none was reported yet.
    assert t.usage_so_far is None
    assert t.before_failure() == []
    assert not t.finished


def test_a_done_line_without_reason_raises_after_its_text_and_usage():
    t = translator()
    t.feed({"message": {"content": "Half"}, "done": False})
    with pytest.raises(LlmError) as caught:
        t.feed(
            {
                "message": {"content": " an"},
                "done": True,
                "prompt_eval_count": 12,
                "eval_count": 3,
            }
        )
    assert caught.value.code == ErrorCode.STREAM_CLOSED
    assert caught.value.message == (
        "Ollama ended the answer without a done_reason (the runner's connection closed)"
    )
    usage = TokenUsage(input_tokens=12, output_tokens=3)
    # The line's own text still goes out, the block stays open, then the usage
    # (once), right before the failure.
    assert t.before_failure() == [
        TextDelta(index=0, text=" an"),
        UsageChunk(usage=usage),
    ]
    assert t.before_failure() == []


def test_an_empty_error_field_is_not_an_error():
    t = translator()
    assert t.feed({"error": "", "message": {"content": "a"}, "done": False})
    assert not t.finished


def test_an_unknown_reason_that_is_not_an_identifier_is_unknown_finish_reason():
    chunks = translator().feed(
        {"message": {"content": "x"}, "done": True, "done_reason": "no way!"}
    )
    assert chunks[-1].reason.failure.code == ErrorCode.UNKNOWN_FINISH_REASON  # type: ignore[union-attr]
