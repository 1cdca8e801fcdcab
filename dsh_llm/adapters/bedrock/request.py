"""The Bedrock ConverseStream request: ``GenerateOptions`` to a path and a JSON body.

Pure functions; each refusal they make is raised before any I/O. Point by point
(field mapping, efforts, refusals): ``docs/bedrock.md``.

- ``converse_path(model)``: ``/model/{modelId}/converse-stream``, the id quoted
  whole (an inference profile ARN's ``:`` and ``/`` too); ``count_tokens_path``
  the same for ``/count-tokens``.
- ``build_converse_request``: ``messages`` (consecutive turns of one role
  merged, tool results first in a user turn, empty text left out), ``system``,
  ``inferenceConfig``, ``toolConfig`` (``tool_choice`` ``none`` is
  ``UNSUPPORTED_OPTION``: Converse has no such choice) and ``outputConfig``.
- Claude's reasoning efforts follow the Anthropic rules
  (``anthropic.request.thinking_fields``), in ``additionalModelRequestFields``
  or ``outputConfig.effort``; a model that is not Claude takes no effort
  (``UNSUPPORTED_REASONING_EFFORT``).
- Replay: this family's reasoning (text with its signature) and redacted
  reasoning go back in order, only to the model that produced them.
- A message's cache breakpoint is a ``cachePoint`` block after what it sends;
  ``cache_key`` and ``cached_content`` are ``UNSUPPORTED_OPTION``.
- ``extra_body`` is merged last at the top level of the body (one level deep).
- ``request_headers``: the stream headers (``accept`` the event stream) and
  ``extra_headers``; never a credential.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterable
from collections.abc import Mapping
from typing import Any
from typing import Final

from dsh_llm.adapters._wire import extras as request_extras
from dsh_llm.adapters._wire.extras import AttachmentReader
from dsh_llm.adapters._wire.extras import breakpoint_ttl
from dsh_llm.adapters._wire.extras import image_data
from dsh_llm.adapters._wire.extras import merge_extra_body
from dsh_llm.adapters._wire.extras import refuse_cache_controls
from dsh_llm.adapters._wire.extras import refuse_misplaced_images
from dsh_llm.adapters._wire.history import block_entries
from dsh_llm.adapters.anthropic.catalog import ThinkingProfile
from dsh_llm.adapters.anthropic.request import thinking_fields
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import CacheBreakpoint
from dsh_llm.protocol import ContentBlock
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import ImageBlock
from dsh_llm.protocol import Message
from dsh_llm.protocol import ReasoningBlock
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.protocol import ToolResultBlock
from dsh_llm.transport.session import stream_headers

WIRE_FAMILY: Final = "bedrock-converse"
"""The ``wire`` of this family's ``ReplayEnvelope.response``; the request builder
replays only envelopes that carry it."""
EVENT_STREAM: Final = "application/vnd.amazon.eventstream"
"""The media type of a ConverseStream answer."""
TAKEN_HEADERS: Final = (
    "authorization",
    "x-amz-date",
    "x-amz-security-token",
    "x-amz-content-sha256",
)
"""Headers the adapter's auth sets (``extra_headers`` cannot)."""
IMAGE_FORMATS: Final[Mapping[str, str]] = {
    "image/png": "png",
    "image/jpeg": "jpeg",
    "image/gif": "gif",
    "image/webp": "webp",
}
"""The image media types Converse takes, and their ``format`` names."""
REASONING_TEXT: Final = "reasoningText"
"""A replay entry's ``type`` for reasoning text with its signature."""
REDACTED_CONTENT: Final = "redactedContent"
"""A replay entry's ``type`` for redacted reasoning (its base64 ``data``)."""


def converse_path(model: str) -> str:
    """The ConverseStream path for ``model``, the id percent-encoded whole."""
    return f"/model/{urllib.parse.quote(model, safe='')}/converse-stream"


