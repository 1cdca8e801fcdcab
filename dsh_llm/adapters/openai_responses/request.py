"""The Responses API request: ``GenerateOptions`` to a ``POST /v1/responses`` body.

- ``build_responses_request`` is pure and checks before it builds: ``stop``, a
  forced ``tool_choice`` on a server that ignores it, a cache breakpoint or
  ``cached_content`` (``UNSUPPORTED_OPTION``), an effort the profile does not
  list; while building, an image where the
  wire has no place for it (``UNSUPPORTED_CONTENT``) or whose bytes are
  missing (``MISSING_ATTACHMENT``). Whether the model takes images at all is
  the adapter's check (its catalog), made before.
- A fixed key order; ``store: false`` (stateless) and
  ``include: ["reasoning.encrypted_content"]``; optional fields omitted;
  ``extra_body`` merged last (``dsh_llm.adapters.merge_extra_body``).
- ``input`` follows the conversation (``input_text``/``input_image`` parts in
  block order, ``output_text`` parts, ``function_call`` and
  ``function_call_output`` items); tools are flat, sent with ``strict: false``;
  a named ``tool_choice`` on a profile without ``named_tool_choice`` goes as
  ``required`` with only that tool; ``response_format`` is ``text.format``
  (``json_schema``); ``cache_key`` is ``prompt_cache_key``. ``output_cap`` is
  the ``max_output_tokens`` a body sends.
- Replay: this family's reasoning items go back, exactly as ``output_item.done``
  gave them, before the items they preceded; so do its hosted-tool items
  (``web_search_call``, ``file_search_call``, ``code_interpreter_call``,
  ``mcp_call``, ``mcp_list_tools``: a server tool call's ``data``) and the
  annotations of its ``output_text`` parts (the text's replay entry).
  Another wire's server blocks and citations are left out.
- Point by point: ``docs/openai-responses.md``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from collections.abc import Sequence
from typing import Any
from typing import Final

from dsh_llm.adapters._wire.extras import AttachmentReader
from dsh_llm.adapters._wire.extras import check_reasoning_effort
from dsh_llm.adapters._wire.extras import image_data
from dsh_llm.adapters._wire.extras import merge_extra_body
from dsh_llm.adapters._wire.extras import refuse_cache_controls
from dsh_llm.adapters._wire.extras import refuse_misplaced_images
from dsh_llm.adapters._wire.history import block_entries
from dsh_llm.adapters.openai_responses.hosted import HOSTED_TYPES
from dsh_llm.adapters.openai_responses.profiles import ResponsesProfile
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import TOOL_CHOICE_KEYWORDS
from dsh_llm.protocol import ContentBlock
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import ImageBlock
from dsh_llm.protocol import Message
from dsh_llm.protocol import ReasoningBlock
from dsh_llm.protocol import ServerToolCallBlock
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.protocol import ToolResultBlock
from dsh_llm.protocol import content_has_image

NO_OUTPUT: Final = "(no output)"
"""The output sent for a tool result without text (the wire needs some)."""
INCLUDE: Final = ("reasoning.encrypted_content",)
"""What every request asks to be included, so reasoning can be passed back."""
IMAGE_DETAIL: Final = "auto"
"""The ``detail`` of every ``input_image`` part (Ollama requires the field)."""
REPLAY_WIRE: Final = "openai-responses"
"""The ``wire`` of this family's ``ReplayEnvelope.response``; an envelope with
any other value is not read."""


def build_responses_request(
    options: GenerateOptions,
    *,
    profile: ResponsesProfile,
    max_output_tokens: int | None = None,
    attachments: AttachmentReader | None = None,
) -> dict[str, Any]:
    """The request body for ``options`` (see the module docstring).

    Args:
        options: The request.
        profile: The server's profile.
        max_output_tokens: The cap to send when ``options.max_tokens`` is
            ``None`` (a catalog default), or ``None`` for the server's default.
        attachments: Where image bytes are read.

    Raises:
        LlmError: ``UNSUPPORTED_OPTION``, ``UNSUPPORTED_REASONING_EFFORT``,
            ``UNSUPPORTED_CONTENT`` or ``MISSING_ATTACHMENT`` (see the module
            docstring).
    """
    _refuse(options, profile)
    body: dict[str, Any] = {"model": options.model}
    if options.system is not None:
        body["instructions"] = options.system
    body["input"] = build_input(
        options.messages, profile=profile, attachments=attachments
    )
    if options.tools:
        choice = options.tool_choice
        tools = options.tools
        named = choice is not None and choice not in TOOL_CHOICE_KEYWORDS
        if named and not profile.named_tool_choice:
            # The server enforces only "required": with the named tool alone
            # in the list, required forces exactly that one.
            tools = tuple(tool for tool in tools if tool.name == choice)
            choice = "required"
            named = False
        body["tools"] = [
            {
                "type": "function",
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters,
                "strict": False,
            }
            for tool in tools
        ]
        if choice is not None:
            body["tool_choice"] = (
                {"type": "function", "name": choice} if named else choice
            )
    effort = options.reasoning_effort
    if effort is not None:
        body["reasoning"] = (
            {"effort": effort}
            if effort == "none"
            else {"effort": effort, "summary": "auto"}
        )
    wanted = options.response_format
    if wanted is not None:
        body["text"] = {
            "format": {
                "type": "json_schema",
                "name": wanted.name,
                "schema": wanted.schema,
                "strict": wanted.strict,
            }
        }
    cap = options.max_tokens if options.max_tokens is not None else max_output_tokens
    if cap is not None:
        body["max_output_tokens"] = cap
    if options.temperature is not None:
        body["temperature"] = options.temperature
    if options.cache_key is not None:
        body["prompt_cache_key"] = options.cache_key
    body["store"] = False
    body["include"] = list(INCLUDE)
    body["stream"] = True
    return merge_extra_body(body, options)


def output_cap(
    options: GenerateOptions, max_output_tokens: int | None = None
) -> int | None:
    """The ``max_output_tokens`` the body for ``options`` sends (the request's
    cap, else ``max_output_tokens``, an ``extra_body`` value winning, as
    ``build_responses_request`` writes it), or ``None`` when it sends none or
    ``extra_body`` replaces it with something that is not a count."""
    cap = options.max_tokens if options.max_tokens is not None else max_output_tokens
    extra = options.extra_body or {}
    if "max_output_tokens" in extra:
        value = extra["max_output_tokens"]
        cap = value if type(value) is int and value > 0 else None
    return cap


def _refuse(options: GenerateOptions, profile: ResponsesProfile) -> None:
    provider = profile.provider
    refuse_cache_controls(
        options, provider=provider, wire="the Responses API", cache_key=True
    )
    if options.stop is not None:
        raise LlmError(
            f"The {provider} adapter cannot honour stop sequences: the Responses "
            "API has no stop parameter",
            ErrorCode.UNSUPPORTED_OPTION,
        )
    choice = options.tool_choice
    if (
        not profile.tool_choice
        and options.tools
        and choice is not None
        and choice != "auto"
    ):
        raise LlmError(
            f'{provider} ignores tool_choice, so tool_choice "{choice}" cannot be '
            "honoured; leave it unset or auto",
            ErrorCode.UNSUPPORTED_OPTION,
        )
    check_reasoning_effort(
        options.reasoning_effort, profile.reasoning_efforts, who=provider
    )


def build_input(
    messages: Sequence[Message],
    *,
    profile: ResponsesProfile,
    attachments: AttachmentReader | None = None,
) -> list[dict[str, Any]]:
    """The ``input`` items for ``messages`` (see the module docstring).

    Raises:
        LlmError: ``UNSUPPORTED_CONTENT`` for an image outside a user message
            or nested in a result inside a result (``dsh_llm.adapters.
            refuse_misplaced_images``), or in a tool result on a profile without
            ``tool_result_images``; ``MISSING_ATTACHMENT`` when
            ``attachments`` lacks an image's bytes.
    """
    refuse_misplaced_images(messages, provider=profile.provider)
    items: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "assistant":
            items.extend(_assistant_items(message))
        else:
            items.extend(_user_items(message, profile, attachments))
    return items


def _text_of(blocks: Iterable[ContentBlock]) -> str:
    return "".join(block.text for block in blocks if isinstance(block, TextBlock))


def _image_part(
    block: ImageBlock, attachments: AttachmentReader | None, provider: str
) -> dict[str, Any]:
    media_type, data = image_data(block, attachments, provider=provider)
    return {
        "type": "input_image",
        "image_url": f"data:{media_type};base64,{data}",
        "detail": IMAGE_DETAIL,
    }


def _parts(
    blocks: Iterable[ContentBlock],
    attachments: AttachmentReader | None,
    provider: str,
) -> list[dict[str, Any]]:
    """The non-empty text and the images of ``blocks`` as input parts, in
    block order."""
    parts: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, TextBlock) and block.text:
            parts.append({"type": "input_text", "text": block.text})
        elif isinstance(block, ImageBlock):
            parts.append(_image_part(block, attachments, provider))
    return parts


def _tool_output(
    block: ToolResultBlock,
    profile: ResponsesProfile,
    attachments: AttachmentReader | None,
) -> str | list[dict[str, Any]]:
    """A result's ``output``: its text, or its parts when it holds images."""
    if not content_has_image(block.content):
        return _text_of(block.content) or NO_OUTPUT
    provider = profile.provider
    if not profile.tool_result_images:
        raise LlmError(
            f"The {provider} adapter cannot send an image in a tool result: the "
            "server is not known to read image parts in function_call_output; "
            "send the image in a user message instead",
            ErrorCode.UNSUPPORTED_CONTENT,
        )
    return _parts(block.content, attachments, provider)


