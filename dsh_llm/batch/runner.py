"""``run_jsonl``: a requests file through a runtime into a results file.

This module owns one machine's batch run. Contracts callers may rely on:

- At most ``concurrency`` requests are in flight (one worker thread each). Each
  goes through ``dsh_llm.call.call_with_retry`` with its route's retry policy
  (or ``retry``, for every route); every attempt first waits for the route's
  ``RouteLimiter`` token, and a ``RATE_LIMIT`` failure backs the route off by
  the provider's ``Retry-After`` (else the retry's own delay).
- Every request line gets exactly one row in the results file, written when it
  ends, in completion order: a malformed line or a repeated id gets a failed row
  (``INVALID_BATCH_REQUEST``) without being sent, and a failed call a failed row
  with its failure code; nothing raises for one request.
- Resumable: ids (and id-less lines) that already have a row are skipped, so a
  rerun after a crash or a kill does only what is missing. A torn last line is
  cut off first (``dsh_llm.batch.results``).
- ``signal`` (or Ctrl-C in the calling thread) stops the run: no new request
  starts, in-flight ones are aborted through their signal, and what they would
  have written is dropped, so a rerun sends them again. Rows already written
  stay. ``signal`` gives a summary with ``interrupted``; Ctrl-C raises
  ``KeyboardInterrupt`` after the in-flight requests ended.
- ``progress`` is told about the run (``dsh_llm.batch.progress``); its ``close``
  runs however the run ends.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final, cast

import attrs

from dsh_llm.assembler import AssembledResponse
from dsh_llm.batch.progress import BatchProgress, ProgressBar
from dsh_llm.batch.ratelimit import RouteLimiter
from dsh_llm.batch.requests import (
    BatchRequest,
    RequestLineError,
    id_key,
    peek_id,
    read_requests,
    request_lines,
)
from dsh_llm.batch.results import BatchResult, BatchSummary, ResultsFile, ResultsIndex
from dsh_llm.call import RetryEvent, call_with_retry
from dsh_llm.errors import ErrorCode, normalize_llm_failure
from dsh_llm.protocol import GenerateOptions, LlmCallConfig, LlmFailure, StreamChunk
from dsh_llm.retry import RetryPolicy, resolve_retry_policy
from dsh_llm.runtime import LlmRuntime
from dsh_llm.signal import AbortController, AbortSignal

__all__ = ["DEFAULT_CONCURRENCY", "BatchSummary", "run_jsonl"]

DEFAULT_CONCURRENCY: Final = 8
"""Requests in flight when ``concurrency`` is not given."""

_POLL_S: Final = 0.05

PathLike = str | os.PathLike[str]
Composable = PathLike | Iterable[Mapping[str, Any]]


class _FixedPolicyCall:
    """A prepared call whose retry policy is the batch's ``retry``."""

    def __init__(self, prepared: Any, policy: RetryPolicy) -> None:
        self._prepared = prepared
        self.retry_policy = policy

    @property
    def config(self) -> LlmCallConfig:
        config: LlmCallConfig = self._prepared.config
        return config

    def stream(self, options: GenerateOptions) -> Iterable[StreamChunk]:
        chunks: Iterable[StreamChunk] = self._prepared.stream(options)
        return chunks


class _FixedPolicyRuntime:
    """What ``call_with_retry`` uses of a runtime, with one policy for all routes."""

    def __init__(self, runtime: LlmRuntime, policy: RetryPolicy) -> None:
        self._runtime = runtime
        self._policy = policy

    def prepare_call(
        self, config: LlmCallConfig, signal: AbortSignal | None = None
    ) -> _FixedPolicyCall:
        return _FixedPolicyCall(
            self._runtime.prepare_call(config, signal), self._policy
        )


def _identity(
    item: BatchRequest | RequestLineError, first_lines: dict[str, int]
) -> BatchRequest | RequestLineError:
    """``item``, or a failed line when its id repeats an earlier line's."""
    if item.id is None:
        return item
    key = id_key(item.id)
    first = first_lines.setdefault(key, item.line)
    if first == item.line:
        return item
    return RequestLineError(
        id=None,
        line=item.line,
        failure=LlmFailure(
            message=f"line {item.line}: $.id {key} repeats the id of line {first}",
            code=ErrorCode.INVALID_BATCH_REQUEST.value,
        ),
    )


def _count(requests_path: PathLike, index: ResultsIndex) -> tuple[int, int]:
    """Request lines in the file, and how many of them already have a row."""
    total = skipped = 0
    first_lines: dict[str, int] = {}
    for line, raw in request_lines(requests_path):
        total += 1
        request_id = peek_id(raw)
        if request_id is not None and (
            first_lines.setdefault(id_key(request_id), line) != line
        ):
            request_id = None  # a repeated id: its row is the line's
        skipped += index.is_done(request_id, line)
    return total, skipped


def _input_output(result: BatchResult) -> tuple[int, int]:
    usage = result.usage
    if usage is None:
        return 0, 0
    inputs = (usage.input_tokens, usage.cache_read_tokens, usage.cache_write_tokens)
    return sum(n or 0 for n in inputs), usage.output_tokens or 0