def count_tokens_path(model: str) -> str:
    """The CountTokens path for ``model``, the id percent-encoded whole."""
    return f"/model/{urllib.parse.quote(model, safe='')}/count-tokens"


def request_headers(
    options: GenerateOptions | None = None, *, provider: str = "Amazon Bedrock"
) -> dict[str, str]:
    """The headers of one ConverseStream request (lower-case names), without a
    credential (the call's auth adds it).

    Raises:
        LlmError: ``UNSUPPORTED_OPTION`` naming an extra header the adapter or
            its auth sets (never its value).
    """
    base = stream_headers(accept=EVENT_STREAM)
    if options is None:
        return base
    return request_extras.request_headers(
        base, options, provider=provider, taken=TAKEN_HEADERS
    )


def _refused(message: str, code: ErrorCode = ErrorCode.UNSUPPORTED_OPTION) -> LlmError:
    return LlmError(message, code)


def build_converse_request(
    options: GenerateOptions,
    *,
    max_tokens: int | None,
    thinking: ThinkingProfile | None,
    default_effort: str | None = None,
    attachments: AttachmentReader | None = None,
    provider: str = "Amazon Bedrock",
) -> dict[str, Any]:
    """The ConverseStream body for ``options`` (see the module docstring),
    ``extra_body`` merged last.

    Args:
        options: The request.
        max_tokens: ``maxTokens`` when the request sets none (``None``: the
            model's default; a thinking Claude model needs one).
        thinking: The Claude thinking profile (``catalog.thinking_profile``);
            ``None`` for a model that is not Claude.
        default_effort: The configured effort used when the request names none
            (Claude only).
        attachments: Where image bytes are read.
        provider: Display name used in messages.

    Raises:
        LlmError: ``UNSUPPORTED_CONTENT`` for an image in a system or assistant
            message or of a format Converse does not take;
            ``MISSING_ATTACHMENT``; ``UNSUPPORTED_OPTION``,
            ``UNSUPPORTED_REASONING_EFFORT`` or ``INVALID_REQUEST`` for a field
            Bedrock would refuse.
    """
    refuse_misplaced_images(options.messages, provider=provider)
    refuse_cache_controls(
        options, provider=provider, wire="the Converse API", breakpoints=True
    )
    cap = options.max_tokens or max_tokens
    fields: dict[str, Any] = {}
    thinks = False
    if thinking is not None:
        fields, thinks = thinking_fields(
            options,
            profile=thinking,
            max_tokens=cap or 0,
            default_effort=default_effort,
            provider=provider,
        )
    elif options.reasoning_effort is not None:
        raise _refused(
            f'{provider} model "{options.model}" takes no reasoning effort from '
            "this adapter (only Claude models do); send the model's own fields "
            'in extra_body {"additionalModelRequestFields": {...}}',
            ErrorCode.UNSUPPORTED_REASONING_EFFORT,
        )
    _check_sampling(options, thinks=thinks, provider=provider)
    body: dict[str, Any] = {"messages": _turns(options, attachments, provider)}
    system = _system(options, provider)
    if system:
        body["system"] = system
    inference: dict[str, Any] = {}
    if cap is not None:
        inference["maxTokens"] = cap
    if options.temperature is not None:
        inference["temperature"] = options.temperature
    if options.stop is not None:
        inference["stopSequences"] = list(options.stop)
    if inference:
        body["inferenceConfig"] = inference
    tools = _tool_config(options, provider)
    if tools is not None:
        body["toolConfig"] = tools
    if "thinking" in fields:
        body["additionalModelRequestFields"] = {"thinking": fields["thinking"]}
    output: dict[str, Any] = {}
    wanted = options.response_format
    if wanted is not None:
        output["textFormat"] = {
            "type": "json_schema",
            "structure": {
                "jsonSchema": {
                    "schema": json.dumps(wanted.schema, ensure_ascii=False),
                    "name": wanted.name,
                }
            },
        }
    effort = fields.get("output_config", {}).get("effort")
    if effort is not None:
        output["effort"] = effort
    if output:
        body["outputConfig"] = output
    return merge_extra_body(body, options)


