"""The one table from HTTP-stack exceptions to stable error codes.

Contracts callers may rely on:

- ``EXCEPTION_CODES`` maps every exception class defined in ``requests.exceptions``
  (a test proves it), plus the ``urllib3``, ``http.client`` and socket exceptions a
  raw body read can raise and the ``UnicodeEncodeError`` of a header value that
  cannot be encoded (``INVALID_REQUEST``: no retry can send it), to an
  ``ErrorCode``.
- ``code_for_exception(exc)`` walks the exception's MRO and returns the code of
  the most specific class in the table (``TRANSPORT`` when none matches), so a
  ``ConnectTimeout`` (both a ``ConnectionError`` and a ``Timeout``) is ``TIMEOUT``.
- ``reason_for_exception(exc)`` names why a connection failed in a fixed
  phrase (``"connection refused"``, ``"host name not resolved"``...), found
  anywhere in the exception's chain of wrapped, cause and context exceptions,
  or ``None``. The phrase never quotes the exception, so it holds no secret.
- The table only names codes; messages, causes and the abort/watchdog precedence
  are decided by the streaming call (``dsh_llm.transport.call``). Several of
  these exceptions quote the request (``InvalidHeader`` and
  ``UnicodeEncodeError`` a header value, ``InvalidURL`` and ``ConnectionError``
  the URL): the streaming call never keeps them as a cause without cleaning them
  (``dsh_llm.transport.redaction``).
"""

from __future__ import annotations

import errno
import http.client
import socket
import ssl
from collections.abc import Callable
from collections.abc import Iterator
from typing import Final

import requests.exceptions as rx
import urllib3.exceptions as ux

from dsh_llm.errors import ErrorCode

__all__ = ["EXCEPTION_CODES", "code_for_exception", "reason_for_exception"]

EXCEPTION_CODES: Final[dict[type[BaseException], ErrorCode]] = {
    # requests.exceptions: every class the module defines.
    rx.RequestException: ErrorCode.TRANSPORT,
    rx.HTTPError: ErrorCode.TRANSPORT,  # only from raise_for_status(), never called
    rx.ConnectionError: ErrorCode.TRANSPORT,
    rx.ProxyError: ErrorCode.TRANSPORT,
    rx.SSLError: ErrorCode.TRANSPORT,
    rx.Timeout: ErrorCode.TIMEOUT,
    rx.ConnectTimeout: ErrorCode.TIMEOUT,
    rx.ReadTimeout: ErrorCode.TIMEOUT,
    rx.TooManyRedirects: ErrorCode.TRANSPORT,  # redirects are disabled for POST
    rx.ChunkedEncodingError: ErrorCode.TRANSPORT,  # abrupt close mid-body
    rx.ContentDecodingError: ErrorCode.MALFORMED_RESPONSE,
    rx.StreamConsumedError: ErrorCode.TRANSPORT,
    rx.RetryError: ErrorCode.TRANSPORT,
    rx.UnrewindableBodyError: ErrorCode.TRANSPORT,
    rx.InvalidJSONError: ErrorCode.INVALID_REQUEST,
    rx.JSONDecodeError: ErrorCode.MALFORMED_RESPONSE,
    # A configured URL or header requests cannot use: retrying cannot help.
    rx.URLRequired: ErrorCode.INVALID_REQUEST,
    rx.MissingSchema: ErrorCode.INVALID_REQUEST,
    rx.InvalidSchema: ErrorCode.INVALID_REQUEST,
    rx.InvalidURL: ErrorCode.INVALID_REQUEST,
    rx.InvalidProxyURL: ErrorCode.INVALID_REQUEST,
    rx.InvalidHeader: ErrorCode.INVALID_REQUEST,
    # http.client encodes header values as Latin-1 while sending; a value it
    # cannot encode fails the same way on every attempt.
    UnicodeEncodeError: ErrorCode.INVALID_REQUEST,
    # Warnings only arrive as exceptions when a warnings filter escalates them;
    # they say nothing about the provider.
    rx.RequestsWarning: ErrorCode.UNKNOWN,
    rx.FileModeWarning: ErrorCode.UNKNOWN,
    rx.RequestsDependencyWarning: ErrorCode.UNKNOWN,
    # Raw body reads (response.raw.read1) raise urllib3 / http.client / socket
    # errors directly, without requests' wrapping.
    ux.HTTPError: ErrorCode.TRANSPORT,
    ux.TimeoutError: ErrorCode.TIMEOUT,
    ux.DecodeError: ErrorCode.MALFORMED_RESPONSE,
    http.client.HTTPException: ErrorCode.TRANSPORT,
    ssl.SSLError: ErrorCode.TRANSPORT,
    TimeoutError: ErrorCode.TIMEOUT,
    OSError: ErrorCode.TRANSPORT,
}
"""Exception class to error code; the most specific class in an MRO wins."""


