"""The chat-completions wire's request side: how servers differ, the body, and
the one request of a call.

DeepSeek and the OpenAI-compatible servers send the same request with small
differences; those are a ``WireProfile``, so each family is a profile plus its
own config, never a copy of the wire code.

- ``WireProfile``: how a server differs: the request-side switches (reasoning
  fields, passback field, ``include_usage``, the output-cap spelling, fixed
  headers) and the stream's quirks the translator reads (usage convention,
  finish-reason spellings, extra usage and error places, no ``[DONE]``,
  ``reasoning_details`` kept for the replay).
- ``build_body`` and ``build_messages``: ``GenerateOptions`` to a JSON body in a
  fixed key order; optional fields are omitted, never ``null``.
- ``response_format_wire`` (JSON schema, or JSON mode where the server does not
  enforce one) and ``request_headers`` (``extra_headers`` beside the adapter's);
  ``cache_key`` is ``prompt_cache_key`` (where the profile takes one); a cache
  breakpoint and ``cached_content`` are ``UNSUPPORTED_OPTION`` (the wire caches
  prefixes by itself); ``extra_body`` is merged last, unchecked.
- ``chat_request``: ``POST <base_url>/chat/completions`` with the key as
  ``authorization: Bearer`` (none: no credentials, for local servers);
  ``session_id_value`` checks a session id that travels as a header.
- Key order, message ordering rules (tool replies right after the calls they
  answer) and what a chat message cannot carry: ``docs/local-servers.md``.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Mapping
from typing import Any
from typing import Final
from typing import Literal

import attrs

from dsh_llm.adapters._wire import extras as request_extras
from dsh_llm.adapters._wire.config import endpoint_url
from dsh_llm.adapters._wire.extras import AttachmentReader
from dsh_llm.adapters._wire.extras import merge_extra_body
from dsh_llm.adapters._wire.extras import refuse_cache_controls
from dsh_llm.adapters._wire.extras import refuse_misplaced_images
from dsh_llm.adapters._wire.extras import sampling_fields
from dsh_llm.adapters._wire.family import WireCall
from dsh_llm.adapters._wire.family import WireRequest
from dsh_llm.adapters.chat.images import image_part
from dsh_llm.credentials import Secret
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import TOOL_CHOICE_KEYWORDS
from dsh_llm.protocol import ContentBlock
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import ImageBlock
from dsh_llm.protocol import Message
from dsh_llm.protocol import ModelSource
from dsh_llm.protocol import ReasoningBlock
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.protocol import ToolResultBlock
from dsh_llm.protocol import ToolSchema
from dsh_llm.protocol import content_has_image
from dsh_llm.transport.session import BearerAuth
from dsh_llm.transport.session import NoAuth
from dsh_llm.transport.session import is_header_value
from dsh_llm.transport.session import stream_headers

CHAT_COMPLETIONS_PATH: Final = "/chat/completions"
"""Appended to an API root to reach the endpoint."""

CHAT_REPLAY_WIRE: Final = "chat-completions"
"""The ``response.wire`` of this wire's ``ReplayEnvelope``; state from another
wire is never sent back here."""

NO_OUTPUT: Final = "(no output)"
"""The content sent for a tool result without text (the wire needs some)."""


ResponseFormatStyle = Literal["json_schema", "json_object_schema", "json_object"]
"""The spellings of ``response_format`` on the chat-completions wire."""
RESPONSE_FORMAT_STYLES: Final = ("json_schema", "json_object_schema", "json_object")
"""Every ``ResponseFormatStyle``, in the order the docs list them."""


@attrs.frozen(kw_only=True)
class WireProfile:
    """What differs between servers that speak chat completions."""

    provider: str
    """Display name used in messages, e.g. ``"DeepSeek"``."""
    reasoning_fields: tuple[str, ...] = ("reasoning_content", "reasoning")
    """Delta fields read as reasoning, in order; the first non-empty one wins
    (DeepSeek, llama.cpp and old vLLM say ``reasoning_content``; vLLM since
    0.11 and Ollama ``/v1`` say ``reasoning``)."""
    reasoning_passback_field: str | None = "reasoning_content"
    """Assistant-message field that carries reasoning back, or ``None`` to never
    send it."""
    include_usage: bool = True
    """Send ``stream_options: {"include_usage": true}`` (some servers reject it)."""
    max_tokens_field: str = "max_tokens"
    """The output-cap field the server reads (OpenAI's reasoning models want
    ``max_completion_tokens``)."""
    response_format_style: ResponseFormatStyle = "json_schema"
    """How ``response_format`` is spelled (``RESPONSE_FORMAT_STYLES``):
    ``json_schema`` (OpenAI, vLLM, llama.cpp's own server, LM Studio...),
    ``json_object_schema`` (``{type: json_object, schema}``: llama-cpp-python's
    server, which turns the schema into a grammar), or ``json_object`` (JSON
    mode without a schema: DeepSeek; a strict format is refused)."""
    headers: Mapping[str, str] = attrs.field(factory=dict, hash=False)
    """Headers sent on every request besides the adapter's own (a server's
    ``OpenAICompatConfig.headers``: names as written, sent lower-cased)."""
    reasoning_left_out: bool = False
    """Whether ``completion_tokens`` leaves the reasoning tokens out (xAI); used
    only when ``total_tokens`` does not show the convention
    (``dsh_llm.adapters.chat.finish.map_usage``)."""
    finish_reasons: Mapping[str, str] = attrs.field(factory=dict, hash=False)
    """A server's own ``finish_reason`` values, read as the OpenAI value they
    stand for (Together's ``{"eos": "stop"}``); any other value is read as is."""
    usage_paths: tuple[tuple[str, ...], ...] = ()
    """Where else a chunk may carry a usage report besides ``usage``, as key
    paths into the chunk (Groq: ``("x_groq", "usage")``)."""
    error_paths: tuple[tuple[str, ...], ...] = ()
    """Where else a chunk may report an in-stream error besides ``error``, as
    key paths (Groq: ``("x_groq", "error")``, a string)."""
    end_at_eof: bool = False
    """Whether a body that ends after the finish reason without ``[DONE]`` is a
    whole answer (Perplexity sends no ``[DONE]``); a body that ends before any
    finish reason stays ``STREAM_CLOSED``."""
    reasoning_details: bool = False
    """Keep the ``reasoning_details`` entries a response streams (OpenRouter:
    reasoning text with its signature, encrypted reasoning) in the finish's
    replay state, and send them back on that assistant turn."""
    prompt_cache_key: bool = True
    """Whether ``GenerateOptions.cache_key`` is sent as ``prompt_cache_key``
    (OpenAI's spelling, which the server judges); when not, it is refused with
    ``UNSUPPORTED_OPTION`` (DeepSeek caches without a key)."""


# --- request ----------------------------------------------------------------------


def _text_of(blocks: Iterable[ContentBlock]) -> str:
    return "".join(block.text for block in blocks if isinstance(block, TextBlock))


def build_messages(
    options: GenerateOptions,
    *,
    profile: WireProfile,
    attachments: AttachmentReader | None = None,
) -> list[dict[str, Any]]:
    """The ``messages`` array for ``options`` (see the module docstring).

    Args:
        options: The request.
        profile: The server's profile.
        attachments: Where image bytes are read; ``None`` refuses images.

    Raises:
        LlmError: ``UNSUPPORTED_CONTENT`` for an image without ``attachments``
            or outside a user message's top level; ``MISSING_ATTACHMENT`` for
            an image the store does not hold.
    """
    wire: list[dict[str, Any]] = []
    if options.system is not None:
        wire.append({"role": "system", "content": options.system})
    if attachments is None:
        refuse_images(options, profile=profile)
    refuse_misplaced_images(options.messages, provider=profile.provider)
    for message in options.messages:
        if message.role == "system":
            wire.append({"role": "system", "content": _text_of(message.content)})
        elif message.role == "assistant":
            wire.append(_assistant_message(message, profile))
        else:
            wire.extend(
                _user_messages(
                    message,
                    answers_calls=_answers_calls(wire),
                    images=_image_parts(message, attachments, profile),
                )
            )
    return wire


def _image_parts(
    message: Message, attachments: AttachmentReader | None, profile: WireProfile
) -> list[dict[str, Any]] | None:
    """The content parts of a user message holding images (``None`` without)."""
    if attachments is None or not content_has_image(message.content):
        return None
    # Other roles never get here: build_messages refused misplaced images.
    if any(
        isinstance(block, ToolResultBlock) and content_has_image(block.content)
        for block in message.content
    ):
        raise LlmError(
            f"The {profile.provider} chat-completions adapter sends images in "
            "user messages only (not in tool results or other roles).",
            ErrorCode.UNSUPPORTED_CONTENT,
        )
    parts: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            parts.append({"type": "text", "text": block.text})
        elif isinstance(block, ImageBlock):
            parts.append(image_part(block, attachments, provider=profile.provider))
    return parts


def _answers_calls(wire: list[dict[str, Any]]) -> bool:
    """Whether the next messages reply to tool calls: the last one sent is an
    assistant turn with ``tool_calls`` or a ``tool`` reply to one."""
    if not wire:
        return False
    last = wire[-1]
    return last["role"] == "tool" or (
        last["role"] == "assistant" and "tool_calls" in last
    )


def refuse_images(options: GenerateOptions, *, profile: WireProfile) -> None:
    """Raise ``UNSUPPORTED_CONTENT`` when a message of ``options`` holds an image
    (the chat-completions adapters send text only).

    Raises:
        LlmError: ``UNSUPPORTED_CONTENT``.
    """
    if any(content_has_image(message.content) for message in options.messages):
        raise LlmError(
            f"The {profile.provider} chat-completions adapter does not support "
            "image content.",
            ErrorCode.UNSUPPORTED_CONTENT,
        )


def _assistant_message(message: Message, profile: WireProfile) -> dict[str, Any]:
    reasoning = "".join(
        block.text for block in message.content if isinstance(block, ReasoningBlock)
    )
    had_reasoning = any(isinstance(block, ReasoningBlock) for block in message.content)
    calls = [
        {
            "id": block.id,
            "type": "function",
            "function": {"name": block.name, "arguments": block.arguments},
        }
        for block in message.content
        if isinstance(block, ToolCallBlock)
    ]
    wire: dict[str, Any] = {"role": "assistant", "content": _text_of(message.content)}
    if profile.reasoning_passback_field is not None and (had_reasoning or calls):
        wire[profile.reasoning_passback_field] = reasoning
    if calls:
        wire["tool_calls"] = calls
    if profile.reasoning_details:
        details = replayed_reasoning_details(message)
        if details:
            wire["reasoning_details"] = details
    return wire


def replayed_reasoning_details(message: Message) -> list[dict[str, Any]]:
    """The ``reasoning_details`` entries kept in ``message``'s replay state (a
    chat-completions ``ReplayEnvelope``), ``[]`` without."""
    source = message.source
    if not isinstance(source, ModelSource) or source.replay_state is None:
        return []
    response = source.replay_state.response
    if not isinstance(response, dict) or response.get("wire") != CHAT_REPLAY_WIRE:
        return []
    details = response.get("reasoningDetails")
    if not isinstance(details, list):
        return []
    return [detail for detail in details if isinstance(detail, dict)]


def _user_messages(
    message: Message,
    *,
    answers_calls: bool,
    images: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    results = [block for block in message.content if isinstance(block, ToolResultBlock)]
    text = _text_of(message.content)
    replies = [
        {
            "role": "tool",
            "tool_call_id": result.tool_call_id,
            "content": _text_of(result.content) or NO_OUTPUT,
        }
        for result in results
    ]
    if not text and results and images is None:
        return replies
    user: dict[str, Any] = {
        "role": "user",
        "content": text if images is None else images,
    }
    # DeepSeek and OpenAI answer 400 when anything but tool replies follows an
    # assistant turn's tool calls: there, the replies go before the text.
    return [*replies, user] if answers_calls else [user, *replies]


def function_tools(tools: Iterable[ToolSchema]) -> list[dict[str, Any]]:
    """``tools`` as the wire's ``tools`` list: ``{"type": "function",
    "function": {name, description, parameters}}`` each (Ollama's ``/api/chat``
    takes the same shape)."""
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters,
            },
        }
        for tool in tools
    ]


