"""``RowWriter``: a batch run's rows written by a thread of their own, counted once
they are on disk.

A row used to be forced to disk by the worker that made it, before its request
slot was freed, so every request waited for an ``fsync`` (a third of the run's
speed at one request in flight). Contracts callers may rely on:

- ``put(result)`` encodes the row in the caller's thread (short bursts between
  its requests, not one long one in the writer holding the interpreter) and
  queues it; it returns at once (it waits only while ``max_pending`` rows are
  queued, so a stalled disk stops the run instead of filling memory). The
  writer thread gathers rows for up to ``window_s`` after the first one (group
  commit; ``close`` ends the wait) and writes them with
  ``ResultsFile.append_lines``: one ``write`` and one ``fsync`` for all of them.
  An ``fsync`` costs milliseconds of waiting and a fifth of a millisecond of
  CPU, so sharing it keeps both off every request's bill.
- A row is counted (``tally``, ``on_written``) only after ``append_lines``
  returned: whatever a run reports done is on disk. A row still queued when the
  process dies is lost, but it was never reported, and a rerun sends it again.
- When writing fails (a full disk), or ``on_written`` raises, the writer
  stops: ``error`` holds the exception, ``on_error`` is told once, and later
  rows are dropped uncounted.
- ``close()`` writes what is queued, stops the thread and waits for it;
  idempotent.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Final

from dsh_llm.batch.results import BatchResult
from dsh_llm.batch.results import BatchSummary
from dsh_llm.batch.results import ResultsFile
from dsh_llm.batch.results import row_line

__all__ = ["DEFAULT_MAX_PENDING", "DEFAULT_WINDOW_S", "RowTally", "RowWriter"]

DEFAULT_MAX_PENDING: Final = 4096
"""Rows that may wait for the writer before ``put`` blocks."""
DEFAULT_WINDOW_S: Final = 0.05
"""How long the writer gathers rows after the first before writing them."""


class RowTally:
    """What the rows written so far add up to (read once the writer closed)."""

    __slots__ = ("failed", "input_tokens", "output_tokens", "succeeded")

    def __init__(self) -> None:
        self.succeeded = 0
        """Rows of successful requests."""
        self.failed = 0
        """Rows of failed requests (and of lines that could not be sent)."""
        self.input_tokens = 0
        """Input tokens of the rows (uncached, cache read and cache write)."""
        self.output_tokens = 0
        """Output tokens of the rows."""

    def add(self, result: BatchResult) -> None:
        """Count one row."""
        if result.failure is None:
            self.succeeded += 1
        else:
            self.failed += 1
        usage = result.usage
        if usage is not None:
            self.input_tokens += (
                (usage.input_tokens or 0)
                + (usage.cache_read_tokens or 0)
                + (usage.cache_write_tokens or 0)
            )
            self.output_tokens += usage.output_tokens or 0

    def summary(
        self,
        results: ResultsFile,
        *,
        total: int,
        skipped: int,
        started: float,
        interrupted: bool,
    ) -> BatchSummary:
        """The ``BatchSummary`` of a run that wrote these rows to ``results``:
        ``total`` and ``skipped`` lines (``count_lines``), begun at ``started``
        (``time.perf_counter()``)."""
        return BatchSummary(
            results_path=results.path,
            total=total,
            skipped=skipped,
            succeeded=self.succeeded,
            failed=self.failed,
            failed_before=results.index.failed,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            duration_s=time.perf_counter() - started,
            interrupted=interrupted,
        )


class RowWriter:
    """Writes rows to ``results`` from its own thread (see the module docstring).

    Args:
        results: The open results file.
        on_written: Told about each row once it is on disk (progress), from the
            writer's thread.
        on_error: Told once when writing fails, from the writer's thread.
        max_pending: Rows that may wait before ``put`` blocks.
        window_s: How long rows are gathered after the first of a write.
    """

    def __init__(
        self,
        results: ResultsFile,
        *,
        on_written: Callable[[BatchResult], object] | None = None,
        on_error: Callable[[BaseException], object] | None = None,
        max_pending: int = DEFAULT_MAX_PENDING,
        window_s: float = DEFAULT_WINDOW_S,
    ) -> None:
        if type(max_pending) is not int or max_pending < 1:
            raise ValueError("max_pending must be an integer >= 1")
        if not 0 <= window_s <= 1:
            raise ValueError("window_s must be between 0 and 1 second")
        self._window_s = window_s
        self._results = results
        self._on_written = on_written
        self._on_error = on_error
        self._max_pending = max_pending
        self._cond = threading.Condition()
        self._pending: list[tuple[BatchResult, bytes]] = []
        self._closing = False
        self._stopped = False
        self.tally = RowTally()
        """The rows on disk so far."""
        self.error: BaseException | None = None
        """What stopped the writer, if anything did."""
        self._thread = threading.Thread(
            target=self._run, name="dsh-llm-batch-writer", daemon=True
        )
        self._thread.start()

    def put(self, result: BatchResult) -> None:
        """Queue ``result`` to be written (dropped once the writer stopped).

        Raises:
            ValueError, TypeError: when the row cannot be encoded as JSON.
        """
        line = row_line(result)
        with self._cond:
            while len(self._pending) >= self._max_pending and not self._stopped:
                self._cond.wait()
            if self._stopped:
                return
            self._pending.append((result, line))
            if len(self._pending) == 1:
                self._cond.notify_all()

    def close(self) -> None:
        """Write what is queued and stop the thread; idempotent."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join()

    def _take(self) -> list[tuple[BatchResult, bytes]]:
        with self._cond:
            while not self._pending and not self._closing:
                self._cond.wait()
            deadline = time.monotonic() + self._window_s
            while not self._closing and len(self._pending) < self._max_pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            rows, self._pending = self._pending, []
            if not rows:
                self._stopped = True
            self._cond.notify_all()  # room for the workers waiting in put
            return rows

    def _run(self) -> None:
        while True:
            rows = self._take()
            if not rows:
                return
            try:
                self._results.append_lines(line for _, line in rows)
                for row, _ in rows:
                    self.tally.add(row)
                    if self._on_written is not None:
                        self._on_written(row)
            except BaseException as exc:  # a full disk: stop, the run reports it
                self._stop(exc)
                return

    def _stop(self, exc: BaseException) -> None:
        with self._cond:
            self.error = exc
            self._stopped = True
            self._pending.clear()
            self._cond.notify_all()
        if self._on_error is not None:
            self._on_error(exc)
