"""The Ollama native ``POST /api/chat`` request body.

Pure: ``GenerateOptions`` in, a JSON-ready body out. Contracts callers may rely
on:

- Key order: ``model``, ``messages``, ``stream`` (always ``true``),
  ``format`` (``response_format``'s schema: Ollama constrains the output to
  it, so strict or not), ``tools``, ``think``, ``options`` (``temperature``,
  ``num_predict``, ``stop``), ``keep_alive``; ``extra_body`` is merged last
  (its keys win); an optional field is omitted, never ``null``.
- ``messages``: the system prompt first (role ``system``), then each message in
  order. A ``system`` message keeps its place. An assistant turn is one
  message with ``content`` (the joined text, ``""`` when none), ``thinking``
  (the joined reasoning, only when the turn had some) and ``tool_calls``
  (``{id, function: {index, name, arguments}}`` with the arguments as a JSON
  object, key order kept). A tool result is a ``tool`` message with
  ``tool_name`` (the answered call's name) and ``tool_call_id``; results come
  before the user text of their message. Blocks a message cannot carry
  (reasoning or calls in a user message) are skipped.
- Images go as ``images`` (base64, in block order) beside the joined text of
  a user message or of a tool result's ``tool`` message, read from
  ``attachments``; the wire does not interleave them with the text.
- ``think`` from the effort (``EFFORT_THINK``); no effort sends no ``think``.
- Refused before any I/O: misplaced images (``UNSUPPORTED_CONTENT``), another
  effort (``UNSUPPORTED_REASONING_EFFORT``), a forced ``tool_choice``
  (``UNSUPPORTED_OPTION``: Ollama cannot force a call), any caching control
  (``UNSUPPORTED_OPTION``: Ollama has none), a result for an unknown
  call, non-object call arguments or a bad ``keep_alive`` (``INVALID_REQUEST``).
  The full table: ``docs/ollama.md``.
"""

from __future__ import annotations

import math
from typing import Any
from typing import Final

from dsh_llm.adapters._wire.extras import AttachmentReader
from dsh_llm.adapters._wire.extras import check_reasoning_effort
from dsh_llm.adapters._wire.extras import image_data
from dsh_llm.adapters._wire.extras import merge_extra_body
from dsh_llm.adapters._wire.extras import refuse_cache_controls
from dsh_llm.adapters._wire.extras import refuse_misplaced_images
from dsh_llm.adapters._wire.extras import sampling_fields
from dsh_llm.adapters._wire.history import answered_call
from dsh_llm.adapters._wire.history import arguments_object
from dsh_llm.adapters._wire.history import record_calls
from dsh_llm.adapters.chat.request import function_tools
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import ContentBlock
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import ImageBlock
from dsh_llm.protocol import Message
from dsh_llm.protocol import ReasoningBlock
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.protocol import ToolResultBlock
from dsh_llm.protocol import text_of

PROVIDER: Final = "Ollama"
"""The display name used in messages."""
EFFORT_THINK: Final[dict[str, bool | str]] = {
    "off": False,
    "on": True,
    "low": "low",
    "medium": "medium",
    "high": "high",
    "max": "max",
}
"""Effort id to the ``think`` value sent."""
REASONING_EFFORTS: Final = tuple(EFFORT_THINK)
"""The efforts the adapter offers, in display order."""

KeepAlive = str | int | float
"""A ``keep_alive``: a duration string (``"5m"``, ``"1h"``) or seconds (a
negative number keeps the model loaded, ``0`` unloads it at once)."""


def _refuse(options: GenerateOptions) -> None:
    refuse_misplaced_images(options.messages, provider=PROVIDER)
    refuse_cache_controls(options, provider=PROVIDER, wire="the Ollama API")
    check_reasoning_effort(options.reasoning_effort, REASONING_EFFORTS, who=PROVIDER)
    choice = options.tool_choice
    if options.tools and choice not in (None, "auto", "none"):
        raise LlmError(
            f'Ollama cannot force a tool call (tool_choice "{choice}"); use "auto" '
            'or "none"',
            ErrorCode.UNSUPPORTED_OPTION,
        )


