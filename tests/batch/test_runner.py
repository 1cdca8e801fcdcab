"""run_jsonl against a real OpenAI-compatible loopback server: one row per line,
bounded concurrency, rate limits, RATE_LIMIT back-off, resume, abort, progress."""

from __future__ import annotations

import io
import os
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from dsh_llm.batch import BatchResult
from dsh_llm.batch import BatchSummary
from dsh_llm.batch import ProgressBar
from dsh_llm.batch import ResultsFileBusyError
from dsh_llm.batch import RouteLimiter
from dsh_llm.batch import run_jsonl
from dsh_llm.batch.ratelimit import LimiterError
from dsh_llm.signal import AbortController
from dsh_llm.signal import AbortSignal
from dsh_llm.testing import RecordedRequest
from dsh_llm.testing import Reply
from dsh_llm.testing import Stall

from .servers import MODEL
from .servers import ROUTE
from .servers import EchoServer
from .servers import echo_runtime
from .servers import prompts
from .servers import result_rows
from .servers import write_config
from .servers import write_requests
from .test_ratelimit import FakeClock
from .test_ratelimit import _most_in_a_minute


def test_every_line_gets_one_row_good_and_malformed_alike(tmp_path: Path) -> None:
    requests = write_requests(
        tmp_path / "requests.jsonl",
        [
            *prompts(3),
            "{not json",
            {"id": "no-model", "provider": ROUTE, "prompt": "x"},
            prompts(1)[0],  # r0 again
            {"id": "gone", "provider": "nowhere", "model": MODEL, "prompt": "x"},
        ],
    )
    results = tmp_path / "results.jsonl"
    begun = time.perf_counter()
    with EchoServer() as server, echo_runtime(server.url) as runtime:
        summary = run_jsonl(requests, results, runtime=runtime, concurrency=2)
        assert len(server.server.requests) == 3
    # The run's wall time, not a clock reading less the worker count.
    assert 0 < summary.duration_s <= time.perf_counter() - begun
    rows = {row["line"]: row for row in result_rows(results)}
    assert sorted(rows) == [1, 2, 3, 4, 5, 6, 7]
    for line in (1, 2, 3):
        row = rows[line]
        assert row["ok"] is True
        assert row["id"] == f"r{line - 1}"
        assert row["message"]["role"] == "assistant"
        assert row["message"]["content"] == [
            {"type": "text", "text": f"echo: p{line - 1}"}
        ]
        assert row["message"]["source"] == {
            "kind": "model",
            "provider": ROUTE,
            "model": MODEL,
        }
        assert row["usage"] == {"inputTokens": 5, "outputTokens": 2}
        assert row["finish"] == {"kind": "stop"}
        assert row["attempts"] == 1
        assert row["durationMs"] > 0
    assert rows[4]["id"] is None
    assert rows[4]["failure"]["code"] == "INVALID_BATCH_REQUEST"
    assert rows[4]["failure"]["message"].startswith("line 4: $ is not JSON")
    assert rows[5]["id"] == "no-model"
    assert rows[5]["failure"]["message"] == (
        "line 5: $.model is required (expected a string)"
    )
    assert rows[6]["id"] is None
    assert rows[6]["failure"]["message"] == 'line 6: $.id "r0" repeats the id of line 1'
    assert rows[7]["id"] == "gone"
    assert rows[7]["failure"]["code"] == "NO_ADAPTER"
    assert rows[7]["attempts"] == 0
    assert (summary.total, summary.succeeded, summary.failed, summary.skipped) == (
        7,
        3,
        4,
        0,
    )
    assert (summary.input_tokens, summary.output_tokens) == (15, 6)
    assert not summary.ok
    assert not summary.interrupted


def test_a_rerun_sends_only_what_the_results_file_lacks(tmp_path: Path) -> None:
    requests = write_requests(tmp_path / "requests.jsonl", [*prompts(10), "broken"])
    results = tmp_path / "results.jsonl"
    with EchoServer() as server, echo_runtime(server.url) as runtime:
        run_jsonl(requests, results, runtime=runtime)
        # Keep the first five rows, as a run stopped there would have left them.
        kept = results.read_text().splitlines(keepends=True)[:5]
        results.write_text("".join(kept))
        kept_lines = {row["line"] for row in result_rows(results)}
        server.arrivals.clear()
        summary = run_jsonl(requests, results, runtime=runtime)
        sent = sorted(prompt for _, prompt in server.arrivals)
    missing = sorted(f"p{line - 1}" for line in range(1, 11) if line not in kept_lines)
    assert sent == missing
    rows = result_rows(results)
    assert Counter(row["line"] for row in rows) == {line: 1 for line in range(1, 12)}
    expected: dict[str | None, int] = {f"r{n}": 1 for n in range(10)}
    assert Counter(row["id"] for row in rows) == {
        **expected,
        None: 1,
    }
    assert summary.skipped == 5
    assert summary.succeeded + summary.failed == 6
    assert summary.failed_before == (11 in kept_lines)


