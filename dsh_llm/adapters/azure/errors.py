"""Azure OpenAI's HTTP errors, turned into stable codes.

Azure answers a failure with the OpenAI shape (``{"error": {"message", "type",
"param", "code"}}``), sometimes with ``status`` and an ``innererror``; the
shared classifier (``dsh_llm.transport.http_errors.http_error``) reads it, and
this module adds what is Azure's own:

- A prompt the content filter blocked (HTTP 400, ``code: "content_filter"``, or
  an ``innererror.code`` of ``ResponsibleAIPolicyViolation``) is
  ``CONTENT_FILTER``, the code a ``content_filter`` finish reason gets, never a
  retryable or a plain ``INVALID_REQUEST``.
- The request id is ``x-request-id``, else Azure's ``apim-request-id``.
- ``retry-after-ms`` (Azure's, in milliseconds) wins over ``retry-after``, as
  the shared reader does.
- Every server text passes through ``redact`` (the shared rules).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any
from typing import Final

from dsh_llm.errors import LlmError
from dsh_llm.transport import http_errors

CONTENT_FILTER_CODE: Final = "CONTENT_FILTER"
"""The code of a request or answer Azure's content filter blocked."""
POLICY_VIOLATION: Final = "ResponsibleAIPolicyViolation"
"""The ``innererror.code`` of a blocked prompt."""
AZURE_REQUEST_ID_HEADER: Final = "apim-request-id"
"""Azure's own request id header, read when ``x-request-id`` is absent."""
DISPLAY_NAME: Final = "Azure OpenAI"
"""The provider named in messages."""


def _unchanged(text: str) -> str:
    return text


def _error_object(body: bytes) -> Mapping[str, Any] | None:
    try:
        value = json.loads(body.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return None
    inner = value.get("error") if isinstance(value, dict) else None
    return inner if isinstance(inner, dict) else None


def is_content_filter(error: Mapping[str, Any] | None) -> bool:
    """Whether an ``error`` object says the content filter blocked the call."""
    if error is None:
        return False
    if error.get("code") == "content_filter":
        return True
    inner = error.get("innererror")
    return isinstance(inner, dict) and inner.get("code") == POLICY_VIOLATION


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is None:
        value = next((v for k, v in headers.items() if k.lower() == name), None)
    return value or None


def http_error(
    status: int,
    headers: Mapping[str, str],
    body: bytes,
    *,
    provider: str = DISPLAY_NAME,
    now: Callable[[], float] = time.time,
    redact: http_errors.Redact = _unchanged,
) -> LlmError:
    """The ``LlmError`` of a non-2xx Azure OpenAI answer (returned, not raised).

    Args:
        status: The HTTP status.
        headers: The response headers.
        body: The whole response body (possibly empty).
        provider: The display name used when the body has no message.
        now: Current Unix time in seconds, for HTTP-date ``retry-after``.
        redact: Applied to the message, the request id and the body kept as the
            cause.
    """
    shared = http_errors.http_error(
        status, headers, body, provider=provider, now=now, redact=redact
    )
    code = shared.code
    # Only a refused request: an auth or rate-limit answer keeps its own code.
    if (
        400 <= status < 500
        and status not in (401, 403, 429)
        and is_content_filter(_error_object(body))
    ):
        code = CONTENT_FILTER_CODE
    request = shared.request_id
    if request is None:
        raw = _header(headers, AZURE_REQUEST_ID_HEADER)
        request = None if raw is None else redact(raw)
    if code == shared.code and request == shared.request_id:
        return shared
    return LlmError(
        shared.message,
        code,
        status=shared.status,
        provider_retry_after_ms=shared.provider_retry_after_ms,
        request_id=request,
        cause=shared.__cause__,
    )
