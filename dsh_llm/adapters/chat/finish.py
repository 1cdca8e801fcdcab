"""How a chat-completions response ends, in protocol terms: usage and finish.

Pure functions of what the wire reports at the end of a response; the
translator (``dsh_llm.adapters.chat.translate``) calls them at the end marker
(``map_usage`` also whenever the usage so far is needed).

Contracts callers may rely on:

- ``map_usage``: wire usage to disjoint ``TokenUsage`` (``docs/protocol.md``). A count
  that was not reported, is not a non-negative int, or is above ``2**53 - 1``, is
  ``None``, never a guess. ``output_tokens`` includes the reasoning tokens even
  where a server leaves them out of ``completion_tokens`` (xAI): the arithmetic of
  ``total_tokens`` shows the convention, a server profile declares it otherwise.
- ``map_finish_reason``: a wire ``finish_reason`` to a ``FinishReason`` (the
  writer corrects ``stop``/``tool-calls`` by whether a tool-call block was
  emitted); a value outside the vocabulary is an ``error`` finish whose code is
  the upper-cased value (``UNKNOWN_FINISH_REASON`` when that value is not a short
  identifier or holds a secret).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dsh_llm.adapters._wire.values import wire_count
from dsh_llm.adapters._wire.writer import stopped_failure
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol.checks import MAX_SAFE_INTEGER


def map_usage(
    usage: Mapping[str, Any], *, reasoning_left_out: bool = False
) -> TokenUsage:
    """Wire usage to disjoint ``TokenUsage`` (cached input apart from
    ``input_tokens``; reasoning inside ``output_tokens``).

    ``cache_read`` is ``prompt_tokens_details.cached_tokens``, else
    ``prompt_cache_hit_tokens`` (DeepSeek); ``cache_write`` is
    ``prompt_tokens_details.cache_write_tokens`` (OpenRouter);
    ``input = prompt_tokens - cache_read - cache_write``;
    ``reasoning`` from ``completion_tokens_details.reasoning_tokens``;
    ``output = completion_tokens``, plus ``reasoning`` where the server leaves
    reasoning out of ``completion_tokens`` (``reasoning_left_out_of_completion``).
    A count not reported (or not a non-negative int) is ``None``; an impossible
    input (cache above the prompt total) is ``None`` rather than a negative
    number.

    Args:
        usage: The wire ``usage`` object.
        reasoning_left_out: The server's declared convention, used when the
            counts themselves do not show it.
    """
    prompt = wire_count(usage.get("prompt_tokens"))
    details = usage.get("prompt_tokens_details")
    cached = written = None
    if isinstance(details, dict):
        cached = wire_count(details.get("cached_tokens"))
        written = wire_count(details.get("cache_write_tokens"))
    if cached is None:
        cached = wire_count(usage.get("prompt_cache_hit_tokens"))
    completion_details = usage.get("completion_tokens_details")
    reasoning = (
        wire_count(completion_details.get("reasoning_tokens"))
        if isinstance(completion_details, dict)
        else None
    )
    output = wire_count(usage.get("completion_tokens"))
    if (
        output is not None
        and reasoning
        and reasoning_left_out_of_completion(
            prompt=prompt,
            completion=output,
            reasoning=reasoning,
            total=wire_count(usage.get("total_tokens")),
            declared=reasoning_left_out,
        )
    ):
        output += reasoning
        if output > MAX_SAFE_INTEGER:
            output = None
    uncached = None if prompt is None else prompt - (cached or 0) - (written or 0)
    return TokenUsage(
        input_tokens=uncached if uncached is None or uncached >= 0 else None,
        output_tokens=output,
        cache_read_tokens=cached,
        cache_write_tokens=written,
        reasoning_tokens=reasoning,
    )


def reasoning_left_out_of_completion(
    *,
    prompt: int | None,
    completion: int,
    reasoning: int,
    total: int | None,
    declared: bool,
) -> bool:
    """Whether ``completion_tokens`` leaves the ``reasoning`` tokens out.

    The counts decide when they can: more reasoning than completion tokens, or
    ``total == prompt + completion + reasoning``, means left out (xAI);
    ``total == prompt + completion`` means included (OpenAI, DeepSeek). Otherwise
    (no total, or a total that matches neither) the server's ``declared``
    convention holds.
    """
    if reasoning > completion:
        return True
    if prompt is not None and total is not None:
        if total == prompt + completion + reasoning:
            return True
        if total == prompt + completion:
            return False
    return declared


def map_finish_reason(wire: str | None) -> FinishReason:
    """The finish for a wire ``finish_reason`` (``None``: none was sent).

    ``stop``/none are ``stop``; ``tool_calls``/``function_call`` are
    ``tool-calls`` (the ``BlockWriter`` makes either one ``tool-calls`` exactly
    when a tool-call block was emitted: a provider says ``stop`` after a named
    ``tool_choice``); ``length`` is ``max-tokens``; any other value is the
    ``error`` finish of ``stopped_failure`` (``"model stopped: <wire>"``, coded
    ``CONTENT_FILTER``, ``INSUFFICIENT_SYSTEM_RESOURCE``...; the read loop
    redacts both, ``StreamingCall.redacted_finish``).
    """
    if wire is None or wire == "stop":
        return FinishReason.STOP
    if wire in ("tool_calls", "function_call"):
        return FinishReason.TOOL_CALLS
    if wire == "length":
        return FinishReason.MAX_TOKENS
    return FinishReason.error(stopped_failure(wire))
