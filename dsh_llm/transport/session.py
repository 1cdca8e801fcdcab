"""The ``requests.Session`` every remote adapter uses, and its auth and headers.

- ``create_session(pool_maxsize=...)``: a pooled session, safe for concurrent
  streams; urllib3 never retries.
- ``stream_headers(...)``: the attribution user-agent, ``accept``,
  ``accept-encoding: identity``, ``content-type`` and extra headers; credentials
  travel only in auth objects (``BearerAuth``, ``ApiKeyAuth``) whose ``secret``
  the transport redacts and whose ``repr`` hides it.
- ``is_header_name`` / ``is_header_value``: whether a header can be sent as given.
- Loopback hosts never go through a proxy; other hosts honour the environment.
- ``capture_socket(slot)`` makes a connection's socket reachable for an abort
  and tells ``slot`` whether the request went on a reused connection that the
  server closed before answering (``SocketSlot.reused``, ``closed_unanswered``);
  ``slot.fresh_connection`` makes the next request open a new connection.
- ``closes_after_stream`` / ``note_closes_after_stream``: the servers (by origin)
  whose connections are not pooled after a stream, per session.
- urllib3's DEBUG request line hides query values; informational responses are
  skipped. Details: ``docs/transport.md``.
"""

from __future__ import annotations

import contextlib
import contextvars
import http.client
import ipaddress
import logging
import re
import socket
import sys
import threading
import urllib.parse
from collections.abc import Iterator
from collections.abc import Mapping
from typing import Any
from typing import Final

import requests
import requests.adapters
import requests.auth
import urllib3.connection
import urllib3.connectionpool
import urllib3.response
from urllib3.exceptions import ConnectTimeoutError
from urllib3.exceptions import NameResolutionError
from urllib3.exceptions import NewConnectionError
from urllib3.util.retry import Retry

from dsh_llm.credentials import Secret
from dsh_llm.transport.attribution import APP_IDENTITY
from dsh_llm.transport.attribution import AppIdentity
from dsh_llm.transport.attribution import attribution_headers
from dsh_llm.transport.connect import open_connection

__all__ = [
    "DEFAULT_POOL_MAXSIZE",
    "ApiKeyAuth",
    "BearerAuth",
    "NoAuth",
    "SocketSlot",
    "capture_socket",
    "closes_after_stream",
    "create_session",
    "is_header_name",
    "is_header_value",
    "is_loopback_host",
    "note_closes_after_stream",
    "stream_headers",
]

DEFAULT_POOL_MAXSIZE = 10
"""Idle connections kept per host by default."""

_LOOPBACK_V4: Final = ipaddress.IPv4Network("127.0.0.0/8")
_HEADER_NAME: Final = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_HEADER_VALUE: Final = re.compile(r"(?:[\x21-\x7E](?:[\x21-\x7E \t]*[\x21-\x7E])?)?")

_SLOT: contextvars.ContextVar[SocketSlot | None] = contextvars.ContextVar(
    "dsh_llm_socket_slot", default=None
)


