"""``dsh-llm chat -a FILE_OR_URL``: images sent with the prompt.

Contracts callers may rely on:

- ``read_image(source, store)`` makes an ``ImageBlock`` (``dsh_llm.attachments``)
  from a file, or from an ``http://``/``https://`` URL fetched once with a bounded
  request: ``MAX_IMAGE_BYTES`` at most (a larger ``content-length`` is refused
  before the body is read, a longer body as soon as it passes the cap); no read
  starts after ``FETCH_TIMEOUT_S`` and none waits longer than ``READ_TIMEOUT_S``,
  so a server that drips bytes is cut off; redirects are followed by
  ``requests`` (at most 30). The bytes go to ``store``, which the route's
  adapters read.
- What is not a usable image (PNG, JPEG, GIF, WebP), a file that cannot be read,
  a URL that cannot be fetched: ``UsageError`` naming the source (URL shown
  without credentials), before anything is sent to a model.
- ``image_store(keep)``: the images of a logged call are kept in the
  ``attachments`` folder of the user's data directory (``chat -c`` sends them
  again from there); otherwise, or when that folder cannot be made, in memory.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Final
from urllib.parse import urlsplit

from dsh_llm.attachments import AttachmentStore
from dsh_llm.attachments import FolderAttachmentStore
from dsh_llm.attachments import MemoryAttachmentStore
from dsh_llm.attachments import image_block
from dsh_llm.cli.usage import UsageError
from dsh_llm.cli.userdirs import data_dir
from dsh_llm.errors import LlmError
from dsh_llm.protocol import ImageBlock

MAX_IMAGE_BYTES: Final = 20 * 1024 * 1024
"""The largest image ``-a`` takes (20 MiB, the largest any built-in provider
accepts inline)."""
FETCH_TIMEOUT_S: Final = 30.0
"""How long fetching one image URL may take, from the request to the last read."""
READ_TIMEOUT_S: Final = 10.0
"""How long connecting, or any one read, may wait."""
ATTACHMENTS_DIR: Final = "attachments"
"""The folder of the data directory holding the images of logged calls."""

_CHUNK: Final = 64 * 1024


def image_store(keep: bool) -> AttachmentStore:
    """Where the images of this command go (see the module docstring)."""
    if keep:
        path = data_dir() / ATTACHMENTS_DIR
        try:
            return FolderAttachmentStore(path)
        except OSError as exc:
            print(
                f"dsh-llm: warning: images kept in memory only ({path}: "
                f"{exc.strerror or exc})",
                file=sys.stderr,
            )
    return MemoryAttachmentStore()


def _is_url(source: str) -> bool:
    return urlsplit(source).scheme.lower() in ("http", "https")


def read_image(source: str, store: AttachmentStore) -> ImageBlock:
    """The ``ImageBlock`` of ``-a SOURCE``, its bytes put in ``store``.

    Raises:
        UsageError: see the module docstring.
    """
    if _is_url(source):
        from dsh_llm.transport.call import redact_url

        shown = redact_url(source)
        data = fetch_image(source)
        name = os.path.basename(urlsplit(source).path) or None
    else:
        shown = source
        try:
            with open(source, "rb") as handle:
                data = handle.read(MAX_IMAGE_BYTES + 1)
        except OSError as exc:
            raise UsageError(
                f"cannot read -a {source}: {exc.strerror or exc}"
            ) from None
        if len(data) > MAX_IMAGE_BYTES:
            raise UsageError(f"-a {source} is larger than {_mib(MAX_IMAGE_BYTES)}")
        name = os.path.basename(source) or None
    try:
        return image_block(data, store=store, name=name)
    except LlmError as exc:  # INVALID_ATTACHMENT
        raise UsageError(f"-a {shown}: {exc.message}") from None
    except OSError as exc:
        raise UsageError(f"-a {shown}: cannot keep the image: {exc}") from None


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):g} MiB"


def fetch_image(
    url: str,
    *,
    max_bytes: int = MAX_IMAGE_BYTES,
    timeout_s: float = FETCH_TIMEOUT_S,
    read_timeout_s: float = READ_TIMEOUT_S,
) -> bytes:
    """The body at ``url``, fetched with the bounds of the module docstring.

    Raises:
        UsageError: for an error status, a body over ``max_bytes``, no answer
            within ``timeout_s``, or a failed connection.
    """
    import requests

    from dsh_llm.transport.attribution import attribution_headers
    from dsh_llm.transport.call import redact_url

    shown = redact_url(url)
    deadline = time.monotonic() + timeout_s

    def remaining() -> float:
        left = deadline - time.monotonic()
        if left <= 0:
            raise UsageError(f"-a {shown}: no complete answer within {timeout_s:g} s")
        return left

    try:
        with requests.get(
            url,
            headers={**attribution_headers(), "accept": "image/*"},
            stream=True,
            timeout=min(read_timeout_s, remaining()),
        ) as response:
            if not response.ok:
                raise UsageError(
                    f"-a {shown}: the server answered HTTP {response.status_code}"
                )
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > max_bytes:
                raise UsageError(f"-a {shown} is larger than {_mib(max_bytes)}")
            body = bytearray()
            for piece in response.iter_content(_CHUNK):
                body += piece
                if len(body) > max_bytes:
                    raise UsageError(f"-a {shown} is larger than {_mib(max_bytes)}")
                remaining()
            return bytes(body)
    except requests.RequestException as exc:
        raise UsageError(
            f"-a {shown}: cannot fetch it ({type(exc).__name__})"
        ) from None
    except OSError as exc:
        raise UsageError(
            f"-a {shown}: cannot fetch it ({exc.strerror or exc})"
        ) from None
