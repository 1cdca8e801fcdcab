"""The chat-completions translator (dsh_llm.adapters.chat.translate):
payloads in, protocol chunks out, without I/O. Every translated stream is checked
with ``validate_stream(strict=True)``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_llm.adapters.chat.request import WireProfile
from dsh_llm.adapters.chat.translate import ChatCompletionsTranslator
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import BlockEnd
from dsh_llm.protocol import BlockStart
from dsh_llm.protocol import CallId
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import LlmFailure
from dsh_llm.protocol import ReasoningBlock
from dsh_llm.protocol import ReasoningDelta
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import TextDelta
from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.protocol import ToolCallDelta
from dsh_llm.protocol import UsageChunk
from dsh_llm.serde import chunk_from_dict
from dsh_llm.serde import chunk_from_json
from dsh_llm.serde import chunk_to_dict
from dsh_llm.serde import chunk_to_json
from dsh_llm.transport.sse import SseEvent
from dsh_llm.validator import assert_chunk_sequence

from .chat_chunks import FIRST
from .chat_chunks import assemble
from .chat_chunks import chunk
from .chat_chunks import finish
from .chat_chunks import only_usage
from .chat_chunks import reasoning
from .chat_chunks import text
from .chat_chunks import tool
from .chat_chunks import usage
from .chat_chunks import valid

PROFILE = WireProfile(provider="Test")
EMPTY = FinishReason.error(
    LlmFailure(
        message="model returned a completed response with no content",
        code="EMPTY_RESPONSE",
    )
)
UNKNOWN_USAGE = UsageChunk(usage=TokenUsage.unknown())


def translate(*payloads: Any, done: bool = True, **options: Any) -> list[Any]:
    """The translator's chunks for ``payloads`` (then ``[DONE]`` when ``done``);
    what it raises propagates."""
    translator = ChatCompletionsTranslator(PROFILE, **options)
    out: list[Any] = []
    for payload in payloads:
        out.extend(translator.feed_payload(payload))
    if done:
        out.extend(translator.done())
    return out


def run(*payloads: Any, done: bool = True, **options: Any) -> list[Any]:
    """What a runtime consumer sees, strictly validated: the translator's chunks
    and, for a raised failure, what the read loop yields before it (what the
    failing payload completed, the usage already reported) and the error finish
    the runtime makes of it."""
    translator = ChatCompletionsTranslator(PROFILE, **options)
    out: list[Any] = []
    try:
        for payload in payloads:
            out.extend(translator.feed_payload(payload))
        if done:
            out.extend(translator.done())
    except LlmError as error:
        out.extend(translator.before_failure())
        out.append(Finish(reason=FinishReason.error(error.failure)))
    return valid(out)


def dicts(chunks: list[Any]) -> list[dict[str, Any]]:
    return [chunk_to_dict(c) for c in chunks]


# --- text and reasoning ------------------------------------------------------------


def test_text_stream_ends_with_usage_and_stop():
    chunks = run(FIRST, text("Hel"), text("lo"), finish("stop", usage(5, 2)))
    assert chunks == [
        BlockStart(index=0, block_type="text"),
        TextDelta(index=0, text="Hel"),
        TextDelta(index=0, text="lo"),
        BlockEnd(index=0, block=TextBlock(text="Hello")),
        UsageChunk(usage=TokenUsage(input_tokens=5, output_tokens=2)),
        Finish(reason=FinishReason.STOP),
    ]
    message = assemble(chunks).message()
    assert message.role == "assistant"
    assert message.content == (TextBlock(text="Hello"),)


def test_the_empty_first_reasoning_chunk_opens_nothing():
    chunks = run(FIRST, text("plain"), finish())
    assert [c for c in chunks if isinstance(c, BlockStart)] == [
        BlockStart(index=0, block_type="text")
    ]


def test_reasoning_ends_before_text_starts():
    chunks = run(FIRST, reasoning("think"), reasoning("ing"), text("answer"), finish())
    assert chunks == [
        BlockStart(index=0, block_type="reasoning"),
        ReasoningDelta(index=0, text="think"),
        ReasoningDelta(index=0, text="ing"),
        BlockEnd(index=0, block=ReasoningBlock(text="thinking")),
        BlockStart(index=1, block_type="text"),
        TextDelta(index=1, text="answer"),
        BlockEnd(index=1, block=TextBlock(text="answer")),
        UNKNOWN_USAGE,
        Finish(reason=FinishReason.STOP),
    ]


def test_resumed_text_is_a_new_block_never_a_reopened_one():
    chunks = run(text("a"), reasoning("r"), text("b"), finish())
    starts = [(c.index, c.block_type) for c in chunks if isinstance(c, BlockStart)]
    assert starts == [(0, "text"), (1, "reasoning"), (2, "text")]
    assert assemble(chunks).blocks() == (
        TextBlock(text="a"),
        ReasoningBlock(text="r"),
        TextBlock(text="b"),
    )


def test_an_absent_reasoning_field_is_non_thinking():
    chunks = run(chunk({"role": "assistant", "content": "x"}), finish())
    assert [c for c in chunks if isinstance(c, BlockStart)] == [
        BlockStart(index=0, block_type="text")
    ]


def test_a_delta_with_reasoning_and_text_gives_both_in_order():
    chunks = run(chunk({"reasoning_content": "r", "content": "t"}), finish())
    assert assemble(chunks).blocks() == (ReasoningBlock(text="r"), TextBlock(text="t"))


def test_profile_reasoning_fields_prefer_the_first_non_empty():
    translator = ChatCompletionsTranslator(
        WireProfile(provider="X", reasoning_fields=("reasoning_content", "reasoning"))
    )
    out = translator.feed_payload(chunk({"reasoning_content": "", "reasoning": "vllm"}))
    out += translator.feed_payload(
        chunk({"reasoning": None, "reasoning_content": "ds"})
    )
    out += translator.feed_payload(finish())
    out += translator.done()
    assert assemble(valid(out)).blocks() == (ReasoningBlock(text="vllmds"),)


# --- tool calls ---------------------------------------------------------------------


def test_fragmented_arguments_reassemble_and_the_name_repeats():
    chunks = run(
        FIRST,
        tool(0, id="call_00_x", name="get_weather", args=""),
        tool(0, args='{"city"'),
        tool(0, args=': "Paris"}'),
        finish("tool_calls", usage(28, 6)),
    )
    assert dicts(chunks) == [
        {"type": "block-start", "index": 0, "blockType": "tool-call"},
        {
            "type": "tool-call-delta",
            "index": 0,
            "id": "call_00_x",
            "name": "get_weather",
            "argumentsDelta": "",
        },
        {
            "type": "tool-call-delta",
            "index": 0,
            "id": "call_00_x",
            "name": "get_weather",
            "argumentsDelta": '{"city"',
        },
        {
            "type": "tool-call-delta",
            "index": 0,
            "id": "call_00_x",
            "name": "get_weather",
            "argumentsDelta": ': "Paris"}',
        },
        {
            "type": "block-end",
            "index": 0,
            "block": {
                "type": "tool-call",
                "id": "call_00_x",
                "name": "get_weather",
                "arguments": '{"city": "Paris"}',
            },
        },
        {"type": "usage", "usage": {"inputTokens": 28, "outputTokens": 6}},
        {"type": "finish", "reason": {"kind": "tool-calls"}},
    ]


def test_parallel_calls_never_interleave_and_the_second_is_flushed_whole():
    chunks = run(
        FIRST,
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "a",
                        "type": "function",
                        "function": {"name": "one", "arguments": "{}"},
                    },
                    {
                        "index": 1,
                        "id": "b",
                        "type": "function",
                        "function": {"name": "two", "arguments": ""},
                    },
                ]
            }
        ),
        tool(1, args='{"x":'),
        tool(1, args="1}"),
        finish("tool_calls"),
    )
    assert chunks[:7] == [
        BlockStart(index=0, block_type="tool-call"),
        ToolCallDelta(index=0, id="a", name="one", arguments_delta="{}"),
        BlockEnd(index=0, block=ToolCallBlock(id="a", name="one", arguments="{}")),
        BlockStart(index=1, block_type="tool-call"),
        ToolCallDelta(index=1, id="b", name="two", arguments_delta='{"x":1}'),
        BlockEnd(index=1, block=ToolCallBlock(id="b", name="two", arguments='{"x":1}')),
        UNKNOWN_USAGE,
    ]
    assert chunks[-1] == Finish(reason=FinishReason.TOOL_CALLS)


def test_fragments_interleaved_across_indexes_are_buffered_in_order():
    chunks = run(
        tool(0, id="a", name="f", args='{"a"'),
        tool(1, id="b", name="g", args='{"b"'),
        tool(0, args=":1}"),
        tool(1, args=":2}"),
        finish("tool_calls"),
    )
    calls = assemble(chunks).blocks()
    assert calls == (
        ToolCallBlock(id="a", name="f", arguments='{"a":1}'),
        ToolCallBlock(id="b", name="g", arguments='{"b":2}'),
    )
    # The first call streamed live: its later fragment is its own delta.
    assert ToolCallDelta(index=0, id="a", name="f", arguments_delta=":1}") in chunks


def test_text_and_tool_calls_get_distinct_indexes():
    chunks = run(
        FIRST,
        text("Checking."),
        tool(0, id="c", name="f", args="{}"),
        finish("tool_calls"),
    )
    assert [c for c in chunks if isinstance(c, BlockStart)] == [
        BlockStart(index=0, block_type="text"),
        BlockStart(index=1, block_type="tool-call"),
    ]


def test_text_after_a_tool_call_is_a_new_block_after_it():
    chunks = run(
        text("Let me look."),
        tool(0, id="c", name="f", args='{"q":'),
        text("One moment."),
        tool(0, args='"x"}'),
        finish("tool_calls"),
    )
    assert assemble(chunks).blocks() == (
        TextBlock(text="Let me look."),
        ToolCallBlock(id="c", name="f", arguments='{"q":"x"}'),
        TextBlock(text="One moment."),
    )
    assert chunks[-1] == Finish(reason=FinishReason.TOOL_CALLS)


def test_a_call_without_arguments_ends_with_braces():
    chunks = run(tool(0, id="c", name="now"), finish("tool_calls"))
    assert chunks[:4] == [
        BlockStart(index=0, block_type="tool-call"),
        ToolCallDelta(index=0, id="c", name="now", arguments_delta=""),
        ToolCallDelta(index=0, id="c", name="now", arguments_delta="{}"),
        BlockEnd(index=0, block=ToolCallBlock(id="c", name="now", arguments="{}")),
    ]


def test_a_buffered_call_without_arguments_is_flushed_with_braces():
    chunks = run(
        tool(0, id="a", name="f", args="{}"),
        tool(1, id="b", name="g"),
        finish("tool_calls"),
    )
    assert ToolCallDelta(index=1, id="b", name="g", arguments_delta="{}") in chunks
    assert assemble(chunks).blocks()[1] == ToolCallBlock(
        id="b", name="g", arguments="{}"
    )


def test_deltas_without_id_give_an_empty_id():
    chunks = run(FIRST, tool(0, name="f", args="{}"), finish("tool_calls"))
    assert dicts(chunks)[:3] == [
        {"type": "block-start", "index": 0, "blockType": "tool-call"},
        {
            "type": "tool-call-delta",
            "index": 0,
            "id": "",
            "name": "f",
            "argumentsDelta": "{}",
        },
        {
            "type": "block-end",
            "index": 0,
            "block": {"type": "tool-call", "id": "", "name": "f", "arguments": "{}"},
        },
    ]


def test_a_call_that_never_names_its_tool_is_malformed():
    with pytest.raises(LlmError) as caught:
        translate(FIRST, tool(0, id="c", args="{}"), finish("tool_calls"))
    assert caught.value.code == ErrorCode.MALFORMED_RESPONSE
    assert "a tool call without a name" in caught.value.message


def test_a_call_without_function_object_still_opens():
    chunks = run(
        FIRST,
        tool(0, id="c", function=False),
        tool(0, name="f", args="{}"),
        finish("tool_calls"),
    )
    assert dicts(chunks)[1] == {
        "type": "tool-call-delta",
        "index": 0,
        "id": "c",
        "argumentsDelta": "",
    }


def test_names_repeated_on_every_fragment_are_not_concatenated():
    chunks = run(
        tool(0, id="x1", name="search", args='{"q":'),
        tool(0, id="x1", name="search", args='"a"}'),
        finish("tool_calls"),
    )
    assert assemble(chunks).blocks() == (
        ToolCallBlock(id="x1", name="search", arguments='{"q":"a"}'),
    )


def test_an_empty_id_on_a_continuation_does_not_start_a_new_call():
    chunks = run(
        tool(0, id="x1", name="f", args="{"),
        tool(0, id="", args="}"),
        finish("tool_calls"),
    )
    assert assemble(chunks).blocks() == (
        ToolCallBlock(id="x1", name="f", arguments="{}"),
    )


def test_a_new_id_on_a_reused_index_starts_a_new_call_and_closes_the_old():
    chunks = run(
        tool(0, id="a", name="f", args='{"n":1}'),
        tool(0, id="b", name="f", args='{"n":'),
        tool(0, args="2}"),
        finish("tool_calls"),
    )
    assert assemble(chunks).blocks() == (
        ToolCallBlock(id="a", name="f", arguments='{"n":1}'),
        ToolCallBlock(id="b", name="f", arguments='{"n":2}'),
    )
    # The second call streams live once the first is known complete.
    assert ToolCallDelta(index=1, id="b", name="f", arguments_delta="2}") in chunks


def test_text_buffered_behind_a_call_comes_out_when_its_index_is_reused():
    chunks = run(
        tool(0, id="a", name="f", args='{"n":1}'),
        text("checking"),
        tool(0, id="b", name="g", args="{}"),
        finish("tool_calls"),
    )
    assert assemble(chunks).blocks() == (
        ToolCallBlock(id=CallId("a"), name="f", arguments='{"n":1}'),
        TextBlock(text="checking"),
        ToolCallBlock(id=CallId("b"), name="g", arguments="{}"),
    )
    # The buffered text is one delta, after the first call ends.
    assert chunks[chunks.index(BlockStart(index=1, block_type="text")) + 1] == (
        TextDelta(index=1, text="checking")
    )


def test_buffered_segments_flush_in_order_and_a_growing_call_streams_live():
    chunks = run(
        tool(0, id="a", name="f", args="{}"),
        text("note"),
        tool(1, id="b", name="g", args='{"m":'),
        tool(0, id="c", name="h", args="{}"),
        tool(1, args="2}"),
        finish("tool_calls"),
    )
    assert assemble(chunks).blocks() == (
        ToolCallBlock(id=CallId("a"), name="f", arguments="{}"),
        TextBlock(text="note"),
        ToolCallBlock(id=CallId("b"), name="g", arguments='{"m":2}'),
        ToolCallBlock(id=CallId("c"), name="h", arguments="{}"),
    )
    # Call b is still open when index 0 is reused, so its rest streams live.
    assert (
        ToolCallDelta(index=2, id=CallId("b"), name="g", arguments_delta="2}") in chunks
    )


def test_a_missing_index_continues_the_last_call_unless_a_new_id_comes():
    chunks = run(
        tool(None, id="a", name="f", args="{"),
        tool(None, args="}"),
        tool(None, id="b", name="g", args="{}"),
        finish("tool_calls"),
    )
    assert assemble(chunks).blocks() == (
        ToolCallBlock(id="a", name="f", arguments="{}"),
        ToolCallBlock(id="b", name="g", arguments="{}"),
    )


def test_arguments_sent_as_an_object_are_re_stringified():
    chunks = run(tool(0, id="a", name="f", args={"city": "Oslo"}), finish("tool_calls"))
    assert assemble(chunks).blocks() == (
        ToolCallBlock(id="a", name="f", arguments='{"city":"Oslo"}'),
    )


def test_a_payload_nested_deeper_than_the_decoder_follows_is_malformed():
    translator = ChatCompletionsTranslator(PROFILE)
    with pytest.raises(LlmError) as caught:
        translator.feed(SseEvent(data="[" * 100_000 + "]" * 100_000))
    assert caught.value.code == ErrorCode.MALFORMED_RESPONSE


@pytest.mark.parametrize(
    ("choice", "what"),
    [
        ({"index": "0", "delta": {"content": "x"}}, "a choice index that is not"),
        ({"index": False, "delta": {"content": "x"}}, "a choice index that is not"),
        ({"index": 0.0, "delta": {"content": "x"}}, "a choice index that is not"),
        ({"index": 0, "delta": {}, "finish_reason": 3}, "a finish_reason that is not"),
    ],
)
def test_wrong_typed_choice_fields_are_a_malformed_response(choice, what):
    translator = ChatCompletionsTranslator(PROFILE)
    with pytest.raises(LlmError) as caught:
        translator.feed_payload({"choices": [choice]})
    assert caught.value.code == ErrorCode.MALFORMED_RESPONSE
    assert what in caught.value.message


def test_a_later_choice_index_is_skipped():
    chunks = run(
        {"choices": [{"index": 1, "delta": {"content": "other"}}]},
        {"choices": [{"index": 0, "delta": {"content": "mine"}}]},
        finish(),
    )
    assert assemble(chunks).blocks() == (TextBlock(text="mine"),)


def test_arguments_object_with_nan_is_a_malformed_response():
    translator = ChatCompletionsTranslator(PROFILE)
    with pytest.raises(LlmError) as caught:
        translator.feed_payload(tool(0, id="a", name="f", args={"x": float("nan")}))
    assert caught.value.code == ErrorCode.MALFORMED_RESPONSE
    assert "NaN or Infinity" in caught.value.message


# --- usage and finish ---------------------------------------------------------------


def test_usage_from_a_trailing_usage_only_chunk():
    chunks = run(FIRST, text("x"), finish("stop", None), only_usage(usage(9, 1)))
    assert chunks[-2:] == [
        UsageChunk(usage=TokenUsage(input_tokens=9, output_tokens=1)),
        Finish(reason=FinishReason.STOP),
    ]


def test_the_last_non_null_usage_wins():
    chunks = run(
        FIRST,
        text("x"),
        finish("stop", usage(0, 0)),
        only_usage(usage(2, 2)),
        chunk({}, None, None),
    )
    assert chunks[-2] == UsageChunk(usage=TokenUsage(input_tokens=2, output_tokens=2))


def test_a_trailing_usage_with_null_counts_keeps_the_earlier_counts():
    chunks = run(
        FIRST,
        text("x"),
        finish(
            "stop",
            usage(
                10,
                4,
                prompt_tokens_details={"cached_tokens": 6},
                completion_tokens_details={"reasoning_tokens": 2},
            ),
        ),
        only_usage(
            {
                "prompt_tokens": None,
                "completion_tokens": None,
                "total_tokens": None,
                "prompt_tokens_details": {"cached_tokens": None},
                "completion_tokens_details": None,
            }
        ),
    )
    assert chunks[-2] == UsageChunk(
        usage=TokenUsage(
            input_tokens=4, output_tokens=4, cache_read_tokens=6, reasoning_tokens=2
        )
    )


def test_usage_reports_merge_field_by_field_latest_non_null_wins():
    chunks = run(
        FIRST,
        only_usage(usage(10, 1)),
        text("x"),
        only_usage({"prompt_tokens": None, "completion_tokens": 7}),
        finish("stop"),
    )
    assert chunks[-2] == UsageChunk(usage=TokenUsage(input_tokens=10, output_tokens=7))


CUT = FinishReason.error(
    LlmFailure(
        message="Test ended its stream with [DONE] but no finish_reason: the answer "
        "was cut short",
        code="STREAM_CLOSED",
    )
)


def test_done_without_any_finish_reason_after_text_is_a_cut_answer():
    # llama-cpp-python interrupting a running request: [DONE], no finish_reason.
    assert run(FIRST, text("Once upon a"), finish(None)) == [
        BlockStart(index=0, block_type="text"),
        TextDelta(index=0, text="Once upon a"),
        Finish(reason=CUT),
    ]


def test_a_tool_call_cut_before_done_is_never_complete():
    chunks = run(tool(0, id="c1", name="get_weather", args='{"ci'), finish(None))
    assert chunks[-1] == Finish(reason=CUT)
    assert not any(isinstance(c, BlockEnd) for c in chunks)


def test_usage_reported_before_a_cut_comes_right_before_its_error_finish():
    chunks = run(FIRST, text("x"), only_usage(usage(9, 1)))
    assert chunks[-2:] == [
        UsageChunk(usage=TokenUsage(input_tokens=9, output_tokens=1)),
        Finish(reason=CUT),
    ]


@pytest.mark.parametrize(
    "payload",
    [
        {"choices": 0},
        {"choices": False},
        {"choices": ""},
        {"choices": [{"index": 0, "delta": 0}]},
        {"choices": [{"index": 0, "delta": []}]},
        {"choices": [{"index": 0, "delta": False}]},
        tool("0", id="c", name="f"),  # type: ignore[arg-type]
        tool(False, id="c", name="f"),  # type: ignore[arg-type]
        tool(0, id=7, name="f"),  # type: ignore[arg-type]
        tool(0, id="c", name=7),  # type: ignore[arg-type]
        tool(0, id="c", name=0),  # type: ignore[arg-type]
    ],
)
def test_wrongly_typed_falsy_fields_are_malformed(payload):
    with pytest.raises(LlmError) as caught:
        translate(payload, finish("stop"))
    assert caught.value.code == ErrorCode.MALFORMED_RESPONSE


def test_usage_never_reported_is_unknown_but_still_precedes_finish():
    chunks = run(FIRST, text("x"), finish())
    assert chunks[-2:] == [UNKNOWN_USAGE, Finish(reason=FinishReason.STOP)]


def test_no_choices_then_done_is_empty_response_after_usage():
    assert run({}) == [UNKNOWN_USAGE, Finish(reason=EMPTY)]


def test_a_bare_done_is_empty_response_even_with_the_flag():
    # vLLM swallows an early error into a bare [DONE]: never a success.
    assert run({}, empty_response_as_stop=True) == [UNKNOWN_USAGE, Finish(reason=EMPTY)]
    assert run(FIRST, finish(None), empty_response_as_stop=True)[-1] == Finish(
        reason=EMPTY
    )


def test_stop_without_blocks_is_empty_response_after_usage():
    chunks = run(FIRST, finish("stop", usage(7, 0)))
    assert chunks == [
        UsageChunk(usage=TokenUsage(input_tokens=7, output_tokens=0)),
        Finish(reason=EMPTY),
    ]


def test_the_flag_takes_an_empty_stop_as_a_plain_stop():
    chunks = run(FIRST, finish("stop"), empty_response_as_stop=True)
    assert chunks == [UNKNOWN_USAGE, Finish(reason=FinishReason.STOP)]


def test_reasoning_only_is_a_normal_stop():
    assert run(FIRST, reasoning("mull"), finish())[-1] == Finish(
        reason=FinishReason.STOP
    )


def test_length_without_blocks_stays_max_tokens():
    assert run(FIRST, finish("length"))[-1] == Finish(reason=FinishReason.MAX_TOKENS)


def test_length_after_tool_calls_stays_max_tokens_and_the_calls_are_emitted():
    chunks = run(tool(0, id="a", name="f", args='{"x":'), finish("length"))
    assert chunks[-1] == Finish(reason=FinishReason.MAX_TOKENS)
    assert any(isinstance(c, BlockEnd) for c in chunks)
    assert assemble(chunks).blocks() == ()  # the assembler drops truncated calls


def test_stop_after_tool_calls_becomes_tool_calls():
    chunks = run(tool(0, id="a", name="f", args="{}"), finish("stop"))
    assert chunks[-1] == Finish(reason=FinishReason.TOOL_CALLS)


def test_tool_calls_finish_without_a_call_is_a_stop():
    assert run(text("x"), finish("tool_calls"))[-1] == Finish(reason=FinishReason.STOP)
    assert run(finish("tool_calls"))[-1] == Finish(reason=EMPTY)


@pytest.mark.parametrize(
    "wire", ["content_filter", "insufficient_system_resource", "mystery_reason"]
)
def test_unknown_finish_reasons_are_error_finishes_after_usage(wire):
    chunks = run(FIRST, text("partial"), finish(wire, usage(3, 1)))
    assert chunks[-3:] == [
        BlockEnd(index=0, block=TextBlock(text="partial")),
        UsageChunk(usage=TokenUsage(input_tokens=3, output_tokens=1)),
        Finish(
            reason=FinishReason.error(
                LlmFailure(message=f"model stopped: {wire}", code=wire.upper())
            )
        ),
    ]


# --- errors ---------------------------------------------------------------------------


def test_invalid_json_is_malformed_response():
    translator = ChatCompletionsTranslator(PROFILE)
    with pytest.raises(LlmError, match="malformed SSE payload") as caught:
        translator.feed(SseEvent("{bad json"))
    assert caught.value.code == ErrorCode.MALFORMED_RESPONSE


@pytest.mark.parametrize(
    "payload",
    [
        [1],
        "text",
        {"choices": {"0": {}}},
        {"choices": ["x"]},
        {"choices": [{"delta": "x"}]},
        {"choices": [{"delta": {"content": 5}}]},
        {"choices": [{"delta": {"reasoning_content": ["x"]}}]},
        {"choices": [{"delta": {"tool_calls": {"index": 0}}}]},
        {"choices": [{"delta": {"tool_calls": ["x"]}}]},
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": "f"}]}}]},
        {"choices": [{"delta": {"function_call": "f"}}]},
    ],
)
def test_wrong_shapes_are_malformed_response(payload):
    with pytest.raises(LlmError) as caught:
        ChatCompletionsTranslator(PROFILE).feed_payload(payload)
    assert caught.value.code == ErrorCode.MALFORMED_RESPONSE


def test_an_in_stream_error_payload_is_raised_with_the_block_left_open():
    report = {"error": {"message": "Overloaded", "type": "overloaded_error"}}
    with pytest.raises(LlmError) as caught:
        translate(text("partial"), report)
    assert caught.value.failure == LlmFailure(message="Overloaded", code="SERVER")
    # The partial text block is left open: its content must be discarded.
    assert run(text("partial"), report) == [
        BlockStart(index=0, block_type="text"),
        TextDelta(index=0, text="partial"),
        Finish(reason=FinishReason.error(caught.value.failure)),
    ]


def test_an_in_stream_error_after_usage_keeps_the_usage():
    chunks = run(
        text("partial"),
        only_usage(usage(4, 0)),
        {
            "error": {
                "code": 400,
                "message": "the request exceeds the available context size",
            }
        },
    )
    # Rule 7: the usage billed before the failure, also with a block open.
    assert chunks[-2:] == [
        UsageChunk(usage=TokenUsage(input_tokens=4, output_tokens=0)),
        Finish(
            reason=FinishReason.error(
                LlmFailure(
                    message="the request exceeds the available context size",
                    code="CONTEXT_WINDOW_EXCEEDED",
                    status=400,
                )
            )
        ),
    ]
    assert not any(isinstance(c, BlockEnd) for c in chunks)


@pytest.mark.parametrize("value", [False, None, {}, [], "", "  ", 0])
def test_an_empty_or_false_error_field_is_not_an_error(value):
    chunks = run(
        FIRST,
        text("answer"),
        finish("stop", usage(3, 1)),
        {"choices": [], "error": value},
    )
    assert chunks[-2:] == [
        UsageChunk(usage=TokenUsage(input_tokens=3, output_tokens=1)),
        Finish(reason=FinishReason.STOP),
    ]
    assert assemble(chunks).blocks() == (TextBlock(text="answer"),)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"message": "boom"}, "boom"),
        ("boom", "boom"),
        (True, "Test stream reported an error"),
    ],
)
def test_a_truthy_error_field_is_an_error(value, message):
    chunks = run(FIRST, text("partial"), {"error": value}, done=False)
    assert chunks[-1] == Finish(
        reason=FinishReason.error(LlmFailure(message=message, code="SERVER"))
    )


def test_a_payload_that_is_not_json_keeps_no_copy_of_itself_in_the_cause():
    translator = ChatCompletionsTranslator(PROFILE)
    with pytest.raises(LlmError) as caught:
        translator.feed(SseEvent("not json sk-echoed"))
    assert caught.value.message == "malformed SSE payload from Test: not json sk-echoed"
    cause = caught.value.__cause__
    assert type(cause) is ValueError
    assert not hasattr(cause, "doc")


def test_an_error_sse_field_is_raised():
    translator = ChatCompletionsTranslator(PROFILE)
    with pytest.raises(LlmError) as caught:
        translator.feed(
            SseEvent("", "error", None, None, '{"code":500,"message":"boom"}')
        )
    assert caught.value.failure == LlmFailure(message="boom", code="SERVER", status=500)
    assert translator.before_failure() == []


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ('{"message":"Overloaded","type":"overloaded_error"}', "Overloaded"),
        ("upstream went away", "upstream went away"),
        ("", "error"),
    ],
)
def test_an_event_error_frame_is_raised_whatever_its_data(data, message):
    translator = ChatCompletionsTranslator(PROFILE)
    translator.feed(SseEvent(json.dumps(text("partial"))))
    with pytest.raises(LlmError) as caught:
        translator.feed(SseEvent(data, "error"))
    assert (caught.value.message, caught.value.code) == (message, "SERVER")


def test_a_flat_vllm_error_object_is_raised():
    with pytest.raises(LlmError) as caught:
        translate(
            {
                "object": "error",
                "message": "too long",
                "type": "BadRequestError",
                "code": 400,
            },
            done=False,
        )
    assert caught.value.status == 400


def test_other_choices_are_ignored():
    chunks = run(
        chunk({"content": "mine"}), chunk({"content": "other"}, index=1), finish()
    )
    assert assemble(chunks).blocks() == (TextBlock(text="mine"),)


def test_done_with_whitespace_ends_the_stream():
    translator = ChatCompletionsTranslator(PROFILE)
    out = translator.feed(SseEvent(json.dumps(text("x"))))
    out += translator.feed(SseEvent(json.dumps(finish("stop"))))
    out += translator.feed(SseEvent(" [DONE] "))
    assert translator.finished
    assert valid(out)[-1] == Finish(reason=FinishReason.STOP)


# --- any interleaving gives a strict stream ----------------------------------------


_PIECE = st.text(alphabet='ab{}:"1 ', max_size=4)


@st.composite
def _wire(draw: Any) -> list[tuple[str, Any, str]]:
    """A random wire order of fragments: ("text"|"reasoning", None, piece) or
    ("tool", index, piece); each call's first fragment carries id and name."""
    calls = draw(st.integers(0, 3))
    events: list[tuple[str, Any, str]] = []
    for kind in draw(
        st.lists(st.sampled_from(["text", "reasoning", "tool"]), max_size=14)
    ):
        if kind == "tool" and calls:
            events.append(("tool", draw(st.integers(0, calls - 1)), draw(_PIECE)))
        elif kind != "tool":
            events.append((kind, None, draw(_PIECE)))
    return events


