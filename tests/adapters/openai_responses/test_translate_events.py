"""ResponsesTranslator fed scripted events: hostile payloads, contradicting
arguments, [DONE] before the end, and the error classifiers."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from dsh_llm.adapters.openai_responses.errors import failure_code
from dsh_llm.adapters.openai_responses.errors import stream_failure
from dsh_llm.adapters.openai_responses.finish import map_usage
from dsh_llm.adapters.openai_responses.profiles import LLAMACPP
from dsh_llm.adapters.openai_responses.profiles import OLLAMA
from dsh_llm.adapters.openai_responses.profiles import OPENAI
from dsh_llm.adapters.openai_responses.translate import ResponsesTranslator
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import BlockStart
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TextDelta
from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol import UsageChunk
from dsh_llm.transport.sse import SseEvent
from dsh_llm.validator import validate_stream


def ev(payload: Any) -> SseEvent:
    text = payload if isinstance(payload, str) else json.dumps(payload)
    return SseEvent(
        text, payload.get("type", "message") if isinstance(payload, dict) else "message"
    )


CALL_ADDED = {
    "type": "response.output_item.added",
    "output_index": 0,
    "item": {
        "id": "fc_1",
        "type": "function_call",
        "call_id": "call_1",
        "name": "f",
        "arguments": "",
    },
}
DELTA = {
    "type": "response.function_call_arguments.delta",
    "item_id": "fc_1",
    "output_index": 0,
    "delta": '{"a":1',
}


def feed_all(
    *payloads: Any, translator: ResponsesTranslator | None = None
) -> list[Any]:
    translator = translator or ResponsesTranslator()
    out: list[Any] = []
    for payload in payloads:
        out.extend(translator.feed(ev(payload)))
    return out


def run(*payloads: Any) -> tuple[list[StreamChunk], LlmError | None]:
    """What a runtime consumer sees, as the read loop drives the translator:
    for a raised failure, what the translator owes before it and the error
    finish the runtime makes of it; and the error raised."""
    translator = ResponsesTranslator()
    out: list[StreamChunk] = []
    try:
        for payload in payloads:
            out.extend(translator.feed(ev(payload)))
    except LlmError as error:
        out.extend(translator.before_failure())
        out.append(Finish(reason=FinishReason.error(error.failure)))
        return out, error
    return out, None


@pytest.mark.parametrize(
    "payload",
    [
        "{not json",
        "[1, 2]",
        '"text"',
        {"sequence_number": 1},
        {"type": 7},
        {"type": "response.output_item.added", "output_index": 0, "item": "x"},
        {
            "type": "response.output_text.delta",
            "item_id": "m",
            "content_index": 0,
            "delta": 5,
        },
        {"type": "response.output_text.delta", "item_id": 3, "delta": "x"},
        {"type": "response.output_text.delta", "delta": "x"},
        {
            "type": "response.output_text.delta",
            "item_id": "m",
            "content_index": -1,
            "delta": "x",
        },
        {"type": "response.content_part.added", "item_id": "m", "part": None},
        {"type": "response.completed", "response": None},
        {"type": "response.completed", "response": {"output": {}}},
        {"type": "response.completed", "response": {"output": [3]}},
        {"type": "response.failed", "response": "boom"},
    ],
)
def test_hostile_payloads_are_malformed_response(payload):
    with pytest.raises(LlmError) as caught:
        feed_all(payload)
    assert caught.value.code == ErrorCode.MALFORMED_RESPONSE


@pytest.mark.parametrize(
    "event",
    [
        SseEvent('{"type": "sk-echoed-secret'),
        SseEvent("", raw=bytearray(b'{"type": "sk-echoed-secret' + b"x" * 300)),
    ],
    ids=["data", "raw"],
)
def test_a_payload_that_is_not_json_keeps_no_copy_of_itself_in_the_error(event):
    with pytest.raises(LlmError) as caught:
        ResponsesTranslator().feed(event)
    error = caught.value
    assert error.code == ErrorCode.MALFORMED_RESPONSE
    assert "sent a payload that is not JSON: " in error.message
    assert error.__context__ is None
    cause = error.__cause__
    assert type(cause) is ValueError
    assert "sk-echoed" not in str(cause)
    assert not hasattr(cause, "doc")


def test_text_for_an_item_of_another_kind_is_malformed_not_dropped():
    with pytest.raises(LlmError) as caught:
        feed_all(
            CALL_ADDED,
            {
                "type": "response.output_text.delta",
                "item_id": "fc_1",
                "content_index": 0,
                "delta": "x",
            },
        )
    assert caught.value.code == ErrorCode.MALFORMED_RESPONSE


def test_arguments_done_contradicting_the_deltas_is_malformed():
    done = {
        "type": "response.function_call_arguments.done",
        "item_id": "fc_1",
        "output_index": 0,
        "arguments": '{"b":2}',
    }
    with pytest.raises(LlmError) as caught:
        feed_all(CALL_ADDED, DELTA, done)
    assert caught.value.code == ErrorCode.MALFORMED_RESPONSE


def test_done_before_the_terminal_event_is_stream_closed():
    with pytest.raises(LlmError) as caught:
        feed_all(CALL_ADDED, " [DONE] ")
    assert caught.value.code == ErrorCode.STREAM_CLOSED


def test_close_without_a_terminal_event_raises_and_after_one_returns_nothing():
    translator = ResponsesTranslator()
    with pytest.raises(LlmError) as caught:
        translator.close()
    assert caught.value.code == ErrorCode.STREAM_CLOSED
    feed_all(
        {"type": "response.completed", "response": {"output": [], "usage": None}},
        translator=translator,
    )
    assert translator.finished
    assert translator.close() == []


def test_an_error_payload_without_a_type_raises_its_failure():
    chunks, error = run(
        {
            "error": {
                "message": "Upstream overloaded",
                "type": "server_error",
                "code": None,
            }
        }
    )
    assert error is not None
    assert (error.code, error.message) == ("SERVER", "Upstream overloaded")
    assert chunks[-1].reason.failure.code == "SERVER"


def test_a_failed_response_with_a_block_open_raises_after_its_usage():
    chunks, error = run(
        MSG,
        _text("Half"),
        {
            "type": "response.failed",
            "response": {
                "status": "failed",
                "error": {"code": "server_error", "message": "boom"},
                "usage": {"input_tokens": 7, "output_tokens": 1},
            },
        },
    )
    assert error is not None
    assert error.code == "SERVER"
    # Rule 7: the reported usage right before the failure, the block left open.
    assert [type(c) for c in chunks] == [BlockStart, TextDelta, UsageChunk, Finish]
    assert chunks[2].usage.input_tokens == 7
    assert list(validate_stream(chunks, strict=True)) == chunks


def test_an_error_event_with_a_block_open_raises_without_inventing_usage():
    chunks, error = run(MSG, _text("Half"), {"type": "error", "code": "server_error"})
    assert error is not None
    assert error.code == "SERVER"
    assert [type(c) for c in chunks] == [BlockStart, TextDelta, Finish]


def _usage_of(translator: ResponsesTranslator) -> TokenUsage | None:
    return translator.usage_so_far


def test_usage_so_far_is_none_until_the_terminal_event():
    translator = ResponsesTranslator()
    feed_all(CALL_ADDED, DELTA, translator=translator)
    assert _usage_of(translator) is None
    feed_all(
        {
            "type": "response.completed",
            "response": {
                "output": [],
                "usage": {"input_tokens": 3, "output_tokens": 1},
            },
        },
        translator=translator,
    )
    usage = _usage_of(translator)
    assert usage is not None
    assert usage.input_tokens == 3


def test_a_call_still_open_at_the_terminal_event_is_closed_and_validates():
    chunks = feed_all(
        CALL_ADDED,
        DELTA,
        {"type": "response.completed", "response": {"output": [], "usage": None}},
    )
    assert list(validate_stream(chunks, strict=True)) == chunks
    assert isinstance(chunks[-2], UsageChunk)
    assert isinstance(chunks[-1], Finish)


def test_content_for_an_item_the_stream_never_announced_still_streams():
    chunks = feed_all(
        {
            "type": "response.output_text.delta",
            "item_id": "m",
            "content_index": 0,
            "delta": "hi",
        },
        {"type": "response.completed", "response": {"output": [], "usage": None}},
    )
    assert list(validate_stream(chunks, strict=True)) == chunks
    assert chunks[-1].reason.kind == "stop"


def test_text_resuming_after_an_early_close_is_a_new_block():
    msg = {
        "type": "response.output_item.added",
        "output_index": 0,
        "item": {"id": "m", "type": "message"},
    }
    text = {
        "type": "response.output_text.delta",
        "item_id": "m",
        "content_index": 0,
        "delta": "a",
    }
    rs = {
        "type": "response.output_item.added",
        "output_index": 1,
        "item": {"id": "rs", "type": "reasoning"},
    }
    chunks = feed_all(
        msg, text, rs, text, {"type": "response.completed", "response": {"output": []}}
    )
    assert list(validate_stream(chunks, strict=True)) == chunks
    starts = [c.block_type for c in chunks if c.type == "block-start"]
    assert starts == ["text", "reasoning", "text"]
    assert chunks[-1].replay_state.blocks[2] is None


def test_usage_counts_above_two_to_the_53_are_not_reported():
    usage = map_usage({"input_tokens": 2**53, "output_tokens": 5}, profile=OPENAI)
    assert usage.input_tokens is None
    assert usage.output_tokens == 5


def test_cache_writes_come_off_the_uncached_input():
    usage = map_usage(
        {
            "input_tokens": 100,
            "input_tokens_details": {"cached_tokens": 30, "cache_write_tokens": 50},
            "output_tokens": 1,
        },
        profile=OPENAI,
    )
    assert (usage.input_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == (
        20,
        30,
        50,
    )


def test_ollama_zero_counts_are_unknown_but_openai_zeros_are_zero():
    raw = {
        "input_tokens": 0,
        "output_tokens": 4,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens_details": {"reasoning_tokens": 0},
    }
    assert map_usage(raw, profile=OLLAMA).input_tokens is None
    assert map_usage(raw, profile=OLLAMA).reasoning_tokens is None
    assert map_usage(raw, profile=OPENAI).reasoning_tokens == 0


@pytest.mark.parametrize(
    ("code", "message", "expected"),
    [
        ("rate_limit_exceeded", "Rate limit reached", "RATE_LIMIT"),
        (
            "rate_limit_exceeded",
            "Request too large for gpt-5 on tokens per min",
            "INVALID_REQUEST",
        ),
        ("insufficient_quota", "You exceeded your current quota", "QUOTA"),
        ("context_length_exceeded", "too long", "CONTEXT_WINDOW_EXCEEDED"),
        (
            None,
            "Your input exceeds the context window of this model",
            "CONTEXT_WINDOW_EXCEEDED",
        ),
        ("server_error", "oops", "SERVER"),
        ("invalid_prompt", "flagged", "INVALID_REQUEST"),
        ("invalid_image_format", "bad", "INVALID_REQUEST"),
        ("image_too_large", "bad", "INVALID_REQUEST"),
        ("bio_policy", "no", "BIO_POLICY"),
        ("not an identifier!", "x", "SERVER"),
        (None, "", "SERVER"),
    ],
)
def test_failure_codes(code, message, expected):
    assert failure_code(code, message) == expected


def test_an_integer_code_is_an_http_status():
    failure = stream_failure({"code": 503, "message": "overloaded"}, provider="P")
    assert (failure.code, failure.status) == ("SERVER", 503)


def test_stream_failure_without_a_message_names_the_provider():
    assert stream_failure({}, provider="P").message == "P stream reported an error"


def _message_then(terminal: dict[str, Any]) -> list[Any]:
    return feed_all(
        {
            "type": "response.output_text.delta",
            "item_id": "m",
            "content_index": 0,
            "delta": "hi",
        },
        terminal,
    )


def test_a_completed_event_whose_response_says_incomplete_is_not_a_stop():
    chunks = _message_then(
        {
            "type": "response.completed",
            "response": {
                "status": "incomplete",
                "incomplete_details": {"reason": "max_output_tokens"},
            },
        }
    )
    assert chunks[-1].reason.kind == "max-tokens"


def test_a_cancelled_response_is_an_error_finish():
    chunks = _message_then(
        {"type": "response.completed", "response": {"status": "cancelled"}}
    )
    assert chunks[-1].reason.failure.code == "CANCELLED"
    assert list(validate_stream(chunks, strict=True)) == chunks


def test_an_incomplete_without_a_reason_is_an_error_never_a_stop():
    chunks = _message_then(
        {"type": "response.incomplete", "response": {"incomplete_details": None}}
    )
    assert chunks[-1].reason.failure.code == "INCOMPLETE"


def test_the_flag_takes_an_empty_completed_response_as_a_stop():
    translator = ResponsesTranslator(empty_response_as_stop=True)
    chunks = feed_all(
        {"type": "response.completed", "response": {"output": []}},
        translator=translator,
    )
    assert chunks[-1].reason.kind == "stop"


def test_text_only_in_the_final_item_is_supplied_and_a_lost_tail_completed():
    msg = {
        "type": "response.output_item.added",
        "output_index": 0,
        "item": {"id": "m", "type": "message"},
    }
    part = {
        "type": "response.content_part.added",
        "item_id": "m",
        "content_index": 0,
        "part": {"type": "output_text"},
    }
    delta = {
        "type": "response.output_text.delta",
        "item_id": "m",
        "content_index": 0,
        "delta": "Hel",
    }
    done = {
        "type": "response.output_item.done",
        "output_index": 0,
        "item": {
            "id": "m",
            "type": "message",
            "content": [{"type": "output_text", "text": "Hello"}],
        },
    }
    end = {"type": "response.completed", "response": {"output": []}}
    chunks = feed_all(msg, part, delta, done, end)
    assert list(validate_stream(chunks, strict=True)) == chunks
    assert [c.block.text for c in chunks if c.type == "block-end"] == ["Hello"]
    chunks = feed_all(msg, done, end)
    assert [c.block.text for c in chunks if c.type == "block-end"] == ["Hello"]


MSG = {
    "type": "response.output_item.added",
    "output_index": 0,
    "item": {"id": "m", "type": "message"},
}
END = {"type": "response.completed", "response": {"output": []}}


def _text(delta: str) -> dict[str, Any]:
    return {
        "type": "response.output_text.delta",
        "item_id": "m",
        "content_index": 0,
        "delta": delta,
    }


def _texts_of(chunks: list[Any]) -> list[str]:
    return [c.text for c in chunks if c.type == "text-delta"]


def test_a_surrogate_pair_split_across_text_deltas_is_joined():
    chunks = feed_all(MSG, _text("a\ud83d"), _text("\ude00b"), END)
    assert _texts_of(chunks) == ["a", "\U0001f600b"]
    assert list(validate_stream(chunks, strict=True)) == chunks


def test_a_lone_high_surrogate_is_kept_as_it_came_at_the_end_or_on_error():
    chunks = feed_all(MSG, _text("a\ud83d"), END)
    assert "".join(_texts_of(chunks)) == "a\ud83d"
    chunks, error = run(MSG, _text("a\ud83d"), {"type": "error", "message": "x"})
    assert error is not None
    assert "".join(_texts_of(chunks)) == "a\ud83d"


def test_split_pair_in_arguments_matches_the_final_arguments():
    def arg(delta: str) -> dict[str, Any]:
        return {**DELTA, "delta": delta}

    done = {
        "type": "response.function_call_arguments.done",
        "item_id": "fc_1",
        "arguments": '{"e":"\U0001f600!"}',
    }
    chunks = feed_all(CALL_ADDED, arg('{"e":"\ud83d'), arg("\ude00"), done, END)
    assert list(validate_stream(chunks, strict=True)) == chunks
    ends = [c.block for c in chunks if c.type == "block-end"]
    assert ends[0].arguments == '{"e":"\U0001f600!"}'


# --- the per-token hot path keeps every check ---------------------------------------


def _live_text(**delta: Any) -> list[Any]:
    translator = ResponsesTranslator()
    first = {
        "type": "response.output_text.delta",
        "item_id": "m",
        "output_index": 0,
        "content_index": 0,
        "delta": "a",
    }
    feed_all(first, translator=translator)
    return feed_all({**first, **delta}, translator=translator)


def test_a_live_text_delta_with_a_bool_content_index_is_malformed():
    with pytest.raises(LlmError) as caught:
        _live_text(content_index=True)
    assert caught.value.code == ErrorCode.MALFORMED_RESPONSE


def test_a_live_text_delta_with_a_non_string_delta_is_malformed():
    with pytest.raises(LlmError) as caught:
        _live_text(delta=7)
    assert caught.value.code == ErrorCode.MALFORMED_RESPONSE


def test_a_live_text_delta_ending_in_a_high_surrogate_holds_it_back():
    assert _live_text(delta="b\ud83d") == [TextDelta(index=0, text="b")]


def test_a_refusal_delta_on_the_live_part_marks_the_refusal():
    translator = ResponsesTranslator()
    text = {
        "type": "response.output_text.delta",
        "item_id": "m",
        "output_index": 0,
        "content_index": 0,
        "delta": "I ",
    }
    refusal = {**text, "type": "response.refusal.delta", "delta": "can't."}
    completed = {
        "type": "response.completed",
        "response": {"id": "r", "status": "completed", "output": []},
    }
    chunks = feed_all(text, refusal, completed, translator=translator)
    end = chunks[-1]
    assert isinstance(end, Finish)
    assert end.reason.failure is not None
    assert end.reason.failure.code == "REFUSAL"


# --- what the writer decides ----------------------------------------------------------


def _part(item_id: str = "m") -> dict[str, Any]:
    return {
        "type": "response.content_part.added",
        "item_id": item_id,
        "content_index": 0,
        "part": {"type": "output_text", "text": ""},
    }


RS = {
    "type": "response.output_item.added",
    "output_index": 1,
    "item": {"id": "rs", "type": "reasoning"},
}


def test_an_empty_text_part_opens_no_block():
    chunks, error = run(MSG, _part(), RS, END)
    assert error is None
    assert [c.block_type for c in chunks if c.type == "block-start"] == ["reasoning"]
    assert list(validate_stream(chunks, strict=True)) == chunks


def test_a_part_ended_empty_then_filled_at_done_keeps_its_replay_entry():
    done = {
        "type": "response.output_item.done",
        "output_index": 0,
        "item": {
            "id": "m",
            "type": "message",
            "content": [{"type": "output_text", "text": "Hello"}],
        },
    }
    chunks, error = run(MSG, _part(), RS, done, END)
    assert error is None
    ends = [c.block for c in chunks if c.type == "block-end"]
    assert [(b.type, b.text) for b in ends] == [("reasoning", ""), ("text", "Hello")]
    assert chunks[-1].replay_state.blocks[1] == {
        "type": "message",
        "id": "m",
        "part": "output_text",
    }


def test_a_terminal_event_that_fails_its_checks_raises_after_its_usage():
    completed = {
        "type": "response.completed",
        "response": {
            "output": [{"id": "fc_1", "type": "function_call", "arguments": '{"b":2}'}],
            "usage": {"input_tokens": 4, "output_tokens": 2},
        },
    }
    chunks, error = run(CALL_ADDED, DELTA, completed)
    assert error is not None
    assert error.code == ErrorCode.MALFORMED_RESPONSE
    assert [c.type for c in chunks][-2:] == ["usage", "finish"]
    assert chunks[-2].usage.input_tokens == 4


def test_a_call_without_a_name_is_malformed():
    added = {**CALL_ADDED, "item": {**CALL_ADDED["item"], "name": None}}
    chunks, error = run(added, DELTA, END)
    assert error is not None
    assert error.code == ErrorCode.MALFORMED_RESPONSE
    assert "a tool call without a name" in error.message
    assert list(validate_stream(chunks, strict=True)) == chunks


def _unannounced_call(**done: Any) -> tuple[list[StreamChunk], LlmError | None]:
    delta = {
        "type": "response.function_call_arguments.delta",
        "item_id": "fc_9",
        "output_index": 0,
        "delta": "{}",
    }
    item = {"id": "fc_9", "type": "function_call", "arguments": "{}", **done}
    item_done = {"type": "response.output_item.done", "output_index": 0, "item": item}
    return run(delta, item_done, END)


def test_a_call_that_streamed_before_its_name_came_takes_the_name():
    chunks, error = _unannounced_call(name="f")
    assert error is None
    assert list(validate_stream(chunks, strict=True)) == chunks
    ends = [c.block for c in chunks if c.type == "block-end"]
    assert [(b.id, b.name, b.arguments) for b in ends] == [("fc_9", "f", "{}")]


def test_a_call_id_that_changes_after_the_call_streamed_is_malformed():
    chunks, error = _unannounced_call(name="f", call_id="call_9")
    assert error is not None
    assert error.code == ErrorCode.MALFORMED_RESPONSE
    assert list(validate_stream(chunks, strict=True)) == chunks


# --- items told apart by output_index ---------------------------------------------


class _Rotating:
    """Ids as GitHub Copilot's service writes them: a fresh one on every event."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}_{self.count:04d}"


