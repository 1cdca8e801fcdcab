"""GeminiTranslator (dsh_llm.adapters.gemini.translate): recorded SSE bodies in,
the strict chunk sequence out, under every split; usage, finish and replay
mapping; hostile payloads."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from dsh_llm.adapters.gemini.translate import GeminiTranslator
from dsh_llm.adapters.gemini.translate import finish_failure
from dsh_llm.adapters.gemini.translate import map_usage
from dsh_llm.attachments import MemoryAttachmentStore
from dsh_llm.attachments import attachment_id
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import BlockEnd
from dsh_llm.protocol import BlockStart
from dsh_llm.protocol import CallId
from dsh_llm.protocol import Finish
from dsh_llm.protocol import Message
from dsh_llm.protocol import ModelSource
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.protocol import UsageChunk
from dsh_llm.protocol import create_user_message
from dsh_llm.serde import chunk_to_dict
from dsh_llm.serde import read_jsonl
from dsh_llm.transport.sse import SseDecoder
from dsh_llm.transport.sse import SseEvent

from ...attachments.images import jpeg
from ...attachments.images import png
from ..wire_replay import SPLITS
from ..wire_replay import feed_all
from ..wire_replay import replay

FIXTURES = Path(__file__).parent.parent.parent / "fixtures" / "gemini"
NAMES = sorted(p.stem for p in FIXTURES.glob("*.sse"))


def _decoder() -> SseDecoder:
    return SseDecoder(terminal_data=None, provider="Gemini")


def _expected(name: str) -> list[dict[str, Any]]:
    return [
        chunk_to_dict(c) for c in read_jsonl(str(FIXTURES / f"{name}.chunks.jsonl"))
    ]


def test_there_is_a_fixture_for_every_case():
    assert len(NAMES) >= 40
    for name in NAMES:
        assert (FIXTURES / f"{name}.chunks.jsonl").exists(), name


@pytest.mark.parametrize("split", SPLITS)
@pytest.mark.parametrize("name", NAMES)
def test_recorded_stream_translates_to_its_expected_chunks(name, split):
    body = (FIXTURES / f"{name}.sse").read_bytes()
    chunks = replay(body, split, _decoder(), GeminiTranslator())
    assert [chunk_to_dict(c) for c in chunks] == _expected(name)


def test_fixtures_use_crlf_framing_like_the_api():
    body = (FIXTURES / "text_stop.sse").read_bytes()
    assert body.count(b"\r\n\r\n") == 3
    assert b"\n\n" not in body.replace(b"\r\n", b"")


def event(payload: str | dict[str, Any]) -> SseEvent:
    return SseEvent(payload if isinstance(payload, str) else json.dumps(payload))


def calls_event(*calls: dict[str, Any], **extra: Any) -> SseEvent:
    parts = [{"functionCall": call} for call in calls]
    return event(
        {"candidates": [{"content": {"parts": parts}, "finishReason": "STOP"}], **extra}
    )


def text_event(text: str, **extra: Any) -> SseEvent:
    candidate: dict[str, Any] = {
        "content": {"parts": [{"text": text}], "role": "model"}
    }
    candidate.update(extra)
    return SseEvent(json.dumps({"candidates": [candidate]}))


# --- ending -----------------------------------------------------------------------


def test_close_without_a_finish_reason_raises_stream_closed_never_stop():
    translator = GeminiTranslator()
    translator.feed(text_event("Hello"))
    with pytest.raises(LlmError) as caught:
        translator.close()
    assert caught.value.code == ErrorCode.STREAM_CLOSED
    assert not translator.finished


def test_an_empty_body_is_stream_closed():
    with pytest.raises(LlmError) as caught:
        GeminiTranslator().close()
    assert caught.value.code == ErrorCode.STREAM_CLOSED


def test_a_finish_reason_ends_the_answer_only_at_the_end_of_the_body():
    # Vertex AI (and older Gemini API streams) put finishReason on every chunk:
    # text after a STOP is still the answer, and the finish comes at EOF.
    translator = GeminiTranslator()
    first = translator.feed(text_event("Hi", finishReason="STOP"))
    assert [c.type for c in first] == ["block-start", "text-delta"]
    assert not translator.finished
    assert [
        c.type for c in translator.feed(text_event(" there", finishReason="STOP"))
    ] == ["text-delta"]
    chunks = translator.close()
    assert translator.finished
    assert chunks[0] == BlockEnd(index=0, block=TextBlock(text="Hi there"))
    assert isinstance(chunks[-1], Finish)
    assert chunks[-1].reason.kind == "stop"
    assert translator.feed(text_event("more")) == []
    assert translator.close() == []


@pytest.mark.parametrize(
    ("last", "code"),
    [
        ("SAFETY", "CONTENT_FILTER"),
        ("RECITATION", "CONTENT_FILTER"),
        ("OTHER", "OTHER"),
        ("not a reason", ErrorCode.UNKNOWN_FINISH_REASON),
    ],
)
def test_the_last_finish_reason_wins(last, code):
    translator = GeminiTranslator()
    translator.feed(text_event("Hi", finishReason="STOP"))
    translator.feed(text_event("", finishReason=last))
    finish = translator.close()[-1]
    assert isinstance(finish, Finish)
    assert finish.reason.failure is not None
    assert finish.reason.failure.code == code


def test_an_error_after_a_stop_fails_the_call():
    translator = GeminiTranslator()
    translator.feed(text_event("Hi", finishReason="STOP"))
    with pytest.raises(LlmError) as caught:
        translator.feed(
            event({"error": {"code": 500, "message": "boom", "status": "INTERNAL"}})
        )
    assert caught.value.code == ErrorCode.SERVER
    assert not translator.finished


def test_empty_response_as_stop_turns_a_blockless_stop_into_stop():
    translator = GeminiTranslator(empty_response_as_stop=True)
    assert translator.feed(text_event("", finishReason="STOP")) == []
    chunks = translator.close()
    assert [c.type for c in chunks] == ["usage", "finish"]
    assert chunks[-1].reason.kind == "stop"  # type: ignore[union-attr]


def test_empty_data_and_keepalive_events_produce_nothing():
    translator = GeminiTranslator()
    assert translator.feed(SseEvent("")) == []
    assert translator.feed(SseEvent("  \n")) == []
    assert not translator.finished


def test_an_sse_error_field_is_raised():
    translator = GeminiTranslator()
    with pytest.raises(LlmError) as caught:
        translator.feed(SseEvent("", "error", None, None, "backend unavailable"))
    assert caught.value.message == "backend unavailable"
    assert caught.value.code == ErrorCode.SERVER
    assert not translator.finished


# --- ids, usage, failures -----------------------------------------------------------


def _call_ids(chunks: list[Any]) -> list[str]:
    return [
        c.block.id
        for c in chunks
        if isinstance(c, BlockEnd) and isinstance(c.block, ToolCallBlock)
    ]


def test_a_call_without_id_or_response_id_gets_an_id_from_its_place():
    two_calls = calls_event({"name": "f"}, {"name": "g"})
    ids = _call_ids(GeminiTranslator().feed(two_calls))
    assert ids == ["call_0", "call_1"]
    # The same bytes give the same ids.
    assert _call_ids(GeminiTranslator().feed(two_calls)) == ids


def test_made_ids_never_repeat_the_history_or_a_wire_id_of_the_response():
    earlier = Message(
        role="assistant",
        content=(
            ToolCallBlock(id=CallId("call_0"), name="f", arguments="{}"),
            ToolCallBlock(id=CallId("call_2"), name="f", arguments="{}"),
        ),
        source=ModelSource(provider="gemini", model="m"),
    )
    history = (create_user_message("hi"), earlier, create_user_message("again"))
    translator = GeminiTranslator(history=history)
    chunks = translator.feed(
        calls_event({"name": "f", "id": "call_3"}, {"name": "g"}, {"name": "h"})
    )
    assert _call_ids(chunks) == ["call_3", "call_1", "call_4"]


def test_a_response_id_names_the_calls_of_that_response():
    chunks = GeminiTranslator().feed(
        calls_event({"name": "f"}, {"name": "g"}, responseId="r1")
    )
    assert _call_ids(chunks) == ["call_r1_0", "call_r1_1"]


def test_new_call_id_is_injectable():
    translator = GeminiTranslator(new_call_id=lambda rid, n: f"{rid}-{n}")
    chunks = translator.feed(calls_event({"name": "f"}, responseId="r9"))
    (call,) = [c.block for c in chunks if isinstance(c, BlockEnd)]
    assert call == ToolCallBlock(id="r9-0", name="f", arguments="{}")  # type: ignore[arg-type]


def test_usage_so_far_follows_the_running_totals():
    translator = GeminiTranslator()
    assert [translator.usage_so_far] == [None]
    translator.feed(
        event('{"usageMetadata": {"promptTokenCount": 10, "totalTokenCount": 10}}')
    )
    assert translator.usage_so_far == TokenUsage(input_tokens=10, output_tokens=0)
    translator.feed(event('{"usageMetadata": {"candidatesTokenCount": 4}}'))
    assert translator.usage_so_far == TokenUsage(input_tokens=10, output_tokens=4)
    translator.feed(event('{"usageMetadata": {"promptTokenCount": null}}'))
    assert translator.usage_so_far == TokenUsage(input_tokens=10, output_tokens=4)


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        ({}, TokenUsage(input_tokens=None, output_tokens=None)),
        ({"promptTokenCount": 5}, TokenUsage(input_tokens=5, output_tokens=None)),
        (
            {"promptTokenCount": 5, "candidatesTokenCount": 2, "totalTokenCount": 99},
            TokenUsage(input_tokens=5, output_tokens=2),
        ),
        (
            {"promptTokenCount": 5, "thoughtsTokenCount": 3, "totalTokenCount": 8},
            TokenUsage(input_tokens=5, output_tokens=3, reasoning_tokens=3),
        ),
        (
            {"promptTokenCount": 5, "cachedContentTokenCount": 9},
            TokenUsage(input_tokens=None, output_tokens=None, cache_read_tokens=9),
        ),
        (
            {"promptTokenCount": 2**53, "candidatesTokenCount": -1},
            TokenUsage(input_tokens=None, output_tokens=None),
        ),
        (
            {
                "promptTokenCount": "5",
                "candidatesTokenCount": 1.0,
                "thoughtsTokenCount": True,
            },
            TokenUsage(input_tokens=None, output_tokens=None),
        ),
    ],
)
def test_map_usage_never_invents_a_count(usage, expected):
    assert map_usage(usage) == expected


def test_finish_failure_codes():
    assert finish_failure("SAFETY", None).code == "CONTENT_FILTER"
    assert finish_failure("IMAGE_SAFETY", None).code == "CONTENT_FILTER"
    assert finish_failure("LANGUAGE", None).code == "LANGUAGE"
    assert finish_failure("TOO_MANY_TOOL_CALLS", None).code == "TOO_MANY_TOOL_CALLS"
    assert finish_failure("lower", None).code == ErrorCode.UNKNOWN_FINISH_REASON
    assert finish_failure("a b", None).code == ErrorCode.UNKNOWN_FINISH_REASON
    with_message = finish_failure("OTHER", "the model stopped")
    assert with_message.message == "Gemini stopped: OTHER: the model stopped"
    long = finish_failure("OTHER", "x" * 500)
    assert len(long.message) < 160


def test_an_in_stream_error_keeps_gemini_message_and_is_classified():
    # Redacting an echoed key is the read loop's work (tests/adapters/gemini/
    # test_adapter_stream.py); the translator reports the provider's words.
    translator = GeminiTranslator()
    with pytest.raises(LlmError) as caught:
        translator.feed(
            event(
                {
                    "error": {
                        "code": 400,
                        "message": "API key AIzaSECRET not valid",
                        "status": "INVALID_ARGUMENT",
                        "details": [
                            {
                                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                                "reason": "API_KEY_INVALID",
                            }
                        ],
                    }
                }
            )
        )
    failure = caught.value.failure
    assert failure.message == "API key AIzaSECRET not valid"
    assert (failure.code, failure.status) == ("AUTH", 400)


def test_a_malformed_payload_is_quoted_and_its_cause_holds_no_payload():
    translator = GeminiTranslator()
    with pytest.raises(LlmError) as caught:
        translator.feed(event("{AIzaSECRET"))
    assert caught.value.code == ErrorCode.MALFORMED_RESPONSE
    assert "{AIzaSECRET" in caught.value.message
    cause = caught.value.__cause__
    assert type(cause) is ValueError
    assert "AIzaSECRET" not in str(cause)
    assert not hasattr(cause, "doc")


def test_nan_arguments_are_malformed():
    translator = GeminiTranslator()
    with pytest.raises(LlmError) as caught:
        translator.feed(
            event(
                '{"candidates": [{"content": {"parts": [{"functionCall": '
                '{"name": "f", "args": {"x": NaN}}}]}}]}'
            )
        )
    assert caught.value.code == ErrorCode.MALFORMED_RESPONSE


def test_usage_comes_once_before_the_finish_with_the_latest_values():
    chunks = feed_all(
        GeminiTranslator(),
        [
            text_event("a"),
            event(
                {
                    "usageMetadata": {
                        "promptTokenCount": 3,
                        "candidatesTokenCount": 1,
                        "totalTokenCount": 4,
                    }
                }
            ),
            text_event("b", finishReason="STOP"),
        ],
    )
    usages = [c for c in chunks if isinstance(c, UsageChunk)]
    assert usages == [UsageChunk(usage=TokenUsage(input_tokens=3, output_tokens=1))]
    assert chunks.index(usages[0]) == len(chunks) - 2


ZEROS = {"promptTokenCount": 0, "candidatesTokenCount": 0, "totalTokenCount": 0}
"""LiteLLM's Gemini route: usageMetadata of zeros whatever was generated."""


