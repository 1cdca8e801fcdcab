"""``ClaudeMessages``: a conversation as Claude's content blocks, for both wires
that carry them (the Anthropic Messages API and Bedrock Converse).

The walk is one; a subclass per wire says how each block looks. Pure: every
refusal is raised before any I/O. Contracts callers may rely on:

- ``turns()``: the non-system messages in order, consecutive turns of one role
  merged and tool results first in a user turn (the API rejects a user turn
  answering tool calls with anything before its results); a message's cache
  breakpoint goes where ``mark`` puts it; a message that sends nothing is left
  out.
- ``system_blocks()``: each system message's text as one text block (empty text
  left out), with its breakpoint; not ``GenerateOptions.system``.
- User content: text (empty left out), images, tool results. Assistant content:
  text, the server tool blocks the wire replays, this family's reasoning replay
  (only for the model that produced it: ``block_entries``), tool calls with
  ``tool_input`` arguments.
- ``cache_marker(kind, breakpoint, position)``: ``{"type": kind}`` with the
  breakpoint's ``ttl`` when one is asked for (each wire places it).
- ``tool_input(block, provider=...)``: a call's arguments as a JSON object
  (blank: ``{}``); anything else is ``INVALID_REQUEST``.
"""

from __future__ import annotations

import abc
import json
from typing import Any
from typing import ClassVar

from dsh_llm.adapters._wire.extras import AttachmentReader
from dsh_llm.adapters._wire.extras import breakpoint_ttl
from dsh_llm.adapters._wire.history import block_entries
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import CacheBreakpoint
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import ImageBlock
from dsh_llm.protocol import Message
from dsh_llm.protocol import ReasoningBlock
from dsh_llm.protocol import ServerToolCallBlock
from dsh_llm.protocol import ServerToolResultBlock
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.protocol import ToolResultBlock
from dsh_llm.protocol import text_of


def tool_input(block: ToolCallBlock, *, provider: str) -> dict[str, Any]:
    """``block``'s arguments as the ``input`` object (blank arguments: ``{}``).

    Raises:
        LlmError: ``INVALID_REQUEST`` when they are not JSON, or not an object.
    """
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


