"""``run_jsonl_dask``: the batch job of ``run_jsonl`` on a Dask cluster.

Needs the ``dask`` extra (``pip install dsh-llm[dask]``). Contracts callers may
rely on:

- Workers receive plain config only: the composition file's text (or its
  entries, as plain mappings), the per-worker rate and the retry config, as one
  JSON string, plus each request's JSON object and line number. No adapter,
  session or runtime is pickled. Each worker process builds its runtime once per
  distinct config (cached by the config's SHA-256) and keeps it for the
  process's life; ``${VAR}`` in the composition reads the worker's environment.
- The client reads the requests file, writes malformed lines and repeated ids as
  failed rows itself, and submits the rest, at most ``concurrency`` tasks at a
  time. A failed request comes back as a failed row, never as a failed task; a
  task that raises (a worker that cannot build its runtime) stops the run and
  its error is raised after the rows already gathered are written.
- The client writes each row as it arrives, exactly as ``run_jsonl`` does (same
  format, same writer: a row counts once it is on disk; same lock, resume and
  torn-line rules), so a run may be resumed by either function. A line no reader
  can take (nested too deeply, a number too long) is the client's failed row.
- The rate limit is per worker process: ``requests_per_minute`` each, so a
  cluster of N workers may start N times as many requests a minute per route.
- ``signal`` (or Ctrl-C) stops the run: waiting tasks are cancelled; requests
  already running on a worker finish there and their rows are dropped, so a
  rerun sends them again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import threading
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Mapping
from typing import Any
from typing import Final
from typing import cast

import attrs
import distributed

from dsh_llm.batch.progress import BatchProgress
from dsh_llm.batch.ratelimit import RouteLimiter
from dsh_llm.batch.requests import BatchRequest
from dsh_llm.batch.requests import RequestLineError
from dsh_llm.batch.requests import decode_request_line
from dsh_llm.batch.requests import parse_request_object
from dsh_llm.batch.requests import request_lines
from dsh_llm.batch.results import BatchResult
from dsh_llm.batch.results import ResultsFile
from dsh_llm.batch.results import result_from_dict
from dsh_llm.batch.results import result_to_dict
from dsh_llm.batch.runner import BatchSummary
from dsh_llm.batch.runner import RunLedger
from dsh_llm.batch.runner import bad_line_result
from dsh_llm.batch.runner import check_concurrency
from dsh_llm.batch.runner import repeated_id
from dsh_llm.batch.runner import resolve_progress
from dsh_llm.batch.runner import run_one
from dsh_llm.batch.writer import RowWriter
from dsh_llm.retry import RetryPolicy
from dsh_llm.retry import resolve_retry_policy
from dsh_llm.serde import compact_json
from dsh_llm.signal import AbortSignal

__all__ = ["run_jsonl_dask", "worker_config", "worker_runtimes_built"]

_POLL_S: Final = 0.05

_wait: Any = distributed.wait  # not annotated

PathLike = str | os.PathLike[str]


# --- worker side ---------------------------------------------------------------


@attrs.frozen
class _WorkerState:
    runtime: Any
    limiter: RouteLimiter
    retry: RetryPolicy | None
    composition: Any


_STATES: dict[str, _WorkerState] = {}
_STATES_LOCK = threading.Lock()
_BUILT = [0]


def worker_runtimes_built() -> int:
    """How many runtimes this process has built for batch tasks (for tests and
    diagnostics: one per distinct config is expected)."""
    return _BUILT[0]


def _load(composition: str | list[Any]) -> Any:
    from dsh_llm.plugins import load_composition

    if isinstance(composition, list):
        return load_composition(composition)
    # The file's text goes through the same strict loader as the file itself.
    handle, path = tempfile.mkstemp(prefix="dsh-llm-batch-", suffix=".yml")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(composition)
        return load_composition(path)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _state(config_json: str, key: str) -> _WorkerState:
    with _STATES_LOCK:
        state = _STATES.get(key)
        if state is None:
            config = json.loads(config_json)
            composition = _load(config["composition"])
            retry = config.get("retry")
            state = _WorkerState(
                runtime=composition.runtime,
                limiter=RouteLimiter(config.get("requestsPerMinute")),
                retry=None if retry is None else resolve_retry_policy(retry, "retry"),
                composition=composition,
            )
            _STATES[key] = state
            _BUILT[0] += 1
        return state


def _run_task(config_json: str, key: str, request: Any, line: int) -> dict[str, Any]:
    """One request on a worker: its result row (plain JSON data)."""
    state = _state(config_json, key)
    item = parse_request_object(request, line)
    if isinstance(item, RequestLineError):
        return result_to_dict(bad_line_result(item))
    result = run_one(state.runtime, item, limiter=state.limiter, retry=state.retry)
    return result_to_dict(result)


# --- client side ---------------------------------------------------------------


def worker_config(
    composition: PathLike | Iterable[Mapping[str, Any]],
    *,
    requests_per_minute: float | None = None,
    retry: Mapping[str, Any] | None = None,
) -> str:
    """The JSON string workers receive: the composition (a file's text, or the
    entries as plain data), the per-worker rate and the retry config.

    Raises:
        OSError: when the composition file cannot be read.
        TypeError: when the entries are not plain JSON data.
        ValueError: for a bad rate or retry config.
    """
    RouteLimiter(requests_per_minute)  # the same checks the workers make
    if retry is not None:
        resolve_retry_policy(retry, "retry")
    if isinstance(composition, str | os.PathLike):
        with open(composition, encoding="utf-8") as source:
            payload: str | list[Any] = source.read()
    else:
        payload = json.loads(compact_json([dict(entry) for entry in composition]))
    return compact_json(
        {
            "composition": payload,
            "requestsPerMinute": requests_per_minute,
            "retry": None if retry is None else dict(retry),
        }
    )


def _pending(
    requests_path: PathLike, done: Any
) -> Iterator[tuple[BatchRequest | RequestLineError, Any]]:
    """Each line without a row, with its JSON value for the worker (the value
    of a line that cannot be sent is not used: the client writes its row)."""
    first_lines: dict[str, int] = {}
    for number, raw in request_lines(requests_path):
        data = decode_request_line(raw, number)
        item = (
            data
            if isinstance(data, RequestLineError)
            else parse_request_object(data, number)
        )
        repeated = repeated_id(item.id, number, first_lines)
        if repeated is not None:
            item = repeated
        if not done(item.id, item.line):
            yield item, data


def run_jsonl_dask(
    client: distributed.Client,
    requests_path: PathLike,
    results_path: PathLike,
    *,
    composition: PathLike | Iterable[Mapping[str, Any]],
    concurrency: int | None = None,
    requests_per_minute: float | None = None,
    retry: Mapping[str, Any] | None = None,
    progress: BatchProgress | bool | None = None,
    signal: AbortSignal | None = None,
    fsync: bool = True,
) -> BatchSummary:
    """Run every request line not yet in ``results_path`` on ``client``'s cluster.

    Args:
        client: A connected ``distributed.Client``.
        requests_path: JSON Lines of requests, read by the client.
        results_path: JSON Lines of results, written by the client.
        composition: The composition file (its text is sent) or its entries.
        concurrency: Tasks in flight at most (default: twice the cluster's
            worker threads when the run starts).
        requests_per_minute: Per-route rate of each worker process.
        retry: A retry config (camelCase) for every route instead of its own.
        progress: As for ``run_jsonl``.
        signal: Stops the run (see the module docstring).
        fsync: Whether each result line is forced to disk.

    Returns:
        The ``BatchSummary`` of the run.

    Raises:
        ValueError: for a bad ``concurrency``, rate or retry config.
        OSError: when a file cannot be read or written.
        LlmError: what a task raised (e.g. ``PLUGIN_LOAD`` on a worker).
        KeyboardInterrupt: on Ctrl-C, after the waiting tasks were cancelled.
    """
    config_json = worker_config(
        composition, requests_per_minute=requests_per_minute, retry=retry
    )
    key = hashlib.sha256(config_json.encode("utf-8")).hexdigest()
    if concurrency is None:
        untyped: Any = cast(Any, client)  # distributed's methods are not annotated
        threads = sum(untyped.nthreads().values())
        concurrency = max(2 * threads, 1)
    check_concurrency(concurrency)
    reporter = resolve_progress(progress)
    with ResultsFile(results_path, fsync=fsync) as results:
        return _DaskRun(
            client, results, config_json, key, concurrency, reporter, signal
        ).run(requests_path)


class _DaskRun:
    def __init__(
        self,
        client: distributed.Client,
        results: ResultsFile,
        config_json: str,
        key: str,
        concurrency: int,
        progress: BatchProgress | None,
        signal: AbortSignal | None,
    ) -> None:
        # distributed's methods are not annotated.
        self.client: Any = cast(Any, client)
        self.results = results
        self.config = self.client.scatter(config_json, broadcast=True, hash=False)
        self.key = key
        self.concurrency = concurrency
        self.progress = progress
        self.signal = signal
        self.in_flight: set[distributed.Future[Any]] = set()
        self.writer: RowWriter | None = None

    def record(self, result: BatchResult | dict[str, Any]) -> None:
        if isinstance(result, dict):
            result = result_from_dict(result)
        assert self.writer is not None
        self.writer.put(result)

    def aborted(self) -> bool:
        if self.writer is not None and self.writer.error is not None:
            return True  # a write failed: stop, and raise it
        return self.signal is not None and self.signal.aborted

    def fill(
        self, pending: Iterator[tuple[BatchRequest | RequestLineError, Any]]
    ) -> None:
        while len(self.in_flight) < self.concurrency and not self.aborted():
            item = next(pending, None)
            if item is None:
                return
            request, data = item
            if isinstance(request, RequestLineError):
                self.record(bad_line_result(request))
                continue
            future = self.client.submit(
                _run_task,
                self.config,
                self.key,
                data,
                request.line,
                pure=False,
                retries=0,
            )
            self.in_flight.add(future)

    def gather(
        self, pending: Iterator[tuple[BatchRequest | RequestLineError, Any]]
    ) -> None:
        self.fill(pending)
        while self.in_flight and not self.aborted():
            try:
                done, _ = _wait(
                    list(self.in_flight), timeout=_POLL_S, return_when="FIRST_COMPLETED"
                )
            except TimeoutError:
                continue
            for future in done:
                self.in_flight.discard(future)
                row = future.result()  # a task that raised stops the run here
                self.record(row)
            self.fill(pending)

    def run(self, requests_path: PathLike) -> BatchSummary:
        ledger = RunLedger(requests_path, self.results, self.progress)
        writer = self.writer = ledger.writer
        interrupted = False
        try:
            try:
                self.gather(_pending(requests_path, self.results.index.is_done))
            except BaseException:
                interrupted = True
                raise
            finally:
                if self.in_flight:
                    self.client.cancel(list(self.in_flight))
                    self.in_flight.clear()
                writer.close()
        finally:
            summary = ledger.summary(interrupted=interrupted or self.aborted())
        if writer.error is not None:
            raise writer.error
        return summary
