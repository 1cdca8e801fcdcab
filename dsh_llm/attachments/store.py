"""Attachment stores: where the bytes an ``ImageRef`` points at live.

An ``ImageBlock`` carries only a reference (``attachment_id`` is
``sha256:<64 hex>`` of the bytes, as the TypeScript harness writes it); an
adapter that sends images reads the bytes from a store. Contracts callers may
rely on:

- ``attachment_id(data)`` is the id of ``data``; a store keys bytes by it, so
  storing the same bytes twice is a no-op.
- ``MemoryAttachmentStore`` (the default) keeps bytes in a dict, thread-safe.
- ``FolderAttachmentStore(path)`` keeps one file per attachment, named by its
  hex digest, written atomically (a temporary file, then ``os.replace``); a
  file whose bytes no longer match its name is reported as
  ``INVALID_ATTACHMENT`` when read, never sent.
- ``require(store, id)`` returns the bytes or raises ``MISSING_ATTACHMENT``
  (the check adapters run before any I/O).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from pathlib import Path
from typing import Final
from typing import Protocol
from typing import runtime_checkable

from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError

__all__ = [
    "ATTACHMENT_PREFIX",
    "AttachmentStore",
    "FolderAttachmentStore",
    "MemoryAttachmentStore",
    "attachment_id",
    "require",
]

ATTACHMENT_PREFIX: Final = "sha256:"
"""What every attachment id starts with."""


def attachment_id(data: bytes) -> str:
    """``sha256:`` and the lowercase hex SHA-256 of ``data``."""
    return ATTACHMENT_PREFIX + hashlib.sha256(data).hexdigest()


@runtime_checkable
class AttachmentStore(Protocol):
    """Bytes keyed by their attachment id."""

    def put(self, data: bytes) -> str:
        """Store ``data``; return its attachment id."""
        ...

    def get(self, attachment_id: str) -> bytes | None:
        """The bytes of ``attachment_id``, or ``None`` when not stored."""
        ...


class MemoryAttachmentStore:
    """An in-memory store (lost with the process)."""

    def __init__(self) -> None:
        self._data: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def put(self, data: bytes) -> str:
        """Store ``data``; return its attachment id."""
        key = attachment_id(bytes(data))
        with self._lock:
            self._data.setdefault(key, bytes(data))
        return key

    def get(self, attachment_id: str) -> bytes | None:
        """The bytes of ``attachment_id``, or ``None``."""
        with self._lock:
            return self._data.get(attachment_id)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"MemoryAttachmentStore({len(self)} attachments)"


class FolderAttachmentStore:
    """A store in a folder on disk, one file per attachment (created when
    missing)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        """The folder."""
        self.path.mkdir(parents=True, exist_ok=True)

    def _file(self, key: str) -> Path | None:
        digest = key.removeprefix(ATTACHMENT_PREFIX)
        if not key.startswith(ATTACHMENT_PREFIX) or len(digest) != 64:
            return None
        if any(char not in "0123456789abcdef" for char in digest):
            return None
        return self.path / digest

    def put(self, data: bytes) -> str:
        """Store ``data`` (atomically); return its attachment id."""
        key = attachment_id(bytes(data))
        target = self._file(key)
        assert target is not None
        if target.exists():
            return key
        handle, temporary = tempfile.mkstemp(dir=self.path, prefix=".incoming-")
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(data)
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        return key

    def get(self, attachment_id: str) -> bytes | None:
        """The bytes of ``attachment_id``, or ``None``.

        Raises:
            LlmError: ``INVALID_ATTACHMENT`` when the file's bytes do not match
                the id (the folder was changed by something else).
        """
        target = self._file(attachment_id)
        if target is None:
            return None
        try:
            data = target.read_bytes()
        except FileNotFoundError:
            return None
        if hashlib.sha256(data).hexdigest() != target.name:
            raise LlmError(
                f"attachment {attachment_id[:15]}... in {self.path} does not match "
                "its id (the file was changed)",
                ErrorCode.INVALID_ATTACHMENT,
            )
        return data

    def __repr__(self) -> str:
        return f"FolderAttachmentStore({str(self.path)!r})"


def require(store: AttachmentStore | None, key: str) -> bytes:
    """The bytes of ``key`` in ``store``.

    Raises:
        LlmError: ``MISSING_ATTACHMENT`` when there is no store or it does not
            hold ``key``.
    """
    data = None if store is None else store.get(key)
    if data is None:
        where = "no attachment store is set" if store is None else f"{store!r}"
        raise LlmError(
            f"image attachment {key} is not available ({where}); put it in the "
            "store the adapter reads (adapter.attachments)",
            ErrorCode.MISSING_ATTACHMENT,
        )
    return data