def _check_sampling(options: GenerateOptions, *, thinks: bool, provider: str) -> None:
    if not thinks:
        return
    choice = options.tool_choice
    if options.tools and choice not in (None, "auto", "none"):
        raise _refused(
            f'{provider} rejects tool_choice "{choice}" while Claude thinks; use '
            'reasoning effort "off" (where the model offers it) or tool_choice "auto"'
        )
    if options.temperature is not None:
        raise _refused(
            f"{provider} does not accept temperature while Claude thinks; use "
            'reasoning effort "off" (where the model offers it) or leave '
            "temperature unset"
        )


def _tool_config(options: GenerateOptions, provider: str) -> dict[str, Any] | None:
    if not options.tools:
        return None
    choice = options.tool_choice
    if choice == "none":
        raise _refused(
            f'{provider} Converse has no tool_choice "none"; leave the tools out '
            "of the request instead"
        )
    config: dict[str, Any] = {
        "tools": [
            {
                "toolSpec": {
                    "name": tool.name,
                    **({"description": tool.description} if tool.description else {}),
                    "inputSchema": {"json": tool.parameters},
                }
            }
            for tool in options.tools
        ]
    }
    if choice == "auto":
        config["toolChoice"] = {"auto": {}}
    elif choice == "required":
        config["toolChoice"] = {"any": {}}
    elif choice is not None:
        config["toolChoice"] = {"tool": {"name": choice}}
    return config


def _text(blocks: Iterable[ContentBlock]) -> str:
    return "".join(block.text for block in blocks if isinstance(block, TextBlock))


def _system(options: GenerateOptions, provider: str) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if options.system:
        blocks.append({"text": options.system})
    for position, message in enumerate(options.messages):
        if message.role != "system":
            continue
        text = _text(message.content)
        if text:
            blocks.append({"text": text})
        if message.cache is not None:
            blocks.append(_cache_point(message.cache, bool(text), provider, position))
    return blocks


def cache_point(
    breakpoint: CacheBreakpoint, *, provider: str, position: int
) -> dict[str, Any]:
    """The ``cachePoint`` block of a message's breakpoint: ``{"cachePoint":
    {"type": "default"}}``, with ``ttl`` when one is asked for.

    Raises:
        LlmError: ``UNSUPPORTED_OPTION`` for a lifetime other than 5m or 1h.
    """
    point: dict[str, Any] = {"type": "default"}
    ttl = breakpoint_ttl(breakpoint, provider=provider, position=position)
    if ttl is not None:
        point["ttl"] = ttl
    return {"cachePoint": point}


def _cache_point(
    breakpoint: CacheBreakpoint, sends: bool, provider: str, position: int
) -> dict[str, Any]:
    if not sends:
        raise LlmError(
            f"{provider} cannot honour the cache breakpoint of message "
            f"{position}: the message sends no content to end a cached prefix",
            ErrorCode.UNSUPPORTED_OPTION,
        )
    return cache_point(breakpoint, provider=provider, position=position)


def _turns(
    options: GenerateOptions, attachments: AttachmentReader | None, provider: str
) -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = []
    for position, message in enumerate(options.messages):
        if message.role == "system":
            continue
        if message.role == "assistant":
            content = _assistant_content(message, options.model, provider)
        else:
            content = _user_content(message, attachments, provider)
        if message.cache is not None:
            content.append(
                _cache_point(message.cache, bool(content), provider, position)
            )
        if not content:
            continue
        if turns and turns[-1]["role"] == message.role:
            turns[-1]["content"].extend(content)
        else:
            turns.append({"role": message.role, "content": content})
    for turn in turns:
        content = turn["content"]
        results = [block for block in content if "toolResult" in block]
        if turn["role"] == "user" and results and len(results) != len(content):
            # Tool results go first: Claude rejects a user turn answering
            # toolUse blocks with anything before its toolResult blocks.
            turn["content"] = results + [b for b in content if "toolResult" not in b]
    return turns


