"""A per-route request limiter for batch jobs.

This module owns ``RouteLimiter``. Contracts callers may rely on:

- Each route has its own token bucket: ``requests_per_minute`` tokens a minute,
  at most ``burst`` (default 1) saved up, so requests are spread evenly and no
  60-second window holds more than ``requests_per_minute + burst - 1`` of them.
  ``None`` sets no rate; only back-offs then hold requests.
- ``back_off(route, delay_ms)`` holds every request of the route until
  ``delay_ms`` from now (a later back-off never shortens an earlier one); the
  runner calls it with the provider's ``Retry-After`` on ``RATE_LIMIT``.
- ``acquire`` is thread-safe and waits through ``wait(seconds, signal)``
  (default: ``signal.wait``, else ``time.sleep``); it returns ``False`` without
  taking a token as soon as ``signal`` is aborted. ``clock`` and ``wait`` are
  injectable so tests can run on a fake clock.
- The limiter lives in one process: a Dask worker has its own (see docs/batch.md).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

import attrs

from dsh_llm.signal import AbortSignal

__all__ = ["RouteLimiter", "Wait"]

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


class RouteLimiter:
    """Per-route token buckets with back-off (see the module docstring).

    Args:
        requests_per_minute: Requests each route may start per minute, or
            ``None`` for no rate.
        burst: How many requests may start at once after an idle spell.
        clock: Seconds, monotonic.
        wait: How to wait (see ``Wait``).

    Raises:
        ValueError: for a rate that is not a positive finite number, or a
            ``burst`` below 1.
    """

    def __init__(
        self,
        requests_per_minute: float | None = None,
        *,
        burst: int = 1,
        clock: Callable[[], float] = time.monotonic,
        wait: Wait = _wait,
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
        self._rate = None if requests_per_minute is None else requests_per_minute / 60
        self._burst = burst
        self._clock = clock
        self._wait = wait
        self._lock = threading.Lock()
        self._buckets: dict[str, _Bucket] = {}

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
            if self._rate is None:
                return 0.0
            if bucket.tokens >= 1:
                bucket.tokens -= 1
                return 0.0
            return (1 - bucket.tokens) / self._rate

    def acquire(self, route: str, signal: AbortSignal | None = None) -> bool:
        """Wait until ``route`` may start a request and count it.

        Returns:
            ``True`` when the request may start, ``False`` when ``signal``
            aborted first (no token is taken then).
        """
        while True:
            if signal is not None and signal.aborted:
                return False
            delay = self._try_take(route)
            if delay <= 0:
                return True
            if self._wait(delay, signal):
                return False

    def back_off(self, route: str, delay_ms: float) -> None:
        """Hold ``route``'s requests for ``delay_ms`` from now."""
        if not delay_ms > 0 or not math.isfinite(delay_ms):
            return
        with self._lock:
            now = self._clock()
            bucket = self._bucket(route, now)
            bucket.blocked_until = max(bucket.blocked_until, now + delay_ms / 1000)

    def __repr__(self) -> str:
        return f"RouteLimiter(requests_per_minute={self.requests_per_minute!r})"
