"""What a Gemini answer keeps for its replay, and how a request reads it back.

The translator (``translate``) builds the envelope; the request builder
(``request``) reads it from an assistant message. Contracts callers may rely on:

- The envelope is ``ReplayEnvelope(response={"wire": REPLAY_WIRE}, blocks=...)``
  with one entry per emitted block, in block order: ``None``, or an object with
  any of ``thoughtSignature`` (the opaque signature of that block's part),
  ``callId`` and ``id`` (a tool call's protocol id and the id Gemini itself gave,
  absent when the id was synthesized), ``inlineData`` (the ``inlineData``
  object an image block came in, bytes included) and ``after`` (parts kept
  verbatim that followed the block: server-side ``toolCall``/``toolResponse``/
  code parts, interim thought images, or a signature-only part that had no
  unsigned block to go to). ``response`` may hold ``before``: such parts that
  came before any block.
- ``replay_entries(message)`` returns one entry (or ``None``) per block of
  ``message``, only for an envelope whose ``response.wire`` is
  ``REPLAY_WIRE`` (state from another wire is never sent to Gemini): matched by
  position when the message has exactly the envelope's blocks, else tool calls
  by ``callId`` only (a message whose blocks were edited keeps its call
  signatures, the ones Gemini validates). It also returns the ``before`` parts.
"""

from __future__ import annotations

from typing import Any
from typing import Final

from dsh_llm.protocol import Message
from dsh_llm.protocol import ModelSource
from dsh_llm.protocol import ToolCallBlock

REPLAY_WIRE: Final = "gemini-generate-content"
"""The ``response.wire`` value of a Gemini replay envelope."""


def _entry(value: object) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


def replay_entries(
    message: Message,
) -> tuple[list[dict[str, Any] | None], list[dict[str, Any]]]:
    """Per-block replay entries of ``message`` and the parts before its first
    block (see the module docstring); all ``None`` and ``[]`` without state."""
    none: list[dict[str, Any] | None] = [None] * len(message.content)
    source = message.source
    if not isinstance(source, ModelSource) or source.replay_state is None:
        return none, []
    envelope = source.replay_state
    response = envelope.response
    if not isinstance(response, dict) or response.get("wire") != REPLAY_WIRE:
        return none, []
    before = response.get("before")
    leading = (
        [p for p in before if isinstance(p, dict)] if isinstance(before, list) else []
    )
    blocks = list(envelope.blocks or ())
    content = message.content
    if len(blocks) == len(content):
        entries = [_entry(value) for value in blocks]
        for position, block in enumerate(content):
            entry = entries[position]
            if (
                entry is not None
                and "callId" in entry
                and (
                    not isinstance(block, ToolCallBlock) or entry["callId"] != block.id
                )
            ):
                entries[position] = None
        return entries, leading
    by_call = {
        entry["callId"]: entry
        for entry in map(_entry, blocks)
        if entry is not None and isinstance(entry.get("callId"), str)
    }
    return [
        by_call.get(block.id) if isinstance(block, ToolCallBlock) else None
        for block in content
    ], []
