"""dsh_llm.protocol: construction, validation and the helpers on the values."""

from __future__ import annotations

import math
import pickle
import uuid
from typing import Any

import attrs
import pytest
from hypothesis import given

from dsh_llm.protocol import BLOCK_TYPES
from dsh_llm.protocol import CHUNK_TYPES
from dsh_llm.protocol import CONTEXT_SUMMARY_MAX_CHARS
from dsh_llm.protocol import SOURCE_TYPES
from dsh_llm.protocol import BlockEnd
from dsh_llm.protocol import BlockStart
from dsh_llm.protocol import CallId
from dsh_llm.protocol import ContentBlock
from dsh_llm.protocol import ContextSnapshotSection
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import ImageBlock
from dsh_llm.protocol import ImageDimensions
from dsh_llm.protocol import ImageRef
from dsh_llm.protocol import LlmCallConfig
from dsh_llm.protocol import LlmFailure
from dsh_llm.protocol import Message
from dsh_llm.protocol import ModelSource
from dsh_llm.protocol import PluginSource
from dsh_llm.protocol import ReasoningBlock
from dsh_llm.protocol import ReasoningDelta
from dsh_llm.protocol import ReplayEnvelope
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import TextDelta
from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.protocol import ToolCallDelta
from dsh_llm.protocol import ToolResultBlock
from dsh_llm.protocol import ToolSchema
from dsh_llm.protocol import ToolSource
from dsh_llm.protocol import UsageChunk
from dsh_llm.protocol import UserSource
from dsh_llm.protocol import bound_context_summary
from dsh_llm.protocol import call_config_equals
from dsh_llm.protocol import content_has_image
from dsh_llm.protocol import create_assistant_message
from dsh_llm.protocol import create_message
from dsh_llm.protocol import create_tool_result_message
from dsh_llm.protocol import create_user_message
from dsh_llm.protocol import is_token_delta
from dsh_llm.signal import AbortController
from tests import strategies as s

SHA = "sha256:" + "ab" * 32


def _image(**changes: Any) -> ImageRef:
    fields: dict[str, Any] = {
        "attachment_id": SHA,
        "media_type": "image/png",
        "bytes": 100,
        "width": 10,
        "height": 20,
    }
    fields.update(changes)
    return ImageRef(**fields)


def _failure(**changes: Any) -> LlmFailure:
    fields: dict[str, Any] = {"message": "boom", "code": "SERVER"}
    fields.update(changes)
    return LlmFailure(**fields)


def _options(**changes: Any) -> GenerateOptions:
    fields: dict[str, Any] = {"provider": "p", "model": "m", "messages": ()}
    fields.update(changes)
    return GenerateOptions(**fields)


TOOL = ToolSchema(name="bash", description="Run a command.", parameters={})

# --- construction validation --------------------------------------------------------

