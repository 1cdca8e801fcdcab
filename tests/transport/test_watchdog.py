"""The watchdog's deadlines (dsh_llm.transport.watchdog), with explicit times."""

from __future__ import annotations

import math

import pytest

from dsh_llm.transport.watchdog import Expiry
from dsh_llm.transport.watchdog import StreamWatchdog


def _dog(idle=0.1, keepalive=None, total=None) -> StreamWatchdog:
    return StreamWatchdog(
        idle_ms=idle * 1000,
        keepalive_ms=None if keepalive is None else keepalive * 1000,
        total_ms=None if total is None else total * 1000,
        now=0.0,
    )


def test_silence_expires_the_idle_deadline():
    dog = _dog(idle=0.1)
    assert dog.remaining(0.05) == pytest.approx((0.05, Expiry.IDLE))
    remaining, which = dog.remaining(0.1)
    assert remaining <= 0
    assert which is Expiry.IDLE


def test_any_bytes_keep_an_idle_read_alive():
    dog = _dog(idle=0.1)
    dog.note_bytes(0.075)
    dog.note_bytes(0.15)
    assert dog.remaining(0.2)[0] == pytest.approx(0.05)


def test_keepalive_bytes_cannot_extend_the_wait_past_the_keepalive_bound():
    dog = _dog(idle=0.1, keepalive=0.3)
    for t in (0.08, 0.16, 0.24, 0.32):
        dog.note_bytes(t)
    remaining, which = dog.remaining(0.32)
    assert remaining == pytest.approx(-0.02)
    assert which is Expiry.KEEPALIVE


def test_a_data_event_rearms_both_deadlines():
    dog = _dog(idle=0.1, keepalive=0.3)
    dog.note_data(0.25)
    assert dog.remaining(0.3) == pytest.approx((0.05, Expiry.IDLE))
    dog.note_bytes(0.34)
    dog.note_bytes(0.43)
    dog.note_bytes(0.52)
    assert dog.remaining(0.52) == pytest.approx((0.03, Expiry.KEEPALIVE))


def test_the_keepalive_bound_never_shortens_the_idle_timeout():
    dog = _dog(idle=0.2, keepalive=0.05)
    assert dog.remaining(0.0) == pytest.approx((0.2, Expiry.IDLE))


def test_the_total_deadline_wins_when_nearest():
    dog = _dog(idle=0.1, total=0.25)
    for t in (0.09, 0.18, 0.27):
        dog.note_data(t)
    remaining, which = dog.remaining(0.27)
    assert which is Expiry.TOTAL
    assert remaining == pytest.approx(-0.02)


def test_think_time_is_not_waiting_time():
    dog = _dog(idle=0.1, keepalive=0.3, total=1.0)
    dog.pause(0.05)
    assert dog.remaining(5.0)[0] == math.inf
    dog.resume(10.05)
    assert dog.remaining(10.05) == pytest.approx((0.1, Expiry.IDLE))
    assert dog.remaining(10.05 + 0.1 - 1e-9)[0] > 0
    # The total deadline moved by the 10 s pause: 1.0 + 10.0.
    for t in (10.1, 10.2, 10.3, 10.4, 10.5, 10.6, 10.7, 10.8, 10.9, 10.95):
        dog.note_data(t)
    assert dog.remaining(10.95) == pytest.approx((0.05, Expiry.TOTAL))


def test_pause_twice_and_resume_without_pause_are_harmless():
    dog = _dog(idle=0.1)
    dog.resume(1.0)
    assert dog.remaining(0.05)[0] == pytest.approx(0.05)
    dog.pause(0.01)
    dog.pause(0.02)
    dog.resume(0.5)
    assert dog.remaining(0.5)[0] == pytest.approx(0.1)


@pytest.mark.parametrize("bad", [0, -1, math.inf, math.nan, 2_147_483_648, True, "5"])
def test_timeouts_are_checked(bad):
    with pytest.raises(ValueError, match="positive finite number"):
        StreamWatchdog(idle_ms=bad, keepalive_ms=None, total_ms=None, now=0.0)
    with pytest.raises(ValueError, match="positive finite number"):
        StreamWatchdog(idle_ms=1, keepalive_ms=bad, total_ms=None, now=0.0)
    with pytest.raises(ValueError, match="positive finite number"):
        StreamWatchdog(idle_ms=1, keepalive_ms=None, total_ms=bad, now=0.0)
