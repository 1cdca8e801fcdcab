"""The exception table (dsh_llm.transport.errors_map)."""

from __future__ import annotations

import http.client
import inspect

import pytest
import requests.exceptions as rx
import urllib3.exceptions as ux

from dsh_llm.errors import ErrorCode
from dsh_llm.transport.errors_map import EXCEPTION_CODES, code_for_exception


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
