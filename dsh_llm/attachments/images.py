"""Images: media type and size read from the bytes, and ``image_block``.

Contracts callers may rely on:

- ``sniff_image(data)`` reads the media type from the magic bytes (PNG, JPEG,
  GIF, WebP) and the width and height from the header (PNG ``IHDR``, GIF
  logical screen, WebP ``VP8``/``VP8L``/``VP8X``, JPEG's first start-of-frame
  marker); nothing is decoded and no dependency is needed. Anything else, or a
  header cut short, raises ``INVALID_ATTACHMENT``.
- ``image_block(source, store=...)`` makes an ``ImageBlock`` from bytes or a
  file path: ``attachment_id`` is ``sha256:<hex>`` of the bytes, ``name`` the
  file's base name (or the one given), and the bytes are put in ``store``
  (default: none, the caller stores them).
- ``data_url(media_type, data)``: the ``data:`` URL OpenAI-style APIs take.
"""

from __future__ import annotations

import base64
import os
import struct
from pathlib import Path

import attrs

from dsh_llm.attachments.store import AttachmentStore
from dsh_llm.attachments.store import attachment_id
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import ImageBlock
from dsh_llm.protocol import ImageRef

__all__ = ["ImageInfo", "data_url", "image_block", "sniff_image"]

_PNG = b"\x89PNG\r\n\x1a\n"
_SOF = frozenset(
    {*range(0xC0, 0xC4), *range(0xC5, 0xC8), *range(0xC9, 0xCC), *range(0xCD, 0xD0)}
)
_STANDALONE = frozenset({0x01, *range(0xD0, 0xDA)})


@attrs.frozen(kw_only=True)
class ImageInfo:
    """What the header of an image says."""

    media_type: str
    """``image/png``, ``image/jpeg``, ``image/gif`` or ``image/webp``."""
    width: int
    """Width in pixels."""
    height: int
    """Height in pixels."""


def _invalid(detail: str) -> LlmError:
    return LlmError(f"not a usable image: {detail}", ErrorCode.INVALID_ATTACHMENT)


def _png(data: bytes) -> tuple[int, int]:
    if len(data) < 24 or data[12:16] != b"IHDR":
        raise _invalid("PNG without an IHDR header")
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def _gif(data: bytes) -> tuple[int, int]:
    if len(data) < 10:
        raise _invalid("GIF header cut short")
    width, height = struct.unpack("<HH", data[6:10])
    return width, height


def _webp(data: bytes) -> tuple[int, int]:
    kind = data[12:16]
    if kind == b"VP8 " and len(data) >= 30 and data[23:26] == b"\x9d\x01\x2a":
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if kind == b"VP8L" and len(data) >= 25 and data[20] == 0x2F:
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if kind == b"VP8X" and len(data) >= 30:
        width = int.from_bytes(data[24:27], "little") + 1
        height = int.from_bytes(data[27:30], "little") + 1
        return width, height
    raise _invalid("WebP header not recognised or cut short")


def _jpeg(data: bytes) -> tuple[int, int]:
    i = 2
    while i + 4 <= len(data):
        if data[i] != 0xFF:
            raise _invalid("JPEG marker expected")
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in _STANDALONE:
            i += 2
            continue
        (length,) = struct.unpack(">H", data[i + 2 : i + 4])
        if marker in _SOF:
            if i + 9 > len(data):
                break
            height, width = struct.unpack(">HH", data[i + 5 : i + 9])
            return width, height
        if marker == 0xDA or length < 2:
            break
        i += 2 + length
    raise _invalid("JPEG without a start-of-frame header")


def sniff_image(data: bytes) -> ImageInfo:
    """Media type, width and height of ``data`` (see the module docstring).

    Raises:
        LlmError: ``INVALID_ATTACHMENT``.
    """
    if data.startswith(_PNG):
        media_type, size = "image/png", _png(data)
    elif data.startswith(b"\xff\xd8\xff"):
        media_type, size = "image/jpeg", _jpeg(data)
    elif data[:6] in (b"GIF87a", b"GIF89a"):
        media_type, size = "image/gif", _gif(data)
    elif data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        media_type, size = "image/webp", _webp(data)
    else:
        raise _invalid("not PNG, JPEG, GIF or WebP")
    width, height = size
    if width <= 0 or height <= 0:
        raise _invalid(f"{media_type} with a zero width or height")
    return ImageInfo(media_type=media_type, width=width, height=height)


def image_block(
    source: bytes | str | os.PathLike[str],
    *,
    store: AttachmentStore | None = None,
    name: str | None = None,
) -> ImageBlock:
    """An ``ImageBlock`` for ``source`` (bytes, or the path of a file).

    Raises:
        LlmError: ``INVALID_ATTACHMENT`` for bytes that are not a usable image
            (or empty).
        OSError: when the file cannot be read.
    """
    if isinstance(source, bytes | bytearray | memoryview):
        data = bytes(source)
    else:
        path = Path(source)
        data = path.read_bytes()
        name = path.name if name is None else name
    if not data:
        raise _invalid("no bytes")
    info = sniff_image(data)
    key = attachment_id(data) if store is None else store.put(data)
    return ImageBlock(
        attachment=ImageRef(
            attachment_id=key,
            media_type=info.media_type,
            bytes=len(data),
            width=info.width,
            height=info.height,
            name=name,
        )
    )


def data_url(media_type: str, data: bytes) -> str:
    """``data:<media type>;base64,<data>``."""
    return f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"
