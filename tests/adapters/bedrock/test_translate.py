"""ConverseStreamTranslator on the fixtures (documented frame shapes, encoded by
the tests' encoder) under every split, and on hand-made frames for what the
fixtures do not show."""

from __future__ import annotations

import pytest

from dsh_llm.adapters.bedrock.translate import ConverseStreamTranslator
from dsh_llm.adapters.bedrock.translate import map_usage
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import BlockEnd
from dsh_llm.protocol import Finish
from dsh_llm.protocol import ReasoningBlock
from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.protocol import UsageChunk
from dsh_llm.serde import chunk_to_dict
from dsh_llm.transport.eventstream import EventMessage
from dsh_llm.transport.eventstream import EventStreamDecoder
from tests.adapters.wire_replay import SPLITS
from tests.eventstream_frames import event
from tests.eventstream_frames import exception
from tests.eventstream_frames import frame

from .replay import FIXTURES
from .replay import MODEL
from .replay import expected
from .replay import fixture_body
from .replay import fixture_names
from .replay import translated

NAMES = fixture_names()


@pytest.mark.parametrize("split", SPLITS)
@pytest.mark.parametrize("name", NAMES)
def test_fixture_gives_its_expected_chunks_under_every_split(name, split):
    chunks = translated(fixture_body(name), split)
    assert [chunk_to_dict(c) for c in chunks] == expected(name)


def test_every_documented_event_and_error_has_a_fixture():
    # The fixtures cover each event type, each stop reason and each exception.
    text = "".join(
        (path.read_text(encoding="utf-8")) for path in sorted(FIXTURES.glob("*.json"))
    )
    for name in (
        "messageStart",
        "contentBlockStart",
        "contentBlockDelta",
        "contentBlockStop",
        "messageStop",
        "metadata",
        "reasoningContent",
        "redactedContent",
        "signature",
        "toolUse",
        "cacheReadInputTokens",
        "cacheWriteInputTokens",
    ):
        assert f'"{name}"' in text, name
    for reason in (
        "end_turn",
        "tool_use",
        "max_tokens",
        "stop_sequence",
        "guardrail_intervened",
        "content_filtered",
        "model_context_window_exceeded",
    ):
        assert f'"{reason}"' in text, reason
    for name in (
        "throttlingException",
        "modelStreamErrorException",
        "validationException",
        "internalServerException",
        "serviceUnavailableException",
    ):
        assert f'"{name}"' in text, name


def _frames(data: bytes) -> list[EventMessage]:
    return EventStreamDecoder().feed(data)


def _feed(*frames: bytes, close: bool = True) -> list:
    translator = ConverseStreamTranslator(model=MODEL)
    out = []
    for message in _frames(b"".join(frames)):
        out.extend(translator.feed(message))
    if close:
        out.extend(translator.close())
    return out


def _failure(*frames: bytes) -> LlmError:
    with pytest.raises(LlmError) as caught:
        _feed(*frames)
    return caught.value


START = event("messageStart", {"role": "assistant"})
STOP = event("messageStop", {"stopReason": "end_turn"})
META = event("metadata", {"usage": {"inputTokens": 5, "outputTokens": 2}})


def _delta(index, delta):
    return event("contentBlockDelta", {"contentBlockIndex": index, "delta": delta})


def _stop(index):
    return event("contentBlockStop", {"contentBlockIndex": index})


def test_usage_reported_before_an_exception_comes_before_the_failure():
    translator = ConverseStreamTranslator(model=MODEL)
    out = []
    frames = _frames(
        START
        + _delta(0, {"text": "hi"})
        + META
        + exception("throttlingException", {"message": "slow"})
    )
    *before, last = frames
    for message in before:
        out.extend(translator.feed(message))
    with pytest.raises(LlmError) as caught:
        translator.feed(last)
    assert caught.value.code == ErrorCode.RATE_LIMIT
    owed = translator.before_failure()
    assert owed == [UsageChunk(usage=TokenUsage(input_tokens=5, output_tokens=2))]
    assert translator.before_failure() == []