def _user_items(
    message: Message,
    profile: ResponsesProfile,
    attachments: AttachmentReader | None,
) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = [
        {
            "type": "function_call_output",
            "call_id": block.tool_call_id,
            "output": _tool_output(block, profile, attachments),
        }
        for block in message.content
        if isinstance(block, ToolResultBlock)
    ]
    parts = _parts(message.content, attachments, profile.provider)
    if parts or not items:
        parts = parts or [{"type": "input_text", "text": ""}]
        items.append({"type": "message", "role": message.role, "content": parts})
    return items


def replay_entries(message: Message) -> Sequence[Any] | None:
    """The per-block replay entries of an assistant message, when it carries
    this family's envelope with one entry per block; else ``None``."""
    return block_entries(message, REPLAY_WIRE)


def _entry(entries: Sequence[Any] | None, position: int, kind: str) -> dict[str, Any]:
    if entries is None:
        return {}
    entry = entries[position]
    if isinstance(entry, dict) and entry.get("type") == kind:
        return entry
    return {}


def _assistant_items(message: Message) -> list[dict[str, Any]]:
    entries = replay_entries(message)
    items: list[dict[str, Any]] = []
    for position, block in enumerate(message.content):
        if isinstance(block, ReasoningBlock):
            reasoning = _reasoning_item(_entry(entries, position, "reasoning"))
            if reasoning is not None:
                items.append(reasoning)
        elif isinstance(block, TextBlock):
            if block.text:
                _add_text(items, block, _entry(entries, position, "message"))
        elif isinstance(block, ServerToolCallBlock):
            # A hosted tool's item, as the server gave it (its result block
            # is the same item: sent once); another wire's is left out.
            data = block.data
            if isinstance(data, dict) and data.get("type") in HOSTED_TYPES:
                items.append(copy.deepcopy(data))
        elif isinstance(block, ToolCallBlock):
            entry = _entry(entries, position, "function_call")
            call: dict[str, Any] = {"type": "function_call"}
            if isinstance(entry.get("id"), str) and entry.get("call_id") == block.id:
                call["id"] = entry["id"]
            call.update(call_id=block.id, name=block.name, arguments=block.arguments)
            items.append(call)
    return items