def image_content(
    block: ImageBlock, store: AttachmentReader | None, *, provider: str
) -> dict[str, Any]:
    """``block`` as ``{"image": {"format": ..., "source": {"bytes": <base64>}}}``.

    Raises:
        LlmError: ``UNSUPPORTED_CONTENT`` for a media type Converse does not
            take; ``MISSING_ATTACHMENT`` when ``store`` lacks the bytes.
    """
    media_type = block.attachment.media_type
    wire_format = IMAGE_FORMATS.get(media_type)
    if wire_format is None:
        raise LlmError(
            f"{provider} takes PNG, JPEG, GIF and WebP images, not {media_type}",
            ErrorCode.UNSUPPORTED_CONTENT,
        )
    _, data = image_data(block, store, provider=provider)
    return {"image": {"format": wire_format, "source": {"bytes": data}}}


def _user_content(
    message: Message, attachments: AttachmentReader | None, provider: str
) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            if block.text:
                content.append({"text": block.text})
        elif isinstance(block, ImageBlock):
            content.append(image_content(block, attachments, provider=provider))
        elif isinstance(block, ToolResultBlock):
            parts: list[dict[str, Any]] = []
            for part in block.content:
                if isinstance(part, ImageBlock):
                    parts.append(image_content(part, attachments, provider=provider))
                elif isinstance(part, TextBlock) and part.text:
                    parts.append({"text": part.text})
            result: dict[str, Any] = {"toolUseId": block.tool_call_id, "content": parts}
            if block.is_error:
                result["status"] = "error"
            content.append({"toolResult": result})
    return content


def _replay_entries(message: Message, model: str) -> tuple[Any, ...] | None:
    """The per-block replay entries of a message this family produced for
    ``model`` (a reasoning signature is bound to it), else ``None``."""
    return block_entries(message, WIRE_FAMILY, model=model)


def _assistant_content(
    message: Message, model: str, provider: str
) -> list[dict[str, Any]]:
    entries = _replay_entries(message, model) or (None,) * len(message.content)
    content: list[dict[str, Any]] = []
    for block, entry in zip(message.content, entries, strict=True):
        if isinstance(block, TextBlock):
            if block.text:
                content.append({"text": block.text})
        elif isinstance(block, ReasoningBlock):
            replayed = _replayed_reasoning(block, entry)
            if replayed is not None:
                content.append({"reasoningContent": replayed})
        elif isinstance(block, ToolCallBlock):
            content.append(
                {
                    "toolUse": {
                        "toolUseId": block.id,
                        "name": block.name,
                        "input": _tool_input(block, provider),
                    }
                }
            )
    return content


def _replayed_reasoning(block: ReasoningBlock, entry: Any) -> dict[str, Any] | None:
    if not isinstance(entry, dict):
        return None
    kind = entry.get("type")
    if kind == REASONING_TEXT:
        signature = entry.get("signature")
        if isinstance(signature, str) and signature:
            return {"reasoningText": {"text": block.text, "signature": signature}}
    elif kind == REDACTED_CONTENT:
        data = entry.get("data")
        if isinstance(data, str) and data:
            return {"redactedContent": data}
    return None


def _tool_input(block: ToolCallBlock, provider: str) -> dict[str, Any]:
    raw = block.arguments
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise LlmError(
            f'{provider} needs tool call "{block.id}" ({block.name}) to have JSON '
            "arguments; its arguments are not valid JSON",
            ErrorCode.INVALID_REQUEST,
            cause=exc,
        ) from exc
    if not isinstance(value, dict):
        raise LlmError(
            f'{provider} needs tool call "{block.id}" ({block.name}) to have a JSON '
            f"object as arguments, got a {type(value).__name__}",
            ErrorCode.INVALID_REQUEST,
        )
    return value
