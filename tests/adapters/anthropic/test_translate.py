"""The Anthropic Messages translator (dsh_llm.adapters.anthropic.translate): SSE
events in, strict protocol chunks out, without I/O.

Every recorded stream in ``tests/fixtures/anthropic`` is decoded with
``SseDecoder`` under several byte splits and must give exactly its expected
``.chunks.jsonl``, strict-validated."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from dsh_llm.adapters.anthropic.translate import KEEPALIVE_EVENTS
from dsh_llm.adapters.anthropic.translate import WIRE_FAMILY
from dsh_llm.adapters.anthropic.translate import MessagesTranslator
from dsh_llm.adapters.anthropic.translate import map_usage
from dsh_llm.assembler import BlockAssembler
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.errors import error_chain
from dsh_llm.protocol import BlockEnd
from dsh_llm.protocol import BlockStart
from dsh_llm.protocol import CallId
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import ReasoningBlock
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import TextDelta
from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.protocol import ToolCallDelta
from dsh_llm.protocol import UsageChunk
from dsh_llm.serde import chunk_to_dict
from dsh_llm.serde import read_jsonl
from dsh_llm.transport.sse import SseEvent
from dsh_llm.validator import assert_chunk_sequence

from .replay import FIXTURES
from .replay import fixture_names
from .replay import pieces
from .replay import replay

NAMES = fixture_names()


def expected(name: str) -> list[dict[str, Any]]:
    return [
        chunk_to_dict(c) for c in read_jsonl(str(FIXTURES / f"{name}.chunks.jsonl"))
    ]


def body(name: str) -> bytes:
    return (FIXTURES / f"{name}.sse").read_bytes()


def dicts(chunks: list[StreamChunk]) -> list[dict[str, Any]]:
    assert_chunk_sequence(chunks, strict=True)
    return [chunk_to_dict(c) for c in chunks]


def event(payload: dict[str, Any], name: str | None = None) -> SseEvent:
    return SseEvent(json.dumps(payload), name or str(payload.get("type")))


def start(usage: dict[str, Any] | None = None) -> SseEvent:
    return event(
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "model": "claude-x",
                "usage": usage if usage is not None else {"input_tokens": 3},
            },
        }
    )


def block_start(index: int, block: dict[str, Any]) -> SseEvent:
    return event(
        {"type": "content_block_start", "index": index, "content_block": block}
    )


def block_delta(index: int, delta: dict[str, Any]) -> SseEvent:
    return event({"type": "content_block_delta", "index": index, "delta": delta})


def block_stop(index: int) -> SseEvent:
    return event({"type": "content_block_stop", "index": index})


def message_delta(reason: str | None, **delta: Any) -> SseEvent:
    return event(
        {
            "type": "message_delta",
            "delta": {"stop_reason": reason, **delta},
            "usage": {"output_tokens": 5},
        }
    )


STOP = event({"type": "message_stop"})


def run(*events: SseEvent, **options: Any) -> list[StreamChunk]:
    """What a runtime consumer sees: the translator's chunks and, for a raised
    failure, what it owes before it and the error finish the runtime makes."""
    translator = MessagesTranslator(**options)
    out: list[StreamChunk] = []
    try:
        for item in events:
            out.extend(translator.feed(item))
    except LlmError as error:
        out.extend(translator.before_failure())
        out.append(Finish(reason=FinishReason.error(error.failure)))
        return out
    assert translator.finished
    return out


def text_turn(reason: str, **delta: Any) -> list[SseEvent]:
    return [
        start(),
        block_start(0, {"type": "text", "text": ""}),
        block_delta(0, {"type": "text_delta", "text": "Hi"}),
        block_stop(0),
        message_delta(reason, **delta),
        STOP,
    ]


# --- recorded streams -----------------------------------------------------------------


def test_there_is_a_recorded_stream_for_every_wire_case() -> None:
    assert len(NAMES) >= 20
    for name in NAMES:
        assert (FIXTURES / f"{name}.chunks.jsonl").exists(), name


@pytest.mark.parametrize("split", [None, 1, 7, "random"], ids=str)
@pytest.mark.parametrize("name", NAMES)
def test_recorded_stream_gives_its_expected_chunks(name: str, split: Any) -> None:
    assert dicts(replay(pieces(body(name), split))) == expected(name)


@settings(max_examples=60, deadline=None)
@given(
    name=st.sampled_from(NAMES),
    cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=40),
)
def test_any_split_of_any_recorded_stream_gives_identical_chunks(
    name: str, cuts: list[int]
) -> None:
    data = body(name)
    points = sorted({cut % (len(data) + 1) for cut in cuts})
    parts = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    assert dicts(replay(parts)) == expected(name)


def test_a_server_tool_use_never_becomes_a_tool_call() -> None:
    for name in ("unknown_event_and_block_types", "pause_turn"):
        chunks = replay([body(name)])
        assert not any(
            isinstance(c, BlockStart) and c.block_type == "tool-call" for c in chunks
        )


def test_a_call_cut_by_max_tokens_is_dropped_by_the_assembler_with_its_replay_entry():
    assembler = BlockAssembler()
    for chunk in replay([body("max_tokens_cut_block")]):
        assembler.push(chunk)
    assert not any(isinstance(b, ToolCallBlock) for b in assembler.blocks())
    state = assembler.replay_state
    assert state is not None
    assert state.blocks == (None,)


# --- keep-alive and the end of the body -----------------------------------------------


def test_ping_is_a_keepalive_that_produces_nothing() -> None:
    translator = MessagesTranslator()
    ping = SseEvent('{"type": "ping"}', "ping")
    assert "ping" in KEEPALIVE_EVENTS
    assert translator.is_keepalive(ping)
    assert not translator.is_keepalive(start())
    assert translator.feed(ping) == []


def test_close_before_message_stop_raises_stream_closed() -> None:
    translator = MessagesTranslator()
    translator.feed(start())
    with pytest.raises(LlmError) as caught:
        translator.close()
    assert caught.value.code == ErrorCode.STREAM_CLOSED


def test_close_after_the_finish_adds_nothing_and_later_events_are_ignored() -> None:
    translator = MessagesTranslator()
    for item in text_turn("end_turn"):
        translator.feed(item)
    assert translator.finished
    assert translator.close() == []
    assert translator.feed(block_start(1, {"type": "text", "text": "x"})) == []


def test_usage_so_far_is_none_before_any_report_then_the_latest_counts() -> None:
    translator = MessagesTranslator()
    before = translator.usage_so_far
    assert before is None
    translator.feed(start({"input_tokens": 40, "cache_read_input_tokens": 7}))
    assert translator.usage_so_far == TokenUsage(
        input_tokens=40, output_tokens=None, cache_read_tokens=7
    )
    translator.feed(message_delta(None))
    usage = translator.usage_so_far
    assert usage is not None
    assert (usage.input_tokens, usage.output_tokens) == (40, 5)


def test_unreported_or_impossible_counts_are_none_never_zero() -> None:
    usage = map_usage(
        {
            "input_tokens": 2**53,
            "output_tokens": True,
            "cache_read_input_tokens": -1,
            "output_tokens_details": {"thinking_tokens": 4},
        }
    )
    assert usage == TokenUsage(
        input_tokens=None,
        output_tokens=None,
        cache_read_tokens=None,
        reasoning_tokens=4,
    )


def test_a_later_null_count_keeps_the_earlier_value() -> None:
    chunks = run(
        start({"input_tokens": 9, "output_tokens": 1}),
        block_start(0, {"type": "text", "text": ""}),
        block_delta(0, {"type": "text_delta", "text": "a"}),
        block_stop(0),
        event(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"input_tokens": None, "output_tokens": 8},
            }
        ),
        STOP,
    )
    usage = next(c for c in chunks if isinstance(c, UsageChunk)).usage
    assert (usage.input_tokens, usage.output_tokens) == (9, 8)


# --- blocks ---------------------------------------------------------------------------


def test_a_whole_tool_input_in_content_block_start_is_its_arguments() -> None:
    chunks = run(
        start(),
        block_start(
            0, {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}}
        ),
        block_stop(0),
        message_delta("tool_use"),
        STOP,
    )
    deltas = [c for c in dicts(chunks) if c["type"] == "tool-call-delta"]
    assert "".join(d["argumentsDelta"] for d in deltas) == '{"a": 1}'


def test_a_second_signature_replaces_the_first() -> None:
    chunks = run(
        start(),
        block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
        block_delta(0, {"type": "signature_delta", "signature": "old"}),
        block_delta(0, {"type": "signature_delta", "signature": "new"}),
        block_stop(0),
        block_start(1, {"type": "text", "text": ""}),
        block_delta(1, {"type": "text_delta", "text": "ok"}),
        block_stop(1),
        message_delta("end_turn"),
        STOP,
    )
    finish = chunks[-1]
    assert isinstance(finish, Finish)
    assert finish.replay_state is not None
    assert finish.replay_state.response["wire"] == WIRE_FAMILY
    assert finish.replay_state.blocks == (
        {"type": "thinking", "signature": "new"},
        None,
    )


def test_a_buffered_text_block_is_flushed_after_the_live_call() -> None:
    chunks = run(
        start(),
        block_start(0, {"type": "tool_use", "id": "t", "name": "f", "input": {}}),
        block_start(1, {"type": "text", "text": ""}),
        block_delta(1, {"type": "text_delta", "text": "later"}),
        block_delta(0, {"type": "input_json_delta", "partial_json": "{}"}),
        block_stop(1),
        block_stop(0),
        message_delta("tool_use"),
        STOP,
    )
    assert [c["type"] for c in dicts(chunks)] == [
        "block-start",
        "tool-call-delta",
        "tool-call-delta",
        "block-end",
        "block-start",
        "text-delta",
        "block-end",
        "usage",
        "finish",
    ]


def test_an_error_frame_with_a_block_open_keeps_the_usage_reported_before_it() -> None:
    chunks = run(
        start(),
        block_start(0, {"type": "text", "text": ""}),
        block_delta(0, {"type": "text_delta", "text": "x"}),
        event(
            {"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}}
        ),
    )
    assert [type(c) for c in chunks] == [
        BlockStart,
        TextDelta,
        UsageChunk,
        Finish,
    ]
    finish = chunks[-1]
    assert isinstance(finish, Finish)
    assert finish.reason.failure is not None
    assert finish.reason.failure.code == ErrorCode.RATE_LIMIT
    assert finish.replay_state is None


@pytest.mark.parametrize(
    ("data", "code", "message"),
    [
        # llama-server's /v1/messages: an OpenAI-style payload under event: error.
        (
            '{"code": 500, "message": "output does not match", "type": "server_error"}',
            "SERVER",
            "output does not match",
        ),
        (
            '{"code": 400, "message": "bad grammar", "type": "invalid_request_error"}',
            "INVALID_REQUEST",
            "bad grammar",
        ),
        ('{"error": {"message": "upstream died"}}', "SERVER", "upstream died"),
        ("upstream died", "SERVER", "upstream died"),
        ('{"type": "message_stop"}', "SERVER", "Anthropic stream reported an error"),
    ],
)
def test_an_error_frame_is_an_error_whatever_its_payload_says(
    data: str, code: str, message: str
) -> None:
    chunks = run(
        start(),
        block_start(0, {"type": "text", "text": ""}),
        block_delta(0, {"type": "text_delta", "text": "x"}),
        SseEvent(data, "error"),
    )
    assert [type(c) for c in chunks] == [BlockStart, TextDelta, UsageChunk, Finish]
    failure = chunks[-1].reason.failure  # type: ignore[union-attr]
    assert failure is not None
    assert (failure.code, failure.message) == (code, message)


# --- stop reasons ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reason", "kind", "code"),
    [
        ("end_turn", "stop", None),
        ("stop_sequence", "stop", None),
        ("tool_use", "stop", None),
        ("max_tokens", "max-tokens", None),
        ("model_context_window_exceeded", "max-tokens", None),
        ("refusal", "error", "REFUSAL"),
        ("pause_turn", "error", "PAUSE_TURN"),
        ("compaction", "error", "COMPACTION"),
        ("not an identifier!", "error", "UNKNOWN_FINISH_REASON"),
    ],
)
def test_stop_reasons_map_to_finishes(reason: str, kind: str, code: str | None) -> None:
    chunks = run(*text_turn(reason))
    assert_chunk_sequence(chunks, strict=True)
    finish = chunks[-1]
    assert isinstance(finish, Finish)
    assert finish.reason.kind == kind
    assert (finish.reason.failure.code if finish.reason.failure else None) == code
    assert (finish.replay_state is None) == (kind == "error")


@pytest.mark.parametrize(
    ("cap", "reason", "kind"),
    [
        (5, "end_turn", "max-tokens"),
        (4, "end_turn", "max-tokens"),
        (5, "tool_use", "max-tokens"),
        (6, "end_turn", "stop"),
        (None, "end_turn", "stop"),
        (5, "refusal", "error"),
    ],
)
def test_an_unmarked_cap_reached_by_the_output_is_a_cut(
    cap: int | None, reason: str, kind: str
) -> None:
    # message_delta reports output_tokens 5.
    chunks = run(*text_turn(reason), unmarked_cap=cap)
    finish = chunks[-1]
    assert isinstance(finish, Finish)
    assert finish.reason.kind == kind


def test_a_refusal_without_details_says_refusal() -> None:
    finish = run(*text_turn("refusal"))[-1]
    assert isinstance(finish, Finish)
    assert finish.reason.failure is not None
    assert finish.reason.failure.message == "model stopped: refusal"


def test_a_blockless_end_turn_is_empty_response_unless_taken_as_stop() -> None:
    events = [start(), message_delta("end_turn"), STOP]
    empty = run(*events)[-1]
    assert isinstance(empty, Finish)
    assert empty.reason.failure is not None
    assert empty.reason.failure.code == ErrorCode.EMPTY_RESPONSE
    plain = run(*events, empty_response_as_stop=True)[-1]
    assert isinstance(plain, Finish)
    assert plain.reason.kind == "stop"


# --- malformed payloads ---------------------------------------------------------------


@pytest.mark.parametrize(
    "item",
    [
        SseEvent("{not json", "message_start"),
        SseEvent("[1, 2]", "message_start"),
        SseEvent('{"type": "message_start", "message": "x"}', "message_start"),
        SseEvent('{"type": "content_block_start", "index": -1}', "content_block_start"),
        SseEvent(
            '{"type": "content_block_delta", "index": 4, "delta": {}}',
            "content_block_delta",
        ),
    ],
)
def test_malformed_payloads_raise_malformed_response(item: SseEvent) -> None:
    translator = MessagesTranslator()
    with pytest.raises(LlmError) as caught:
        translator.feed(item)
    assert caught.value.code == ErrorCode.MALFORMED_RESPONSE


def test_a_delta_of_the_wrong_kind_is_malformed() -> None:
    translator = MessagesTranslator()
    translator.feed(start())
    translator.feed(block_start(0, {"type": "text", "text": ""}))
    with pytest.raises(LlmError) as caught:
        translator.feed(
            block_delta(0, {"type": "input_json_delta", "partial_json": "{"})
        )
    assert caught.value.code == ErrorCode.MALFORMED_RESPONSE


def test_deltas_carry_the_call_id_and_name() -> None:
    chunks = replay([body("tool_use_input_deltas")])
    calls = [c for c in chunks if isinstance(c, ToolCallDelta)]
    assert {(c.id, c.name) for c in calls} == {
        ("toolu_01A09q90qw90lq917835lq9", "get_weather")
    }


# --- one call over several tool_use blocks (LiteLLM) --------------------------------


def _split_call(
    fragments: list[str], call_id: str = "call_1", name: str = "get_weather"
) -> list[SseEvent]:
    """LiteLLM's /v1/messages over a chat route: a tool_use block per argument
    fragment, all with one id, then one more with no input."""
    events: list[SseEvent] = []
    for index, piece in enumerate([*fragments, None]):
        opening = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
        events.append(block_start(index, opening))
        if piece is not None:
            delta = {"type": "input_json_delta", "partial_json": piece}
            events.append(block_delta(index, delta))
        events.append(block_stop(index))
    return events


def _calls(chunks: list[StreamChunk]) -> list[tuple[str, str, str]]:
    assembler = BlockAssembler()
    for chunk in chunks:
        assembler.push(chunk)
    return [
        (block.id, block.name, block.arguments)
        for block in assembler.blocks()
        if isinstance(block, ToolCallBlock)
    ]


def test_tool_use_blocks_repeating_one_id_are_one_call_of_the_joined_input() -> None:
    fragments = ['{"', "city", '":', ' "', "Paris", '"}']
    chunks = run(start(), *_split_call(fragments), message_delta("tool_use"), STOP)
    assert_chunk_sequence(chunks, strict=True)
    assert _calls(chunks) == [("call_1", "get_weather", '{"city": "Paris"}')]
    deltas = [c for c in chunks if isinstance(c, ToolCallDelta)]
    assert {c.index for c in deltas} == {0}
    finish = chunks[-1]
    assert isinstance(finish, Finish)
    assert finish.reason.kind == "tool-calls"


def test_a_call_continued_then_followed_by_another_call_and_text() -> None:
    events = [
        *_split_call(['{"city": ', '"Paris"}']),
        block_start(3, {"type": "tool_use", "id": "call_2", "name": "f", "input": {}}),
        block_delta(3, {"type": "input_json_delta", "partial_json": '{"a": 1}'}),
        block_stop(3),
        block_start(4, {"type": "text", "text": ""}),
        block_delta(4, {"type": "text_delta", "text": "done"}),
        block_stop(4),
    ]
    chunks = run(start(), *events, message_delta("tool_use"), STOP)
    assert _calls(chunks) == [
        ("call_1", "get_weather", '{"city": "Paris"}'),
        ("call_2", "f", '{"a": 1}'),
    ]
    assert "".join(c.text for c in chunks if isinstance(c, TextDelta)) == "done"


@pytest.mark.parametrize(
    "events",
    [
        # Joined, the fragments are not one JSON object.
        _split_call(['{"a": 1}', '{"a": 2}']),
        _split_call(['{"a": ']),
        # The same id with another name.
        [
            *_split_call(['{"a": 1}'])[:3],
            block_start(1, {"type": "tool_use", "id": "call_1", "name": "other"}),
        ],
        # The id of a call that already ended (another block came between).
        [
            *_split_call(['{"a": 1}'])[:3],
            block_start(1, {"type": "text", "text": "x"}),
            block_stop(1),
            block_start(2, {"type": "tool_use", "id": "call_1", "name": "get_weather"}),
        ],
        # The id of a call whose block is still open.
        [
            block_start(0, {"type": "tool_use", "id": "call_1", "name": "f"}),
            block_start(1, {"type": "tool_use", "id": "call_1", "name": "f"}),
        ],
    ],
)
def test_tool_use_blocks_repeating_an_id_otherwise_are_malformed(
    events: list[SseEvent],
) -> None:
    chunks = run(start(), *events, message_delta("tool_use"), STOP)
    finish = chunks[-1]
    assert isinstance(finish, Finish)
    assert finish.reason.failure is not None
    assert finish.reason.failure.code == ErrorCode.MALFORMED_RESPONSE
    assert_chunk_sequence(chunks, strict=True)


def test_a_joined_call_cut_by_max_tokens_is_a_max_tokens_finish() -> None:
    chunks = run(
        start(), *_split_call(['{"ci', "ty"]), message_delta("max_tokens"), STOP
    )
    finish = chunks[-1]
    assert isinstance(finish, Finish)
    assert finish.reason.kind == "max-tokens"
    assert [c.block for c in chunks if isinstance(c, BlockEnd)] == [
        ToolCallBlock(id=CallId("call_1"), name="get_weather", arguments='{"city')
    ]


def test_a_delta_after_its_block_stopped_is_passed_over() -> None:
    chunks = run(
        start(),
        block_start(0, {"type": "tool_use", "id": "call_1", "name": "f"}),
        block_delta(0, {"type": "input_json_delta", "partial_json": "{}"}),
        block_stop(0),
        block_delta(0, {"type": "input_json_delta", "partial_json": "x"}),
        block_stop(0),
        message_delta("tool_use"),
        STOP,
    )
    assert _calls(chunks) == [("call_1", "f", "{}")]


# --- interleaved events, any order ----------------------------------------------------

_KINDS = ("text", "thinking", "tool_use")


def _block_events(index: int, kind: str, fragments: list[str]) -> list[SseEvent]:
    opening: dict[str, Any]
    if kind == "text":
        opening = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": piece} for piece in fragments]
    elif kind == "thinking":
        opening = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [{"type": "thinking_delta", "thinking": piece} for piece in fragments]
        deltas.append({"type": "signature_delta", "signature": f"sig{index}"})
    else:
        opening = {"type": "tool_use", "id": f"toolu_{index}", "name": "f", "input": {}}
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in fragments]
    return [
        block_start(index, opening),
        *(block_delta(index, delta) for delta in deltas),
        block_stop(index),
    ]


@settings(max_examples=150, deadline=None)
@given(
    blocks=st.lists(
        st.tuples(
            st.sampled_from(_KINDS),
            st.lists(st.sampled_from(["", "a", "é", '{"k"', "🙂", " "]), max_size=4),
        ),
        min_size=1,
        max_size=4,
    ),
    data=st.data(),
)
def test_interleaved_provider_events_come_out_in_strict_opening_order(
    blocks: list[tuple[str, list[str]]], data: st.DataObject
) -> None:
    queues = [_block_events(i, kind, parts) for i, (kind, parts) in enumerate(blocks)]
    events: list[SseEvent] = [start()]
    opened = 0
    while any(queues):
        # A block opens only after the blocks before it opened (wire indexes
        # follow the content order); after that its events mix freely.
        ready = [i for i, q in enumerate(queues) if q and i <= opened]
        pick = data.draw(st.sampled_from(ready))
        if pick == opened:
            opened += 1
        events.append(queues[pick].pop(0))
    reason = "tool_use" if any(kind == "tool_use" for kind, _ in blocks) else "end_turn"
    chunks = run(*events, message_delta(reason), STOP)
    assert_chunk_sequence(chunks, strict=True)
    assembler = BlockAssembler()
    for chunk in chunks:
        assembler.push(chunk)
    wanted: list[tuple[str, str]] = []
    for kind, parts in blocks:
        text = "".join(parts)
        if kind == "text" and text:
            wanted.append(("text", text))
        elif kind == "thinking":
            wanted.append(("reasoning", text))
        elif kind == "tool_use":
            wanted.append(("tool-call", text or "{}"))
    got = [
        (
            block.type,
            block.arguments if isinstance(block, ToolCallBlock) else block.text,
        )
        for block in assembler.blocks()
        if isinstance(block, ToolCallBlock | TextBlock | ReasoningBlock)
    ]
    assert got == wanted
    finish = chunks[-1]
    assert isinstance(finish, Finish)
    if not wanted:
        assert finish.reason.kind == "error"
        return
    assert finish.reason.kind == ("tool-calls" if reason == "tool_use" else "stop")
    assert finish.replay_state is not None
    assert finish.replay_state.blocks == tuple(
        {"type": "thinking", "signature": f"sig{i}"} if kind == "thinking" else None
        for i, (kind, parts) in enumerate(blocks)
        if kind != "text" or "".join(parts)
    )


def test_a_malformed_payload_error_keeps_only_its_start() -> None:
    data = '{"type": "message_start", ' + "x" * 200 + " sk-ant-hidden-tail"
    with pytest.raises(LlmError) as caught:
        MessagesTranslator().feed(SseEvent(data, "message_start"))
    assert caught.value.code == ErrorCode.MALFORMED_RESPONSE
    assert "sk-ant-hidden-tail" not in error_chain(caught.value)
    assert caught.value.__context__ is None


def test_a_whole_tool_input_sent_at_block_start_is_one_delta() -> None:
    chunks = run(
        start(),
        block_start(
            0, {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}}
        ),
        block_stop(0),
        message_delta("tool_use"),
        STOP,
    )
    deltas = [c for c in chunks if isinstance(c, ToolCallDelta)]
    assert [(d.id, d.name, d.arguments_delta) for d in deltas] == [
        ("toolu_1", "f", '{"a": 1}')
    ]
    assert chunks[-1].reason.kind == "tool-calls"  # type: ignore[union-attr]


def _failure_code(chunks: list[StreamChunk]) -> str | None:
    finish = chunks[-1]
    assert isinstance(finish, Finish)
    return None if finish.reason.failure is None else finish.reason.failure.code


def test_a_tool_call_without_a_name_is_malformed_not_a_nameless_call() -> None:
    chunks = run(
        start(),
        block_start(0, {"type": "tool_use", "id": "toolu_1", "input": {}}),
        block_delta(0, {"type": "input_json_delta", "partial_json": "{}"}),
        block_stop(0),
        message_delta("tool_use"),
        STOP,
    )
    assert _failure_code(chunks) == ErrorCode.MALFORMED_RESPONSE
    assert not any(isinstance(c, UsageChunk) for c in chunks[:-2])


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity"])
def test_a_whole_tool_input_with_a_non_finite_number_is_malformed(value: str) -> None:
    raw = (
        '{"type":"content_block_start","index":0,"content_block":{"type":"tool_use",'
        f'"id":"toolu_1","name":"f","input":{{"x":{value}}}}}}}'
    )
    chunks = run(start(), SseEvent(event="content_block_start", data=raw))
    assert _failure_code(chunks) == ErrorCode.MALFORMED_RESPONSE
    finish = chunks[-1]
    assert isinstance(finish, Finish)
    assert "NaN or Infinity" in finish.reason.failure.message  # type: ignore[union-attr]


@pytest.mark.parametrize("kind", [7, None, ["message_stop"], {"t": 1}])
def test_an_event_whose_type_is_not_a_string_is_malformed(kind: object) -> None:
    chunks = run(
        *text_turn("end_turn")[:3],
        event({"type": kind}),
        *text_turn("end_turn")[3:],
    )
    assert _failure_code(chunks) == ErrorCode.MALFORMED_RESPONSE