def _add_text(
    items: list[dict[str, Any]], block: TextBlock, entry: dict[str, Any]
) -> None:
    """One text block as a message item; with its replay entry it is the output
    message as the server gave it (``id``, ``status``, ``phase``), and the parts
    of one message stay one item (an id is never sent twice)."""
    refusal = entry.get("part") == "refusal"
    mid = entry.get("id")
    if not isinstance(mid, str):
        part: dict[str, Any] = (
            {"type": "refusal", "refusal": block.text}
            if refusal
            else {"type": "output_text", "text": block.text}
        )
        items.append({"type": "message", "role": "assistant", "content": [part]})
        return
    annotations = entry.get("annotations")
    part = (
        {"type": "refusal", "refusal": block.text}
        if refusal
        else {
            "type": "output_text",
            "text": block.text,
            # The annotations as the server gave them (replay entry).
            "annotations": copy.deepcopy(annotations)
            if isinstance(annotations, list)
            else [],
        }
    )
    last = items[-1] if items else None
    if last is not None and last.get("type") == "message" and last.get("id") == mid:
        last["content"].append(part)
        return
    item: dict[str, Any] = {
        "type": "message",
        "id": mid,
        "role": "assistant",
        "status": "completed",
        "content": [part],
    }
    if isinstance(entry.get("phase"), str):
        item["phase"] = entry["phase"]
    items.append(item)


def _reasoning_item(entry: dict[str, Any]) -> dict[str, Any] | None:
    """The reasoning item to send back, or ``None`` when there is nothing to
    replay: without ``encrypted_content`` (or raw ``content``) a stateless
    server cannot resolve the id, and an empty item can end the model's
    reasoning early."""
    rid = entry.get("id")
    if not isinstance(rid, str):
        return None
    summary = entry.get("summary")
    item: dict[str, Any] = {
        "type": "reasoning",
        "id": rid,
        "summary": summary if isinstance(summary, list) else [],
    }
    encrypted = entry.get("encrypted_content")
    content = entry.get("content")
    if isinstance(encrypted, str) and encrypted:
        item["encrypted_content"] = encrypted
    elif isinstance(content, list) and content:
        item["content"] = content
    else:
        return None
    return item
