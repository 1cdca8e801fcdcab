"""dsh_llm.serde: strict reading; what a malformed chunk or message raises."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import Message
from dsh_llm.protocol import ModelSource
from dsh_llm.protocol import ReplayEnvelope
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import UserSource
from dsh_llm.serde import chunk_from_dict
from dsh_llm.serde import chunk_from_json
from dsh_llm.serde import message_from_dict
from dsh_llm.serde import message_to_dict

# --- malformed chunks ---------------------------------------------------------------

_FAILURE = {"message": "m", "code": "SERVER"}

MALFORMED_CHUNKS: list[tuple[Any, str]] = [
    # unknown or missing tag
    ({"type": "text-deltas", "index": 0, "text": "a"}, "$.type"),
    ({"index": 0, "text": "a"}, "$.type"),
    ({"type": 3, "index": 0, "text": "a"}, "$.type"),
    # wrong types
    ({"type": "text-delta", "index": True, "text": "a"}, "$.index"),
    ({"type": "text-delta", "index": "0", "text": "a"}, "$.index"),
    ({"type": "text-delta", "index": 0.5, "text": "a"}, "$.index"),
    ({"type": "text-delta", "index": 0, "text": 5}, "$.text"),
    ({"type": "text-delta", "index": 0, "text": None}, "$.text"),
    ({"type": "tool-call-delta", "index": 0, "argumentsDelta": {}}, "$.argumentsDelta"),
    (
        {"type": "tool-call-delta", "index": 0, "argumentsDelta": "", "name": 1},
        "$.name",
    ),
    ({"type": "block-start", "index": 0, "blockType": ["text"]}, "$.blockType"),
    (
        {"type": "usage", "usage": {"inputTokens": "1", "outputTokens": 1}},
        "inputTokens",
    ),
    (
        {"type": "usage", "usage": {"inputTokens": 1, "outputTokens": True}},
        "outputTokens",
    ),
    (
        {"type": "usage", "usage": {"inputTokens": 1, "outputTokens": 1.5}},
        "outputTokens",
    ),
    ({"type": "usage", "usage": [1, 2]}, "$.usage"),
    ({"type": "finish", "reason": "stop"}, "$.reason"),
    ({"type": "finish", "reason": None}, "$.reason"),
    # values out of their domain
    ({"type": "text-delta", "index": -1, "text": "a"}, "$.index"),
    ({"type": "block-start", "index": 0, "blockType": ""}, "$.blockType"),
    ({"type": "usage", "usage": {"inputTokens": -5, "outputTokens": 1}}, "inputTokens"),
    ({"type": "finish", "reason": {"kind": ""}}, "$.reason.kind"),
    # missing fields
    ({"type": "text-delta", "index": 0}, "$.text"),
    ({"type": "text-delta", "text": "a"}, "$.index"),
    ({"type": "tool-call-delta", "index": 0}, "$.argumentsDelta"),
    ({"type": "usage", "usage": {"inputTokens": 1}}, "outputTokens"),
    ({"type": "finish"}, "$.reason"),
    ({"type": "finish", "reason": {}}, "$.reason.kind"),
    # unknown keys
    ({"type": "text-delta", "index": 0, "text": "a", "extra": 1}, "extra"),
    ({"type": "usage", "usage": {"inputTokens": 1, "outputTokens": 1, "x": 0}}, "x"),
    # nested inside block-end's block
    ({"type": "block-end", "index": 0, "block": {"type": "text"}}, "$.block.text"),
    (
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": 1}},
        "$.block.text",
    ),
    ({"type": "block-end", "index": 0, "block": {"type": "video"}}, "$.block.type"),
    ({"type": "block-end", "index": 0, "block": "text"}, "$.block"),
    (
        {
            "type": "block-end",
            "index": 0,
            "block": {
                "type": "tool-result",
                "toolCallId": "c",
                "content": [
                    {"type": "text", "text": "ok"},
                    {"type": "text", "text": 2},
                ],
            },
        },
        "$.block.content[1].text",
    ),
    (
        {
            "type": "block-end",
            "index": 0,
            "block": {"type": "tool-result", "toolCallId": "c", "content": {}},
        },
        "$.block.content",
    ),
    (
        {
            "type": "block-end",
            "index": 0,
            "block": {
                "type": "tool-result",
                "toolCallId": "c",
                "content": [],
                "isError": 0,
            },
        },
        "$.block.isError",
    ),
    (
        {
            "type": "block-end",
            "index": 0,
            "block": {
                "type": "image",
                "attachment": {
                    "attachmentId": "sha256:abc",
                    "mediaType": "image/png",
                    "bytes": 1,
                    "width": 1,
                    "height": 1,
                },
            },
        },
        "$.block.attachment.attachmentId",
    ),
    # nested inside finish's failure
    ({"type": "finish", "reason": {"kind": "error"}}, "$.reason.failure"),
    ({"type": "finish", "reason": {"kind": "aborted"}}, "$.reason.failure"),
    (
        {"type": "finish", "reason": {"kind": "stop", "failure": _FAILURE}},
        "$.reason.failure",
    ),
    (
        {"type": "finish", "reason": {"kind": "error", "failure": {"message": "m"}}},
        "$.reason.failure.code",
    ),
    (
        {
            "type": "finish",
            "reason": {"kind": "error", "failure": {**_FAILURE, "code": ""}},
        },
        "$.reason.failure.code",
    ),
    (
        {
            "type": "finish",
            "reason": {"kind": "error", "failure": {**_FAILURE, "status": "500"}},
        },
        "$.reason.failure.status",
    ),
    (
        {
            "type": "finish",
            "reason": {"kind": "error", "failure": {**_FAILURE, "status": 600}},
        },
        "$.reason.failure.status",
    ),
    (
        {
            "type": "finish",
            "reason": {
                "kind": "error",
                "failure": {**_FAILURE, "providerRetryAfterMs": 0},
            },
        },
        "$.reason.failure.providerRetryAfterMs",
    ),
    (
        {
            "type": "finish",
            "reason": {
                "kind": "error",
                "failure": {**_FAILURE, "providerRetryAfterMs": 10**400},
            },
        },
        "$.reason.failure.providerRetryAfterMs",
    ),
    (
        {
            "type": "finish",
            "reason": {"kind": "error", "failure": {**_FAILURE, "requestId": ""}},
        },
        "$.reason.failure.requestId",
    ),
    (
        {
            "type": "finish",
            "reason": {"kind": "error", "failure": {**_FAILURE, "retry": 1}},
        },
        "retry",
    ),
    (
        {"type": "finish", "reason": {"kind": "stop"}, "replayState": {"blocks": []}},
        "$.replayState.response",
    ),
    (
        {
            "type": "finish",
            "reason": {"kind": "stop"},
            "replayState": {"response": 1, "blocks": "x"},
        },
        "$.replayState.blocks",
    ),
    (
        {"type": "finish", "reason": {"kind": "stop"}, "replayState": []},
        "$.replayState",
    ),
    # not an object at all
    ([], "$"),
    ("text-delta", "$"),
    (None, "$"),
    (7, "$"),
]


@pytest.mark.parametrize(("data", "path"), MALFORMED_CHUNKS)
def test_malformed_chunk_raises_invalid_chunk_naming_the_key(
    data: Any, path: str
) -> None:
    with pytest.raises(LlmError) as info:
        chunk_from_dict(data)

    assert info.value.code == ErrorCode.INVALID_CHUNK
    assert path in info.value.message
    assert info.value.message.startswith("invalid chunk: ")


@pytest.mark.parametrize(("data", "path"), MALFORMED_CHUNKS)
def test_malformed_chunk_json_text_raises_invalid_chunk(data: Any, path: str) -> None:
    with pytest.raises(LlmError) as info:
        chunk_from_json(json.dumps(data))

    assert info.value.code == ErrorCode.INVALID_CHUNK
    assert path in info.value.message


def test_messages_name_the_tag_vocabulary_and_the_json_type() -> None:
    with pytest.raises(
        LlmError, match=r'\$\.type: must be one of "block-start", .*, got "video"$'
    ):
        chunk_from_dict({"type": "video"})
    with pytest.raises(LlmError, match=r"\$\.type: is required \(expected one of "):
        chunk_from_dict({"index": 0})
    with pytest.raises(
        LlmError, match=r"\$\.index: must be an integer, got a boolean$"
    ):
        chunk_from_dict({"type": "text-delta", "index": False, "text": ""})
    with pytest.raises(LlmError, match=r"\$\.text: must be a string, got a number$"):
        chunk_from_dict({"type": "text-delta", "index": 0, "text": 1.5})
    with pytest.raises(LlmError, match=r"\$\.text: must be a string, got an integer$"):
        chunk_from_dict({"type": "text-delta", "index": 0, "text": 1})
    with pytest.raises(
        LlmError, match=r"\$\.name: must be a string or null, got a list$"
    ):
        chunk_from_dict(
            {"type": "tool-call-delta", "index": 0, "argumentsDelta": "", "name": []}
        )
    with pytest.raises(LlmError, match=r"\$\.text: is required \(expected a string\)$"):
        chunk_from_dict({"type": "text-delta", "index": 0})
    with pytest.raises(LlmError, match=r"\$ must be a mapping, got a boolean$"):
        chunk_from_dict(True)
    with pytest.raises(LlmError, match=r"\$ must be a mapping, got bytes$"):
        chunk_from_dict(b"{}")


def test_each_unknown_key_is_named_with_the_known_ones_and_a_hint() -> None:
    with pytest.raises(LlmError) as info:
        chunk_from_dict({"type": "text-delta", "index": 0, "text": "", "b": 1, "a": 2})
    assert info.value.message == (
        "invalid chunk: $.a: is not a known key (expected one of "
        '"index", "text", "citations") (and 1 more)'
    )
    with pytest.raises(LlmError) as info:
        chunk_from_dict({"type": "text-delta", "index": 0, "text": "", "Text": ""})
    assert info.value.message.endswith('; did you mean "text"?)')


def test_several_problems_are_counted_in_one_error() -> None:
    with pytest.raises(LlmError, match=r"\(and 1 more\)"):
        chunk_from_dict({"type": "text-delta", "index": "0", "text": 0})


def test_invalid_chunk_error_chains_the_underlying_problem() -> None:
    with pytest.raises(LlmError) as info:
        chunk_from_dict({"type": "text-delta", "index": 0})

    assert info.value.__cause__ is not None


@pytest.mark.parametrize(
    "text",
    ["", "{", "not json", '{"type":"text-delta",}', b"\xff\xfe", "[" * 100_000],
)
def test_text_that_is_not_json_raises_invalid_chunk(text: str | bytes) -> None:
    with pytest.raises(LlmError) as info:
        chunk_from_json(text)

    assert info.value.code == ErrorCode.INVALID_CHUNK


def test_deeply_nested_tool_results_raise_invalid_chunk_not_recursion_error() -> None:
    block: dict[str, Any] = {"type": "tool-result", "toolCallId": "c", "content": []}
    data = {"type": "block-end", "index": 0, "block": block}
    for _ in range(3000):
        inner: dict[str, Any] = {
            "type": "tool-result",
            "toolCallId": "c",
            "content": [],
        }
        block["content"].append(inner)
        block = inner

    with pytest.raises(LlmError) as info:
        chunk_from_dict(data)
    assert info.value.code == ErrorCode.INVALID_CHUNK


# --- malformed messages -------------------------------------------------------------

_GOOD_MESSAGE: dict[str, Any] = {
    "id": "m-1",
    "role": "user",
    "content": [{"type": "text", "text": "hi"}],
    "source": {"kind": "user"},
}

MALFORMED_MESSAGES: list[tuple[Any, str]] = [
    ({**_GOOD_MESSAGE, "role": "tool"}, "$.role"),
    ({**_GOOD_MESSAGE, "role": 1}, "$.role"),
    ({**_GOOD_MESSAGE, "id": ""}, "$.id"),
    ({**_GOOD_MESSAGE, "id": 7}, "$.id"),
    ({k: v for k, v in _GOOD_MESSAGE.items() if k != "role"}, "$.role"),
    ({k: v for k, v in _GOOD_MESSAGE.items() if k != "content"}, "$.content"),
    ({k: v for k, v in _GOOD_MESSAGE.items() if k != "source"}, "$.source"),
    ({**_GOOD_MESSAGE, "content": "hi"}, "$.content"),
    ({**_GOOD_MESSAGE, "content": [{"type": "text", "text": 1}]}, "$.content[0].text"),
    ({**_GOOD_MESSAGE, "content": [{"type": "audio"}]}, "$.content[0].type"),
    ({**_GOOD_MESSAGE, "source": {"kind": "robot"}}, "$.source.kind"),
    ({**_GOOD_MESSAGE, "source": {}}, "$.source.kind"),
    ({**_GOOD_MESSAGE, "source": "user"}, "$.source"),
    ({**_GOOD_MESSAGE, "source": {"kind": "user", "name": "x"}}, "name"),
    ({**_GOOD_MESSAGE, "source": {"kind": "tool"}}, "$.source.callId"),
    ({**_GOOD_MESSAGE, "source": {"kind": "model", "provider": "p"}}, "$.source.model"),
    (
        {
            **_GOOD_MESSAGE,
            "source": {"kind": "plugin", "plugin": "p", "form": "notice"},
        },
        "$.source.summary",
    ),
    (
        {**_GOOD_MESSAGE, "source": {"kind": "plugin", "plugin": "p", "form": "bogus"}},
        "$.source.form",
    ),
    ({**_GOOD_MESSAGE, "extra": True}, "extra"),
    ([], "$"),
    ("message", "$"),
    (None, "$"),
]


@pytest.mark.parametrize(("data", "path"), MALFORMED_MESSAGES)
def test_malformed_message_raises_invalid_message_naming_the_key(
    data: Any, path: str
) -> None:
    with pytest.raises(LlmError) as info:
        message_from_dict(data)

    assert info.value.code == ErrorCode.INVALID_MESSAGE
    assert path in info.value.message
    assert info.value.message.startswith("invalid message: ")


def test_good_message_dict_reads_back() -> None:
    message = message_from_dict(_GOOD_MESSAGE)

    assert message == Message(
        id="m-1", role="user", content=(TextBlock(text="hi"),), source=UserSource()
    )
    assert message_to_dict(message) == _GOOD_MESSAGE


def test_message_reading_keeps_model_source_replay_state() -> None:
    data = {
        **_GOOD_MESSAGE,
        "role": "assistant",
        "source": {
            "kind": "model",
            "provider": "p",
            "model": "m",
            "replayState": {"response": {"x": [1, 2.5, None]}, "blocks": [None]},
        },
    }

    message = message_from_dict(data)
    assert isinstance(message.source, ModelSource)
    assert message.source.replay_state == ReplayEnvelope(
        response={"x": [1, 2.5, None]}, blocks=(None,)
    )
    assert message_to_dict(message) == data