INVALID: list[tuple[Any, dict[str, Any], type[Exception], str]] = [
    # indexes: negative, non-int, bool
    (BlockStart, {"index": -1, "block_type": "text"}, ValueError, "BlockStart.index"),
    (BlockStart, {"index": 1.0, "block_type": "text"}, TypeError, "BlockStart.index"),
    (BlockStart, {"index": "0", "block_type": "text"}, TypeError, "BlockStart.index"),
    (BlockStart, {"index": True, "block_type": "text"}, TypeError, "BlockStart.index"),
    (TextDelta, {"index": -3, "text": "a"}, ValueError, "TextDelta.index"),
    (ReasoningDelta, {"index": None, "text": "a"}, TypeError, "ReasoningDelta.index"),
    (
        ToolCallDelta,
        {"index": False, "arguments_delta": ""},
        TypeError,
        "ToolCallDelta.index",
    ),
    (
        BlockEnd,
        {"index": -1, "block": TextBlock(text="")},
        ValueError,
        "BlockEnd.index",
    ),
    # wrong types
    (BlockStart, {"index": 0, "block_type": ""}, ValueError, "BlockStart.block_type"),
    (BlockStart, {"index": 0, "block_type": 1}, TypeError, "BlockStart.block_type"),
    (TextDelta, {"index": 0, "text": b"a"}, TypeError, "TextDelta.text"),
    (ToolCallDelta, {"index": 0, "arguments_delta": {}}, TypeError, "arguments_delta"),
    (ToolCallDelta, {"index": 0, "id": 5, "arguments_delta": ""}, TypeError, ".id"),
    (ToolCallDelta, {"index": 0, "name": 5, "arguments_delta": ""}, TypeError, ".name"),
    (BlockEnd, {"index": 0, "block": {"type": "text"}}, TypeError, "BlockEnd.block"),
    (UsageChunk, {"usage": {"inputTokens": 1}}, TypeError, "UsageChunk.usage"),
    (Finish, {"reason": "stop"}, TypeError, "Finish.reason"),
    (
        Finish,
        {"reason": FinishReason.STOP, "replay_state": {}},
        TypeError,
        "Finish.replay_state",
    ),
    (TextBlock, {"text": None}, TypeError, "TextBlock.text"),
    (ReasoningBlock, {"text": 1}, TypeError, "ReasoningBlock.text"),
    (ToolCallBlock, {"id": "c", "name": "n", "arguments": {}}, TypeError, "arguments"),
    (ToolResultBlock, {"tool_call_id": "c", "content": "x"}, TypeError, "content"),
    (
        ToolResultBlock,
        {"tool_call_id": "c", "content": ("x",)},
        TypeError,
        "ToolResultBlock.content",
    ),
    (
        ToolResultBlock,
        {"tool_call_id": "c", "content": (), "is_error": 1},
        TypeError,
        "ToolResultBlock.is_error",
    ),
    (ImageBlock, {"attachment": SHA}, TypeError, "ImageBlock.attachment"),
    # token counts
    (TokenUsage, {"input_tokens": -1, "output_tokens": 0}, ValueError, "input_tokens"),
    (TokenUsage, {"input_tokens": 0, "output_tokens": 1.0}, TypeError, "output_tokens"),
    (TokenUsage, {"input_tokens": True, "output_tokens": 0}, TypeError, "input_tokens"),
    (
        TokenUsage,
        {"input_tokens": 0, "output_tokens": 0, "reasoning_tokens": -1},
        ValueError,
        "reasoning_tokens",
    ),
    # failures: empty code/message, status range, retry-after, request id
    (LlmFailure, {"message": "m", "code": ""}, ValueError, "LlmFailure.code"),
    (LlmFailure, {"message": "", "code": "X"}, ValueError, "LlmFailure.message"),
    (LlmFailure, {"message": "m", "code": 3}, TypeError, "LlmFailure.code"),
    (LlmFailure, {"message": "m", "code": "X", "status": 99}, ValueError, "status"),
    (LlmFailure, {"message": "m", "code": "X", "status": 600}, ValueError, "status"),
    (LlmFailure, {"message": "m", "code": "X", "status": "500"}, TypeError, "status"),
    (LlmFailure, {"message": "m", "code": "X", "status": 500.0}, TypeError, "status"),
    (LlmFailure, {"message": "m", "code": "X", "status": True}, TypeError, "status"),
    (
        LlmFailure,
        {"message": "m", "code": "X", "provider_retry_after_ms": 0},
        ValueError,
        "provider_retry_after_ms",
    ),
    (
        LlmFailure,
        {"message": "m", "code": "X", "provider_retry_after_ms": -5.5},
        ValueError,
        "provider_retry_after_ms",
    ),
    (
        LlmFailure,
        {"message": "m", "code": "X", "provider_retry_after_ms": math.inf},
        ValueError,
        "provider_retry_after_ms",
    ),
    (
        LlmFailure,
        {"message": "m", "code": "X", "provider_retry_after_ms": math.nan},
        ValueError,
        "provider_retry_after_ms",
    ),
    (
        LlmFailure,
        {"message": "m", "code": "X", "provider_retry_after_ms": 10**400},
        ValueError,
        "provider_retry_after_ms",
    ),
    (
        LlmFailure,
        {"message": "m", "code": "X", "provider_retry_after_ms": "1000"},
        TypeError,
        "provider_retry_after_ms",
    ),
    (
        LlmFailure,
        {"message": "m", "code": "X", "provider_retry_after_ms": True},
        TypeError,
        "provider_retry_after_ms",
    ),
    (
        LlmFailure,
        {"message": "m", "code": "X", "request_id": ""},
        ValueError,
        "request_id",
    ),
    # finish reasons: failure iff error/aborted
    (FinishReason, {"kind": "error"}, ValueError, "FinishReason.failure"),
    (FinishReason, {"kind": "aborted"}, ValueError, "FinishReason.failure"),
    (
        FinishReason,
        {"kind": "stop", "failure": _failure()},
        ValueError,
        "FinishReason.failure",
    ),
    (
        FinishReason,
        {"kind": "content-filter", "failure": _failure()},
        ValueError,
        "FinishReason.failure",
    ),
    (FinishReason, {"kind": ""}, ValueError, "FinishReason.kind"),
    (
        FinishReason,
        {"kind": "error", "failure": {"message": "m", "code": "X"}},
        TypeError,
        "FinishReason.failure",
    ),
    # images
    (
        ImageRef,
        {**attrs.asdict(_image()), "attachment_id": "sha256:" + "a" * 63},
        ValueError,
        "attachment_id",
    ),
    (
        ImageRef,
        {**attrs.asdict(_image()), "attachment_id": "sha256:" + "A" * 64},
        ValueError,
        "attachment_id",
    ),
    (
        ImageRef,
        {**attrs.asdict(_image()), "attachment_id": "md5:" + "a" * 64},
        ValueError,
        "attachment_id",
    ),
    (
        ImageRef,
        {**attrs.asdict(_image()), "attachment_id": 7},
        TypeError,
        "attachment_id",
    ),
    (
        ImageRef,
        {**attrs.asdict(_image()), "media_type": "image/bmp"},
        ValueError,
        "media_type",
    ),
    (ImageRef, {**attrs.asdict(_image()), "bytes": 0}, ValueError, "ImageRef.bytes"),
    (ImageRef, {**attrs.asdict(_image()), "width": -1}, ValueError, "ImageRef.width"),
    (ImageDimensions, {"width": 1, "height": 0}, ValueError, "ImageDimensions.height"),
    # messages and sources
    (
        Message,
        {"role": "tool", "content": (), "source": UserSource()},
        ValueError,
        "role",
    ),
    (
        Message,
        {"id": "", "role": "user", "content": (), "source": UserSource()},
        ValueError,
        "Message.id",
    ),
    (Message, {"role": "user", "content": (), "source": "user"}, TypeError, "source"),
    (
        Message,
        {"role": "user", "content": ("hi",), "source": UserSource()},
        TypeError,
        "content",
    ),
    (PluginSource, {"plugin": ""}, ValueError, "PluginSource.plugin"),
    (PluginSource, {"plugin": "p", "form": "snapshot"}, ValueError, "sections"),
    (PluginSource, {"plugin": "p", "form": "notice"}, ValueError, "summary"),
    (PluginSource, {"plugin": "p", "summary": "s"}, ValueError, "summary"),
    (PluginSource, {"plugin": "p", "form": "poster"}, ValueError, "PluginSource.form"),
    (ModelSource, {"provider": "", "model": "m"}, ValueError, "ModelSource.provider"),
    (ToolSource, {"call_id": None}, TypeError, "ToolSource.call_id"),
    # replay envelopes hold JSON only
    (ReplayEnvelope, {"response": {1: "x"}}, TypeError, "ReplayEnvelope.response"),
    (ReplayEnvelope, {"response": {"a": {1, 2}}}, TypeError, "ReplayEnvelope.response"),
    (ReplayEnvelope, {"response": [math.nan]}, ValueError, "ReplayEnvelope.response"),
    (ReplayEnvelope, {"response": None, "blocks": "ab"}, TypeError, "blocks"),
    (ReplayEnvelope, {"response": None, "blocks": 3}, TypeError, "blocks"),
    (ReplayEnvelope, {"response": None, "blocks": [object()]}, TypeError, "blocks"),
    # tools
    (ToolSchema, {"name": "", "description": "", "parameters": {}}, ValueError, "name"),
    (
        ToolSchema,
        {"name": "t", "description": "", "parameters": []},
        TypeError,
        "parameters",
    ),
]


