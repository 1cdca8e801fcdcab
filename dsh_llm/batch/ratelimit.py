"""A per-route request limiter for batch jobs, ``RouteLimiter``; its contracts:

- Each route has its own token bucket: ``requests_per_minute`` tokens a minute,
  at most ``burst`` (default 1) saved up, so requests are spread evenly and no
  60-second window holds more than ``requests_per_minute + burst - 1`` of them.
  ``None`` sets no rate; only back-offs then hold requests.
- ``back_off(route, delay_ms)`` holds every request of the route until
  ``delay_ms`` from now (a later back-off never shortens an earlier one); the
  runner calls it with the provider's ``Retry-After`` on ``RATE_LIMIT``. A
  server-given delay is never trusted as it is: it is clamped to
  ``max_back_off_ms`` (default ``DEFAULT_MAX_BACK_OFF_MS``, 5 minutes), so an
  absurd ``Retry-After: 99999999999`` holds the route 5 minutes, not forever.
- ``observe(route, limits)`` paces a route by what its responses report
  (``RateLimits``: ``x-ratelimit-*``, ``anthropic-ratelimit-*``), before it is
  refused: the reported remaining requests (less ``low_water_requests``) are a
  budget counted down by each request started after the response, and once it
  is spent the route waits for that window's reset; remaining tokens at or
  below ``low_water_tokens`` hold the route until the token window resets. A
  report without a remaining count and a reset changes nothing; a reset is
  clamped like a back-off.
- ``acquire`` is thread-safe and waits through ``wait(seconds, signal)``
  (default: ``signal.wait``, else ``time.sleep``) in steps of at most
  ``MAX_WAIT_S``, so no wait is too long for the platform's timers; it returns
  ``False`` without taking a token as soon as ``signal`` is aborted. ``clock``
  and ``wait`` are injectable so tests can run on a fake clock.
- ``LimiterError`` is what the runner raises when a limiter fails anyway: the
  request it was for gets no row, so a rerun sends it.
- The limiter lives in one process: a Dask worker has its own (see docs/batch.md).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Final

import attrs

from dsh_llm.protocol import RateLimits
from dsh_llm.protocol.checks import MAX_TIMEOUT_MS
from dsh_llm.signal import AbortSignal

__all__ = [
    "DEFAULT_MAX_BACK_OFF_MS",
    "MAX_WAIT_S",
    "LimiterError",
    "RouteLimiter",
    "Wait",
]

DEFAULT_MAX_BACK_OFF_MS: Final = 300_000
"""The longest a back-off holds a route unless told otherwise (5 minutes)."""
MAX_WAIT_S: Final = 60.0
"""The longest single wait of ``acquire``; a longer one is waited in steps."""

Wait = Callable[[float, AbortSignal | None], bool]
"""Waits up to the seconds given; returns ``True`` when the signal aborted."""


def _wait(seconds: float, signal: AbortSignal | None) -> bool:
    if signal is not None:
        return signal.wait(seconds)
    time.sleep(seconds)
    return False


@attrs.define
class _Bucket:
    tokens: float
    updated: float
    blocked_until: float = -math.inf
    # The requests a response said are left, counted down per request started
    # since, and when that window resets (-inf: no budget known).
    budget: int = 0
    budget_until: float = -math.inf


class LimiterError(RuntimeError):
    """A route's limiter failed while a request waited for it or backed its
    route off; the request gets no row (a rerun sends it).

    Args:
        route: The route.
        cause: What the limiter raised (also ``__cause__``).
    """

    def __init__(self, route: str, cause: BaseException) -> None:
        super().__init__(
            f'the rate limiter of route "{route}" failed '
            f"({type(cause).__name__}: {cause}); the request was not recorded"
        )
        self.route = route
        """The route."""
        self.__cause__ = cause


class RouteLimiter:
    """Per-route token buckets with back-off (see the module docstring).

    Args:
        requests_per_minute: Requests each route may start per minute, or
            ``None`` for no rate.
        burst: How many requests may start at once after an idle spell.
        clock: Seconds, monotonic.
        wait: How to wait (see ``Wait``).
        max_back_off_ms: The longest ``back_off`` (or a reported reset) holds
            a route, whatever delay it is given.
        low_water_requests: Requests of a reported budget held back (the route
            waits for the reset once only this many are left).
        low_water_tokens: The reported remaining tokens at or below which the
            route waits for the token window's reset.

    Raises:
        ValueError: for a rate that is not a positive finite number, a
            ``burst`` below 1, a ``max_back_off_ms`` that is not a positive
            number of at most 2147483647, or a low-water mark that is not an
            int >= 0.
    """

    def __init__(
        self,
        requests_per_minute: float | None = None,
        *,
        burst: int = 1,
        clock: Callable[[], float] = time.monotonic,
        wait: Wait = _wait,
        max_back_off_ms: float = DEFAULT_MAX_BACK_OFF_MS,
        low_water_requests: int = 0,
        low_water_tokens: int = 0,
    ) -> None:
        if requests_per_minute is not None and (
            isinstance(requests_per_minute, bool)
            or not isinstance(requests_per_minute, int | float)
            or not math.isfinite(requests_per_minute)
            or requests_per_minute <= 0
        ):
            raise ValueError("requests_per_minute must be a positive number")
        if type(burst) is not int or burst < 1:
            raise ValueError("burst must be an integer >= 1")
        if (
            isinstance(max_back_off_ms, bool)
            or not isinstance(max_back_off_ms, int | float)
            or not 0 < max_back_off_ms <= MAX_TIMEOUT_MS
        ):
            raise ValueError(
                f"max_back_off_ms must be a positive number <= {MAX_TIMEOUT_MS}"
            )
        for name, mark in (
            ("low_water_requests", low_water_requests),
            ("low_water_tokens", low_water_tokens),
        ):
            if type(mark) is not int or mark < 0:
                raise ValueError(f"{name} must be an integer >= 0")
        self._low_water_requests = low_water_requests
        self._low_water_tokens = low_water_tokens
        self._max_back_off_ms = max_back_off_ms
        self._rate = None if requests_per_minute is None else requests_per_minute / 60
        self._burst = burst
        self._clock = clock
        self._wait = wait
        self._lock = threading.Lock()
        self._buckets: dict[str, _Bucket] = {}
        # No rate and no back-off yet: nothing can hold a request, so acquire
        # skips the lock every worker would otherwise queue on.
        self._unlimited = self._rate is None

    @property
    def requests_per_minute(self) -> float | None:
        """The rate per route, or ``None``."""
        return None if self._rate is None else self._rate * 60

    def _bucket(self, route: str, now: float) -> _Bucket:
        bucket = self._buckets.get(route)
        if bucket is None:
            bucket = self._buckets[route] = _Bucket(tokens=self._burst, updated=now)
        elif self._rate is not None:
            bucket.tokens = min(
                self._burst, bucket.tokens + (now - bucket.updated) * self._rate
            )
            bucket.updated = now
        return bucket

    def _try_take(self, route: str) -> float:
        """Take a token and return 0, or return how long to wait for one."""
        with self._lock:
            now = self._clock()
            bucket = self._bucket(route, now)
            if now < bucket.blocked_until:
                return bucket.blocked_until - now
            budgeted = now < bucket.budget_until
            if budgeted and bucket.budget <= self._low_water_requests:
                return bucket.budget_until - now
            if self._rate is not None:
                if bucket.tokens < 1:
                    return (1 - bucket.tokens) / self._rate
                bucket.tokens -= 1
            if budgeted:
                bucket.budget -= 1
            return 0.0

    def acquire(self, route: str, signal: AbortSignal | None = None) -> bool:
        """Wait until ``route`` may start a request and count it.

        Returns:
            ``True`` when the request may start, ``False`` when ``signal``
            aborted first (no token is taken then).
        """
        while True:
            if signal is not None and signal.aborted:
                return False
            if self._unlimited:
                return True
            delay = self._try_take(route)
            if delay <= 0:
                return True
            if self._wait(min(delay, MAX_WAIT_S), signal):
                return False

    def back_off(self, route: str, delay_ms: float) -> None:
        """Hold ``route``'s requests for ``delay_ms`` from now, at most
        ``max_back_off_ms`` (a delay that is not a number above 0 is ignored)."""
        if not delay_ms > 0:  # NaN included
            return
        # min() first: an int too large for a float cannot be divided.
        seconds = min(delay_ms, self._max_back_off_ms) / 1000
        with self._lock:
            self._unlimited = False
            now = self._clock()
            bucket = self._bucket(route, now)
            bucket.blocked_until = max(bucket.blocked_until, now + seconds)

    def observe(self, route: str, limits: RateLimits | None) -> None:
        """Pace ``route`` by the rate limits a response of it reported (see the
        module docstring); ``None`` changes nothing."""
        if limits is None:
            return
        budget: tuple[int, float] | None = None
        requests = limits.requests
        if (
            requests is not None
            and requests.remaining is not None
            and requests.reset_ms is not None
        ):
            budget = (requests.remaining, requests.reset_ms)
        hold_ms: float | None = None
        tokens = limits.tokens
        if tokens is not None and tokens.exhausted(self._low_water_tokens):
            hold_ms = tokens.reset_ms
        if budget is None and hold_ms is None:
            return
        with self._lock:
            self._unlimited = False
            now = self._clock()
            bucket = self._bucket(route, now)
            if budget is not None:
                bucket.budget = budget[0]
                bucket.budget_until = now + self._clamped_s(budget[1])
            if hold_ms is not None:
                until = now + self._clamped_s(hold_ms)
                bucket.blocked_until = max(bucket.blocked_until, until)

    def _clamped_s(self, delay_ms: float) -> float:
        return min(delay_ms, self._max_back_off_ms) / 1000

    def __repr__(self) -> str:
        return f"RouteLimiter(requests_per_minute={self.requests_per_minute!r})"