@pytest.mark.parametrize(
    ("frames", "what"),
    [
        ((event("messageStart", "nope"),), "not an object"),
        (
            (frame([(":message-type", "event"), (":event-type", "metadata")], b"{x"),),
            "malformed metadata",
        ),
        ((frame([(":event-type", "metadata")], b"{}"),), ":message-type"),
        (
            (START, event("contentBlockDelta", {"delta": {"text": "x"}})),
            "contentBlockIndex",
        ),
        (
            (START, event("contentBlockDelta", {"contentBlockIndex": -1, "delta": {}})),
            "contentBlockIndex",
        ),
        ((START, event("contentBlockDelta", {"contentBlockIndex": 0})), "delta object"),
        ((START, _delta(0, {"text": 5})), "text that is not a string"),
        ((START, _delta(0, {"toolUse": {"input": "{}"}})), "never started"),
        (
            (
                START,
                _delta(0, {"text": "a"}),
                _delta(0, {"reasoningContent": {"text": "b"}}),
            ),
            "reasoningContent delta on a text block",
        ),
        (
            (START, _delta(0, {"reasoningContent": {"redactedContent": "%%%"}})),
            "not base64",
        ),
        (
            (
                START,
                _delta(0, {"text": "a"}),
                _delta(0, {"reasoningContent": {"redactedContent": "AA=="}}),
            ),
            "redacted reasoning on a text block",
        ),
        (
            (
                START,
                _delta(0, {"reasoningContent": {"redactedContent": "AA=="}}),
                _delta(0, {"reasoningContent": {"text": "b"}}),
            ),
            "reasoningContent delta on a reasoningContent block",
        ),
        (
            (
                START,
                _delta(0, {"text": "a"}),
                _delta(0, {"reasoningContent": {"signature": "s"}}),
            ),
            "signature on a text block",
        ),
        (
            (
                START,
                _delta(0, {"text": "a"}),
                event("contentBlockStop", {"contentBlockIndex": 0}),
                _delta(0, {"text": "b"}),
            ),
            "after its stop",
        ),
        ((START, event("contentBlockStart", {"contentBlockIndex": 0})), "start object"),
        (
            (
                START,
                event(
                    "contentBlockStart",
                    {"contentBlockIndex": 0, "start": {"toolUse": 3}},
                ),
            ),
            "toolUse start",
        ),
        (
            (
                START,
                event(
                    "contentBlockStart",
                    {
                        "contentBlockIndex": 0,
                        "start": {"toolUse": {"toolUseId": "t", "name": "n"}},
                    },
                ),
                event(
                    "contentBlockStart",
                    {
                        "contentBlockIndex": 0,
                        "start": {"toolUse": {"toolUseId": "t", "name": "n"}},
                    },
                ),
            ),
            "already began",
        ),
        ((START, event("messageStop", {})), "without a stopReason"),
        ((START, STOP, STOP), "second messageStop"),
        ((START, event("metadata", {"usage": []})), "usage that is not an object"),
        ((event("messageStart", {"role": "user"}),), "role"),
        (
            (
                START,
                event(
                    "contentBlockStart",
                    {"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "t"}}},
                ),
                event("contentBlockStop", {"contentBlockIndex": 0}),
                STOP,
                META,
            ),
            "without a name",
        ),
    ],
)
def test_a_frame_of_the_wrong_shape_is_malformed(frames, what):
    failure = _failure(*frames)
    assert failure.code == ErrorCode.MALFORMED_RESPONSE
    assert what in failure.message


def test_a_payload_that_is_not_json_is_quoted_short_and_not_kept_in_the_cause():
    bad = frame(
        [(":message-type", "event"), (":event-type", "contentBlockDelta")],
        b'{"secret-ish": ' + b"x" * 500,
    )
    failure = _failure(START, bad)
    assert failure.code == ErrorCode.MALFORMED_RESPONSE
    assert "x" * 200 not in failure.message
    assert "x" * 200 not in str(failure.__cause__)


def test_a_signature_alone_opens_a_reasoning_block_that_keeps_it():
    out = _feed(
        START,
        _delta(0, {"reasoningContent": {"signature": "sig-1"}}),
        _stop(0),
        _delta(1, {"text": "ok"}),
        _stop(1),
        STOP,
        META,
    )
    ends = [c.block for c in out if isinstance(c, BlockEnd)]
    assert ends[0] == ReasoningBlock(text="")
    finish = out[-1]
    assert isinstance(finish, Finish)
    assert finish.replay_state is not None
    assert finish.replay_state.blocks == (
        {"type": "reasoningText", "signature": "sig-1"},
        None,
    )


def test_a_later_signature_replaces_an_earlier_one():
    out = _feed(
        START,
        _delta(0, {"reasoningContent": {"text": "think", "signature": "old"}}),
        _delta(0, {"reasoningContent": {"signature": "new"}}),
        _stop(0),
        STOP,
        META,
    )
    assert out[-1].replay_state.blocks == (
        {"type": "reasoningText", "signature": "new"},
    )


def test_a_tool_call_keeps_its_id_and_name_and_the_arguments_add_up():
    out = _feed(
        START,
        event(
            "contentBlockStart",
            {
                "contentBlockIndex": 3,
                "start": {"toolUse": {"toolUseId": "t1", "name": "f"}},
            },
        ),
        _delta(3, {"toolUse": {"input": '{"a":'}}),
        _delta(3, {"toolUse": {"input": "1}"}}),
        event("contentBlockStop", {"contentBlockIndex": 3}),
        event("messageStop", {"stopReason": "end_turn"}),
        META,
    )
    ends = [c.block for c in out if isinstance(c, BlockEnd)]
    assert ends == [ToolCallBlock(id="t1", name="f", arguments='{"a":1}')]
    # A provider "end_turn" after a tool call is corrected to tool-calls.
    assert out[-1].reason.kind == "tool-calls"


def test_an_unknown_stop_reason_is_its_own_code_and_a_strange_one_is_unknown():
    out = _feed(
        START,
        _delta(0, {"text": "x"}),
        _stop(0),
        event("messageStop", {"stopReason": "malformed_tool_use"}),
        META,
    )
    assert out[-1].reason.failure.code == "MALFORMED_TOOL_USE"
    out = _feed(
        START,
        _delta(0, {"text": "x"}),
        _stop(0),
        event("messageStop", {"stopReason": "no way!"}),
        META,
    )
    assert out[-1].reason.failure.code == ErrorCode.UNKNOWN_FINISH_REASON


def test_frames_after_the_finish_are_ignored():
    translator = ConverseStreamTranslator(model=MODEL)
    for message in _frames(START + _delta(0, {"text": "x"}) + _stop(0) + STOP + META):
        translator.feed(message)
    assert translator.finished
    (late,) = _frames(_delta(0, {"text": "late"}))
    assert translator.feed(late) == []
    assert translator.close() == []


def test_map_usage_never_invents_a_count():
    assert map_usage({}) == TokenUsage.unknown()
    odd = {"inputTokens": -1, "outputTokens": "2", "cacheReadInputTokens": True}
    assert map_usage(odd) == TokenUsage.unknown()
    assert map_usage({"inputTokens": 7, "cacheWriteInputTokens": 3}) == TokenUsage(
        input_tokens=7, output_tokens=None, cache_write_tokens=3
    )


@pytest.mark.parametrize("name", ["text", "tool_use", "reasoning_signature_tool_use"])
def test_every_cut_of_a_complete_stream_is_stream_closed(name):
    body = fixture_body(name)
    assert translated(body)[-1].reason.failure is None
    for keep in range(len(body)):
        last = translated(body[:keep])[-1]
        assert isinstance(last, Finish)
        assert last.reason.failure is not None, keep
        assert last.reason.failure.code == ErrorCode.STREAM_CLOSED, keep