def tool_choice_wire(choice: str | None) -> str | dict[str, Any] | None:
    """The wire ``tool_choice`` for ``GenerateOptions.tool_choice``."""
    if choice is None or choice in TOOL_CHOICE_KEYWORDS:
        return choice
    return {"type": "function", "function": {"name": choice}}


def build_body(
    options: GenerateOptions,
    *,
    profile: WireProfile,
    max_tokens: int | None,
    extra: Mapping[str, Any] | None = None,
    attachments: AttachmentReader | None = None,
) -> dict[str, Any]:
    """The request body for ``options`` (key order in the module docstring).

    Args:
        options: The request.
        profile: The server's profile.
        max_tokens: The output cap to send (the request's, or the model default),
            or ``None`` to omit it.
        extra: Provider keys placed after ``stream_options`` (in their order).
        attachments: Where image bytes are read (``build_messages``).

    Raises:
        LlmError: ``UNSUPPORTED_CONTENT``/``MISSING_ATTACHMENT`` for an image
            (see ``build_messages``); ``UNSUPPORTED_OPTION`` as
            ``response_format_wire``; ``UNSUPPORTED_OPTION`` for a caching
            control the profile does not take.
    """
    refuse_cache_controls(
        options,
        provider=profile.provider,
        wire="the chat-completions API",
        cache_key=profile.prompt_cache_key,
    )
    body: dict[str, Any] = {
        "model": options.model,
        "messages": build_messages(options, profile=profile, attachments=attachments),
        "stream": True,
    }
    if profile.include_usage:
        body["stream_options"] = {"include_usage": True}
    if extra:
        body.update(extra)
    if options.tools:
        body["tools"] = function_tools(options.tools)
        choice = tool_choice_wire(options.tool_choice)
        if choice is not None:
            body["tool_choice"] = choice
    body.update(
        sampling_fields(
            options,
            cap=max_tokens,
            cap_key=profile.max_tokens_field,
            stop_key="stop",
        )
    )
    if options.response_format is not None:
        body["response_format"] = response_format_wire(options, profile=profile)
    if options.cache_key is not None:
        body["prompt_cache_key"] = options.cache_key
    return merge_extra_body(body, options)


