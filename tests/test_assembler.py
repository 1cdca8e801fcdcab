"""Tests for dsh_llm.assembler: BlockAssembler (the TypeScript assembler's
algorithm: tolerant assembly, first close wins, tool calls dropped on
max-tokens, replay-state pruning, interrupted blocks), assemble_stream() and
collect()."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_llm import BlockAssembler
from dsh_llm import BlockEnd
from dsh_llm import BlockStart
from dsh_llm import CallId
from dsh_llm import ErrorCode
from dsh_llm import Finish
from dsh_llm import FinishReason
from dsh_llm import LlmError
from dsh_llm import LlmFailure
from dsh_llm import ReasoningBlock
from dsh_llm import ReasoningDelta
from dsh_llm import StreamChunk
from dsh_llm import TextBlock
from dsh_llm import TextDelta
from dsh_llm import TokenUsage
from dsh_llm import ToolCallBlock
from dsh_llm import ToolCallDelta
from dsh_llm import UsageChunk
from dsh_llm import collect
from dsh_llm import validate_stream
from dsh_llm.assembler import ASSEMBLER_SOURCE
from dsh_llm.assembler import AssembledResponse
from dsh_llm.assembler import assemble_stream
from dsh_llm.assembler import unreachable_variant
from dsh_llm.protocol import ChunkStream
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import ModelSource
from dsh_llm.protocol import PluginSource
from dsh_llm.protocol import ReplayEnvelope
from dsh_llm.protocol import create_assistant_message
from tests.strategies import finish_reasons
from tests.strategies import indexes
from tests.strategies import token_usages
from tests.stream_plans import StreamPlan
from tests.stream_plans import stream_plans

USAGE = TokenUsage(input_tokens=10, output_tokens=5)
RESPONSE = {"responseId": "resp-1"}


def feed(chunks: list[StreamChunk]) -> BlockAssembler:
    assembler = BlockAssembler()
    for chunk in chunks:
        assembler.push(chunk)
    return assembler


def tool_end(index: int, arguments: str = "{}", name: str = "echo") -> BlockEnd:
    return BlockEnd(
        index=index,
        block=ToolCallBlock(id=CallId("c1"), name=name, arguments=arguments),
    )


INTERLEAVED: list[StreamChunk] = [
    BlockStart(index=0, block_type="reasoning"),
    ReasoningDelta(index=0, text="thinking…"),
    BlockEnd(index=0, block=ReasoningBlock(text="thinking…")),
    BlockStart(index=1, block_type="text"),
    TextDelta(index=1, text="Hello"),
    TextDelta(index=1, text=" world"),
    BlockStart(index=2, block_type="tool-call"),
    ToolCallDelta(
        index=2, id=CallId("call-1"), name="echo", arguments_delta='{"text":'
    ),
    ToolCallDelta(index=2, id=CallId("call-1"), arguments_delta='"hi"}'),
    UsageChunk(usage=USAGE),
    Finish(reason=FinishReason.TOOL_CALLS),
]


# --- item 7 ------------------------------------------------------------------


def test_interleaved_reasoning_text_and_tool_call_assemble_into_three_blocks():
    assembler = feed(INTERLEAVED)
    assert assembler.blocks() == (
        ReasoningBlock(text="thinking…"),
        TextBlock(text="Hello world"),
        ToolCallBlock(id=CallId("call-1"), name="echo", arguments='{"text":"hi"}'),
    )
    assert assembler.usage == USAGE
    assert assembler.finish == FinishReason.TOOL_CALLS
    message = assembler.message()
    assert message.role == "assistant"
    assert message.content == assembler.blocks()
    assert message.source == PluginSource(plugin="dsh-llm/assembler")


def test_convenience_properties_join_text_and_reasoning_and_list_tool_calls():
    assembler = feed(
        [
            *INTERLEAVED[:-2],
            BlockStart(index=3, block_type="text"),
            TextDelta(index=3, text="!"),
            UsageChunk(usage=USAGE),
            Finish(reason=FinishReason.TOOL_CALLS),
        ]
    )
    assert assembler.text == "Hello world!"
    assert assembler.reasoning == "thinking…"
    assert assembler.tool_calls == (
        ToolCallBlock(id=CallId("call-1"), name="echo", arguments='{"text":"hi"}'),
    )


def test_message_takes_a_source_and_mints_a_fresh_id_each_call():
    assembler = feed(INTERLEAVED)
    source = ModelSource(provider="deepseek-official", model="deepseek-v4-flash")
    first, second = assembler.message(source), assembler.message()
    assert first.source == source
    assert second.source == ASSEMBLER_SOURCE
    assert first.id != second.id


# --- item 8 ------------------------------------------------------------------


def test_block_end_is_recorded_as_the_block():
    assembler = feed(
        [
            BlockStart(index=0, block_type="text"),
            TextDelta(index=0, text="hi"),
            BlockEnd(index=0, block=TextBlock(text="hi")),
        ]
    )
    assert assembler.blocks() == (TextBlock(text="hi"),)


def test_block_end_is_authoritative_over_the_deltas():
    assembler = feed(
        [
            BlockStart(index=0, block_type="text"),
            TextDelta(index=0, text="draft"),
            BlockEnd(index=0, block=TextBlock(text="final")),
        ]
    )
    assert assembler.text == "final"


def test_delta_only_stream_assembles_with_stop_and_no_usage():
    assembler = feed([TextDelta(index=0, text="implicit")])
    assert assembler.blocks() == (TextBlock(text="implicit"),)
    assert assembler.finish == FinishReason.STOP
    assert assembler.usage is None


def test_usage_and_finish_are_last_wins():
    later = TokenUsage(input_tokens=None, output_tokens=7)
    assembler = feed(
        [
            UsageChunk(usage=USAGE),
            UsageChunk(usage=later),
            Finish(reason=FinishReason.STOP),
            Finish(reason=FinishReason.MAX_TOKENS),
        ]
    )
    assert assembler.usage == later
    assert assembler.finish == FinishReason.MAX_TOKENS


# --- item 9 ------------------------------------------------------------------


def test_open_block_of_unknown_type_cannot_be_assembled():
    assembler = feed([BlockStart(index=0, block_type="video")])
    with pytest.raises(
        ValueError, match='cannot assemble incomplete block of type "video"'
    ):
        assembler.blocks()


def test_closed_block_of_any_type_assembles_from_its_block_end():
    block = TextBlock(text="caption")
    assembler = feed(
        [BlockStart(index=0, block_type="video"), BlockEnd(index=0, block=block)]
    )
    assert assembler.blocks() == (block,)


def test_corrupted_order_raises_invariant_violated():
    assembler = BlockAssembler()
    assembler._order.append(99)  # corrupt the internals on purpose
    with pytest.raises(RuntimeError, match="BlockAssembler invariant violated"):
        assembler.blocks()
    with pytest.raises(RuntimeError, match="no partial for index 99"):
        assembler.interrupted_blocks()


# --- item 10 -----------------------------------------------------------------


def test_duplicate_block_start_is_ignored():
    assembler = feed(
        [
            BlockStart(index=0, block_type="text"),
            TextDelta(index=0, text="one"),
            BlockStart(index=0, block_type="reasoning"),
            TextDelta(index=0, text=" two"),
        ]
    )
    assert assembler.blocks() == (TextBlock(text="one two"),)


def test_tool_call_stragglers_after_block_end_are_ignored():
    assembler = feed(
        [
            BlockStart(index=0, block_type="tool-call"),
            ToolCallDelta(index=0, id=CallId("c1"), name="echo", arguments_delta="{}"),
            tool_end(0),
            ToolCallDelta(
                index=0, id=CallId("c1"), name="evil", arguments_delta="oops"
            ),
            TextDelta(index=0, text="stray"),
        ]
    )
    assert assembler.blocks() == (
        ToolCallBlock(id=CallId("c1"), name="echo", arguments="{}"),
    )


def test_tool_call_without_id_or_name_gets_call_index_and_empty_name():
    assembler = feed(
        [
            BlockStart(index=0, block_type="text"),
            ToolCallDelta(index=3, arguments_delta="{}"),
        ]
    )
    assert assembler.blocks()[1] == ToolCallBlock(
        id=CallId("call-3"), name="", arguments="{}"
    )


def test_tool_call_takes_the_last_delta_id_and_the_last_non_empty_name():
    assembler = feed(
        [
            ToolCallDelta(index=0, id=CallId("a"), name="first", arguments_delta="{"),
            ToolCallDelta(index=0, id=CallId(""), name="", arguments_delta="}"),
        ]
    )
    assert assembler.blocks() == (
        ToolCallBlock(id=CallId(""), name="first", arguments="{}"),
    )
    # A later delta without an id overwrites it too, as in the TypeScript
    # assembler: the last delta's id wins, and an open call without one is
    # named call-<index>.
    assembler.push(ToolCallDelta(index=0, id=None, arguments_delta=""))
    assert assembler.tool_calls[0].id == "call-0"


def test_delta_of_another_type_is_not_type_checked():
    assembler = feed(
        [
            BlockStart(index=0, block_type="reasoning"),
            TextDelta(index=0, text="a"),
            ReasoningDelta(index=0, text="b"),
        ]
    )
    assert assembler.blocks() == (ReasoningBlock(text="ab"),)


# --- item 11 -----------------------------------------------------------------


def test_max_tokens_drops_tool_calls_and_prunes_replay_entries():
    assembler = feed(
        [
            BlockEnd(index=0, block=TextBlock(text="lead")),
            tool_end(1, '{"text":'),
            BlockEnd(index=2, block=ReasoningBlock(text="tail")),
            Finish(
                reason=FinishReason.MAX_TOKENS,
                replay_state=ReplayEnvelope(
                    response=RESPONSE, blocks=("meta-0", "meta-1", "meta-2")
                ),
            ),
        ]
    )
    assert assembler.blocks() == (TextBlock(text="lead"), ReasoningBlock(text="tail"))
    assert assembler.tool_calls == ()
    assert assembler.replay_state == ReplayEnvelope(
        response=RESPONSE, blocks=("meta-0", "meta-2")
    )


def test_misaligned_replay_entries_give_none():
    assembler = feed(
        [
            BlockEnd(index=0, block=TextBlock(text="one")),
            BlockEnd(index=1, block=TextBlock(text="two")),
            Finish(
                reason=FinishReason.STOP,
                replay_state=ReplayEnvelope(response=RESPONSE, blocks=("meta-0",)),
            ),
        ]
    )
    assert len(assembler.blocks()) == 2
    assert assembler.replay_state is None


def test_replay_state_is_the_same_object_when_nothing_is_dropped():
    envelope = ReplayEnvelope(response=RESPONSE, blocks=("meta-0", "meta-1"))
    assembler = feed(
        [
            BlockEnd(index=0, block=TextBlock(text="partial")),
            tool_end(1),
            Finish(reason=FinishReason.TOOL_CALLS, replay_state=envelope),
        ]
    )
    assert assembler.replay_state is envelope


def test_envelope_without_block_entries_survives_a_tool_call_drop():
    envelope = ReplayEnvelope(response=RESPONSE)
    assembler = feed(
        [
            BlockEnd(index=0, block=TextBlock(text="partial")),
            tool_end(1, '{"text":'),
            Finish(reason=FinishReason.MAX_TOKENS, replay_state=envelope),
        ]
    )
    assert assembler.blocks() == (TextBlock(text="partial"),)
    assert assembler.replay_state is envelope


def test_text_only_max_tokens_response_keeps_blocks_and_envelope():
    envelope = ReplayEnvelope(response=RESPONSE, blocks=("meta-0",))
    assembler = feed(
        [
            BlockEnd(index=0, block=TextBlock(text="partial")),
            Finish(reason=FinishReason.MAX_TOKENS, replay_state=envelope),
        ]
    )
    assert assembler.blocks() == (TextBlock(text="partial"),)
    assert assembler.replay_state is envelope


def test_no_replay_state_without_a_finish():
    assert feed([TextDelta(index=0, text="x")]).replay_state is None


# --- item 12 -----------------------------------------------------------------


def test_unknown_chunk_raises_unreachable_variant():
    assembler = BlockAssembler()
    with pytest.raises(
        TypeError,
        match=r'^unreachable variant in BlockAssembler.push: \{"type":"rogue-chunk"\}$',
    ):
        assembler.push({"type": "rogue-chunk"})  # type: ignore[arg-type]


def test_unreachable_variant_renders_json_or_repr():
    with pytest.raises(
        TypeError, match=r'^unreachable variant in ctx: \{"type":"rogue"\}$'
    ):
        unreachable_variant({"type": "rogue"}, "ctx")
    with pytest.raises(TypeError, match=r"^unreachable variant: null$"):
        unreachable_variant(None)
    with pytest.raises(TypeError, match=r"^unreachable variant: <object object at "):
        unreachable_variant(object())


# --- item 13 -----------------------------------------------------------------


def test_first_block_end_wins():
    assembler = feed(
        [
            BlockEnd(index=0, block=ReasoningBlock(text="first")),
            BlockEnd(index=0, block=TextBlock(text="second")),
        ]
    )
    assert assembler.blocks() == (ReasoningBlock(text="first"),)


# --- item 14 -----------------------------------------------------------------


def test_interrupted_blocks_keep_closed_and_open_text_and_reasoning_in_order():
    assembler = feed(
        [
            BlockStart(index=0, block_type="reasoning"),
            ReasoningDelta(index=0, text="planning"),
            BlockEnd(index=0, block=ReasoningBlock(text="planning")),
            BlockStart(index=1, block_type="text"),
            TextDelta(index=1, text="half an ans"),
        ]
    )
    assert assembler.interrupted_blocks() == (
        ReasoningBlock(text="planning"),
        TextBlock(text="half an ans"),
    )


def test_interrupted_blocks_drop_tool_calls_open_or_closed():
    assembler = feed(
        [
            BlockStart(index=0, block_type="text"),
            TextDelta(index=0, text="calling"),
            BlockEnd(index=0, block=TextBlock(text="calling")),
            BlockStart(index=1, block_type="tool-call"),
            ToolCallDelta(
                index=1, id=CallId("c1"), name="read", arguments_delta='{"a":1}'
            ),
            tool_end(1, '{"a":1}', name="read"),
            BlockStart(index=2, block_type="tool-call"),
            ToolCallDelta(
                index=2, id=CallId("c2"), name="read", arguments_delta='{"pa'
            ),
        ]
    )
    assert assembler.interrupted_blocks() == (TextBlock(text="calling"),)


def test_interrupted_blocks_drop_whitespace_only_and_unknown_blocks():
    assembler = feed(
        [
            BlockStart(index=0, block_type="text"),
            TextDelta(index=0, text="  \n"),
            BlockStart(index=1, block_type="mystery"),
            BlockStart(index=2, block_type="reasoning"),
        ]
    )
    assert assembler.interrupted_blocks() == ()


def test_interrupted_blocks_use_the_closed_block_type():
    # A block opened as "video" but closed with a text block counts as text.
    assembler = feed(
        [
            BlockStart(index=0, block_type="video"),
            BlockEnd(index=0, block=TextBlock(text="kept")),
        ]
    )
    assert assembler.interrupted_blocks() == (TextBlock(text="kept"),)


# --- item 22: properties over arbitrary (often malformed) chunk lists --------

_core_blocks = st.one_of(
    st.builds(TextBlock, text=st.text(max_size=8)),
    st.builds(ReasoningBlock, text=st.text(max_size=8)),
    st.builds(
        ToolCallBlock,
        id=st.text(min_size=1, max_size=4).map(CallId),
        name=st.text(max_size=4),
        arguments=st.text(max_size=8),
    ),
)
_any_chunk: st.SearchStrategy[StreamChunk] = st.one_of(
    st.builds(
        BlockStart,
        index=indexes,
        block_type=st.sampled_from(["text", "reasoning", "tool-call"]),
    ),
    st.builds(TextDelta, index=indexes, text=st.text(max_size=8)),
    st.builds(ReasoningDelta, index=indexes, text=st.text(max_size=8)),
    st.builds(
        ToolCallDelta,
        index=indexes,
        id=st.none() | st.text(max_size=4).map(CallId),
        name=st.none() | st.text(max_size=4),
        arguments_delta=st.text(max_size=8),
    ),
    st.builds(BlockEnd, index=indexes, block=_core_blocks),
    st.builds(UsageChunk, usage=token_usages),
    st.builds(Finish, reason=finish_reasons),
)
_chunk_lists = st.lists(_any_chunk, max_size=30)


def _index(chunk: StreamChunk) -> int | None:
    return getattr(chunk, "index", None)


@given(_chunk_lists)
def test_blocks_never_exceed_distinct_indexes(chunks):
    distinct = {_index(c) for c in chunks} - {None}
    assert len(feed(chunks).blocks()) <= len(distinct)


@given(_chunk_lists)
def test_blocks_are_idempotent_and_equal_message_content(chunks):
    assembler = feed(chunks)
    first = assembler.blocks()
    assert assembler.blocks() == first
    assert assembler.message().content == first


@given(_chunk_lists)
def test_blocks_never_raise_and_use_core_tags_only(chunks):
    for block in feed(chunks).blocks():
        assert block.type in ("text", "reasoning", "tool-call", "tool-result")


@given(_chunk_lists)
def test_finish_is_the_last_finish_or_stop(chunks):
    finishes = [c for c in chunks if isinstance(c, Finish)]
    expected = finishes[-1].reason if finishes else FinishReason.STOP
    assert feed(chunks).finish == expected


# --- assembling generated valid streams --------------------------------------


@given(stream_plans())
def test_assembling_a_generated_stream_gives_back_the_plans_blocks(plan: StreamPlan):
    assembler = feed(list(plan.chunks()))
    assert assembler.blocks() == plan.expected_blocks()
    assert assembler.usage == plan.usage
    assert assembler.finish == plan.finish
    assert assembler.replay_state == plan.expected_replay_state()
    expected_text = "".join(
        b.text for b in plan.expected_blocks() if isinstance(b, TextBlock)
    )
    assert assembler.text == expected_text


@given(stream_plans())
def test_collect_returns_the_plan_or_raises_its_failure(plan: StreamPlan):
    if plan.finish.failure is None:
        response = collect(plan.chunks())
        assert response.message.content == plan.expected_blocks()
        assert response.usage == plan.usage
        assert response.finish == plan.finish
    else:
        with pytest.raises(LlmError) as caught:
            collect(plan.chunks())
        assert caught.value.failure == plan.finish.failure


# --- collect -----------------------------------------------------------------

TEXT_STREAM: list[StreamChunk] = [
    BlockStart(index=0, block_type="reasoning"),
    ReasoningDelta(index=0, text="hmm"),
    BlockEnd(index=0, block=ReasoningBlock(text="hmm")),
    BlockStart(index=1, block_type="text"),
    TextDelta(index=1, text="hello"),
    BlockEnd(index=1, block=TextBlock(text="hello")),
    UsageChunk(usage=USAGE),
    Finish(reason=FinishReason.STOP),
]


def test_collect_assembles_message_usage_and_finish():
    response = collect(iter(TEXT_STREAM))
    assert isinstance(response, AssembledResponse)
    assert response.message.role == "assistant"
    assert response.message.content == (
        ReasoningBlock(text="hmm"),
        TextBlock(text="hello"),
    )
    assert response.usage == USAGE
    assert response.finish == FinishReason.STOP
    assert response.text == "hello"
    assert response.reasoning == "hmm"
    assert response.tool_calls == ()


def test_collect_passes_the_source_to_the_message():
    source = ModelSource(provider="p", model="m")
    assert collect(TEXT_STREAM, source=source).message.source == source


def test_collect_exposes_tool_calls():
    chunks: list[StreamChunk] = [*INTERLEAVED[6:9], tool_end(2, '{"text":"hi"}')]
    chunks += [UsageChunk(usage=USAGE), Finish(reason=FinishReason.TOOL_CALLS)]
    assert collect(chunks).tool_calls == (
        ToolCallBlock(id=CallId("c1"), name="echo", arguments='{"text":"hi"}'),
    )


@pytest.mark.parametrize("kind", ["error", "aborted"])
def test_collect_raises_the_failure_of_an_error_or_aborted_finish(kind):
    failure = LlmFailure(
        message="rate limited",
        code="RATE_LIMIT",
        status=429,
        provider_retry_after_ms=1500,
        request_id="req-9",
    )
    chunks: list[StreamChunk] = [
        BlockStart(index=0, block_type="text"),
        TextDelta(index=0, text="partial"),
        Finish(reason=FinishReason(kind=kind, failure=failure)),
    ]
    with pytest.raises(LlmError) as caught:
        collect(chunks)
    assert caught.value.code == "RATE_LIMIT"
    assert caught.value.message == "rate limited"
    assert caught.value.failure == failure


@pytest.mark.parametrize(
    "chunks",
    [[], [BlockStart(index=0, block_type="text"), TextDelta(index=0, text="cut")]],
    ids=["empty", "truncated"],
)
def test_collect_raises_stream_closed_when_the_stream_has_no_finish(chunks):
    with pytest.raises(LlmError) as caught:
        collect(chunks)
    assert caught.value.code == ErrorCode.STREAM_CLOSED
    assert "without a finish chunk" in caught.value.message


def test_collect_propagates_a_source_exception_unchanged():
    failure = LlmError("connection reset", ErrorCode.TRANSPORT)

    def source() -> Iterator[StreamChunk]:
        yield TEXT_STREAM[0]
        raise failure

    with pytest.raises(LlmError) as caught:
        collect(source())
    assert caught.value is failure


def test_collect_closes_the_source_when_a_chunk_cannot_be_assembled():
    closed = []

    def source() -> Iterator[object]:
        try:
            yield TEXT_STREAM[0]
            yield {"type": "rogue"}
            yield TEXT_STREAM[1]
        finally:
            closed.append(True)

    with pytest.raises(TypeError, match="unreachable variant"):
        collect(source())  # type: ignore[arg-type]
    assert closed == [True]


def test_collect_over_validate_stream_reports_violations_first():
    with pytest.raises(LlmError) as caught:
        collect(validate_stream(TEXT_STREAM[:-1]))
    assert caught.value.code == ErrorCode.INVARIANT


# --- assemble_stream ----------------------------------------------------------


class _ClosableChunks:
    """An iterator (not a generator) that records whether it was closed."""

    def __init__(self, chunks: list[StreamChunk]) -> None:
        self._chunks = iter(chunks)
        self.closed = False

    def __iter__(self) -> _ClosableChunks:
        return self

    def __next__(self) -> StreamChunk:
        return next(self._chunks)

    def close(self) -> None:
        self.closed = True


def test_assemble_stream_returns_the_assembler_and_the_finish_and_closes_the_source():
    source = _ClosableChunks(TEXT_STREAM)
    assembler, reason = assemble_stream(source)
    assert reason == FinishReason.STOP
    assert assembler.blocks() == (ReasoningBlock(text="hmm"), TextBlock(text="hello"))
    assert assembler.usage == USAGE
    assert source.closed


def test_assemble_stream_keeps_a_failure_finish_with_the_partial_output():
    failure = LlmFailure(message="rate limited", code="RATE_LIMIT", status=429)
    chunks: list[StreamChunk] = [
        BlockStart(index=0, block_type="text"),
        TextDelta(index=0, text="partial"),
        Finish(reason=FinishReason.error(failure)),
    ]
    assembler, reason = assemble_stream(chunks)
    assert reason == FinishReason.error(failure)
    assert assembler.blocks() == (TextBlock(text="partial"),)


def test_assemble_stream_reports_a_stream_without_finish_as_stream_closed():
    chunks: list[StreamChunk] = [
        BlockStart(index=0, block_type="text"),
        TextDelta(index=0, text="cut"),
    ]
    assembler, reason = assemble_stream(chunks)
    assert reason == FinishReason.error(
        LlmFailure(
            message="stream ended without a finish chunk; its output may be truncated",
            code="STREAM_CLOSED",
        )
    )
    assert assembler.finish == FinishReason.STOP
    assert assembler.blocks() == (TextBlock(text="cut"),)


def test_the_response_and_the_message_share_the_accessors() -> None:
    call = ToolCallBlock(id=CallId("c1"), name="f", arguments="{}")
    blocks = (
        ReasoningBlock(text="think "),
        TextBlock(text="a"),
        call,
        ReasoningBlock(text="again"),
        TextBlock(text="b"),
    )
    message = create_assistant_message(blocks, provider="p", model="m")
    response = AssembledResponse(
        message=message, usage=None, finish=FinishReason.TOOL_CALLS
    )
    for holder in (message, response):
        assert holder.text == "ab"
        assert holder.reasoning == "think again"
        assert holder.tool_calls == (call,)
    assert response.ok
    assert response.attempts == 1


def test_a_response_is_validated_and_failures_are_not_ok() -> None:
    message = BlockAssembler().message()
    failed = FinishReason.error(LlmFailure(message="down", code="SERVER"))
    response = AssembledResponse(message=message, usage=None, finish=failed, attempts=3)
    assert not response.ok
    assert response.attempts == 3
    for bad in ({"attempts": 0}, {"attempts": True}, {"usage": 3}, {"finish": "stop"}):
        fields = {"message": message, "usage": None, "finish": FinishReason.STOP}
        with pytest.raises((TypeError, ValueError)):
            AssembledResponse(**(fields | bad))  # type: ignore[arg-type]
    with pytest.raises((TypeError, ValueError)):
        AssembledResponse(message="hi", usage=None, finish=FinishReason.STOP)  # type: ignore[arg-type]


# --- what collect keeps for the next turn and for billing -----------------------

REPLAY = ReplayEnvelope(response={"wire": "w", "id": "r1"}, blocks=({"sig": "s"},))
REPLAYED_STREAM: list[StreamChunk] = [
    BlockStart(index=0, block_type="reasoning"),
    ReasoningDelta(index=0, text="think"),
    BlockEnd(index=0, block=ReasoningBlock(text="think")),
    UsageChunk(usage=TokenUsage(input_tokens=3, output_tokens=4)),
    Finish(reason=FinishReason.STOP, replay_state=REPLAY),
]


def test_collect_of_a_chunk_stream_keeps_route_model_and_replay_state():
    options = GenerateOptions.from_prompt("m-1", "hi", provider="route-a")
    reply = collect(ChunkStream(iter_chunks(REPLAYED_STREAM), options))
    source = reply.message.source
    assert isinstance(source, ModelSource)
    assert (source.provider, source.model) == ("route-a", "m-1")
    assert source.replay_state == REPLAY


def test_collect_with_options_keeps_the_replay_state_of_a_plain_iterable():
    options = GenerateOptions.from_prompt("m-1", "hi", provider="route-a")
    reply = collect(REPLAYED_STREAM, options=options)
    assert isinstance(reply.message.source, ModelSource)
    assert reply.message.source.replay_state == REPLAY
    # Without options nothing names the route: no replay state is claimed.
    assert reply.message.source != collect(REPLAYED_STREAM).message.source
    assert collect(REPLAYED_STREAM).message.source == ASSEMBLER_SOURCE


def test_the_error_collect_raises_carries_the_usage_reported_before_it():
    usage = TokenUsage(input_tokens=7, output_tokens=2)
    failure = LlmFailure(message="overloaded", code="SERVER")
    finished: list[StreamChunk] = [
        BlockStart(index=0, block_type="text"),
        TextDelta(index=0, text="partial"),
        UsageChunk(usage=usage),
        Finish(reason=FinishReason.error(failure)),
    ]
    with pytest.raises(LlmError) as caught:
        collect(finished)
    assert caught.value.usage == usage

    def raising() -> Iterator[StreamChunk]:
        yield from finished[:3]
        raise LlmError("overloaded", ErrorCode.SERVER)

    with pytest.raises(LlmError) as raised:
        collect(raising())
    assert raised.value.usage == usage
    # A failure before any usage has none to carry.
    with pytest.raises(LlmError) as bare:
        collect([Finish(reason=FinishReason.error(failure))])
    assert bare.value.usage is None


def iter_chunks(chunks: list[StreamChunk]) -> Iterator[StreamChunk]:
    yield from chunks
