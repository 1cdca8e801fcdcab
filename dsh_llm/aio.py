"""``astream()``: the async bridge over the synchronous streaming core.

An adapter's ``stream(options)`` is a plain generator over a blocking HTTP
response; ``astream(source, options)`` gives asyncio code an async iterator over
the same chunks, driven on a thread pool. This module owns the worker, the
hand-over queue and the shared executor. Contracts callers may rely on
(docs/aio.md has the details):

- ``source`` is anything with a ``stream(options)`` method: an ``LlmAdapter``,
  an ``LlmRuntime`` (failures arrive as a terminal ``Finish``) or another object
  shaped like them (``StreamSource``).
- Nothing runs before the first ``__anext__``; then one worker thread calls,
  iterates and closes the source's iterator (never two threads).
- Chunks are handed over in batches (at most ``batch_size`` chunks, at most
  ``queue_size`` batches buffered: back-pressure), with one loop wake-up per
  batch; a chunk waits about ``HANDOVER_WINDOW_S`` at most.
- What ``stream()`` raises is raised from ``__anext__`` unchanged, after the
  chunks that came before it.
- Leaving early (``aclose()``, cancellation, garbage collection) aborts the
  request through its signal and closes the generator on its thread; once the
  finish is queued, only after ``FINISHED_GRACE_S``.
- The iterator belongs to the event loop that first awaited it.
- The shared executor has ``SHARED_EXECUTOR_MAX_WORKERS`` threads; streams still
  running at interpreter exit are aborted.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import concurrent.futures.thread  # registers its exit hook before ours (see below)
import logging
import os
import threading
from collections import deque
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from typing import Any
from typing import Final
from typing import NoReturn
from typing import Protocol

from dsh_llm.protocol import Finish
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import StreamChunk
from dsh_llm.signal import AbortController
from dsh_llm.signal import AbortError
from dsh_llm.signal import AbortSignal
from dsh_llm.sources import close_source

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_QUEUE_SIZE",
    "FINISHED_GRACE_S",
    "HANDOVER_WINDOW_S",
    "SHARED_EXECUTOR_MAX_WORKERS",
    "SHARED_EXECUTOR_THREAD_PREFIX",
    "AsyncChunkStream",
    "StreamSource",
    "astream",
    "shutdown_shared_executor",
]

_log = logging.getLogger("dsh_llm")

DEFAULT_BATCH_SIZE: Final = 256
"""Most chunks handed to the event loop in one batch."""

DEFAULT_QUEUE_SIZE: Final = 8
"""Most batches buffered between the worker and the consumer."""

HANDOVER_WINDOW_S: Final = 0.001
"""Longest a chunk waits for more to join its hand-over while chunks are flowing;
a chunk that follows a quiet moment is handed over at once."""

FINISHED_GRACE_S: Final = 0.1
"""How long a request whose ``Finish`` was already queued may go on after the
consumer leaves (an adapter reads the rest of its body to reuse the connection)
before it is aborted like any other."""

SHARED_EXECUTOR_MAX_WORKERS: Final = 64
"""Threads of the shared executor, hence streams it runs at once."""

SHARED_EXECUTOR_THREAD_PREFIX: Final = "dsh-llm-aio-worker"
"""Name prefix of the shared executor's threads."""

_CONSUMER_LEFT: Final = "the async consumer left the stream"


class StreamSource(Protocol):
    """What ``astream`` drives: ``LlmAdapter``, ``LlmRuntime`` or a look-alike."""

    def stream(self, options: GenerateOptions) -> Iterable[StreamChunk]:
        """Return the chunks of one call (normally a lazy generator)."""
        ...


