"""What the command line adds to a failure so the user knows what to do next.

``failure_message(failure, key_hint)`` is the text after ``error[CODE]: ``.
Contracts callers may rely on:

- ``AUTH`` and ``MISSING_CREDENTIAL``: the message, then where the key comes
  from (``key_hint``: the variable or flag of the route in use).
- ``RATE_LIMIT``: the message, then ``retry after N s`` when the provider said
  how long to wait.
- Every other code: the message unchanged.
"""

from __future__ import annotations

from dsh_llm.errors import ErrorCode
from dsh_llm.protocol import LlmFailure

__all__ = ["failure_message"]


def failure_message(failure: LlmFailure, key_hint: str | None) -> str:
    """The message to print for ``failure`` (see the module docstring)."""
    message = failure.message
    if failure.code in (ErrorCode.AUTH, ErrorCode.MISSING_CREDENTIAL) and key_hint:
        return f"{message} ({key_hint})"
    if failure.code == ErrorCode.RATE_LIMIT:
        wait = failure.provider_retry_after_ms
        if wait is not None:
            seconds = wait / 1000
            shown = f"{seconds:.0f}" if seconds >= 10 else f"{seconds:.1f}"
            return f"{message} (retry after {shown} s)"
        return f"{message} (rate limited; the provider gave no retry-after)"
    return message
