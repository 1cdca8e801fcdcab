"""Responses API failures, over HTTP or inside a stream, to stable codes.

Contracts callers may rely on:

- ``failure_code(code, message, kind=...)`` is the one in-stream classifier,
  first match wins: ``rate_limit_exceeded`` ``RATE_LIMIT`` (``INVALID_REQUEST``
  when the message says "Request too large": no retry fixes it);
  ``insufficient_quota`` or quota detail ``QUOTA``; ``context_length_exceeded``
  or a context-overflow message ``CONTEXT_WINDOW_EXCEEDED``; ``server_error``
  ``SERVER``; ``invalid_prompt``, ``invalid_image*``, ``image_*`` and
  ``invalid_request_error`` ``INVALID_REQUEST``; any other code that is a short
  identifier upper-cased (``VECTOR_STORE_TIMEOUT``, ``BIO_POLICY``); no code at
  all: ``dsh_llm.transport.http_errors.error_code`` without a status (the type
  decides, else ``SERVER``).
- ``stream_failure(report, provider=...)`` turns a ``response.failed``
  ``response.error`` object or an ``error`` event into an ``LlmFailure``; the
  message is the server's, else ``"<provider> stream reported an error"``.
- A non-2xx answer (``{"error": {"message", "type", "code"}}``) needs nothing
  of its own: the transport's ``dsh_llm.transport.http_errors.http_error``
  already reads ``code`` (``context_length_exceeded`` on a 400 is
  ``CONTEXT_WINDOW_EXCEEDED``, ``rate_limit_exceeded`` on a 429 ``RATE_LIMIT``).
- Nothing here redacts: the read loop redacts the failure a translator reports
  (message and code, ``StreamingCall.redacted_finish``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from typing import Final

from dsh_llm.errors import ErrorCode
from dsh_llm.errors import is_context_window_exceeded_error
from dsh_llm.errors import is_quota_exceeded_error
from dsh_llm.protocol import LlmFailure
from dsh_llm.transport.http_errors import error_code

_IDENTIFIER: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}")
_REQUEST_TOO_LARGE: Final = re.compile(r"\brequest too large\b", re.IGNORECASE)
_INVALID_REQUEST_CODES: Final = frozenset(
    {"invalid_prompt", "invalid_request_error", "invalid_value", "invalid_base64"}
)


def failure_code(code: str | None, message: str, *, kind: str = "") -> str:
    """The stable code for a Responses failure (see the module docstring).

    Args:
        code: The server's ``code`` (``None`` or ``""`` when absent).
        message: The server's message (may be empty).
        kind: The server's ``type``, if any.
    """
    detail = " ".join(part for part in (code or "", kind, message) if part)
    if code == "rate_limit_exceeded":
        if _REQUEST_TOO_LARGE.search(message):
            return ErrorCode.INVALID_REQUEST.value
        return ErrorCode.RATE_LIMIT.value
    if code == "insufficient_quota" or is_quota_exceeded_error(detail):
        return ErrorCode.QUOTA.value
    if code == "context_length_exceeded" or is_context_window_exceeded_error(detail):
        return ErrorCode.CONTEXT_WINDOW_EXCEEDED.value
    if not code:
        return error_code(None, detail, kind.lower())
    if code == "server_error":
        return ErrorCode.SERVER.value
    if code in _INVALID_REQUEST_CODES or code.startswith(("invalid_image", "image_")):
        return ErrorCode.INVALID_REQUEST.value
    if _IDENTIFIER.fullmatch(code):
        return code.upper()
    return ErrorCode.SERVER.value


def stream_failure(report: Mapping[str, Any], *, provider: str) -> LlmFailure:
    """The failure for a ``response.error`` object or an ``error`` event.

    ``report`` holds ``code`` (string, integer or null), ``message`` and
    optionally ``type`` and ``param``; a nested ``{"error": {...}}`` is read too.
    """
    inner = report.get("error")
    if isinstance(inner, dict):
        report = inner
    raw_code = report.get("code")
    code = raw_code if isinstance(raw_code, str) else None
    message = report.get("message")
    message = message if isinstance(message, str) else ""
    kind = report.get("type")
    kind = kind if isinstance(kind, str) and kind != "error" else ""
    status = raw_code if type(raw_code) is int and 100 <= raw_code <= 599 else None
    if status is not None:
        resolved = error_code(status, f"{kind} {message}".strip(), kind.lower())
    else:
        resolved = failure_code(code, message, kind=kind)
    return LlmFailure(
        message=message or f"{provider} stream reported an error",
        code=resolved,
        status=status,
    )
