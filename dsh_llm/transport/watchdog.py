"""The stream watchdog: when a streaming call has waited too long.

The idle timeout must run only while the consumer waits for the next chunk,
and SSE comments must keep a read alive. But a timer any byte re-arms never fires
while a queued request receives ``: keep-alive`` comments (DeepSeek and
OpenRouter send them; a "300 s" timeout was seen waiting 17.7 minutes), so
keep-alive-only waits need a bound of their own. The watchdog reconciles the two
with three deadlines:

1. **Idle** (``idle_ms``): the longest silence. Any received byte re-arms
   it (``note_bytes``), keep-alive comments included, so comments keep an idle read
   alive.
2. **Keep-alive bound** (``keepalive_ms``): the longest wait without a *data event*
   (``note_data``). Comments do not re-arm it, so keep-alives alone cannot hold a
   stream past it. It never shortens the idle timeout (the effective bound is
   ``max(idle_ms, keepalive_ms)``); ``None`` disables it.
3. **Total** (``total_ms``, optional): the longest the whole call may take, from
   the request to the last byte, not counting the consumer's think time.

Think time is not waiting: ``pause()`` when a chunk is handed to the consumer and
``resume()`` when the consumer asks for the next one; resuming re-arms the idle
and keep-alive deadlines and moves the total deadline by the paused time.

The class is pure (time is passed in), so it is tested without sockets or
sleeps. The streaming call (``dsh_llm.transport.call``) turns ``remaining`` into a
socket timeout before every blocking read, so no timer thread exists and a stall
ends within the deadline.
"""

from __future__ import annotations

import enum
import math

from dsh_llm.protocol.checks import check_timeout_ms

__all__ = ["Expiry", "StreamWatchdog"]


class Expiry(enum.Enum):
    """Which deadline passed."""

    IDLE = "idle"
    """No byte at all arrived within ``idle_ms``."""
    KEEPALIVE = "keepalive"
    """Only keep-alive bytes, no data event, within the keep-alive bound."""
    TOTAL = "total"
    """The call outlived ``total_ms``."""


class StreamWatchdog:
    """Deadlines of one streaming call (times in seconds, from ``time.monotonic``).

    Args:
        idle_ms: The idle timeout (``stream_idle_timeout_ms``).
        keepalive_ms: The keep-alive bound, or ``None``.
        total_ms: The total timeout, or ``None``.
        now: The call's start time.
    """

    __slots__ = (
        "_data_s",
        "_idle_s",
        "_paused_at",
        "_total_deadline",
        "idle_ms",
        "keepalive_ms",
        "last_bytes",
        "last_data",
        "total_ms",
    )

    def __init__(
        self,
        *,
        idle_ms: float,
        keepalive_ms: float | None,
        total_ms: float | None,
        now: float,
    ) -> None:
        check_timeout_ms("idle_ms", idle_ms)
        check_timeout_ms("keepalive_ms", keepalive_ms, optional=True)
        check_timeout_ms("total_ms", total_ms, optional=True)
        self.idle_ms = idle_ms
        self.keepalive_ms = keepalive_ms
        self.total_ms = total_ms
        self._idle_s = idle_ms / 1000
        self._data_s = (
            None if keepalive_ms is None else max(idle_ms, keepalive_ms) / 1000
        )
        self._total_deadline = math.inf if total_ms is None else now + total_ms / 1000
        self._paused_at: float | None = None
        self.last_bytes = now
        """When bytes last arrived (liveness)."""
        self.last_data = now
        """When the last data event arrived (progress)."""

    def note_bytes(self, now: float) -> None:
        """Bytes arrived (data or keep-alive): re-arm the idle deadline."""
        self.last_bytes = now

    def note_data(self, now: float) -> None:
        """A data event arrived: re-arm the idle and keep-alive deadlines."""
        self.last_bytes = now
        self.last_data = now

    def pause(self, now: float) -> None:
        """The consumer holds a chunk: stop counting until ``resume``."""
        if self._paused_at is None:
            self._paused_at = now

    def resume(self, now: float) -> None:
        """The consumer asks for the next chunk: count again from ``now``."""
        paused_at = self._paused_at
        if paused_at is None:
            return
        self._paused_at = None
        self._total_deadline += now - paused_at
        self.last_bytes = now
        self.last_data = now

    def remaining(self, now: float) -> tuple[float, Expiry]:
        """Seconds until the nearest deadline (``<= 0`` once passed) and which one.

        While paused nothing expires (``math.inf``).
        """
        if self._paused_at is not None:
            return math.inf, Expiry.IDLE
        best = self.last_bytes + self._idle_s
        which = Expiry.IDLE
        if self._data_s is not None:
            data_deadline = self.last_data + self._data_s
            if data_deadline < best:
                best, which = data_deadline, Expiry.KEEPALIVE
        if self._total_deadline < best:
            best, which = self._total_deadline, Expiry.TOTAL
        return best - now, which
