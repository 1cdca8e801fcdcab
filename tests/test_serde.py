"""dsh_llm.serde: TypeScript-identical JSON, strict reading, JSON Lines."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import BLOCK_TYPES
from dsh_llm.protocol import SOURCE_TYPES
from dsh_llm.protocol import BlockEnd
from dsh_llm.protocol import BlockStart
from dsh_llm.protocol import CallId
from dsh_llm.protocol import ContentBlock
from dsh_llm.protocol import ContextSnapshotSection
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import ImageBlock
from dsh_llm.protocol import ImageDimensions
from dsh_llm.protocol import ImageRef
from dsh_llm.protocol import LlmFailure
from dsh_llm.protocol import Message
from dsh_llm.protocol import MessageSource
from dsh_llm.protocol import PluginSource
from dsh_llm.protocol import ReplayEnvelope
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import TextDelta
from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.protocol import ToolCallDelta
from dsh_llm.protocol import ToolResultBlock
from dsh_llm.protocol import UsageChunk
from dsh_llm.protocol import create_assistant_message
from dsh_llm.protocol import create_tool_result_message
from dsh_llm.serde import chunk_from_dict
from dsh_llm.serde import chunk_from_json
from dsh_llm.serde import chunk_to_dict
from dsh_llm.serde import chunk_to_json
from dsh_llm.serde import chunks_from_jsonl
from dsh_llm.serde import chunks_to_jsonl
from dsh_llm.serde import converter
from dsh_llm.serde import message_from_dict
from dsh_llm.serde import message_to_dict
from dsh_llm.serde import read_jsonl
from dsh_llm.serde import write_jsonl
from tests import strategies as s

# --- the seed example --------------------------------------------------------------

ARGUMENTS = '{"command":"echo runoob"}'

SEED_CHUNKS: list[StreamChunk] = [
    BlockStart(index=0, block_type="text"),
    TextDelta(index=0, text="runoob "),
    TextDelta(index=0, text="教程"),
    BlockEnd(index=0, block=TextBlock(text="runoob 教程")),
    BlockStart(index=1, block_type="tool-call"),
    ToolCallDelta(index=1, id=CallId("call_0"), name="bash", arguments_delta=ARGUMENTS),
    BlockEnd(
        index=1,
        block=ToolCallBlock(id=CallId("call_0"), name="bash", arguments=ARGUMENTS),
    ),
    UsageChunk(usage=TokenUsage(input_tokens=100, output_tokens=50)),
    Finish(reason=FinishReason.TOOL_CALLS),
]

SEED_DICTS: list[dict[str, Any]] = [
    {"type": "block-start", "index": 0, "blockType": "text"},
    {"type": "text-delta", "index": 0, "text": "runoob "},
    {"type": "text-delta", "index": 0, "text": "教程"},
    {"type": "block-end", "index": 0, "block": {"type": "text", "text": "runoob 教程"}},
    {"type": "block-start", "index": 1, "blockType": "tool-call"},
    {
        "type": "tool-call-delta",
        "index": 1,
        "id": "call_0",
        "name": "bash",
        "argumentsDelta": ARGUMENTS,
    },
    {
        "type": "block-end",
        "index": 1,
        "block": {
            "type": "tool-call",
            "id": "call_0",
            "name": "bash",
            "arguments": ARGUMENTS,
        },
    },
    {"type": "usage", "usage": {"inputTokens": 100, "outputTokens": 50}},
    {"type": "finish", "reason": {"kind": "tool-calls"}},
]

# What JSON.stringify writes for the same objects, byte for byte.
SEED_JSON = [
    '{"type":"block-start","index":0,"blockType":"text"}',
    '{"type":"text-delta","index":0,"text":"runoob "}',
    '{"type":"text-delta","index":0,"text":"教程"}',
    '{"type":"block-end","index":0,"block":{"type":"text","text":"runoob 教程"}}',
    '{"type":"block-start","index":1,"blockType":"tool-call"}',
    '{"type":"tool-call-delta","index":1,"id":"call_0","name":"bash",'
    '"argumentsDelta":"{\\"command\\":\\"echo runoob\\"}"}',
    '{"type":"block-end","index":1,"block":{"type":"tool-call","id":"call_0",'
    '"name":"bash","arguments":"{\\"command\\":\\"echo runoob\\"}"}}',
    '{"type":"usage","usage":{"inputTokens":100,"outputTokens":50}}',
    '{"type":"finish","reason":{"kind":"tool-calls"}}',
]


def test_seed_stream_serialises_to_the_exact_typescript_dicts() -> None:
    dicts = [chunk_to_dict(chunk) for chunk in SEED_CHUNKS]

    assert dicts == SEED_DICTS
    # dict equality ignores order; the TypeScript objects list keys in
    # declaration order with the tag first.
    assert [list(d) for d in dicts] == [list(d) for d in SEED_DICTS]
    assert list(dicts[5]) == ["type", "index", "id", "name", "argumentsDelta"]


def test_seed_stream_serialises_to_the_exact_json_text() -> None:
    assert [chunk_to_json(chunk) for chunk in SEED_CHUNKS] == SEED_JSON


def test_seed_stream_round_trips_through_dicts_and_json_text() -> None:
    assert [chunk_from_dict(d) for d in SEED_DICTS] == SEED_CHUNKS
    assert [chunk_from_json(text) for text in SEED_JSON] == SEED_CHUNKS
    assert [chunk_from_json(text.encode()) for text in SEED_JSON] == SEED_CHUNKS


def test_seed_stream_round_trips_through_json_lines() -> None:
    lines = list(chunks_to_jsonl(SEED_CHUNKS))

    assert lines == [text + "\n" for text in SEED_JSON]
    assert list(chunks_from_jsonl(lines)) == SEED_CHUNKS


# --- shapes --------------------------------------------------------------------------


def test_absent_optional_fields_are_omitted_never_null() -> None:
    assert chunk_to_dict(ToolCallDelta(index=2, arguments_delta="")) == {
        "type": "tool-call-delta",
        "index": 2,
        "argumentsDelta": "",
    }
    assert chunk_to_dict(Finish(reason=FinishReason.STOP)) == {
        "type": "finish",
        "reason": {"kind": "stop"},
    }
    block = ToolResultBlock(tool_call_id=CallId("c"), content=())
    assert chunk_to_dict(BlockEnd(index=0, block=block)) == {
        "type": "block-end",
        "index": 0,
        "block": {"type": "tool-result", "toolCallId": "c", "content": []},
    }


def test_unreported_token_counts_are_null_and_optional_counts_omitted() -> None:
    assert chunk_to_dict(UsageChunk(usage=TokenUsage.unknown())) == {
        "type": "usage",
        "usage": {"inputTokens": None, "outputTokens": None},
    }
    assert chunk_to_json(UsageChunk(usage=TokenUsage.unknown())) == (
        '{"type":"usage","usage":{"inputTokens":null,"outputTokens":null}}'
    )
    full = TokenUsage(
        input_tokens=27,
        output_tokens=69,
        cache_read_tokens=256,
        cache_write_tokens=0,
        reasoning_tokens=24,
    )
    assert chunk_to_dict(UsageChunk(usage=full))["usage"] == {
        "inputTokens": 27,
        "outputTokens": 69,
        "cacheReadTokens": 256,
        "cacheWriteTokens": 0,
        "reasoningTokens": 24,
    }


def test_failure_uses_camel_case_keys_and_integral_retry_after() -> None:
    failure = LlmFailure(
        message="slow down",
        code="RATE_LIMIT",
        status=429,
        provider_retry_after_ms=1500.0,
        request_id="req-1",
    )
    text = chunk_to_json(Finish(reason=FinishReason.error(failure)))

    assert text == (
        '{"type":"finish","reason":{"kind":"error","failure":{"message":"slow down",'
        '"code":"RATE_LIMIT","status":429,"providerRetryAfterMs":1500,'
        '"requestId":"req-1"}}}'
    )


def test_replay_state_and_image_use_typescript_keys() -> None:
    attachment = ImageRef(
        attachment_id="sha256:" + "0" * 64,
        media_type="image/png",
        bytes=10,
        width=2,
        height=3,
        name="a.png",
        original_dimensions=ImageDimensions(width=4, height=6),
    )
    finish = Finish(
        reason=FinishReason.STOP,
        replay_state=ReplayEnvelope(response={"id": "r"}, blocks=({"sig": "x"},)),
    )

    assert chunk_to_dict(
        BlockEnd(index=0, block=ImageBlock(attachment=attachment))
    ) == {
        "type": "block-end",
        "index": 0,
        "block": {
            "type": "image",
            "attachment": {
                "attachmentId": "sha256:" + "0" * 64,
                "mediaType": "image/png",
                "bytes": 10,
                "width": 2,
                "height": 3,
                "name": "a.png",
                "originalDimensions": {"width": 4, "height": 6},
            },
        },
    }
    assert chunk_to_dict(finish) == {
        "type": "finish",
        "reason": {"kind": "stop"},
        "replayState": {"response": {"id": "r"}, "blocks": [{"sig": "x"}]},
    }


def test_message_serialises_with_source_kind_and_camel_case_keys() -> None:
    message = create_tool_result_message("call-1", "done", is_error=False)

    assert message_to_dict(message) == {
        "id": message.id,
        "role": "user",
        "content": [
            {
                "type": "tool-result",
                "toolCallId": "call-1",
                "content": [{"type": "text", "text": "done"}],
                "isError": False,
            }
        ],
        "source": {"kind": "tool", "callId": "call-1"},
    }
    assistant = create_assistant_message(
        "hi", provider="p", model="m", replay_state=ReplayEnvelope(response=None)
    )
    assert message_to_dict(assistant)["source"] == {
        "kind": "model",
        "provider": "p",
        "model": "m",
        "replayState": {"response": None},
    }
    snapshot = Message(
        id="m-1",
        role="system",
        content=(),
        source=PluginSource(
            plugin="ctx",
            form="snapshot",
            sections=(ContextSnapshotSection(name="a", text="b"),),
        ),
    )
    assert message_to_dict(snapshot) == {
        "id": "m-1",
        "role": "system",
        "content": [],
        "source": {
            "kind": "plugin",
            "plugin": "ctx",
            "form": "snapshot",
            "sections": [{"name": "a", "text": "b"}],
        },
    }


def test_to_dict_returns_fresh_plain_containers() -> None:
    finish = Finish(reason=FinishReason.STOP, replay_state=ReplayEnvelope(response=[1]))
    first = chunk_to_dict(finish)
    first["replayState"]["response"].append(2)

    assert chunk_to_dict(finish)["replayState"]["response"] == [1]
    assert finish.replay_state is not None
    assert finish.replay_state.response == [1]


def test_to_dict_rejects_values_of_the_wrong_class() -> None:
    with pytest.raises(TypeError, match="StreamChunk"):
        chunk_to_dict(TextBlock(text="a"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Message"):
        message_to_dict({"id": "x"})  # type: ignore[arg-type]


# --- round trips (hypothesis) ------------------------------------------------------


@given(s.chunks)
def test_every_chunk_round_trips_through_a_dict(chunk: StreamChunk) -> None:
    assert chunk_from_dict(chunk_to_dict(chunk)) == chunk


@given(s.chunks)
def test_every_chunk_round_trips_through_json_text(chunk: StreamChunk) -> None:
    text = chunk_to_json(chunk)

    assert "\n" not in text
    assert chunk_from_json(text) == chunk
    assert chunk_from_json(text.encode("utf-8")) == chunk
    # The text is the dict, compact, with non-ASCII kept (as JSON.stringify).
    assert json.loads(text) == chunk_to_dict(chunk)
    assert text == json.dumps(
        chunk_to_dict(chunk), ensure_ascii=False, separators=(",", ":")
    )


@given(s.chunks)
def test_chunk_dicts_survive_a_json_round_trip_unchanged(chunk: StreamChunk) -> None:
    data = chunk_to_dict(chunk)

    assert json.loads(json.dumps(data)) == data
    assert chunk_from_dict(json.loads(json.dumps(data))) == chunk


@given(s.messages)
def test_every_message_round_trips_through_a_dict_and_json(message: Message) -> None:
    data = message_to_dict(message)

    assert message_from_dict(data) == message
    assert message_from_dict(json.loads(json.dumps(data, ensure_ascii=False))) == (
        message
    )


@pytest.mark.parametrize(
    "values",
    [
        s.content_blocks,
        s.message_sources,
        s.llm_failures,
        s.finish_reasons,
        s.token_usages,
        s.replay_envelopes,
        s.image_refs,
    ],
    ids=["block", "source", "failure", "reason", "usage", "envelope", "image"],
)
@given(data=st.data())
def test_every_nested_value_round_trips_through_the_converter(
    values: st.SearchStrategy[Any], data: st.DataObject
) -> None:
    value = data.draw(values)
    declared: Any = {
        "block": ContentBlock,
        "source": MessageSource,
    }.get(_kind_of(value), type(value))

    raw = converter.unstructure(value, declared)
    assert converter.structure(json.loads(json.dumps(raw)), declared) == value


def _kind_of(value: object) -> str:
    if isinstance(value, tuple(BLOCK_TYPES.values())):
        return "block"
    if isinstance(value, tuple(SOURCE_TYPES.values())):
        return "source"
    return "other"


@given(s.chunk_lists)
def test_chunk_lists_round_trip_through_json_lines(chunks: list[StreamChunk]) -> None:
    out = io.StringIO()

    assert write_jsonl(chunks, out) == len(chunks)
    text = out.getvalue()
    assert text.count("\n") == len(chunks)
    assert list(chunks_from_jsonl(io.StringIO(text))) == chunks
    assert list(chunks_from_jsonl(text.encode("utf-8").splitlines(True))) == chunks


def test_non_ascii_text_is_written_verbatim_and_read_back() -> None:
    chunk = TextDelta(index=0, text="教程 😀 é\u2028\x00")
    text = chunk_to_json(chunk)

    assert "教程 😀 é" in text
    assert chunk_from_json(text) == chunk


def test_a_lone_surrogate_is_escaped_so_the_line_is_utf8_and_round_trips(
    tmp_path: Path,
) -> None:
    # Half of a split emoji, as a provider's JSON escape may deliver it.
    chunk = TextDelta(index=0, text="a\ud83d b \udc00")
    text = chunk_to_json(chunk)

    assert text == '{"type":"text-delta","index":0,"text":"a\\ud83d b \\udc00"}'
    assert chunk_from_json(text.encode("utf-8")) == chunk
    path = tmp_path / "split.jsonl"
    with path.open("w", encoding="utf-8") as handle:
        write_jsonl([chunk], handle)
    assert list(read_jsonl(str(path))) == [chunk]


def test_read_jsonl_reads_a_utf8_file_lazily(tmp_path: Path) -> None:
    path = tmp_path / "stream.jsonl"
    with path.open("w", encoding="utf-8") as handle:
        write_jsonl(SEED_CHUNKS, handle)

    assert list(read_jsonl(str(path))) == SEED_CHUNKS


def test_read_jsonl_reports_bytes_that_are_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(SEED_JSON[0].encode() + b"\n\xff\xfe\n")

    with pytest.raises(LlmError) as info:
        list(read_jsonl(str(path)))
    assert info.value.code == ErrorCode.INVALID_CHUNK
    assert info.value.message.startswith("line 2:")


@pytest.mark.parametrize(
    ("encoding", "hint"),
    [
        ("utf-16", "; it starts with a UTF-16 byte order mark"),
        ("utf-32", "; it starts with a UTF-32 byte order mark"),
    ],
)
def test_read_jsonl_refuses_utf16_and_utf32_saying_the_file_is_not_utf8(
    tmp_path: Path, encoding: str, hint: str
) -> None:
    path = tmp_path / "wide.jsonl"
    path.write_bytes("\n".join(SEED_JSON).encode(encoding))

    with pytest.raises(LlmError) as info:
        list(read_jsonl(str(path)))
    assert info.value.code == ErrorCode.INVALID_CHUNK
    message = info.value.message
    assert message.startswith("line 1: invalid chunk: not UTF-8 text (byte 0x")
    assert message.endswith(f"{hint})")
    assert "utf-16" not in message
    assert "utf-32" not in message


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-32-le"])
def test_utf16_and_utf32_without_a_bom_are_named_as_likely_encodings(
    tmp_path: Path, encoding: str
) -> None:
    # ASCII in UTF-16/32 without a byte order mark is valid UTF-8 full of NULs.
    path = tmp_path / "wide.jsonl"
    path.write_bytes("\n".join(SEED_JSON).encode(encoding))

    with pytest.raises(LlmError) as info:
        list(read_jsonl(str(path)))
    assert info.value.message.startswith("line 1: invalid chunk: not JSON (")
    assert info.value.message.endswith(
        "; it holds NUL characters, as UTF-16 or UTF-32 text does, not UTF-8)"
    )


def test_a_utf16_bom_line_names_the_byte_and_offset() -> None:
    with pytest.raises(LlmError) as info:
        list(chunks_from_jsonl([SEED_JSON[0].encode(), b"\xff\xfe{\x00}\x00"]))
    assert info.value.message == (
        "line 2: invalid chunk: not UTF-8 text (byte 0xff at offset 0: invalid "
        "start byte; it starts with a UTF-16 byte order mark)"
    )


def test_chunk_from_json_decodes_bytes_as_utf8_only() -> None:
    chunk = TextDelta(index=0, text="é")
    data = chunk_to_json(chunk).encode("utf-8")

    assert chunk_from_json(data) == chunk
    assert chunk_from_json(b"\xef\xbb\xbf" + data) == chunk
    assert chunk_from_json(bytearray(data)) == chunk
    with pytest.raises(LlmError) as info:
        chunk_from_json(chunk_to_json(chunk).encode("utf-16"))
    assert info.value.code == ErrorCode.INVALID_CHUNK
    assert info.value.message.startswith("invalid chunk: not UTF-8 text")
    with pytest.raises(LlmError, match="invalid chunk: not UTF-8 text"):
        chunk_from_json(b'{"type":"text-delta","index":0,"text":"\xe9"}')


def test_a_utf8_bom_is_skipped_at_the_start_of_the_file_only(tmp_path: Path) -> None:
    path = tmp_path / "bom.jsonl"
    body = "\n".join(SEED_JSON[:2]) + "\n"
    path.write_bytes(b"\xef\xbb\xbf" + body.encode())

    assert list(read_jsonl(str(path))) == SEED_CHUNKS[:2]
    assert list(chunks_from_jsonl(["\ufeff" + SEED_JSON[0]])) == SEED_CHUNKS[:1]
    for lines in (
        [SEED_JSON[0].encode(), b"\xef\xbb\xbf" + SEED_JSON[1].encode()],
        [SEED_JSON[0], "\ufeff" + SEED_JSON[1]],
    ):
        with pytest.raises(LlmError) as info:
            list(chunks_from_jsonl(lines))
        assert info.value.message.startswith("line 2: invalid chunk: not JSON")


def test_jsonl_reader_skips_blank_lines_and_is_lazy() -> None:
    lines = iter(["\n", SEED_JSON[0] + "\n", "   \n", SEED_JSON[1], "not json\n"])
    reader = chunks_from_jsonl(lines)

    assert next(reader) == SEED_CHUNKS[0]
    assert next(reader) == SEED_CHUNKS[1]
    with pytest.raises(LlmError) as info:
        next(reader)
    assert info.value.code == ErrorCode.INVALID_CHUNK
    assert info.value.message.startswith("line 5: ")


def test_bad_json_lines_line_names_its_line_number_and_key() -> None:
    lines = [SEED_JSON[0], SEED_JSON[1], '{"type":"text-delta","index":0,"text":7}']

    with pytest.raises(LlmError) as info:
        list(chunks_from_jsonl(lines))
    assert info.value.code == ErrorCode.INVALID_CHUNK
    assert info.value.message.startswith("line 3: ")
    assert "$.text" in info.value.message