def code_for_exception(exc: BaseException) -> ErrorCode:
    """The code for ``exc``: the entry of the first class of its MRO found in
    ``EXCEPTION_CODES``, else ``TRANSPORT``.

    ``requests.exceptions.ReadTimeout`` raised while reading a body wraps urllib3's
    ``ReadTimeoutError`` inside a ``ConnectionError``; that wrapping is looked
    through, so it maps to ``TIMEOUT`` like any other read timeout.
    """
    if isinstance(exc, rx.ConnectionError) and exc.args:
        inner = exc.args[0]
        if isinstance(inner, ux.ReadTimeoutError):
            return ErrorCode.TIMEOUT
    for cls in type(exc).__mro__:
        code = EXCEPTION_CODES.get(cls)
        if code is not None:
            return code
    return ErrorCode.TRANSPORT


def _errno_is(*numbers: int) -> Callable[[BaseException], bool]:
    return lambda exc: isinstance(exc, OSError) and exc.errno in numbers


def _socks_missing(exc: BaseException) -> bool:
    # requests raises InvalidSchema("Missing dependencies for SOCKS support.")
    # when a socks:// proxy is configured without PySocks installed.
    return isinstance(exc, rx.InvalidSchema) and "SOCKS" in str(exc)


_REASONS: Final[tuple[tuple[Callable[[BaseException], bool], str], ...]] = (
    (
        _socks_missing,
        "a SOCKS proxy is configured but SOCKS support is not installed "
        "(pip install 'requests[socks]')",
    ),
    (lambda e: isinstance(e, ConnectionRefusedError), "connection refused"),
    (
        lambda e: isinstance(e, socket.gaierror | ux.NameResolutionError),
        "host name not resolved",
    ),
    (
        lambda e: isinstance(e, ssl.SSLCertVerificationError),
        "TLS certificate not accepted",
    ),
    (lambda e: isinstance(e, ssl.SSLError | rx.SSLError), "TLS handshake failed"),
    (lambda e: isinstance(e, ux.ProxyError | rx.ProxyError), "the proxy failed"),
    # A subclass of ConnectionResetError, so it is looked for first.
    (
        lambda e: isinstance(e, http.client.RemoteDisconnected),
        "the server closed the connection without answering",
    ),
    (lambda e: isinstance(e, ConnectionResetError), "connection reset"),
    (lambda e: isinstance(e, ConnectionAbortedError), "connection aborted"),
    (_errno_is(errno.ENETUNREACH), "network unreachable"),
    (_errno_is(errno.EHOSTUNREACH), "host unreachable"),
)

_MAX_CHAIN: Final = 32


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and every exception it wraps (args, ``reason``, cause, context)."""
    pending = [exc]
    seen: set[int] = set()
    while pending and len(seen) < _MAX_CHAIN:
        current = pending.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        linked = [*current.args, getattr(current, "reason", None)]
        linked += [current.__cause__, current.__context__]
        pending.extend(e for e in linked if isinstance(e, BaseException))


def reason_for_exception(exc: BaseException) -> str | None:
    """Why a connection failed, as a fixed phrase, or ``None`` when unknown."""
    chain = list(_chain(exc))
    for matches, reason in _REASONS:
        if any(matches(link) for link in chain):
            return reason
    return None
