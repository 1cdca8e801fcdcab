"""Citations and server tool blocks (issue 30): the values, their JSON (old
chunks byte-identical to the TypeScript harness's), the strict validator's
citation rule, the writer's ``cite`` and ``open_whole``, and assembly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from dsh_llm.adapters import BlockWriter
from dsh_llm.adapters._wire.values import unchecked_delta
from dsh_llm.assembler import collect
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import BlockEnd
from dsh_llm.protocol import BlockStart
from dsh_llm.protocol import CallId
from dsh_llm.protocol import Citation
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import ServerToolCallBlock
from dsh_llm.protocol import ServerToolResultBlock
from dsh_llm.protocol import Source
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import TextDelta
from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol import UsageChunk
from dsh_llm.protocol import create_assistant_message
from dsh_llm.protocol import tool_calls_of
from dsh_llm.serde import chunk_from_json
from dsh_llm.serde import chunk_to_json
from dsh_llm.serde import message_from_dict
from dsh_llm.serde import message_to_dict
from dsh_llm.validator import assert_chunk_sequence

WEB = Citation(
    kind="web_search_result_location",
    cited_text="Sunny, 21 C",
    url="https://example.com/",
    title="Example",
    encrypted_index="Eo8B",
)
PAGE = Citation(kind="page_location", source_index=0, start=2, end=3)
CALL = ServerToolCallBlock(
    id=CallId("srvtoolu_1"),
    name="web_search",
    input='{"query":"weather Oslo"}',
    data={"type": "server_tool_use", "id": "srvtoolu_1"},
)
RESULT = ServerToolResultBlock(
    tool_call_id=CallId("srvtoolu_1"),
    name="web_search",
    sources=(Source(url="https://example.com/", title="Example", page_age="1d"),),
    data={"type": "web_search_tool_result", "content": [{"encrypted_content": "x"}]},
)
USAGE = UsageChunk(usage=TokenUsage(input_tokens=1, output_tokens=2))


def test_chunks_without_citations_serialise_exactly_as_before() -> None:
    # What JSON.stringify writes for the TypeScript harness's chunks: the new
    # optional field is absent, also from a writer's unchecked delta.
    assert chunk_to_json(TextDelta(index=0, text="hi")) == (
        '{"type":"text-delta","index":0,"text":"hi"}'
    )
    assert chunk_to_json(unchecked_delta(TextDelta, 0, "hi")) == (
        '{"type":"text-delta","index":0,"text":"hi"}'
    )
    assert chunk_to_json(BlockEnd(index=0, block=TextBlock(text="hi"))) == (
        '{"type":"block-end","index":0,"block":{"type":"text","text":"hi"}}'
    )


def test_citations_and_server_blocks_have_camel_case_json_that_round_trips() -> None:
    delta = TextDelta(index=2, text="", citations=(WEB,))
    assert chunk_to_json(delta) == (
        '{"type":"text-delta","index":2,"text":"","citations":[{"kind":'
        '"web_search_result_location","citedText":"Sunny, 21 C","url":'
        '"https://example.com/","title":"Example","encryptedIndex":"Eo8B"}]}'
    )
    assert chunk_to_json(BlockEnd(index=0, block=CALL)) == (
        '{"type":"block-end","index":0,"block":{"type":"server-tool-call",'
        '"id":"srvtoolu_1","name":"web_search","input":"{\\"query\\":\\"weather '
        'Oslo\\"}","data":{"type":"server_tool_use","id":"srvtoolu_1"}}}'
    )
    result = chunk_to_json(BlockEnd(index=1, block=RESULT))
    assert '"toolCallId":"srvtoolu_1"' in result
    assert '"sources":[{"url":"https://example.com/","title":"Example",' in result
    assert '"pageAge":"1d"' in result
    assert '"output"' not in result
    assert '"isError"' not in result
    for chunk in (
        delta,
        BlockEnd(index=0, block=CALL),
        BlockEnd(index=1, block=RESULT),
    ):
        assert chunk_from_json(chunk_to_json(chunk)) == chunk
    message = create_assistant_message(
        (CALL, RESULT, TextBlock(text="x", citations=(WEB, PAGE))),
        provider="p",
        model="m",
    )
    assert message_from_dict(message_to_dict(message)) == message


def test_values_validate_and_detach_their_data() -> None:
    with pytest.raises(ValueError, match=r"Citation\.kind must be one of"):
        Citation(kind="footnote")
    with pytest.raises(TypeError, match=r"Citation\.start must be an int"):
        Citation(kind="char_location", start="0")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"TextBlock\.citations"):
        TextBlock(text="x", citations=("https://example.com",))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"ServerToolCallBlock\.data must hold only"):
        ServerToolCallBlock(id=CallId("a"), name="n", input="{}", data={"x": object()})
    given: dict[str, Any] = {"content": [1]}
    result = ServerToolResultBlock(tool_call_id=CallId("a"), name="n", data=given)
    given["content"].append(2)
    assert result.data == {"content": [1]}
    assert hash(result) == hash(
        ServerToolResultBlock(tool_call_id=CallId("a"), name="n")
    )


def test_server_tool_calls_are_not_client_tool_calls() -> None:
    assert tool_calls_of((CALL, RESULT, TextBlock(text="x"))) == ()


def test_strict_validator_checks_the_citations_add_up() -> None:
    good = [
        BlockStart(index=0, block_type="text"),
        TextDelta(index=0, text="Sunny"),
        TextDelta(index=0, text="", citations=(WEB,)),
        TextDelta(index=0, text=".", citations=(PAGE,)),
        BlockEnd(index=0, block=TextBlock(text="Sunny.", citations=(WEB, PAGE))),
        USAGE,
        Finish(reason=FinishReason.STOP),
    ]
    assert_chunk_sequence(good)
    wrong = [*good]
    wrong[4] = BlockEnd(index=0, block=TextBlock(text="Sunny.", citations=(PAGE, WEB)))
    with pytest.raises(LlmError) as caught:
        assert_chunk_sequence(wrong)
    assert caught.value.code == ErrorCode.INVARIANT
    assert "its 2 citations are not the 2 citations its deltas carried" in str(
        caught.value
    )
    missing = [*good]
    missing[4] = BlockEnd(index=0, block=TextBlock(text="Sunny."))
    with pytest.raises(LlmError, match="its 0 citations are not the 2"):
        assert_chunk_sequence(missing)
    assert_chunk_sequence(missing, strict=False)  # TypeScript's rules: no such check


def test_strict_validator_takes_server_blocks_whole() -> None:
    assert_chunk_sequence(
        [
            BlockStart(index=0, block_type="server-tool-call"),
            BlockEnd(index=0, block=CALL),
            BlockStart(index=1, block_type="server-tool-result"),
            BlockEnd(index=1, block=RESULT),
            USAGE,
            Finish(reason=FinishReason.STOP),
        ]
    )
    with pytest.raises(LlmError, match="delta type mismatch"):
        assert_chunk_sequence(
            [
                BlockStart(index=0, block_type="server-tool-call"),
                TextDelta(index=0, text="x"),
            ]
        )


def test_writer_streams_citations_in_order_with_their_text() -> None:
    writer = BlockWriter(provider="P")
    block = writer.open("text")
    writer.cite(block, [WEB])  # the live item shows at once, with no text yet
    writer.append(block, "Sunny")
    writer.cite(block, [PAGE])  # live: a delta with no text
    writer.cite(block, [])  # nothing
    writer.append(block, ".")
    writer.end(block)
    writer.finish(FinishReason.STOP)
    chunks = writer.take()
    assert_chunk_sequence(chunks)
    assert chunks[:6] == [
        BlockStart(index=0, block_type="text"),
        TextDelta(index=0, text="", citations=(WEB,)),
        TextDelta(index=0, text="Sunny"),
        TextDelta(index=0, text="", citations=(PAGE,)),
        TextDelta(index=0, text="."),
        BlockEnd(index=0, block=TextBlock(text="Sunny.", citations=(WEB, PAGE))),
    ]


def test_writer_buffers_the_citations_of_an_item_behind_the_live_one() -> None:
    writer = BlockWriter(provider="P")
    first = writer.open("text")
    second = writer.open("text")
    writer.append(second, "B")
    writer.cite(second, [PAGE])
    writer.append(first, "A")
    writer.end(first)
    writer.end(second)
    writer.finish(FinishReason.STOP)
    chunks = writer.take()
    assert_chunk_sequence(chunks)
    assert TextDelta(index=1, text="B", citations=(PAGE,)) in chunks
    assert collect(chunks).citations == (PAGE,)


def test_a_text_item_with_citations_only_is_kept() -> None:
    writer = BlockWriter(provider="P")
    block = writer.open("text")
    writer.cite(block, [WEB])
    writer.end(block)
    writer.finish(FinishReason.STOP)
    chunks = writer.take()
    assert_chunk_sequence(chunks)
    assert chunks[1] == TextDelta(index=0, text="", citations=(WEB,))
    assert collect(chunks).message.content == (TextBlock(text="", citations=(WEB,)),)


def test_cite_refuses_what_cannot_carry_citations() -> None:
    writer = BlockWriter(provider="P")
    reasoning = writer.open("reasoning")
    with pytest.raises(ValueError, match="only a text item takes citations"):
        writer.cite(reasoning, [WEB])
    text = writer.open("text")
    with pytest.raises(TypeError, match="Citation values"):
        writer.cite(text, ["https://example.com"])  # type: ignore[list-item]
    writer.append(reasoning, "r")
    writer.end(reasoning)
    writer.append(text, "t")
    writer.end(text)
    with pytest.raises(ValueError, match="already ended"):
        writer.cite(text, [WEB])


def test_server_blocks_are_whole_and_a_stream_of_only_them_finishes_stop() -> None:
    writer = BlockWriter(provider="P")
    text = writer.open("text")
    call = writer.open_whole(CALL)  # behind the live text: waits for it
    writer.open_whole(RESULT)
    with pytest.raises(ValueError, match="already ended"):
        writer.append(call, "x")
    with pytest.raises(ValueError, match="open_whole"):
        writer.open("server-tool-call")
    with pytest.raises(TypeError, match="open_whole takes"):
        writer.open_whole(TextBlock(text="x"))  # type: ignore[arg-type]
    writer.append(text, "Searching.")
    writer.end(text)
    writer.finish(FinishReason.TOOL_CALLS)  # what a provider may say: corrected
    chunks = writer.take()
    assert_chunk_sequence(chunks)
    assert chunks[3:7] == [
        BlockStart(index=1, block_type="server-tool-call"),
        BlockEnd(index=1, block=CALL),
        BlockStart(index=2, block_type="server-tool-result"),
        BlockEnd(index=2, block=RESULT),
    ]
    assert chunks[-1] == Finish(reason=FinishReason.STOP)

    alone = BlockWriter(provider="P")
    alone.open_whole(CALL)
    alone.finish(FinishReason.STOP)  # content: no EMPTY_RESPONSE
    reply = collect(alone.take())
    assert reply.finish == FinishReason.STOP
    assert reply.message.content == (CALL,)
    assert reply.tool_calls == ()


def test_assembler_keeps_citations_of_an_open_block() -> None:
    chunks: list[StreamChunk] = [
        BlockStart(index=0, block_type="text"),
        TextDelta(index=0, text="a", citations=(WEB,)),
        TextDelta(index=0, text="b", citations=(PAGE,)),
        USAGE,
        Finish(reason=FinishReason.STOP),
    ]
    reply = collect(chunks)
    assert reply.message.content == (TextBlock(text="ab", citations=(WEB, PAGE)),)
    assert reply.citations == reply.message.citations == (WEB, PAGE)


def test_the_cli_printer_shows_citations_and_server_tools() -> None:
    import io

    from dsh_llm.cli.console import ChunkPrinter

    out, err = io.StringIO(), io.StringIO()
    printer = ChunkPrinter(out, err, color=False)
    for chunk in [
        BlockStart(index=0, block_type="server-tool-call"),
        BlockEnd(index=0, block=CALL),
        BlockStart(index=1, block_type="text"),
        TextDelta(index=1, text="Sunny.", citations=(WEB,)),
        BlockEnd(index=1, block=TextBlock(text="Sunny.", citations=(WEB,))),
    ]:
        printer.write(chunk)
    printer.end()
    assert (
        out.getvalue() == "Sunny.\n[1] Example: 'Sunny, 21 C' <https://example.com/>\n"
    )
    assert err.getvalue() == '[server tool web_search \'{"query":"weather Oslo"}\']\n'


def test_a_reserved_item_waits_for_its_block_and_holds_its_place() -> None:
    writer = BlockWriter(provider="P")
    with pytest.raises(ValueError, match="only a whole item is reserved"):
        writer.reserve("text")
    call = writer.reserve("server-tool-call")
    after = writer.open("text", text="later")
    writer.end(after)
    assert writer.take() == []  # the text waits behind the reserved call
    with pytest.raises(TypeError, match="takes no"):
        writer.complete(call, RESULT)
    writer.complete(call, CALL)
    with pytest.raises(ValueError, match="not a reserved item waiting"):
        writer.complete(call, CALL)
    writer.finish(FinishReason.STOP)
    chunks = writer.take()
    assert_chunk_sequence(chunks)
    assert chunks[:3] == [
        BlockStart(index=0, block_type="server-tool-call"),
        BlockEnd(index=0, block=CALL),
        BlockStart(index=1, block_type="text"),
    ]


def test_a_reply_repr_counts_its_citations() -> None:
    reply = collect(
        [
            BlockStart(index=0, block_type="text"),
            TextDelta(index=0, text="a", citations=(WEB, PAGE)),
            USAGE,
            Finish(reason=FinishReason.STOP),
        ]
    )
    assert "citations=2" in repr(reply)
    assert "citations=2" in repr(reply.message)


FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _recorded_lines() -> list[str]:
    lines: list[str] = []
    for path in sorted(FIXTURES.rglob("*.jsonl")):
        if "cassettes" in path.parts or path.name == "not_chunks.jsonl":
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip() and not line.startswith("\ufeff"):
                lines.append(line)
    return lines


def test_every_recorded_chunk_line_reads_back_byte_for_byte() -> None:
    # The expected chunks of every fixture, written before and after citations
    # existed: read and written again, each line is exactly what it was.
    lines = _recorded_lines()
    assert len(lines) > 1000
    changed = [line for line in lines if chunk_to_json(chunk_from_json(line)) != line]
    assert changed == []


@settings(max_examples=80, deadline=None)
@given(
    steps=st.lists(
        st.one_of(
            st.tuples(st.just("text"), st.text(max_size=4)),
            st.tuples(
                st.just("cite"), st.lists(st.sampled_from([WEB, PAGE]), max_size=2)
            ),
            st.tuples(st.just("next"), st.just("")),
        ),
        max_size=25,
    )
)
def test_any_mix_of_text_and_citations_streams_strictly_and_assembles(
    steps: list[tuple[str, Any]],
) -> None:
    writer = BlockWriter(provider="P")
    blocks = [writer.open("text")]
    given_citations: list[Citation] = []
    for action, value in steps:
        if action == "text":
            writer.append(blocks[-1], value)
        elif action == "cite":
            writer.cite(blocks[-1], value)
            given_citations.extend(value)
        else:
            blocks.append(writer.open("text"))  # the earlier one waits, then ends
    writer.append(blocks[-1], "end")
    writer.end_all()
    writer.finish(FinishReason.STOP)
    chunks = writer.take()
    assert_chunk_sequence(chunks)
    assert collect(chunks).citations == tuple(given_citations)