def answer(*parts: dict[str, Any], usage: dict[str, Any]) -> SseEvent:
    candidate = {"content": {"parts": list(parts)}, "finishReason": "STOP"}
    return event({"candidates": [candidate], "usageMetadata": usage})


def _usage(chunks: list[Any]) -> TokenUsage:
    (usage,) = [c.usage for c in chunks if isinstance(c, UsageChunk)]
    return usage


@pytest.mark.parametrize(
    "parts",
    [
        [{"text": "Hello"}],
        [{"functionCall": {"name": "f", "args": {"a": 1}}}],
        [{"text": "hm", "thought": True}],
    ],
)
def test_counts_of_zero_beside_a_generated_answer_are_unknown(parts):
    usage = _usage(feed_all(GeminiTranslator(), [answer(*parts, usage=ZEROS)]))
    assert (usage.input_tokens, usage.output_tokens) == (None, None)


def test_counts_of_zero_without_any_block_may_be_true_and_stay():
    chunks = feed_all(GeminiTranslator(), [answer({"text": ""}, usage=ZEROS)])
    assert _usage(chunks) == TokenUsage(input_tokens=0, output_tokens=0)


def test_a_reasoning_count_of_zero_beside_reasoning_is_unknown_and_the_output_too():
    counts = {
        "promptTokenCount": 5,
        "candidatesTokenCount": 2,
        "thoughtsTokenCount": 0,
        "totalTokenCount": 7,
    }
    parts = [{"text": "hm", "thought": True}, {"text": "ok"}]
    chunks = feed_all(GeminiTranslator(), [answer(*parts, usage=counts)])
    assert _usage(chunks) == TokenUsage(
        input_tokens=5, output_tokens=None, reasoning_tokens=None
    )


