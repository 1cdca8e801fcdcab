"""The exception table (dsh_llm.transport.errors_map)."""

from __future__ import annotations

import errno
import http.client
import inspect
import socket
import ssl

import pytest
import requests.exceptions as rx
import urllib3.exceptions as ux

from dsh_llm.errors import ErrorCode
from dsh_llm.transport.errors_map import EXCEPTION_CODES
from dsh_llm.transport.errors_map import code_for_exception
from dsh_llm.transport.errors_map import reason_for_exception


def _requests_exception_classes() -> list[type[BaseException]]:
    return [
        cls
        for _, cls in inspect.getmembers(rx, inspect.isclass)
        if issubclass(cls, BaseException) and cls.__module__ == rx.__name__
    ]


def test_every_requests_exception_class_is_in_the_table():
    classes = _requests_exception_classes()
    assert len(classes) >= 20
    missing = [cls.__name__ for cls in classes if cls not in EXCEPTION_CODES]
    assert missing == []


def test_every_code_is_a_known_error_code():
    assert all(isinstance(code, ErrorCode) for code in EXCEPTION_CODES.values())


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (rx.ConnectTimeout(), ErrorCode.TIMEOUT),
        (rx.ReadTimeout(), ErrorCode.TIMEOUT),
        (rx.ConnectionError(), ErrorCode.TRANSPORT),
        (
            rx.ConnectionError(ux.ReadTimeoutError(None, None, "Read timed out.")),
            ErrorCode.TIMEOUT,
        ),
        (rx.ChunkedEncodingError(), ErrorCode.TRANSPORT),
        (rx.InvalidURL(), ErrorCode.INVALID_REQUEST),
        (rx.MissingSchema(), ErrorCode.INVALID_REQUEST),
        (rx.ContentDecodingError(), ErrorCode.MALFORMED_RESPONSE),
        (ux.ReadTimeoutError(None, None, "x"), ErrorCode.TIMEOUT),
        (ux.ProtocolError("x"), ErrorCode.TRANSPORT),
        (http.client.IncompleteRead(b""), ErrorCode.TRANSPORT),
        (TimeoutError(), ErrorCode.TIMEOUT),
        (ConnectionResetError(), ErrorCode.TRANSPORT),
        (ValueError(), ErrorCode.TRANSPORT),
        (UnicodeEncodeError("latin-1", "\u20ac", 0, 1, "x"), ErrorCode.INVALID_REQUEST),
        (UnicodeDecodeError("utf-8", b"\xff", 0, 1, "x"), ErrorCode.TRANSPORT),
    ],
)
def test_the_most_specific_class_decides(exc, code):
    assert code_for_exception(exc) == code


def _wrapped(inner: BaseException) -> rx.ConnectionError:
    """How requests reports a failed connect: ConnectionError(MaxRetryError(
    reason=NewConnectionError)), the OS error as the new error's cause."""
    try:
        try:
            raise inner
        except BaseException as exc:
            raise ux.NewConnectionError(  # type: ignore[arg-type]
                None, "Failed to establish a new connection"
            ) from exc
    except ux.NewConnectionError as new:
        retry = ux.MaxRetryError(None, "/v1", reason=new)  # type: ignore[arg-type]
        return rx.ConnectionError(retry)


@pytest.mark.parametrize(
    ("exc", "reason"),
    [
        (
            _wrapped(ConnectionRefusedError(errno.ECONNREFUSED, "x")),
            "connection refused",
        ),
        (
            _wrapped(socket.gaierror(-2, "Name or service not known")),
            "host name not resolved",
        ),
        (
            ux.NameResolutionError("h.test", None, socket.gaierror()),  # type: ignore[arg-type]
            "host name not resolved",
        ),
        (
            rx.SSLError(ssl.SSLCertVerificationError("bad cert")),
            "TLS certificate not accepted",
        ),
        (rx.SSLError("handshake"), "TLS handshake failed"),
        (rx.ProxyError("proxy said no"), "the proxy failed"),
        (
            rx.ChunkedEncodingError(ConnectionResetError(errno.ECONNRESET, "x")),
            "connection reset",
        ),
        (_wrapped(OSError(errno.ENETUNREACH, "x")), "network unreachable"),
        (_wrapped(OSError(errno.EHOSTUNREACH, "x")), "host unreachable"),
        (
            rx.ConnectionError(http.client.RemoteDisconnected("closed")),
            "the server closed the connection without answering",
        ),
        (
            rx.InvalidSchema("Missing dependencies for SOCKS support."),
            "a SOCKS proxy is configured but SOCKS support is not installed "
            "(pip install 'requests[socks]')",
        ),
        (rx.ConnectionError("something else"), None),
        (ValueError("unrelated"), None),
    ],
)
def test_the_reason_names_why_a_connection_failed(
    exc: BaseException, reason: str | None
) -> None:
    assert reason_for_exception(exc) == reason


def test_the_reason_of_a_cyclic_chain_is_found_without_looping() -> None:
    first = rx.ConnectionError("outer")
    second = OSError(errno.EIO, "inner")
    first.__context__ = second
    second.__context__ = first
    assert reason_for_exception(first) is None
    refused = ConnectionRefusedError(errno.ECONNREFUSED, "x")
    refused.__context__ = first
    first.__cause__ = refused
    assert reason_for_exception(first) == "connection refused"
