"""``StreamingCall``: one streaming HTTP request, from send to close.

It owns the I/O of one model call; adapters own what the bytes mean.

- ``open()`` checks the signal, sends the request (no redirects, no retries) and
  raises ``LlmError`` for a non-2xx status (``classify_error``, by default
  ``http_errors.http_error``), a response without a body, or a 2xx answer that is
  not a stream; informational responses are skipped.
- ``chunks()`` yields body bytes as they arrive (chunked framing decoded here,
  ``raw.read1`` otherwise), the watchdog bounding every wait.
- Cancellation ends every stage (resolve, connect, TLS, sending, waiting for
  headers, reading) within milliseconds (``dsh_llm.transport.connect``).
- ``failure(exc)``, ``redacted`` and ``redacted_finish`` classify and clean what
  goes up: secrets (the auth object's ``secret``, secret-named headers, URL
  credentials) never reach a message, a cause or a finish.
- A request that failed on a reused pooled connection which the server closed
  before a single response byte is sent once more, on a new connection.
- ``finish()`` drains a framed body briefly so its connection is reused, unless
  the server closes connections after a stream (``Server: llama.cpp``, or its
  close seen at the end of the body); ``close()`` always releases or closes the
  response.
- The full contract, point by point: ``docs/transport.md``.
"""

from __future__ import annotations

import contextlib
import http.client
import select
import socket
import time
import urllib.parse
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Mapping
from typing import Any
from typing import Final

import attrs
import requests

from dsh_llm.credentials import Secret
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import Finish
from dsh_llm.protocol import LlmFailure
from dsh_llm.signal import AbortSignal
from dsh_llm.transport.chunked import ChunkedBodyReader
from dsh_llm.transport.errors_map import code_for_exception
from dsh_llm.transport.errors_map import reason_for_exception
from dsh_llm.transport.http_errors import HttpErrorClassifier
from dsh_llm.transport.http_errors import http_error
from dsh_llm.transport.http_errors import not_a_stream_error
from dsh_llm.transport.ratelimits import rate_limits
from dsh_llm.transport.redaction import Redactor
from dsh_llm.transport.redaction import is_secret_name
from dsh_llm.transport.redaction import may_quote_request
from dsh_llm.transport.session import SocketSlot
from dsh_llm.transport.session import capture_socket
from dsh_llm.transport.session import closes_after_stream
from dsh_llm.transport.session import note_closes_after_stream
from dsh_llm.transport.watchdog import Expiry
from dsh_llm.transport.watchdog import StreamWatchdog

__all__ = [
    "CLOSING_SERVERS",
    "CONNECT_TIMEOUT_MS",
    "DRAIN_GRACE_S",
    "NOT_A_STREAM_TYPES",
    "READ_SIZE",
    "StreamingCall",
    "redact_url",
    "url_repr",
]

READ_SIZE: Final = 65536
"""Largest single read (``read1`` returns less whenever less is available)."""
CONNECT_TIMEOUT_MS: Final = 10_000
"""The default bound on opening a connection (resolve, TCP connect), apart from
the idle bound: a server that cannot be reached fails in seconds, not after the
300 s a silent model may take."""
DRAIN_GRACE_S: Final = 0.05
"""How long ``finish()`` waits for the end of a body before closing the
connection instead of reusing it."""
NOT_A_STREAM_TYPES: Final = frozenset({"application/json", "text/html"})
"""2xx media types that are an answer, not a stream (see the module docstring)."""
CLOSING_SERVERS: Final = frozenset({"llama.cpp"})
"""Product tokens of a ``Server`` header whose server closes every connection
that carried a stream while advertising keep-alive (llama.cpp's ``llama-server``
sends ``Server: llama.cpp``): such connections are never pooled."""
_KNOWN_CODES: Final = frozenset(code.value for code in ErrorCode)
_MAX_ERROR_BODY: Final = 1024 * 1024
_DRAIN_LIMIT: Final = 64 * 1024

_monotonic = time.monotonic