def response_format_wire(
    options: GenerateOptions, *, profile: WireProfile
) -> dict[str, Any] | None:
    """The wire ``response_format`` for ``options`` (``None`` when unset).

    Raises:
        LlmError: ``UNSUPPORTED_OPTION`` for a strict format on a profile that
            does not enforce schemas.
    """
    wanted = options.response_format
    if wanted is None:
        return None
    style = profile.response_format_style
    if style == "json_object_schema":
        return {"type": "json_object", "schema": wanted.schema}
    if style == "json_object":
        if wanted.strict:
            raise LlmError(
                f"{profile.provider} JSON mode does not enforce a schema; use "
                "ResponseFormat(strict=False) to ask for JSON output (the schema "
                "is not sent: describe it in the prompt, and check the answer "
                "with dsh_llm.structured.parse_json)",
                ErrorCode.UNSUPPORTED_OPTION,
            )
        return {"type": "json_object"}
    return {
        "type": "json_schema",
        "json_schema": {
            "name": wanted.name,
            "schema": wanted.schema,
            "strict": wanted.strict,
        },
    }


def request_headers(
    base: Mapping[str, str],
    options: GenerateOptions,
    *,
    profile: WireProfile,
    has_key: bool,
) -> dict[str, str]:
    """``base`` (the adapter's headers) plus ``options.extra_headers``
    (``dsh_llm.adapters._wire.extras.request_headers``; ``authorization`` is
    taken when the adapter sends a key).

    Raises:
        LlmError: ``UNSUPPORTED_OPTION`` when an extra header names one the
            adapter sets.
    """
    return request_extras.request_headers(
        base,
        options,
        provider=profile.provider,
        taken=("authorization",) if has_key else (),
    )