class ClaudeMessages(abc.ABC):
    """The content blocks of one request's conversation (see the module
    docstring); a subclass gives each block its wire shape.

    Args:
        options: The request.
        attachments: Where image bytes are read.
        provider: Display name used in messages.
    """

    wire_family: ClassVar[str]
    """The ``wire`` of the replay envelopes whose entries are replayed."""
    thinking_entry: ClassVar[str]
    """A replay entry's ``type`` for reasoning text with its ``signature``."""
    redacted_entry: ClassVar[str]
    """A replay entry's ``type`` for redacted reasoning (its ``data``)."""

    def __init__(
        self,
        options: GenerateOptions,
        *,
        attachments: AttachmentReader | None,
        provider: str,
    ) -> None:
        self.options = options
        """The request."""
        self.attachments = attachments
        """Where image bytes are read."""
        self.provider = provider
        """The display name used in messages."""

    # -- the walk ------------------------------------------------------------------

    def system_blocks(self) -> list[dict[str, Any]]:
        """The system messages' text blocks, each with its breakpoint."""
        blocks: list[dict[str, Any]] = []
        for position, message in enumerate(self.options.messages):
            if message.role != "system":
                continue
            text = text_of(message.content)
            content = [self.text(text)] if text else []
            if message.cache is not None:
                self.mark(content, message.cache, position)
            blocks.extend(content)
        return blocks

    def turns(self) -> list[dict[str, Any]]:
        """The ``messages`` of the body: alternating turns (see the module
        docstring)."""
        turns: list[dict[str, Any]] = []
        for position, message in enumerate(self.options.messages):
            if message.role == "system":
                continue
            if message.role == "assistant":
                content = self.assistant_content(message)
            else:
                content = self.user_content(message)
            if message.cache is not None:
                self.mark(content, message.cache, position)
            if not content:
                continue
            if turns and turns[-1]["role"] == message.role:
                turns[-1]["content"].extend(content)
            else:
                turns.append({"role": message.role, "content": content})
        for turn in turns:
            content = turn["content"]
            results = [block for block in content if self.is_tool_result(block)]
            if turn["role"] == "user" and results and len(results) != len(content):
                others = [block for block in content if not self.is_tool_result(block)]
                turn["content"] = [*results, *others]
        return turns

    def user_content(self, message: Message) -> list[dict[str, Any]]:
        """A user message's blocks: text, images and tool results."""
        content: list[dict[str, Any]] = []
        for block in message.content:
            if isinstance(block, TextBlock):
                if block.text:
                    content.append(self.text(block.text))
            elif isinstance(block, ImageBlock):
                content.append(self.image(block))
            elif isinstance(block, ToolResultBlock):
                content.append(self.tool_result(block))
        return content

    def result_parts(self, block: ToolResultBlock) -> list[dict[str, Any]]:
        """A tool result's content as blocks: text and images in block order
        (empty text left out)."""
        parts: list[dict[str, Any]] = []
        for part in block.content:
            if isinstance(part, ImageBlock):
                parts.append(self.image(part))
            elif isinstance(part, TextBlock) and part.text:
                parts.append(self.text(part.text))
        return parts

    def assistant_content(self, message: Message) -> list[dict[str, Any]]:
        """An assistant message's blocks: text, replayable server tool blocks,
        this family's reasoning for this model, tool calls."""
        # Reasoning is bound to the model that produced it (Claude rejects it
        # elsewhere): the source names the model asked for, the envelope the
        # one that answered (a dated id for an alias).
        entries = block_entries(
            message, self.wire_family, model=self.options.model
        ) or (None,) * len(message.content)
        content: list[dict[str, Any]] = []
        for block, entry in zip(message.content, entries, strict=True):
            if isinstance(block, TextBlock):
                if block.text:
                    content.append(self.assistant_text(block))
            elif isinstance(block, ServerToolCallBlock | ServerToolResultBlock):
                server = self.server_block(block)
                if server is not None:
                    content.append(server)
            elif isinstance(block, ReasoningBlock):
                replayed = self.replayed_reasoning(block, entry)
                if replayed is not None:
                    content.append(replayed)
            elif isinstance(block, ToolCallBlock):
                arguments = tool_input(block, provider=self.provider)
                content.append(self.tool_call(block, arguments))
        return content

    def replayed_reasoning(
        self, block: ReasoningBlock, entry: Any
    ) -> dict[str, Any] | None:
        """A reasoning block as its replay ``entry`` says (``thinking`` with its
        signature, ``redacted`` with its data), else ``None`` (not sent)."""
        if not isinstance(entry, dict):
            return None
        kind = entry.get("type")
        if kind == self.thinking_entry:
            signature = entry.get("signature")
            if isinstance(signature, str) and signature:
                return self.thinking(block.text, signature)
        elif kind == self.redacted_entry:
            data = entry.get("data")
            if isinstance(data, str) and data:
                return self.redacted(data)
        return None

    def cache_marker(
        self, kind: str, breakpoint: CacheBreakpoint, position: int
    ) -> dict[str, Any]:
        """The cache marker of message ``position``'s breakpoint: ``{"type":
        kind}``, with ``ttl`` when one is asked for.

        Raises:
            LlmError: ``UNSUPPORTED_OPTION`` for a lifetime other than 5m or 1h.
        """
        marker: dict[str, Any] = {"type": kind}
        ttl = breakpoint_ttl(breakpoint, provider=self.provider, position=position)
        if ttl is not None:
            marker["ttl"] = ttl
        return marker

    # -- the wire's shapes ---------------------------------------------------------

    @abc.abstractmethod
    def text(self, text: str) -> dict[str, Any]:
        """A text block."""

    @abc.abstractmethod
    def image(self, block: ImageBlock) -> dict[str, Any]:
        """An image block, its bytes read from ``attachments``."""

    @abc.abstractmethod
    def tool_result(self, block: ToolResultBlock) -> dict[str, Any]:
        """A tool result block."""

    @abc.abstractmethod
    def is_tool_result(self, block: dict[str, Any]) -> bool:
        """Whether a wire block is a tool result."""

    def assistant_text(self, block: TextBlock) -> dict[str, Any]:
        """An assistant's text block (by default as any text block)."""
        return self.text(block.text)

    def server_block(
        self, block: ServerToolCallBlock | ServerToolResultBlock
    ) -> dict[str, Any] | None:
        """A server tool block as replayed, ``None`` to leave it out (the
        default)."""
        return None

    @abc.abstractmethod
    def tool_call(
        self, block: ToolCallBlock, arguments: dict[str, Any]
    ) -> dict[str, Any]:
        """A tool call block with its parsed ``arguments``."""

    @abc.abstractmethod
    def thinking(self, text: str, signature: str) -> dict[str, Any]:
        """A replayed reasoning block with its signature."""

    @abc.abstractmethod
    def redacted(self, data: str) -> dict[str, Any]:
        """A replayed redacted reasoning block."""

    @abc.abstractmethod
    def mark(
        self, content: list[dict[str, Any]], breakpoint: CacheBreakpoint, position: int
    ) -> None:
        """Put the breakpoint of message ``position`` on (or after) ``content``,
        in place.

        Raises:
            LlmError: ``UNSUPPORTED_OPTION`` when ``content`` cannot carry it.
        """