def _message_events(
    ids: Callable[[str], str], index: int, pieces: list[str], *, done: bool = True
) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [
        {
            "type": "response.output_item.added",
            "output_index": index,
            "item": {"id": ids("msg"), "type": "message", "content": []},
        },
        {
            "type": "response.content_part.added",
            "item_id": ids("msg"),
            "output_index": index,
            "content_index": 0,
            "part": {"type": "output_text", "text": ""},
        },
    ]
    events += [
        {
            "type": "response.output_text.delta",
            "item_id": ids("msg"),
            "output_index": index,
            "content_index": 0,
            "delta": piece,
        }
        for piece in pieces
    ]
    if done:
        events.append(
            {
                "type": "response.output_item.done",
                "output_index": index,
                "item": _message(ids("msg"), "".join(pieces)),
            }
        )
    return events


def _message(mid: str | None, text: str) -> dict[str, Any]:
    item: dict[str, Any] = {
        "type": "message",
        "content": [{"type": "output_text", "text": text}],
    }
    if mid is not None:
        item["id"] = mid
    return item


def _call_events(
    ids: Callable[[str], str], index: int, call_id: str, arguments: str
) -> list[dict[str, Any]]:
    return [
        {
            "type": "response.output_item.added",
            "output_index": index,
            "item": {
                "id": ids("fc"),
                "type": "function_call",
                "call_id": call_id,
                "name": "f",
                "arguments": "",
            },
        },
        {
            "type": "response.function_call_arguments.delta",
            "item_id": ids("fc"),
            "output_index": index,
            "delta": arguments,
        },
        {
            "type": "response.function_call_arguments.done",
            "item_id": ids("fc"),
            "output_index": index,
            "arguments": arguments,
        },
    ]