def session_id_value(options: GenerateOptions, *, profile: WireProfile) -> str:
    """``options.session_id``, checked to travel as a header value.

    Raises:
        LlmError: ``INVALID_REQUEST`` for an id that is not printable ASCII
            without leading or trailing whitespace.
    """
    session_id = options.session_id
    if session_id is None or not is_header_value(session_id):
        raise LlmError(
            f"{profile.provider} session_id must be printable ASCII without "
            "leading or trailing whitespace: it travels as a header",
            ErrorCode.INVALID_REQUEST,
        )
    return session_id


def chat_request(
    call: WireCall[Any, WireProfile],
    body: Mapping[str, Any],
    *,
    routing: Mapping[str, str],
    key: Secret | None,
) -> WireRequest:
    """One call's ``POST <base_url>/chat/completions``: ``body``, the streaming
    headers with the profile's fixed ones and this call's ``routing`` headers
    (then ``extra_headers``), and ``key`` as ``authorization: Bearer`` (``None``:
    no credentials).

    Raises:
        LlmError: ``UNSUPPORTED_OPTION`` as ``request_headers``.
    """
    profile = call.endpoint.profile
    base = stream_headers(extra={**profile.headers, **routing})
    return WireRequest(
        url=endpoint_url(call.endpoint.base_url, CHAT_COMPLETIONS_PATH),
        body=body,
        headers=request_headers(
            base, call.options, profile=profile, has_key=key is not None
        ),
        auth=NoAuth() if key is None else BearerAuth(key),
    )
