"""Images on the chat-completions wire: ``image_url`` parts with data URLs.

An ``ImageBlock`` is a reference; the bytes come from the adapter's attachment
store (any object with ``get(attachment_id) -> bytes | None``, such as
``dsh_llm.attachments.MemoryAttachmentStore``). Contracts callers may rely on:

- ``image_part`` is ``{"type": "image_url", "image_url": {"url":
  "data:<media type>;base64,<bytes>"}}``.
- A store that is missing, or does not hold the attachment, raises
  ``MISSING_ATTACHMENT`` naming the attachment id; the builder runs before any
  I/O, so nothing is sent.
"""

from __future__ import annotations

from typing import Any

from dsh_llm.adapters._wire.extras import AttachmentReader
from dsh_llm.adapters._wire.extras import image_data
from dsh_llm.protocol import ImageBlock


def image_part(
    block: ImageBlock, store: AttachmentReader | None, *, provider: str
) -> dict[str, Any]:
    """The ``image_url`` content part for ``block``.

    Raises:
        LlmError: ``MISSING_ATTACHMENT`` when ``store`` is ``None`` or lacks the
            attachment.
    """
    media_type, encoded = image_data(block, store, provider=provider)
    return {
        "type": "image_url",
        "image_url": {"url": f"data:{media_type};base64,{encoded}"},
    }