def _call(fid: str, call_id: str, arguments: str) -> dict[str, Any]:
    return {
        "id": fid,
        "type": "function_call",
        "call_id": call_id,
        "name": "f",
        "arguments": arguments,
    }


def _completed(*output: dict[str, Any]) -> dict[str, Any]:
    return {"type": "response.completed", "response": {"output": list(output)}}


def _ended(chunks: list[Any]) -> list[tuple[str, str]]:
    return [
        (
            c.block.type,
            c.block.arguments if c.block.type == "tool-call" else c.block.text,
        )
        for c in chunks
        if c.type == "block-end"
    ]


@pytest.mark.parametrize("terminal_id", ["done", "fresh", "none"])
def test_an_item_whose_id_changes_on_every_event_is_one_block(terminal_id):
    ids = _Rotating()
    events = _message_events(ids, 0, ["Hel", "lo"])
    done_id = events[-1]["item"]["id"]
    mid = {"done": done_id, "fresh": ids("msg"), "none": None}[terminal_id]
    chunks, error = run(*events, _completed(_message(mid, "Hello")))
    assert error is None
    assert _ended(chunks) == [("text", "Hello")]
    assert _texts_of(chunks) == ["Hel", "lo"]
    assert list(validate_stream(chunks, strict=True)) == chunks
    # The replay entry names the item as output_item.done gave it.
    assert chunks[-1].replay_state.blocks[0]["id"] == done_id