def test_counts_above_zero_beside_an_answer_are_kept():
    counts = {"promptTokenCount": 5, "candidatesTokenCount": 2, "totalTokenCount": 7}
    chunks = feed_all(GeminiTranslator(), [answer({"text": "ok"}, usage=counts)])
    assert _usage(chunks) == TokenUsage(input_tokens=5, output_tokens=2)


def test_an_empty_finish_or_block_reason_is_no_reason():
    translator = GeminiTranslator()
    assert [c.type for c in translator.feed(text_event("a", finishReason=""))] == [
        "block-start",
        "text-delta",
    ]
    assert translator.feed(event({"promptFeedback": {"blockReason": ""}})) == []
    assert not translator.finished


def test_a_call_is_one_delta_with_its_whole_arguments_also_after_text():
    translator = GeminiTranslator()
    parts = [
        {"text": "Let me check."},
        {"functionCall": {"name": "f", "args": {"city": "Oslo"}}},
        {"functionCall": {"name": "g"}},
    ]
    chunks = translator.feed(
        event({"candidates": [{"content": {"parts": parts}}], "responseId": "r"})
    )
    assert [chunk_to_dict(c) for c in chunks[2:]] == [
        {
            "type": "block-end",
            "index": 0,
            "block": {"type": "text", "text": "Let me check."},
        },
        {"type": "block-start", "index": 1, "blockType": "tool-call"},
        {
            "type": "tool-call-delta",
            "index": 1,
            "id": "call_r_0",
            "name": "f",
            "argumentsDelta": '{"city":"Oslo"}',
        },
        {
            "type": "block-end",
            "index": 1,
            "block": {
                "type": "tool-call",
                "id": "call_r_0",
                "name": "f",
                "arguments": '{"city":"Oslo"}',
            },
        },
        {"type": "block-start", "index": 2, "blockType": "tool-call"},
        {
            "type": "tool-call-delta",
            "index": 2,
            "id": "call_r_1",
            "name": "g",
            "argumentsDelta": "{}",
        },
        {
            "type": "block-end",
            "index": 2,
            "block": {
                "type": "tool-call",
                "id": "call_r_1",
                "name": "g",
                "arguments": "{}",
            },
        },
    ]