class SocketSlot:
    """Holds the socket of one in-flight request so another thread can end it.

    ``interrupt()`` shuts the socket down (both directions), which wakes a read
    blocked in any thread at once and tells the server the connection is gone; a
    socket attached after ``interrupt()`` is shut down as soon as it attaches.
    Before the response, a new connection's socket is *held* (``hold``) from its
    creation: an interrupt then also ends the TLS handshake and the sending of
    the body, and ``dsh_llm.transport.connect`` ends a resolve or connect in
    progress once ``interrupted`` is set.
    """

    __slots__ = (
        "_held",
        "_lock",
        "closed_unanswered",
        "fresh_connection",
        "interrupted",
        "reused",
        "sock",
    )

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.sock: socket.socket | None = None
        """The attached socket, once the request was sent."""
        self.interrupted = False
        """Whether ``interrupt()`` was called."""
        self.reused = False
        """Whether the last request went on a pooled connection that had already
        carried a response (set when the request is sent)."""
        self.closed_unanswered = False
        """Whether the server closed (or reset) the connection of the last request
        before a single byte of its response arrived."""
        self.fresh_connection = False
        """Set by the caller: the next request opens a new connection instead of
        taking an idle one from the pool."""
        self._held: socket.socket | None = None

    def hold(self, sock: socket.socket) -> None:
        """Keep a duplicate of a new connection's ``sock``: the TLS layer takes
        the original object over, and the duplicate still reaches the
        connection. Shut down at once if already interrupted."""
        duplicate = sock.dup()
        with self._lock:
            previous, self._held = self._held, duplicate
            interrupted = self.interrupted
        if previous is not None:
            previous.close()
        if interrupted:
            _shutdown(duplicate)

    def attach(self, sock: socket.socket) -> None:
        """Record ``sock`` (shutting it down at once if already interrupted); a
        held duplicate is closed, ``sock`` now reaches the connection."""
        with self._lock:
            self.sock = sock
            interrupted = self.interrupted
            held, self._held = self._held, None
        if held is not None:
            with contextlib.suppress(OSError):
                held.close()
        if interrupted:
            _shutdown(sock)

    def interrupt(self) -> None:
        """Shut the attached (or held) socket down, now or when it attaches.
        Thread-safe, idempotent, never raises."""
        with self._lock:
            self.interrupted = True
            sock = self.sock
            held = self._held
        if sock is not None:
            _shutdown(sock)
        if held is not None:
            _shutdown(held)

    def release(self) -> None:
        """Close the held duplicate, if any (the connection itself stays as it
        is). Idempotent, never raises."""
        with self._lock:
            held, self._held = self._held, None
        if held is not None:
            with contextlib.suppress(OSError):
                held.close()


