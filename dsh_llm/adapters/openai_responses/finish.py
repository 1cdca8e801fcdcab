"""How a Responses stream ends, in protocol terms: usage and finish.

Pure functions of what the terminal event reports; ``ResponsesTranslator``
calls them once, at ``response.completed`` / ``response.incomplete``.

Contracts callers may rely on:

- ``map_usage``: the terminal ``response.usage`` to disjoint ``TokenUsage``; a
  count not reported, not a non-negative int, above ``MAX_SAFE_COUNT``, or a 0
  the profile says means "unknown" is ``None``, never a guess.
- ``terminal_finish``: the terminal status and the incomplete reason to the
  provider's ``FinishReason`` (``stop``: the writer makes it ``tool-calls``
  when a tool-call block was emitted); a cut answer is ``max-tokens`` or an
  ``error``, never ``stop``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from typing import Final

from dsh_llm.adapters._wire.values import wire_count
from dsh_llm.adapters._wire.writer import stopped_failure
from dsh_llm.adapters.openai_responses.profiles import ResponsesProfile
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import LlmFailure
from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol.checks import MAX_SAFE_INTEGER

MAX_SAFE_COUNT: Final = MAX_SAFE_INTEGER
"""The largest token count taken as reported; a larger one is ``None``."""


def _count(value: object, *, zero_unknown: bool = False) -> int | None:
    count = wire_count(value)
    return None if zero_unknown and count == 0 else count


def map_usage(usage: Mapping[str, Any], *, profile: ResponsesProfile) -> TokenUsage:
    """A terminal ``response.usage`` to disjoint ``TokenUsage``.

    Uncached input is ``input_tokens - cached_tokens - cache_write_tokens`` (both
    counted inside ``input_tokens``; a missing one counts 0 there); cache read is
    ``input_tokens_details.cached_tokens``, cache write
    ``input_tokens_details.cache_write_tokens``; output ``output_tokens``
    (reasoning included); reasoning ``output_tokens_details.reasoning_tokens``.
    A count not reported, not a non-negative int, above ``MAX_SAFE_COUNT``, or
    0 under a ``zero_means_unknown`` profile (Ollama) is ``None``; an impossible
    input (cache above the total) is ``None``.
    """
    zero = profile.zero_means_unknown
    details = usage.get("input_tokens_details")
    details = details if isinstance(details, dict) else {}
    out_details = usage.get("output_tokens_details")
    out_details = out_details if isinstance(out_details, dict) else {}
    total = _count(usage.get("input_tokens"), zero_unknown=zero)
    cached = _count(details.get("cached_tokens"), zero_unknown=zero)
    written = _count(details.get("cache_write_tokens"), zero_unknown=zero)
    uncached = None if total is None else total - (cached or 0) - (written or 0)
    return TokenUsage(
        input_tokens=uncached if uncached is None or uncached >= 0 else None,
        output_tokens=_count(usage.get("output_tokens")),
        cache_read_tokens=cached,
        cache_write_tokens=written,
        reasoning_tokens=_count(out_details.get("reasoning_tokens"), zero_unknown=zero),
    )


def terminal_finish(
    status: str,
    incomplete_reason: object,
    *,
    item_incomplete: bool,
) -> FinishReason:
    """The finish for a ``response.completed`` (``status`` ``completed``) or
    ``response.incomplete`` event; a terminal response whose own ``status`` is
    ``cancelled`` or ``failed`` is an ``error`` finish with that code
    (``CANCELLED``, ``FAILED``), whatever the event type said.

    ``completed``: ``max-tokens`` when an item ended ``incomplete`` (trust the
    item), else ``stop`` (the ``BlockWriter`` turns it into ``tool-calls`` when
    a tool-call block was emitted).
    ``incomplete``: ``max_output_tokens`` is ``max-tokens``; any other reason is
    the ``error`` finish of ``stopped_failure`` (``"model stopped: <reason>"``,
    coded ``CONTENT_FILTER``...), ``INCOMPLETE`` when none was given.
    """
    if status == "completed":
        return FinishReason.MAX_TOKENS if item_incomplete else FinishReason.STOP
    if status in ("cancelled", "failed"):
        return FinishReason.error(stopped_failure(status))
    if incomplete_reason == "max_output_tokens":
        return FinishReason.MAX_TOKENS
    if not isinstance(incomplete_reason, str) or not incomplete_reason:
        return FinishReason.error(
            LlmFailure(message="model stopped: incomplete", code="INCOMPLETE")
        )
    return FinishReason.error(stopped_failure(incomplete_reason))
