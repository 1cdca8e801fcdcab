"""Opening a TCP connection that an abort can end at any moment.

``socket.create_connection`` (and urllib3's copy of it) blocks in
``getaddrinfo`` and in ``connect``, where no other thread can wake it: an abort
would wait for the connect timeout. ``open_connection`` does the same work with
both waits made abortable. Contracts callers may rely on:

- It resolves and connects like urllib3's ``create_connection`` (same address
  family rule, socket options, source address, each address tried in turn, the
  last error raised), with ``timeout`` bounding each connect.
- Name resolution runs on a small shared pool of daemon threads unless the host
  is an IP literal; the caller waits for it at most ``timeout``.
- Every wait is sliced (``SLICE_S``): once ``slot.interrupted`` is set, the call
  raises ``ConnectionAbortedError`` within one slice, whether it is resolving or
  connecting (a lookup still running is left to finish on its own).
- The new socket is held by ``slot`` (``SocketSlot.hold``) from its creation, so
  an interrupt also wakes what comes after the connect: the TLS handshake and
  the sending of the request body.
- A connect that does not complete within ``timeout`` raises ``TimeoutError``;
  a refused or unreachable address raises its ``OSError``; a failed lookup
  ``socket.gaierror``.
"""

from __future__ import annotations

import concurrent.futures
import errno
import ipaddress
import os
import select
import socket
import threading
import time
from collections.abc import Sequence
from typing import Any
from typing import Final
from typing import Protocol

from urllib3.util.connection import allowed_gai_family

__all__ = ["SLICE_S", "Interruptible", "open_connection"]

SLICE_S: Final = 0.01
"""The longest a wait goes without looking at the interrupt flag."""

_IN_PROGRESS: Final = frozenset(
    {errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EALREADY, 10035}  # 10035: Windows
)
_RESOLVERS = 4

_pool: concurrent.futures.ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


class Interruptible(Protocol):
    """What ``open_connection`` needs of a ``SocketSlot``."""

    @property
    def interrupted(self) -> bool:
        """Whether the request was interrupted (aborted)."""
        ...

    def hold(self, sock: socket.socket) -> None:
        """Keep ``sock`` reachable for an interrupt until the response comes."""
        ...


def _resolver() -> concurrent.futures.ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=_RESOLVERS, thread_name_prefix="dsh-llm-resolve"
            )
        return _pool


def _interrupted() -> ConnectionAbortedError:
    return ConnectionAbortedError(errno.ECONNABORTED, "connection aborted by caller")


def _deadline(timeout: float | None) -> float | None:
    return None if timeout is None else time.monotonic() + timeout


def _left(deadline: float | None) -> float:
    if deadline is None:
        return SLICE_S
    return min(SLICE_S, deadline - time.monotonic())


def _resolve(
    host: str, port: int, slot: Interruptible, deadline: float | None
) -> list[tuple[Any, ...]]:
    family = allowed_gai_family()
    try:
        ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        return socket.getaddrinfo(host, port, family, socket.SOCK_STREAM)
    future = _resolver().submit(
        socket.getaddrinfo, host, port, family, socket.SOCK_STREAM
    )
    while True:
        if slot.interrupted:
            raise _interrupted()
        wait = _left(deadline)
        if wait <= 0:
            raise TimeoutError("timed out resolving the host name")
        try:
            return future.result(timeout=wait)
        except concurrent.futures.TimeoutError:
            continue


def _connect(
    sock: socket.socket, address: Any, slot: Interruptible, deadline: float | None
) -> None:
    sock.setblocking(False)
    code = sock.connect_ex(address)
    while code != 0:
        if code not in _IN_PROGRESS:
            raise OSError(code, os.strerror(code))
        if slot.interrupted:
            raise _interrupted()
        wait = _left(deadline)
        if wait <= 0:
            raise TimeoutError("timed out")
        _, writable, failed = select.select([], [sock], [sock], wait)
        if writable or failed:
            code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if code == 0:
                break
            raise OSError(code, os.strerror(code))
    if slot.interrupted:
        raise _interrupted()


def open_connection(
    address: tuple[str, int],
    timeout: float | None,
    slot: Interruptible,
    *,
    source_address: tuple[str, int] | None = None,
    socket_options: Sequence[tuple[int, int, int | bytes]] | None = None,
) -> socket.socket:
    """Connect to ``address`` (see the module docstring) and return the socket,
    in blocking mode with ``timeout`` set.

    Raises:
        ConnectionAbortedError: once ``slot.interrupted`` is set.
        TimeoutError: when resolving or a connect takes longer than ``timeout``.
        socket.gaierror: when the name cannot be resolved.
        OSError: the last connect's error.
    """
    host, port = address
    host = host.strip("[]") if host.startswith("[") else host
    deadline = _deadline(timeout)
    error: OSError | None = None
    for family, kind, proto, _, target in _resolve(host, port, slot, deadline):
        sock = socket.socket(family, kind, proto)
        try:
            slot.hold(sock)
            for option in socket_options or ():
                sock.setsockopt(*option)
            if source_address:
                sock.bind(source_address)
            _connect(sock, target, slot, _deadline(timeout))
            sock.settimeout(timeout)
            return sock
        except ConnectionAbortedError:
            sock.close()
            raise
        except OSError as exc:
            error = exc
            sock.close()
    if error is not None:
        raise error
    raise OSError("getaddrinfo returns an empty list")
