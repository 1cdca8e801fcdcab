"""The Anthropic Messages request: ``GenerateOptions`` to headers and a JSON body.

Pure functions; each refusal they make is raised before any I/O.

- ``build_messages_request``: a fixed key order, optional fields omitted;
  ``system`` top-level; consecutive turns of one role merged, tool results first
  in a user turn; tool-call arguments parsed (not a JSON object:
  ``INVALID_REQUEST``).
- Replay: this family's thinking blocks (with signatures) and redacted thinking
  go back in order, only for the model that produced them; server tool blocks
  whose ``data`` is an Anthropic block (``server_tool_use``, ``mcp_tool_use``,
  the ``*_tool_result`` blocks) go back as received, encrypted content
  included, and a text block's Anthropic citations as its ``citations``;
  another provider's server blocks and citations are left out.
- ``thinking_fields``: efforts to budget or adaptive thinking; with thinking on,
  ``temperature`` and a forced ``tool_choice`` raise ``UNSUPPORTED_OPTION``
  (``refuse_while_thinking``).
- ``response_format`` is ``output_config.format`` (beside any effort), images
  are ``image`` blocks in user turns and ``tool_result`` content
  (``extras``); ``extra_body`` is merged last, unchecked. ``session_id`` is
  ``metadata.user_id``.
- A message's cache breakpoint (``Message.cache``) is ``cache_control`` on the
  last block it sends (not a thinking block; none: ``UNSUPPORTED_OPTION``), at
  most ``MAX_CACHE_BREAKPOINTS``; ``cache_key`` and ``cached_content`` are
  ``UNSUPPORTED_OPTION``.
- ``request_headers``: the stream headers plus ``anthropic-version`` (and
  ``anthropic-beta``) and ``extra_headers``; never the key.
- Point by point: ``docs/anthropic.md``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any
from typing import Final

from dsh_llm.adapters._wire import extras as request_extras
from dsh_llm.adapters._wire.extras import AttachmentReader
from dsh_llm.adapters._wire.extras import check_breakpoints
from dsh_llm.adapters._wire.extras import merge_extra_body
from dsh_llm.adapters._wire.extras import refuse_cache_controls
from dsh_llm.adapters._wire.extras import refuse_misplaced_images
from dsh_llm.adapters.anthropic.catalog import BUDGET_THINKING
from dsh_llm.adapters.anthropic.catalog import ThinkingProfile
from dsh_llm.adapters.anthropic.extras import image_content
from dsh_llm.adapters.anthropic.extras import output_format
from dsh_llm.adapters.anthropic.messages import ClaudeMessages
from dsh_llm.adapters.anthropic.server_tools import replayable
from dsh_llm.adapters.anthropic.server_tools import wire_citation
from dsh_llm.adapters.anthropic.translate import WIRE_FAMILY
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import CacheBreakpoint
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import ImageBlock
from dsh_llm.protocol import ServerToolCallBlock
from dsh_llm.protocol import ServerToolResultBlock
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.protocol import ToolResultBlock
from dsh_llm.protocol import text_of
from dsh_llm.transport.session import stream_headers

ANTHROPIC_VERSION: Final = "2023-06-01"
"""The ``anthropic-version`` header sent by default."""
API_KEY_HEADER: Final = "x-api-key"
"""The header the key travels in (``extra_headers`` cannot set it)."""
BUDGET_TOKENS: Final[Mapping[str, int]] = {
    "low": 2_048,
    "medium": 8_192,
    "high": 16_384,
    "max": 32_768,
}
"""The thinking budget of each effort of a ``budget`` model (cut to
``max_tokens - 1`` when ``max_tokens`` is smaller)."""
MIN_BUDGET_TOKENS: Final = 1_024
"""The smallest budget the API accepts."""
METADATA_USER_ID_MAX_CHARS: Final = 256
"""The longest ``metadata.user_id`` the API accepts."""
MAX_CACHE_BREAKPOINTS: Final = 4
"""The most ``cache_control`` breakpoints one request may hold."""

_WIRE: Final = WIRE_FAMILY


def request_headers(
    options: GenerateOptions | None = None,
    *,
    anthropic_version: str = ANTHROPIC_VERSION,
    beta: Sequence[str] = (),
    provider: str = "Anthropic",
) -> dict[str, str]:
    """The headers of one streaming Messages request (lower-case names), without
    the key: it travels in ``x-api-key`` through the call's auth object
    (``dsh_llm.transport.session.ApiKeyAuth``), so the transport redacts it.

    Args:
        options: The request, whose ``extra_headers`` are added (``None``: none).
        anthropic_version: The API version header.
        beta: ``anthropic-beta`` features, joined with commas (omitted if empty).
        provider: Display name used in messages.

    Raises:
        LlmError: ``UNSUPPORTED_OPTION`` naming an extra header the adapter sets
            itself (``anthropic-version``, ``anthropic-beta`` when ``beta`` is
            set, ``x-api-key``, the stream headers); never its value.
    """
    extra = {"anthropic-version": anthropic_version}
    if beta:
        extra["anthropic-beta"] = ",".join(beta)
    base = stream_headers(extra=extra)
    if options is None:
        return base
    return request_extras.request_headers(
        base, options, provider=provider, taken=(API_KEY_HEADER,)
    )


def _refused(message: str, code: ErrorCode = ErrorCode.UNSUPPORTED_OPTION) -> LlmError:
    return LlmError(message, code)


def thinking_fields(
    options: GenerateOptions,
    *,
    profile: ThinkingProfile,
    max_tokens: int,
    default_effort: str | None = None,
    provider: str = "Anthropic",
) -> tuple[dict[str, Any], bool]:
    """The ``thinking``/``output_config`` body keys, and whether the model thinks.

    The effort is the request's, else ``default_effort``; none sends no field and
    the model does its default (``profile.thinks_by_default``).
    ``purpose="session-title"`` takes ``off`` when offered, else the lowest
    effort. ``off`` sends nothing on a ``budget`` model and ``{"type":
    "disabled"}`` on an ``adaptive`` one. Another effort sends, on a ``budget``
    model, ``{"type": "enabled", "budget_tokens": BUDGET_TOKENS[effort]}`` (cut to
    ``max_tokens - 1``), on an ``adaptive`` one ``{"type": "adaptive"}`` plus
    ``output_config: {"effort": effort}``.

    Raises:
        LlmError: ``UNSUPPORTED_REASONING_EFFORT`` for an effort not in
            ``profile.efforts``; ``UNSUPPORTED_OPTION`` when ``max_tokens``
            leaves no room for the smallest budget.
    """
    effort = options.reasoning_effort
    if effort is not None and effort not in profile.efforts:
        raise _refused(
            f'{provider} model "{options.model}" does not support reasoning effort '
            f'"{effort}" (supported: {", ".join(profile.efforts)})',
            ErrorCode.UNSUPPORTED_REASONING_EFFORT,
        )
    if options.purpose == "session-title":
        effort = "off" if "off" in profile.efforts else profile.efforts[0]
    elif effort is None:
        effort = default_effort
    if effort is None:
        return {}, profile.thinks_by_default
    if effort not in profile.efforts:
        raise _refused(
            f'{provider} model "{options.model}" does not support the default '
            f'reasoning effort "{effort}"',
            ErrorCode.UNSUPPORTED_REASONING_EFFORT,
        )
    if effort == "off":
        if profile.style == "budget":
            return {}, False
        return {"thinking": {"type": "disabled"}}, False
    if profile.style == "adaptive":
        return {
            "thinking": {"type": "adaptive"},
            "output_config": {"effort": effort},
        }, True
    budget = min(BUDGET_TOKENS.get(effort, BUDGET_TOKENS["max"]), max_tokens - 1)
    if budget < MIN_BUDGET_TOKENS:
        raise _refused(
            f"{provider} thinking needs max_tokens above {MIN_BUDGET_TOKENS} (got "
            f'{max_tokens}); raise max_tokens or use reasoning effort "off"'
        )
    return {"thinking": {"type": "enabled", "budget_tokens": budget}}, True


def refuse_while_thinking(
    options: GenerateOptions,
    *,
    thinks: bool,
    provider: str,
    thinker: str = "the model",
) -> None:
    """Refuse what Claude rejects while it thinks (``thinks``, from
    ``thinking_fields``): a forced ``tool_choice`` and ``temperature``.

    Args:
        options: The request.
        thinks: Whether the model thinks.
        provider: Display name used in messages.
        thinker: Who thinks, as messages name it.

    Raises:
        LlmError: ``UNSUPPORTED_OPTION`` naming the field.
    """
    if not thinks:
        return
    choice = options.tool_choice
    if options.tools and choice not in (None, "auto", "none"):
        raise _refused(
            f'{provider} rejects tool_choice "{choice}" while {thinker} thinks; use '
            'reasoning effort "off" (where the model offers it) or tool_choice "auto"'
        )
    if options.temperature is not None:
        raise _refused(
            f"{provider} does not accept temperature while {thinker} thinks; use "
            'reasoning effort "off" (where the model offers it) or leave '
            "temperature unset"
        )


def tool_choice_wire(choice: str | None) -> dict[str, Any] | None:
    """The wire ``tool_choice``: ``auto``, ``none``, ``required`` as ``any``, a
    tool name as ``{"type": "tool", "name": ...}``; ``None`` omitted."""
    if choice is None:
        return None
    if choice in ("auto", "none"):
        return {"type": choice}
    if choice == "required":
        return {"type": "any"}
    return {"type": "tool", "name": choice}


def build_messages_request(
    options: GenerateOptions,
    *,
    model_max_tokens: int,
    thinking: ThinkingProfile = BUDGET_THINKING,
    default_effort: str | None = None,
    attachments: AttachmentReader | None = None,
    provider: str = "Anthropic",
) -> dict[str, Any]:
    """The ``POST /v1/messages`` body for ``options`` (see the module docstring),
    ``extra_body`` merged last.

    Args:
        options: The request.
        model_max_tokens: ``max_tokens`` when the request sets none.
        thinking: The model's thinking profile (``catalog.thinking_profile``).
        default_effort: The configured effort used when the request names none.
        attachments: Where image bytes are read (whether the model takes
            images is the caller's check: ``request_extras.check_image_input``).
        provider: Display name used in messages.

    Raises:
        LlmError: ``UNSUPPORTED_CONTENT`` for an image in a system or assistant
            message; ``MISSING_ATTACHMENT`` for an image ``attachments`` cannot
            supply; ``UNSUPPORTED_OPTION``, ``UNSUPPORTED_REASONING_EFFORT`` or
            ``INVALID_REQUEST`` for a field the API would refuse (the module
            docstring lists them).
    """
    refuse_misplaced_images(options.messages, provider=provider)
    refuse_cache_controls(
        options, provider=provider, wire="the Messages API", breakpoints=True
    )
    check_breakpoints(options, provider=provider, most=MAX_CACHE_BREAKPOINTS)
    max_tokens = options.max_tokens or model_max_tokens
    fields, thinks = thinking_fields(
        options,
        profile=thinking,
        max_tokens=max_tokens,
        default_effort=default_effort,
        provider=provider,
    )
    refuse_while_thinking(options, thinks=thinks, provider=provider)
    if options.temperature is not None and options.temperature > 1:
        raise _refused(
            f"{provider} accepts temperature from 0 to 1, got {options.temperature}"
        )
    body: dict[str, Any] = {"model": options.model, "max_tokens": max_tokens}
    content = _MessagesContent(options, attachments=attachments, provider=provider)
    system = _system(options, content)
    if system is not None:
        body["system"] = system
    body["messages"] = content.turns()
    body["stream"] = True
    body.update(fields)
    wanted = output_format(options)
    if wanted is not None:
        # One output_config object: the format goes beside an adaptive effort.
        body["output_config"] = {**body.get("output_config", {}), "format": wanted}
    if options.tools:
        body["tools"] = [
            {
                "name": tool.name,
                "description": tool.description,
                "input_schema": tool.parameters,
            }
            for tool in options.tools
        ]
        choice = tool_choice_wire(options.tool_choice)
        if choice is not None:
            body["tool_choice"] = choice
    if options.temperature is not None:
        body["temperature"] = options.temperature
    if options.stop is not None:
        body["stop_sequences"] = list(options.stop)
    if options.session_id is not None:
        if len(options.session_id) > METADATA_USER_ID_MAX_CHARS:
            raise _refused(
                f"{provider} session_id travels as metadata.user_id, which holds "
                f"at most {METADATA_USER_ID_MAX_CHARS} characters",
                ErrorCode.INVALID_REQUEST,
            )
        body["metadata"] = {"user_id": options.session_id}
    return merge_extra_body(body, options)


def _system(
    options: GenerateOptions, content: ClaudeMessages
) -> str | list[dict[str, Any]] | None:
    extra = content.system_blocks()
    if not extra:
        return options.system or None
    if options.system:
        return [content.text(options.system), *extra]
    return extra


_UNCACHEABLE: Final = frozenset({"thinking", "redacted_thinking"})


class _MessagesContent(ClaudeMessages):
    """Claude's blocks as the Messages API takes them."""

    wire_family = _WIRE
    thinking_entry = "thinking"
    redacted_entry = "redacted_thinking"

    def text(self, text: str) -> dict[str, Any]:
        return {"type": "text", "text": text}

    def image(self, block: ImageBlock) -> dict[str, Any]:
        return image_content(block, self.attachments, provider=self.provider)

    def tool_result(self, block: ToolResultBlock) -> dict[str, Any]:
        """Text only: its text as ``content`` (left out when empty); with
        images: ``content`` blocks."""
        result: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": block.tool_call_id,
        }
        if any(isinstance(part, ImageBlock) for part in block.content):
            result["content"] = self.result_parts(block)
        else:
            text = text_of(block.content)
            if text:
                result["content"] = text
        if block.is_error is not None:
            result["is_error"] = block.is_error
        return result

    def is_tool_result(self, block: dict[str, Any]) -> bool:
        return bool(block["type"] == "tool_result")

    def assistant_text(self, block: TextBlock) -> dict[str, Any]:
        """A text block, with its citations when they are Anthropic's own (a
        citation another provider made has no place on this wire)."""
        text = self.text(block.text)
        cited = [wire_citation(citation) for citation in block.citations]
        kept = [wire for wire in cited if wire is not None]
        if kept:
            text["citations"] = kept
        return text

    def server_block(
        self, block: ServerToolCallBlock | ServerToolResultBlock
    ) -> dict[str, Any] | None:
        """As received (encrypted content included: the API refuses a follow-up
        that drops an encrypted search result); another provider's server
        blocks are left out."""
        return copy.deepcopy(block.data) if replayable(block.data) else None

    def tool_call(
        self, block: ToolCallBlock, arguments: dict[str, Any]
    ) -> dict[str, Any]:
        return {
            "type": "tool_use",
            "id": block.id,
            "name": block.name,
            "input": arguments,
        }

    def thinking(self, text: str, signature: str) -> dict[str, Any]:
        return {"type": "thinking", "thinking": text, "signature": signature}

    def redacted(self, data: str) -> dict[str, Any]:
        return {"type": "redacted_thinking", "data": data}

    def mark(
        self, content: list[dict[str, Any]], breakpoint: CacheBreakpoint, position: int
    ) -> None:
        """``cache_control`` on the last block that can carry one (not a
        thinking block, not empty text)."""
        for block in reversed(content):
            if block["type"] not in _UNCACHEABLE and block.get("text") != "":
                block["cache_control"] = self.cache_marker(
                    "ephemeral", breakpoint, position
                )
                return
        raise LlmError(
            f"{self.provider} cannot honour the cache breakpoint of message "
            f"{position}: the message sends no block that can carry one",
            ErrorCode.UNSUPPORTED_OPTION,
        )