@pytest.mark.parametrize(("cls", "kwargs", "error", "field"), INVALID)
def test_invalid_construction_raises_naming_the_field(
    cls: Any, kwargs: dict[str, Any], error: type[Exception], field: str
) -> None:
    with pytest.raises(error) as info:
        cls(**kwargs)

    assert field in str(info.value)


OPTIONS_INVALID: list[tuple[dict[str, Any], type[Exception], str]] = [
    ({"provider": ""}, ValueError, "GenerateOptions.provider"),
    ({"model": None}, TypeError, "GenerateOptions.model"),
    ({"messages": "hi"}, TypeError, "GenerateOptions.messages"),
    ({"messages": ({"role": "user"},)}, TypeError, "GenerateOptions.messages"),
    ({"system": 1}, TypeError, "GenerateOptions.system"),
    ({"reasoning_effort": ""}, ValueError, "reasoning_effort"),
    ({"tools": (TOOL, "bash")}, TypeError, "GenerateOptions.tools"),
    ({"temperature": -0.1}, ValueError, "temperature"),
    ({"temperature": math.inf}, ValueError, "temperature"),
    ({"temperature": math.nan}, ValueError, "temperature"),
    ({"temperature": True}, TypeError, "temperature"),
    ({"temperature": "0.2"}, TypeError, "temperature"),
    ({"max_tokens": 0}, ValueError, "max_tokens"),
    ({"max_tokens": 1.5}, TypeError, "max_tokens"),
    ({"stop": ("",)}, ValueError, "GenerateOptions.stop"),
    ({"stop": "END"}, TypeError, "GenerateOptions.stop"),
    ({"signal": object()}, TypeError, "GenerateOptions.signal"),
    ({"session_id": ""}, ValueError, "session_id"),
    ({"purpose": "chat"}, ValueError, "GenerateOptions.purpose"),
    # tool_choice: keywords, or the name of a tool in tools
    ({"tool_choice": ""}, ValueError, "tool_choice"),
    ({"tool_choice": 1}, TypeError, "tool_choice"),
    ({"tool_choice": "required"}, ValueError, "tool_choice"),
    ({"tool_choice": "bash"}, ValueError, "tool_choice"),
    ({"tool_choice": "python", "tools": (TOOL,)}, ValueError, "tool_choice"),
    ({"tool_choice": "required", "tools": ()}, ValueError, "tool_choice"),
]


