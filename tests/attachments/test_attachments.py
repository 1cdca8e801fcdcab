"""Attachment stores and image_block: ids are sha256 of the bytes, media type
and size come from the header, a folder store survives a new instance and
refuses a tampered file."""

from __future__ import annotations

import hashlib

import pytest

from dsh_llm.attachments import FolderAttachmentStore
from dsh_llm.attachments import MemoryAttachmentStore
from dsh_llm.attachments import attachment_id
from dsh_llm.attachments import image_block
from dsh_llm.attachments import require
from dsh_llm.attachments import sniff_image
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError

from .images import gif
from .images import jpeg
from .images import png
from .images import webp_extended
from .images import webp_lossless
from .images import webp_lossy


@pytest.mark.parametrize(
    ("data", "media_type"),
    [
        (png(3, 5), "image/png"),
        (gif(3, 5), "image/gif"),
        (jpeg(3, 5), "image/jpeg"),
        (webp_lossy(3, 5), "image/webp"),
        (webp_lossless(3, 5), "image/webp"),
        (webp_extended(3, 5), "image/webp"),
    ],
)
def test_media_type_and_size_come_from_the_header(data, media_type):
    info = sniff_image(data)
    assert (info.media_type, info.width, info.height) == (media_type, 3, 5)


def test_large_sizes_are_read_exactly():
    assert sniff_image(png(4000, 3000)).width == 4000
    assert sniff_image(webp_extended(16000, 9000)).height == 9000
    assert sniff_image(jpeg(65535, 1)).width == 65535


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"hello world",
        png(3, 5)[:20],
        jpeg(3, 5)[:8],
        b"RIFF\0\0\0\0WEBPVP8 ",
        gif(0, 5),
    ],
)
def test_bytes_that_are_not_a_usable_image_are_refused(data):
    with pytest.raises(LlmError) as caught:
        sniff_image(data)
    assert caught.value.code == ErrorCode.INVALID_ATTACHMENT


def test_image_block_from_bytes_and_from_a_file(tmp_path):
    data = png(2, 2)
    store = MemoryAttachmentStore()
    block = image_block(data, store=store)
    ref = block.attachment
    assert ref.attachment_id == "sha256:" + hashlib.sha256(data).hexdigest()
    assert (ref.media_type, ref.bytes, ref.width, ref.height) == (
        "image/png",
        len(data),
        2,
        2,
    )
    assert ref.name is None
    assert store.get(ref.attachment_id) == data
    path = tmp_path / "photo.png"
    path.write_bytes(data)
    from_file = image_block(path)
    assert from_file.attachment.name == "photo.png"
    assert from_file.attachment.attachment_id == ref.attachment_id


def test_a_folder_store_keeps_bytes_across_instances_and_refuses_tampering(tmp_path):
    data = gif(1, 1)
    key = FolderAttachmentStore(tmp_path / "a").put(data)
    again = FolderAttachmentStore(tmp_path / "a")
    assert again.get(key) == data
    assert again.put(data) == key
    assert again.get("sha256:" + "0" * 64) is None
    assert again.get("../../etc/passwd") is None
    (tmp_path / "a" / key.removeprefix("sha256:")).write_bytes(b"changed")
    with pytest.raises(LlmError) as caught:
        again.get(key)
    assert caught.value.code == ErrorCode.INVALID_ATTACHMENT


def test_require_names_the_missing_attachment():
    key = attachment_id(b"x")
    with pytest.raises(LlmError) as caught:
        require(MemoryAttachmentStore(), key)
    assert caught.value.code == ErrorCode.MISSING_ATTACHMENT
    assert key in caught.value.message
    with pytest.raises(LlmError):
        require(None, key)
