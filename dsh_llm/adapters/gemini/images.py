"""Images on the Gemini wire: ``inlineData`` parts with the bytes in base64.

An ``ImageBlock`` is a reference; the bytes of an image sent come from the
adapter's attachment store (``dsh_llm.adapters._wire.extras``), those of an
image the model returns go to it. Nothing here does I/O but the store's own
``put``. Contracts callers may rely on:

- ``inline_part`` is ``{"inlineData": {"mimeType": <media type>, "data":
  <base64>}}``, the part a user turn carries an image in.
- ``function_response_parts`` are the ``functionResponse.parts`` of a tool
  result holding images (Gemini 3's multimodal function responses), one
  ``inlineData`` part per image in block order; ``[]`` without images.
- Refused (``UNSUPPORTED_CONTENT``): images in a tool result for a model before
  Gemini 3 (``takes_tool_result_images``); misplaced images are the request
  builder's refusal (``dsh_llm.adapters.refuse_misplaced_images``). A missing
  store or attachment is ``MISSING_ATTACHMENT`` naming the attachment id.
- ``returned_image(inline, store=...)`` is the ``ImageBlock`` of an
  ``inlineData`` object a model returned: media type, width and height read
  from the bytes (``dsh_llm.attachments.sniff_image``), the bytes put in
  ``store`` (its id is the reference; without a store the id is still the
  bytes' ``sha256:`` id). Not base64 is ``MALFORMED_RESPONSE``; bytes that are
  no PNG, JPEG, GIF or WebP (audio, say) are ``UNSUPPORTED_CONTENT``.
- ``without_answer_images(options)``: the request as the shared image checks
  see it, without the images of assistant messages that a Gemini answer
  returned (they go back as the part they came in, from the replay state).
"""

from __future__ import annotations

import base64
from typing import Any
from typing import Final

import attrs

from dsh_llm.adapters._wire.extras import AttachmentReader
from dsh_llm.adapters._wire.extras import image_data
from dsh_llm.adapters.gemini.replay import replay_entries
from dsh_llm.attachments import AttachmentStore
from dsh_llm.attachments import image_block
from dsh_llm.attachments import sniff_image
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import ImageBlock
from dsh_llm.protocol import Message
from dsh_llm.protocol import ToolResultBlock
from dsh_llm.protocol import content_has_image

PRE_MULTIMODAL_RESULT_PREFIXES: Final = ("gemini-1.", "gemini-2.")
"""Model id prefixes of the families whose function responses are JSON only
(multimodal function responses came with Gemini 3)."""


def takes_tool_result_images(model_id: str) -> bool:
    """Whether ``model_id`` takes images inside a ``functionResponse`` (every
    model but the Gemini 1 and 2 families)."""
    return not model_id.startswith(PRE_MULTIMODAL_RESULT_PREFIXES)


def inline_part(
    block: ImageBlock, store: AttachmentReader | None, *, provider: str
) -> dict[str, Any]:
    """The ``inlineData`` part for ``block``.

    Raises:
        LlmError: ``MISSING_ATTACHMENT`` (naming ``provider``) when ``store`` is
            ``None`` or lacks the attachment.
    """
    media_type, encoded = image_data(block, store, provider=provider)
    return {"inlineData": {"mimeType": media_type, "data": encoded}}


def function_response_parts(
    result: ToolResultBlock,
    *,
    model_id: str,
    store: AttachmentReader | None,
    provider: str,
) -> list[dict[str, Any]]:
    """The ``functionResponse.parts`` for ``result``'s images, in block order.

    Raises:
        LlmError: ``UNSUPPORTED_CONTENT`` for images the model or the wire cannot
            take there (see the module docstring); ``MISSING_ATTACHMENT`` as
            ``inline_part``.
    """
    if not content_has_image(result.content):
        return []
    if not takes_tool_result_images(model_id):
        raise LlmError(
            f'{provider} model "{model_id}" takes no images in tool results '
            "(multimodal function responses need Gemini 3 or later); send the "
            "image in a user message instead",
            ErrorCode.UNSUPPORTED_CONTENT,
        )
    return [
        inline_part(block, store, provider=provider)
        for block in result.content
        if isinstance(block, ImageBlock)
    ]


def returned_image(
    inline: object, *, store: AttachmentStore | None, provider: str
) -> ImageBlock:
    """The ``ImageBlock`` of an ``inlineData`` object a model returned (see the
    module docstring); its bytes are put in ``store`` when there is one.

    Raises:
        LlmError: ``MALFORMED_RESPONSE`` for an object without a ``mimeType``
            string and base64 ``data``; ``UNSUPPORTED_CONTENT`` for bytes no
            image block can carry.
    """
    mime = inline.get("mimeType") if isinstance(inline, dict) else None
    encoded = inline.get("data") if isinstance(inline, dict) else None
    data = None
    if type(mime) is str and type(encoded) is str:
        # Proto JSON bytes: standard base64, though URL-safe and unpadded
        # forms are accepted too.
        text = encoded.replace("-", "+").replace("_", "/")
        try:
            data = base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
        except ValueError:
            data = None
    if type(mime) is not str or not data:
        raise LlmError(
            f"{provider} sent an inlineData part without a mimeType and base64 "
            "data in its stream",
            ErrorCode.MALFORMED_RESPONSE,
        )
    try:
        sniff_image(data)
    except LlmError:
        raise LlmError(
            f"{provider} returned {mime[:80]} content, which no block of the chunk "
            "protocol carries (an image block takes PNG, JPEG, GIF or WebP)",
            ErrorCode.UNSUPPORTED_CONTENT,
        ) from None
    return image_block(data, store=store)


def answer_image_part(entry: dict[str, Any] | None) -> dict[str, Any] | None:
    """The ``inlineData`` part a Gemini answer returned an image in, from the
    image block's replay ``entry`` (``None``: not from a Gemini answer)."""
    inline = entry.get("inlineData") if entry else None
    return {"inlineData": inline} if isinstance(inline, dict) else None


def without_answer_images(options: GenerateOptions) -> GenerateOptions:
    """``options`` without the top-level images of assistant messages that a
    Gemini answer returned (what the shared image checks should not refuse)."""
    messages: list[Message] = []
    changed = False
    for message in options.messages:
        if message.role == "assistant" and any(
            isinstance(block, ImageBlock) for block in message.content
        ):
            entries, _ = replay_entries(message)
            kept = tuple(
                block
                for block, entry in zip(message.content, entries, strict=True)
                if not (isinstance(block, ImageBlock) and answer_image_part(entry))
            )
            if len(kept) != len(message.content):
                message = attrs.evolve(message, content=kept)
                changed = True
        messages.append(message)
    return attrs.evolve(options, messages=tuple(messages)) if changed else options
