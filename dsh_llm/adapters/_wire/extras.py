"""What every wire family does with the request fields beyond the conversation.

``GenerateOptions.extra_body``, ``extra_headers`` and image blocks mean the same
on every wire; only where they land differs. The rules live here, once:

- ``sampling_fields``: ``temperature``, the output cap and ``stop``, under the
  wire's names, an unset one omitted.
- ``merge_extra_body``: ``extra_body`` merged into a body last (unchecked; an
  object merges into the adapter's object of the same key, one level deep).
- ``request_headers``: ``extra_headers`` beside the adapter's own headers; a
  name the adapter or the transport sets is ``UNSUPPORTED_OPTION``, never
  silently replaced.
- ``AttachmentReader``, ``image_data`` and ``check_image_input``: image bytes
  from the adapter's attachment store (``MISSING_ATTACHMENT`` when absent) and
  the refusals (``UNSUPPORTED_CONTENT`` for a text-only model, an image
  outside a user message or nested in a result inside a result), all before
  any I/O.
- ``refuse_cache_controls``, ``breakpoint_ttl`` and ``check_breakpoints``: the
  prompt-caching controls (``Message.cache``, ``GenerateOptions.cache_key``,
  ``cached_content``) a wire does not take are ``UNSUPPORTED_OPTION`` before
  any I/O, never dropped (``docs/caching.md``).
- ``check_reasoning_effort``: an effort the model or wire does not offer is
  ``UNSUPPORTED_REASONING_EFFORT``, naming the efforts offered.
- Which field lands where, per adapter: ``docs/structured-output.md``.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any
from typing import Final
from typing import Protocol

from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import CacheBreakpoint
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import ImageBlock
from dsh_llm.protocol import Message
from dsh_llm.protocol import ToolResultBlock
from dsh_llm.protocol import content_has_image

RESERVED_HEADER_NAMES: Final = frozenset(
    {
        "user-agent",
        "accept",
        "accept-encoding",
        "content-type",
        "content-length",
        "transfer-encoding",
        "connection",
        "host",
    }
)
"""Header names ``GenerateOptions.extra_headers`` may never set (the transport
owns them; the user-agent carries the attribution every request keeps)."""

CACHE_TTLS: Final = ("5m", "1h")
"""The cache lifetimes Anthropic and Bedrock take on a breakpoint."""


class AttachmentReader(Protocol):
    """Where an adapter reads image bytes (an attachment store)."""

    def get(self, attachment_id: str) -> bytes | None:
        """The bytes of ``attachment_id``, or ``None`` when not stored."""
        ...


def sampling_fields(
    options: GenerateOptions, *, cap: int | None, cap_key: str, stop_key: str
) -> dict[str, Any]:
    """``options.temperature``, ``cap`` and ``options.stop`` (as a list), in that
    order, under the wire's names (the temperature is ``temperature`` on every
    wire); an unset one is omitted.

    Args:
        options: The request.
        cap: The output cap to send (the request's, else a default), or ``None``.
        cap_key: The wire's name for the cap (``num_predict``,
            ``maxOutputTokens``...).
        stop_key: The wire's name for the stop sequences.
    """
    fields: dict[str, Any] = {}
    if options.temperature is not None:
        fields["temperature"] = options.temperature
    if cap is not None:
        fields[cap_key] = cap
    if options.stop is not None:
        fields[stop_key] = list(options.stop)
    return fields


def merge_extra_body(body: dict[str, Any], options: GenerateOptions) -> dict[str, Any]:
    """``body`` with ``options.extra_body`` merged in last, unchecked; the same
    dict, returned for chaining.

    Its keys win. A mapping given for a key whose value in ``body`` is also a
    mapping is merged into it one level deep (its keys win there too), so
    ``{"generationConfig": {"topK": 3}}`` adds to the adapter's
    ``generationConfig`` instead of dropping the schema and limits it holds;
    any other value replaces the adapter's.
    """
    for key, value in (options.extra_body or {}).items():
        own = body.get(key)
        if isinstance(own, Mapping) and isinstance(value, Mapping):
            body[key] = {**own, **value}
        else:
            body[key] = value
    return body


def request_headers(
    base: Mapping[str, str],
    options: GenerateOptions,
    *,
    provider: str,
    taken: Iterable[str] = (),
) -> dict[str, str]:
    """``base`` (the adapter's headers) plus ``options.extra_headers``, names
    lower-cased.

    Args:
        base: The headers the adapter sends.
        options: The request.
        provider: The display name used in messages.
        taken: Further names the adapter sets per request (its key header:
            ``authorization``, ``x-api-key``, ``x-goog-api-key``...).

    Raises:
        LlmError: ``UNSUPPORTED_OPTION`` naming the first extra header that is
            one the adapter sets (``RESERVED_HEADER_NAMES``, a name in ``base``
            or in ``taken``); the value is never in the message.
    """
    headers = dict(base)
    if not options.extra_headers:
        return headers
    reserved = (
        {name.lower() for name in base}
        | {name.lower() for name in taken}
        | RESERVED_HEADER_NAMES
    )
    for name, value in options.extra_headers.items():
        lower = name.lower()
        if lower in reserved:
            raise LlmError(
                f'{provider} adapter sets the "{lower}" header itself; '
                "extra_headers cannot replace it",
                ErrorCode.UNSUPPORTED_OPTION,
            )
        headers[lower] = value
    return headers


def has_images(options: GenerateOptions) -> bool:
    """Whether any message of ``options`` holds an image (also inside a tool
    result)."""
    return any(content_has_image(message.content) for message in options.messages)


def refuse_misplaced_images(messages: Iterable[Message], *, provider: str) -> None:
    """Refuse an image where no wire has a place for one: in a system or
    assistant message, or in a tool result nested inside a tool result.
    Dropping it would lose the user's content.

    Raises:
        LlmError: ``UNSUPPORTED_CONTENT`` naming the place.
    """
    for message in messages:
        if not content_has_image(message.content):
            continue
        if message.role != "user":
            raise LlmError(
                f"{provider} takes images in user messages and tool results "
                f"only, not in the {message.role} message; move the image to a "
                "user message",
                ErrorCode.UNSUPPORTED_CONTENT,
            )
        if any(_nests_an_image(block) for block in message.content):
            raise LlmError(
                f"{provider} cannot send an image in a tool result nested inside "
                "a tool result; put the image in the outer result",
                ErrorCode.UNSUPPORTED_CONTENT,
            )


def _nests_an_image(block: object) -> bool:
    return isinstance(block, ToolResultBlock) and any(
        isinstance(inner, ToolResultBlock) and content_has_image(inner.content)
        for inner in block.content
    )


def check_image_input(
    options: GenerateOptions,
    *,
    provider: str,
    modalities: tuple[str, ...] | None,
    store: AttachmentReader | None,
) -> None:
    """Refuse a request's images before any I/O unless the model takes them and
    a store can supply them; a request without images always passes.

    Args:
        options: The request.
        provider: The display name used in messages.
        modalities: The model's catalog input modalities (``None``: the model
            is not in the catalog, treated as text only).
        store: The adapter's attachment store.

    Raises:
        LlmError: ``UNSUPPORTED_CONTENT`` for an image outside a user message
            (``refuse_misplaced_images``) or when ``modalities`` lacks
            ``image``; ``MISSING_ATTACHMENT`` when ``store`` is ``None``.
    """
    if not has_images(options):
        return
    refuse_misplaced_images(options.messages, provider=provider)
    if modalities is None or "image" not in modalities:
        raise LlmError(
            f'{provider} model "{options.model}" is text only in the adapter\'s '
            'catalog; list it with inputModalities ["text", "image"] to send '
            "images",
            ErrorCode.UNSUPPORTED_CONTENT,
        )
    if store is None:
        raise LlmError(
            f"{provider} cannot send the request's images: no attachment store "
            "is set (set adapter.attachments to the store holding them)",
            ErrorCode.MISSING_ATTACHMENT,
        )


def image_data(
    block: ImageBlock, store: AttachmentReader | None, *, provider: str
) -> tuple[str, str]:
    """``(media type, base64 of the bytes)`` of ``block`` read from ``store``.

    Raises:
        LlmError: ``MISSING_ATTACHMENT`` naming the attachment id when ``store``
            is ``None`` or lacks it.
    """
    ref = block.attachment
    data = None if store is None else store.get(ref.attachment_id)
    if data is None:
        where = (
            "no attachment store is set" if store is None else "it is not in the store"
        )
        raise LlmError(
            f"{provider} cannot send image {ref.attachment_id}: {where} (set "
            "adapter.attachments to the store holding it)",
            ErrorCode.MISSING_ATTACHMENT,
        )
    return ref.media_type, base64.b64encode(data).decode("ascii")


def refuse_cache_controls(
    options: GenerateOptions,
    *,
    provider: str,
    wire: str,
    breakpoints: bool = False,
    cache_key: bool = False,
    cached_content: bool = False,
) -> None:
    """Refuse the caching controls of ``options`` that the wire does not take
    (each flag says the wire takes that control).

    Raises:
        LlmError: ``UNSUPPORTED_OPTION`` naming the control and ``wire`` (the
            wire in words, e.g. ``"the Gemini API"``).
    """
    if not breakpoints:
        for position, message in enumerate(options.messages):
            if message.cache is not None:
                raise LlmError(
                    f"{provider} cannot honour the cache breakpoint of message "
                    f"{position}: {wire} has no cache breakpoints",
                    ErrorCode.UNSUPPORTED_OPTION,
                )
    if not cache_key and options.cache_key is not None:
        raise LlmError(
            f"{provider} cannot honour cache_key: {wire} has no prompt-cache key",
            ErrorCode.UNSUPPORTED_OPTION,
        )
    if not cached_content and options.cached_content is not None:
        raise LlmError(
            f"{provider} cannot honour cached_content: {wire} has no cached-content "
            "reference",
            ErrorCode.UNSUPPORTED_OPTION,
        )


def check_reasoning_effort(
    effort: str | None, offered: Sequence[str], *, who: str
) -> None:
    """Refuse a reasoning effort that is not one of ``offered`` (``None``, the
    default effort, passes).

    Raises:
        LlmError: ``UNSUPPORTED_REASONING_EFFORT``:
            ``<who> does not support reasoning effort "<effort>" (offered: ...)``.
    """
    if effort is not None and effort not in offered:
        raise LlmError(
            f'{who} does not support reasoning effort "{effort}" '
            f"(offered: {', '.join(offered)})",
            ErrorCode.UNSUPPORTED_REASONING_EFFORT,
        )


def check_breakpoints(options: GenerateOptions, *, provider: str, most: int) -> None:
    """Refuse more than ``most`` cache breakpoints in one request.

    Raises:
        LlmError: ``UNSUPPORTED_OPTION`` saying how many were set.
    """
    count = sum(message.cache is not None for message in options.messages)
    if count > most:
        raise LlmError(
            f"{provider} takes at most {most} cache breakpoints in one request, "
            f"got {count}",
            ErrorCode.UNSUPPORTED_OPTION,
        )


def breakpoint_ttl(
    breakpoint: CacheBreakpoint, *, provider: str, position: int
) -> str | None:
    """The breakpoint's ``ttl`` when it is one of ``CACHE_TTLS`` (``None``
    stays ``None``: the provider's default).

    Raises:
        LlmError: ``UNSUPPORTED_OPTION`` for another lifetime.
    """
    ttl = breakpoint.ttl
    if ttl is not None and ttl not in CACHE_TTLS:
        raise LlmError(
            f"{provider} cannot honour the cache lifetime {ttl!r} of message "
            f"{position}: it takes {' or '.join(CACHE_TTLS)}",
            ErrorCode.UNSUPPORTED_OPTION,
        )
    return ttl