def test_changing_ids_with_non_dense_indexes_match_the_terminal_output_in_order():
    ids = _Rotating()
    events = [
        *_call_events(ids, 0, "call_a", '{"city":"Oslo"}'),
        *_message_events(ids, 2, ["Fetching two."], done=False),
        *_call_events(ids, 5, "call_b", '{"city":"Rome"}'),
    ]
    terminal = _completed(
        _call(ids("fc"), "call_a", '{"city":"Oslo"}'),
        _message(ids("msg"), "Fetching two."),
        _call(ids("fc"), "call_b", '{"city":"Rome"}'),
    )
    chunks, error = run(*events, terminal)
    assert error is None
    assert _ended(chunks) == [
        ("tool-call", '{"city":"Oslo"}'),
        ("text", "Fetching two."),
        ("tool-call", '{"city":"Rome"}'),
    ]
    assert chunks[-1].reason == FinishReason.TOOL_CALLS


def test_changing_ids_with_a_reused_index_keep_the_text_and_both_calls():
    # Ollama's shape (text never closed, the first call reusing its index, the
    # terminal output in another order), with ids that change on every event.
    ids = _Rotating()
    events = [
        *_message_events(ids, 0, ["Let me check."], done=False),
        *_call_events(ids, 0, "call_a", '{"city":"Lyon"}'),
        *_call_events(ids, 1, "call_b", '{"tz":"UTC"}'),
    ]
    terminal = _completed(
        _call(ids("fc"), "call_a", '{"city":"Lyon"}'),
        _call(ids("fc"), "call_b", '{"tz":"UTC"}'),
        _message(ids("msg"), "Let me check."),
    )
    chunks, error = run(*events, terminal)
    assert error is None
    assert _ended(chunks) == [
        ("text", "Let me check."),
        ("tool-call", '{"city":"Lyon"}'),
        ("tool-call", '{"tz":"UTC"}'),
    ]


