"""What the test kit's two servers on 127.0.0.1 share: the listener, the accept
loop and the reading of one HTTP/1.1 request.

``LoopbackServer`` (scripted replies) and ``Recording`` (the recording proxy)
differ in what they answer, not in how a connection arrives or how a request is
read, so both go through here:

- ``LocalServer`` is the base of both: ``start`` (idempotent) binds an
  ephemeral port, sets ``port`` and runs the accept loop on a daemon thread
  until the stop event is set or the listener is closed; every connection is
  blocking, has Nagle off, and is served on a daemon thread of its own, which
  ``_accepted`` sees before it starts (to track it). A subclass names its
  backlog, poll interval (how often the loop looks at the stop event) and
  thread name and fills ``_serve``, ``_accepted`` and ``_disconnected``. A
  connection ends when ``_serve`` returns or the client leaves
  (``ClientGone``, or an ``OSError``): the socket is closed, then
  ``_disconnected`` is told.
- ``read_request`` reads a request head and a ``content-length`` body (no
  chunked request bodies); it returns ``None`` when the client leaves, the head
  passes ``max_head`` bytes or the length is not a number.
"""

from __future__ import annotations

import abc
import contextlib
import socket
import threading
from typing import ClassVar
from typing import Final
from typing import Self

READ_SIZE: Final = 65536
"""Bytes asked of one ``recv``."""


class ClientGone(Exception):
    """The client closed its connection while the server was writing or
    waiting."""


def send(sock: socket.socket, data: bytes) -> None:
    """All of ``data`` to the client.

    Raises:
        ClientGone: the client has left.
    """
    try:
        sock.sendall(data)
    except OSError as exc:
        raise ClientGone from exc


class LocalServer(abc.ABC):
    """A server on an ephemeral port of 127.0.0.1 (see the module docstring)."""

    _backlog: ClassVar[int]
    _poll_s: ClassVar[float]
    _thread_name: ClassVar[str]

    def __init__(self) -> None:
        self._stopping = threading.Event()
        self._listener: socket.socket | None = None
        self._acceptor: threading.Thread | None = None
        self._port = 0

    def start(self) -> Self:
        """Bind an ephemeral port on 127.0.0.1 and start accepting connections
        (a started server is left as it is)."""
        if self._listener is None:
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", 0))
            listener.listen(self._backlog)
            listener.settimeout(self._poll_s)
            self._listener = listener
            self._port = listener.getsockname()[1]
            self._acceptor = threading.Thread(
                target=self._accept_loop,
                args=(listener,),
                name=f"{self._thread_name}-accept",
                daemon=True,
            )
            self._acceptor.start()
        return self

    def _accept_loop(self, listener: socket.socket) -> None:
        while not self._stopping.is_set():
            try:
                sock, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            sock.settimeout(None)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            thread = threading.Thread(
                target=self._connection,
                args=(sock,),
                name=f"{self._thread_name}-conn",
                daemon=True,
            )
            self._accepted(sock, thread)
            thread.start()

    def _connection(self, sock: socket.socket) -> None:
        try:
            self._serve(sock)
        except (ClientGone, OSError):
            pass
        finally:
            with contextlib.suppress(OSError):
                sock.close()
            self._disconnected(sock)

    @abc.abstractmethod
    def _serve(self, sock: socket.socket) -> None:
        """Answer the requests of one accepted connection."""

    @abc.abstractmethod
    def _disconnected(self, sock: socket.socket) -> None:
        """Forget a connection that ended."""

    @abc.abstractmethod
    def _accepted(self, sock: socket.socket, thread: threading.Thread) -> None:
        """Keep a connection just accepted and the thread serving it."""


RequestParts = tuple[str, str, tuple[tuple[str, str], ...], bytes]
"""A request's method, target, headers (names lower-cased) and body."""


def read_request(
    sock: socket.socket, buffer: bytes, *, max_head: int
) -> tuple[RequestParts | None, bytes]:
    """The next request on ``sock`` and what was read past it, starting from the
    bytes already read (``buffer``); ``None`` (see the module docstring) with
    nothing left over."""
    while b"\r\n\r\n" not in buffer:
        if len(buffer) > max_head:
            return None, b""
        data = sock.recv(READ_SIZE)
        if not data:
            return None, b""
        buffer += data
    head, _, rest = buffer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, target = [*lines[0].split(" ", 2), "", ""][:2]
    headers: list[tuple[str, str]] = []
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        name, value = name.strip().lower(), value.strip()
        headers.append((name, value))
        if name == "content-length":
            if not value.isdigit():
                return None, b""
            length = int(value)
    while len(rest) < length:
        data = sock.recv(READ_SIZE)
        if not data:
            return None, b""
        rest += data
    return (method, target, tuple(headers), rest[:length]), rest[length:]