def test_an_error_after_text_in_one_event_leaves_the_text_and_usage_before_it():
    # Vertex wraps responses in an array: the first item's text was said before
    # the error item failed the call, and the usage already reported follows it.
    translator = GeminiTranslator()
    translator.feed(
        event({"usageMetadata": {"promptTokenCount": 4, "totalTokenCount": 4}})
    )
    wrapped = [
        {"candidates": [{"content": {"parts": [{"text": "Hal"}]}}]},
        {"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}},
    ]
    with pytest.raises(LlmError) as caught:
        translator.feed(event(json.dumps(wrapped)))
    assert caught.value.code == ErrorCode.SERVER
    assert [chunk_to_dict(c) for c in translator.before_failure()] == [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "text-delta", "index": 0, "text": "Hal"},
        # The running total said 0 before "Hal" came: never under-reported.
        {"type": "usage", "usage": {"inputTokens": 4, "outputTokens": None}},
    ]
    assert translator.before_failure() == []


# --- images the model returns -------------------------------------------------------


def image_event(inline: dict[str, Any], **part: Any) -> SseEvent:
    return event(
        {"candidates": [{"content": {"parts": [{"inlineData": inline, **part}]}}]}
    )


def test_a_returned_image_is_put_in_the_store_and_its_block_refers_to_it():
    store = MemoryAttachmentStore()
    data = png(4, 3)
    translator = GeminiTranslator(attachments=store)
    chunks = translator.feed(
        image_event({"mimeType": "image/png", "data": base64.b64encode(data).decode()})
    )
    start, end = chunks
    assert start == BlockStart(index=0, block_type="image")
    assert isinstance(end, BlockEnd)
    ref = end.block.attachment  # type: ignore[union-attr]
    assert (ref.media_type, ref.width, ref.height, ref.bytes) == (
        "image/png",
        4,
        3,
        len(data),
    )
    assert store.get(ref.attachment_id) == data


