"""Bedrock error reports, over HTTP or inside the event stream, turned into codes.

Bedrock names every failure with an exception type: the ``x-amzn-errortype``
header (``ValidationException:http://...``) or the body's ``__type`` of an HTTP
error, and the ``:exception-type`` header of an exception frame
(``throttlingException``). This module classifies by that name first (compared
without case, so both spellings meet) and falls back to the shared classifier
(``dsh_llm.transport.http_errors.error_code``) for a name it does not know.

- ``error_code(status, exception_type, message)``: ``EXCEPTION_CODES`` (a
  ``validationException`` saying the input is too long is
  ``CONTEXT_WINDOW_EXCEEDED``); any other name: the shared classifier.
- ``http_error(status, headers, body, ...)`` returns (never raises) the
  ``LlmError`` of a non-2xx answer: the shared ``http_error``'s message, cause
  and ``retry-after`` delay, the code above, the ``x-amzn-requestid`` header as
  the request id.
- ``stream_failure(exception_type, payload, provider=...)`` is the ``LlmFailure``
  of an exception frame (``{"message": ...}``; no status: the stream's 200 says
  nothing). Server text is redacted by the read loop, not here.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any
from typing import Final

from dsh_llm.errors import ErrorCode
from dsh_llm.errors import is_context_window_exceeded_error
from dsh_llm.protocol import LlmFailure
from dsh_llm.transport import http_errors

_AUTH: Final = ErrorCode.AUTH.value
_SERVER: Final = ErrorCode.SERVER.value
_INVALID: Final = ErrorCode.INVALID_REQUEST.value

EXCEPTION_CODES: Final[Mapping[str, str]] = {
    "throttlingexception": ErrorCode.RATE_LIMIT.value,
    "servicequotaexceededexception": ErrorCode.QUOTA.value,
    "validationexception": _INVALID,
    "resourcenotfoundexception": _INVALID,
    "accessdeniedexception": _AUTH,
    "unrecognizedclientexception": _AUTH,
    "invalidsignatureexception": _AUTH,
    "incompletesignatureexception": _AUTH,
    "missingauthenticationtokenexception": _AUTH,
    "expiredtokenexception": _AUTH,
    "invalidclienttokenid": _AUTH,
    # The model failed while answering (424), or is still loading (429 without
    # throttling): transient, a retry may help.
    "modelstreamerrorexception": _SERVER,
    "modelerrorexception": _SERVER,
    "modelnotreadyexception": _SERVER,
    "internalserverexception": _SERVER,
    "serviceunavailableexception": _SERVER,
    "modeltimeoutexception": ErrorCode.TIMEOUT.value,
}
"""Bedrock's exception names (lower-cased) and their codes."""

PROVIDER: Final = "Amazon Bedrock"
"""The display name messages use."""
REQUEST_ID_HEADER: Final = "x-amzn-requestid"
"""The header Bedrock names its request id in."""

# Bedrock's wordings for an over-long prompt ("Input is too long for requested
# model", "prompt is too long: 201234 tokens > 200000 maximum").
_TOO_LONG: Final = re.compile(
    r"\b(?:input|prompt) is too long\b|\btoo many (?:input )?tokens\b", re.IGNORECASE
)


def exception_name(value: str) -> str:
    """The bare exception name of an ``x-amzn-errortype`` header or a ``__type``
    (``ValidationException:http://...`` and ``com.amazon...#ValidationException``
    are ``ValidationException``)."""
    return value.partition(":")[0].rpartition("#")[2].strip()


def error_code(status: int | None, exception_type: str, message: str) -> str:
    """The stable code for a Bedrock failure (see the module docstring).

    Args:
        status: The HTTP status, or ``None`` for an exception frame.
        exception_type: The exception's name (``""`` when there was none).
        message: Its message (``""`` when there was none).
    """
    key = exception_name(exception_type).lower()
    code = EXCEPTION_CODES.get(key)
    if code == _INVALID and (
        _TOO_LONG.search(message) or is_context_window_exceeded_error(message)
    ):
        return ErrorCode.CONTEXT_WINDOW_EXCEEDED.value
    if code is not None:
        return code
    detail = " ".join(part for part in (exception_type, message) if part)
    return http_errors.error_code(status, detail, key)


def _report(value: Any) -> tuple[str, str]:
    """``(__type, message)`` of a Bedrock JSON error body (``message`` or
    ``Message``)."""
    if not isinstance(value, dict):
        return "", ""
    kind = value.get("__type")
    message = value.get("message", value.get("Message"))
    return (
        kind if isinstance(kind, str) else "",
        message if isinstance(message, str) else "",
    )


def read_answer(
    status: int, headers: Mapping[str, str], value: Any
) -> http_errors.AnswerReading:
    """The reading of a non-2xx Bedrock answer (an ``AnswerReader``): the
    exception named by ``x-amzn-errortype`` (else the body's ``__type``)
    decides the code, and names itself in the message when the body has none."""
    kind, message = _report(value)
    header = http_errors.header(headers, "x-amzn-errortype")
    if header:
        kind = header
    name = exception_name(kind)
    return http_errors.AnswerReading(
        code=error_code(status, kind, message),
        message=message or f"{PROVIDER} API error (HTTP {status}{_named(name)})",
    )


http_error: Final = functools.partial(
    http_errors.http_error,
    provider=PROVIDER,
    read=read_answer,
    request_id_headers=(REQUEST_ID_HEADER, *http_errors.REQUEST_ID_HEADERS),
)
"""The ``LlmError`` for a non-2xx Bedrock answer (returned, not raised): the
shared ``http_errors.http_error`` reading the body with ``read_answer``."""


def _named(name: str) -> str:
    return f", {name}" if name else ""


def stream_failure(
    exception_type: str, payload: Any, *, provider: str = PROVIDER
) -> LlmFailure:
    """The failure of an exception frame: its ``message``, else
    ``"<provider> stream reported a <exception type>"``."""
    _, message = _report(payload)
    if not message:
        message = f"{provider} stream reported a {exception_type or 'failure'}"
    return LlmFailure(message=message, code=error_code(None, exception_type, message))
