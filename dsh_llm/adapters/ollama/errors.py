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

import functools
from collections.abc import Mapping
from typing import Any
from typing import Final

from dsh_llm.errors import ErrorCode
from dsh_llm.protocol import LlmFailure
from dsh_llm.transport.http_errors import AnswerReading
from dsh_llm.transport.http_errors import error_code
from dsh_llm.transport.http_errors import http_error

_PROVIDER: Final = "Ollama"


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


def read_answer(status: int, headers: Mapping[str, str], value: Any) -> AnswerReading:
    """The reading of a non-2xx Ollama answer (an ``AnswerReader``): the
    ``error`` text and ``ollama_error_code``."""
    text = error_text(value.get("error")) if isinstance(value, dict) else ""
    return AnswerReading(code=ollama_error_code(status, text), message=text)


ollama_http_error: Final = functools.partial(
    http_error, provider=_PROVIDER, read=read_answer
)
"""The ``LlmError`` for a non-2xx Ollama answer (returned, not raised): the
shared ``http_errors.http_error`` reading the body with ``read_answer``."""


def ollama_stream_failure(value: Any) -> LlmFailure:
    """The failure for an ``{"error": value}`` line inside a 200 stream."""
    text = error_text(value)
    return LlmFailure(
        message=text or f"{_PROVIDER} stream reported an error",
        code=ollama_error_code(None, text),
    )
