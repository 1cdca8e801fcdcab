"""Recording live calls into cassettes: a reverse proxy on 127.0.0.1.

``record(upstream_base_url, where)`` starts a proxy; an adapter pointed at its
``base_url`` talks to the upstream through it, and every exchange becomes a
cassette file (``dsh_llm.testing.cassette``; ``docs/cassettes.md`` has the
details). Contracts callers may rely on:

- The client gets each piece of the body as the upstream sends it (every read
  forwarded at once, never the whole body buffered), each recorded with its
  arrival time; the upstream's framing is kept, an upstream that breaks
  mid-body is cut toward the client too (``ended: "cut"``), and a client that
  stops reading ends the upstream request (``ended: "client-closed"``).
- The query string of ``upstream_base_url`` (``?api-version=...``, a key) is part
  of ``base_url``, so the adapter sends it and the proxy forwards it as sent.
- Secrets never reach the file: ``redact_exchange`` runs before it is written,
  with ``secrets`` (the API key) and what the request's headers and URL show,
  in every spelling (percent-encoded too), wherever they appear.
- A client that leaves while the upstream is silent is noticed within ~20 ms and
  the upstream connection is shut down.
- Each exchange goes upstream on a connection of its own, never a pooled one;
  redirects are not followed; proxy variables are honoured only for an upstream
  off the loopback interface; an unreachable upstream is answered with a 502 and
  recorded nothing.
- Files: a directory ``where`` gets ``call-001.jsonl``, ``call-002.jsonl``...; a
  file path gets the first call, later ones ``<stem>-2<suffix>``... Every call
  whose response head arrived is written before ``record`` exits
  (``Recording.paths``).
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from typing import Final

import requests

from dsh_llm.credentials import Secret
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import StreamChunk
from dsh_llm.testing._sockets import READ_SIZE
from dsh_llm.testing._sockets import ClientGone
from dsh_llm.testing._sockets import LocalServer
from dsh_llm.testing._sockets import read_request
from dsh_llm.testing._sockets import send
from dsh_llm.testing.cassette import BodyRead
from dsh_llm.testing.cassette import Cassette
from dsh_llm.testing.cassette import CassetteRequest
from dsh_llm.testing.cassette import CassetteResponse
from dsh_llm.testing.cassette import Ended
from dsh_llm.testing.cassette import Framing
from dsh_llm.testing.cassette import redact_exchange
from dsh_llm.testing.replay import AdapterFactory
from dsh_llm.testing.replay import close_adapter
from dsh_llm.testing.replay import close_stream
from dsh_llm.validator import validate_stream

__all__ = ["Recording", "record", "record_call"]

_HOP_BY_HOP: Final = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
        "content-encoding",
        "host",
    }
)
_MAX_HEAD: Final = 64 * 1024
_LOOPBACK_HOSTS: Final = frozenset({"127.0.0.1", "localhost", "::1"})


class Recording(LocalServer):
    """A running recording proxy (what ``record`` yields).

    Args:
        upstream_base_url: The real API root, e.g. ``https://api.deepseek.com``
            or ``http://127.0.0.1:8000/v1``.
        where: The cassette directory or file path (see the module docstring).
        secrets: Values to redact besides what the request shows (the API key).
        adapter: The ``module:Class`` hint written into each cassette.
        upstream_timeout_s: Connect and per-read timeout toward the upstream.
    """

    _backlog = 16
    _poll_s = 0.05
    _thread_name = "recorder"

    def __init__(
        self,
        upstream_base_url: str,
        where: str | Path,
        *,
        secrets: Iterable[str | Secret] = (),
        adapter: str | None = None,
        upstream_timeout_s: float = 300.0,
    ) -> None:
        super().__init__()
        parts = urllib.parse.urlsplit(upstream_base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(
                f"upstream_base_url must be an http(s) URL, got {upstream_base_url!r}"
            )
        self._origin = f"{parts.scheme}://{parts.netloc}"
        # The host the upstream is named by, never the URL's credentials.
        self._netloc = parts.netloc.rpartition("@")[2]
        self._base_path = parts.path.rstrip("/")
        self._query = parts.query
        self._where = Path(where)
        self._secrets = tuple(secrets)
        self._adapter = adapter
        self._timeout = upstream_timeout_s
        self._trust_env = parts.hostname not in _LOOPBACK_HOSTS
        self._lock = threading.Lock()
        self._paths: list[Path] = []
        self._count = 0
        self._threads: list[threading.Thread] = []
        self._awaiting_upstream: set[threading.Thread] = set()
        self._abandoned = False
        self._sockets: set[socket.socket] = set()

    @property
    def base_url(self) -> str:
        """The URL to give the adapter instead of the upstream's API root: the
        proxy's, with the upstream's path and query string (Azure's
        ``?api-version=``), which the adapter then sends and the proxy forwards."""
        query = f"?{self._query}" if self._query else ""
        return f"http://127.0.0.1:{self._port}{self._base_path}{query}"

    @property
    def paths(self) -> tuple[Path, ...]:
        """The cassette files written so far, in the order the calls ended."""
        with self._lock:
            return tuple(self._paths)

    def stop(self) -> None:
        """Close every connection and wait for every cassette to be written;
        a call still waiting for the upstream's response head is abandoned."""
        self._stopping.set()
        if self._acceptor is not None:
            self._acceptor.join()
            self._acceptor = None
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            # Wake a connection waiting for the client's next request; one still
            # forwarding a body ends when the body does.
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RD)
        # A call still waiting for the upstream's response head has nothing to
        # record yet: it is abandoned (it ends without a cassette when the head
        # comes), rather than waited for up to the upstream timeout.
        with self._lock:
            self._abandoned = True
            waiting = set(self._awaiting_upstream)
        for thread in self._threads:
            if thread not in waiting:
                thread.join()
        if self._listener is not None:
            self._listener.close()
            self._listener = None

    # -- serving --------------------------------------------------------------------

    def _accepted(self, sock: socket.socket, thread: threading.Thread) -> None:
        with self._lock:
            self._sockets.add(sock)
        self._threads.append(thread)

    def _serve(self, sock: socket.socket) -> None:
        buffer = b""
        while True:
            request, buffer = _read_request(sock, buffer)
            if request is None or not self._exchange(sock, request):
                return

    def _disconnected(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.discard(sock)

    def _exchange(self, sock: socket.socket, request: CassetteRequest) -> bool:
        """Forward one request and record it; whether the connection may go on."""
        path = request.url
        url = self._origin + path
        headers = {k: v for k, v in request.headers if k not in _HOP_BY_HOP}
        headers.setdefault("accept-encoding", "identity")
        # One upstream connection per exchange (a session of its own): a pooled
        # one may be closed by the upstream right after a stream, as llama-server
        # does, and fail the next call.
        headers["connection"] = "close"
        session = requests.Session()
        session.trust_env = self._trust_env
        start = time.perf_counter()

        def now_ms() -> float:
            return round((time.perf_counter() - start) * 1000, 3)

        with self._lock:
            self._awaiting_upstream.add(threading.current_thread())
        try:
            response = session.request(
                request.method,
                url,
                headers=headers,
                data=request.body or None,
                stream=True,
                allow_redirects=False,
                timeout=(self._timeout, self._timeout),
            )
        except requests.RequestException as exc:
            session.close()
            self._upstream_answered()
            message = f"recording proxy: upstream unreachable: {type(exc).__name__}"
            send(
                sock,
                (
                    "HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/plain\r\n"
                    f"content-length: {len(message)}\r\n\r\n{message}"
                ).encode("latin-1"),
            )
            return True
        if not self._upstream_answered():
            response.close()
            session.close()
            return False
        with response:
            head_ms = now_ms()
            raw = response.raw
            framing: Framing
            if raw.chunked:
                framing = "chunked"
            elif "content-length" in response.headers and not response.headers.get(
                "content-encoding"
            ):
                framing = "length"
            else:
                framing = "close"
            kept = [
                (k.lower(), v)
                for k, v in response.headers.items()
                if k.lower() not in _HOP_BY_HOP
            ]
            version = "HTTP/1.0" if framing == "close" else "HTTP/1.1"
            lines = [f"{version} {response.status_code} {response.reason or ''}"]
            lines.extend(f"{k}: {v}" for k, v in kept)
            if framing == "chunked":
                lines.append("transfer-encoding: chunked")
            elif framing == "length":
                lines.append(f"content-length: {response.headers['content-length']}")
            else:
                lines.append("connection: close")
            reads: list[BodyRead] = []
            ended: Ended = "complete"
            send(sock, ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
            watch = _ClientWatch(sock, raw)
            try:
                for data in _body_reads(raw, framing):
                    reads.append(BodyRead(at_ms=now_ms(), data=data))
                    try:
                        send(
                            sock,
                            b"%x\r\n%s\r\n" % (len(data), data)
                            if framing == "chunked"
                            else data,
                        )
                    except ClientGone:
                        ended = "client-closed"
                        break
            except Exception:
                # The upstream broke mid-body (reset, bad chunk, read timeout),
                # unless the watch ended it because the client had left.
                ended = "client-closed" if watch.client_left else "cut"
            finally:
                watch.stop()
            end_ms = now_ms()
        session.close()
        self._save(
            Cassette(
                request=CassetteRequest(
                    method=request.method,
                    url=url,
                    # The host the client named is the proxy's; record the upstream's.
                    headers=[
                        (k, self._netloc if k == "host" else v)
                        for k, v in request.headers
                    ],
                    body=request.body,
                ),
                response=CassetteResponse(
                    status=response.status_code,
                    reason=response.reason or "",
                    headers=kept,
                    at_ms=head_ms,
                    framing=framing,
                    reads=reads,
                    ended=ended,
                    end_ms=end_ms,
                ),
                base_path=self._base_path,
                adapter=self._adapter,
            )
        )
        if ended != "complete":
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            return False
        if framing == "chunked":
            send(sock, b"0\r\n\r\n")
            return True
        if framing == "length":
            return True
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_WR)
        return False

    def _upstream_answered(self) -> bool:
        """Leave the waiting state; whether the call may go on (``stop`` has not
        abandoned it)."""
        with self._lock:
            self._awaiting_upstream.discard(threading.current_thread())
            return not self._abandoned

    def _save(self, cassette: Cassette) -> None:
        redacted = redact_exchange(cassette, self._secrets)
        with self._lock:
            self._count += 1
            path = self._path_for(self._count)
            path.parent.mkdir(parents=True, exist_ok=True)
            redacted.dump(path)
            self._paths.append(path)

    def _path_for(self, count: int) -> Path:
        where = self._where
        if where.is_dir() or not where.suffix:
            return where / f"call-{count:03d}.jsonl"
        if count == 1:
            return where
        return where.with_name(f"{where.stem}-{count}{where.suffix}")


class _ClientWatch:
    """While a body is forwarded, watches the client's socket: when the client
    leaves (an abort), the upstream connection is shut down, so a read blocked
    on a silent upstream ends at once instead of at the upstream timeout."""

    def __init__(self, client: socket.socket, raw: Any) -> None:
        self._client = client
        self._raw = raw
        self._done = threading.Event()
        self.client_left = False
        """Whether the client went away before the body ended."""
        self._thread = threading.Thread(
            target=self._run, name="recorder-watch", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        while not self._done.wait(0.02):
            try:
                readable, _, _ = select.select([self._client], [], [], 0)
                if not readable or self._client.recv(1, socket.MSG_PEEK):
                    continue  # nothing, or a pipelined request: not a departure
            except (OSError, ValueError):
                pass
            self.client_left = True
            upstream = getattr(getattr(self._raw, "connection", None), "sock", None)
            if isinstance(upstream, socket.socket):
                with contextlib.suppress(OSError):
                    upstream.shutdown(socket.SHUT_RDWR)
            return

    def stop(self) -> None:
        self._done.set()
        self._thread.join()


def _body_reads(raw: Any, framing: Framing) -> Iterator[bytes]:
    """Each body read as it arrives: one HTTP chunk at a time on a chunked body,
    whatever one ``read1`` returns otherwise."""
    if framing == "chunked":
        for data in raw.read_chunked(decode_content=True):
            if data:
                yield bytes(data)
        return
    while True:
        data = raw.read1(READ_SIZE, decode_content=True)
        if not data:
            return
        yield bytes(data)


def _read_request(
    sock: socket.socket, buffer: bytes
) -> tuple[CassetteRequest | None, bytes]:
    parts, rest = read_request(sock, buffer, max_head=_MAX_HEAD)
    if parts is None:
        return None, rest
    method, target, headers, body = parts
    return CassetteRequest(method=method, url=target, headers=headers, body=body), rest


@contextlib.contextmanager
def record(
    upstream_base_url: str,
    cassette_dir_or_path: str | Path,
    *,
    secrets: Iterable[str | Secret] = (),
    adapter: str | None = None,
    upstream_timeout_s: float = 300.0,
) -> Iterator[Recording]:
    """Record every call made through the yielded proxy (see the module docstring).

    Example::

        with record("http://127.0.0.1:8000/v1", "cassettes/") as rec:
            with OpenAICompatAdapter(rec.base_url) as adapter:
                list(adapter.stream(options))
        rec.paths  # (PosixPath('cassettes/call-001.jsonl'),)
    """
    recording = Recording(
        upstream_base_url,
        cassette_dir_or_path,
        secrets=secrets,
        adapter=adapter,
        upstream_timeout_s=upstream_timeout_s,
    ).start()
    try:
        yield recording
    finally:
        recording.stop()


def record_call(
    adapter_factory: AdapterFactory,
    options: GenerateOptions,
    path: str | Path,
    *,
    upstream: str,
    secrets: Iterable[str | Secret] = (),
    on_chunk: Callable[[StreamChunk], object] | None = None,
    adapter: str | None = None,
    upstream_timeout_s: float = 300.0,
) -> list[StreamChunk]:
    """Make one call through a recording proxy and write its cassette to ``path``.

    ``adapter_factory(base_url)`` builds the adapter pointed at the proxy. Each
    chunk is strictly validated and handed to ``on_chunk`` as it arrives; the
    chunks are returned. The cassette is written whether the call succeeds or
    fails (a 429 is worth keeping too).

    Raises:
        LlmError: what the adapter raised, or ``INVARIANT`` for a stream that
            breaks the protocol (the cassette is written first).
    """
    chunks: list[StreamChunk] = []
    with record(
        upstream,
        path,
        secrets=secrets,
        adapter=adapter,
        upstream_timeout_s=upstream_timeout_s,
    ) as recording:
        built = adapter_factory(recording.base_url)
        try:
            stream = built.stream(options)
            try:
                for chunk in validate_stream(stream, strict=True):
                    chunks.append(chunk)
                    if on_chunk is not None:
                        on_chunk(chunk)
            finally:
                close_stream(stream)
        finally:
            close_adapter(built)
    return chunks
