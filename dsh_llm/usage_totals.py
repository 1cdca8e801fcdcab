"""Usage added up over several attempts of one call.

``total_usage(usages)`` is what ``dsh_llm.call.call_with_retry`` reports as the
usage of all its attempts. Contracts callers may rely on:

- Each count is the sum of that count over every attempt; a count unknown in
  any attempt (``None``, or an attempt that reported no usage at all) is
  unknown in the total: whether that attempt was billed is not known, and an
  unknown is never taken as 0.
- A sum above ``2**53 - 1`` is treated as not reported (``None``), as a single
  count above it is.
- No attempt at all gives ``None``.
"""

from __future__ import annotations

from collections.abc import Sequence

from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol.checks import MAX_SAFE_INTEGER

__all__ = ["total_usage"]

_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
)


def total_usage(usages: Sequence[TokenUsage | None]) -> TokenUsage | None:
    """The usage of all ``usages`` together (see the module docstring)."""
    if not usages:
        return None
    counts: dict[str, int | None] = {}
    for field in _FIELDS:
        total: int | None = 0
        for usage in usages:
            count = None if usage is None else getattr(usage, field)
            if count is None or total is None:
                total = None
                break
            total += count
        counts[field] = total if total is None or total <= MAX_SAFE_INTEGER else None
    return TokenUsage(**counts)
