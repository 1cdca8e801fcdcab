"""``dsh_llm.cli.console``: how streamed chunks are shown on a terminal."""

from __future__ import annotations

import io

import pytest

from dsh_llm.cli.console import ChunkPrinter
from dsh_llm.cli.console import JsonLinesPrinter
from dsh_llm.cli.console import SilenceableSink
from dsh_llm.cli.console import format_usage
from dsh_llm.cli.console import summary_line
from dsh_llm.cli.console import wants_color
from dsh_llm.protocol import BlockEnd
from dsh_llm.protocol import BlockStart
from dsh_llm.protocol import CallId
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import ReasoningBlock
from dsh_llm.protocol import ReasoningDelta
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import TextDelta
from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.protocol import ToolCallDelta
from dsh_llm.protocol import UsageChunk
from dsh_llm.serde import chunk_from_json

STREAM = (
    BlockStart(index=0, block_type="reasoning"),
    ReasoningDelta(index=0, text="think "),
    ReasoningDelta(index=0, text="hard"),
    BlockEnd(index=0, block=ReasoningBlock(text="think hard")),
    BlockStart(index=1, block_type="text"),
    TextDelta(index=1, text="Hi "),
    TextDelta(index=1, text="there"),
    BlockEnd(index=1, block=TextBlock(text="Hi there")),
    BlockStart(index=2, block_type="tool-call"),
    ToolCallDelta(index=2, id=CallId("c1"), name="ls", arguments_delta='{"dir":"/"}'),
    BlockEnd(
        index=2,
        block=ToolCallBlock(id=CallId("c1"), name="ls", arguments='{"dir":"/"}'),
    ),
    BlockStart(index=3, block_type="text"),
    TextDelta(index=3, text="done"),
    BlockEnd(index=3, block=TextBlock(text="done")),
    UsageChunk(usage=TokenUsage(input_tokens=5, output_tokens=9)),
    Finish(reason=FinishReason.TOOL_CALLS),
)


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def _show(chunks: tuple[StreamChunk, ...], *, color: bool = False) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    printer = ChunkPrinter(out, err, color=color)
    for chunk in chunks:
        printer.write(chunk)
    printer.end()
    return out.getvalue(), err.getvalue()


def test_text_goes_to_out_reasoning_to_err_and_tool_calls_as_json_lines():
    out, err = _show(STREAM)
    assert out.splitlines() == [
        "Hi there",
        '{"type":"tool-call","id":"c1","name":"ls","arguments":"{\\"dir\\":\\"/\\"}"}',
        "done",
    ]
    assert out.endswith("done\n")
    assert err == "[reasoning] think hard\n"


def test_each_delta_is_flushed_as_it_is_written():
    class Recording(io.StringIO):
        def __init__(self) -> None:
            super().__init__()
            self.flushed: list[str] = []

        def flush(self) -> None:
            self.flushed.append(self.getvalue())

    out, err = Recording(), Recording()
    printer = ChunkPrinter(out, err, color=False)
    for chunk in STREAM[:7]:
        printer.write(chunk)
    assert out.flushed == ["Hi ", "Hi there"]
    assert err.flushed == [
        "[reasoning] think ",
        "[reasoning] think hard",
        "[reasoning] think hard\n",
    ]


def test_reasoning_after_text_starts_on_a_new_line():
    out, err = _show(
        (
            TextDelta(index=0, text="a"),
            ReasoningDelta(index=1, text="b"),
            BlockEnd(index=1, block=ReasoningBlock(text="b")),
        )
    )
    assert out == "a\n"
    assert err == "[reasoning] b\n"


def test_empty_deltas_write_nothing_and_open_no_line():
    assert _show((ReasoningDelta(index=0, text=""),)) == ("", "")
    out, err = _show((TextDelta(index=0, text=""), ReasoningDelta(index=1, text="why")))
    assert out == ""  # no text line was opened, so none is ended
    assert err == "[reasoning] why\n"


def test_reasoning_is_dimmed_on_a_terminal_without_leaking_the_style():
    out, err = _show(STREAM[:4], color=True)
    assert err == "\x1b[2m[reasoning] think \x1b[0m\x1b[2mhard\x1b[0m\n"
    assert out == ""


def test_wants_color_only_for_a_terminal_without_no_color(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert wants_color(_Tty())
    assert not wants_color(io.StringIO())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not wants_color(_Tty())
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.setenv("TERM", "dumb")
    assert not wants_color(_Tty())


def test_json_lines_printer_round_trips_every_chunk():
    out = io.StringIO()
    printer = JsonLinesPrinter(out)
    for chunk in STREAM:
        printer.write(chunk)
    printer.end()
    assert (
        tuple(chunk_from_json(line) for line in out.getvalue().splitlines()) == STREAM
    )


@pytest.mark.parametrize(
    ("usage", "words"),
    [
        (None, "not reported"),
        (TokenUsage.unknown(), "not reported"),
        (TokenUsage(input_tokens=3, output_tokens=4), "input 3, output 4"),
        (TokenUsage(input_tokens=None, output_tokens=4), "input ?, output 4"),
        (
            TokenUsage(
                input_tokens=27,
                output_tokens=69,
                cache_read_tokens=256,
                cache_write_tokens=8,
                reasoning_tokens=24,
            ),
            "input 27, cache read 256, cache write 8, output 69 (reasoning 24)",
        ),
    ],
)
def test_format_usage_never_invents_a_count(usage, words):
    assert format_usage(usage) == words


def test_summary_line_names_finish_and_usage():
    usage = TokenUsage(input_tokens=1, output_tokens=2)
    assert (
        summary_line(FinishReason.STOP, usage)
        == "finish stop; usage: input 1, output 2"
    )


def test_silencing_ends_the_open_line_then_drops_everything():
    out, err = io.StringIO(), io.StringIO()
    sink = SilenceableSink(ChunkPrinter(out, err, color=False))
    sink.write(BlockStart(index=0, block_type="text"))
    sink.write(TextDelta(index=0, text="partial"))
    sink.silence()
    sink.write(TextDelta(index=0, text=" more"))
    sink.end()
    assert out.getvalue() == "partial\n"