class _Channel:
    """State shared by one stream's consumer (event loop) and its worker thread.

    The hand-over protocol keeps the per-chunk path free of locks:

    - The worker appends each chunk to its current batch without the lock
      (``list.append`` is atomic under the GIL) and opens the next batch, under
      the lock, only when the current one holds ``batch_size`` chunks; opening
      waits while ``queue_size`` batches are queued (back-pressure).
    - The consumer takes queued batches under the lock and reads its batch by
      index, so it also sees chunks appended after it took the batch. It moves
      to a newer batch only once its own is read to the end, and a newer batch
      exists only when the older one is full, so order is kept.
    - Wake-ups: before sleeping the consumer sets ``wanted`` (with ``waiter``) and
      then looks for data once more; the worker appends and then reads
      ``wanted``. Whichever runs second sees the other's write, so the consumer
      never sleeps on a chunk it could read unawares.
    - ``wanted`` is how many new chunks the worker lets pass before it wakes the
      consumer: 1 when the consumer waits for the next chunk, ``batch_size``
      when chunks were flowing (the consumer then also wakes itself after
      ``HANDOVER_WINDOW_S``). While a burst lasts this makes one loop wake-up per
      batch or window instead of one per chunk; the GIL would otherwise hand the
      event loop every single chunk as soon as the worker signals it.

    - ``ended`` is written by the worker alone, without the lock, before it
      appends the stream's ``Finish``: a consumer that has read the finish (or
      leaves after it was queued) always finds it set.

    Every other field is read and written under ``lock``; ``loop`` is set once
    before the worker starts.
    """

    __slots__ = (
        "abandoned",
        "batch_size",
        "batches",
        "close_error",
        "closed",
        "controller",
        "done",
        "ended",
        "error",
        "lock",
        "loop",
        "producer_waiting",
        "queue_size",
        "space",
        "waiter",
        "wanted",
    )

    def __init__(
        self, controller: AbortController, batch_size: int, queue_size: int
    ) -> None:
        self.controller = controller
        self.batch_size = batch_size
        self.queue_size = queue_size
        self.loop: asyncio.AbstractEventLoop | None = None
        self.lock = threading.Lock()
        # Waited on by the worker while the queue is full; shares ``lock``.
        self.space = threading.Condition(self.lock)
        self.batches: deque[list[StreamChunk]] = deque()
        self.waiter: asyncio.Future[None] | None = None
        # Read by the worker after every chunk: 0 while the consumer is not
        # sleeping, else the chunks to let pass before waking it (1 once stopped).
        self.wanted = 0
        self.producer_waiting = False
        self.closed = False
        self.done = False
        # Written by the worker only, without the lock, just before it queues
        # the stream's finish: the request is complete, so leaving then aborts
        # it only after FINISHED_GRACE_S (the adapter may still be reading the
        # rest of the body to reuse its connection).
        self.ended = False
        self.abandoned = False
        self.error: BaseException | None = None
        self.close_error: BaseException | None = None

    def run(self, source: StreamSource, options: GenerateOptions) -> None:
        """The worker: iterate ``source.stream(options)`` to its end, on this
        thread only. Never raises; every outcome is handed to the consumer."""
        _live_channels.add(self)
        iterator: Iterator[StreamChunk] | None = None
        error: BaseException | None = None
        stopped_early = False
        try:
            current = self._open_batch()
            if current is None:
                return
            iterator = iter(source.stream(options))
            batch_size = self.batch_size
            passed = 0  # chunks appended since the consumer went to sleep
            for chunk in iterator:
                if len(current) >= batch_size:
                    current = self._open_batch()
                    if current is None:
                        stopped_early = True
                        break
                if type(chunk) is Finish:
                    # Before the append: a consumer that reads the finish
                    # must find the stream ended (it reads without the lock).
                    self.ended = True
                current.append(chunk)
                wanted = self.wanted
                if wanted:
                    passed += 1
                    if passed >= wanted:
                        passed = 0
                        if not self._attend():
                            stopped_early = True
                            break
                elif passed:
                    passed = 0
        except BaseException as exc:
            error = exc
        finally:
            close_error = None
            if stopped_early and iterator is not None:
                close_error = _close_iterator(iterator)
            self._finish(error, close_error)
            # Handed over: a reference kept in this frame, which the error's
            # traceback holds, would make a cycle keeping the failed source
            # (and its connection) alive until the cyclic collector runs.
            error = close_error = None

    def _open_batch(self) -> list[StreamChunk] | None:
        """Queue a new empty batch, waiting for room; ``None`` once stopped."""
        with self.lock:
            while len(self.batches) >= self.queue_size and not self.closed:
                self.producer_waiting = True
                self.space.wait()
            if self.closed:
                return None
            batch: list[StreamChunk] = []
            self.batches.append(batch)
            return batch

    def _attend(self) -> bool:
        """Wake a sleeping consumer; ``False`` once the stream is stopped."""
        with self.lock:
            if self.closed:
                return False
            waiter = self.waiter
            self.waiter = None
            self.wanted = 0
        return waiter is None or self._wake(waiter)

    def _wake(self, waiter: asyncio.Future[None]) -> bool:
        loop = self.loop
        assert loop is not None
        try:
            loop.call_soon_threadsafe(_resolve, waiter)
        except RuntimeError:
            # The consumer's loop is closed: nobody will ever read on.
            self.stop(abandoned=True)
            return False
        return True

    def _finish(
        self, error: BaseException | None, close_error: BaseException | None
    ) -> None:
        unreported: BaseException | None = None
        with self.lock:
            self.done = True
            if not self.closed:
                self.error = error
            if close_error is not None:
                if self.abandoned:
                    unreported = close_error
                else:
                    self.close_error = close_error
            waiter = self.waiter
            self.waiter = None
        _live_channels.discard(self)
        if unreported is not None:
            _log_close_error(unreported)
        if waiter is not None:
            self._wake(waiter)

    def stop(self, *, abandoned: bool) -> None:
        """Stop the stream from any thread: drop queued chunks, abort the request
        (when its finish was already queued and the consumer's loop is running,
        after ``FINISHED_GRACE_S``) and release a worker waiting for room.
        Idempotent, except that a later abandoned stop (garbage collection,
        interpreter exit) of a worker still running aborts it at once."""
        with self.lock:
            unreported = None
            if abandoned and not self.abandoned:
                self.abandoned = True
                unreported, self.close_error = self.close_error, None
            first_stop = not self.closed
            running = not self.done
            self.closed = True
            self.wanted = 1
            self.batches.clear()
            if self.producer_waiting:
                self.producer_waiting = False
                self.space.notify()
        if unreported is not None:
            _log_close_error(unreported)
        if not running or not (first_stop or abandoned):
            return
        loop = self.loop
        if (
            first_stop
            and self.ended
            and not abandoned
            and loop is not None
            and _runs(loop)
        ):
            # The request is complete: let it end by itself, but not for long.
            # Should the loop close before the timer fires, the later abandoned
            # stop (garbage collection, interpreter exit) aborts instead.
            loop.call_later(FINISHED_GRACE_S, self._abort_if_running)
        else:
            self.controller.abort(AbortError(_CONSUMER_LEFT))

    def _abort_if_running(self) -> None:
        with self.lock:
            running = not self.done
        if running:
            self.controller.abort(AbortError(_CONSUMER_LEFT))


