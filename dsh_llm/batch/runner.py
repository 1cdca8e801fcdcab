"""``run_jsonl``: a requests file through a runtime into a results file.

This module owns one machine's batch run (``docs/batch.md`` has the line
formats and every guarantee in full). Contracts callers may rely on:

- At most ``concurrency`` requests are in flight, one worker thread each. Each
  goes through ``dsh_llm.call.call_with_retry`` with its route's retry policy
  (or ``retry``); every attempt first waits for the route's ``RouteLimiter``,
  which a ``RATE_LIMIT`` backs off and the rate limits each response reports
  pace (``RouteLimiter.observe``).
- Every request line gets exactly one row, in completion order: a malformed
  line or a repeated id a failed row (``INVALID_BATCH_REQUEST``) without being
  sent, a failed call a failed row with its code; nothing raises for one
  request.
- One writer thread (``dsh_llm.batch.writer``) writes the rows: rows finishing
  together share one ``write`` and one ``fsync``, and a row counts as done
  (summary, progress) only once it is on disk.
- Resumable: lines that already have a row are skipped, a torn last line is cut
  off first, and the results file is locked for the run (a second run raises
  ``ResultsFileBusyError`` before sending anything).
- ``signal`` (or Ctrl-C) stops the run: no new request starts, in-flight ones
  are aborted and their rows dropped, so a rerun sends them again; ``signal``
  gives a summary with ``interrupted``, Ctrl-C raises ``KeyboardInterrupt``.
  A failing write or limiter (``LimiterError``) stops it the same way and is
  raised once it stopped.
- ``progress`` is told about each row once it is on disk, from the writer's
  thread; its ``close`` runs however the run ends.
"""

from __future__ import annotations

import collections
import contextlib
import os
import threading
import time
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Mapping
from typing import Any
from typing import Final
from typing import cast

import attrs

from dsh_llm.assembler import AssembledResponse
from dsh_llm.batch.progress import BatchProgress
from dsh_llm.batch.progress import ProgressBar
from dsh_llm.batch.ratelimit import LimiterError
from dsh_llm.batch.ratelimit import RouteLimiter
from dsh_llm.batch.requests import BatchRequest
from dsh_llm.batch.requests import RequestId
from dsh_llm.batch.requests import RequestLineError
from dsh_llm.batch.requests import decode_request_line
from dsh_llm.batch.requests import id_key
from dsh_llm.batch.requests import parse_request_object
from dsh_llm.batch.requests import peek_id
from dsh_llm.batch.requests import request_id_of
from dsh_llm.batch.requests import request_lines
from dsh_llm.batch.results import BatchResult
from dsh_llm.batch.results import BatchSummary
from dsh_llm.batch.results import ResultsFile
from dsh_llm.batch.results import ResultsIndex
from dsh_llm.batch.writer import RowWriter
from dsh_llm.call import RetryEvent
from dsh_llm.call import call_with_retry
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import normalize_llm_failure
from dsh_llm.protocol import ChunkStream
from dsh_llm.protocol import Finish
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import LlmCallConfig
from dsh_llm.protocol import LlmFailure
from dsh_llm.protocol import RateLimits
from dsh_llm.protocol import StreamChunk
from dsh_llm.retry import RetryPolicy
from dsh_llm.retry import resolve_retry_policy
from dsh_llm.runtime import LlmRuntime
from dsh_llm.signal import AbortController
from dsh_llm.signal import AbortSignal
from dsh_llm.sources import close_source

__all__ = [
    "DEFAULT_CONCURRENCY",
    "BatchSummary",
    "RunLedger",
    "bad_line_result",
    "check_concurrency",
    "count_lines",
    "repeated_id",
    "resolve_progress",
    "run_jsonl",
    "run_one",
]

DEFAULT_CONCURRENCY: Final = 8
"""Requests in flight when ``concurrency`` is not given."""
DECIDED_AHEAD: Final = 16
"""Request lines the workers' reader decides at a time (their JSON read, the
duplicate and resume checks done), ahead of the workers taking them."""

_POLL_S: Final = 0.05

PathLike = str | os.PathLike[str]
Composable = PathLike | Iterable[Mapping[str, Any]]


