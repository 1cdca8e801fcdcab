"""What request builders read back from a conversation.

Both wires answer a tool call by the tool's *name* and take arguments as a JSON
*object*, where the protocol carries a call id and raw JSON text. Pure
functions; contracts callers may rely on:

- ``record_calls(calls, message)`` adds the calls of an assistant message to
  ``calls`` (id to ``ToolCallBlock``); a builder records each message as it
  walks the conversation, so a result answers the nearest earlier call with
  its id. ``call_index(messages)`` records them all.
- ``answered_call(calls, result, provider=...)`` is the call a
  ``ToolResultBlock`` answers; a result for an id no assistant message holds
  raises ``INVALID_REQUEST`` (the wire needs the tool's name).
- ``arguments_object(block, provider=...)`` parses a call's arguments, keeping
  key order; text that is not a JSON object raises ``INVALID_REQUEST``.
- ``block_entries(message, wire, model=...)``: the per-block replay entries of
  an assistant message a family produced (its envelope's ``response.wire`` is
  ``wire``; given ``model``, for that model), one per block, else ``None``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import Message
from dsh_llm.protocol import ModelSource
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.protocol import ToolResultBlock


def record_calls(calls: dict[str, ToolCallBlock], message: Message) -> None:
    """Add the calls of ``message`` (when it is an assistant's) to ``calls``."""
    if message.role == "assistant":
        for block in message.content:
            if isinstance(block, ToolCallBlock):
                calls[block.id] = block


def call_index(messages: Iterable[Message]) -> dict[str, ToolCallBlock]:
    """Each call id of the assistant messages, to its call (the last wins)."""
    calls: dict[str, ToolCallBlock] = {}
    for message in messages:
        record_calls(calls, message)
    return calls


def answered_call(
    calls: dict[str, ToolCallBlock], result: ToolResultBlock, *, provider: str
) -> ToolCallBlock:
    """The call ``result`` answers.

    Raises:
        LlmError: ``INVALID_REQUEST`` when no assistant message holds the id.
    """
    call = calls.get(result.tool_call_id)
    if call is None:
        raise LlmError(
            f"{provider} needs the tool name of every result, but no assistant "
            f'message holds the call "{result.tool_call_id}" it answers',
            ErrorCode.INVALID_REQUEST,
        )
    return call


def arguments_object(block: ToolCallBlock, *, provider: str) -> dict[str, Any]:
    """``block``'s arguments as an object, key order kept.

    Raises:
        LlmError: ``INVALID_REQUEST`` when they are not a JSON object.
    """
    try:
        value = json.loads(block.arguments) if block.arguments.strip() else {}
    except (ValueError, RecursionError):
        value = None
    if not isinstance(value, dict):
        raise LlmError(
            f'{provider} takes tool-call arguments as a JSON object; call "{block.id}" '
            f"({block.name}) has arguments that are not one",
            ErrorCode.INVALID_REQUEST,
        )
    return value


def block_entries(
    message: Message, wire: str, *, model: str | None = None
) -> tuple[Any, ...] | None:
    """The per-block replay entries of ``message`` when its replay envelope is
    ``wire``'s with one entry per block and, given ``model``, it answered
    ``model`` (the model asked for or the one that answered); else ``None``."""
    source = message.source
    if not isinstance(source, ModelSource) or source.replay_state is None:
        return None
    state = source.replay_state
    response = state.response
    if not isinstance(response, dict) or response.get("wire") != wire:
        return None
    if model is not None and model not in (source.model, response.get("model")):
        return None
    if state.blocks is None or len(state.blocks) != len(message.content):
        return None
    return state.blocks
