"""Images on the Gemini wire: ``inlineData`` parts with the bytes in base64.

An ``ImageBlock`` is a reference; the bytes come from the adapter's attachment
store (``dsh_llm.adapters.request_extras``). Pure: nothing here does I/O.
Contracts callers may rely on:

- ``inline_part`` is ``{"inlineData": {"mimeType": <media type>, "data":
  <base64>}}``, the part a user turn carries an image in.
- ``function_response_parts`` are the ``functionResponse.parts`` of a tool
  result holding images (Gemini 3's multimodal function responses), one
  ``inlineData`` part per image in block order; ``[]`` without images.
- Refused (``UNSUPPORTED_CONTENT``): images in a tool result for a model before
  Gemini 3 (``takes_tool_result_images``); misplaced images are the request
  builder's refusal (``request_extras.refuse_misplaced_images``). A missing
  store or attachment is ``MISSING_ATTACHMENT`` naming the attachment id.
"""

from __future__ import annotations

from typing import Any, Final

from dsh_llm.adapters.request_extras import AttachmentReader, image_data
from dsh_llm.errors import ErrorCode, LlmError
from dsh_llm.protocol import (
    ImageBlock,
    ToolResultBlock,
    content_has_image,
)

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