class _PacedCall:
    """A prepared call whose stream tells the limiter the rate limits its
    response reported, and whose retry policy is the batch's ``retry`` when
    one is given."""

    def __init__(
        self, prepared: Any, limiter: RouteLimiter, policy: RetryPolicy | None
    ) -> None:
        self._prepared = prepared
        self._limiter = limiter
        self.retry_policy: RetryPolicy = (
            prepared.retry_policy if policy is None else policy
        )

    @property
    def config(self) -> LlmCallConfig:
        config: LlmCallConfig = self._prepared.config
        return config

    def stream(self, options: GenerateOptions) -> Iterator[StreamChunk]:
        return _paced(self._prepared.stream(options), self._limiter, options.provider)


class _PacedRuntime:
    """What ``call_with_retry`` uses of a runtime, its calls paced by what their
    responses report (and with one policy for all routes when one is given)."""

    def __init__(
        self, runtime: LlmRuntime, limiter: RouteLimiter, policy: RetryPolicy | None
    ) -> None:
        self._runtime = runtime
        self._limiter = limiter
        self._policy = policy

    def prepare_call(
        self, config: LlmCallConfig, signal: AbortSignal | None = None
    ) -> _PacedCall:
        return _PacedCall(
            self._runtime.prepare_call(config, signal), self._limiter, self._policy
        )


def _paced(
    stream: Iterable[StreamChunk], limiter: RouteLimiter, route: str
) -> Iterator[StreamChunk]:
    """``stream``'s chunks; once the first is there (the response's headers
    arrived, or the call failed) the limiter is told the rate limits reported
    (a ``ChunkStream``'s, else a failure's)."""
    iterator = iter(stream)
    try:
        first = next(iterator, None)
        limits = stream.rate_limits if isinstance(stream, ChunkStream) else None
        if limits is None and type(first) is Finish:
            failure = first.reason.failure
            limits = None if failure is None else failure.rate_limits
        _observe(limiter, route, limits)
        if first is None:
            return
        yield first
        yield from iterator
    finally:
        close_source(iterator)


def _observe(limiter: RouteLimiter, route: str, limits: RateLimits | None) -> None:
    try:
        limiter.observe(route, limits)
    except Exception as exc:
        raise LimiterError(route, exc) from exc


def repeated_id(
    request_id: RequestId | None, line: int, first_lines: dict[str, int]
) -> RequestLineError | None:
    """The failed line of a line whose id repeats an earlier line's, else
    ``None`` (``first_lines`` maps each id's ``id_key`` to the line that used it
    first; lines must be given in file order)."""
    if request_id is None:
        return None
    key = id_key(request_id)
    first = first_lines.setdefault(key, line)
    if first == line:
        return None
    return RequestLineError(
        id=None,
        line=line,
        failure=LlmFailure(
            message=f"line {line}: $.id {key} repeats the id of line {first}",
            code=ErrorCode.INVALID_BATCH_REQUEST.value,
        ),
    )


def count_lines(requests_path: PathLike, index: ResultsIndex) -> tuple[int, int]:
    """Request lines in the file, and how many of them already have a row."""
    if not index.done_ids and not index.done_lines:
        # Nothing is done yet: count the lines without reading them.
        return sum(1 for _ in request_lines(requests_path)), 0
    total = skipped = 0
    first_lines: dict[str, int] = {}
    for line, raw in request_lines(requests_path):
        total += 1
        request_id = peek_id(raw)
        if repeated_id(request_id, line, first_lines) is not None:
            request_id = None  # a repeated id: its row is the line's
        skipped += index.is_done(request_id, line)
    return total, skipped


def _request_result(
    request: BatchRequest, outcome: AssembledResponse, started: float
) -> BatchResult:
    failure = outcome.finish.failure
    return BatchResult(
        id=request.id,
        line=request.line,
        message=None if failure is not None else outcome.message,
        usage=outcome.usage,
        finish=outcome.finish,
        failure=failure,
        attempts=outcome.attempts,
        duration_ms=(time.perf_counter() - started) * 1000,
    )


