"""Rate-limit response headers read into one ``RateLimits`` value.

- ``rate_limits(headers, now=time.time)`` reads every dialect below and returns
  ``None`` when the headers report no limit. It never raises: a value it cannot
  read is left out (``None``), never guessed.
- OpenAI style (OpenAI, Azure OpenAI, Groq, xAI, Cerebras...):
  ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}``, with an optional
  window suffix (``-minute``, ``-day``); of several windows the one with the
  fewest remaining wins. Resets are durations (``6m0s``, ``1s``, ``20ms``) or
  seconds.
- Anthropic: ``anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}``
  (tokens: else ``input-tokens``), resets as RFC 3339 times.
- One-dimension headers, read as the request budget: ``x-ratelimit-{limit,
  remaining,reset}`` (OpenRouter, Together...) and the IETF ``ratelimit-*``. A
  reset there is a duration, seconds, a Unix time (seconds from 10^9, milliseconds
  from 10^12) or a date.
- ``reset_ms`` is the time from ``now`` to the reset, 0 for a reset already past.
  The dialects side by side: ``docs/caching.md``.
- ``response_info(headers, redact=...)`` is a 2xx response's ``ResponseInfo``:
  its request id (through ``redact``) and its rate limits.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from collections.abc import Mapping
from datetime import datetime
from typing import Final

from dsh_llm.protocol import RateLimit
from dsh_llm.protocol import RateLimits
from dsh_llm.protocol import ResponseInfo
from dsh_llm.protocol.checks import MAX_SAFE_INTEGER
from dsh_llm.transport.http_errors import Redact
from dsh_llm.transport.http_errors import http_date_ms
from dsh_llm.transport.http_errors import request_id

__all__ = ["parse_reset_ms", "rate_limits", "response_info"]

_DIMENSIONS: Final = ("requests", "tokens")
_OPENAI: Final = re.compile(
    r"x-ratelimit-(limit|remaining|reset)-(requests|tokens)(?:-([a-z0-9_]+))?"
)
_DURATION_PART: Final = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|ms|s|m|h)")
_UNIT_MS: Final = {
    "ns": 1e-6,
    "us": 1e-3,
    "µs": 1e-3,
    "ms": 1.0,
    "s": 1000.0,
    "m": 60_000.0,
    "h": 3_600_000.0,
}
_NUMBER: Final = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_UNIX_SECONDS: Final = 1e9
_UNIX_MS: Final = 1e12

Clock = Callable[[], float]


def _count(text: str | None) -> int | None:
    if text is None:
        return None
    text = text.strip()
    if not text.isdigit() or not text.isascii():
        return None
    value = int(text)
    return value if value <= MAX_SAFE_INTEGER else None


def _duration_ms(text: str) -> float | None:
    """A Go-style duration (``6m0s``, ``1.5s``, ``20ms``) in ms, else ``None``."""
    position = 0
    total = 0.0
    for match in _DURATION_PART.finditer(text):
        if match.start() != position:
            return None
        total += float(match.group(1)) * _UNIT_MS[match.group(2)]
        position = match.end()
    return total if position == len(text) and position > 0 else None


def _date_ms(text: str, now: Clock) -> float | None:
    """An RFC 3339 or HTTP date, as ms from ``now``."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return http_date_ms(text, now=now)
    if when.tzinfo is None:
        return None
    return (when.timestamp() - now()) * 1000


def parse_reset_ms(
    text: str | None, *, now: Clock = time.time, absolute: bool = True
) -> float | None:
    """A reset header value as ms from ``now`` (>= 0), else ``None``.

    A duration (``6m0s``) or a bare number of seconds is a delay; with
    ``absolute`` a number from 10^9 is a Unix time in seconds, from 10^12 in
    milliseconds, and an RFC 3339 or HTTP date is read as the time it names.
    """
    if text is None:
        return None
    text = text.strip()
    if not text:
        return None
    delay: float | None
    if _NUMBER.fullmatch(text):
        number = float(text)
        if absolute and number >= _UNIX_MS:
            delay = number - now() * 1000
        elif absolute and number >= _UNIX_SECONDS:
            delay = (number - now()) * 1000
        else:
            delay = number * 1000
    else:
        delay = _duration_ms(text)
        if delay is None and absolute:
            delay = _date_ms(text, now)
    if delay is None or not math.isfinite(delay):
        return None
    return max(delay, 0.0)