@given(events=_wire(), reason=st.sampled_from(["stop", "tool_calls", "length"]))
def test_any_wire_order_translates_to_a_strict_lossless_stream(events, reason):
    translator = ChatCompletionsTranslator(PROFILE, empty_response_as_stop=True)
    out: list[Any] = []
    seen: set[int] = set()
    for kind, index, piece in events:
        if kind == "tool":
            first = index not in seen
            seen.add(index)
            payload = tool(
                index,
                id=f"id{index}" if first else None,
                name=f"fn{index}" if first else None,
                args=piece,
            )
        elif kind == "text":
            payload = text(piece)
        else:
            payload = reasoning(piece)
        out += translator.feed_payload(payload)
    out += translator.feed_payload(finish(reason))
    out += translator.done()
    chunks = valid(out)
    ends = [c.block for c in chunks if isinstance(c, BlockEnd)]
    # Nothing lost: per call, the arguments are its fragments in wire order.
    for index in seen:
        expected = (
            "".join(p for k, i, p in events if k == "tool" and i == index) or "{}"
        )
        (call,) = [
            b for b in ends if isinstance(b, ToolCallBlock) and b.id == f"id{index}"
        ]
        assert (call.name, call.arguments) == (f"fn{index}", expected)
    for kind, cls in (("text", TextBlock), ("reasoning", ReasoningBlock)):
        streamed = "".join(p for k, _, p in events if k == kind)
        assert "".join(b.text for b in ends if isinstance(b, cls)) == streamed