@pytest.mark.parametrize(("changes", "error", "field"), OPTIONS_INVALID)
def test_invalid_generate_options_raise_naming_the_field(
    changes: dict[str, Any], error: type[Exception], field: str
) -> None:
    with pytest.raises(error, match=field):
        _options(**changes)


@pytest.mark.parametrize(
    ("tool_choice", "tools"),
    [
        (None, None),
        ("auto", None),
        ("none", None),
        ("auto", (TOOL,)),
        ("none", (TOOL,)),
        ("required", (TOOL,)),
        ("bash", (TOOL,)),
    ],
)
def test_tool_choice_accepts_keywords_and_listed_tool_names(
    tool_choice: str | None, tools: tuple[ToolSchema, ...] | None
) -> None:
    options = _options(tool_choice=tool_choice, tools=tools)

    assert options.tool_choice == tool_choice


def test_error_types_are_type_error_and_value_error() -> None:
    with pytest.raises(TypeError):
        TextDelta(index="1", text="")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"must be >= 0, got -1"):
        TextDelta(index=-1, text="")
    # Neither is the other: a caller can tell "wrong type" from "out of range".
    with pytest.raises(TypeError) as info:
        TextDelta(index="1", text="")  # type: ignore[arg-type]
    assert not isinstance(info.value, ValueError)


# --- values --------------------------------------------------------------------------


def test_values_are_frozen_and_slotted() -> None:
    delta = TextDelta(index=0, text="a")

    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        delta.text = "b"  # type: ignore[misc]
    assert not hasattr(delta, "__dict__")


def test_positional_arguments_are_refused() -> None:
    with pytest.raises(TypeError):
        TextDelta(0, "a")  # type: ignore[call-arg]


def test_lists_are_stored_as_tuples() -> None:
    block = ToolResultBlock(tool_call_id=CallId("c"), content=[TextBlock(text="a")])
    options = _options(messages=[create_user_message("hi")], stop=["END"], tools=[TOOL])

    assert block.content == (TextBlock(text="a"),)
    assert isinstance(options.messages, tuple)
    assert options.stop == ("END",)
    assert options.tools == (TOOL,)


def test_other_iterables_are_stored_as_tuples_and_non_iterables_refused() -> None:
    options = _options(stop=(word for word in ["END", "STOP"]))
    assert options.stop == ("END", "STOP")
    with pytest.raises(TypeError, match="stop must be a tuple, got int"):
        _options(stop=5)


