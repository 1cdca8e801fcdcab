"""Replay: the reply keeps the recorded reads, framing and (at speed 1) timing;
the llama.cpp recordings replay strictly into OpenAICompatAdapter."""

from __future__ import annotations

import pytest

from dsh_llm.assembler import BlockAssembler
from dsh_llm.protocol import ContentBlock
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.testing import Cassette
from dsh_llm.testing import Cut
from dsh_llm.testing import Pause
from dsh_llm.testing import Stall
from dsh_llm.testing import replay_chunks
from dsh_llm.testing.cassette import BodyRead
from dsh_llm.testing.cassette import CassetteRequest
from dsh_llm.testing.cassette import CassetteResponse
from dsh_llm.testing.replay import replay_options
from dsh_llm.testing.replay import replay_reply

from .adapters import openai_compat
from .sse_cassettes import CASSETTES

LLAMACPP = CASSETTES / "llamacpp"


def _cassette(**response: object) -> Cassette:
    return Cassette(
        request=CassetteRequest(
            method="POST", url="http://h/v1/chat/completions", body=b'{"model":"qwen"}'
        ),
        response=CassetteResponse(
            status=200,
            at_ms=100.0,
            reads=[BodyRead(at_ms=150.0, data=b"a"), BodyRead(at_ms=450.0, data=b"b")],
            **response,  # type: ignore[arg-type]
        ),
    )


def test_speed_one_keeps_the_recorded_gaps_and_zero_drops_them():
    timed = replay_reply(_cassette(), 1.0)
    assert timed.header_delay == pytest.approx(0.1)
    assert timed.body == (Pause(seconds=0.05), b"a", Pause(seconds=0.3), b"b")
    fast = replay_reply(_cassette(), 0)
    assert fast.header_delay == 0
    assert fast.body == (b"a", b"b")
    double = replay_reply(_cassette(), 2.0)
    assert double.body[2] == Pause(seconds=0.15)


def test_how_the_body_ended_is_replayed():
    assert replay_reply(_cassette(ended="cut")).body[-1] == Cut()
    cut_close = replay_reply(_cassette(ended="cut", framing="close"))
    assert cut_close.body[-1] == Cut(reset=True)
    assert replay_reply(_cassette(ended="cut", framing="length")).framing == "chunked"
    assert replay_reply(_cassette(ended="client-closed")).body[-1] == Stall()
    assert replay_reply(_cassette(framing="close")).framing == "close"


def test_a_negative_speed_is_refused():
    with pytest.raises(ValueError, match="speed"):
        replay_reply(_cassette(), -1)


def test_replay_options_take_the_recorded_model():
    assert replay_options(_cassette()).model == "qwen"


def _blocks(chunks: list[StreamChunk]) -> tuple[ContentBlock, ...]:
    assembler = BlockAssembler()
    for chunk in chunks:
        assembler.push(chunk)
    return assembler.blocks()


def test_the_llamacpp_text_recording_replays_strictly():
    cassette = Cassette.load(LLAMACPP / "text.jsonl")
    chunks = replay_chunks(cassette, openai_compat)
    (block,) = _blocks(chunks)
    assert isinstance(block, TextBlock)
    assert "sûr" in block.text
    assert "français" in block.text
    assert chunks[-1] == Finish(reason=FinishReason.STOP)


def test_the_llamacpp_length_recording_ends_with_max_tokens():
    chunks = replay_chunks(LLAMACPP / "length.jsonl", openai_compat)
    assert chunks[-1] == Finish(reason=FinishReason.MAX_TOKENS)


def test_the_llamacpp_tool_call_recording_replays_to_one_call():
    chunks = replay_chunks(LLAMACPP / "tool_call.jsonl", openai_compat)
    (block,) = _blocks(chunks)
    assert isinstance(block, ToolCallBlock)
    assert block.name == "get_weather"
    assert "Paris" in block.arguments
    assert chunks[-1] == Finish(reason=FinishReason.TOOL_CALLS)


def test_recorded_timing_is_kept_at_speed_one():
    cassette = Cassette.load(LLAMACPP / "length.jsonl")
    reply = replay_reply(cassette, 1.0)
    pauses = sum(step.seconds for step in reply.body if isinstance(step, Pause))
    last = cassette.response.reads[-1].at_ms
    assert reply.header_delay is not None
    assert pauses + reply.header_delay == pytest.approx(last / 1000)