# --- surrogate pairs split across fragments ------------------------------------------


def test_a_surrogate_pair_split_across_text_deltas_is_joined():
    chunks = run(text("smile \ud83d"), text("\ude00!"), finish())
    assert assemble(chunks).blocks() == (TextBlock(text="smile \U0001f600!"),)
    deltas = [c.text for c in chunks if isinstance(c, TextDelta)]
    assert deltas == ["smile ", "\U0001f600!"]


def test_a_surrogate_pair_split_across_reasoning_deltas_is_joined():
    chunks = run(reasoning("\ud83d"), reasoning("\ude00"), text("ok"), finish())
    assert assemble(chunks).blocks() == (
        ReasoningBlock(text="\U0001f600"),
        TextBlock(text="ok"),
    )


def test_a_high_surrogate_without_its_low_half_is_kept_as_it_came():
    ended = run(text("a\ud83d"), finish())
    assert assemble(ended).blocks() == (TextBlock(text="a\ud83d"),)
    switched = run(reasoning("r\ud83d"), text("\ude00t"), finish())
    assert assemble(switched).blocks() == (
        ReasoningBlock(text="r\ud83d"),
        TextBlock(text="\ude00t"),
    )
    before_call = run(text("\ud83d"), tool(0, id="a", name="f", args="{}"), finish())
    assert assemble(before_call).blocks() == (
        TextBlock(text="\ud83d"),
        ToolCallBlock(id="a", name="f", arguments="{}"),
    )