def run_one(
    runtime: LlmRuntime,
    request: BatchRequest,
    *,
    limiter: RouteLimiter,
    signal: AbortSignal | None = None,
    retry: RetryPolicy | None = None,
) -> BatchResult:
    """Send one request through ``call_with_retry`` and return its row; never
    raises for a failure of the request (``prepare_call`` errors included).

    Raises:
        LimiterError: when ``limiter`` fails; the request has no row then.
    """
    started = time.perf_counter()
    target = _PacedRuntime(runtime, limiter, retry)
    asked = request.options.call_config()
    # call_with_retry adds the signal only when the options lack it; the run's
    # reader puts it in when it reads the line, so nothing is copied here.
    options = request.options
    if signal is not None and options.signal is not signal:
        options = options.evolve(signal=signal)

    def build(config: LlmCallConfig) -> GenerateOptions:
        # The limiter counts attempts, retries included; an abort while waiting
        # leaves the signal aborted, so the attempt ends at once as aborted.
        try:
            limiter.acquire(config.provider, signal)
        except Exception as exc:
            raise LimiterError(config.provider, exc) from exc
        if config == asked:
            return options
        return options.evolve(**attrs.asdict(config, recurse=False))

    def on_retry(event: RetryEvent) -> None:
        if event.failure.code == ErrorCode.RATE_LIMIT:
            _back_off(limiter, event.provider, event.delay_ms)

    try:
        outcome = call_with_retry(
            cast(LlmRuntime, target), asked, build, signal=signal, on_retry=on_retry
        )
    except LimiterError:
        raise
    except Exception as exc:  # preparation failures: the row says what they were
        return BatchResult(
            id=request.id,
            line=request.line,
            failure=normalize_llm_failure(exc),
            duration_ms=(time.perf_counter() - started) * 1000,
        )
    failure = outcome.finish.failure
    if failure is not None and failure.code == ErrorCode.RATE_LIMIT:
        retry_after = failure.provider_retry_after_ms
        if retry_after is not None:
            _back_off(limiter, request.options.provider, retry_after)
    return _request_result(request, outcome, started)


def _back_off(limiter: RouteLimiter, route: str, delay_ms: float) -> None:
    try:
        limiter.back_off(route, delay_ms)
    except Exception as exc:
        raise LimiterError(route, exc) from exc


def bad_line_result(item: RequestLineError) -> BatchResult:
    """The failed row of a line that cannot be sent."""
    return BatchResult(id=item.id, line=item.line, failure=item.failure)


def _stopped_by(signal: AbortSignal, result: BatchResult) -> bool:
    """Whether the run's stop aborted the request: its row is dropped, so a
    rerun sends it again."""
    finish = result.finish
    return signal.aborted and finish is not None and finish.kind == "aborted"


class _Lines:
    """The request lines still to do, taken one at a time by the workers.

    Only what decides a line's fate is done under the lock, in file order (its
    JSON, the duplicate-id check, the resume check), for up to ``DECIDED_AHEAD``
    lines at a time; the workers pop the decided lines without the lock and
    build their requests side by side. (Taking the lock once per line made
    the workers queue on it: at 8 threads a line cost more than twice its CPU.)
    """

    def __init__(
        self, requests_path: PathLike, index: ResultsIndex, signal: AbortSignal
    ) -> None:
        self._lock = threading.Lock()
        self._lines = request_lines(requests_path)
        self._index = index
        self._signal = signal
        self._first_lines: dict[str, int] = {}
        self._decided: collections.deque[tuple[Any, int]] = collections.deque()

    def take(self) -> BatchRequest | RequestLineError | None:
        """The next line without a row, ``None`` at the end of the file."""
        try:
            data, number = self._decided.popleft()  # atomic: no lock needed
        except IndexError:
            with self._lock:
                if not self._decided:
                    self._decide()
                if not self._decided:
                    return None
                data, number = self._decided.popleft()
        if isinstance(data, RequestLineError):
            return data
        return parse_request_object(data, number, signal=self._signal)

    def _decide(self) -> None:
        """Decide the fate of the next lines, in file order, until
        ``DECIDED_AHEAD`` of them are to be sent or the file ends (under the
        lock)."""
        decided = self._decided
        for number, raw in self._lines:
            data = decode_request_line(raw, number)
            if isinstance(data, RequestLineError):
                request_id = data.id
            else:
                request_id = request_id_of(data)
            repeated = repeated_id(request_id, number, self._first_lines)
            if repeated is not None:
                data, request_id = repeated, None
            if not self._index.is_done(request_id, number):
                decided.append((data, number))
                if len(decided) >= DECIDED_AHEAD:
                    return

    def close(self) -> None:
        with self._lock:
            self._decided.clear()
            close = getattr(self._lines, "close", None)
            if callable(close):
                close()


