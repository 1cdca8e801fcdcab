"""The README's Flask recipe under a real Flask dev server, in thinking mode
(issue 13): the client sees progress while the model is still reasoning, and a
client that hangs up during the reasoning makes the view close its request to
the model long before that stream would have ended.

The recipe is the README block itself (``tests/test_readme.py`` reads the same
block); the model is a ``LoopbackServer`` streaming reasoning for ~20 s; the
client is a raw socket that reads the first bytes and closes."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from werkzeug.serving import make_server

from dsh_llm.testing import LoopbackServer, Pause, Reply, sse_event

from .test_readme import block

STEPS = 400
PAUSE_S = 0.05
"""The model would reason for STEPS * PAUSE_S = 20 s."""


def _reasoning(piece: str) -> dict[str, Any]:
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "model": "deepseek-v4-flash",
        "choices": [
            {
                "index": 0,
                "delta": {"content": None, "reasoning_content": piece},
                "finish_reason": None,
            }
        ],
        "usage": None,
    }


@pytest.fixture
def model() -> Iterator[LoopbackServer]:
    with LoopbackServer() as server:
        yield server


@pytest.fixture
def app_url(model: LoopbackServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-flask")
    monkeypatch.setenv("DEEPSEEK_BASE_URL", model.url)
    namespace: dict[str, Any] = {"__name__": "readme_flask"}
    exec(compile(block("flask").code, "README.md (flask)", "exec"), namespace)
    server = make_server("127.0.0.1", 0, namespace["app"], threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(5)


def _ask(address: str) -> socket.socket:
    host, port = address.split(":")
    client = socket.create_connection((host, int(port)), timeout=10)
    form = b"question=why"
    client.sendall(
        b"POST /ask HTTP/1.1\r\nHost: %s\r\n"
        b"Content-Type: application/x-www-form-urlencoded\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (address.encode(), len(form), form)
    )
    return client


def _read_until(client: socket.socket, marker: bytes) -> bytes:
    data = b""
    while marker not in data:
        piece = client.recv(4096)
        assert piece, f"the view ended before sending {marker!r}: {data!r}"
        data += piece
    return data


def test_progress_shows_while_reasoning_and_a_hang_up_closes_the_upstream(
    model, app_url
):
    body = tuple(
        step
        for i in range(STEPS)
        for step in (sse_event(_reasoning(f"step{i} ")), Pause(seconds=PAUSE_S))
    )
    model.enqueue(Reply(body=body))
    client = _ask(app_url)
    try:
        # Progress while the model is still reasoning: its first thoughts
        # arrive (each write is one chunk of the chunked body).
        seen = _read_until(client, b"step2 ")
        assert seen.startswith(b"HTTP/1.1 200 OK")
        assert (
            seen.index(b"[thinking] ") < seen.index(b"step0 ") < seen.index(b"step1 ")
        )
        assert model.connections_opened == 1
        assert model.connections_closed == 0
    finally:
        hung_up = time.monotonic()
        client.close()
    # The upstream would stream for ~20 s more; it is closed long before.
    assert model.wait_until_idle(timeout=5.0), "the upstream request stayed open"
    elapsed = time.monotonic() - hung_up
    assert elapsed < 5.0, elapsed