def _runs(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether ``loop`` is the event loop running in this thread."""
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _close_iterator(iterator: Iterator[StreamChunk]) -> BaseException | None:
    """Close ``iterator``; what closing it raised, returned for the consumer."""
    try:
        close_source(iterator)
    except BaseException as exc:
        return exc
    return None


def _log_close_error(error: BaseException) -> None:
    _log.error("dsh_llm: closing an abandoned astream() source failed", exc_info=error)


class AsyncChunkStream:
    """The async iterator ``astream`` returns (see the module docstring).

    Use it with ``async for``; wrap it in ``contextlib.aclosing`` to close it
    deterministically when leaving the loop early.
    """

    __slots__ = (
        "__weakref__",
        "_batch",
        "_channel",
        "_executor",
        "_finished",
        "_options",
        "_pos",
        "_source",
        "_worker",
    )

    def __init__(
        self,
        source: StreamSource,
        options: GenerateOptions,
        *,
        executor: concurrent.futures.Executor | None,
        batch_size: int,
        queue_size: int,
    ) -> None:
        controller = AbortController()
        self._channel = _Channel(controller, batch_size, queue_size)
        self._source = source
        self._options = options.evolve(
            signal=AbortSignal.any(options.signal, controller.signal)
        )
        self._executor = executor
        self._worker: concurrent.futures.Future[None] | None = None
        # The batch being read and the index of its next chunk. The worker may
        # still be appending to it (see ``_Channel``).
        self._batch: list[StreamChunk] = []
        self._pos = 0
        self._finished = False

    @property
    def signal(self) -> AbortSignal:
        """The signal the source receives: aborts when the caller's signal does or
        when this iterator is left early (``FINISHED_GRACE_S`` later when the
        stream's finish was already queued)."""
        signal = self._options.signal
        assert signal is not None
        return signal

    def __aiter__(self) -> AsyncChunkStream:
        return self

    async def __anext__(self) -> StreamChunk:
        batch = self._batch
        pos = self._pos
        if pos < len(batch):
            self._pos = pos + 1
            return batch[pos]
        return await self._refill()

    async def _refill(self) -> StreamChunk:
        channel = self._channel
        loop = asyncio.get_running_loop()
        # The first wait after a chunk was read waits for a batch or a window
        # (see ``_Channel``); the stream's first chunk and any chunk after a
        # quiet window are handed over as soon as they exist.
        flowing = True
        if self._worker is None and not self._finished:
            self._start(loop)
            flowing = False
        elif channel.loop is not loop and not self._finished:
            raise RuntimeError(
                "an astream() iterator is bound to the event loop that started it"
            )
        while True:
            if self._finished:
                raise StopAsyncIteration
            if self._pos < len(self._batch):
                return self._next_in_batch()
            with channel.lock:
                waiter = self._take_or_wait(loop, channel.batch_size if flowing else 1)
            if waiter is None:
                continue
            window = (
                loop.call_later(HANDOVER_WINDOW_S, _resolve, waiter)
                if flowing
                else None
            )
            flowing = False
            try:
                await waiter
            except BaseException:
                # Cancelled while waiting: the request is abandoned.
                self._unwait(waiter)
                self._leave(abandoned=False)
                raise
            finally:
                if window is not None:
                    window.cancel()
            self._unwait(waiter)

    def _unwait(self, waiter: asyncio.Future[None]) -> None:
        """Withdraw ``waiter`` if the worker did not take it (the window ended or
        the task was cancelled)."""
        channel = self._channel
        with channel.lock:
            if channel.waiter is waiter:
                channel.waiter = None
                if not channel.closed:
                    channel.wanted = 0

    def _next_in_batch(self) -> StreamChunk:
        pos = self._pos
        self._pos = pos + 1
        return self._batch[pos]

    def _take_or_wait(
        self, loop: asyncio.AbstractEventLoop, wake_after: int
    ) -> asyncio.Future[None] | None:
        """Under the lock, with the current batch read to the end: move to the next
        batch, end the stream, or return a future to sleep on until ``wake_after``
        more chunks exist (``None``: look again)."""
        channel = self._channel
        # Each check reads the shared state before re-reading the batch length:
        # the worker fills a batch before it queues the next one or finishes.
        if channel.batches:
            if self._pos < len(self._batch):
                return None
            self._batch = channel.batches.popleft()
            self._pos = 0
            if channel.producer_waiting:
                channel.producer_waiting = False
                channel.space.notify()
            return None
        if channel.done or channel.closed:
            if self._pos < len(self._batch):
                return None
            self._end(channel)
        if channel.waiter is not None:
            raise RuntimeError(
                "astream(): __anext__ is already awaited by another task"
            )
        waiter: asyncio.Future[None] = loop.create_future()
        channel.waiter = waiter
        channel.wanted = wake_after
        # Look once more after publishing ``wanted`` (see ``_Channel``).
        if self._pos < len(self._batch) or channel.batches:
            channel.waiter = None
            channel.wanted = 0
            return None
        return waiter

    def _end(self, channel: _Channel) -> NoReturn:
        self._finished = True
        self._batch = []
        self._pos = 0
        error, channel.error = channel.error, None
        if error is None:
            raise StopAsyncIteration
        if isinstance(error, StopAsyncIteration):
            # Raised as is it would end ``async for`` silently (PEP 479 turns
            # StopIteration into RuntimeError for the same reason).
            raise RuntimeError("astream() source raised StopAsyncIteration")
        try:
            raise error
        finally:
            error = None  # no frame-to-error cycle (see _Channel.run)

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        channel = self._channel
        channel.loop = loop
        try:
            if self._executor is None:
                self._worker = _submit_shared(channel.run, self._source, self._options)
            else:
                self._worker = self._executor.submit(
                    channel.run, self._source, self._options
                )
        except BaseException:
            self._finished = True
            channel.stop(abandoned=False)
            raise

    def _leave(self, *, abandoned: bool) -> None:
        self._finished = True
        self._batch = []
        self._pos = 0
        self._channel.stop(abandoned=abandoned)
        worker = self._worker
        if worker is not None and worker.cancel():
            # Never started: the worker cannot report, so finish here.
            self._channel._finish(None, None)

    async def aclose(self) -> None:
        """Stop the stream, abort its request (``FINISHED_GRACE_S`` later when
        its finish was already queued) and wait until the worker has closed the
        source's iterator. Idempotent.

        Raises:
            BaseException: what closing the source's iterator raised, if anything.
        """
        self._leave(abandoned=False)
        worker = self._worker
        if worker is not None and not worker.done():
            await asyncio.wrap_future(worker)
        channel = self._channel
        with channel.lock:
            close_error = channel.close_error
            channel.close_error = None
        if close_error is not None:
            try:
                raise close_error
            finally:
                close_error = None  # no frame-to-error cycle (see _Channel.run)

    def __del__(self) -> None:
        # getattr: __del__ also runs for an instance whose __init__ failed.
        if getattr(self, "_worker", None) is not None:
            self._channel.stop(abandoned=True)

    def __repr__(self) -> str:
        if self._worker is None:
            state = "finished" if self._finished else "not started"
        elif self._finished or self._channel.done:
            state = "finished"
        else:
            state = "running"
        return f"<AsyncChunkStream {state} source={type(self._source).__name__}>"


def astream(
    source: StreamSource,
    options: GenerateOptions,
    *,
    executor: concurrent.futures.Executor | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    queue_size: int = DEFAULT_QUEUE_SIZE,
) -> AsyncChunkStream:
    """Stream ``source.stream(options)`` as an async iterator.

    Example::

        async with contextlib.aclosing(astream(adapter, options)) as chunks:
            async for chunk in chunks:
                ...

    Args:
        source: An ``LlmAdapter``, an ``LlmRuntime`` or any object with a
            ``stream(options)`` method returning an iterable of chunks.
        options: The request. The source receives a copy whose signal also aborts
            when the iterator is left early (``FINISHED_GRACE_S`` later when the
            stream's finish was already queued).
        executor: A thread pool to run the worker on (a ``ProcessPoolExecutor``
            cannot run it). ``None`` uses the shared executor.
        batch_size: Most chunks per batch handed to the event loop.
        queue_size: Most batches buffered before the worker waits.

    Returns:
        An ``AsyncChunkStream``; nothing runs before its first ``__anext__``.

    Raises:
        TypeError: for a source without ``stream``, options that are not
            ``GenerateOptions`` or an executor that is not a thread pool.
        ValueError: for a ``batch_size`` or ``queue_size`` that is not a positive
            int.
    """
    if not callable(getattr(source, "stream", None)):
        raise TypeError(
            "astream() needs an LlmAdapter, an LlmRuntime or another object with a "
            f"stream(options) method, got {type(source).__name__}"
        )
    if not isinstance(options, GenerateOptions):
        raise TypeError(
            f"astream() options must be GenerateOptions, got {type(options).__name__}"
        )
    if executor is not None and (
        not isinstance(executor, concurrent.futures.Executor)
        or isinstance(executor, concurrent.futures.ProcessPoolExecutor)
    ):
        raise TypeError(
            "astream() executor must be a thread pool executor, got "
            f"{type(executor).__name__}"
        )
    for name, value in (("batch_size", batch_size), ("queue_size", queue_size)):
        if type(value) is not int or value <= 0:
            raise ValueError(f"astream() {name} must be a positive int, got {value!r}")
    return AsyncChunkStream(
        source,
        options,
        executor=executor,
        batch_size=batch_size,
        queue_size=queue_size,
    )


# --- the shared executor ---------------------------------------------------------

_shared_lock = threading.Lock()
_shared_executor: concurrent.futures.ThreadPoolExecutor | None = None
_live_channels: set[_Channel] = set()


def _submit_shared(
    fn: Callable[..., None], *args: Any
) -> concurrent.futures.Future[None]:
    global _shared_executor
    with _shared_lock:
        if _shared_executor is None:
            _shared_executor = concurrent.futures.ThreadPoolExecutor(
                max_workers=SHARED_EXECUTOR_MAX_WORKERS,
                thread_name_prefix=SHARED_EXECUTOR_THREAD_PREFIX,
            )
        return _shared_executor.submit(fn, *args)


def shutdown_shared_executor(*, wait: bool = True) -> None:
    """Shut the shared executor down and forget it; the next ``astream()`` without
    an ``executor`` creates a new one. Does nothing when none exists.

    Running streams are not aborted: with ``wait=True`` this blocks until they
    end, so close them first, and never wait from inside the event loop that
    consumes them.

    Args:
        wait: Join the executor's threads before returning.
    """
    global _shared_executor
    with _shared_lock:
        executor, _shared_executor = _shared_executor, None
    if executor is not None:
        executor.shutdown(wait=wait)


def _abort_live_streams() -> None:
    for channel in list(_live_channels):
        channel.stop(abandoned=True)


def _reset_after_fork() -> None:
    global _shared_executor, _shared_lock
    # The parent's threads do not exist in the child.
    _shared_executor = None
    _shared_lock = threading.Lock()
    _live_channels.clear()


# At interpreter exit ``concurrent.futures`` joins every pool thread from a
# ``threading`` exit hook; hooks run last-registered first, so ours, registered
# after that module was imported, aborts abandoned streams before the join.
_register_thread_exit: Callable[[Callable[[], None]], None] | None = getattr(
    threading, "_register_atexit", None
)
if _register_thread_exit is not None:
    _register_thread_exit(_abort_live_streams)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)
