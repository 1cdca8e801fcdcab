"""Gemini error reports, over HTTP or inside the stream, to stable codes.

Gemini answers errors with a Google RPC status,
``{"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": ...,
"details": [...]}}`` (Vertex wraps it in a one-element array). Pure functions;
contracts callers may rely on:

- ``gemini_error_code(status, report)`` decides by the RPC ``status`` name
  first, then the HTTP status, with the shared rules of
  ``dsh_llm.transport.http_errors.error_code`` last:
  ``UNAUTHENTICATED``/``PERMISSION_DENIED`` and an ``API_KEY_INVALID`` reason
  in the details (Gemini answers a bad key with 400) ``AUTH``;
  ``INVALID_ARGUMENT``/``FAILED_PRECONDITION``/``OUT_OF_RANGE``
  ``INVALID_REQUEST``, or ``CONTEXT_WINDOW_EXCEEDED`` when the message says
  the input is too long; ``NOT_FOUND`` ``INVALID_REQUEST`` (an unknown model);
  ``RESOURCE_EXHAUSTED`` ``RATE_LIMIT``, or ``QUOTA`` when a quota violation in
  the details is per day, or the message speaks of quota with no retry delay
  given (Gemini says "exceeded your current quota" for per-minute limits too);
  ``UNAVAILABLE``/``INTERNAL``/``DEADLINE_EXCEEDED`` ``SERVER``.
- ``retry_delay_ms(report)`` reads ``google.rpc.RetryInfo.retryDelay``
  (``"37s"``, ``"0.5s"``) in milliseconds; the HTTP ``Retry-After`` header wins
  when both are given.
- ``gemini_http_error(status, headers, body, redact=...)`` returns (never
  raises) the ``LlmError`` for a non-2xx answer: the message is Gemini's
  (through ``redact``), else ``"Gemini API error (HTTP <status>)"``; the
  redacted body is the cause.
- ``gemini_stream_failure(report, provider=)`` is the ``LlmFailure`` for an error object
  inside a 200 stream, classified the same way (the read loop redacts it).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from typing import Any
from typing import Final

from dsh_llm.errors import ErrorCode
from dsh_llm.errors import is_context_window_exceeded_error
from dsh_llm.protocol import LlmFailure
from dsh_llm.transport.http_errors import AnswerReading
from dsh_llm.transport.http_errors import error_code
from dsh_llm.transport.http_errors import http_error

_PROVIDER: Final = "Gemini"
_DELAY: Final = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)s\s*")
_TOO_LONG: Final = re.compile(
    r"input token count.{0,40}exceeds|exceeds the maximum number of tokens", re.I
)
_AUTH_STATUSES: Final = frozenset({"UNAUTHENTICATED", "PERMISSION_DENIED"})
_INVALID_STATUSES: Final = frozenset(
    {"INVALID_ARGUMENT", "FAILED_PRECONDITION", "OUT_OF_RANGE", "NOT_FOUND"}
)
_SERVER_STATUSES: Final = frozenset(
    {"UNAVAILABLE", "INTERNAL", "DEADLINE_EXCEEDED", "UNKNOWN", "ABORTED"}
)


def parse_gemini_error(value: Any) -> dict[str, Any] | None:
    """The inner error object of a report (``{"error": {...}}``, that in a
    one-element array, or the bare object); ``None`` when there is none."""
    if isinstance(value, list):
        value = value[0] if len(value) == 1 else None
    if not isinstance(value, dict):
        return None
    inner = value.get("error")
    if isinstance(inner, dict):
        return inner
    if isinstance(inner, str) and inner.strip():
        return {"message": inner}
    return None


def _details(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    details = report.get("details")
    if not isinstance(details, list):
        return []
    return [item for item in details if isinstance(item, dict)]


def _detail_type(item: Mapping[str, Any]) -> str:
    kind = item.get("@type")
    return kind if isinstance(kind, str) else ""


def retry_delay_ms(report: Mapping[str, Any]) -> float | None:
    """``RetryInfo.retryDelay`` in milliseconds, or ``None`` (absent, zero or
    unreadable)."""
    for item in _details(report):
        if _detail_type(item).endswith("google.rpc.RetryInfo"):
            delay = item.get("retryDelay")
            match = _DELAY.fullmatch(delay) if isinstance(delay, str) else None
            if match:
                value = float(match.group(1)) * 1000
                if math.isfinite(value) and value > 0:
                    return value
    return None


def _per_day_quota(report: Mapping[str, Any]) -> bool:
    for item in _details(report):
        if not _detail_type(item).endswith("google.rpc.QuotaFailure"):
            continue
        violations = item.get("violations")
        for violation in violations if isinstance(violations, list) else ():
            if not isinstance(violation, dict):
                continue
            names = " ".join(
                str(violation.get(key, "")) for key in ("quotaId", "quotaMetric")
            )
            if "PerDay" in names or "per_day" in names:
                return True
    return False


def _reasons(report: Mapping[str, Any]) -> set[str]:
    return {
        item["reason"]
        for item in _details(report)
        if _detail_type(item).endswith("google.rpc.ErrorInfo")
        and isinstance(item.get("reason"), str)
    }


def _message(report: Mapping[str, Any]) -> str:
    message = report.get("message")
    return message if isinstance(message, str) else ""


def gemini_error_code(status: int | None, report: Mapping[str, Any]) -> str:
    """The stable code for a Gemini error report (see the module docstring).

    Args:
        status: The HTTP status, or ``None`` inside a stream (the report's
            ``code`` is used then).
        report: The inner error object (``parse_gemini_error``), possibly empty.
    """
    rpc = report.get("status")
    rpc = rpc if isinstance(rpc, str) else ""
    code = report.get("code")
    if status is None and type(code) is int and 100 <= code <= 599:
        status = code
    message = _message(report)
    if rpc in _AUTH_STATUSES or "API_KEY_INVALID" in _reasons(report):
        return ErrorCode.AUTH.value
    if rpc in _INVALID_STATUSES:
        if _TOO_LONG.search(message) or is_context_window_exceeded_error(message):
            return ErrorCode.CONTEXT_WINDOW_EXCEEDED.value
        return ErrorCode.INVALID_REQUEST.value
    if rpc == "RESOURCE_EXHAUSTED" or status == 429:
        if _per_day_quota(report):
            return ErrorCode.QUOTA.value
        if retry_delay_ms(report) is None and "quota" in message.lower():
            return ErrorCode.QUOTA.value
        return ErrorCode.RATE_LIMIT.value
    if rpc in _SERVER_STATUSES:
        return ErrorCode.SERVER.value
    if status == 404:
        return ErrorCode.INVALID_REQUEST.value
    return error_code(status, f"{rpc} {message}".strip(), "")


def read_answer(status: int, headers: Mapping[str, str], value: Any) -> AnswerReading:
    """The reading of a non-2xx Gemini answer (an ``AnswerReader``): its
    message, ``gemini_error_code`` and the ``RetryInfo`` delay."""
    report = parse_gemini_error(value) or {}
    return AnswerReading(
        code=gemini_error_code(status, report),
        message=_message(report),
        retry_after_ms=retry_delay_ms(report),
    )


gemini_http_error: Final = functools.partial(
    http_error, provider=_PROVIDER, read=read_answer
)
"""The ``LlmError`` for a non-2xx Gemini answer (returned, not raised): the
shared ``http_errors.http_error`` reading the body with ``read_answer``."""


def gemini_stream_failure(
    report: Mapping[str, Any], *, provider: str = _PROVIDER
) -> LlmFailure:
    """The failure for an error object (``parse_gemini_error``) that arrived
    inside a 200 stream (``provider`` is named when the report has no message)."""
    code = report.get("code")
    status = code if type(code) is int and 100 <= code <= 599 else None
    return LlmFailure(
        message=_message(report) or f"{provider} stream reported an error",
        code=gemini_error_code(None, report),
        status=status,
        provider_retry_after_ms=retry_delay_ms(report),
    )