class _Tally:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.succeeded = 0
        self.failed = 0
        self.input_tokens = 0
        self.output_tokens = 0

    def add(self, result: BatchResult) -> None:
        inputs, outputs = _input_output(result)
        with self.lock:
            self.succeeded += result.ok
            self.failed += not result.ok
            self.input_tokens += inputs
            self.output_tokens += outputs


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
    raises for a failure of the request (``prepare_call`` errors included)."""
    started = time.perf_counter()
    target: Any = runtime if retry is None else _FixedPolicyRuntime(runtime, retry)

    def build(config: LlmCallConfig) -> GenerateOptions:
        # The limiter counts attempts, retries included; an abort while waiting
        # leaves the signal aborted, so the attempt ends at once as aborted.
        limiter.acquire(config.provider, signal)
        return request.options.evolve(**attrs.asdict(config, recurse=False))

    def on_retry(event: RetryEvent) -> None:
        if event.failure.code == ErrorCode.RATE_LIMIT:
            limiter.back_off(event.provider, event.delay_ms)

    try:
        outcome = call_with_retry(
            cast(LlmRuntime, target),
            request.options.call_config(),
            build,
            signal=signal,
            on_retry=on_retry,
        )
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
            limiter.back_off(request.options.provider, retry_after)
    return _request_result(request, outcome, started)


def _bad_line(item: RequestLineError) -> BatchResult:
    return BatchResult(id=item.id, line=item.line, failure=item.failure)


class _Run:
    def __init__(
        self,
        runtime: LlmRuntime,
        results: ResultsFile,
        *,
        concurrency: int,
        limiter: RouteLimiter,
        retry: RetryPolicy | None,
        progress: BatchProgress | None,
        signal: AbortSignal | None,
    ) -> None:
        self.runtime = runtime
        self.results = results
        self.concurrency = concurrency
        self.limiter = limiter
        self.retry = retry
        self.progress = progress
        self.controller = AbortController()
        self.signal = (
            self.controller.signal
            if signal is None
            else AbortSignal.any(signal, self.controller.signal)
        )
        self.tally = _Tally()
        self.slots = threading.BoundedSemaphore(concurrency)
        self.write_error: list[BaseException] = []

    def record(self, result: BatchResult) -> None:
        try:
            self.results.append(result)
        except BaseException as exc:  # a full disk: stop the run, report it
            self.write_error.append(exc)
            self.controller.abort(exc)
            return
        self.tally.add(result)
        if self.progress is not None:
            self.progress.update(result)

    def one(self, request: BatchRequest) -> None:
        try:
            result = run_one(
                self.runtime,
                request,
                limiter=self.limiter,
                signal=self.signal,
                retry=self.retry,
            )
            finish = result.finish
            if self.signal.aborted and finish is not None and finish.kind == "aborted":
                return  # stopped by the run: a rerun sends it again
            self.record(result)
        finally:
            self.slots.release()

    def take_slot(self) -> bool:
        while not self.slots.acquire(timeout=_POLL_S):
            if self.signal.aborted:
                return False
        if self.signal.aborted:
            self.slots.release()
            return False
        return True

    def feed(self, requests_path: PathLike, pool: ThreadPoolExecutor) -> None:
        index = self.results.index
        first_lines: dict[str, int] = {}
        for item in read_requests(requests_path):
            if self.signal.aborted:
                return
            item = _identity(item, first_lines)
            if index.is_done(item.id, item.line):
                continue
            if isinstance(item, RequestLineError):
                self.record(_bad_line(item))
                continue
            if not self.take_slot():
                return
            pool.submit(self.one, item)

    def run(self, requests_path: PathLike) -> BatchSummary:
        started = time.perf_counter()
        index = self.results.index
        total, skipped = _count(requests_path, index)
        if self.progress is not None:
            self.progress.start(total, skipped)
        interrupted = False
        try:
            with ThreadPoolExecutor(
                self.concurrency, thread_name_prefix="dsh-llm-batch"
            ) as pool:
                try:
                    self.feed(requests_path, pool)
                except BaseException:
                    # Ctrl-C (or a requests file that stops reading): abort the
                    # in-flight requests; leaving the pool waits for them.
                    interrupted = True
                    self.controller.abort()
                    raise
        finally:
            summary = BatchSummary(
                results_path=self.results.path,
                total=total,
                skipped=skipped,
                succeeded=self.tally.succeeded,
                failed=self.tally.failed,
                failed_before=index.failed,
                input_tokens=self.tally.input_tokens,
                output_tokens=self.tally.output_tokens,
                duration_s=time.perf_counter() - started,
                interrupted=interrupted or self.signal.aborted,
            )
            if self.progress is not None:
                self.progress.close(summary)
        if self.write_error:
            raise self.write_error[0]
        return summary


def _progress(progress: BatchProgress | bool | None) -> BatchProgress | None:
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
        fsync: Whether each result line is forced to disk.

    Returns:
        The ``BatchSummary``; ``summary.ok`` says whether every line succeeded.

    Raises:
        ValueError: for a bad ``concurrency``, ``requests_per_minute`` or
            ``retry``, or both ``requests_per_minute`` and ``limiter``.
        TypeError: unless exactly one of ``runtime`` and ``composition`` is given.
        PluginLoadError: when ``composition`` cannot be loaded.
        OSError: when a file cannot be read or written.
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
            progress=_progress(progress),
            signal=signal,
        )
        return run.run(requests_path)