@attrs.define
class _Run:
    runtime: LlmRuntime
    results: ResultsFile
    concurrency: int
    limiter: RouteLimiter
    retry: RetryPolicy | None
    progress: BatchProgress | None
    caller_signal: AbortSignal | None
    controller: AbortController = attrs.field(init=False, factory=AbortController)
    signal: AbortSignal = attrs.field(init=False)
    """What stops the run: the caller's signal or the run's own controller."""
    errors: list[BaseException] = attrs.field(init=False, factory=list)

    @signal.default
    def _either_signal(self) -> AbortSignal:
        caller = self.caller_signal
        own = self.controller.signal
        return own if caller is None else AbortSignal.any(caller, own)

    def fail(self, exc: BaseException) -> None:
        """Stop the run because of ``exc`` (raised once it stopped)."""
        self.errors.append(exc)
        self.controller.abort(exc)

    def work(self, lines: _Lines, writer: RowWriter) -> None:
        try:
            while not self.signal.aborted:
                item = lines.take()
                if item is None:
                    return
                if isinstance(item, RequestLineError):
                    writer.put(bad_line_result(item))
                    continue
                result = run_one(
                    self.runtime,
                    item,
                    limiter=self.limiter,
                    signal=self.signal,
                    retry=self.retry,
                )
                if not _stopped_by(self.signal, result):
                    writer.put(result)
        except BaseException as exc:  # a limiter or the requests file failed
            self.fail(exc)

    def run(self, requests_path: PathLike) -> BatchSummary:
        ledger = RunLedger(
            requests_path, self.results, self.progress, on_error=self.fail
        )
        writer = ledger.writer
        interrupted = False
        lines = _Lines(requests_path, self.results.index, self.signal)
        count = min(self.concurrency, ledger.total - ledger.skipped)
        done = threading.Event()
        running = [count]
        running_lock = threading.Lock()

        def finished(workers: int) -> None:
            with running_lock:
                running[0] -= workers
                if running[0] <= 0:
                    done.set()

        def work() -> None:
            try:
                self.work(lines, writer)
            finally:
                finished(1)

        launched = 0
        finished(0)  # no line to do: nothing to wait for
        try:
            try:
                while launched < count:
                    threading.Thread(
                        target=work, name=f"dsh-llm-batch-{launched}", daemon=True
                    ).start()
                    launched += 1
                # An Event, not Thread.join: an interrupted join can leave a
                # thread reported as finished while it still runs (CPython 3.11).
                while not done.wait(_POLL_S):
                    pass
            except BaseException:
                # Ctrl-C: abort the in-flight requests and wait for them.
                interrupted = True
                self.controller.abort()
                finished(count - launched)  # workers that never started
                while not done.wait(_POLL_S):
                    pass
                raise
            finally:
                lines.close()
                writer.close()
        finally:
            summary = ledger.summary(interrupted=interrupted or self.signal.aborted)
        if self.errors:
            raise self.errors[0]
        return summary


class RunLedger:
    """One run's books, from its start to its ``BatchSummary``: the lines to
    send and those already done (``count_lines``), the clock, the progress
    shown, and the ``RowWriter`` that writes and counts the rows. The thread
    runner and the Dask runner keep them the same way.

    Args:
        requests_path: The requests file.
        results: The results file (its index tells the lines done).
        progress: The reporter, started here (``None``: none).
        on_error: Told once when writing rows fails (``RowWriter``).
    """

    def __init__(
        self,
        requests_path: PathLike,
        results: ResultsFile,
        progress: BatchProgress | None,
        *,
        on_error: Callable[[BaseException], object] | None = None,
    ) -> None:
        self._started = time.perf_counter()
        self._results = results
        self._progress = progress
        self.total, self.skipped = count_lines(requests_path, results.index)
        """Request lines in the file, and how many of them already have a row."""
        if progress is not None:
            progress.start(self.total, self.skipped)
        self.writer = RowWriter(
            results,
            on_written=None if progress is None else progress.update,
            on_error=on_error,
        )
        """Writes and counts the run's rows."""

    def summary(self, *, interrupted: bool) -> BatchSummary:
        """The run's ``BatchSummary`` from the rows written (call it once the
        writer is closed), also given to the progress reporter."""
        summary = self.writer.tally.summary(
            self._results,
            total=self.total,
            skipped=self.skipped,
            started=self._started,
            interrupted=interrupted,
        )
        if self._progress is not None:
            self._progress.close(summary)
        return summary