def test_no_more_than_concurrency_requests_are_in_flight(tmp_path: Path) -> None:
    requests = write_requests(tmp_path / "requests.jsonl", prompts(24))
    with EchoServer(delay=0.05) as server, echo_runtime(server.url) as runtime:
        summary = run_jsonl(
            requests, tmp_path / "r.jsonl", runtime=runtime, concurrency=3
        )
    assert summary.succeeded == 24
    assert 2 <= server.max_active <= 3


def test_the_rate_limit_holds_on_an_injected_clock(tmp_path: Path) -> None:
    clock = FakeClock()
    limiter = RouteLimiter(10, clock=clock, wait=clock.wait)
    requests = write_requests(tmp_path / "requests.jsonl", prompts(35))
    arrivals: list[float] = []
    with EchoServer() as server, echo_runtime(server.url) as runtime:
        answer = server.handle

        def handle(request: RecordedRequest) -> Reply:
            arrivals.append(clock())
            return answer(request)

        server.server.handler = handle
        summary = run_jsonl(
            requests,
            tmp_path / "r.jsonl",
            runtime=runtime,
            concurrency=1,
            limiter=limiter,
        )
    assert summary.succeeded == 35
    assert len(arrivals) == 35
    assert _most_in_a_minute(arrivals) == 10
    assert arrivals[-1] - arrivals[0] >= 34 * 6.0 - 1e-6


def test_rate_limit_backs_the_route_off_for_the_retry_after(tmp_path: Path) -> None:
    requests = write_requests(tmp_path / "requests.jsonl", prompts(7))
    with (
        EchoServer(delay=0.3, retry_after_ms=400) as server,
        echo_runtime(server.url) as runtime,
    ):
        server.rate_limited.add("p0")
        summary = run_jsonl(
            requests, tmp_path / "r.jsonl", runtime=runtime, concurrency=3
        )
        arrivals = list(server.arrivals)
    assert summary.succeeded == 7
    limited_at = next(t for t, prompt in arrivals if prompt == "p0")
    first_wave = {prompt for _, prompt in arrivals[:3]}
    assert "p0" in first_wave
    later = [(t, prompt) for t, prompt in arrivals[3:]]
    assert later  # the retry of p0 and the requests started after the 429
    for at, _prompt in later:
        assert at >= limited_at + 0.4
    rows = {row["id"]: row for row in result_rows(tmp_path / "r.jsonl")}
    assert rows["r0"]["attempts"] == 2
    assert rows["r0"]["ok"] is True


def test_retry_replaces_the_route_policy(tmp_path: Path) -> None:
    requests = write_requests(tmp_path / "requests.jsonl", prompts(1))
    with EchoServer(retry_after_ms=5) as server, echo_runtime(server.url) as runtime:
        server.rate_limited.add("p0")
        run_jsonl(
            requests,
            tmp_path / "r.jsonl",
            runtime=runtime,
            retry={"mode": "normal", "maxRetries": 0},
        )
    (row,) = result_rows(tmp_path / "r.jsonl")
    assert row["ok"] is False
    assert row["attempts"] == 1
    assert row["failure"]["code"] == "RATE_LIMIT"
    assert row["failure"]["providerRetryAfterMs"] == 5


def test_an_abort_stops_the_run_and_in_flight_requests_are_sent_again(
    tmp_path: Path,
) -> None:
    requests = write_requests(tmp_path / "requests.jsonl", prompts(6))
    results = tmp_path / "results.jsonl"
    controller = AbortController()
    with EchoServer() as server, echo_runtime(server.url) as runtime:
        for prompt in ("p2", "p3"):
            server.replies[prompt] = lambda: Reply(body=(Stall(seconds=30),))
        outcome = []
        worker = threading.Thread(
            target=lambda: outcome.append(
                run_jsonl(
                    requests,
                    results,
                    runtime=runtime,
                    concurrency=2,
                    signal=controller.signal,
                )
            )
        )
        started = time.monotonic()
        worker.start()
        assert server.server.wait_for_requests(4, timeout=10)
        controller.abort()
        worker.join(10)
        assert not worker.is_alive()
        assert time.monotonic() - started < 10
        assert server.server.wait_until_idle(), (
            "an aborted request left its connection open"
        )
        (summary,) = outcome
        assert summary.interrupted
        assert sorted(row["id"] for row in result_rows(results)) == ["r0", "r1"]
        assert summary.not_run == 4
        server.replies.clear()
        again = run_jsonl(requests, results, runtime=runtime)
    assert again.ok
    assert again.skipped == 2
    assert again.succeeded == 4
    assert Counter(row["id"] for row in result_rows(results)) == {
        f"r{n}": 1 for n in range(6)
    }