def test_url_safe_unpadded_base64_is_read_too():
    data = jpeg(5, 7)
    encoded = base64.urlsafe_b64encode(data).decode().rstrip("=")
    chunks = GeminiTranslator().feed(
        image_event({"mimeType": "image/jpeg", "data": encoded})
    )
    assert chunks[-1].block.attachment.attachment_id == attachment_id(data)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "inline",
    [
        {"mimeType": "image/png", "data": "not base64!"},
        {"mimeType": "image/png", "data": ""},
        {"mimeType": "image/png"},
        {"data": "iVBORw0KGgo="},
        "iVBORw0KGgo=",
    ],
)
def test_an_unreadable_inline_data_part_is_malformed(inline):
    with pytest.raises(LlmError) as caught:
        GeminiTranslator().feed(image_event(inline))
    assert caught.value.code == ErrorCode.MALFORMED_RESPONSE


def test_content_no_image_block_carries_is_never_silent():
    encoded = base64.b64encode(b"%PDF-1.7 ...").decode()
    with pytest.raises(LlmError) as caught:
        GeminiTranslator().feed(
            image_event({"mimeType": "application/pdf", "data": encoded})
        )
    assert caught.value.code == ErrorCode.UNSUPPORTED_CONTENT
    assert "application/pdf" in caught.value.message


