"""``dsh_llm.adapters.BlockWriter``: the one writer of the protocol's rules.

A translator says what the wire said; these tests say it directly and check the
chunks the writer makes of it, each against the strict validator too.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_llm.adapters import EMPTY_RESPONSE_MESSAGE
from dsh_llm.adapters import BlockWriter
from dsh_llm.adapters._wire.writer import stopped_failure
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import BlockEnd
from dsh_llm.protocol import BlockStart
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import ImageBlock
from dsh_llm.protocol import ImageRef
from dsh_llm.protocol import LlmFailure
from dsh_llm.protocol import ReasoningBlock
from dsh_llm.protocol import ReplayEnvelope
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import TextDelta
from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.protocol import ToolCallDelta
from dsh_llm.protocol import UsageChunk
from dsh_llm.validator import assert_chunk_sequence

USAGE = TokenUsage(input_tokens=3, output_tokens=5)


def strict(chunks: list[StreamChunk]) -> list[StreamChunk]:
    assert_chunk_sequence(chunks, strict=True)
    return chunks


def test_a_live_item_streams_and_ends_with_what_it_received() -> None:
    writer = BlockWriter(provider="P")
    text = writer.open("text")
    assert writer.take() == []  # an empty text item does not show yet
    writer.append(text, "Hel")
    writer.append(text, "lo")
    writer.end(text)
    writer.report_usage(USAGE)
    writer.finish(FinishReason.STOP)
    assert strict(writer.take()) == [
        BlockStart(index=0, block_type="text"),
        TextDelta(index=0, text="Hel"),
        TextDelta(index=0, text="lo"),
        BlockEnd(index=0, block=TextBlock(text="Hello")),
        UsageChunk(usage=USAGE),
        Finish(reason=FinishReason.STOP),
    ]
    assert writer.finished


def test_an_item_opened_behind_the_live_one_is_buffered_and_flushed_in_order() -> None:
    writer = BlockWriter(provider="P")
    call = writer.open("tool-call", call_id="c1", name="f")
    text = writer.open("text")
    writer.append(text, "after")  # behind the call: buffered
    writer.append(call, '{"a"')
    writer.append(call, ":1}")
    writer.end_all()
    writer.finish(FinishReason.STOP)  # corrected: a tool call was emitted
    chunks = strict(writer.take())
    assert chunks == [
        BlockStart(index=0, block_type="tool-call"),
        ToolCallDelta(index=0, id="c1", name="f", arguments_delta=""),
        ToolCallDelta(index=0, id="c1", name="f", arguments_delta='{"a"'),
        ToolCallDelta(index=0, id="c1", name="f", arguments_delta=":1}"),
        BlockEnd(index=0, block=ToolCallBlock(id="c1", name="f", arguments='{"a":1}')),
        BlockStart(index=1, block_type="text"),
        TextDelta(index=1, text="after"),
        BlockEnd(index=1, block=TextBlock(text="after")),
        UsageChunk(usage=TokenUsage.unknown()),
        Finish(reason=FinishReason.TOOL_CALLS),
    ]


def test_a_whole_call_is_one_delta_and_an_unannounced_call_starts_bare() -> None:
    writer = BlockWriter(provider="P")
    whole = writer.open("tool-call", call_id="c1", name="f", text='{"x":2}')
    writer.end(whole)
    quiet = writer.open("tool-call", call_id="c2", name="g", announce=False)
    assert writer.take() == [
        BlockStart(index=0, block_type="tool-call"),
        ToolCallDelta(index=0, id="c1", name="f", arguments_delta='{"x":2}'),
        BlockEnd(index=0, block=ToolCallBlock(id="c1", name="f", arguments='{"x":2}')),
        BlockStart(index=1, block_type="tool-call"),
    ]
    writer.end(quiet)
    # A call that received no argument text ends with "{}" (rule 6).
    assert writer.take() == [
        ToolCallDelta(index=1, id="c2", name="g", arguments_delta="{}"),
        BlockEnd(index=1, block=ToolCallBlock(id="c2", name="g", arguments="{}")),
    ]


def test_a_name_may_grow_or_arrive_until_a_delta_carried_it() -> None:
    writer = BlockWriter(provider="P")
    call = writer.open("tool-call", call_id="c", announce=False)
    writer.extend_name(call, "ba")
    writer.extend_name(call, "sh")
    writer.append(call, "{}")
    with pytest.raises(LlmError) as caught:
        writer.extend_name(call, "x")
    assert caught.value.code == ErrorCode.MALFORMED_RESPONSE
    assert "tool name that changed" in caught.value.message
    writer.set_name(call, "bash")  # the same name: nothing to change
    writer.end(call)
    *_, end = writer.take()
    assert end == BlockEnd(
        index=0, block=ToolCallBlock(id="c", name="bash", arguments="{}")
    )
    with pytest.raises(LlmError, match="tool call id that changed"):
        writer.set_call_id(call, "other")


def test_a_tool_call_without_a_name_is_malformed() -> None:
    writer = BlockWriter(provider="Srv")
    call = writer.open("tool-call", call_id="c")
    with pytest.raises(LlmError) as caught:
        writer.end(call)
    assert caught.value.code == ErrorCode.MALFORMED_RESPONSE
    assert caught.value.message == "Srv sent a tool call without a name in its stream"


def test_an_empty_text_item_is_dropped_and_a_reasoning_item_shows_empty() -> None:
    writer = BlockWriter(provider="P")
    writer.end(writer.open("text"))
    signed = writer.open("reasoning")
    signed.replay = "sig"
    writer.end(signed)
    writer.finish(
        FinishReason.STOP,
        replay=lambda: ReplayEnvelope(
            response={"wire": "w"}, blocks=tuple(b.replay for b in writer.emitted)
        ),
    )
    chunks = strict(writer.take())
    assert chunks[:2] == [
        BlockStart(index=0, block_type="reasoning"),
        BlockEnd(index=0, block=ReasoningBlock(text="")),
    ]
    finish = chunks[-1]
    assert isinstance(finish, Finish)
    assert finish.replay_state == ReplayEnvelope(
        response={"wire": "w"}, blocks=("sig",)
    )


@pytest.mark.parametrize(
    ("empty_as_stop", "override", "kind"),
    [(False, None, "error"), (True, None, "stop"), (True, False, "error")],
)
def test_a_blockless_stop_is_empty_response_unless_taken_as_stop(
    empty_as_stop: bool, override: bool | None, kind: str
) -> None:
    writer = BlockWriter(provider="P", empty_response_as_stop=empty_as_stop)
    writer.finish(FinishReason.STOP, empty_as_stop=override)
    usage, finish = strict(writer.take())
    assert usage == UsageChunk(usage=TokenUsage.unknown())
    assert isinstance(finish, Finish)
    assert finish.reason.kind == kind
    if kind == "error":
        assert finish.reason.failure == LlmFailure(
            message=EMPTY_RESPONSE_MESSAGE, code=ErrorCode.EMPTY_RESPONSE
        )


def test_tool_calls_without_a_tool_block_is_corrected_to_stop() -> None:
    writer = BlockWriter(provider="P")
    text = writer.open("text", text="hi")
    writer.end(text)
    writer.finish(FinishReason.TOOL_CALLS)
    assert writer.take()[-1] == Finish(reason=FinishReason.STOP)


def test_an_item_never_closed_is_a_cut_answer_unless_the_cap_cut_it() -> None:
    writer = BlockWriter(provider="P")
    writer.append(writer.open("text"), "half")
    with pytest.raises(LlmError) as caught:
        writer.finish(FinishReason.STOP)
    assert caught.value.code == ErrorCode.STREAM_CLOSED
    assert not writer.finished

    capped = BlockWriter(provider="P")
    capped.append(capped.open("text"), "half")
    capped.finish(FinishReason.MAX_TOKENS)
    assert strict(capped.take())[-1] == Finish(reason=FinishReason.MAX_TOKENS)


def test_the_usage_already_reported_comes_right_before_a_failure_once() -> None:
    writer = BlockWriter(provider="P")
    writer.append(writer.open("text"), "partial")
    writer.report_usage(lambda: USAGE)  # read only when needed
    assert writer.before_failure() == [
        BlockStart(index=0, block_type="text"),
        TextDelta(index=0, text="partial"),
        UsageChunk(usage=USAGE),
    ]
    assert writer.before_failure() == []


def test_a_provider_s_unsuccessful_finish_ends_the_blocks_then_usage() -> None:
    writer = BlockWriter(provider="P")
    writer.append(writer.open("text"), "so far")
    failure = LlmFailure(message="model stopped: content_filter", code="CONTENT_FILTER")
    writer.finish_unsuccessfully(failure)
    chunks = strict(writer.take())
    assert chunks[-3:] == [
        BlockEnd(index=0, block=TextBlock(text="so far")),
        UsageChunk(usage=TokenUsage.unknown()),
        Finish(reason=FinishReason.error(failure)),
    ]
    with pytest.raises(ValueError, match="already finished"):
        writer.open("text")


IMAGE = ImageBlock(
    attachment=ImageRef(
        attachment_id="sha256:" + "ab" * 32,
        media_type="image/png",
        bytes=68,
        width=1,
        height=1,
    )
)


def test_an_image_is_a_whole_block_in_opening_order() -> None:
    writer = BlockWriter(provider="P")
    text = writer.open("text", text="Here:")
    image = writer.open_image(IMAGE)
    first = writer.take()
    assert first == [
        BlockStart(index=0, block_type="text"),
        TextDelta(index=0, text="Here:"),
    ]  # behind the live text: held until it ends
    assert image.ended
    writer.end(text)
    after = writer.open("text", text="done")
    writer.end(after)
    writer.finish(FinishReason.STOP)
    chunks = strict(first + writer.take())
    assert chunks[2:] == [
        BlockEnd(index=0, block=TextBlock(text="Here:")),
        BlockStart(index=1, block_type="image"),
        BlockEnd(index=1, block=IMAGE),
        BlockStart(index=2, block_type="text"),
        TextDelta(index=2, text="done"),
        BlockEnd(index=2, block=TextBlock(text="done")),
        UsageChunk(usage=TokenUsage.unknown()),
        Finish(reason=FinishReason.STOP),
    ]
    assert [block.index for block in writer.emitted] == [0, 1, 2]


def test_an_image_alone_is_an_answer_and_takes_no_text() -> None:
    writer = BlockWriter(provider="P")
    image = writer.open_image(IMAGE)
    with pytest.raises(ValueError, match="already ended"):
        writer.append(image, "x")
    with pytest.raises(ValueError, match="open_whole"):
        writer.open("image")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="ImageBlock"):
        writer.open_image(TextBlock(text="x"))  # type: ignore[arg-type]
    writer.finish(FinishReason.STOP)  # an image is content: no EMPTY_RESPONSE
    assert strict(writer.take()) == [
        BlockStart(index=0, block_type="image"),
        BlockEnd(index=0, block=IMAGE),
        UsageChunk(usage=TokenUsage.unknown()),
        Finish(reason=FinishReason.STOP),
    ]
    with pytest.raises(ValueError, match="already finished"):
        writer.open_image(IMAGE)


def test_a_failure_is_never_written_as_a_finish() -> None:
    writer = BlockWriter(provider="P")
    failure = LlmFailure(message="x", code="SERVER")
    with pytest.raises(ValueError, match="raised, never written"):
        writer.finish(FinishReason.error(failure))


KINDS = st.sampled_from(["text", "reasoning", "tool-call"])


@given(
    st.lists(
        st.tuples(KINDS, st.lists(st.text(min_size=1, max_size=4), max_size=3)),
        max_size=5,
    ),
    st.lists(st.integers(0, 4), max_size=6),
)
def test_any_opening_and_ending_order_gives_a_strict_lossless_stream(
    items: list[tuple[str, list[str]]], ends: list[int]
) -> None:
    writer = BlockWriter(provider="P", empty_response_as_stop=True)
    blocks = []
    for number, (kind, pieces) in enumerate(items):
        block = writer.open(kind, call_id=f"c{number}", name="f")  # type: ignore[arg-type]
        blocks.append((block, "".join(pieces)))
        for piece in pieces:
            writer.append(block, piece)
    for at in ends:
        if at < len(blocks):
            writer.end(blocks[at][0])
    writer.end_all()
    writer.finish(FinishReason.STOP)
    chunks = strict(writer.take())
    ended = [c.block for c in chunks if isinstance(c, BlockEnd)]
    expected = [
        (kind, text)
        for (kind, _), (_, text) in zip(items, blocks, strict=True)
        if kind != "text" or text
    ]
    got = [
        (b.type, b.arguments if isinstance(b, ToolCallBlock) else b.text)  # type: ignore[union-attr]
        for b in ended
    ]
    assert got == [
        (kind, "{}" if kind == "tool-call" and not text else text)
        for kind, text in expected
    ]


def test_a_provider_reason_without_a_kind_is_coded_upper_cased() -> None:
    assert stopped_failure("content_filter") == LlmFailure(
        message="model stopped: content_filter", code="CONTENT_FILTER"
    )
    odd = stopped_failure("no such reason!" * 20, who="Srv")
    assert odd.code == ErrorCode.UNKNOWN_FINISH_REASON
    assert odd.message == "Srv stopped: " + ("no such reason!" * 20)[:120]
