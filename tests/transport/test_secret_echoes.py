"""Secrets a server or a URL echoes stay out of errors and logs (issue 13): a key
echoed in ``x-request-id``, and a key in the base URL's query string, which
urllib3's DEBUG line would otherwise print. Also: an informational response
(``103 Early Hints``) before the final one is never taken as the answer."""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Iterator

import pytest

from dsh_llm.adapters.openai_compat import OpenAICompatAdapter
from dsh_llm.errors import LlmError
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import create_user_message
from dsh_llm.runtime import LlmRuntime
from dsh_llm.serde import chunk_to_json
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply

KEY = "sk-echoed-0123456789abcdef"


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:
        yield srv


def _options() -> GenerateOptions:
    return GenerateOptions(
        provider="local", model="m", messages=(create_user_message("hi"),)
    )


@pytest.mark.parametrize("status", [401, 500])
def test_a_key_echoed_in_the_request_id_header_is_redacted(server, status):
    server.enqueue(
        Reply(
            status=status,
            headers=(("x-request-id", f"req-{KEY}"),),
            body=b'{"error":{"message":"no"}}',
        )
    )
    with OpenAICompatAdapter(f"{server.url}/v1", api_key=KEY) as adapter:
        with pytest.raises(LlmError) as caught:
            list(adapter.stream(_options()))
        error = caught.value
        assert error.request_id == "req-***"
        assert KEY not in repr(error)
        assert KEY not in str(error)
        server.enqueue(
            Reply(status=status, headers=(("x-request-id", KEY),), body=b"{}")
        )
        runtime = LlmRuntime()
        runtime.register_adapter(["local"], adapter)
        finish = list(runtime.stream(_options()))[-1]
    # The error JSON (what `dsh-llm chat --json` prints) carries it as requestId.
    assert KEY not in chunk_to_json(finish)
    assert '"requestId":"***"' in chunk_to_json(finish)


def test_a_key_in_the_base_url_query_never_reaches_urllib3s_debug_line(server, caplog):
    server.enqueue(Reply(status=500, body=b""))
    with (
        OpenAICompatAdapter(f"{server.url}/v1?api-key={KEY}&v=2") as adapter,
        caplog.at_level(logging.DEBUG, logger="urllib3"),
        pytest.raises(LlmError),
    ):
        list(adapter.stream(_options()))
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("urllib3")]
    assert any("/v1/chat/completions?api-key=***&v=***" in line for line in lines)
    assert not any(KEY in line for line in lines)


def _serve_once(reply: bytes) -> tuple[socket.socket, threading.Thread]:
    """A raw one-shot HTTP server: reads the request head, sends ``reply``."""
    listener = socket.create_server(("127.0.0.1", 0))

    def run() -> None:
        conn, _ = listener.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, _, rest = data.partition(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            while len(rest) < length:
                rest += conn.recv(65536)
            conn.sendall(reply)
            conn.shutdown(socket.SHUT_WR)
            conn.recv(1)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return listener, thread


def test_an_early_hints_response_is_skipped_for_the_final_one():
    body = (
        b'data: {"choices":[{"index":0,"delta":{"content":"hi"},'
        b'"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
    )
    reply = (
        b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n"
        b"HTTP/1.1 102 Processing\r\n\r\n"
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
        b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body)
    )
    listener, thread = _serve_once(reply)
    port = listener.getsockname()[1]
    try:
        with OpenAICompatAdapter(f"http://127.0.0.1:{port}/v1") as adapter:
            chunks = list(adapter.stream(_options()))
    finally:
        thread.join(5)
        listener.close()
    assert chunks[-1].reason.kind == "stop"  # type: ignore[union-attr]
