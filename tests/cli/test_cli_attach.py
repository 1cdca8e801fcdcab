"""``dsh-llm chat -a FILE_OR_URL``: images sent with the prompt, from a file or
fetched once with bounds, kept for a continued conversation, and refused with a
usage error when they cannot be used."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest

from dsh_llm.cli.attach import fetch_image
from dsh_llm.cli.usage import UsageError
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply
from dsh_llm.testing import Stall

from ..cli_run import clean_env
from ..cli_run import run_cli


def _png(width: int, height: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    rows = b"".join(b"\x00" + b"\x80\x40\x20" * width for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


PNG = _png(3, 2)


def _claude_text(text: str) -> Reply:
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-haiku-4-5",
                "content": [],
                "stop_reason": None,
                "usage": {"input_tokens": 3, "output_tokens": 1},
            },
        },
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "text", "text": ""},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": text},
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 2},
        },
        {"type": "message_stop"},
    ]
    return Reply(
        body=b"".join(
            f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events
        )
    )


def _claude(server: LoopbackServer, *args: str, cwd: Path) -> Any:
    env = clean_env(ANTHROPIC_API_KEY="sk-ant", ANTHROPIC_BASE_URL=server.url)
    return run_cli(
        "chat",
        "--provider",
        "anthropic",
        "--model",
        "claude-haiku-4-5",
        *args,
        env=env,
        cwd=cwd,
    )


IMAGE_BLOCK = {
    "type": "image",
    "source": {
        "type": "base64",
        "media_type": "image/png",
        "data": base64.b64encode(PNG).decode("ascii"),
    },
}


def test_a_file_is_sent_with_the_prompt_and_kept_for_the_next_turn(
    server, tmp_path, user_dir
):
    (tmp_path / "photo.png").write_bytes(PNG)
    server.enqueue(_claude_text("A tiny picture."), _claude_text("Orange."))

    first = _claude(server, "-a", "photo.png", "What is this?", cwd=tmp_path)

    assert first.returncode == 0, first.stderr
    content = server.requests[0].json()["messages"][0]["content"]
    assert content == [{"type": "text", "text": "What is this?"}, IMAGE_BLOCK]
    shown = run_cli("logs").stdout
    assert "What is this?\n[image photo.png: image/png 3x2]\n" in shown
    # The bytes are kept in the data directory, so -c sends them again.
    assert len(list((user_dir / "attachments").iterdir())) == 1
    then = run_cli(
        "chat",
        "-c",
        "Its colour?",
        env=clean_env(ANTHROPIC_API_KEY="sk-ant", ANTHROPIC_BASE_URL=server.url),
        cwd=tmp_path,
    )
    assert then.returncode == 0, then.stderr
    replayed = server.requests[1].json()["messages"][0]["content"]
    assert replayed == content


def test_a_url_is_fetched_once_and_sent(server, tmp_path):
    with LoopbackServer() as images:
        images.enqueue(
            Reply(headers={"content-type": "image/png"}, body=PNG, framing="length")
        )
        server.enqueue(_claude_text("Seen."))

        result = _claude(
            server, "-a", f"{images.url}/pics/dot.png", "Describe", cwd=tmp_path
        )

        assert result.returncode == 0, result.stderr
        (fetch,) = images.requests
        assert (fetch.method, fetch.path) == ("GET", "/pics/dot.png")
    content = server.requests[0].json()["messages"][0]["content"]
    assert content[1] == IMAGE_BLOCK
    assert "[image dot.png: image/png 3x2]" in run_cli("logs").stdout


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            "missing.png",
            "error: cannot read -a missing.png: No such file or directory\n",
        ),
        ("notes.txt", "error: -a notes.txt: not a usable image: "),
    ],
)
def test_a_file_that_is_not_an_image_is_a_usage_error(
    server, tmp_path, source, message
):
    (tmp_path / "notes.txt").write_text("just text", encoding="utf-8")

    result = _claude(server, "-a", source, "hi", cwd=tmp_path)

    assert result.returncode == 2
    assert result.stderr.startswith(message)
    assert server.requests == ()  # refused before anything was sent


def test_a_url_that_fails_is_a_usage_error_naming_it_without_credentials(
    server, tmp_path
):
    with LoopbackServer() as images:
        images.enqueue(
            Reply(status=404, reason="Not Found", body=b"", framing="length")
        )
        url = images.url.replace("http://", "http://user:hunter2@") + "/x.png"

        result = _claude(server, "-a", url, "hi", cwd=tmp_path)

    assert result.returncode == 2
    assert "the server answered HTTP 404" in result.stderr
    assert "hunter2" not in result.stderr
    assert server.requests == ()


def test_an_image_larger_than_the_cap_is_refused_by_its_length_or_its_bytes():
    with LoopbackServer() as images:
        big = PNG + b"\0" * 4096
        images.enqueue(Reply(body=big, framing="length"))  # announced
        images.enqueue(Reply(body=[big[:2000], big[2000:]]))  # chunked: found reading
        for _ in range(2):
            with pytest.raises(UsageError, match=r"is larger than"):
                fetch_image(images.url + "/big.png", max_bytes=1024)
        assert len(images.requests) == 2


def test_a_server_that_never_answers_is_given_up_on():
    with LoopbackServer() as images:
        images.enqueue(Reply(body=[PNG[:10], Stall()]))
        with pytest.raises(UsageError, match=r"cannot fetch it|no complete answer"):
            fetch_image(images.url + "/slow.png", timeout_s=1.0, read_timeout_s=0.5)