def _keep_alive(value: object) -> KeepAlive:
    if isinstance(value, str) and value.strip():
        return value
    if type(value) is int or (type(value) is float and math.isfinite(value)):
        return value
    raise LlmError(
        'Ollama keep_alive must be a duration string (such as "5m") or a number '
        "of seconds",
        ErrorCode.INVALID_REQUEST,
    )


def _assistant(message: Message) -> dict[str, Any]:
    reasoning = [b.text for b in message.content if isinstance(b, ReasoningBlock)]
    calls = [b for b in message.content if isinstance(b, ToolCallBlock)]
    wire: dict[str, Any] = {"role": "assistant", "content": text_of(message.content)}
    if reasoning:
        wire["thinking"] = "".join(reasoning)
    if calls:
        wire["tool_calls"] = [
            {
                "id": call.id,
                "function": {
                    "index": position,
                    "name": call.name,
                    "arguments": arguments_object(call, provider=PROVIDER),
                },
            }
            for position, call in enumerate(calls)
        ]
    return wire


def _with_images(
    wire: dict[str, Any],
    blocks: tuple[ContentBlock, ...],
    attachments: AttachmentReader | None,
) -> dict[str, Any]:
    """``wire`` with ``images`` (base64, in block order) when ``blocks`` hold
    any at their top level."""
    images = [
        image_data(block, attachments, provider=PROVIDER)[1]
        for block in blocks
        if isinstance(block, ImageBlock)
    ]
    if images:
        wire["images"] = images
    return wire


def _user(
    message: Message,
    calls: dict[str, ToolCallBlock],
    attachments: AttachmentReader | None,
) -> list[dict[str, Any]]:
    replies = []
    for block in message.content:
        if isinstance(block, ToolResultBlock):
            call = answered_call(calls, block, provider=PROVIDER)
            reply = {"role": "tool", "content": text_of(block.content)}
            replies.append(
                _with_images(reply, block.content, attachments)
                | {"tool_name": call.name, "tool_call_id": block.tool_call_id}
            )
    user = _with_images(
        {"role": message.role, "content": text_of(message.content)},
        message.content,
        attachments,
    )
    if user["content"] or "images" in user or not replies:
        replies.append(user)
    return replies


def build_chat_request(
    options: GenerateOptions,
    *,
    keep_alive: KeepAlive | None = None,
    max_tokens: int | None = None,
    attachments: AttachmentReader | None = None,
) -> dict[str, Any]:
    """The ``/api/chat`` body for ``options`` (see the module docstring).

    Args:
        options: The request.
        keep_alive: How long the server keeps the model loaded after the call
            (an adapter option); ``None`` omits it (the server's default).
        max_tokens: The ``num_predict`` to send when ``options.max_tokens`` is
            ``None``; ``None`` omits it.
        attachments: Where image bytes are read (``None``: an image raises
            ``MISSING_ATTACHMENT``). Whether the model takes images is the
            adapter's check, made before this is called.

    Raises:
        LlmError: ``UNSUPPORTED_CONTENT``, ``UNSUPPORTED_REASONING_EFFORT``,
            ``UNSUPPORTED_OPTION``, ``INVALID_REQUEST`` or
            ``MISSING_ATTACHMENT`` (see the module docstring).
    """
    _refuse(options)
    calls: dict[str, ToolCallBlock] = {}
    messages: list[dict[str, Any]] = []
    if options.system is not None:
        messages.append({"role": "system", "content": options.system})
    for message in options.messages:
        record_calls(calls, message)
        if message.role == "assistant":
            messages.append(_assistant(message))
        elif message.role == "system":
            messages.append({"role": "system", "content": text_of(message.content)})
        else:
            messages.extend(_user(message, calls, attachments))
    body: dict[str, Any] = {
        "model": options.model,
        "messages": messages,
        "stream": True,
    }
    if options.response_format is not None:
        body["format"] = options.response_format.schema
    if options.tools and options.tool_choice != "none":
        body["tools"] = function_tools(options.tools)
    if options.reasoning_effort is not None:
        body["think"] = EFFORT_THINK[options.reasoning_effort]
    cap = options.max_tokens if options.max_tokens is not None else max_tokens
    sampling = sampling_fields(options, cap=cap, cap_key="num_predict", stop_key="stop")
    if sampling:
        body["options"] = sampling
    if keep_alive is not None:
        body["keep_alive"] = _keep_alive(keep_alive)
    return merge_extra_body(body, options)