# --- streamed function-call arguments (Vertex AI) ----------------------------------


def call_part(**call: Any) -> dict[str, Any]:
    return {"functionCall": call}


def parts_event(*parts: dict[str, Any]) -> SseEvent:
    return event({"candidates": [{"content": {"parts": list(parts)}}]})


def test_streamed_arguments_are_deltas_as_they_arrive():
    translator = GeminiTranslator(new_call_id=lambda rid, n: f"c{n}")
    opened = translator.feed(parts_event(call_part(name="f", willContinue=True)))
    assert [c.type for c in opened] == ["block-start", "tool-call-delta"]
    piece = translator.feed(
        parts_event(
            call_part(
                partialArgs=[{"jsonPath": "$.q", "stringValue": "x"}], willContinue=True
            )
        )
    )
    assert [c.arguments_delta for c in piece] == ['{"q":"x"']  # type: ignore[union-attr]
    ended = translator.feed(parts_event(call_part()))
    assert ended[-1] == BlockEnd(
        index=0,
        block=ToolCallBlock(id="c0", name="f", arguments='{"q":"x"}'),  # type: ignore[arg-type]
    )


def test_text_while_arguments_stream_comes_after_the_call():
    translator = GeminiTranslator(new_call_id=lambda rid, n: f"c{n}")
    chunks = feed_all(
        translator,
        [
            parts_event(call_part(name="f", willContinue=True)),
            parts_event({"text": "meanwhile"}),
            parts_event(call_part(partialArgs=[{"jsonPath": "$.a", "numberValue": 1}])),
            text_event(" more", finishReason="STOP"),
        ],
    )
    ended = [c.block for c in chunks if isinstance(c, BlockEnd)]
    assert ended == [
        ToolCallBlock(id="c0", name="f", arguments='{"a":1}'),  # type: ignore[arg-type]
        TextBlock(text="meanwhile more"),
    ]
    assert chunks[-1].reason.kind == "tool-calls"  # type: ignore[union-attr]


def test_another_call_while_arguments_stream_is_malformed():
    translator = GeminiTranslator()
    translator.feed(parts_event(call_part(name="f", willContinue=True)))
    with pytest.raises(LlmError) as caught:
        translator.feed(parts_event(call_part(name="g", args={})))
    assert caught.value.code == ErrorCode.MALFORMED_RESPONSE
    assert "still streaming" in caught.value.message


@pytest.mark.parametrize(
    "call",
    [
        {"name": "f", "willContinue": "yes"},
        {"name": "f", "partialArgs": {"jsonPath": "$.a"}},
        {"args": {}},
    ],
)
def test_a_bad_streamed_call_part_is_malformed(call):
    with pytest.raises(LlmError) as caught:
        GeminiTranslator().feed(parts_event(call_part(**call)))
    assert caught.value.code == ErrorCode.MALFORMED_RESPONSE


def test_an_end_marker_with_no_call_streaming_is_nothing():
    translator = GeminiTranslator()
    assert translator.feed(parts_event(call_part(willContinue=False))) == []
    assert translator.feed(parts_event(call_part())) == []


def test_a_streamed_call_keeps_its_first_signature_and_later_ones_as_parts():
    translator = GeminiTranslator(new_call_id=lambda rid, n: f"c{n}")
    chunks = feed_all(
        translator,
        [
            parts_event(
                {**call_part(name="f", willContinue=True), "thoughtSignature": "S1"}
            ),
            parts_event({**call_part(), "thoughtSignature": "S2"}),
            text_event("", finishReason="STOP"),
        ],
    )
    finish = chunks[-1]
    assert isinstance(finish, Finish)
    assert finish.replay_state is not None
    assert finish.replay_state.blocks == (
        {
            "callId": "c0",
            "thoughtSignature": "S1",
            "after": [{"text": "", "thoughtSignature": "S2"}],
        },
    )
