"""``LoopbackServer``: a scripted HTTP server on 127.0.0.1 for streaming tests.

This is a public testing utility (tests, ``dsh-llm demo`` and the benchmarks use
it). It speaks real HTTP/1.1 over real sockets from background threads, using the
standard library only, so client code under test runs its whole network stack.

Contracts callers may rely on:

- Each request the server receives takes the next queued ``Reply`` (see
  ``enqueue``), or is passed to ``handler`` when one is set; with neither, the
  server answers 500 with a plain-text explanation, so a missing script is loud.
- A ``Reply`` body is a sequence of steps played in order: ``bytes`` are written
  (cut into writes of at most ``split`` bytes, with ``write_delay`` seconds between
  writes), ``Pause`` sleeps, ``Stall`` holds the connection open without data,
  ``Cut`` closes abruptly (FIN, or RST with ``reset=True``) and ``Mark`` records
  ``time.perf_counter()`` under a name in ``marks``.
- ``header_delay`` holds the status line back (``None``: until the client leaves),
  to script a server that accepted a request but does not answer.
- ``framing`` chooses how the body is delimited: ``"chunked"`` (one HTTP chunk per
  write, HTTP/1.1, keep-alive), ``"length"`` (``Content-Length`` of all the body
  bytes, keep-alive) or ``"close"`` (an HTTP/1.0 reply without a length, ended by
  closing the connection).
- Every received request is recorded (method, path, lower-cased headers, body) in
  ``requests``. ``connections_opened`` and ``connections_closed`` count
  connections accepted and finished (closed by either side), so a test can assert
  that a client closed everything it opened (``wait_until_idle``).
- ``stop()`` (or leaving the ``with`` block) closes every socket and joins every
  thread; a stalled reply ends when the server stops or the client disconnects.
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Mapping
from typing import Any
from typing import Final
from typing import Literal

import attrs

from dsh_llm.serde import compact_json
from dsh_llm.testing._sockets import ClientGone
from dsh_llm.testing._sockets import LocalServer
from dsh_llm.testing._sockets import read_request
from dsh_llm.testing._sockets import send

__all__ = [
    "Cut",
    "LoopbackServer",
    "Mark",
    "Pause",
    "RecordedRequest",
    "Reply",
    "Stall",
    "sse_body",
    "sse_event",
    "sse_events",
]

_MAX_REQUEST_HEAD: Final = 64 * 1024
_POLL_S: Final = 0.01


@attrs.frozen(kw_only=True)
class Pause:
    """Sleep before the next body step (the connection stays quiet)."""

    seconds: float
    """How long to wait."""


@attrs.frozen(kw_only=True)
class Stall:
    """Hold the connection open without sending anything.

    The stall ends when the client disconnects, the server stops, or ``seconds``
    pass (``None``: no time limit). Later steps run only after a timed stall.
    """

    seconds: float | None = None
    """Upper bound on the stall, or ``None`` to wait for a disconnect or stop."""


@attrs.frozen(kw_only=True)
class Cut:
    """Close the connection abruptly, in the middle of the body."""

    reset: bool = False
    """``True`` sends a TCP RST (linger 0); ``False`` a normal FIN."""


@attrs.frozen(kw_only=True)
class Mark:
    """Record ``time.perf_counter()`` in ``LoopbackServer.marks[name]`` when the
    step is reached (right after the previous write went out)."""

    name: str
    """The key to record under."""


BodyStep = bytes | Pause | Stall | Cut | Mark
"""One step of a scripted body."""


def _headers(
    value: Mapping[str, str] | Iterable[tuple[str, str]],
) -> tuple[tuple[str, str], ...]:
    items = value.items() if isinstance(value, Mapping) else value
    return tuple((str(k), str(v)) for k, v in items)


def _body(value: bytes | Iterable[BodyStep]) -> tuple[BodyStep, ...]:
    if isinstance(value, bytes | bytearray):
        return (bytes(value),)
    return tuple(value)


@attrs.frozen(kw_only=True)
class Reply:
    """One scripted HTTP response."""

    status: int = 200
    """The status code."""
    reason: str = "OK"
    """The reason phrase of the status line."""
    headers: tuple[tuple[str, str], ...] = attrs.field(default=(), converter=_headers)
    """Extra headers, in order (a mapping is accepted). ``Content-Type`` defaults to
    ``text/event-stream``; framing headers are added by the server."""
    body: tuple[BodyStep, ...] = attrs.field(default=(), converter=_body)
    """The body steps (a single ``bytes`` value is accepted)."""
    framing: Literal["chunked", "length", "close"] = "chunked"
    """How the body is delimited."""
    split: int | None = None
    """Largest write in bytes (``1`` writes byte by byte); ``None`` writes each
    ``bytes`` step whole."""
    write_delay: float = 0.0
    """Seconds to wait between two writes."""
    header_delay: float | None = 0.0
    """Seconds to wait before the status line; ``None`` holds the headers back
    until the client disconnects or the server stops (a stalled server)."""


@attrs.frozen(kw_only=True)
class RecordedRequest:
    """One request as the server received it."""

    method: str
    """The request method, e.g. ``POST``."""
    path: str
    """The request target, e.g. ``/chat/completions``."""
    headers: tuple[tuple[str, str], ...]
    """Header names lower-cased, values as sent, in order."""
    body: bytes
    """The raw request body."""

    def header(self, name: str) -> str | None:
        """The value of header ``name`` (case-insensitive), or ``None``."""
        wanted = name.lower()
        for key, value in self.headers:
            if key == wanted:
                return value
        return None

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body)


Handler = Callable[[RecordedRequest], Reply]
"""Chooses the reply for a request (used when ``LoopbackServer.handler`` is set)."""


def sse_event(payload: Any) -> bytes:
    """One SSE event ``data: <payload>\\n\\n``; dicts and lists are JSON-encoded,
    strings are sent verbatim."""
    data = payload if isinstance(payload, str) else compact_json(payload)
    return f"data: {data}\n\n".encode()


def sse_events(payloads: Iterable[Any], *, done: bool = True) -> tuple[bytes, ...]:
    """One ``bytes`` step per event (so each event is its own write), followed by
    ``data: [DONE]`` when ``done``."""
    events = [sse_event(p) for p in payloads]
    if done:
        events.append(b"data: [DONE]\n\n")
    return tuple(events)


def sse_body(payloads: Iterable[Any], *, done: bool = True) -> bytes:
    """The events of ``sse_events`` joined into one body."""
    return b"".join(sse_events(payloads, done=done))


class LoopbackServer(LocalServer):
    """A scripted HTTP server on 127.0.0.1 (see the module docstring).

    Example::

        with LoopbackServer() as server:
            server.enqueue(Reply(body=sse_body([{"choices": []}])))
            ...  # point a client at server.url
            assert server.requests[0].method == "POST"
    """

    _backlog = 64
    _poll_s = _POLL_S * 5
    _thread_name = "loopback"

    def __init__(
        self, replies: Iterable[Reply] = (), *, handler: Handler | None = None
    ) -> None:
        super().__init__()
        self._lock = threading.Condition()
        self._replies: deque[Reply] = deque(replies)
        self.handler: Handler | None = handler
        """Chooses replies when set (queued replies are used first)."""
        self._requests: list[RecordedRequest] = []
        self._opened = 0
        self._closed = 0
        self._sockets: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self.marks: dict[str, float] = {}
        """``Mark`` steps reached, name to ``time.perf_counter()``."""

    # -- lifecycle ------------------------------------------------------------

    def stop(self) -> None:
        """Close every connection and the listener; join all threads."""
        self._stopping.set()
        with self._lock:
            sockets = list(self._sockets)
            self._lock.notify_all()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        if self._acceptor is not None:
            self._acceptor.join()
            self._acceptor = None
        for thread in list(self._threads):
            thread.join()
        if self._listener is not None:
            self._listener.close()
            self._listener = None

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- facts ------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The bound port (0 before ``start``)."""
        return self._port

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``, without a trailing slash."""
        return f"http://127.0.0.1:{self._port}"

    @property
    def requests(self) -> tuple[RecordedRequest, ...]:
        """Every request received so far, in arrival order."""
        with self._lock:
            return tuple(self._requests)

    @property
    def connections_opened(self) -> int:
        """Connections accepted so far."""
        with self._lock:
            return self._opened

    @property
    def connections_closed(self) -> int:
        """Connections finished so far (closed by either side)."""
        with self._lock:
            return self._closed

    def enqueue(self, *replies: Reply) -> None:
        """Queue replies; each request takes the oldest one."""
        with self._lock:
            self._replies.extend(replies)

    def wait_for_requests(self, count: int, timeout: float = 5.0) -> bool:
        """Wait until ``count`` requests were received; ``False`` on timeout."""
        return self._wait(lambda: len(self._requests) >= count, timeout)

    def wait_until_idle(self, timeout: float = 5.0) -> bool:
        """Wait until every accepted connection is closed; ``False`` on timeout."""
        return self._wait(lambda: self._opened == self._closed, timeout)

    def _wait(self, predicate: Callable[[], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self._lock:
            while not predicate():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._lock.wait(remaining)
            return True

    # -- serving ------------------------------------------------------------------

    def _accepted(self, sock: socket.socket, thread: threading.Thread) -> None:
        with self._lock:
            self._opened += 1
            self._sockets.add(sock)
            self._lock.notify_all()
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)

    def _serve(self, sock: socket.socket) -> None:
        buffer = b""
        while not self._stopping.is_set():
            request, buffer = self._read_request(sock, buffer)
            if request is None:
                return
            reply = self._reply_for(request)
            if not self._play(sock, reply):
                return

    def _disconnected(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.discard(sock)
            self._closed += 1
            self._lock.notify_all()

    def _read_request(
        self, sock: socket.socket, buffer: bytes
    ) -> tuple[RecordedRequest | None, bytes]:
        parts, rest = read_request(sock, buffer, max_head=_MAX_REQUEST_HEAD)
        if parts is None:
            return None, rest
        method, path, headers, body = parts
        request = RecordedRequest(method=method, path=path, headers=headers, body=body)
        with self._lock:
            self._requests.append(request)
            self._lock.notify_all()
        return request, rest

    def _reply_for(self, request: RecordedRequest) -> Reply:
        with self._lock:
            if self._replies:
                return self._replies.popleft()
        if self.handler is not None:
            return self.handler(request)
        return Reply(
            status=500,
            reason="Internal Server Error",
            headers={"content-type": "text/plain"},
            body=b"loopback server: no scripted reply for this request",
            framing="length",
        )

    def _play(self, sock: socket.socket, reply: Reply) -> bool:
        """Send ``reply``; return whether the connection may serve another request."""
        total = sum(len(step) for step in reply.body if isinstance(step, bytes))
        version = "HTTP/1.0" if reply.framing == "close" else "HTTP/1.1"
        lines = [f"{version} {reply.status} {reply.reason}"]
        names = {name.lower() for name, _ in reply.headers}
        if "content-type" not in names:
            lines.append("Content-Type: text/event-stream")
        lines.extend(f"{name}: {value}" for name, value in reply.headers)
        if reply.framing == "chunked":
            lines.append("Transfer-Encoding: chunked")
        elif reply.framing == "length":
            lines.append(f"Content-Length: {total}")
        else:
            lines.append("Connection: close")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        if reply.header_delay != 0:
            self._sleep(sock, reply.header_delay)
        send(sock, head)
        first = True
        for step in reply.body:
            if isinstance(step, bytes):
                size = reply.split or max(len(step), 1)
                for start in range(0, len(step), size):
                    if not first and reply.write_delay > 0:
                        self._sleep(sock, reply.write_delay)
                    first = False
                    piece = step[start : start + size]
                    if reply.framing == "chunked":
                        piece = b"%x\r\n%s\r\n" % (len(piece), piece)
                    send(sock, piece)
            elif isinstance(step, Pause | Stall):
                self._sleep(sock, step.seconds)
            elif isinstance(step, Mark):
                with self._lock:
                    self.marks[step.name] = time.perf_counter()
            else:
                if step.reset:
                    sock.setsockopt(
                        socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                    )
                else:
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)
                return False
        if reply.framing == "chunked":
            send(sock, b"0\r\n\r\n")
            return True
        if reply.framing == "length":
            return True
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_WR)
        self._linger_until_client_closes(sock)
        return False

    def _sleep(self, sock: socket.socket, seconds: float | None) -> None:
        """Wait ``seconds`` (forever when ``None``) unless the client disconnects or
        the server stops; raise ``ClientGone`` when the client went away."""
        deadline = None if seconds is None else time.monotonic() + seconds
        while not self._stopping.is_set():
            timeout = (
                _POLL_S
                if deadline is None
                else min(_POLL_S, deadline - time.monotonic())
            )
            if timeout <= 0:
                return
            readable, _, _ = select.select([sock], [], [], timeout)
            if readable:
                try:
                    data = sock.recv(65536, socket.MSG_PEEK)
                except OSError as exc:
                    raise ClientGone from exc
                if not data:
                    raise ClientGone
                # A pipelined request: leave it for the next read, keep waiting.
                time.sleep(timeout)
        raise ClientGone

    def _linger_until_client_closes(self, sock: socket.socket) -> None:
        # After a close-delimited body the server has sent FIN; wait briefly for
        # the client's close so the count reflects the client finishing its read.
        deadline = time.monotonic() + 1.0
        while not self._stopping.is_set() and time.monotonic() < deadline:
            readable, _, _ = select.select([sock], [], [], _POLL_S)
            if readable:
                try:
                    if not sock.recv(65536):
                        return
                except OSError:
                    return
