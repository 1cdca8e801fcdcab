"""Attachments: the bytes behind ``ImageBlock`` references.

- ``MemoryAttachmentStore`` (default) and ``FolderAttachmentStore``: bytes keyed
  by ``sha256:<hex>``; ``require`` raises ``MISSING_ATTACHMENT``.
- ``image_block(file_or_bytes, store=...)``: an ``ImageBlock`` with its hash,
  media type, width and height read from the header; ``sniff_image`` alone.

An adapter that sends images reads them from ``adapter.attachments`` (see
``docs/structured-output.md`` and the adapter's docstring).
"""

from __future__ import annotations

from dsh_llm.attachments.images import ImageInfo
from dsh_llm.attachments.images import data_url
from dsh_llm.attachments.images import image_block
from dsh_llm.attachments.images import sniff_image
from dsh_llm.attachments.store import ATTACHMENT_PREFIX
from dsh_llm.attachments.store import AttachmentStore
from dsh_llm.attachments.store import FolderAttachmentStore
from dsh_llm.attachments.store import MemoryAttachmentStore
from dsh_llm.attachments.store import attachment_id
from dsh_llm.attachments.store import require

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