def resolve_progress(progress: BatchProgress | bool | None) -> BatchProgress | None:
    """The reporter ``progress`` asks for: a ``ProgressBar`` for ``True``."""
    if progress is True:
        return ProgressBar()
    if progress is None or progress is False:
        return None
    return progress


def check_concurrency(concurrency: object) -> int:
    """``concurrency`` when it is an int >= 1; else ``ValueError``."""
    if type(concurrency) is not int or concurrency < 1:
        raise ValueError("concurrency must be an integer >= 1")
    return concurrency


def run_jsonl(
    requests_path: PathLike,
    results_path: PathLike,
    *,
    runtime: LlmRuntime | None = None,
    composition: Composable | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    requests_per_minute: float | None = None,
    retry: RetryPolicy | Mapping[str, Any] | None = None,
    progress: BatchProgress | bool | None = None,
    signal: AbortSignal | None = None,
    limiter: RouteLimiter | None = None,
    fsync: bool = True,
) -> BatchSummary:
    """Run every request line of ``requests_path`` not yet in ``results_path``.

    Args:
        requests_path: JSON Lines of requests (``dsh_llm.batch.requests``).
        results_path: JSON Lines of results, appended to (created when missing).
        runtime: The runtime to call through; or else
        composition: a composition file (or its entries) loaded for the run and
            disposed after it.
        concurrency: Requests in flight at most.
        requests_per_minute: Per-route rate (``None``: no rate).
        retry: A retry policy (or its camelCase config) for every route instead
            of each route's own.
        progress: ``True`` for a ``ProgressBar`` on stderr, or a
            ``BatchProgress``; ``None`` reports nothing.
        signal: Stops the run (see the module docstring).
        limiter: A ``RouteLimiter`` to use instead of one built from
            ``requests_per_minute`` (tests inject a clock through it).
        fsync: Whether rows are forced to disk (``fsync``) before they count
            as done; without it they count once written to the OS.

    Returns:
        The ``BatchSummary``; ``summary.ok`` says whether every line succeeded.

    Raises:
        ValueError: for a bad ``concurrency``, ``requests_per_minute`` or
            ``retry``, or both ``requests_per_minute`` and ``limiter``.
        TypeError: unless exactly one of ``runtime`` and ``composition`` is given.
        PluginLoadError: when ``composition`` cannot be loaded.
        ResultsFileBusyError: when another run holds ``results_path``.
        OSError: when a file cannot be read or written.
        LimiterError: when the rate limiter failed (see the module docstring).
        KeyboardInterrupt: on Ctrl-C, after the in-flight requests ended.
    """
    check_concurrency(concurrency)
    if (runtime is None) == (composition is None):
        raise TypeError("run_jsonl takes exactly one of runtime and composition")
    if limiter is not None and requests_per_minute is not None:
        raise ValueError("pass requests_per_minute or limiter, not both")
    policy = None if retry is None else resolve_retry_policy(retry, "retry")
    if limiter is None:
        limiter = RouteLimiter(requests_per_minute)
    with contextlib.ExitStack() as stack:
        if runtime is None:
            from dsh_llm.plugins import load_composition

            assert composition is not None
            runtime = stack.enter_context(load_composition(composition)).runtime
        results = stack.enter_context(ResultsFile(results_path, fsync=fsync))
        run = _Run(
            runtime,
            results,
            concurrency=concurrency,
            limiter=limiter,
            retry=policy,
            progress=resolve_progress(progress),
            caller_signal=signal,
        )
        return run.run(requests_path)
