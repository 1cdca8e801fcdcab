"""How a chat-completions response ends, in protocol terms: usage and finish.

Pure functions of what the wire reports at the end of a response; the
translator (``dsh_llm.adapters.chat.translate``) calls them at the end marker
(``map_usage`` also whenever the usage so far is needed).

Contracts callers may rely on:

- ``map_usage``: wire usage to disjoint ``TokenUsage`` (``docs/protocol.md``). A count
  that was not reported, is not a non-negative int, or is above ``2**53 - 1``, is
  ``None``, never a guess.
- ``map_finish_reason``: a wire ``finish_reason`` to a ``FinishReason`` (the
  writer corrects ``stop``/``tool-calls`` by whether a tool-call block was
  emitted); a value outside the vocabulary is an ``error`` finish whose code is
  the upper-cased value (``UNKNOWN_FINISH_REASON`` when that value is not a short
  identifier or holds a secret).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from dsh_llm.adapters._wire.values import wire_count
from dsh_llm.errors import ErrorCode
from dsh_llm.protocol import FinishReason, LlmFailure, TokenUsage

UNKNOWN_FINISH_REASON_CODE: Final = ErrorCode.UNKNOWN_FINISH_REASON.value
"""The code of a finish reason that cannot serve as a code itself."""

_IDENTIFIER: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}")


def map_usage(usage: Mapping[str, Any]) -> TokenUsage:
    """Wire usage to disjoint ``TokenUsage`` (cached input apart from
    ``input_tokens``; reasoning already inside ``output_tokens``).

    ``cache_read`` is ``prompt_tokens_details.cached_tokens``, else
    ``prompt_cache_hit_tokens`` (DeepSeek); ``input = prompt_tokens - cache_read``;
    ``output = completion_tokens`` (reasoning included); ``reasoning`` from
    ``completion_tokens_details.reasoning_tokens``. A count not reported (or not
    a non-negative int) is ``None``; an impossible input (cache above the prompt
    total) is ``None`` rather than a negative number.
    """
    prompt = wire_count(usage.get("prompt_tokens"))
    details = usage.get("prompt_tokens_details")
    cached = (
        wire_count(details.get("cached_tokens")) if isinstance(details, dict) else None
    )
    if cached is None:
        cached = wire_count(usage.get("prompt_cache_hit_tokens"))
    completion_details = usage.get("completion_tokens_details")
    reasoning = (
        wire_count(completion_details.get("reasoning_tokens"))
        if isinstance(completion_details, dict)
        else None
    )
    uncached = None if prompt is None else prompt - (cached or 0)
    return TokenUsage(
        input_tokens=uncached if uncached is None or uncached >= 0 else None,
        output_tokens=wire_count(usage.get("completion_tokens")),
        cache_read_tokens=cached,
        reasoning_tokens=reasoning,
    )


def map_finish_reason(wire: str | None) -> FinishReason:
    """The finish for a wire ``finish_reason`` (``None``: none was sent).

    ``stop``/none are ``stop``; ``tool_calls``/``function_call`` are
    ``tool-calls`` (the ``BlockWriter`` makes either one ``tool-calls`` exactly
    when a tool-call block was emitted: a provider says ``stop`` after a named
    ``tool_choice``); ``length`` is ``max-tokens``; any other value is an
    ``error`` finish ``"model stopped: <wire>"`` with the upper-cased value as code
    (``CONTENT_FILTER``, ``INSUFFICIENT_SYSTEM_RESOURCE``). A value that is not
    a short identifier (letters, digits, ``_``, ``-``, ``.``; at most 64) gets
    the code ``UNKNOWN_FINISH_REASON``; the message shows it cut to 120
    characters (the read loop redacts both, ``StreamingCall.redacted_finish``).
    """
    if wire is None or wire == "stop":
        return FinishReason.STOP
    if wire in ("tool_calls", "function_call"):
        return FinishReason.TOOL_CALLS
    if wire == "length":
        return FinishReason.MAX_TOKENS
    code = wire.upper() if _IDENTIFIER.fullmatch(wire) else UNKNOWN_FINISH_REASON_CODE
    return FinishReason.error(
        LlmFailure(message=f"model stopped: {wire[:120]}", code=code)
    )
