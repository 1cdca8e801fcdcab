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
from collections.abc import Mapping
from typing import Any
from typing import Final

from dsh_llm.adapters._wire import extras as request_extras
from dsh_llm.adapters._wire.extras import AttachmentReader
from dsh_llm.adapters._wire.extras import image_data
from dsh_llm.adapters._wire.extras import merge_extra_body
from dsh_llm.adapters._wire.extras import refuse_cache_controls
from dsh_llm.adapters._wire.extras import refuse_misplaced_images
from dsh_llm.adapters.anthropic.catalog import ThinkingProfile
from dsh_llm.adapters.anthropic.messages import ClaudeMessages
from dsh_llm.adapters.anthropic.request import refuse_while_thinking
from dsh_llm.adapters.anthropic.request import thinking_fields
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import CacheBreakpoint
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import ImageBlock
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
    refuse_while_thinking(options, thinks=thinks, provider=provider, thinker="Claude")
    content = _ConverseContent(options, attachments=attachments, provider=provider)
    body: dict[str, Any] = {"messages": content.turns()}
    system = content.system_blocks()
    if options.system:
        system.insert(0, content.text(options.system))
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


class _ConverseContent(ClaudeMessages):
    """Claude's blocks as Converse takes them."""

    wire_family = WIRE_FAMILY
    thinking_entry = REASONING_TEXT
    redacted_entry = REDACTED_CONTENT

    def text(self, text: str) -> dict[str, Any]:
        return {"text": text}

    def image(self, block: ImageBlock) -> dict[str, Any]:
        return image_content(block, self.attachments, provider=self.provider)

    def tool_result(self, block: ToolResultBlock) -> dict[str, Any]:
        """Its text and images as ``content`` blocks; an error ``status``."""
        result: dict[str, Any] = {
            "toolUseId": block.tool_call_id,
            "content": self.result_parts(block),
        }
        if block.is_error:
            result["status"] = "error"
        return {"toolResult": result}

    def is_tool_result(self, block: dict[str, Any]) -> bool:
        return "toolResult" in block

    def tool_call(
        self, block: ToolCallBlock, arguments: dict[str, Any]
    ) -> dict[str, Any]:
        return {
            "toolUse": {"toolUseId": block.id, "name": block.name, "input": arguments}
        }

    def thinking(self, text: str, signature: str) -> dict[str, Any]:
        return {
            "reasoningContent": {
                "reasoningText": {"text": text, "signature": signature}
            }
        }

    def redacted(self, data: str) -> dict[str, Any]:
        return {"reasoningContent": {"redactedContent": data}}

    def mark(
        self, content: list[dict[str, Any]], breakpoint: CacheBreakpoint, position: int
    ) -> None:
        """A ``cachePoint`` block after ``content``."""
        if not content:
            raise LlmError(
                f"{self.provider} cannot honour the cache breakpoint of message "
                f"{position}: the message sends no content to end a cached prefix",
                ErrorCode.UNSUPPORTED_OPTION,
            )
        content.append(
            {"cachePoint": self.cache_marker("default", breakpoint, position)}
        )
