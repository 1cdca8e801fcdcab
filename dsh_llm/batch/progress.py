"""Progress of a batch run: the ``BatchProgress`` protocol and a ``tqdm`` bar.

Contracts callers may rely on:

- The runner calls ``start(total, skipped)`` once, ``update(result)`` once per
  result written (from worker threads), then ``close(summary)`` once, also when
  the run is interrupted or fails.
- ``ProgressBar`` draws a ``tqdm`` bar on its stream (stderr by default) with
  done / total, rate, ETA and a postfix of failed requests and tokens; it draws
  nothing when the stream is not a terminal. ``close`` always writes one final
  ``summary_line`` to the stream.
- ``summary_line`` is one line: succeeded, failed (this run, and already in the
  file), skipped, tokens, duration and rate, and ``interrupted`` when it was.
"""

from __future__ import annotations

import sys
import threading
from typing import IO, NoReturn, Protocol

from tqdm import tqdm

from dsh_llm.batch.results import BatchResult, BatchSummary

__all__ = ["BatchProgress", "ProgressBar", "summary_line"]


class BatchProgress(Protocol):
    """What a run reports its progress to."""

    def start(self, total: int, skipped: int) -> None:
        """The run begins: ``total`` request lines, ``skipped`` already done."""

    def update(self, result: BatchResult) -> None:
        """One result was written (called from worker threads)."""

    def close(self, summary: BatchSummary) -> None:
        """The run ended (completed, interrupted or failed)."""


def _tokens(result: BatchResult) -> int:
    usage = result.usage
    if usage is None:
        return 0
    return sum(
        count or 0
        for count in (
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens,
        )
    )


def summary_line(summary: BatchSummary) -> str:
    """One line describing ``summary`` (see the module docstring)."""
    parts = [f"{summary.succeeded} succeeded", f"{summary.failed} failed"]
    if summary.failed_before:
        parts.append(f"{summary.failed_before} failed in an earlier run")
    if summary.skipped:
        parts.append(f"{summary.skipped} skipped (already in the results file)")
    if summary.not_run:
        parts.append(f"{summary.not_run} not run")
    parts.append(f"tokens {summary.input_tokens} in / {summary.output_tokens} out")
    seconds = summary.duration_s
    done = summary.succeeded + summary.failed
    rate = done / seconds if seconds > 0 else 0.0
    parts.append(f"{seconds:.1f} s ({rate:.1f} req/s)")
    head = "batch interrupted" if summary.interrupted else "batch done"
    return f"{head}: " + ", ".join(parts)


class ProgressBar:
    """A ``tqdm`` progress bar for a batch run.

    Args:
        stream: Where the bar and the summary go (default: ``sys.stderr`` at
            ``start``).
        enabled: Whether to draw the bar; ``None`` draws it only when ``stream``
            is a terminal. The summary line is written either way.
    """

    def __init__(self, stream: IO[str] | None = None, *, enabled: bool | None = None):
        self._stream = stream
        self._enabled = enabled
        self._lock = threading.Lock()
        self._bar: tqdm[NoReturn] | None = None
        self._failed = 0
        self._tokens = 0

    def _out(self) -> IO[str]:
        return sys.stderr if self._stream is None else self._stream

    def start(self, total: int, skipped: int) -> None:
        """Open the bar at ``skipped`` of ``total``."""
        out = self._out()
        enabled = self._enabled
        if enabled is None:
            isatty = getattr(out, "isatty", None)
            enabled = bool(isatty()) if callable(isatty) else False
        with self._lock:
            self._bar = tqdm(
                total=total,
                initial=skipped,
                file=out,
                disable=not enabled,
                unit="req",
                dynamic_ncols=True,
                smoothing=0.1,
            )

    def update(self, result: BatchResult) -> None:
        """Count ``result``."""
        with self._lock:
            self._failed += not result.ok
            self._tokens += _tokens(result)
            bar = self._bar
            if bar is None or bar.disable:
                return
            bar.set_postfix(failed=self._failed, tokens=self._tokens, refresh=False)
            bar.update(1)

    def close(self, summary: BatchSummary) -> None:
        """Close the bar and write the summary line."""
        with self._lock:
            bar, self._bar = self._bar, None
        if bar is not None:
            bar.close()
        out = self._out()
        print(summary_line(summary), file=out, flush=True)
