"""``dsh_llm.cli.interrupt.run_abortable``: work on a worker thread, Ctrl-C in the
calling thread aborts it through the signal."""

from __future__ import annotations

import _thread
import signal
import threading
import time

import pytest

from dsh_llm.cli.interrupt import run_abortable
from dsh_llm.signal import AbortController


def test_returns_what_the_work_returned_from_another_thread():
    caller = threading.get_ident()
    controller = AbortController()

    result = run_abortable(lambda: threading.get_ident(), controller)

    assert result != caller
    assert not controller.signal.aborted


def test_raises_what_the_work_raised_unchanged():
    error = ValueError("boom")

    def work() -> None:
        raise error

    with pytest.raises(ValueError, match="boom") as caught:
        run_abortable(work, AbortController())
    assert caught.value is error


@pytest.fixture
def python_sigint_handler():
    # interrupt_main() does nothing while SIGINT is ignored (a test runner started
    # in the background); install Python's own handler for the test.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.mark.usefixtures("python_sigint_handler")
def test_an_interrupt_aborts_the_signal_waits_for_the_work_then_reraises():
    controller = AbortController()
    finished = threading.Event()

    def work() -> str:
        # Interrupt the calling (main) thread as Ctrl-C would, once it waits for
        # this work, then wait for the abort that the interrupt must cause.
        time.sleep(0.1)
        _thread.interrupt_main()
        aborted = controller.signal.wait(10)
        finished.set()
        return "aborted" if aborted else "not aborted"

    with pytest.raises(KeyboardInterrupt):
        run_abortable(work, controller)
    assert controller.signal.aborted
    assert finished.is_set()


@pytest.mark.usefixtures("python_sigint_handler")
def test_work_that_ignores_the_abort_is_abandoned_after_the_grace():
    controller = AbortController()
    release = threading.Event()
    abandoned: list[bool] = []

    def work() -> None:
        time.sleep(0.1)
        _thread.interrupt_main()
        release.wait(10)  # ignores controller.signal

    with pytest.raises(KeyboardInterrupt):
        run_abortable(
            work, controller, grace_s=0.2, on_abandon=lambda: abandoned.append(True)
        )
    assert controller.signal.aborted
    assert abandoned == [True]
    release.set()


@pytest.mark.usefixtures("python_sigint_handler")
def test_a_second_interrupt_abandons_at_once_and_a_raising_on_abandon_is_ignored():
    controller = AbortController()
    release = threading.Event()
    abandoned: list[bool] = []

    def on_abandon() -> None:
        abandoned.append(True)
        raise RuntimeError("cannot silence")

    def work() -> None:
        time.sleep(0.1)
        _thread.interrupt_main()
        time.sleep(0.2)
        _thread.interrupt_main()  # the impatient second Ctrl-C
        release.wait(10)

    with pytest.raises(KeyboardInterrupt):
        run_abortable(work, controller, grace_s=30, on_abandon=on_abandon)
    assert abandoned == [True]
    release.set()
