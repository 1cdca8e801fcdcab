"""What a provider said about its rate limits: ``RateLimit`` and ``RateLimits``.

- One ``RateLimit`` per dimension (requests, tokens): the window's ``limit``,
  what is ``remaining`` of it, and ``reset_ms``, the time from the response to
  the window's reset. Each is optional: ``None`` is "not reported", never a guess.
- ``RateLimits`` holds the two dimensions; the transport reads it from the
  response headers (``dsh_llm.transport.ratelimits``), a stream exposes it once
  its headers arrived (``ChunkStream.rate_limits``) and a refused call carries it
  (``LlmError.rate_limits``, ``LlmFailure.rate_limits``).
- The JSON is ``{"requests": {"limit", "remaining", "resetMs"}, "tokens": ...}``,
  absent values omitted.
"""

from __future__ import annotations

from typing import Any

import attrs

from dsh_llm.protocol import checks as c

__all__ = ["RateLimit", "RateLimits"]

_count = c.optional(c.non_negative_int)


@attrs.frozen(kw_only=True)
class RateLimit:
    """One rate-limit dimension (requests or tokens) as a response reported it."""

    limit: int | None = attrs.field(default=None, validator=_count)
    """The most the window allows, when reported."""
    remaining: int | None = attrs.field(default=None, validator=_count)
    """What is left of the window, when reported."""
    reset_ms: float | None = attrs.field(default=None, converter=c.json_number)
    """Milliseconds from the response until the window resets (>= 0), when
    reported."""

    @reset_ms.validator
    def _check_reset(self, attribute: attrs.Attribute[Any], value: object) -> None:
        if value is None:
            return
        c.finite_number(self, attribute, value)
        assert isinstance(value, int | float)
        if value < 0:
            raise c.bad_value(self, "reset_ms", f"must be >= 0, got {value}")

    def exhausted(self, low_water: int = 0) -> bool:
        """Whether ``remaining`` is reported and at most ``low_water``."""
        return self.remaining is not None and self.remaining <= low_water


@attrs.frozen(kw_only=True)
class RateLimits:
    """The rate limits a response reported (see the module docstring)."""

    requests: RateLimit | None = attrs.field(
        default=None, validator=c.optional(c.instance_of(RateLimit))
    )
    """The request budget, when reported."""
    tokens: RateLimit | None = attrs.field(
        default=None, validator=c.optional(c.instance_of(RateLimit))
    )
    """The token budget, when reported."""

    def __str__(self) -> str:
        """``requests 0/60 (reset 1.5s), tokens 1200/40000 (reset 6s)``: each
        reported dimension, remaining over limit (``?`` when unknown)."""
        parts = []
        for name, limit in (("requests", self.requests), ("tokens", self.tokens)):
            if limit is None:
                continue
            remaining = "?" if limit.remaining is None else str(limit.remaining)
            text = f"{name} {remaining}/{'?' if limit.limit is None else limit.limit}"
            if limit.reset_ms is not None:
                text += f" (reset {limit.reset_ms / 1000:g}s)"
            parts.append(text)
        return ", ".join(parts) or "not reported"
