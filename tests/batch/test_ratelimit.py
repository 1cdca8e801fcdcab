"""RouteLimiter on a fake clock: requests per minute per route, back-off, aborts."""

from __future__ import annotations

import threading

import pytest

from dsh_llm.batch.ratelimit import DEFAULT_MAX_BACK_OFF_MS
from dsh_llm.batch.ratelimit import MAX_WAIT_S
from dsh_llm.batch.ratelimit import RouteLimiter
from dsh_llm.signal import AbortController
from dsh_llm.signal import AbortSignal


class FakeClock:
    """A shared clock that moves only when someone waits on it."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.lock = threading.Lock()
        self.waits: list[float] = []

    def __call__(self) -> float:
        with self.lock:
            return self.now

    def wait(self, seconds: float, signal: AbortSignal | None) -> bool:
        with self.lock:
            self.waits.append(seconds)
            self.now += seconds
        return signal is not None and signal.aborted


def _most_in_a_minute(times: list[float]) -> int:
    """The largest number of ``times`` in any half-open 60 s window."""
    times = sorted(times)
    return max(sum(1 for t in times if start <= t < start + 60) for start in times)


def test_a_route_starts_no_more_than_its_rate_in_any_minute() -> None:
    clock = FakeClock()
    limiter = RouteLimiter(30, clock=clock, wait=clock.wait)
    granted = []
    for _ in range(100):
        assert limiter.acquire("a")
        granted.append(clock())
    assert _most_in_a_minute(granted) == 30
    assert granted[-1] - granted[0] == pytest.approx(99 * 2.0)


def test_threads_share_a_route_and_routes_have_their_own_bucket() -> None:
    clock = FakeClock()
    limiter = RouteLimiter(60, burst=5, clock=clock, wait=clock.wait)
    granted: dict[str, list[float]] = {"a": [], "b": []}
    lock = threading.Lock()

    def worker(route: str) -> None:
        for _ in range(25):
            assert limiter.acquire(route)
            with lock:
                granted[route].append(clock())

    threads = [threading.Thread(target=worker, args=(r,)) for r in "aabb"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for times in granted.values():
        assert len(times) == 50
        assert _most_in_a_minute(times) <= 60 + 5 - 1


def test_a_back_off_holds_the_route_until_it_passes() -> None:
    clock = FakeClock()
    limiter = RouteLimiter(None, clock=clock, wait=clock.wait)
    assert limiter.acquire("a")
    start = clock()
    limiter.back_off("a", 1500)
    limiter.back_off("a", 200)  # a shorter back-off does not shorten it
    assert limiter.acquire("b")
    assert clock() == start
    assert limiter.acquire("a")
    assert clock() - start == pytest.approx(1.5)


def test_an_abort_ends_a_wait_without_taking_a_token() -> None:
    limiter = RouteLimiter(1)  # the real clock: the next token is a minute away
    assert limiter.acquire("a")
    controller = AbortController()
    timer = threading.Timer(0.05, controller.abort)
    timer.start()
    assert limiter.acquire("a", controller.signal) is False
    timer.join()
    assert limiter.acquire("a", AbortSignal.aborted_with()) is False


@pytest.mark.parametrize("rate", [0, -1, float("nan"), float("inf"), True, "5"])
def test_a_bad_rate_is_refused(rate: object) -> None:
    with pytest.raises(ValueError, match="requests_per_minute"):
        RouteLimiter(rate)  # type: ignore[arg-type]


@pytest.mark.parametrize("delay_ms", [99999999999 * 1000, float("inf"), 10**400, 1e308])
def test_an_absurd_back_off_is_clamped_to_the_documented_maximum(
    delay_ms: float,
) -> None:
    clock = FakeClock()
    limiter = RouteLimiter(clock=clock, wait=clock.wait)
    limiter.back_off("a", delay_ms)
    started = clock()
    assert limiter.acquire("a")
    assert clock() - started == pytest.approx(DEFAULT_MAX_BACK_OFF_MS / 1000)
    assert max(clock.waits) <= MAX_WAIT_S


def test_the_maximum_back_off_is_the_limiter_s_own() -> None:
    clock = FakeClock()
    limiter = RouteLimiter(clock=clock, wait=clock.wait, max_back_off_ms=2500)
    limiter.back_off("a", 10_000)
    started = clock()
    assert limiter.acquire("a")
    assert clock() - started == pytest.approx(2.5)
    for bad in (0, -1, float("nan"), 2**31, True):
        with pytest.raises(ValueError, match="max_back_off_ms"):
            RouteLimiter(max_back_off_ms=bad)


class RealWait:
    """The default wait (``signal.wait``), telling when a wait has begun."""

    def __init__(self) -> None:
        self.begun = threading.Event()
        self.waits: list[float] = []

    def __call__(self, seconds: float, signal: AbortSignal | None) -> bool:
        assert signal is not None
        self.waits.append(seconds)
        self.begun.set()
        return signal.wait(seconds)


def _acquire_until_aborted(limiter: RouteLimiter, wait: RealWait) -> list[object]:
    controller = AbortController()
    outcome: list[object] = []

    def acquire() -> None:
        try:
            outcome.append(limiter.acquire("a", controller.signal))
        except BaseException as exc:  # what the tests are about
            outcome.append(exc)

    waiter = threading.Thread(target=acquire)
    waiter.start()
    assert wait.begun.wait(10) or outcome, "the limiter never waited"
    controller.abort()
    waiter.join(10)
    assert not waiter.is_alive()
    return outcome


def test_a_wait_beyond_the_platform_timers_is_waited_in_steps() -> None:
    # One request per 10**12 minutes: the wait for the second token is longer
    # than threading's TIMEOUT_MAX, which Event.wait refuses.
    wait = RealWait()
    limiter = RouteLimiter(1e-12, wait=wait)
    assert limiter.acquire("a")
    assert _acquire_until_aborted(limiter, wait) == [False]
    assert wait.waits == [MAX_WAIT_S]


def test_a_real_wait_after_an_absurd_retry_after_does_not_overflow() -> None:
    wait = RealWait()
    limiter = RouteLimiter(wait=wait)
    limiter.back_off("a", 99999999999 * 1000)  # Retry-After: 99999999999
    assert _acquire_until_aborted(limiter, wait) == [False]
    assert wait.waits == [MAX_WAIT_S]
