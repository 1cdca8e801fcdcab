"""A server that closes every connection that carried a stream, while it
advertises keep-alive (llama.cpp's ``llama-server`` does: ``Keep-Alive:
timeout=5, max=100`` on every answer, then a close after each streamed body),
against ``StreamingCall`` and the adapters that use it (issue 26, item 19).

The close is scripted so that the outcome never depends on when a packet
arrives: either the server waits for the next request on the connection and
closes without answering it (the request crossed the close, which is what
happens when the client reuses the connection before the server's FIN reached
it), or it closes right after the body and the test reads the end of the body
only once the server has closed.
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import threading
from collections import deque
from collections.abc import Callable
from collections.abc import Iterator
from typing import Any
from typing import Literal

import pytest
import requests

from dsh_llm import GenerateOptions
from dsh_llm import ToolSchema
from dsh_llm.adapters.openai_compat import OpenAICompatAdapter
from dsh_llm.assembler import collect
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.signal import AbortController
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply
from dsh_llm.testing import record
from dsh_llm.tools import run_tools
from dsh_llm.transport.call import StreamingCall
from dsh_llm.transport.call import _at_eof
from dsh_llm.transport.call import _readable
from dsh_llm.transport.session import NoAuth
from dsh_llm.transport.session import SocketSlot
from dsh_llm.transport.session import capture_socket
from dsh_llm.transport.session import closes_after_stream
from dsh_llm.transport.session import create_session
from dsh_llm.transport.session import note_closes_after_stream
from dsh_llm.transport.session import stream_headers
from dsh_llm.validator import validate_stream

Action = Literal["answer", "drop", "reset", "partial", "hold"]
"""What the server does with one request: answer it (a chunked SSE stream),
close the connection without answering (``drop``: FIN, ``reset``: RST), send
half a status line then close (``partial``), or never answer (``hold``)."""
After = Literal["keep", "close", "close-on-next", "junk"]
"""What the server does with a connection after an answered stream: keep it,
close it at once (``ClosingServer.closed`` is set once it did), close it
without answering when the next request on it arrives, or keep it after
sending bytes no request asked for (``ClosingServer.closed`` is set then)."""

Body = Callable[[int], list[dict[str, Any]]]
"""The chat-completion chunks of the n-th answered request (0-based)."""


def _text_stream(n: int) -> list[dict[str, Any]]:
    return [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
        {"choices": [{"index": 0, "delta": {"content": f"answer {n}"}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {
            "choices": [],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
        },
    ]


class ClosingServer:
    """A chat-completions server on 127.0.0.1 that says keep-alive and closes
    (see the module docstring). ``actions`` are taken one per request, then
    ``answer``; every connection is closed after a stream as ``after`` says."""

    def __init__(
        self,
        *,
        after: After = "close-on-next",
        server_header: str | None = None,
        actions: tuple[Action, ...] = (),
        body: Body = _text_stream,
    ) -> None:
        self.after = after
        self.server_header = server_header
        self.body = body
        self._actions: deque[Action] = deque(actions)
        self._lock = threading.Condition()
        self.received = 0
        """Requests received."""
        self.answered = 0
        """Requests answered with a whole stream."""
        self.dropped = 0
        """Requests received on a connection then closed without any answer."""
        self.connections = 0
        """Connections accepted."""
        self.request_bodies: list[dict[str, Any]] = []
        self.closed = threading.Event()
        """Set when a connection was closed right after its stream."""
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)
        self._stopping = threading.Event()
        self._sockets: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept, daemon=True)
        self._acceptor.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}/v1"

    def wait_for_requests(self, count: int, timeout: float = 10.0) -> bool:
        with self._lock:
            return self._lock.wait_for(lambda: self.received >= count, timeout)

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._acceptor.join()
        for thread in self._threads:
            thread.join()
        self._listener.close()

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                sock, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self.connections += 1
                self._sockets.add(sock)
            thread = threading.Thread(target=self._serve, args=(sock,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, sock: socket.socket) -> None:
        buffer = b""
        answered_here = False
        try:
            while True:
                request, buffer = _read_request(sock, buffer)
                if request is None:
                    return
                with self._lock:
                    self.received += 1
                    self.request_bodies.append(request)
                    action = self._actions.popleft() if self._actions else "answer"
                    self._lock.notify_all()
                if answered_here and self.after == "close-on-next":
                    action = "drop"
                if action in ("drop", "reset"):
                    with self._lock:
                        self.dropped += 1
                    if action == "reset":
                        sock.setsockopt(
                            socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                        )
                    return
                if action == "partial":
                    sock.sendall(b"HTTP/1.1 2")
                    return
                if action == "hold":
                    while not self._stopping.is_set() and sock.recv(1):
                        pass
                    return
                self._answer(sock)
                answered_here = True
                if self.after == "junk":
                    sock.sendall(b"junk")
                    self.closed.set()
                if self.after == "close":
                    sock.shutdown(socket.SHUT_WR)
                    self.closed.set()
                    while sock.recv(65536):
                        pass
                    return
        except OSError:
            return
        finally:
            with contextlib.suppress(OSError):
                sock.close()
            with self._lock:
                self._sockets.discard(sock)

    def _answer(self, sock: socket.socket) -> None:
        with self._lock:
            number = self.answered
            self.answered += 1
        events = [*self.body(number), "[DONE]"]
        head = [
            "HTTP/1.1 200 OK",
            "Content-Type: text/event-stream",
            "Transfer-Encoding: chunked",
            "Keep-Alive: timeout=5, max=100",
        ]
        if self.server_header is not None:
            head.insert(1, f"Server: {self.server_header}")
        out = ("\r\n".join(head) + "\r\n\r\n").encode()
        for event in events:
            data = event if isinstance(event, str) else json.dumps(event)
            piece = f"data: {data}\n\n".encode()
            out += b"%x\r\n%s\r\n" % (len(piece), piece)
        out += b"0\r\n\r\n"
        sock.sendall(out)


def _read_request(
    sock: socket.socket, buffer: bytes
) -> tuple[dict[str, Any] | None, bytes]:
    while b"\r\n\r\n" not in buffer:
        data = sock.recv(65536)
        if not data:
            return None, b""
        buffer += data
    head, _, rest = buffer.partition(b"\r\n\r\n")
    length = 0
    for line in head.decode("latin-1").split("\r\n")[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    while len(rest) < length:
        data = sock.recv(65536)
        if not data:
            return None, b""
        rest += data
    return json.loads(rest[:length] or b"{}"), rest[length:]


@pytest.fixture
def closing() -> Iterator[Callable[..., ClosingServer]]:
    servers: list[ClosingServer] = []

    def start(**kwargs: Any) -> ClosingServer:
        server = ClosingServer(**kwargs)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def _options(n: int = 0, **fields: Any) -> GenerateOptions:
    return GenerateOptions.from_prompt("smollm2", f"request {n}", **fields)


def _back_to_back(adapter: OpenAICompatAdapter, count: int) -> list[str]:
    texts = []
    for n in range(count):
        chunks = list(validate_stream(adapter.stream(_options(n)), strict=True))
        reply = collect(chunks)
        assert reply.finish.kind == "stop"
        texts.append(reply.text)
    return texts


@pytest.mark.parametrize("close", ["drop", "reset"])
def test_back_to_back_requests_survive_a_server_that_closes_after_each_stream(
    closing, close
):
    if close == "reset":
        server = closing(after="keep", actions=("answer", *("reset", "answer") * 15))
    else:
        server = closing()
    with OpenAICompatAdapter(server.url) as adapter:
        texts = _back_to_back(adapter, 16)
    assert texts == [f"answer {n}" for n in range(16)]
    # Each request after the first crossed the close of its pooled connection
    # and was sent once more, on a new connection, exactly once.
    assert server.answered == 16
    assert server.dropped == 15
    assert server.received == 31
    assert [body["messages"][0]["content"] for body in server.request_bodies] == [
        "request 0",
        *(f"request {n}" for n in range(1, 16) for _ in (0, 1)),
    ]


def test_a_llama_cpp_server_header_keeps_its_connections_out_of_the_pool(closing):
    server = closing(server_header="llama.cpp")
    with OpenAICompatAdapter(server.url) as adapter:
        texts = _back_to_back(adapter, 16)
    assert texts == [f"answer {n}" for n in range(16)]
    assert server.dropped == 0
    assert server.connections == 16


def test_a_close_seen_at_the_end_of_a_stream_keeps_the_origin_out_of_the_pool(
    closing,
):
    # The first connection's close is known when its body ends; later servers
    # would close on the next request, which never comes on the same connection.
    server = closing(after="close")
    with OpenAICompatAdapter(server.url) as adapter:
        stream = iter(validate_stream(adapter.stream(_options()), strict=True))
        first = [next(stream)]
        assert server.closed.wait(10)
        reply = collect([*first, *stream])
        assert reply.text == "answer 0"
        server.after = "close-on-next"
        texts = _back_to_back(adapter, 15)
    assert texts == [f"answer {n}" for n in range(1, 16)]
    assert server.dropped == 0
    assert server.connections == 16


def test_bytes_after_a_stream_keep_that_connection_out_of_the_pool_only(
    closing, session
):
    server = closing(after="junk")
    for _ in range(2):
        with _call(session, server.url, signal=None) as call:
            call.open()
            assert server.closed.wait(10)
            for _ in call.chunks():
                pass
            call.finish()
    # Not a close: the server is not taken for one that closes after streams.
    assert not closes_after_stream(session, f"{server.url}/chat/completions")
    assert server.connections == 2
    assert server.dropped == 0


def test_only_an_end_of_stream_or_a_reset_counts_as_a_close():
    # What the end of a body may find on the connection, on a real socket pair.
    for send, closed in ((b"x", False), (b"", True)):
        ours, theirs = socket.socketpair()
        with ours, theirs:
            if send:
                theirs.sendall(send)
            else:
                theirs.close()
            assert _readable(ours)
            assert _at_eof(ours) is closed
    ours, theirs = socket.socketpair()
    with ours, theirs:
        assert not _readable(ours)
        ours.setblocking(False)
        assert _at_eof(ours) is False


def test_a_close_seen_at_the_end_of_a_stream_is_remembered(closing, session):
    server = closing(after="close")
    with _call(session, server.url, signal=None) as call:
        call.open()
        assert server.closed.wait(10)
        for _ in call.chunks():
            pass
        call.finish()
    assert closes_after_stream(session, f"{server.url}/chat/completions")


def test_a_tool_loop_of_several_steps_survives_the_closes(closing):
    def steps(n: int) -> list[dict[str, Any]]:
        if n == 3:
            return _text_stream(n)
        call = {
            "index": 0,
            "id": f"call_{n}",
            "type": "function",
            "function": {"name": "add", "arguments": json.dumps({"a": n, "b": 1})},
        }
        return [
            {"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        ]

    server = closing(body=steps)
    tool = ToolSchema(
        name="add",
        description="a + b",
        parameters={
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        },
    )
    with OpenAICompatAdapter(server.url) as adapter:
        loop = run_tools(
            adapter,
            _options(tools=(tool,)),
            tools={"add": lambda a, b: a + b},
        )
        result = loop.run()
    assert result.stop_reason == "finished"
    assert result.steps == 4
    assert result.text == "answer 3"
    tool_results = [
        message["content"]
        for message in server.request_bodies[-1]["messages"]
        if message["role"] == "tool"
    ]
    assert tool_results == ["1", "2", "3"]


# --- what is never sent twice ----------------------------------------------------


def _call(session: requests.Session, url: str, **kwargs: Any) -> StreamingCall:
    return StreamingCall(
        session,
        url=f"{url}/chat/completions",
        body=b"{}",
        headers=stream_headers(),
        auth=NoAuth(),
        provider="Test",
        endpoint=url,
        idle_timeout_ms=kwargs.pop("idle", 5000),
        keepalive_timeout_ms=None,
        total_timeout_ms=None,
        **kwargs,
    )


def _complete(session: requests.Session, url: str) -> None:
    with _call(session, url, signal=None) as call:
        call.open()
        for _ in call.chunks():
            pass
        call.finish()


@pytest.fixture
def session() -> Iterator[requests.Session]:
    s = create_session()
    yield s
    s.close()


@pytest.mark.parametrize("action", ["drop", "reset"])
def test_a_new_connection_closed_unanswered_is_not_sent_again(closing, session, action):
    server = closing(after="keep", actions=(action,))
    with _call(session, server.url, signal=None) as call, pytest.raises(LlmError) as e:
        call.open()
    assert e.value.code == ErrorCode.TRANSPORT
    assert server.received == 1


def test_a_reused_connection_that_began_an_answer_is_not_sent_again(closing, session):
    server = closing(after="keep", actions=("answer", "partial"))
    _complete(session, server.url)
    with _call(session, server.url, signal=None) as call, pytest.raises(LlmError):
        call.open()
    assert server.received == 2
    assert server.connections == 1


def test_a_request_is_sent_again_once_only(closing, session):
    server = closing(after="keep", actions=("answer", "drop", "drop"))
    _complete(session, server.url)
    with _call(session, server.url, signal=None) as call, pytest.raises(LlmError) as e:
        call.open()
    assert e.value.code == ErrorCode.TRANSPORT
    assert "closed the connection without answering" in e.value.message
    assert server.received == 3
    assert server.connections == 2


def test_a_slot_asking_for_a_fresh_connection_never_reuses_an_idle_one(session):
    # urllib3 puts nothing back for a failed connection, so one thread's second
    # attempt would open a new one anyway; another thread may have released an
    # idle connection meanwhile, which the second attempt must not take.
    with LoopbackServer() as server:
        server.enqueue(*(Reply(body=b"x", framing="length") for _ in range(3)))
        for fresh, opened in ((False, 1), (True, 2), (False, 2)):
            slot = SocketSlot()
            slot.fresh_connection = fresh
            with capture_socket(slot):
                response = session.post(server.url, data=b"{}", timeout=5)
            assert response.content == b"x"
            assert slot.reused is (not fresh and opened == 2)
            assert server.connections_opened == opened


def test_a_reused_connection_that_times_out_is_not_sent_again(closing, session):
    server = closing(after="keep", actions=("answer", "hold"))
    _complete(session, server.url)
    with (
        _call(session, server.url, signal=None, idle=300) as call,
        pytest.raises(LlmError) as e,
    ):
        call.open()
    assert e.value.code == ErrorCode.TIMEOUT
    assert server.received == 2


def test_an_abort_while_waiting_on_a_reused_connection_is_not_sent_again(
    closing, session
):
    server = closing(after="keep", actions=("answer", "hold"))
    _complete(session, server.url)
    controller = AbortController()
    threading.Thread(
        target=lambda: server.wait_for_requests(2) and controller.abort(),
        daemon=True,
    ).start()
    with (
        _call(session, server.url, signal=controller.signal) as call,
        pytest.raises(LlmError) as e,
    ):
        call.open()
    assert e.value.code == ErrorCode.ABORTED
    assert server.received == 2


def test_the_closing_origins_belong_to_their_session(closing):
    one, other = create_session(), create_session()
    try:
        note_closes_after_stream(one, "http://127.0.0.1:9/v1/chat/completions")
        assert closes_after_stream(one, "http://127.0.0.1:9/anything")
        assert not closes_after_stream(one, "http://127.0.0.1:10/v1")
        assert not closes_after_stream(other, "http://127.0.0.1:9/v1")
        assert closes_after_stream(one, "HTTP://127.0.0.1:9")
        plain = requests.Session()
        note_closes_after_stream(plain, "http://127.0.0.1:9/v1")
        assert not closes_after_stream(plain, "http://127.0.0.1:9/v1")
        plain.close()
    finally:
        one.close()
        other.close()


def test_the_recorder_in_front_of_such_a_server_records_every_call(closing, tmp_path):
    server = closing()
    with (
        record(server.url, tmp_path) as recording,
        OpenAICompatAdapter(recording.base_url) as adapter,
    ):
        texts = _back_to_back(adapter, 3)
    assert texts == ["answer 0", "answer 1", "answer 2"]
    assert len(recording.paths) == 3
    # One upstream connection per exchange: no request crossed a close.
    assert server.dropped == 0
    assert server.connections == 3
