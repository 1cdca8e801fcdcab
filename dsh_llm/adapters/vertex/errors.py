"""Vertex AI error reports over HTTP, to stable codes.

Vertex answers with two shapes: Anthropic's own error body (``{"type":
"error", "error": {"type": "overloaded_error", ...}}``) when Claude refused
the call, and a Google RPC status (``{"error": {"code", "status", "message",
"details"}}``, possibly in a one-element array) for everything else (the
platform's auth, quota and routing, and every Gemini error). Pure functions:

- ``http_error(status, headers, body, redact=...)`` returns (never raises)
  the ``LlmError`` of a non-2xx answer: an Anthropic body is classified by
  ``dsh_llm.adapters.anthropic.errors``; an RPC status by
  ``gemini_error_code``, except that ``RESOURCE_EXHAUSTED`` is ``RATE_LIMIT``
  (Vertex quotas are per minute) unless a quota violation or the message is
  per day (``QUOTA``). The message is the server's (through ``redact``), else
  ``"Vertex AI error (HTTP <status>)"``; the delay is ``Retry-After``, else the
  RPC ``RetryInfo``; the redacted body is the cause.
- Errors inside a 200 stream are the translators' (each wire's own).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any
from typing import Final

from dsh_llm.adapters.anthropic import errors as anthropic_errors
from dsh_llm.adapters.gemini.errors import gemini_error_code
from dsh_llm.adapters.gemini.errors import parse_gemini_error
from dsh_llm.adapters.gemini.errors import retry_delay_ms
from dsh_llm.errors import ErrorCode
from dsh_llm.transport import http_errors
from dsh_llm.transport.http_errors import AnswerReading

PROVIDER: Final = "Vertex AI"
"""The display name errors without a server message use."""

_PER_DAY: Final = re.compile(r"per[ _-]?day", re.IGNORECASE)


def _anthropic_report(value: Any) -> bool:
    if not isinstance(value, dict):
        return False
    error = value.get("error")
    return (
        value.get("type") == "error"
        and isinstance(error, dict)
        and isinstance(error.get("type"), str)
    )


def _per_day(report: Mapping[str, Any]) -> bool:
    """Whether a quota report names a daily limit (a quota id, metric or the
    message)."""
    texts = [report.get("message")]
    details = report.get("details")
    for item in details if isinstance(details, list) else ():
        violations = item.get("violations") if isinstance(item, dict) else None
        for violation in violations if isinstance(violations, list) else ():
            if isinstance(violation, dict):
                texts += [violation.get("quotaId"), violation.get("quotaMetric")]
    return any(isinstance(text, str) and _PER_DAY.search(text) for text in texts)


def vertex_error_code(status: int | None, report: Mapping[str, Any]) -> str:
    """The stable code of a Google RPC error report on Vertex AI (see the
    module docstring)."""
    code = gemini_error_code(status, report)
    if code == ErrorCode.QUOTA.value and not _per_day(report):
        return ErrorCode.RATE_LIMIT.value
    return code


def read_answer(status: int, headers: Mapping[str, str], value: Any) -> AnswerReading:
    """The reading of a non-2xx Vertex AI answer (an ``AnswerReader``; see the
    module docstring)."""
    if _anthropic_report(value):
        return anthropic_errors.read_answer(status, headers, value)
    report = parse_gemini_error(value) or {}
    message = report.get("message")
    if not (isinstance(message, str) and message):
        message = f"{PROVIDER} error (HTTP {status})"
    return AnswerReading(
        code=vertex_error_code(status, report),
        message=message,
        retry_after_ms=retry_delay_ms(report),
    )


http_error: Final = functools.partial(
    http_errors.http_error, provider=PROVIDER, read=read_answer
)
"""The ``LlmError`` for a non-2xx Vertex AI answer (returned, not raised): the
shared ``http_errors.http_error`` reading the body with ``read_answer``."""
