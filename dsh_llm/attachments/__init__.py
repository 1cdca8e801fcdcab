"""Attachments: the bytes behind ``ImageBlock`` references.

- ``MemoryAttachmentStore`` (default) and ``FolderAttachmentStore``: bytes keyed
  by ``sha256:<hex>``; ``require`` raises ``MISSING_ATTACHMENT``.
- ``image_block(file_or_bytes, store=...)``: an ``ImageBlock`` with its hash,
  media type, width and height read from the header; ``sniff_image`` alone.

An adapter that sends images reads them from ``adapter.attachments`` (see
``docs/structured-output.md`` and the adapter's docstring).
"""

from __future__ import annotations

from dsh_llm.attachments.images import ImageInfo, data_url, image_block, sniff_image
from dsh_llm.attachments.store import (
    ATTACHMENT_PREFIX,
    AttachmentStore,
    FolderAttachmentStore,
    MemoryAttachmentStore,
    attachment_id,
    require,
)

__all__ = [
    "ATTACHMENT_PREFIX",
    "AttachmentStore",
    "FolderAttachmentStore",
    "ImageInfo",
    "MemoryAttachmentStore",
    "attachment_id",
    "data_url",
    "image_block",
    "require",
    "sniff_image",
]