def test_ids_that_change_only_after_the_first_events_still_give_one_block():
    # added and content_part.added share an id, the deltas do not, done and
    # the terminal output use the first id again.
    added = {
        "type": "response.output_item.added",
        "output_index": 0,
        "item": {"id": "m", "type": "message", "content": []},
    }
    deltas = [
        {
            "type": "response.output_text.delta",
            "item_id": f"m.{n}",
            "output_index": 0,
            "content_index": 0,
            "delta": piece,
        }
        for n, piece in enumerate(["Hel", "lo"])
    ]
    chunks, error = run(
        added,
        _part(),
        *deltas,
        _item_done("Hello"),
        _completed(_message("m", "Hello")),
    )
    assert error is None
    assert _ended(chunks) == [("text", "Hello")]


def test_terminal_calls_without_matching_ids_are_matched_by_call_id():
    ids = _Rotating()
    events = [
        *_call_events(ids, 0, "call_a", '{"n":1}'),
        *_call_events(ids, 1, "call_b", '{"n":2}'),
    ]
    terminal = _completed(
        _call(ids("fc"), "call_b", '{"n":2}'),
        _call(ids("fc"), "call_a", '{"n":1}'),
    )
    chunks, error = run(*events, terminal)
    assert error is None
    assert _ended(chunks) == [("tool-call", '{"n":1}'), ("tool-call", '{"n":2}')]