def _shutdown(sock: socket.socket) -> None:
    # socket.socket.shutdown, not SSLSocket.shutdown: the latter drops the TLS
    # object under a reader that may be running in another thread.
    with contextlib.suppress(OSError, ValueError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


@contextlib.contextmanager
def capture_socket(slot: SocketSlot) -> Iterator[SocketSlot]:
    """While active in this thread, requests sent through a session from
    ``create_session`` attach their socket to ``slot``."""
    token = _SLOT.set(slot)
    try:
        yield slot
    finally:
        _SLOT.reset(token)


_QUERY_VALUE: Final = re.compile(r"=[^&#]*")


class _QueryValuesHidden(logging.Filter):
    """Hides the query values of urllib3's request line while a request of ours
    (one sent under ``capture_socket``) is in flight in this thread."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if (
            _SLOT.get() is not None
            and isinstance(args, tuple)
            and len(args) > 4
            and isinstance(args[4], str)
            and "?" in args[4]
        ):
            path, _, query = args[4].partition("?")
            hidden = f"{path}?{_QUERY_VALUE.sub('=***', query)}"
            record.args = (*args[:4], hidden, *args[5:])
        return True


logging.getLogger("urllib3.connectionpool").addFilter(_QueryValuesHidden())


def _attach_current(sock: socket.socket | None) -> None:
    slot = _SLOT.get()
    if slot is not None and sock is not None:
        slot.attach(sock)


class _FinalResponse(http.client.HTTPResponse):
    """Skips informational responses (``103 Early Hints``...) before the final
    one; ``http.client`` itself skips only ``100 Continue``. ``101`` stays final:
    it switches protocols. Tells the current slot when the server closed the
    connection before the first byte of the response."""

    def begin(self) -> None:
        slot = _SLOT.get()
        if slot is not None:
            # One read before http.client's: an end of stream or a reset here
            # means the server sent nothing at all for this request.
            try:
                first = self.fp.peek(1)
            except TimeoutError:
                raise
            except OSError:
                slot.closed_unanswered = True
                raise
            if not first:
                slot.closed_unanswered = True
        super().begin()

    def _read_status(self) -> tuple[str, int, str]:
        while True:
            version, status, reason = super()._read_status()  # type: ignore[misc]
            if not 102 <= status < 200:
                return version, status, reason
            http.client.parse_headers(self.fp)  # its header section, discarded


class _AbortableConnect:
    """``_new_conn`` of urllib3's connections, abortable while a request of ours
    is in flight (``dsh_llm.transport.connect``); the same exceptions."""

    host: str
    port: int
    timeout: Any
    source_address: Any
    socket_options: Any
    _dns_host: str

    def _new_conn(self) -> socket.socket:
        slot = _SLOT.get()
        if slot is None:
            return super()._new_conn()  # type: ignore[misc,no-any-return]
        conn: Any = self
        try:
            sock = open_connection(
                (self._dns_host, self.port),
                self.timeout,
                slot,
                source_address=self.source_address,
                socket_options=self.socket_options,
            )
        except socket.gaierror as exc:
            raise NameResolutionError(self.host, conn, exc) from exc
        except TimeoutError as exc:
            raise ConnectTimeoutError(
                conn,
                f"Connection to {self.host} timed out. (connect timeout="
                f"{self.timeout})",
            ) from exc
        except OSError as exc:
            raise NewConnectionError(
                conn, f"Failed to establish a new connection: {exc}"
            ) from exc
        sys.audit("http.client.connect", self, self.host, self.port)
        return sock

    def request(self, *args: Any, **kwargs: Any) -> None:
        sock = getattr(self, "sock", None)
        slot = _SLOT.get()
        if slot is not None:
            # Reused: this very socket already carried a response (a new
            # connection has no socket yet, or a new one over TLS).
            slot.reused = sock is not None and sock is self._answered_sock
            slot.closed_unanswered = False
            if sock is not None:
                # Its socket can be shut down while the body is sent.
                slot.attach(sock)
        super().request(*args, **kwargs)  # type: ignore[misc]

    _answered_sock: socket.socket | None = None

    def getresponse(self) -> Any:  # urllib3's HTTPResponse
        sock: socket.socket | None = getattr(self, "sock", None)
        _attach_current(sock)
        response = super().getresponse()  # type: ignore[misc]
        # The socket that carried this response, for ``request`` to tell a
        # reused connection from a new one.
        self._answered_sock = sock
        return response


class _HTTPConnection(_AbortableConnect, urllib3.connection.HTTPConnection):
    response_class = _FinalResponse


class _HTTPSConnection(_AbortableConnect, urllib3.connection.HTTPSConnection):
    response_class = _FinalResponse


class _FreshWhenAsked:
    """``_get_conn`` of urllib3's pools: with ``slot.fresh_connection`` set, an
    idle pooled connection is closed first, so the request opens a new one."""

    def _get_conn(self, timeout: float | None = None) -> Any:
        conn = super()._get_conn(timeout)  # type: ignore[misc]
        slot = _SLOT.get()
        if slot is not None and slot.fresh_connection:
            conn.close()
        return conn


class _HTTPPool(_FreshWhenAsked, urllib3.connectionpool.HTTPConnectionPool):
    ConnectionCls = _HTTPConnection


class _HTTPSPool(_FreshWhenAsked, urllib3.connectionpool.HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection


_POOL_CLASSES = {"http": _HTTPPool, "https": _HTTPSPool}


def is_loopback_host(host: str | None) -> bool:
    """Whether ``host`` names this machine's loopback interface: ``localhost``
    (any case), an IPv4 address in ``127.0.0.0/8`` or the IPv6 address ``::1``
    (bracketed or not). Other names, even ones that may resolve to loopback, are
    not: only what can be decided without a lookup counts."""
    if not host:
        return False
    name = host.lower()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    if name == "localhost":
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv4Address):
        return address in _LOOPBACK_V4
    # ::1 only (a zone id does not change the address); an IPv4-mapped address
    # is left to the environment, as Python 3.11's is_loopback does.
    return int(address) == 1


def _is_loopback_url(url: str | None) -> bool:
    # A malformed URL raises ValueError here, exactly as requests' own proxy
    # lookup (urllib.parse again) would right after.
    return is_loopback_host(urllib.parse.urlsplit(url or "").hostname)


def _origin(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
    return f"{parts.scheme.lower()}://{(parts.hostname or '').lower()}:{port}"


class _StreamingAdapter(requests.adapters.HTTPAdapter):
    """An ``HTTPAdapter`` whose connections report their socket (see
    ``capture_socket``), which never retries and which reaches loopback hosts
    directly. It remembers the origins whose server closes a connection after
    each stream (``note_closes_after_stream``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._closing_lock = threading.Lock()
        self._closing_origins: set[str] = set()
        super().__init__(*args, **kwargs)

    def closes_after_stream(self, url: str) -> bool:
        """Whether ``url``'s origin was noted by ``note_closes_after_stream``."""
        with self._closing_lock:
            return _origin(url) in self._closing_origins

    def note_closes_after_stream(self, url: str) -> None:
        """Note that ``url``'s server closes a connection after each stream."""
        with self._closing_lock:
            self._closing_origins.add(_origin(url))

    def send(
        self,
        request: requests.PreparedRequest,
        stream: bool = False,
        timeout: float | tuple[float | None, float | None] | None = None,
        verify: bool | str = True,
        cert: str | tuple[str, str] | None = None,
        proxies: dict[str, str] | None = None,
    ) -> requests.Response:
        # The one place every request of the session passes with its final
        # proxies: Session.request merged the environment's (and a redirect
        # would have re-resolved them) before this call, so dropping them here
        # cannot be undone, and other hosts keep exactly what requests chose.
        if proxies and _is_loopback_url(request.url):
            proxies = None
        return super().send(
            request,
            stream=stream,
            timeout=timeout,
            verify=verify,
            cert=cert,
            proxies=proxies,
        )

    def init_poolmanager(
        self, connections: int, maxsize: int, block: bool = False, **pool_kwargs: Any
    ) -> None:
        super().init_poolmanager(connections, maxsize, block, **pool_kwargs)
        self.poolmanager.pool_classes_by_scheme = dict(_POOL_CLASSES)

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        if proxy.lower().startswith("http"):
            manager.pool_classes_by_scheme = dict(_POOL_CLASSES)
        return manager

    def close(self) -> None:
        # urllib3 2 only drops its pools on clear() and leaves closing their idle
        # connections to garbage collection, which a lingering Response defers;
        # close them now so Session.close() really closes the sockets.
        for manager in (self.poolmanager, *self.proxy_manager.values()):
            pools = manager.pools
            for key in list(pools.keys()):
                try:
                    pool = pools[key]
                except KeyError:
                    continue
                pool.close()
        super().close()


def create_session(
    *, pool_maxsize: int = DEFAULT_POOL_MAXSIZE, pool_connections: int = 10
) -> requests.Session:
    """A new session for one adapter (see the module docstring).

    Args:
        pool_maxsize: Idle connections kept per host (a positive int).
        pool_connections: Hosts whose pools are cached (a positive int).

    Raises:
        ValueError: for a pool size that is not a positive int.
    """
    for name, value in (
        ("pool_maxsize", pool_maxsize),
        ("pool_connections", pool_connections),
    ):
        if type(value) is not int or value <= 0:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    session = requests.Session()
    adapter = _StreamingAdapter(
        pool_connections=pool_connections,
        pool_maxsize=pool_maxsize,
        max_retries=Retry(total=0, connect=0, read=False, redirect=False, status=0),
    )
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


def _streaming_adapter(session: requests.Session, url: str) -> Any:
    try:
        adapter = session.get_adapter(url)
    except requests.exceptions.InvalidSchema:
        return None
    return adapter if isinstance(adapter, _StreamingAdapter) else None


def closes_after_stream(session: requests.Session, url: str) -> bool:
    """Whether ``session`` (from ``create_session``) knows that the server of
    ``url`` (its scheme, host and port) closes each connection that carried a
    stream (``note_closes_after_stream``); ``False`` for any other session.
    Malformed URLs raise ``ValueError``."""
    adapter = _streaming_adapter(session, url)
    return adapter is not None and bool(adapter.closes_after_stream(url))


def note_closes_after_stream(session: requests.Session, url: str) -> None:
    """Remember, for the life of ``session`` (from ``create_session``; any other
    session is left alone), that the server of ``url`` closes each connection
    that carried a stream: ``StreamingCall`` then closes such connections itself
    instead of pooling them. Thread-safe."""
    adapter = _streaming_adapter(session, url)
    if adapter is not None:
        adapter.note_closes_after_stream(url)


def is_header_name(name: object) -> bool:
    """Whether ``name`` is a non-empty HTTP header name (an RFC 9110 token)."""
    return isinstance(name, str) and _HEADER_NAME.fullmatch(name) is not None


def is_header_value(value: object) -> bool:
    """Whether ``value`` is sent exactly as given in a header: visible ASCII
    (0x21-0x7E), with spaces and tabs only between visible characters, or empty.

    Anything else would be refused by ``requests`` (surrounding whitespace, line
    breaks), fail to encode (non-ASCII) or be altered on the way (a trailing tab
    is stripped), so a caller checks values before any request is sent.
    """
    return isinstance(value, str) and _HEADER_VALUE.fullmatch(value) is not None


def stream_headers(
    *,
    accept: str = "text/event-stream",
    extra: Mapping[str, str] | None = None,
    identity: AppIdentity = APP_IDENTITY,
    has_body: bool = True,
) -> dict[str, str]:
    """The headers of one streaming request, or of one ``fetch`` (lower-case
    names, attribution first).

    ``extra`` may add headers (e.g. gateway routing ids) but cannot replace the
    attribution ``user-agent``. ``content-type: application/json`` is sent
    unless ``has_body`` is false. ``accept-encoding: identity``: a compressed
    answer would be inflated past what a size cap counts on the wire.
    """
    headers = attribution_headers(identity)
    headers["accept"] = accept
    headers["accept-encoding"] = "identity"
    if has_body:
        headers["content-type"] = "application/json"
    for name, value in (extra or {}).items():
        key = name.lower()
        if key != "user-agent":
            headers[key] = value
    return headers


class BearerAuth(requests.auth.AuthBase):
    """Sends ``authorization: Bearer <key>``; the key never shows in a ``repr``."""

    def __init__(self, key: Secret) -> None:
        self._key = key

    @property
    def key(self) -> Secret:
        """The key, still hidden (the transport redacts it from server text)."""
        return self._key

    secret = key
    """What ``StreamingCall`` redacts from server text: the key."""

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers["authorization"] = f"Bearer {self._key.reveal()}"
        return request

    def __repr__(self) -> str:
        return "BearerAuth(key=***)"


class ApiKeyAuth(requests.auth.AuthBase):
    """Sends the key as the whole value of one header (``x-api-key: <key>``,
    ``x-goog-api-key: <key>``); the key never shows in a ``repr``.

    Args:
        key: The key, revealed only into the header.
        header: The header's name (lower-case by convention).
    """

    def __init__(self, key: Secret, *, header: str = "x-api-key") -> None:
        self._key = key
        self.header = header
        """The header the key travels in."""

    @property
    def secret(self) -> Secret:
        """The key, still hidden (the transport redacts it from server text)."""
        return self._key

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers[self.header] = self._key.reveal()
        return request

    def __repr__(self) -> str:
        return f"ApiKeyAuth(header={self.header!r}, key=***)"


class NoAuth(requests.auth.AuthBase):
    """Sends no credentials (local servers); also keeps ``.netrc`` out of the
    request."""

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        return request

    def __repr__(self) -> str:
        return "NoAuth()"
