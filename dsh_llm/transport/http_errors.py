"""Provider error reports, over HTTP or inside a stream, turned into ``LlmError``.

- ``http_error(status, headers, body, provider=...)`` returns the ``LlmError`` of
  a non-2xx response (message, status, retry-after and request id found in it).
- ``error_code(status, detail)`` is the one classifier every OpenAI-style family
  shares (``AUTH``, ``QUOTA``, ``RATE_LIMIT``, ``CONTEXT_WINDOW_EXCEEDED``,
  ``INVALID_REQUEST``, ``SERVER``, ``HTTP_<status>``).
- ``in_band_failure`` classifies an in-stream error payload the same way;
  ``not_a_stream_error`` a 2xx answer that is not a stream.
- Every server text passes through ``redact``; ``HttpErrorClassifier`` is the
  shape of a family's own classifier (``StreamingCall(classify_error=...)``).
- ``retry_after_ms`` and ``request_id`` read the headers.
- A family's own classifier is ``http_error`` with its provider and its
  ``AnswerReader`` bound (``functools.partial``): the reader says what the body
  means (``AnswerReading``), ``http_error`` adds what every family shares.
- Rules and precedence in full: ``docs/transport.md``; codes: ``docs/errors.md``.
"""

from __future__ import annotations

import email.utils
import json
import math
import re
import time
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any
from typing import Final
from typing import Protocol

import attrs

from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.errors import is_context_window_exceeded_error
from dsh_llm.errors import is_quota_exceeded_error
from dsh_llm.protocol import LlmFailure

__all__ = [
    "REQUEST_ID_HEADERS",
    "AnswerReader",
    "AnswerReading",
    "HttpErrorClassifier",
    "ProviderErrorReport",
    "Redact",
    "answer_error",
    "error_code",
    "header",
    "http_date_ms",
    "http_error",
    "in_band_failure",
    "json_body",
    "not_a_stream_error",
    "parse_error_report",
    "read_answer",
    "request_id",
    "retry_after_ms",
]

Redact = Callable[[str], str]
"""Replaces secrets in server-supplied text (``dsh_llm.transport.redaction``)."""


def _unchanged(text: str) -> str:
    return text


class HttpErrorClassifier(Protocol):
    """Builds the ``LlmError`` for a non-2xx answer (returned, not raised), as
    ``http_error`` does for OpenAI-style bodies; every server text it puts in the
    error passes through ``redact``."""

    def __call__(
        self,
        status: int,
        headers: Mapping[str, str],
        body: bytes,
        *,
        redact: Redact,
    ) -> LlmError:
        """The error for ``status`` with ``headers`` and the whole ``body``."""
        ...


REQUEST_ID_HEADERS: Final = ("x-request-id", "x-deepseek-request-id", "request-id")
"""Headers that carry a provider request id, in order of preference."""

_DIGITS: Final = re.compile(r"[0-9]+")
_REQUEST_TOO_LARGE: Final = re.compile(r"\brequest too large\b", re.IGNORECASE)


def header(headers: Mapping[str, str], name: str) -> str | None:
    """The value of header ``name`` (lower-case), its name matched without case
    in a plain mapping too; ``None`` when absent."""
    value = headers.get(name)
    if value is not None:
        return value
    for key, item in headers.items():
        if key.lower() == name:
            return item
    return None


