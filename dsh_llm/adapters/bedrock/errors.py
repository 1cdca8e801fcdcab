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

import json
import re
import time
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any
from typing import Final

from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
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


def _decoded(body: bytes) -> Any:
    try:
        return json.loads(body.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return None


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is None:
        value = next((v for k, v in headers.items() if k.lower() == name), None)
    return value or None


def _unchanged(text: str) -> str:
    return text


def http_error(
    status: int,
    headers: Mapping[str, str],
    body: bytes,
    *,
    provider: str = "Amazon Bedrock",
    now: Callable[[], float] = time.time,
    redact: http_errors.Redact = _unchanged,
) -> LlmError:
    """The ``LlmError`` for a non-2xx Bedrock answer (returned, not raised).

    Args:
        status: The HTTP status.
        headers: The response headers.
        body: The whole response body (possibly empty).
        provider: The display name used when the body has no message.
        now: Current Unix time in seconds, for HTTP-date ``retry-after``.
        redact: Applied to the message, the request id and the body kept as
            the cause.
    """
    kind, message = _report(_decoded(body))
    header = _header(headers, "x-amzn-errortype")
    if header:
        kind = header
    text = message or body.decode("utf-8", "replace")
    cause = Exception(redact(text) if text else f"{provider} HTTP {status}")
    request = _header(headers, REQUEST_ID_HEADER) or http_errors.request_id(headers)
    name = exception_name(kind)
    return LlmError(
        redact(message) or f"{provider} API error (HTTP {status}{_named(name)})",
        error_code(status, kind, message),
        status=status if 100 <= status <= 599 else None,
        provider_retry_after_ms=http_errors.retry_after_ms(headers, now=now),
        request_id=None if request is None else redact(request),
        cause=cause,
    )


def _named(name: str) -> str:
    return f", {name}" if name else ""


def stream_failure(
    exception_type: str, payload: Any, *, provider: str = "Amazon Bedrock"
) -> LlmFailure:
    """The failure of an exception frame: its ``message``, else
    ``"<provider> stream reported a <exception type>"``."""
    _, message = _report(payload)
    if not message:
        message = f"{provider} stream reported a {exception_type or 'failure'}"
    return LlmFailure(message=message, code=error_code(None, exception_type, message))