def test_progress_is_quiet_off_a_terminal_but_the_summary_line_is_written(
    tmp_path: Path,
) -> None:
    requests = write_requests(tmp_path / "requests.jsonl", [*prompts(5), "bad"])
    quiet, drawn = io.StringIO(), io.StringIO()
    with EchoServer() as server, echo_runtime(server.url) as runtime:
        run_jsonl(
            requests, tmp_path / "a.jsonl", runtime=runtime, progress=ProgressBar(quiet)
        )
        run_jsonl(
            requests,
            tmp_path / "b.jsonl",
            runtime=runtime,
            progress=ProgressBar(drawn, enabled=True),
        )
    lines = quiet.getvalue().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(
        "batch done: 5 succeeded, 1 failed, tokens 25 in / 10 out, "
    )
    assert "6/6" in drawn.getvalue()
    assert "failed=1" in drawn.getvalue()
    last = drawn.getvalue().splitlines()[-1]
    assert last.startswith("batch done: 5 succeeded, 1 failed, tokens 25 in / 10 out, ")


def test_a_composition_file_is_loaded_for_the_run(tmp_path: Path) -> None:
    requests = write_requests(tmp_path / "requests.jsonl", prompts(2))
    with EchoServer() as server:
        config = write_config(tmp_path / "dsh.yml", server.url)
        summary = run_jsonl(requests, tmp_path / "r.jsonl", composition=config)
    assert summary.ok
    assert summary.succeeded == 2


class _GatedFsync:
    """``os.fsync`` that holds every sync until ``release()`` (a slow disk)."""

    def __init__(self, real: Callable[[int], None]) -> None:
        self.real = real
        self.gate = threading.Event()
        self.entered = threading.Event()

    def __call__(self, fd: int) -> None:
        self.entered.set()
        assert self.gate.wait(30), "the test never released the disk"
        self.real(fd)

    def release(self) -> None:
        self.gate.set()


class _Seen:
    """A progress reporter that checks each row it is told about is on disk."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.updates: list[str | int | None] = []
        self.missing: list[str | int | None] = []

    def start(self, total: int, skipped: int) -> None:
        pass

    def update(self, result: BatchResult) -> None:
        on_disk = {row["id"] for row in result_rows(self.path)}
        if result.id not in on_disk:
            self.missing.append(result.id)
        self.updates.append(result.id)

    def close(self, summary: BatchSummary) -> None:
        pass


def test_requests_never_wait_for_the_disk_and_a_row_counts_once_on_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    requests = write_requests(tmp_path / "requests.jsonl", prompts(6))
    results = tmp_path / "results.jsonl"
    fsync = _GatedFsync(os.fsync)
    monkeypatch.setattr(os, "fsync", fsync)
    seen = _Seen(results)
    outcome: list[BatchSummary] = []
    with EchoServer() as server, echo_runtime(server.url) as runtime:
        worker = threading.Thread(
            target=lambda: outcome.append(
                run_jsonl(
                    requests, results, runtime=runtime, concurrency=1, progress=seen
                )
            )
        )
        worker.start()
        try:
            # One request at a time, and the first row's sync is held: every
            # request is still sent, and none is counted before its sync.
            assert server.server.wait_for_requests(6, timeout=20)
            assert fsync.entered.wait(20)
            assert seen.updates == []
        finally:
            fsync.release()
            worker.join(20)
    (summary,) = outcome
    assert summary.succeeded == 6
    assert sorted(map(str, seen.updates)) == [f"r{n}" for n in range(6)]
    assert seen.missing == []


def test_an_absurd_retry_after_fails_its_row_and_the_route_goes_on(
    tmp_path: Path,
) -> None:
    requests = write_requests(tmp_path / "requests.jsonl", prompts(4))
    results = tmp_path / "results.jsonl"
    with EchoServer() as server, echo_runtime(server.url) as runtime:
        server.rate_limited.add("p0")
        server.replies["p0"] = lambda: Reply(
            status=429,
            headers={"content-type": "application/json", "retry-after": "99999999999"},
            body=b'{"error": {"message": "come back in 3000 years"}}',
            framing="length",
        )
        server.rate_limited.discard("p0")
        summary = run_jsonl(
            requests,
            results,
            runtime=runtime,
            concurrency=1,
            limiter=RouteLimiter(max_back_off_ms=100),
            retry={"mode": "normal", "maxRetries": 0},
        )
        sent = sorted(prompt for _, prompt in server.arrivals)
    rows = {row["id"]: row for row in result_rows(results)}
    assert rows["r0"]["failure"]["code"] == "RATE_LIMIT"
    assert rows["r0"]["failure"]["providerRetryAfterMs"] == 99999999999000
    assert [rows[f"r{n}"]["ok"] for n in range(1, 4)] == [True, True, True]
    assert sent == ["p0", "p1", "p2", "p3"]
    assert (summary.succeeded, summary.failed) == (3, 1)


class _FailingLimiter(RouteLimiter):
    """A limiter that breaks on its third token."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def acquire(self, route: str, signal: AbortSignal | None = None) -> bool:
        self.calls += 1
        if self.calls == 3:
            raise OverflowError("timeout value is too large")
        return super().acquire(route, signal)


