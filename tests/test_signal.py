"""dsh_llm.signal: thread-safe cancellation."""

from __future__ import annotations

import gc
import logging
import threading
import time
import weakref
from collections.abc import Callable

import pytest

from dsh_llm.signal import AbortController
from dsh_llm.signal import AbortError
from dsh_llm.signal import AbortSignal

# Generous: the waits below must end long before this; hitting it means a bug.
LONG_TIMEOUT_S = 30.0


def _listener_count(signal: AbortSignal) -> int:
    # The listener table is private; the test needs it to prove unhooking.
    return len(signal._listeners)


def test_new_signal_is_not_aborted() -> None:
    controller = AbortController()

    assert not controller.signal.aborted
    assert controller.signal.reason is None
    assert controller.signal.wait(0) is False
    controller.signal.throw_if_aborted()


def test_abort_wakes_a_waiter_in_another_thread_at_once() -> None:
    controller = AbortController()
    waiting = threading.Event()
    results: list[tuple[bool, float]] = []

    def waiter() -> None:
        waiting.set()
        started = time.monotonic()
        woke = controller.signal.wait(LONG_TIMEOUT_S)
        results.append((woke, time.monotonic() - started))

    thread = threading.Thread(target=waiter)
    thread.start()
    assert waiting.wait(LONG_TIMEOUT_S)
    controller.abort("stop")
    thread.join(LONG_TIMEOUT_S)

    assert not thread.is_alive()
    [(woke, elapsed)] = results
    assert woke is True
    # Returned because of the abort, not the timeout.
    assert elapsed < LONG_TIMEOUT_S / 2
    assert controller.signal.reason == "stop"


def test_wait_returns_false_when_the_timeout_passes() -> None:
    assert AbortController().signal.wait(0.01) is False


def test_wait_on_an_aborted_signal_returns_true_immediately() -> None:
    controller = AbortController()
    controller.abort()

    assert controller.signal.wait(LONG_TIMEOUT_S) is True
    assert controller.signal.wait(None) is True


def test_default_reason_is_an_abort_error() -> None:
    controller = AbortController()
    controller.abort()

    assert controller.signal.aborted
    assert isinstance(controller.signal.reason, AbortError)
    assert str(controller.signal.reason) == "This operation was aborted"


def test_custom_reason_is_kept_and_later_aborts_are_ignored() -> None:
    controller = AbortController()
    reason = TimeoutError("deadline")
    controller.abort(reason)
    controller.abort("second")

    assert controller.signal.reason is reason


def test_throw_if_aborted_raises_an_exception_reason_as_is() -> None:
    controller = AbortController()
    reason = TimeoutError("deadline")
    controller.abort(reason)

    with pytest.raises(TimeoutError) as info:
        controller.signal.throw_if_aborted()
    assert info.value is reason


def test_throw_if_aborted_wraps_a_plain_reason_in_abort_error() -> None:
    controller = AbortController()
    controller.abort("user pressed stop")

    with pytest.raises(AbortError, match="user pressed stop"):
        controller.signal.throw_if_aborted()


def test_listeners_run_once_in_order_after_the_signal_is_marked() -> None:
    controller = AbortController()
    calls: list[tuple[str, bool]] = []
    controller.signal.add_listener(
        lambda: calls.append(("a", controller.signal.aborted))
    )
    controller.signal.add_listener(
        lambda: calls.append(("b", controller.signal.aborted))
    )

    controller.abort()
    controller.abort()

    assert calls == [("a", True), ("b", True)]


def test_listener_added_after_abort_runs_immediately_in_the_adding_thread() -> None:
    controller = AbortController()
    controller.abort()
    threads: list[threading.Thread] = []

    remove = controller.signal.add_listener(
        lambda: threads.append(threading.current_thread())
    )

    assert threads == [threading.current_thread()]
    remove()
    remove()


def test_remover_stops_a_listener_and_is_idempotent() -> None:
    controller = AbortController()
    calls: list[str] = []
    remove = controller.signal.add_listener(lambda: calls.append("removed"))
    controller.signal.add_listener(lambda: calls.append("kept"))

    remove()
    remove()
    controller.abort()

    assert calls == ["kept"]
    assert _listener_count(controller.signal) == 0


def test_raising_listener_is_logged_and_the_others_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    controller = AbortController()
    calls: list[str] = []

    def explode() -> None:
        raise RuntimeError("listener broke")

    controller.signal.add_listener(explode)
    controller.signal.add_listener(lambda: calls.append("after"))
    with caplog.at_level(logging.ERROR, logger="dsh_llm"):
        controller.abort()

    assert calls == ["after"]
    assert controller.signal.aborted
    [record] = [r for r in caplog.records if r.name == "dsh_llm"]
    assert "abort listener failed" in record.getMessage()
    assert record.exc_info is not None
    assert "listener broke" in str(record.exc_info[1])


