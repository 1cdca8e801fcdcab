"""The scripted loopback server (dsh_llm.testing.loopback), exercised with raw
sockets and http.client so its behaviour does not depend on the code it tests."""

from __future__ import annotations

import http.client
import json
import socket
import time

import pytest

from dsh_llm.testing import Cut
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Mark
from dsh_llm.testing import Pause
from dsh_llm.testing import Reply
from dsh_llm.testing import Stall
from dsh_llm.testing import sse_body
from dsh_llm.testing import sse_event
from dsh_llm.testing import sse_events


def _get(
    server: LoopbackServer, path: str = "/x", body: bytes = b""
) -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    conn.request("POST", path, body=body, headers={"X-Test": "yes"})
    response = conn.getresponse()
    response._test_conn = conn  # type: ignore[attr-defined]
    return response


def _finish(response: http.client.HTTPResponse) -> bytes:
    try:
        return response.read()
    finally:
        response.close()
        response._test_conn.close()  # type: ignore[attr-defined]


def _raw_exchange(server: LoopbackServer) -> bytes:
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        data = b""
        while True:
            piece = sock.recv(65536)
            if not piece:
                return data
            data += piece


@pytest.mark.parametrize("framing", ["chunked", "length", "close"])
def test_each_framing_delivers_the_body(framing):
    with LoopbackServer() as server:
        server.enqueue(Reply(body=(b"hello ", b"world"), framing=framing))
        response = _get(server)
        assert response.status == 200
        assert _finish(response) == b"hello world"
        assert server.wait_until_idle()


def test_close_framing_is_an_http_10_reply_without_length():
    with LoopbackServer() as server:
        server.enqueue(Reply(body=b"abc", framing="close"))
        raw = _raw_exchange(server)
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 200 OK")
    assert b"content-length" not in head.lower()
    assert body == b"abc"


def test_split_writes_become_one_http_chunk_each():
    with LoopbackServer() as server:
        server.enqueue(Reply(body=b"abcd", split=1))
        raw = _raw_exchange_until_terminator(server)
    assert raw.endswith(b"1\r\na\r\n1\r\nb\r\n1\r\nc\r\n1\r\nd\r\n0\r\n\r\n")


def _raw_exchange_until_terminator(server: LoopbackServer) -> bytes:
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        data = b""
        while not data.endswith(b"0\r\n\r\n"):
            data += sock.recv(65536)
        return data


def test_requests_are_recorded_with_lowercase_headers_and_body():
    with LoopbackServer() as server:
        server.enqueue(Reply(body=b"ok", framing="length"))
        _finish(_get(server, "/chat/completions", b'{"a": 1}'))
        (request,) = server.requests
    assert request.method == "POST"
    assert request.path == "/chat/completions"
    assert request.header("X-TEST") == "yes"
    assert request.header("missing") is None
    assert request.json() == {"a": 1}


def test_keep_alive_serves_several_requests_on_one_connection():
    with LoopbackServer() as server:
        server.enqueue(Reply(body=b"1", framing="length"), Reply(body=b"2"))
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        try:
            bodies = []
            for _ in range(2):
                conn.request("GET", "/")
                bodies.append(conn.getresponse().read())
        finally:
            conn.close()
        assert bodies == [b"1", b"2"]
        assert server.wait_until_idle()
        assert server.connections_opened == 1
        assert server.connections_closed == 1


def test_without_a_script_the_server_answers_500():
    with LoopbackServer() as server:
        response = _get(server)
        assert response.status == 500
        assert b"no scripted reply" in _finish(response)


def test_a_handler_chooses_replies_after_the_queue():
    with LoopbackServer(
        handler=lambda request: Reply(body=request.path.encode())
    ) as server:
        server.enqueue(Reply(body=b"queued"))
        assert _finish(_get(server, "/a")) == b"queued"
        assert _finish(_get(server, "/b")) == b"/b"


def test_pauses_and_marks_time_the_writes():
    with LoopbackServer() as server:
        server.enqueue(
            Reply(
                body=(
                    Mark(name="start"),
                    b"a",
                    Pause(seconds=0.05),
                    b"b",
                    Mark(name="end"),
                )
            )
        )
        _finish(_get(server))
        assert server.marks["end"] - server.marks["start"] >= 0.05


def test_write_delay_spaces_every_write():
    with LoopbackServer() as server:
        server.enqueue(Reply(body=b"abc", split=1, write_delay=0.02))
        start = time.perf_counter()
        assert _finish(_get(server)) == b"abc"
        assert time.perf_counter() - start >= 0.04


def test_a_stall_holds_the_connection_until_the_client_leaves():
    with LoopbackServer() as server:
        server.enqueue(Reply(body=(b"first", Stall())))
        response = _get(server)
        assert response.read1(5) == b"first"
        assert server.connections_closed == 0
        response.close()
        response._test_conn.close()  # type: ignore[attr-defined]
        assert server.wait_until_idle()


def test_a_timed_stall_then_continues():
    with LoopbackServer() as server:
        server.enqueue(Reply(body=(b"a", Stall(seconds=0.03), b"b")))
        assert _finish(_get(server)) == b"ab"


def test_stop_ends_a_stalled_reply():
    server = LoopbackServer().start()
    server.enqueue(Reply(body=(b"x", Stall())))
    response = _get(server)
    assert response.read1(1) == b"x"
    server.stop()
    assert server.connections_closed == 1
    response.close()
    response._test_conn.close()  # type: ignore[attr-defined]


def test_cut_with_fin_ends_the_body_early():
    with LoopbackServer() as server:
        server.enqueue(Reply(body=(b"part", Cut(), b"never")))
        response = _get(server)
        with pytest.raises(http.client.IncompleteRead):
            _finish(response)


def test_cut_with_reset_sends_rst():
    with LoopbackServer() as server:
        server.enqueue(Reply(body=(b"part", Pause(seconds=0.02), Cut(reset=True))))
        response = _get(server)
        assert response.read1(4) == b"part"
        time.sleep(0.1)
        with pytest.raises((ConnectionResetError, http.client.IncompleteRead)):
            _finish(response)


def test_status_and_headers_are_sent():
    with LoopbackServer() as server:
        server.enqueue(
            Reply(
                status=429,
                reason="Too Many Requests",
                headers={"retry-after": "2", "content-type": "application/json"},
                body=b"{}",
                framing="length",
            )
        )
        response = _get(server)
        assert response.status == 429
        assert response.getheader("retry-after") == "2"
        assert response.getheader("content-type") == "application/json"
        _finish(response)


def test_sse_helpers_build_events():
    assert sse_event({"a": "é"}) == 'data: {"a":"é"}\n\n'.encode()
    assert sse_event("[DONE]") == b"data: [DONE]\n\n"
    assert sse_events([{"a": 1}]) == (b'data: {"a":1}\n\n', b"data: [DONE]\n\n")
    assert sse_body([{"a": 1}], done=False) == b'data: {"a":1}\n\n'
    assert json.loads(sse_event([1, 2])[6:]) == [1, 2]