def test_deltas_without_an_item_id_match_their_done_and_terminal_items():
    added = {
        "type": "response.output_item.added",
        "output_index": 0,
        "item": {"type": "message", "content": []},
    }
    delta = {
        "type": "response.output_text.delta",
        "output_index": 0,
        "content_index": 0,
        "delta": "Hi.",
    }
    done = {
        "type": "response.output_item.done",
        "output_index": 0,
        "item": _message("msg_1", "Hi."),
    }
    chunks, error = run(added, delta, done, _completed(_message("msg_1", "Hi.")))
    assert error is None
    assert _ended(chunks) == [("text", "Hi.")]
    assert chunks[-1].replay_state.blocks[0]["id"] == "msg_1"


def test_a_terminal_item_that_never_streamed_is_still_new_content():
    ids = _Rotating()
    events = _message_events(ids, 0, ["One."])
    terminal = _completed(_message(ids("msg"), "One."), _message(ids("msg"), "Two."))
    chunks, error = run(*events, terminal)
    assert error is None
    assert _ended(chunks) == [("text", "One."), ("text", "Two.")]
    # With stable ids, an output item the stream never named is new as well.
    events = _message_events(lambda prefix: "m1", 0, ["One."])
    terminal = _completed(_message("m1", "One."), _message("m2", "Two."))
    chunks, error = run(*events, terminal)
    assert error is None
    assert _ended(chunks) == [("text", "One."), ("text", "Two.")]