def test_chunk_tags_match_the_typescript_protocol() -> None:
    assert list(CHUNK_TYPES) == [
        "block-start",
        "text-delta",
        "reasoning-delta",
        "tool-call-delta",
        "block-end",
        "usage",
        "finish",
    ]
    # The TypeScript harness's five, then the two server tool blocks it reads
    # as unknown block types (docs/protocol.md).
    assert list(BLOCK_TYPES) == [
        "text",
        "reasoning",
        "tool-call",
        "tool-result",
        "image",
        "server-tool-call",
        "server-tool-result",
    ]
    assert set(SOURCE_TYPES) == {"user", "plugin", "model", "tool"}
    for tag, cls in CHUNK_TYPES.items():
        assert tag == cls.TAG
    assert TextDelta(index=0, text="").type == "text-delta"
    assert TextBlock(text="").type == "text"
    assert ToolSource(call_id=CallId("c")).kind == "tool"


def test_finish_reason_constants_and_constructors() -> None:
    failure = _failure()

    assert FinishReason(kind="stop") == FinishReason.STOP
    assert FinishReason.TOOL_CALLS.kind == "tool-calls"
    assert FinishReason.MAX_TOKENS.kind == "max-tokens"
    assert FinishReason.error(failure) == FinishReason(kind="error", failure=failure)
    assert FinishReason.aborted(failure).failure is failure
    assert FinishReason.error(failure).is_failure
    assert not FinishReason.STOP.is_failure


def test_finish_reason_kinds_are_an_open_set() -> None:
    reason = FinishReason(kind="content-filter")

    assert reason.failure is None
    assert not reason.is_failure


def test_token_usage_unknown_counts_are_none_never_zero() -> None:
    usage = TokenUsage.unknown()

    assert usage.input_tokens is None
    assert usage.output_tokens is None
    assert usage.cache_read_tokens is None
    assert TokenUsage(input_tokens=0, output_tokens=0).input_tokens == 0


def test_token_usage_requires_both_main_counts_to_be_given() -> None:
    with pytest.raises(TypeError):
        TokenUsage(input_tokens=1)  # type: ignore[call-arg]


def test_integral_retry_after_is_stored_as_int_for_json_parity() -> None:
    assert _failure(provider_retry_after_ms=1500.0).provider_retry_after_ms == 1500
    assert isinstance(
        _failure(provider_retry_after_ms=1500.0).provider_retry_after_ms, int
    )
    assert _failure(provider_retry_after_ms=1.5).provider_retry_after_ms == 1.5
    # From 1e21 on JavaScript prints an exponent; keep the float.
    assert isinstance(
        _failure(provider_retry_after_ms=1e21).provider_retry_after_ms, float
    )


def test_failure_keeps_only_supplied_facts() -> None:
    failure = _failure(status=503, request_id="r-1")

    assert failure.status == 503
    assert failure.request_id == "r-1"
    assert failure.provider_retry_after_ms is None


def test_image_ref_accepts_every_listed_media_type() -> None:
    for media_type in ("image/png", "image/jpeg", "image/webp", "image/gif"):
        assert _image(media_type=media_type).media_type == media_type
    ref = _image(name="a.png", original_dimensions=ImageDimensions(width=1, height=2))
    assert ref.original_dimensions == ImageDimensions(width=1, height=2)


def test_replay_envelope_detaches_and_normalises_json() -> None:
    response: dict[str, Any] = {"items": (1, 2), "nested": {"x": [True, None]}}
    blocks: list[Any] = [{"sig": "a"}, None]
    envelope = ReplayEnvelope(response=response, blocks=blocks)
    response["nested"]["x"].append("late")
    blocks.append({"late": 1})

    assert envelope.response == {"items": [1, 2], "nested": {"x": [True, None]}}
    assert envelope.blocks == ({"sig": "a"}, None)


def test_chunks_and_messages_with_replay_state_are_hashable() -> None:
    envelope = ReplayEnvelope(response={"a": [1]}, blocks=({"b": 2},))
    finish = Finish(reason=FinishReason.STOP, replay_state=envelope)
    message = create_assistant_message(
        "x", provider="p", model="m", replay_state=envelope
    )

    assert hash(finish) == hash(Finish(reason=FinishReason.STOP, replay_state=envelope))
    assert len({finish, finish}) == 1
    assert isinstance(hash(message), int)
    assert envelope != ReplayEnvelope(response={"a": [2]}, blocks=({"b": 2},))


