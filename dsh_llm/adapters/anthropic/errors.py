"""Anthropic error reports, over HTTP or inside a stream, turned into stable codes.

Anthropic names every failure with an ``error.type`` (``overloaded_error``,
``not_found_error``...), in the body of an HTTP error and in an ``event: error``
frame alike; this module classifies by that type first and falls back to the
shared classifier (``dsh_llm.transport.http_errors.error_code``) for a type it
does not know or a body that is not Anthropic's.

Contracts callers may rely on:

- ``error_code(status, error_type, message)``: ``invalid_request_error``,
  ``not_found_error`` and ``request_too_large`` are ``INVALID_REQUEST`` (an
  ``invalid_request_error`` saying the prompt is too long is
  ``CONTEXT_WINDOW_EXCEEDED``); ``authentication_error`` and ``permission_error``
  ``AUTH``; ``billing_error`` ``QUOTA``; ``rate_limit_error`` ``RATE_LIMIT``;
  ``api_error``, ``timeout_error`` and ``overloaded_error`` ``SERVER`` (retryable,
  the default retry policy retries it). Any other type: the shared classifier.
- ``http_error(status, headers, body, ...)`` returns (never raises) the
  ``LlmError`` for a non-2xx answer: the shared ``http_error``'s message, cause,
  ``retry-after``/``retry-after-ms`` delay and ``request-id`` header, with the code
  above; without the header, the body's ``request_id`` is kept.
- ``stream_failure(payload, provider=...)`` is the ``LlmFailure`` of an
  ``event: error`` payload, Anthropic's or a flat OpenAI-style one (a status
  only when the payload carries one: the stream's 200 says nothing).
- Server text passes through ``redact`` where one is taken; the stream side takes
  none (the transport's read loop redacts failure messages).
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

ERROR_TYPE_CODES: Final[Mapping[str, str]] = {
    "invalid_request_error": ErrorCode.INVALID_REQUEST.value,
    "not_found_error": ErrorCode.INVALID_REQUEST.value,
    "request_too_large": ErrorCode.INVALID_REQUEST.value,
    "authentication_error": ErrorCode.AUTH.value,
    "permission_error": ErrorCode.AUTH.value,
    "billing_error": ErrorCode.QUOTA.value,
    "rate_limit_error": ErrorCode.RATE_LIMIT.value,
    "api_error": ErrorCode.SERVER.value,
    "timeout_error": ErrorCode.SERVER.value,
    # 529 over HTTP, or an error frame once streaming has begun: a transient
    # capacity problem, so a retryable code.
    "overloaded_error": ErrorCode.SERVER.value,
}
"""Anthropic's documented ``error.type`` values and their codes."""

# Anthropic's wording: "prompt is too long: 201234 tokens > 200000 maximum".
_PROMPT_TOO_LONG: Final = re.compile(r"\bprompt is too long\b", re.IGNORECASE)


def error_code(status: int | None, error_type: str, message: str) -> str:
    """The stable code for an Anthropic failure (see the module docstring).

    Args:
        status: The HTTP status, or ``None`` for an in-stream error.
        error_type: The report's ``error.type`` (``""`` when there was none).
        message: The report's ``error.message`` (``""`` when there was none).
    """
    code = ERROR_TYPE_CODES.get(error_type)
    too_long = bool(_PROMPT_TOO_LONG.search(message)) or (
        is_context_window_exceeded_error(message)
    )
    if error_type == "invalid_request_error" and too_long:
        return ErrorCode.CONTEXT_WINDOW_EXCEEDED.value
    if code is not None:
        return code
    detail = " ".join(part for part in (error_type, message) if part)
    return http_errors.error_code(status, detail, error_type.lower())


def _report(value: Any) -> tuple[str, str, str | None]:
    """``(error.type, error.message, request_id)`` of an Anthropic error body."""
    if not isinstance(value, dict):
        return "", "", None
    inner = value.get("error")
    error = inner if isinstance(inner, dict) else {}
    kind = error.get("type")
    message = error.get("message")
    request = value.get("request_id")
    return (
        kind if isinstance(kind, str) else "",
        message if isinstance(message, str) else "",
        request if isinstance(request, str) and request else None,
    )


def read_answer(
    status: int, headers: Mapping[str, str], value: Any
) -> http_errors.AnswerReading:
    """The reading of a non-2xx Anthropic answer (an ``AnswerReader``): the
    shared reader's message, the code above and the body's ``request_id``."""
    kind, message, body_request_id = _report(value)
    return http_errors.AnswerReading(
        code=error_code(status, kind, message),
        message=http_errors.read_answer(status, headers, value).message,
        request_id=body_request_id,
    )


http_error: Final = functools.partial(
    http_errors.http_error, provider="Anthropic", read=read_answer
)
"""The ``LlmError`` for a non-2xx Anthropic answer (returned, not raised): the
shared ``http_errors.http_error`` reading the body with ``read_answer``."""


def stream_failure(payload: Any, *, provider: str = "Anthropic") -> LlmFailure:
    """The failure of an ``event: error`` payload
    (``{"type": "error", "error": {"type": ..., "message": ...}}``).

    A payload of another shape is read as the shared classifier reads an
    in-stream error (``http_errors.parse_error_report``): llama-server sends an
    OpenAI-style ``{"code": 500, "message": ..., "type": "server_error"}``, whose
    ``code`` is an HTTP status (kept as the failure's ``status``: a 5xx is
    ``SERVER``). The message is the provider's, else ``"<provider> stream
    reported an error"`` (``"... reported an <type>"`` when only the type is
    known).
    """
    kind, message, request = _report(payload)
    status: int | None = None
    if not (kind or message):
        report = http_errors.parse_error_report(payload)
        if report is not None:
            kind, message, status = report.kind, report.message or "", report.status
    if not message:
        message = (
            f"{provider} stream reported an {kind}"
            if kind
            else f"{provider} stream reported an error"
        )
    return LlmFailure(
        message=message,
        code=error_code(status, kind, message),
        status=status,
        request_id=request,
    )