def _limit(values: Mapping[str, str], prefix: str, now: Clock) -> RateLimit | None:
    """The window of ``values``'s ``<prefix>limit``, ``<prefix>remaining`` and
    ``<prefix>reset`` (``None``: none of them usable)."""
    value = RateLimit(
        limit=_count(values.get(prefix + "limit")),
        remaining=_count(values.get(prefix + "remaining")),
        reset_ms=parse_reset_ms(values.get(prefix + "reset"), now=now),
    )
    return None if value == _EMPTY else value


_EMPTY: Final = RateLimit()


def _tighter(a: RateLimit | None, b: RateLimit | None) -> RateLimit | None:
    """Of two windows of one dimension, the one with fewer remaining."""
    if a is None or b is None:
        return a or b
    left = math.inf if a.remaining is None else a.remaining
    right = math.inf if b.remaining is None else b.remaining
    return b if right < left else a


def _openai_style(headers: Mapping[str, str], now: Clock) -> dict[str, RateLimit]:
    # (dimension, window) -> {kind: value}
    windows: dict[tuple[str, str], dict[str, str]] = {}
    for name, value in headers.items():
        match = _OPENAI.fullmatch(name.lower())
        if match is not None:
            kind, dimension, window = match.groups()
            windows.setdefault((dimension, window or ""), {})[kind] = value
    found: dict[str, RateLimit] = {}
    for (dimension, _), values in sorted(windows.items()):
        limit = _limit(values, "", now)
        best = _tighter(found.get(dimension), limit)
        if best is not None:
            found[dimension] = best
    return found


def _anthropic(lower: Mapping[str, str], now: Clock) -> dict[str, RateLimit]:
    found: dict[str, RateLimit] = {}
    for dimension, names in (
        ("requests", ("requests",)),
        ("tokens", ("tokens", "input-tokens")),
    ):
        for name in names:
            prefix = f"anthropic-ratelimit-{name}-"
            limit = _limit(lower, prefix, now)
            if limit is not None:
                found[dimension] = limit
                break
    return found


def _single(lower: Mapping[str, str], now: Clock) -> RateLimit | None:
    for prefix in ("x-ratelimit-", "ratelimit-"):
        limit = _limit(lower, prefix, now)
        if limit is not None:
            return limit
    return None


def rate_limits(
    headers: Mapping[str, str], *, now: Clock = time.time
) -> RateLimits | None:
    """The rate limits ``headers`` report (see the module docstring), or
    ``None`` when they report none.

    Args:
        headers: Response headers (names compared case-insensitively).
        now: Current Unix time in seconds, for absolute reset times.
    """
    lower = {name.lower(): value for name, value in headers.items()}
    if not any("ratelimit" in name for name in lower):
        return None
    found = _anthropic(lower, now)
    for dimension, limit in _openai_style(lower, now).items():
        found.setdefault(dimension, limit)
    if "requests" not in found:
        single = _single(lower, now)
        if single is not None:
            found["requests"] = single
    if not found:
        return None
    return RateLimits(requests=found.get("requests"), tokens=found.get("tokens"))


def _unchanged(text: str) -> str:
    return text


def response_info(
    headers: Mapping[str, str], *, redact: Redact = _unchanged, now: Clock = time.time
) -> ResponseInfo:
    """What a 2xx response's ``headers`` say about it: the request id (passed
    through ``redact``: a server may echo the key in it) and the rate limits."""
    found = request_id(headers)
    cleaned = None if found is None else redact(found) or None
    return ResponseInfo(request_id=cleaned, rate_limits=rate_limits(headers, now=now))