def test_a_new_id_at_an_index_holding_another_kind_is_a_new_item():
    chunks, error = run(
        CALL_ADDED,
        DELTA,
        {
            "type": "response.function_call_arguments.done",
            "item_id": "fc_1",
            "output_index": 0,
            "arguments": '{"a":1',
        },
        {
            "type": "response.output_text.delta",
            "item_id": "msg_9",
            "output_index": 0,
            "content_index": 0,
            "delta": "after",
        },
        END,
    )
    assert error is None
    assert _ended(chunks) == [("tool-call", '{"a":1'), ("text", "after")]


# --- final texts are a check against what streamed ---------------------------------


def _part_done(text: str, index: int = 0) -> dict[str, Any]:
    return {
        "type": "response.content_part.done",
        "item_id": "m",
        "output_index": 0,
        "content_index": index,
        "part": {"type": "output_text", "text": text},
    }


def _item_done(text: str) -> dict[str, Any]:
    return {
        "type": "response.output_item.done",
        "output_index": 0,
        "item": _message("m", text),
    }


@pytest.mark.parametrize("where", ["done", "terminal"])
def test_a_final_text_contradicting_a_closed_block_is_malformed(where):
    final = (
        _item_done("Howdy") if where == "done" else _completed(_message("m", "Howdy"))
    )
    chunks, error = run(MSG, _part(), _text("Hello"), _part_done("Hello"), final)
    assert error is not None
    assert error.code == ErrorCode.MALFORMED_RESPONSE
    assert error.message == (
        "OpenAI (Responses API) sent a final message text that contradicts its "
        "deltas in its stream"
    )
    # What streamed was written as it came; nothing is added or taken back.
    assert [c.block.text for c in chunks if c.type == "block-end"] == ["Hello"]
    assert chunks[-1].reason.failure.code == ErrorCode.MALFORMED_RESPONSE


def test_a_final_text_that_is_part_of_what_streamed_keeps_the_streamed_text(caplog):
    caplog.set_level("DEBUG", logger="dsh_llm.adapters.openai_responses.translate")
    chunks, error = run(MSG, _part(), _text("Hello \n"), _part_done("Hello"), END)
    assert error is None
    assert [c.block.text for c in chunks if c.type == "block-end"] == ["Hello \n"]
    assert chunks[-1].reason == FinishReason.STOP
    (record,) = caplog.records
    assert record.levelname == "WARNING"
    assert record.getMessage() == (
        "OpenAI (Responses API): a final message text of 5 characters is part of "
        "the 7 streamed; the streamed text stands"
    )


def test_content_part_done_supplies_a_lost_tail_before_the_block_ends():
    chunks, error = run(MSG, _part(), _text("Hel"), _part_done("Hello"), END)
    assert error is None
    assert _texts_of(chunks) == ["Hel", "lo"]
    assert [c.block.text for c in chunks if c.type == "block-end"] == ["Hello"]


def test_a_final_text_longer_than_an_ended_block_adds_the_rest_as_a_new_block():
    chunks, error = run(
        MSG, _part(), _text("Hel"), _part_done("Hel"), _item_done("Hello"), END
    )
    assert error is None
    assert [c.block.text for c in chunks if c.type == "block-end"] == ["Hel", "lo"]
    assert list(validate_stream(chunks, strict=True)) == chunks


def test_a_part_resumed_after_an_early_close_is_checked_as_a_whole():
    chunks, error = run(MSG, _text("a"), RS, _text("b"), _item_done("ab"), _completed())
    assert error is None
    ends = [c.block for c in chunks if c.type == "block-end"]
    assert [(b.type, b.text) for b in ends] == [
        ("text", "a"),
        ("reasoning", ""),
        ("text", "b"),
    ]


def test_the_parts_of_a_message_numbered_across_items_match_its_final_content():
    # vLLM numbers content parts across items: this message's first part
    # streams as content_index 5, its final content has it at position 0.
    events = [
        {
            "type": "response.output_item.added",
            "output_index": 1,
            "item": {"id": "m", "type": "message", "content": []},
        },
        {
            "type": "response.output_text.delta",
            "item_id": "m",
            "output_index": 1,
            "content_index": 5,
            "delta": "Hi.",
        },
        {
            "type": "response.output_item.done",
            "output_index": 1,
            "item": _message("m", "Hi."),
        },
    ]
    chunks, error = run(*events, _completed(_message("m", "Hi.")))
    assert error is None
    assert [c.block.text for c in chunks if c.type == "block-end"] == ["Hi."]