def test_tool_schema_parameters_are_a_private_copy() -> None:
    parameters: dict[str, Any] = {"type": "object", "properties": {}}
    schema = ToolSchema(name="t", description="d", parameters=parameters)
    parameters["properties"]["x"] = {"type": "string"}

    assert schema.parameters == {"type": "object", "properties": {}}
    assert isinstance(hash(schema), int)


def test_plugin_notice_summary_is_bounded_to_120_characters() -> None:
    long = "x" * 200
    source = PluginSource(plugin="p", form="notice", summary=long)

    assert source.summary == "x" * 119 + "…"
    assert source.summary is not None
    assert len(source.summary) == CONTEXT_SUMMARY_MAX_CHARS
    assert bound_context_summary("y" * 120) == "y" * 120
    assert bound_context_summary("short") == "short"


def test_plugin_snapshot_keeps_its_sections_in_order() -> None:
    sections = [
        ContextSnapshotSection(name="a", text="1"),
        ContextSnapshotSection(name="b", text=""),
    ]
    source = PluginSource(plugin="p", form="snapshot", sections=sections)

    assert source.sections == tuple(sections)
    assert source.kind == "plugin"


# --- messages ------------------------------------------------------------------------


def test_create_user_message_mints_an_id_and_wraps_text() -> None:
    message = create_user_message("hello")

    assert message.role == "user"
    assert message.content == (TextBlock(text="hello"),)
    assert message.source == UserSource()
    assert str(uuid.UUID(message.id)) == message.id
    assert create_user_message("hello").id != message.id


def test_create_user_message_takes_blocks_and_a_source_and_detaches_them() -> None:
    blocks: list[ContentBlock] = [TextBlock(text="a"), ImageBlock(attachment=_image())]
    message = create_user_message(blocks, PluginSource(plugin="test"))
    blocks.append(TextBlock(text="late"))

    assert message.content == (TextBlock(text="a"), ImageBlock(attachment=_image()))
    assert message.source == PluginSource(plugin="test")


def test_evolve_keeps_the_message_id() -> None:
    message = create_user_message("a")
    copy = attrs.evolve(message, content=(TextBlock(text="b"),))

    assert copy.id == message.id
    assert copy.content == (TextBlock(text="b"),)


def test_create_assistant_message_fixes_role_and_model_source() -> None:
    envelope = ReplayEnvelope(response={"request": 1})
    message = create_assistant_message(
        [TextBlock(text="answer")],
        provider="test-provider",
        model="test-model",
        replay_state=envelope,
    )

    assert message.role == "assistant"
    assert message.source == ModelSource(
        provider="test-provider", model="test-model", replay_state=envelope
    )
    assert message.id != ""


def test_create_tool_result_message_couples_source_and_block_call_id() -> None:
    message = create_tool_result_message("call-1", "result", is_error=False)

    assert message.role == "user"
    assert message.source == ToolSource(call_id=CallId("call-1"))
    assert message.content == (
        ToolResultBlock(
            tool_call_id=CallId("call-1"),
            content=(TextBlock(text="result"),),
            is_error=False,
        ),
    )
    nested = create_tool_result_message("c", [ImageBlock(attachment=_image())])
    assert isinstance(nested.content[0], ToolResultBlock)
    assert nested.content[0].is_error is None


def test_create_message_builds_any_role_with_a_fresh_id() -> None:
    first = create_message("system", [TextBlock(text="s")], PluginSource(plugin="p"))
    second = create_message("system", [TextBlock(text="s")], PluginSource(plugin="p"))

    assert first.role == "system"
    assert first.id != second.id
    assert attrs.evolve(first, id=second.id) == second


def test_content_has_image_recurses_into_tool_results() -> None:
    image = ImageBlock(attachment=_image())
    nested = ToolResultBlock(
        tool_call_id=CallId("c"),
        content=(ToolResultBlock(tool_call_id=CallId("d"), content=(image,)),),
    )

    assert content_has_image((image,))
    assert content_has_image((TextBlock(text="a"), nested))
    assert not content_has_image((TextBlock(text="a"),))
    assert not content_has_image(
        (ToolResultBlock(tool_call_id=CallId("c"), content=(TextBlock(text="x"),)),)
    )


