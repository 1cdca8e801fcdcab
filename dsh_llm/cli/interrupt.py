"""Ctrl-C for streaming commands: an interrupt aborts the request through its
signal instead of tearing the stream down mid-read.

This module owns ``run_abortable``. Contracts callers may rely on:

- ``work`` runs on a worker thread (``dsh-llm-stream``) while the calling thread
  waits for it; its return value is returned and what it raises is raised
  unchanged in the calling thread.
- A ``KeyboardInterrupt`` in the calling thread (Ctrl-C, SIGINT) aborts
  ``controller``: the adapter shuts its socket down and the stream ends with an
  ``aborted`` finish, so the worker finishes normally and the connection is really
  closed. ``run_abortable`` waits for the worker, then raises
  ``KeyboardInterrupt`` (whatever the worker returned or raised is dropped). An
  adapter that ignores its abort is waited for at most ``grace_s``
  (``INTERRUPT_GRACE_S``, 2 s), or until a second interrupt: then
  ``on_abandon`` is called (so the caller can silence the worker's output; what
  it raises is ignored) and ``KeyboardInterrupt`` is raised without waiting
  more. The worker is a daemon thread and cannot keep the process alive.
- The calling thread waits on an event in slices of ``_POLL_S`` seconds, so an
  interrupt is seen promptly on every platform (a lock wait is not interruptible
  everywhere) and never confuses the worker's state.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import Final
from typing import TypeVar

from dsh_llm.signal import AbortController

T = TypeVar("T")

_POLL_S: Final = 0.05

INTERRUPT_GRACE_S: Final = 2.0
"""How long an interrupted job may take to end after its abort."""


def run_abortable(
    work: Callable[[], T],
    controller: AbortController,
    *,
    grace_s: float = INTERRUPT_GRACE_S,
    on_abandon: Callable[[], object] | None = None,
) -> T:
    """Run ``work()`` on a worker thread; Ctrl-C aborts ``controller``.

    Args:
        work: The streaming job; it must pass ``controller.signal`` to its request.
        controller: Aborted when the calling thread is interrupted.
        grace_s: How long an interrupted ``work`` may take to end.
        on_abandon: Called when ``work`` is left running past ``grace_s``.

    Returns:
        What ``work`` returned.

    Raises:
        KeyboardInterrupt: after the interrupted ``work`` has finished, or once
            it was abandoned (``grace_s`` passed, or a second interrupt came).
        BaseException: whatever ``work`` raised.
    """
    outcome: list[T] = []
    failure: list[BaseException] = []
    done = threading.Event()

    def target() -> None:
        try:
            outcome.append(work())
        except BaseException as exc:  # handed to the calling thread below
            failure.append(exc)
        finally:
            done.set()

    worker = threading.Thread(target=target, name="dsh-llm-stream", daemon=True)
    worker.start()
    try:
        # An Event, not Thread.join: an interrupted join can leave the thread
        # reported as finished while it still runs (CPython 3.11).
        while not done.wait(_POLL_S):
            pass
    except KeyboardInterrupt:
        controller.abort()
        deadline = time.monotonic() + grace_s
        try:
            while not done.wait(_POLL_S):
                if time.monotonic() >= deadline:
                    break
        except KeyboardInterrupt:
            pass  # a second Ctrl-C: stop waiting
        if not done.is_set():
            # The job ignores its abort: leave it to its daemon thread, quiet.
            if on_abandon is not None:
                with contextlib.suppress(Exception):
                    on_abandon()
            raise
        worker.join()
        raise
    worker.join()
    if failure:
        raise failure[0]
    return outcome[0]