def retry_after_ms(
    headers: Mapping[str, str], *, now: Callable[[], float] = time.time
) -> float | None:
    """The delay the provider asked for, in milliseconds, or ``None``.

    Args:
        headers: Response headers (any mapping; names compared case-insensitively).
        now: Current Unix time in seconds, for HTTP-date values.
    """
    raw_ms = header(headers, "retry-after-ms")
    if raw_ms is not None:
        try:
            delay = float(raw_ms.strip())
        except ValueError:
            delay = math.nan
        if math.isfinite(delay) and delay > 0:
            return delay
    raw = header(headers, "retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    wait = float(raw) * 1000 if _DIGITS.fullmatch(raw) else http_date_ms(raw, now=now)
    return wait if wait is not None and math.isfinite(wait) and wait > 0 else None


def http_date_ms(text: str, *, now: Callable[[], float] = time.time) -> float | None:
    """An HTTP date (``Wed, 21 Oct 2015 07:28:00 GMT``) as milliseconds from
    ``now`` (negative once it has passed), or ``None`` when ``text`` is not one
    or names no time zone."""
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return (when.timestamp() - now()) * 1000


def request_id(
    headers: Mapping[str, str], names: tuple[str, ...] = REQUEST_ID_HEADERS
) -> str | None:
    """The provider's request id from the first non-empty header of ``names``
    (``REQUEST_ID_HEADERS`` unless a family names its own)."""
    for name in names:
        value = header(headers, name)
        if value:
            return value
    return None


def _redacted_id(headers: Mapping[str, str], redact: Redact) -> str | None:
    """The request id with the request's secrets hidden (a server may echo the
    key in ``x-request-id``)."""
    value = request_id(headers)
    return None if value is None else redact(value)


@attrs.frozen(kw_only=True)
class ProviderErrorReport:
    """What a provider said about a failure, normalised from its JSON shape."""

    message: str | None
    """The non-empty human message, when given."""
    detail: str
    """Code, type and message joined by spaces (for the classifiers)."""
    status: int | None
    """An HTTP status carried inside the report (llama.cpp and vLLM put one in
    ``code``), when it is an int in 100..599."""
    kind: str
    """The error's ``type`` (or empty), lower-cased."""


def parse_error_report(value: Any) -> ProviderErrorReport | None:
    """Normalise one error report; ``None`` when ``value`` holds none.

    Accepts ``{"error": {...}}``, ``{"error": "text"}``, a flat
    ``{"object": "error", "message", "code", ...}``, a one-element list of those
    (Vertex), a bare error object, or plain text (an ``error:`` SSE field).
    """
    if isinstance(value, list):
        return parse_error_report(value[0]) if value else None
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return None
        try:
            parsed = json.loads(text)
        except (ValueError, RecursionError):
            return ProviderErrorReport(message=text, detail=text, status=None, kind="")
        if isinstance(parsed, dict | list):
            return parse_error_report(parsed)
        return ProviderErrorReport(message=text, detail=text, status=None, kind="")
    if not isinstance(value, dict):
        return None
    inner = value.get("error")
    if isinstance(inner, dict):
        value = inner
    elif isinstance(inner, str) and inner:
        return ProviderErrorReport(message=inner, detail=inner, status=None, kind="")
    elif inner is not None or not ("message" in value or "code" in value):
        return None
    message = value.get("message")
    message = message if isinstance(message, str) and message else None
    code = value.get("code")
    kind = value.get("type")
    kind = kind if isinstance(kind, str) else ""
    status: int | None = None
    for candidate in (code, value.get("status")):
        if type(candidate) is int and 100 <= candidate <= 599:
            status = candidate
            break
    parts = [
        str(part)
        for part in (code, kind, message)
        if (isinstance(part, str) and part) or type(part) is int
    ]
    return ProviderErrorReport(
        message=message, detail=" ".join(parts), status=status, kind=kind.lower()
    )


def _rate_limit_code(detail: str) -> str:
    # A rate-limit report about one request larger than the whole per-minute
    # budget: waiting never lets that request through, so it is not retryable.
    if _REQUEST_TOO_LARGE.search(detail):
        return ErrorCode.INVALID_REQUEST.value
    return ErrorCode.RATE_LIMIT.value


def error_code(status: int | None, detail: str, kind: str = "") -> str:
    """The stable code for a provider failure (see the module docstring).

    Args:
        status: The HTTP status, or ``None`` for an in-stream error without one.
        detail: The error's code, type and message joined by spaces.
        kind: The error's ``type``, consulted only without a status.
    """
    if status in (401, 403):
        return ErrorCode.AUTH.value
    if status == 413:
        return ErrorCode.INVALID_REQUEST.value
    if is_quota_exceeded_error(detail) or status == 402:
        return ErrorCode.QUOTA.value
    if status == 429:
        return _rate_limit_code(detail)
    if status in (400, None) and is_context_window_exceeded_error(detail):
        return ErrorCode.CONTEXT_WINDOW_EXCEEDED.value
    if status in (400, 422):
        return ErrorCode.INVALID_REQUEST.value
    if status is None:
        text = f"{kind} {detail}".lower()
        if "rate_limit" in text or "rate limit" in text:
            return _rate_limit_code(detail)
        if "authentication" in text or "permission" in text:
            return ErrorCode.AUTH.value
        if "invalid_request" in text or "not_supported" in text:
            return ErrorCode.INVALID_REQUEST.value
        return ErrorCode.SERVER.value
    if status >= 500:
        return ErrorCode.SERVER.value
    return f"HTTP_{status}"


@attrs.frozen(kw_only=True)
class AnswerReading:
    """What a family's ``AnswerReader`` found in a non-2xx answer's body."""

    code: str
    """The stable code."""
    message: str = ""
    """The message to show, not redacted yet (empty: ``"<provider> API error
    (HTTP <status>)"``)."""
    retry_after_ms: float | None = None
    """A delay the body asks for (a ``Retry-After`` header wins)."""
    request_id: str | None = None
    """A request id the body names (a request id header wins)."""


AnswerReader = Callable[[int, Mapping[str, str], Any], AnswerReading]
"""Reads a non-2xx answer: ``(status, headers, decoded JSON body or None)``."""


def read_answer(status: int, headers: Mapping[str, str], value: Any) -> AnswerReading:
    """The reading of an OpenAI-style error body (``parse_error_report``,
    classified by ``error_code``); the ``AnswerReader`` of ``http_error``."""
    report = parse_error_report(value)
    if report is None:
        return AnswerReading(code=error_code(status, ""))
    return AnswerReading(
        code=error_code(status, report.detail, report.kind),
        message=report.message or "",
    )


def http_error(
    status: int,
    headers: Mapping[str, str],
    body: bytes,
    *,
    provider: str,
    now: Callable[[], float] = time.time,
    redact: Redact = _unchanged,
    read: AnswerReader = read_answer,
    request_id_headers: tuple[str, ...] = REQUEST_ID_HEADERS,
) -> LlmError:
    """The ``LlmError`` for a non-2xx response (returned, not raised).

    Args:
        status: The HTTP status.
        headers: The response headers.
        body: The whole response body (possibly empty).
        provider: The provider's display name, e.g. ``"DeepSeek"``.
        now: Current Unix time in seconds, for HTTP-date ``Retry-After``.
        redact: Applied to the message, the request id and the body kept as
            the cause.
        read: What the family's body means (message, code, a delay or a
            request id of its own).
        request_id_headers: The headers that may name the request id, in order
            of preference (before any the body names).
    """
    text, value = json_body(body)
    reading = read(status, headers, value)
    delay = retry_after_ms(headers, now=now)
    request = request_id(headers, request_id_headers) or reading.request_id
    return answer_error(
        status,
        text,
        message=redact(reading.message),
        code=reading.code,
        provider=provider,
        retry_after_ms=reading.retry_after_ms if delay is None else delay,
        request_id=None if request is None else redact(request),
        redact=redact,
    )


def json_body(body: bytes) -> tuple[str, Any]:
    """A non-2xx answer's ``body`` as text (UTF-8, bad bytes replaced) and as
    decoded JSON (``None`` when it is blank or not JSON)."""
    text = body.decode("utf-8", "replace")
    if not text.strip():
        return text, None
    try:
        return text, json.loads(text)
    except (ValueError, RecursionError):
        # RecursionError: JSON nested deeper than the parser can follow.
        return text, None


def answer_error(
    status: int,
    text: str,
    *,
    message: str,
    code: str,
    provider: str,
    retry_after_ms: float | None,
    request_id: str | None,
    redact: Redact,
) -> LlmError:
    """The ``LlmError`` of a non-2xx answer whose body ``text`` a classifier
    has read: ``message`` (redacted already; empty: ``<provider> API error
    (HTTP <status>)``) and ``code``, the status when it is one (100-599), the
    delay and request id given, and the body, through ``redact``, kept as the
    cause."""
    return LlmError(
        message or f"{provider} API error (HTTP {status})",
        code,
        status=status if 100 <= status <= 599 else None,
        provider_retry_after_ms=retry_after_ms,
        request_id=request_id,
        cause=Exception(redact(text) if text else f"{provider} HTTP {status}"),
    )


def in_band_failure(
    value: Any, *, provider: str, redact: Redact = _unchanged
) -> LlmFailure:
    """The failure for an error a provider reported inside a 200 stream.

    ``value`` is the whole decoded payload (``{"error": ...}``) or the text of an
    ``error:`` SSE field. The message is the provider's (through ``redact``), or
    ``"<provider> stream reported an error"``.
    """
    report = parse_error_report(value)
    if report is None:
        return LlmFailure(
            message=f"{provider} stream reported an error", code=ErrorCode.SERVER.value
        )
    return LlmFailure(
        message=redact(report.message or "") or f"{provider} stream reported an error",
        code=error_code(report.status, report.detail, report.kind),
        status=report.status,
    )


def not_a_stream_error(
    headers: Mapping[str, str],
    body: bytes,
    *,
    provider: str,
    content_type: str,
    expected: str = "an event stream",
    now: Callable[[], float] = time.time,
    redact: Redact = _unchanged,
) -> LlmError:
    """The ``LlmError`` for a 2xx answer of type ``content_type`` where a stream
    was expected (returned, not raised).

    A JSON error report in ``body`` is classified as an in-stream error is (the
    report's own status if it carries one, else its type decides; the message is
    the provider's); anything else is ``MALFORMED_RESPONSE``:
    ``"<provider> API answered <content_type> instead of <expected> (does the
    server support streaming?)"``. The (redacted) body is the cause.

    Args:
        headers: The response headers (``Retry-After``, request id).
        body: The response body (possibly cut at a size limit).
        provider: The provider's display name.
        content_type: The media type received, e.g. ``"application/json"``.
        expected: What was expected, for the message.
        now: Current Unix time in seconds, for HTTP-date ``Retry-After``.
        redact: Applied to the message, the request id and the body kept as
            the cause.
    """
    text, value = json_body(body)
    if content_type != "application/json" or value is None:
        report = None
    else:
        report = parse_error_report(value)
    cause = Exception(redact(text) if text else f"{provider} empty {content_type}")
    if report is None:
        return LlmError(
            f"{provider} API answered {content_type} instead of {expected} "
            "(does the server support streaming?)",
            ErrorCode.MALFORMED_RESPONSE,
            request_id=_redacted_id(headers, redact),
            cause=cause,
        )
    return LlmError(
        redact(report.message or "") or f"{provider} API reported an error",
        error_code(report.status, report.detail, report.kind),
        status=report.status,
        provider_retry_after_ms=retry_after_ms(headers, now=now),
        request_id=_redacted_id(headers, redact),
        cause=cause,
    )
