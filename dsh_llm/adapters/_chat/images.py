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

import base64
from typing import Any, Protocol

from dsh_llm.errors import ErrorCode, LlmError
from dsh_llm.protocol import ImageBlock

__all__ = ["AttachmentReader", "image_part"]


class AttachmentReader(Protocol):
    """Where an adapter reads image bytes (an attachment store)."""

    def get(self, attachment_id: str) -> bytes | None:
        """The bytes of ``attachment_id``, or ``None`` when not stored."""
        ...


def image_part(
    block: ImageBlock, store: AttachmentReader | None, *, provider: str
) -> dict[str, Any]:
    """The ``image_url`` content part for ``block``.

    Raises:
        LlmError: ``MISSING_ATTACHMENT`` when ``store`` is ``None`` or lacks the
            attachment.
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
    encoded = base64.b64encode(data).decode("ascii")
    return {
        "type": "image_url",
        "image_url": {"url": f"data:{ref.media_type};base64,{encoded}"},
    }
