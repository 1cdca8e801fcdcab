"""The README's Flask recipe under a real werkzeug server.

- In thinking mode (issue 13): the client sees progress while the model is
  still reasoning, and a client that hangs up during the reasoning makes the
  view close its request to the model long before that stream would have ended
  (the model is a ``LoopbackServer`` streaming reasoning for ~20 s; the client a
  raw socket that reads the first bytes and closes).
- A call that fails before the first byte gets an HTTP error status (issue 29),
  and one that fails after the stream started ends it with an ``error`` event.

The recipe is the README block itself (``tests/test_readme.py`` reads the same
block)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from werkzeug.serving import make_server

from dsh_llm.testing import Cut
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Pause
from dsh_llm.testing import Reply
from dsh_llm.testing import sse_event

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
        assert b"content-type: text/event-stream" in seen.lower()
        opened = seen.index(b'event: block\ndata: {"type": "reasoning"}\n\n')
        assert opened < seen.index(b"step0 ") < seen.index(b"step1 ")
        assert model.connections_opened == 1
        assert model.connections_closed == 0
    finally:
        hung_up = time.monotonic()
        client.close()
    # The upstream would stream for ~20 s more; it is closed long before.
    assert model.wait_until_idle(timeout=5.0), "the upstream request stayed open"
    elapsed = time.monotonic() - hung_up
    assert elapsed < 5.0, elapsed


def _post(address: str) -> requests.Response:
    return requests.post(
        f"http://{address}/ask", data={"question": "why"}, stream=True, timeout=30
    )


@pytest.mark.parametrize(
    ("upstream", "status", "code"),
    [
        (
            Reply(status=500, reason="Server Error", body=b"", framing="length"),
            502,
            "SERVER",
        ),
        (
            Reply(
                status=429,
                reason="Too Many Requests",
                headers={"Retry-After": "7", "Content-Type": "application/json"},
                body=b'{"error": {"message": "slow down"}}',
                framing="length",
            ),
            429,
            "RATE_LIMIT",
        ),
        (
            Reply(status=401, reason="Unauthorized", body=b"", framing="length"),
            502,
            "AUTH",
        ),
    ],
    ids=["server-error", "rate-limit", "auth"],
)
def test_a_failure_before_the_first_byte_is_an_http_status(
    model, app_url, upstream, status, code
):
    model.enqueue(upstream)
    with _post(app_url) as answer:
        assert answer.status_code == status
        assert answer.headers["content-type"] == "application/json"
        assert answer.json() == {"error": code}
    assert len(model.requests) == 1  # the view did not try again


def _events(body: str) -> list[tuple[str, object]]:
    events = []
    for frame in body.split("\n\n"):
        if frame:
            name, data = frame.split("\n")
            events.append(
                (name.removeprefix("event: "), json.loads(data.removeprefix("data: ")))
            )
    return events


def test_a_failure_after_the_start_ends_the_stream_with_an_error_event(model, app_url):
    model.enqueue(
        Reply(
            body=(
                sse_event(_reasoning("thinking ")),
                sse_event(_reasoning("more")),
                Cut(),
            )
        )
    )
    with _post(app_url) as answer:
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/event-stream")
        body = answer.text  # the whole stream: the view ended it cleanly
    events = _events(body)
    assert events[:3] == [
        ("block", {"type": "reasoning"}),
        ("reasoning", {"text": "thinking "}),
        ("reasoning", {"text": "more"}),
    ]
    assert len(events) == 4
    name, data = events[3]
    assert name == "error"
    assert isinstance(data, dict)
    assert data["code"] in ("STREAM_CLOSED", "TRANSPORT")
    assert model.wait_until_idle(timeout=5.0)
