"""Progress of a batch run: the ``BatchProgress`` protocol and a ``tqdm`` bar.

Contracts callers may rely on:

- The runner calls ``start(total, skipped)`` once, ``update(result)`` once per
  result written (from worker threads), then ``close(summary)`` once, also when
  the run is interrupted or fails.
- ``ProgressBar`` shows done / total, rate, ETA and a postfix of failed
  requests and tokens. In a terminal it is a ``tqdm`` bar on its stream
  (stderr by default). In a Jupyter kernel (with no stream given) it is a
  notebook output: an ipywidgets bar when ipywidgets can be imported, else the
  same text line updated in place (one display, replaced, never a new line
  per update). Elsewhere (a pipe, a file) it draws nothing. ``close`` always
  writes one final ``summary_line`` to the stream.
- ``summary_line`` is one line: succeeded, failed (this run, and already in the
  file), skipped, tokens, duration and rate, and ``interrupted`` when it was.
- Nothing of IPython, ipywidgets or ``tqdm.notebook`` is imported outside a
  kernel.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
from typing import IO
from typing import Any
from typing import Final
from typing import NoReturn
from typing import Protocol

from tqdm import tqdm

from dsh_llm.batch.results import BatchResult
from dsh_llm.batch.results import BatchSummary

__all__ = ["BatchProgress", "ProgressBar", "in_jupyter_kernel", "summary_line"]

_NOTEBOOK_COLUMNS: Final = 100
"""The width of the text bar in a notebook (no terminal to measure)."""


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


def in_jupyter_kernel() -> bool:
    """Whether this code runs in a Jupyter (IPython) kernel, as a notebook
    cell does; ``False`` in a script, a terminal IPython or a worker process."""
    ipython = sys.modules.get("IPython")
    get_ipython = getattr(ipython, "get_ipython", None)
    shell = get_ipython() if callable(get_ipython) else None
    return getattr(shell, "kernel", None) is not None


class _DisplayLine:
    """A file for ``tqdm`` that shows the bar as one notebook output, updated
    in place (``IPython.display`` with a display id)."""

    encoding = "utf-8"
    """Tells ``tqdm`` it may draw the bar with Unicode blocks."""

    def __init__(self) -> None:
        # IPython is there whenever a kernel runs; imported by name so that
        # neither the library nor its type check needs it otherwise.
        display: Any = importlib.import_module("IPython.display").display
        self._handle: Any = display({"text/plain": ""}, raw=True, display_id=True)

    def write(self, text: str) -> None:
        line = text.replace("\r", "").strip()
        if line:
            self._handle.update({"text/plain": line}, raw=True)

    def flush(self) -> None:
        """Nothing is buffered."""


def _widget_bar(total: int, skipped: int) -> tqdm[NoReturn] | None:
    """A ``tqdm.notebook`` (ipywidgets) bar, or ``None`` without ipywidgets."""
    if importlib.util.find_spec("ipywidgets") is None:
        return None
    try:
        from tqdm.notebook import tqdm as notebook_tqdm
    except ImportError:
        return None
    try:
        return notebook_tqdm(total=total, initial=skipped, unit="req", smoothing=0.1)
    except ImportError:  # tqdm's "IProgress not found": widgets cannot show
        return None


class ProgressBar:
    """A progress bar for a batch run (see the module docstring).

    Args:
        stream: Where the terminal bar and the summary go (default:
            ``sys.stderr`` at ``start``).
        enabled: Whether to draw the bar; ``None`` draws it in a Jupyter kernel
            and when ``stream`` is a terminal. The summary line is written
            either way.
        notebook: Whether to draw it as notebook output rather than on
            ``stream``; ``None``: in a Jupyter kernel when no ``stream`` was
            given.
        widget: In a notebook, ``True`` for the ipywidgets bar, ``False`` for
            the text line; ``None`` picks the widget when ipywidgets can be
            imported.
    """

    def __init__(
        self,
        stream: IO[str] | None = None,
        *,
        enabled: bool | None = None,
        notebook: bool | None = None,
        widget: bool | None = None,
    ):
        self._stream = stream
        self._enabled = enabled
        self._notebook = notebook
        self._widget = widget
        self._lock = threading.Lock()
        self._bar: tqdm[NoReturn] | None = None
        self._failed = 0
        self._tokens = 0

    def _out(self) -> IO[str]:
        return sys.stderr if self._stream is None else self._stream

    def start(self, total: int, skipped: int) -> None:
        """Open the bar at ``skipped`` of ``total``."""
        out = self._out()
        notebook = self._notebook
        if notebook is None:
            notebook = self._stream is None and in_jupyter_kernel()
        enabled = self._enabled
        if enabled is None:
            isatty = getattr(out, "isatty", None)
            enabled = notebook or (bool(isatty()) if callable(isatty) else False)
        with self._lock:
            if not enabled:
                self._bar = None
            elif notebook:
                self._bar = self._notebook_bar(total, skipped)
            else:
                self._bar = tqdm(
                    total=total,
                    initial=skipped,
                    file=out,
                    unit="req",
                    dynamic_ncols=True,
                    smoothing=0.1,
                )

    def _notebook_bar(self, total: int, skipped: int) -> tqdm[NoReturn]:
        if self._widget is not False:
            bar = _widget_bar(total, skipped)
            if bar is not None:
                return bar
            if self._widget:
                raise RuntimeError(
                    "the batch progress widget needs ipywidgets (pip install "
                    "ipywidgets), or pass widget=False for the text bar"
                )
        return tqdm(
            total=total,
            initial=skipped,
            file=_DisplayLine(),
            unit="req",
            ncols=_NOTEBOOK_COLUMNS,
            smoothing=0.1,
        )

    def update(self, result: BatchResult) -> None:
        """Count ``result``."""
        with self._lock:
            self._failed += not result.ok
            self._tokens += _tokens(result)
            bar = self._bar
            if bar is None:
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