def test_concurrent_aborts_keep_the_first_reason_and_run_listeners_once() -> None:
    controller = AbortController()
    calls: list[int] = []
    lock = threading.Lock()

    def record() -> None:
        with lock:
            calls.append(1)

    controller.signal.add_listener(record)
    barrier = threading.Barrier(16)
    reasons: list[object] = []

    def abort(n: int) -> None:
        barrier.wait(LONG_TIMEOUT_S)
        controller.abort(n)
        reasons.append(controller.signal.reason)

    threads = [threading.Thread(target=abort, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(LONG_TIMEOUT_S)

    assert not any(thread.is_alive() for thread in threads)
    assert calls == [1]
    winner = controller.signal.reason
    assert winner in range(16)
    # Every thread saw the same, first reason after its own abort returned.
    assert reasons == [winner] * 16


def test_concurrent_add_listener_and_abort_never_lose_or_repeat_a_listener() -> None:
    for _ in range(20):
        controller = AbortController()
        calls: list[int] = []
        lock = threading.Lock()
        start = threading.Barrier(2)

        def add_many(
            signal: AbortSignal = controller.signal,
            calls: list[int] = calls,
            lock: threading.Lock = lock,
            start: threading.Barrier = start,
        ) -> None:
            start.wait(LONG_TIMEOUT_S)
            for n in range(200):

                def listener(n: int = n) -> None:
                    with lock:
                        calls.append(n)

                signal.add_listener(listener)

        adder = threading.Thread(target=add_many)
        adder.start()
        start.wait(LONG_TIMEOUT_S)
        controller.abort()
        adder.join(LONG_TIMEOUT_S)

        assert sorted(calls) == list(range(200))


def test_aborted_with_returns_an_aborted_signal() -> None:
    signal = AbortSignal.aborted_with("gone")

    assert signal.aborted
    assert signal.reason == "gone"
    assert isinstance(AbortSignal.aborted_with().reason, AbortError)


def test_repr_shows_state() -> None:
    controller = AbortController()

    assert repr(controller.signal) == "<AbortSignal active>"
    controller.abort("x")
    assert repr(controller.signal) == "<AbortSignal aborted reason='x'>"
    assert "aborted" in repr(controller)


# --- AbortSignal.any ---------------------------------------------------------------


def test_any_aborts_with_the_first_input_that_aborts() -> None:
    first, second = AbortController(), AbortController()
    combined = AbortSignal.any(first.signal, second.signal)

    assert not combined.aborted
    second.abort("second")
    first.abort("first")

    assert combined.reason == "second"
    assert combined.aborted


def test_any_wakes_a_waiter_on_the_derived_signal() -> None:
    parent = AbortController()
    combined = AbortSignal.any(parent.signal)
    results: list[bool] = []
    thread = threading.Thread(
        target=lambda: results.append(combined.wait(LONG_TIMEOUT_S))
    )
    thread.start()

    parent.abort()
    thread.join(LONG_TIMEOUT_S)

    assert results == [True]


def test_any_with_an_already_aborted_input_is_aborted_with_its_reason() -> None:
    live, dead = AbortController(), AbortController()
    dead.abort("already")

    combined = AbortSignal.any(live.signal, dead.signal)

    assert combined.aborted
    assert combined.reason == "already"
    assert _listener_count(live.signal) == 0


def test_any_skips_none_entries() -> None:
    parent = AbortController()

    combined = AbortSignal.any(None, parent.signal, None)
    assert not combined.aborted
    parent.abort("x")
    assert combined.reason == "x"
    assert not AbortSignal.any().aborted
    assert not AbortSignal.any(None).aborted


def test_any_unhooks_from_every_input_once_it_aborts() -> None:
    first, second = AbortController(), AbortController()
    AbortSignal.any(first.signal, second.signal)
    kept = AbortSignal.any(first.signal, second.signal)

    assert _listener_count(second.signal) >= 1
    first.abort()

    assert kept.aborted
    assert _listener_count(second.signal) == 0


def test_dropped_derived_signal_unhooks_from_a_long_lived_parent() -> None:
    parent = AbortController()
    derived = AbortSignal.any(parent.signal)
    alive = weakref.ref(derived)
    assert _listener_count(parent.signal) == 1

    del derived
    gc.collect()

    assert alive() is None
    assert _listener_count(parent.signal) == 0


def test_many_dropped_derived_signals_do_not_accumulate_on_the_parent() -> None:
    parent = AbortController()
    for _ in range(1000):
        AbortSignal.any(parent.signal, None).wait(0)
    gc.collect()

    assert _listener_count(parent.signal) == 0
    parent.abort()
    assert parent.signal.aborted


def test_input_aborting_while_any_hooks_later_inputs_leaves_no_listener() -> None:
    first = AbortController()
    later = AbortController()

    class AbortsWhenHooked(AbortSignal):
        def add_listener(self, listener: Callable[[], object]) -> Callable[[], None]:
            remove = super().add_listener(listener)
            first.abort("during hooking")
            return remove

    hooked = AbortsWhenHooked()
    combined = AbortSignal.any(hooked, first.signal, later.signal)

    assert combined.aborted
    assert combined.reason == "during hooking"
    assert _listener_count(later.signal) == 0
