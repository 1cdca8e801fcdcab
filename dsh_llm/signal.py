"""Thread-safe cancellation: ``AbortController`` and ``AbortSignal``.

This module owns the one cancellation primitive the library uses, shaped after the
web platform's ``AbortController`` so code ported from the TypeScript harness reads
the same. Contracts callers may rely on:

- ``abort()`` may be called from any thread, any number of times; only the first
  call counts, and its reason is kept.
- Listeners run exactly once, in the aborting thread, after the signal is marked
  aborted. A listener added to an already aborted signal runs at once, in the
  adding thread. A listener that raises is logged and the others still run.
- ``wait(timeout)`` is a cancellable sleep: it returns ``True`` as soon as the
  signal aborts (from any thread), or ``False`` when the timeout passes first.
- ``AbortSignal.any(...)`` follows its inputs without keeping itself alive through
  them: a derived signal that nobody references any more is unhooked from its
  inputs, so a long-lived parent signal does not collect listeners.
"""

from __future__ import annotations

import itertools
import logging
import threading
import weakref
from collections.abc import Callable
from typing import Any

__all__ = ["AbortController", "AbortError", "AbortSignal"]

_log = logging.getLogger("dsh_llm")

Listener = Callable[[], object]
"""What ``AbortSignal.add_listener`` runs once the signal aborts."""


class AbortError(Exception):
    """The default abort reason, and what ``throw_if_aborted`` raises for a
    reason that is not itself an exception."""

    def __init__(self, message: str = "This operation was aborted") -> None:
        super().__init__(message)


class AbortSignal:
    """Read side of an ``AbortController``: tells whether and why work was aborted.

    Signals are created by ``AbortController`` (or ``AbortSignal.any`` /
    ``AbortSignal.aborted_with``); the constructor is not part of the public API.
    """

    __slots__ = ("__weakref__", "_event", "_keys", "_listeners", "_lock", "_reason")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._keys = itertools.count()
        self._event = threading.Event()
        self._listeners: dict[int, Listener] = {}
        self._reason: Any = None

    @property
    def aborted(self) -> bool:
        """Whether ``abort()`` has been called."""
        return self._event.is_set()

    @property
    def reason(self) -> Any:
        """The value passed to the first ``abort()`` (an ``AbortError`` when none was
        given), or ``None`` while the signal is not aborted."""
        return self._reason

    def add_listener(self, listener: Listener) -> Callable[[], None]:
        """Run ``listener()`` once when the signal aborts.

        Returns a function that removes the listener; calling it after the listener
        ran, or twice, does nothing. If the signal is already aborted the listener
        runs immediately, in this thread, and the returned remover does nothing.
        """
        with self._lock:
            if not self._event.is_set():
                key = next(self._keys)
                self._listeners[key] = listener

                def remove() -> None:
                    with self._lock:
                        self._listeners.pop(key, None)

                return remove
        _run_listener(listener)
        return _noop

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the signal aborts or ``timeout`` seconds pass.

        Returns ``True`` if the signal is aborted, ``False`` on timeout. ``None``
        waits without a limit.
        """
        return self._event.wait(timeout)

    def throw_if_aborted(self) -> None:
        """Raise the abort reason if the signal is aborted.

        A reason that is an exception is raised as is; any other reason is wrapped
        in ``AbortError``.
        """
        if not self._event.is_set():
            return
        reason = self._reason
        if isinstance(reason, BaseException):
            raise reason
        raise AbortError(str(reason))

    def _abort(self, reason: Any) -> bool:
        with self._lock:
            if self._event.is_set():
                return False
            self._reason = AbortError() if reason is None else reason
            self._event.set()
            listeners = list(self._listeners.values())
            self._listeners.clear()
        for listener in listeners:
            _run_listener(listener)
        return True

    def __repr__(self) -> str:
        if self.aborted:
            return f"<AbortSignal aborted reason={self._reason!r}>"
        return "<AbortSignal active>"

    @classmethod
    def aborted_with(cls, reason: Any = None) -> AbortSignal:
        """Return a signal that is already aborted with ``reason``."""
        signal = cls()
        signal._abort(reason)
        return signal

    @classmethod
    def any(cls, *signals: AbortSignal | None) -> AbortSignal:
        """Return a signal that aborts when any of ``signals`` aborts, with its reason.

        ``None`` entries are skipped, so optional signals can be passed directly. If
        an input is already aborted, the result is returned already aborted with the
        first such input's reason.
        """
        inputs = [s for s in signals if s is not None]
        for source in inputs:
            if source.aborted:
                return cls.aborted_with(source.reason)
        derived = cls()
        ref = weakref.ref(derived)
        removers: list[Callable[[], None]] = []

        def unhook() -> None:
            for remove in removers:
                remove()

        for source in inputs:

            def forward(source: AbortSignal = source) -> None:
                target = ref()
                if target is not None and target._abort(source.reason):
                    unhook()

            removers.append(source.add_listener(forward))
        if derived.aborted:
            # An input aborted while the later inputs were being hooked; the
            # forward that fired could not unhook listeners added after it.
            unhook()
        # A derived signal nobody holds can never be observed; drop its hooks so a
        # long-lived parent does not accumulate listeners.
        weakref.finalize(derived, unhook)
        return derived


class AbortController:
    """Owner side of cancellation: holds a ``signal`` and aborts it.

    Example::

        controller = AbortController()
        threading.Timer(5.0, controller.abort).start()
        for chunk in adapter.stream(options.evolve(signal=controller.signal)):
            ...
    """

    __slots__ = ("_signal",)

    def __init__(self) -> None:
        self._signal = AbortSignal()

    @property
    def signal(self) -> AbortSignal:
        """The signal this controller aborts."""
        return self._signal

    def abort(self, reason: Any = None) -> None:
        """Abort the signal with ``reason`` (default: an ``AbortError``).

        Thread-safe and idempotent: only the first call changes anything.
        """
        self._signal._abort(reason)

    def __repr__(self) -> str:
        return f"<AbortController signal={self._signal!r}>"


def _run_listener(listener: Listener) -> None:
    try:
        listener()
    except Exception:
        _log.exception("dsh_llm: an abort listener failed")


def _noop() -> None:
    return None
