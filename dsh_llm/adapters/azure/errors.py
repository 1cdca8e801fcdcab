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

import functools
from collections.abc import Mapping
from typing import Any
from typing import Final

import attrs

from dsh_llm.transport import http_errors

CONTENT_FILTER_CODE: Final = "CONTENT_FILTER"
"""The code of a request or answer Azure's content filter blocked."""
POLICY_VIOLATION: Final = "ResponsibleAIPolicyViolation"
"""The ``innererror.code`` of a blocked prompt."""
AZURE_REQUEST_ID_HEADER: Final = "apim-request-id"
"""Azure's own request id header, read when ``x-request-id`` is absent."""
DISPLAY_NAME: Final = "Azure OpenAI"
"""The provider named in messages."""


def is_content_filter(error: Mapping[str, Any] | None) -> bool:
    """Whether an ``error`` object says the content filter blocked the call."""
    if error is None:
        return False
    if error.get("code") == "content_filter":
        return True
    inner = error.get("innererror")
    return isinstance(inner, dict) and inner.get("code") == POLICY_VIOLATION


def read_answer(
    status: int, headers: Mapping[str, str], value: Any
) -> http_errors.AnswerReading:
    """The reading of a non-2xx Azure OpenAI answer (an ``AnswerReader``): the
    shared reader's, with ``CONTENT_FILTER`` for a blocked prompt."""
    reading = http_errors.read_answer(status, headers, value)
    inner = value.get("error") if isinstance(value, dict) else None
    # Only a refused request: an auth or rate-limit answer keeps its own code.
    if (
        400 <= status < 500
        and status not in (401, 403, 429)
        and is_content_filter(inner if isinstance(inner, dict) else None)
    ):
        return attrs.evolve(reading, code=CONTENT_FILTER_CODE)
    return reading


http_error: Final = functools.partial(
    http_errors.http_error,
    provider=DISPLAY_NAME,
    read=read_answer,
    request_id_headers=(*http_errors.REQUEST_ID_HEADERS, AZURE_REQUEST_ID_HEADER),
)
"""The ``LlmError`` of a non-2xx Azure OpenAI answer (returned, not raised): the
shared ``http_errors.http_error`` reading the body with ``read_answer``."""