def redact_url(url: str) -> str:
    """``url`` with its credentials replaced by ``***``: the user info
    (``user:password@``) and the value of every query parameter whose name marks
    a secret (``?key=``, ``?api_key=``, ``?token=``...; see
    ``dsh_llm.transport.redaction.is_secret_name``), so a credential written into
    a URL never reaches a message or a repr."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return url if "@" not in url and "?" not in url else "<invalid URL>"
    redacted = parts
    if "@" in parts.netloc:
        host = parts.netloc.rpartition("@")[2]
        redacted = redacted._replace(netloc=f"***@{host}")
    if parts.query:
        redacted = redacted._replace(query=_redact_query(parts.query))
    return url if redacted == parts else urllib.parse.urlunsplit(redacted)


def url_repr(url: object) -> str:
    """``repr`` of a URL field with ``redact_url`` applied (any other value as
    ``repr`` shows it): for ``attrs.field(repr=url_repr)``."""
    return repr(redact_url(url)) if isinstance(url, str) else repr(url)


def _redact_query(query: str) -> str:
    pairs = []
    for pair in query.split("&"):
        name, equals, _ = pair.partition("=")
        secret = equals and is_secret_name(urllib.parse.unquote_plus(name))
        pairs.append(f"{name}=***" if secret else pair)
    return "&".join(pairs)


def _readable(sock: socket.socket) -> bool:
    # An idle connection is never readable: a close (FIN, reset, TLS
    # close_notify) or stray bytes make it so (urllib3's own dropped test).
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


def _at_eof(sock: socket.socket) -> bool:
    # Peeks at the TCP stream itself (under TLS too, where a close_notify or
    # any other record is data): only an end of stream or a reset is a close.
    try:
        return not socket.socket.recv(sock, 1, socket.MSG_PEEK)
    except BlockingIOError:
        return False
    except (OSError, ValueError):
        return True


def _reason_suffix(exc: BaseException) -> str:
    reason = reason_for_exception(exc)
    return "" if reason is None else f": {reason}"


def _ms(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _with_rate_limits(error: LlmError, headers: Mapping[str, str]) -> LlmError:
    """``error`` carrying the rate limits ``headers`` report (``error`` itself
    when they report none or it carries some already)."""
    if error.rate_limits is not None:
        return error
    limits = rate_limits(headers)
    if limits is None:
        return error
    failure = attrs.evolve(error.failure, rate_limits=limits)
    return LlmError.from_failure(failure, cause=error.__cause__)


class _DeadlinePassed(Exception):
    """Raised inside the read loop when a watchdog deadline has passed."""


class StreamingCall:
    """One streaming request (see the module docstring).

    Args:
        session: The adapter's session (from ``create_session``).
        url: The full request URL.
        body: The encoded request body.
        headers: Request headers (see ``stream_headers``).
        auth: ``BearerAuth``, ``NoAuth`` or another auth object; its ``secret``
            attribute (a ``Secret`` or ``str``), when it has one, is redacted.
        provider: Display name for messages, e.g. ``"DeepSeek"``.
        endpoint: The base URL named in messages (user info is redacted).
        signal: Cancellation, or ``None``.
        idle_timeout_ms: ``stream_idle_timeout_ms``.
        keepalive_timeout_ms: The keep-alive bound, or ``None``.
        total_timeout_ms: The total bound, or ``None``.
        method: The HTTP method.
        connect_timeout_ms: The bound on opening the connection (also never
            above the time the watchdog leaves).
        secrets: Secrets to redact besides those found in ``auth``, ``headers``
            and ``url`` (see ``dsh_llm.transport.redaction``).
        expected: What the body should be, for messages (``"an event stream"``).
        classify_error: Builds the ``LlmError`` of a non-2xx answer (default
            ``http_errors.http_error``), for a family whose error bodies have
            their own shape; it is given this call's ``redact``.
        stream: Whether a 2xx body must be a stream; ``False`` takes any 2xx
            answer as it is, a JSON document or no body (``dsh_llm.transport.fetch``).
    """

    def __init__(
        self,
        session: requests.Session,
        *,
        url: str,
        body: bytes,
        headers: Mapping[str, str],
        auth: requests.auth.AuthBase,
        provider: str,
        endpoint: str,
        signal: AbortSignal | None,
        idle_timeout_ms: float,
        keepalive_timeout_ms: float | None,
        total_timeout_ms: float | None,
        method: str = "POST",
        connect_timeout_ms: float = CONNECT_TIMEOUT_MS,
        secrets: Iterable[str | Secret] = (),
        expected: str = "an event stream",
        classify_error: HttpErrorClassifier | None = None,
        stream: bool = True,
    ) -> None:
        self._session = session
        self._stream = stream
        self._connect_timeout_ms = connect_timeout_ms
        self._url = url
        self._body = body
        self._headers = dict(headers)
        self._auth = auth
        self._method = method
        self.provider = provider
        """The provider's display name."""
        self.endpoint = redact_url(endpoint)
        """The base URL named in messages (user info replaced by ``***``)."""
        self._expected = expected
        keys: list[str | Secret] = list(secrets)
        secret = getattr(auth, "secret", None)
        if isinstance(secret, str | Secret):
            keys.append(secret)
        self._classify_error = classify_error
        self.redact = Redactor.for_request(url=url, headers=headers, secrets=keys)
        """Redacts this request's secrets from server-supplied text."""
        self._signal = signal
        self.watchdog = StreamWatchdog(
            idle_ms=idle_timeout_ms,
            keepalive_ms=keepalive_timeout_ms,
            total_ms=total_timeout_ms,
            now=_monotonic(),
        )
        """The call's deadlines."""
        self._slot = SocketSlot()
        self._remove_listener: Any = None
        self._response: requests.Response | None = None
        self._expired: Expiry | None = None
        self._aborted = False
        self._reusable = False
        self._closed = False
        self._read: Callable[[], bytes] | None = None
        self._chunked: ChunkedBodyReader | None = None
        self._inner: Any = None
        self._eof = False

    # -- sending ------------------------------------------------------------------

    @property
    def aborted(self) -> bool:
        """Whether the caller's signal aborted this call (then ``abort_error()``
        is what to raise)."""
        return self._aborted

    def abort_error(self) -> LlmError:
        """The ``ABORTED`` error of this call (``"<provider> request aborted by
        caller"``)."""
        return self._abort_error(None)

    @property
    def response(self) -> requests.Response | None:
        """The response once ``open()`` received its headers."""
        return self._response

    def open(self) -> requests.Response:
        """Send the request and check the status (see the module docstring).

        Raises:
            LlmError: ``ABORTED``, ``TRANSPORT``, ``TIMEOUT``, an HTTP status code,
                or ``EMPTY_RESPONSE``.
        """
        signal = self._signal
        if signal is not None:
            if signal.aborted:
                raise self._abort_error(None)
            self._remove_listener = signal.add_listener(self._on_abort)
        failed: LlmError | None = None
        response: requests.Response | None = None
        slot = self._slot
        while response is None and failed is None:
            try:
                response = self._send()
            except Exception as exc:
                if self._may_resend():
                    # The request crossed the server's close of an idle pooled
                    # connection: the server never answered it (docs/transport.md).
                    slot.fresh_connection = True
                    continue
                failed = self._send_failure(exc)
        if failed is not None:
            # Raised here, not in the except block, so the original (which may
            # quote a header) is not kept as __context__ either.
            raise failed
        assert response is not None
        self._response = response
        if self._aborted:
            raise self._abort_error(None)
        status = response.status_code
        if not 200 <= status < 300:
            body = self._read_error_body()
            if self._aborted:
                raise self._abort_error(None)
            classify = self._classify_error
            if classify is not None:
                error = classify(status, response.headers, body, redact=self.redact)
            else:
                error = http_error(
                    status,
                    response.headers,
                    body,
                    provider=self.provider,
                    redact=self.redact,
                )
            # Every field of the error is server text (a request id too).
            raise self.redacted(_with_rate_limits(error, response.headers))
        if not self._stream:
            return response
        if status == 204 or response.headers.get("content-length", "").strip() == "0":
            raise LlmError(
                f"{self.provider} API returned no response body",
                ErrorCode.EMPTY_RESPONSE,
            )
        media_type = (
            response.headers.get("content-type", "").partition(";")[0].strip().lower()
        )
        if media_type in NOT_A_STREAM_TYPES:
            body = self._read_error_body()
            if self._aborted:
                raise self._abort_error(None)
            raise not_a_stream_error(
                response.headers,
                body,
                provider=self.provider,
                content_type=media_type,
                expected=self._expected,
                redact=self.redact,
            )
        return response

    def _send(self) -> requests.Response:
        remaining, _ = self.watchdog.remaining(_monotonic())
        with capture_socket(self._slot):
            return self._session.request(
                self._method,
                self._url,
                data=self._body,
                headers=self._headers,
                auth=self._auth,
                stream=True,
                timeout=(
                    min(remaining, self._connect_timeout_ms / 1000),
                    remaining,
                ),
                allow_redirects=False,
            )

    def _may_resend(self) -> bool:
        """Whether the failed send is sent once more: it went on a reused pooled
        connection the server closed before a single byte of an answer, it was
        the first attempt, and the caller has not aborted."""
        slot = self._slot
        return (
            slot.reused
            and slot.closed_unanswered
            and not slot.fresh_connection
            and not self._aborted
            and not (self._signal is not None and self._signal.aborted)
            and self.watchdog.remaining(_monotonic())[0] > 0
        )

    def _send_failure(self, exc: BaseException) -> LlmError:
        if self._aborted or (self._signal is not None and self._signal.aborted):
            return self._abort_error(exc)
        if isinstance(exc, requests.exceptions.ConnectTimeout):
            bound = min(self._connect_timeout_ms, self.watchdog.idle_ms)
            return LlmError(
                f"{self.provider} API request to {self.endpoint} failed: no "
                f"connection within {_ms(bound)}ms",
                ErrorCode.TIMEOUT,
                cause=self._clean(exc),
            )
        code = code_for_exception(exc)
        if code == ErrorCode.TIMEOUT:
            return self._timeout_error(self._expiry_now(), exc)
        return LlmError(
            f"{self.provider} API request to {self.endpoint} failed"
            + _reason_suffix(exc),
            code,
            cause=self.redact.cause(exc, withhold=may_quote_request(exc)),
        )

    def _read_error_body(self) -> bytes:
        parts: list[bytes] = []
        size = 0
        try:
            for data in self.chunks():
                parts.append(data)
                size += len(data)
                if size >= _MAX_ERROR_BODY:
                    break
        except Exception:
            # The status is the fact that matters; keep whatever body arrived.
            pass
        return b"".join(parts)

    # -- reading ------------------------------------------------------------------

    def _reader(self) -> Callable[[], bytes]:
        """The function returning the next body bytes (``b""`` at the end)."""
        reader = self._read
        if reader is not None:
            return reader
        response = self._response
        assert response is not None, "open() first"
        raw = response.raw
        encoding = response.headers.get("content-encoding", "identity").lower()
        decode = encoding not in ("identity", "")
        # urllib3 keeps the http.client response in ``_fp``; when the body is
        # chunked and untouched, decode its framing ourselves, many chunks per
        # read (see dsh_llm.transport.chunked). Otherwise read through urllib3.
        inner = getattr(raw, "_fp", None)
        fp = getattr(inner, "fp", None)
        if (
            not decode
            and getattr(inner, "chunked", False)
            and getattr(inner, "chunk_left", 0) is None
            and fp is not None
        ):
            self._chunked = ChunkedBodyReader(fp.read1, READ_SIZE)
            self._inner = inner
            reader = self._chunked.read
        else:

            def reader() -> bytes:
                return raw.read1(READ_SIZE, decode_content=decode)  # type: ignore[no-any-return]

        self._read = reader
        return reader

    def chunks(self) -> Iterator[bytes]:
        """Yield body bytes as they arrive (see the module docstring).

        Raises:
            Exception: whatever the read raised; pass it to ``failure()``.
        """
        read = self._reader()
        sock = self._slot.sock
        watchdog = self.watchdog
        while True:
            if self._aborted:
                raise self._abort_error(None)
            now = _monotonic()
            remaining, which = watchdog.remaining(now)
            if remaining <= 0:
                self._expired = which
                raise _DeadlinePassed(which.value)
            if sock is not None:
                sock.settimeout(remaining)
            data = read()
            if not data:
                if self._aborted:
                    raise self._abort_error(None)
                self._eof = True
                return
            watchdog.last_bytes = _monotonic()
            yield data

    def note_data(self) -> None:
        """A data event arrived: re-arm the idle and keep-alive deadlines."""
        self.watchdog.note_data(_monotonic())

    def pause(self) -> None:
        """A chunk goes to the consumer: its think time is not idle time."""
        self.watchdog.pause(_monotonic())

    def resume(self) -> None:
        """The consumer asks for more: count waiting time again."""
        self.watchdog.resume(_monotonic())

    # -- failures -----------------------------------------------------------------

    def failure(self, exc: BaseException) -> LlmError:
        """The ``LlmError`` to raise for ``exc`` raised while streaming."""
        if self._expired is not None:
            return self._timeout_error(self._expired, exc)
        if self._aborted or (self._signal is not None and self._signal.aborted):
            return self._abort_error(exc)
        if isinstance(exc, LlmError):
            return exc
        code = code_for_exception(exc)
        if code == ErrorCode.TIMEOUT:
            return self._timeout_error(self._expiry_now(), exc)
        if code == ErrorCode.MALFORMED_RESPONSE:
            message = (
                f"{self.provider} API stream from {self.endpoint} could not be decoded"
            )
        elif isinstance(exc, http.client.IncompleteRead):
            # A clean close before the zero-size chunk: the same cut as a
            # close-delimited body ending early, so the same code.
            code = ErrorCode.STREAM_CLOSED
            message = (
                f"{self.provider} API stream from {self.endpoint} ended before the "
                "end of its chunked body"
            )
        else:
            code = ErrorCode.TRANSPORT
            message = (
                f"{self.provider} API stream from {self.endpoint} failed"
                + _reason_suffix(exc)
            )
        return LlmError(message, code, cause=self.redact.cause(exc))

    def redacted(self, error: LlmError) -> LlmError:
        """``error`` with this request's secrets replaced by ``***`` in its message
        and request id (``error`` itself when it shows none), a code that would
        show one made ``UNKNOWN_FINISH_REASON`` (as ``redacted_finish``); its
        cause is cleaned the same way."""
        failure = self._cleaned(error.failure)
        if failure is None:
            return error
        cause = error.__cause__
        return LlmError.from_failure(
            failure,
            cause=None if cause is None else self.redact.cause(cause, withhold=True),
        )

    def redacted_finish(self, finish: Finish) -> Finish:
        """A failure ``finish`` with this request's secrets redacted from its
        message and request id; a code that would show one becomes
        ``UNKNOWN_FINISH_REASON``."""
        failure = finish.reason.failure
        cleaned = None if failure is None else self._cleaned(failure)
        if cleaned is None:
            return finish
        reason = attrs.evolve(finish.reason, failure=cleaned)
        return attrs.evolve(finish, reason=reason)

    def _cleaned(self, failure: LlmFailure) -> LlmFailure | None:
        # ``failure`` with secrets redacted from its message, code and request
        # id, or None when none of them shows one.
        redact = self.redact
        message = failure.message
        code = failure.code
        clean = redact(message)
        clean_code = code
        if redact(code) != code or (
            # A code made from server text (an upper-cased finish reason) that
            # the redacted message quoted may spell a secret in other letters.
            clean != message
            and code not in _KNOWN_CODES
            and code.casefold() in message.casefold()
        ):
            clean_code = ErrorCode.UNKNOWN_FINISH_REASON.value
        # A request id is server text too: an echoed key must not ride on it.
        request_id = failure.request_id
        clean_id = None if request_id is None else redact(request_id)
        if clean == message and clean_code == code and clean_id == request_id:
            return None
        return attrs.evolve(
            failure, message=clean, code=clean_code, request_id=clean_id
        )

    def _expiry_now(self) -> Expiry:
        _, which = self.watchdog.remaining(_monotonic())
        self._expired = which
        return which

    def _timeout_error(self, which: Expiry, cause: BaseException | None) -> LlmError:
        watchdog = self.watchdog
        if which is Expiry.TOTAL:
            assert watchdog.total_ms is not None
            message = (
                f"{self.provider} stream exceeded its total timeout of "
                f"{_ms(watchdog.total_ms)}ms"
            )
        elif which is Expiry.KEEPALIVE:
            assert watchdog.keepalive_ms is not None
            bound = max(watchdog.idle_ms, watchdog.keepalive_ms)
            message = (
                f"{self.provider} stream idle timeout: no data for {_ms(bound)}ms, "
                "only keep-alive comments"
            )
        else:
            message = (
                f"{self.provider} stream idle timeout after {_ms(watchdog.idle_ms)}ms"
            )
        return LlmError(message, ErrorCode.TIMEOUT, cause=self._clean(cause))

    def _abort_error(self, cause: BaseException | None) -> LlmError:
        return LlmError(
            f"{self.provider} request aborted by caller",
            ErrorCode.ABORTED,
            cause=self._clean(cause),
        )

    def _clean(self, cause: BaseException | None) -> BaseException | None:
        if cause is None or isinstance(cause, LlmError):
            return cause
        return self.redact.cause(cause, withhold=may_quote_request(cause))

    def _on_abort(self) -> None:
        # Runs in the aborting thread: wake any blocked read and end the connection.
        self._aborted = True
        self._slot.interrupt()
        response = self._response
        if response is not None and self._slot.sock is None:
            with contextlib.suppress(ValueError, RuntimeError, OSError):
                response.raw.shutdown()

    # -- ending ------------------------------------------------------------------

    def finish(self) -> None:
        """After the terminal event: read the rest of a framed body (at most
        ``DRAIN_GRACE_S`` and 64 KiB) so the connection can be reused; a body
        still open after that is left for ``close()`` to close. Never raises."""
        response = self._response
        if response is None or self._aborted:
            return
        raw = response.raw
        if not (raw.chunked or response.headers.get("content-length")):
            return
        deadline = _monotonic() + min(DRAIN_GRACE_S, self.watchdog.idle_ms / 1000)
        sock = self._slot.sock
        read = self._reader()
        drained = 0
        try:
            while not self._eof:
                remaining = deadline - _monotonic()
                if remaining <= 0:
                    return
                if sock is not None:
                    sock.settimeout(remaining)
                data = read()
                if not data:
                    break
                drained += len(data)
                if drained > _DRAIN_LIMIT:
                    return
            if self._chunked is not None and not self._chunked.clean:
                return
            if self._inner is not None:
                # The body was decoded here, not by http.client: mark its
                # response finished so the connection takes a new request.
                self._inner.close()
        except Exception:
            return
        if self._server_closes(response, sock):
            return
        self._reusable = True

    def _server_closes(
        self, response: requests.Response, sock: socket.socket | None
    ) -> bool:
        """Whether this connection is not pooled after the stream: the server
        closes it (see ``CLOSING_SERVERS``), known from its ``Server`` header or
        from an earlier close, or the connection is readable at the end of the
        body (the server's close, or bytes no request asked for). A close seen
        (the end of the TCP stream, or a reset) is remembered for the session,
        so the next stream's connection is not pooled either."""
        product = response.headers.get("server", "").partition("/")[0]
        if product.strip().lower() in CLOSING_SERVERS:
            return True
        if closes_after_stream(self._session, self._url):
            return True
        if sock is None or not _readable(sock):
            return False
        if _at_eof(sock):
            note_closes_after_stream(self._session, self._url)
        return True

    def close(self) -> None:
        """Release the connection to the pool after a complete read, else close it;
        remove the abort listener. Idempotent, never raises."""
        if self._closed:
            return
        self._closed = True
        remove = self._remove_listener
        self._remove_listener = None
        if remove is not None:
            remove()
        self._slot.release()
        response = self._response
        if response is None:
            return
        try:
            if self._reusable:
                response.raw.release_conn()
            response.close()
        except Exception:
            # Closing a connection that already failed can raise; it is closed
            # either way and the caller's outcome is already decided.
            pass

    def __enter__(self) -> StreamingCall:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