def test_a_surrogate_pair_split_across_argument_fragments_is_joined():
    chunks = run(
        tool(0, id="a", name="f", args='{"e":"\ud83d'),
        tool(0, args='\ude00"}'),
        finish("tool_calls"),
    )
    assert assemble(chunks).blocks() == (
        ToolCallBlock(id="a", name="f", arguments='{"e":"\U0001f600"}'),
    )
    # Written and read back, the recorded stream is still valid.
    assert_chunk_sequence([chunk_from_dict(chunk_to_dict(c)) for c in chunks])
    assert_chunk_sequence([chunk_from_json(chunk_to_json(c).encode()) for c in chunks])


def test_a_lone_high_surrogate_ends_its_call_as_it_came():
    chunks = run(tool(0, id="a", name="f", args="x\ud83d"), finish("tool_calls"))
    assert assemble(chunks).blocks() == (
        ToolCallBlock(id="a", name="f", arguments="x\ud83d"),
    )


def test_an_error_in_a_call_keeps_its_held_half_and_a_lone_half_sends_no_delta():
    chunks = run(
        tool(0, id="a", name="f", args='{"e":"x'),
        tool(0, args="\ud83d"),
        {"error": {"message": "boom", "code": 500}},
    )
    deltas = [c.arguments_delta for c in chunks if isinstance(c, ToolCallDelta)]
    assert deltas == ['{"e":"x', "\ud83d"]
    assert isinstance(chunks[-1], Finish)
    assert chunks[-1].reason.kind == "error"


@given(events=_wire())
def test_any_wire_order_cut_before_a_finish_reason_is_never_a_success(events):
    translator = ChatCompletionsTranslator(PROFILE, empty_response_as_stop=True)
    out: list[Any] = []
    seen: set[int] = set()
    for kind, index, piece in events:
        if kind == "tool":
            first = index not in seen
            seen.add(index)
            name = f"fn{index}" if first else None
            payload = tool(index, id=f"id{index}" if first else None, name=name)
            payload["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"] = (
                piece
            )
        else:
            payload = text(piece) if kind == "text" else reasoning(piece)
        out += translator.feed_payload(payload)
    try:
        out += translator.done()
    except LlmError as error:
        out += translator.before_failure()
        out.append(Finish(reason=FinishReason.error(error.failure)))
    chunks = valid(out)
    end = chunks[-1]
    assert isinstance(end, Finish)
    if any(piece for _, _, piece in events) or seen:
        assert end.reason == CUT
    else:
        assert end.reason.kind == "error"
        assert end.reason.failure is not None
        assert end.reason.failure.code == "EMPTY_RESPONSE"
