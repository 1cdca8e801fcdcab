"""Pacing a route by the rate limits its responses report: RouteLimiter.observe
on a fake clock, and run_jsonl against a loopback server that refuses any request
past its budget, where the runner waits for the reset instead of being refused."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from dsh_llm.batch import RouteLimiter
from dsh_llm.batch import run_jsonl
from dsh_llm.batch.ratelimit import LimiterError
from dsh_llm.call import call_with_retry
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import RateLimit
from dsh_llm.protocol import RateLimits
from dsh_llm.runtime import LlmRuntime
from dsh_llm.signal import AbortController
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import RecordedRequest
from dsh_llm.testing import Reply

from .servers import MODEL
from .servers import ROUTE
from .servers import echo_runtime
from .servers import prompt_of
from .servers import prompts
from .servers import result_rows
from .servers import text_reply
from .servers import write_requests
from .test_ratelimit import FakeClock


def _requests(remaining: int | None, reset_ms: float | None) -> RateLimits:
    return RateLimits(requests=RateLimit(remaining=remaining, reset_ms=reset_ms))


def test_a_spent_request_budget_holds_the_route_until_its_reset() -> None:
    clock = FakeClock()
    limiter = RouteLimiter(clock=clock, wait=clock.wait)
    limiter.observe("a", _requests(2, 20_000))
    assert limiter.acquire("a")
    assert limiter.acquire("a")
    assert clock.waits == []
    assert limiter.acquire("a")  # the budget is spent: wait for the reset
    assert clock.waits == [pytest.approx(20.0)]
    assert limiter.acquire("a")  # past the reset the route is free again
    assert clock.waits == [pytest.approx(20.0)]


def test_a_newer_report_replaces_the_budget_counted_down() -> None:
    clock = FakeClock()
    limiter = RouteLimiter(clock=clock, wait=clock.wait)
    limiter.observe("a", _requests(1, 10_000))
    assert limiter.acquire("a")
    limiter.observe("a", _requests(3, 10_000))
    for _ in range(3):
        assert limiter.acquire("a")
    assert clock.waits == []


def test_the_low_water_mark_keeps_requests_back_from_the_budget() -> None:
    clock = FakeClock()
    limiter = RouteLimiter(clock=clock, wait=clock.wait, low_water_requests=1)
    limiter.observe("a", _requests(2, 5_000))
    assert limiter.acquire("a")
    assert clock.waits == []
    assert limiter.acquire("a")
    assert clock.waits == [pytest.approx(5.0)]


def test_tokens_at_the_low_water_mark_hold_the_route_until_their_reset() -> None:
    clock = FakeClock()
    limiter = RouteLimiter(clock=clock, wait=clock.wait, low_water_tokens=500)
    limiter.observe("a", RateLimits(tokens=RateLimit(remaining=501, reset_ms=9_000)))
    assert limiter.acquire("a")
    limiter.observe("a", RateLimits(tokens=RateLimit(remaining=500, reset_ms=9_000)))
    assert limiter.acquire("b")  # another route is not held
    assert clock.waits == []
    assert limiter.acquire("a")
    assert clock.waits == [pytest.approx(9.0)]


def test_a_report_without_a_reset_or_remaining_count_changes_nothing() -> None:
    clock = FakeClock()
    limiter = RouteLimiter(clock=clock, wait=clock.wait)
    limiter.observe("a", None)
    limiter.observe("a", _requests(0, None))
    limiter.observe("a", _requests(None, 3_000))
    limiter.observe("a", RateLimits(tokens=RateLimit(remaining=0)))
    for _ in range(3):
        assert limiter.acquire("a")
    assert clock.waits == []


def test_an_absurd_reset_is_clamped_like_a_back_off() -> None:
    clock = FakeClock()
    limiter = RouteLimiter(clock=clock, wait=clock.wait, max_back_off_ms=30_000)
    limiter.observe("a", _requests(0, 9e12))
    start = clock()
    assert limiter.acquire("a")
    assert clock() - start == pytest.approx(30.0)


def test_an_abort_ends_a_wait_for_a_reset() -> None:
    clock = FakeClock()
    controller = AbortController()
    controller.abort()
    limiter = RouteLimiter(clock=clock, wait=clock.wait)
    limiter.observe("a", _requests(0, 10_000))
    assert not limiter.acquire("a", controller.signal)


@pytest.mark.parametrize("field", ["low_water_requests", "low_water_tokens"])
@pytest.mark.parametrize("value", [-1, 1.5, True])
def test_a_low_water_mark_is_a_count(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=field):
        RouteLimiter(**{field: value})  # type: ignore[arg-type]


# --- the runner against a server with a request budget -----------------------------


@contextmanager
def budget_runtime(
    budget: BudgetServer, retry_policy: Any = None
) -> Iterator[LlmRuntime]:
    """``echo_runtime`` on a loopback server answering through ``budget``."""
    with (
        LoopbackServer(handler=budget.handle) as server,
        echo_runtime(f"{server.url}/v1", retry_policy=retry_policy) as runtime,
    ):
        yield runtime


class BudgetServer:
    """Answers ``budget`` requests per window, reporting what is left in
    ``x-ratelimit-*`` headers; a request past the budget is refused (429). The
    window resets when the fake clock passes its reset (the clock's ``wait``
    is the only way time moves)."""

    def __init__(self, clock: FakeClock, *, budget: int, reset_s: float) -> None:
        self.clock = clock
        self.budget = budget
        self.reset_s = reset_s
        self.lock = threading.Lock()
        self.remaining = budget
        self.window_ends = clock() + reset_s
        self.answered: list[str] = []
        self.refused: list[str] = []

    def _headers(self) -> dict[str, str]:
        left_ms = max(self.window_ends - self.clock(), 0) * 1000
        return {
            "x-ratelimit-limit-requests": str(self.budget),
            "x-ratelimit-remaining-requests": str(self.remaining),
            "x-ratelimit-reset-requests": f"{left_ms:.0f}ms",
        }

    def handle(self, request: RecordedRequest) -> Reply:
        prompt = prompt_of(request)
        with self.lock:
            if self.clock() >= self.window_ends:
                self.remaining = self.budget
                self.window_ends = self.clock() + self.reset_s
            if self.remaining == 0:
                self.refused.append(prompt)
                return Reply(
                    status=429,
                    reason="Too Many Requests",
                    headers={"content-type": "application/json", **self._headers()},
                    body=b'{"error":{"message":"rate limit reached"}}',
                    framing="length",
                )
            self.remaining -= 1
            self.answered.append(prompt)
            headers = self._headers()
        reply = text_reply(f"echo: {prompt}")
        return Reply(headers=headers, body=reply.body)


def test_the_runner_waits_for_the_reset_instead_of_being_refused(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    limiter = RouteLimiter(clock=clock, wait=clock.wait)
    budget = BudgetServer(clock, budget=2, reset_s=20)
    requests = write_requests(tmp_path / "requests.jsonl", prompts(6))
    with budget_runtime(budget) as runtime:
        summary = run_jsonl(
            requests,
            tmp_path / "results.jsonl",
            runtime=runtime,
            concurrency=1,
            limiter=limiter,
        )
    assert summary.succeeded == 6
    assert budget.refused == []
    assert budget.answered == [f"p{n}" for n in range(6)]
    assert {row["attempts"] for row in result_rows(tmp_path / "results.jsonl")} == {1}
    # Two windows were waited out, each until its reset.
    assert clock.waits == [pytest.approx(20.0), pytest.approx(20.0)]


def test_the_same_server_refuses_a_caller_that_does_not_wait() -> None:
    clock = FakeClock()
    budget = BudgetServer(clock, budget=2, reset_s=20)
    with budget_runtime(budget, {"mode": "normal", "maxRetries": 0}) as (runtime):
        codes = [
            call_with_retry(
                runtime, GenerateOptions.from_prompt(MODEL, f"q{n}", provider=ROUTE)
            ).finish.kind
            for n in range(3)
        ]
    assert codes == ["stop", "stop", "error"]
    assert budget.refused == ["q2"]


def test_a_refusal_reporting_a_spent_budget_holds_the_route_until_its_reset(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    limiter = RouteLimiter(clock=clock, wait=clock.wait)
    budget = BudgetServer(clock, budget=1, reset_s=30)
    budget.remaining = 0  # spent before the run: the first request is refused
    requests = write_requests(tmp_path / "requests.jsonl", prompts(1))
    with budget_runtime(budget) as runtime:
        summary = run_jsonl(
            requests,
            tmp_path / "results.jsonl",
            runtime=runtime,
            concurrency=1,
            limiter=limiter,
        )
    assert summary.succeeded == 1
    assert budget.refused == ["p0"]
    assert budget.answered == ["p0"]
    assert sum(clock.waits) == pytest.approx(30.0)  # back-off, then the reset
    (row,) = result_rows(tmp_path / "results.jsonl")
    assert row["attempts"] == 2


def test_a_limiter_that_fails_to_observe_stops_the_run(tmp_path: Path) -> None:
    class Broken(RouteLimiter):
        def observe(self, route: str, limits: RateLimits | None) -> None:
            raise RuntimeError("observer broke")

    clock = FakeClock()
    budget = BudgetServer(clock, budget=5, reset_s=20)
    requests = write_requests(tmp_path / "requests.jsonl", prompts(2))
    with budget_runtime(budget) as runtime, pytest.raises(LimiterError):
        run_jsonl(
            requests,
            tmp_path / "results.jsonl",
            runtime=runtime,
            concurrency=1,
            limiter=Broken(clock=clock, wait=clock.wait),
        )
    assert result_rows(tmp_path / "results.jsonl") == []