@pytest.mark.parametrize(
    ("chunk", "expected"),
    [
        (TextDelta(index=0, text="a"), True),
        (TextDelta(index=0, text=""), False),
        (ReasoningDelta(index=0, text="r"), True),
        (ReasoningDelta(index=0, text=""), False),
        (ToolCallDelta(index=0, arguments_delta="{"), True),
        (ToolCallDelta(index=0, name="bash", arguments_delta=""), True),
        (ToolCallDelta(index=0, id=CallId("c"), name="", arguments_delta=""), False),
        (BlockStart(index=0, block_type="text"), False),
        (BlockEnd(index=0, block=TextBlock(text="a")), False),
        (UsageChunk(usage=TokenUsage(input_tokens=1, output_tokens=1)), False),
        (Finish(reason=FinishReason.STOP), False),
    ],
)
def test_is_token_delta(chunk: StreamChunk, expected: bool) -> None:
    assert is_token_delta(chunk) is expected


# --- requests ------------------------------------------------------------------------


def test_generate_options_defaults_and_evolve_revalidates() -> None:
    options = _options()

    assert options.tools is None
    assert options.tool_choice is None
    assert options.signal is None
    assert options.evolve(max_tokens=10).max_tokens == 10
    with pytest.raises(ValueError, match="max_tokens"):
        options.evolve(max_tokens=0)


def test_signal_is_not_compared_hashed_or_shown() -> None:
    controller = AbortController()
    with_signal = _options(signal=controller.signal)

    assert with_signal == _options()
    assert hash(with_signal) == hash(_options())
    assert "signal" not in repr(with_signal)
    assert with_signal.signal is controller.signal


def test_call_config_carries_the_six_call_fields() -> None:
    options = _options(
        reasoning_effort="high", temperature=0.5, max_tokens=9, stop=("x",), system="s"
    )

    assert options.call_config() == LlmCallConfig(
        provider="p",
        model="m",
        reasoning_effort="high",
        temperature=0.5,
        max_tokens=9,
        stop=("x",),
    )


@pytest.mark.parametrize(
    ("changes", "equal"),
    [
        ({}, True),
        ({"provider": "q"}, False),
        ({"model": "n"}, False),
        ({"reasoning_effort": "low"}, False),
        ({"temperature": 0.7}, False),
        ({"max_tokens": 10}, False),
        ({"stop": ("a", "b")}, True),
        ({"stop": ("b", "a")}, False),
        ({"stop": ("a",)}, False),
        ({"stop": None}, False),
        ({"stop": ()}, False),
    ],
)
def test_call_config_equals_compares_every_field(
    changes: dict[str, Any], equal: bool
) -> None:
    base = LlmCallConfig(
        provider="p",
        model="m",
        reasoning_effort="high",
        temperature=0.5,
        max_tokens=9,
        stop=("a", "b"),
    )

    assert call_config_equals(base, attrs.evolve(base, **changes)) is equal


def test_call_config_none_stop_differs_from_an_empty_stop() -> None:
    bare = LlmCallConfig(provider="p", model="m")

    assert not call_config_equals(bare, attrs.evolve(bare, stop=()))
    assert call_config_equals(bare, LlmCallConfig(provider="p", model="m"))


# --- properties -----------------------------------------------------------------------


@given(s.chunks)
def test_every_chunk_pickles_and_compares_equal(chunk: StreamChunk) -> None:
    assert pickle.loads(pickle.dumps(chunk)) == chunk
    assert isinstance(hash(chunk), int)


@given(s.messages)
def test_every_message_is_immutable_and_hashable(message: Message) -> None:
    assert isinstance(message.content, tuple)
    assert isinstance(hash(message), int)
    assert pickle.loads(pickle.dumps(message)) == message


@given(s.generate_options())
def test_generated_options_evolve_to_an_equal_value(options: GenerateOptions) -> None:
    assert options.evolve() == options
    assert options.call_config() == options.evolve().call_config()


@given(s.finish_reasons)
def test_failure_is_present_exactly_for_error_and_aborted(reason: FinishReason) -> None:
    assert (reason.failure is not None) == (reason.kind in ("error", "aborted"))
    assert reason.is_failure == (reason.failure is not None)