def test_a_failing_limiter_stops_the_run_and_marks_no_unsent_row_done(
    tmp_path: Path,
) -> None:
    requests = write_requests(tmp_path / "requests.jsonl", prompts(6))
    results = tmp_path / "results.jsonl"
    with EchoServer() as server, echo_runtime(server.url) as runtime:
        with pytest.raises(LimiterError) as caught:
            run_jsonl(
                requests,
                results,
                runtime=runtime,
                concurrency=1,
                limiter=_FailingLimiter(),
            )
        assert isinstance(caught.value.__cause__, OverflowError)
        assert caught.value.route == ROUTE
        assert len(server.server.requests) == 2
        assert sorted(row["id"] for row in result_rows(results)) == ["r0", "r1"]
        server.arrivals.clear()
        again = run_jsonl(requests, results, runtime=runtime)
        resent = sorted(prompt for _, prompt in server.arrivals)
    assert resent == ["p2", "p3", "p4", "p5"]
    assert again.ok
    assert Counter(row["id"] for row in result_rows(results)) == {
        f"r{n}": 1 for n in range(6)
    }


def test_a_hostile_line_is_one_failed_row_and_the_run_goes_on(tmp_path: Path) -> None:
    deep = "[" * 100_000
    requests = write_requests(
        tmp_path / "requests.jsonl",
        [*prompts(2), deep, '{"id": 1' + "0" * 5000 + "}", *prompts(2, start=2)],
    )
    results = tmp_path / "results.jsonl"
    with EchoServer() as server, echo_runtime(server.url) as runtime:
        summary = run_jsonl(requests, results, runtime=runtime, concurrency=2)
        assert (summary.succeeded, summary.failed) == (4, 2)
        rows = {row["line"]: row for row in result_rows(results)}
        assert rows[3]["failure"]["message"] == "line 3: $ is nested too deeply"
        assert rows[4]["failure"]["message"].startswith("line 4: $ cannot be read: ")
        # A hostile line in the results file is skipped on resume, not fatal.
        with results.open("a") as out:
            out.write(deep + "\n")
        again = run_jsonl(requests, results, runtime=runtime)
    assert again.skipped == 6
    assert (again.succeeded, again.failed, again.failed_before) == (0, 0, 2)


def _wait_until(condition: Callable[[], bool], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.01)


def test_a_second_run_on_a_results_file_in_use_is_refused(tmp_path: Path) -> None:
    requests = write_requests(tmp_path / "requests.jsonl", prompts(3))
    results = tmp_path / "results.jsonl"
    controller = AbortController()
    with EchoServer() as server, echo_runtime(server.url) as runtime:
        server.replies["p0"] = lambda: Reply(body=(Stall(seconds=30),))
        first = threading.Thread(
            target=lambda: run_jsonl(
                requests, results, runtime=runtime, signal=controller.signal
            )
        )
        first.start()
        try:
            _wait_until(lambda: results.exists() and len(result_rows(results)) == 2)
            with pytest.raises(ResultsFileBusyError):
                run_jsonl(requests, results, runtime=runtime)
        finally:
            controller.abort()
            first.join(20)
        assert len(server.server.requests) == 3  # the second run sent nothing
        server.replies.clear()
        again = run_jsonl(requests, results, runtime=runtime)
        assert len(server.server.requests) == 4
    assert again.ok
    assert again.skipped == 2