def _args_done(arguments: str) -> dict[str, Any]:
    return {
        "type": "response.function_call_arguments.done",
        "item_id": "fc_1",
        "output_index": 0,
        "arguments": arguments,
    }


def _call_done(arguments: str) -> dict[str, Any]:
    return {
        "type": "response.output_item.done",
        "output_index": 0,
        "item": _call("fc_1", "call_1", arguments),
    }


def test_arguments_contradicting_a_call_that_already_ended_are_malformed():
    chunks, error = run(
        CALL_ADDED, DELTA, _args_done('{"a":1'), _call_done('{"b":2}'), END
    )
    assert error is not None
    assert error.code == ErrorCode.MALFORMED_RESPONSE
    assert [c.block.arguments for c in chunks if c.type == "block-end"] == ['{"a":1']


@pytest.mark.parametrize("final", ["", "{}"])
def test_a_call_without_arguments_agrees_with_an_empty_or_braces_final(final):
    chunks, error = run(CALL_ADDED, _args_done(""), _call_done(final), END)
    assert error is None
    assert [c.block.arguments for c in chunks if c.type == "block-end"] == ["{}"]


def test_argument_deltas_the_done_event_contradicts_are_malformed_never_run():
    # Reported of GitHub Copilot (some integrations): argument deltas that are
    # not the arguments, the plain arguments only in .done, ids changing on
    # every event. The call fails instead of running other arguments.
    ids = _Rotating()
    events = _call_events(ids, 0, "call_a", "x9Fq")
    events[-1]["arguments"] = '{"city":"Lyon"}'
    chunks, error = run(*events, END)
    assert error is not None
    assert error.code == ErrorCode.MALFORMED_RESPONSE
    assert not [c for c in chunks if c.type == "block-end"]


# --- a cap cut the server does not mark (llama-server) ------------------------------


def _answer(text: str, output_tokens: int) -> list[dict[str, Any]]:
    """llama-server's answer: a message item, deltas without output_index, and
    ``completed`` whatever ended it."""
    item = {"id": "msg_1", "type": "message", "role": "assistant", "content": []}
    done = {
        **item,
        "status": "completed",
        "content": [{"type": "output_text", "text": text}],
    }
    return [
        {"type": "response.output_item.added", "item": item},
        {"type": "response.output_text.delta", "item_id": "msg_1", "delta": text},
        {
            "type": "response.completed",
            "response": {
                "id": "resp_1",
                "status": "completed",
                "output": [done],
                "usage": {"input_tokens": 3, "output_tokens": output_tokens},
            },
        },
    ]


@pytest.mark.parametrize(
    ("cap", "output_tokens", "kind"),
    [
        (16, 16, "max-tokens"),
        (16, 17, "max-tokens"),
        (16, 15, "stop"),
        (None, 16, "stop"),
    ],
)
def test_a_completed_answer_that_reached_an_unmarked_cap_is_max_tokens(
    cap, output_tokens, kind
):
    translator = ResponsesTranslator(LLAMACPP, unmarked_cap=cap)
    chunks = feed_all(*_answer("Once upon", output_tokens), translator=translator)
    assert list(validate_stream(chunks, strict=True)) == chunks
    assert chunks[-1].reason.kind == kind
    assert chunks[-2].usage.output_tokens == output_tokens


def test_a_call_that_reached_an_unmarked_cap_is_max_tokens_not_tool_calls():
    translator = ResponsesTranslator(LLAMACPP, unmarked_cap=4)
    done = {**CALL_ADDED["item"], "arguments": '{"a":1', "status": "completed"}
    chunks = feed_all(
        CALL_ADDED,
        DELTA,
        {
            "type": "response.completed",
            "response": {
                "status": "completed",
                "output": [done],
                "usage": {"input_tokens": 3, "output_tokens": 4},
            },
        },
        translator=translator,
    )
    assert chunks[-1].reason.kind == "max-tokens"


def test_an_unmarked_cap_never_turns_a_failure_into_a_cut():
    translator = ResponsesTranslator(LLAMACPP, unmarked_cap=4)
    chunks = feed_all(
        {
            "type": "response.incomplete",
            "response": {
                "status": "incomplete",
                "incomplete_details": {"reason": "content_filter"},
                "output": [],
                "usage": {"input_tokens": 3, "output_tokens": 9},
            },
        },
        translator=translator,
    )
    assert chunks[-1].reason.failure.code == "CONTENT_FILTER"
