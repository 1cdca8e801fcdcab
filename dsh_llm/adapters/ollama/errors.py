"""Ollama error reports, over HTTP or inside the stream, to stable codes.

Ollama answers an error with ``{"error": "<text>"}``: as the body of an HTTP
status when nothing was streamed yet, else as one more NDJSON line under the
200 already sent. Pure functions; contracts callers may rely on:

- ``ollama_error_code(status, text)``: 404 (an unknown model, "model ... not
  found, try pulling it first") ``INVALID_REQUEST``; otherwise the shared rules
  of ``dsh_llm.transport.http_errors.error_code`` (401/403 ``AUTH`` for a
  hosted server, a context overflow ``CONTEXT_WINDOW_EXCEEDED``, 400
  ``INVALID_REQUEST``, 429 ``RATE_LIMIT``, 5xx ``SERVER``, without a status
  ``SERVER`` unless the text says otherwise).
- ``ollama_http_error(status, headers, body, redact=...)`` returns (never
  raises) the ``LlmError`` for a non-2xx answer: Ollama's text (through
  ``redact``), else ``"Ollama API error (HTTP <status>)"``; the redacted body is
  the cause.
- ``ollama_stream_failure(value)`` is the ``LlmFailure`` for an ``error``
  line's value (a string, or an object with a ``message``; the read loop
  redacts it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any
from typing import Final

from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import LlmFailure
from dsh_llm.transport.http_errors import Redact
from dsh_llm.transport.http_errors import answer_error
from dsh_llm.transport.http_errors import error_code
from dsh_llm.transport.http_errors import json_body
from dsh_llm.transport.http_errors import request_id
from dsh_llm.transport.http_errors import retry_after_ms

_PROVIDER: Final = "Ollama"


def _unchanged(text: str) -> str:
    return text


def error_text(value: Any) -> str:
    """The text of an ``error`` value: the string itself, an object's
    ``message``, else ``""``."""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, dict):
        message = value.get("message")
        return message.strip() if isinstance(message, str) else ""
    return ""


def ollama_error_code(status: int | None, text: str) -> str:
    """The stable code for an Ollama error (see the module docstring)."""
    if status == 404:
        return ErrorCode.INVALID_REQUEST.value
    return error_code(status, text, "")


def ollama_http_error(
    status: int,
    headers: Mapping[str, str],
    body: bytes,
    *,
    now: Callable[[], float] = time.time,
    redact: Redact = _unchanged,
) -> LlmError:
    """The ``LlmError`` for a non-2xx Ollama answer (returned, not raised).

    Args:
        status: The HTTP status.
        headers: The response headers.
        body: The whole response body (possibly empty).
        now: Current Unix time in seconds, for an HTTP-date ``Retry-After``.
        redact: Applied to the message and the body kept as the cause.
    """
    raw, value = json_body(body)
    text = error_text(value.get("error")) if isinstance(value, dict) else ""
    return answer_error(
        status,
        raw,
        message=redact(text),
        code=ollama_error_code(status, text),
        provider=_PROVIDER,
        retry_after_ms=retry_after_ms(headers, now=now),
        request_id=request_id(headers),
        redact=redact,
    )


def ollama_stream_failure(value: Any) -> LlmFailure:
    """The failure for an ``{"error": value}`` line inside a 200 stream."""
    text = error_text(value)
    return LlmFailure(
        message=text or f"{_PROVIDER} stream reported an error",
        code=ollama_error_code(None, text),
    )
