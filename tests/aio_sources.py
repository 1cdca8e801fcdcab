"""What the async-bridge tests share: in-memory sources that record which thread
ran them and how they ended, and small helpers."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

from dsh_llm import AbortSignal
from dsh_llm import BlockEnd
from dsh_llm import BlockStart
from dsh_llm import ErrorCode
from dsh_llm import Finish
from dsh_llm import FinishReason
from dsh_llm import GenerateOptions
from dsh_llm import LlmAdapter
from dsh_llm import LlmError
from dsh_llm import StreamChunk
from dsh_llm import TextBlock
from dsh_llm import TextDelta
from dsh_llm import TokenUsage
from dsh_llm import UsageChunk
from dsh_llm import create_user_message
from dsh_llm.aio import SHARED_EXECUTOR_THREAD_PREFIX
from dsh_llm.aio import AsyncChunkStream

OPTIONS = GenerateOptions(
    provider="mem", model="m", messages=[create_user_message("hi")]
)


def text_stream(deltas: int) -> list[StreamChunk]:
    """A strict-valid stream: one text block of ``deltas`` deltas, usage, finish."""
    pieces = [f"t{i} " for i in range(deltas)]
    return [
        BlockStart(index=0, block_type="text"),
        *(TextDelta(index=0, text=piece) for piece in pieces),
        BlockEnd(index=0, block=TextBlock(text="".join(pieces))),
        UsageChunk(usage=TokenUsage(input_tokens=1, output_tokens=deltas)),
        Finish(reason=FinishReason(kind="stop")),
    ]


class Recorder:
    """What a source's generator saw: threads, chunks produced, how it ended."""

    def __init__(self) -> None:
        self.threads: list[int] = []
        self.thread_names: list[str] = []
        self.produced = 0
        self.calls = 0
        self.signals: list[AbortSignal | None] = []
        self.closed = threading.Event()
        self.closed_at: float | None = None
        self.exit: BaseException | None = None

    def step(self) -> None:
        self.threads.append(threading.get_ident())
        self.thread_names.append(threading.current_thread().name)

    def close(self, exit_exc: BaseException | None = None) -> None:
        self.step()
        self.exit = exit_exc
        self.closed_at = time.perf_counter()
        self.closed.set()


class ScriptedAdapter(LlmAdapter):
    """Yields a script of chunks; optional delay per chunk; optional final error."""

    def __init__(
        self,
        chunks: list[StreamChunk],
        *,
        delay: float = 0.0,
        error: BaseException | None = None,
        on_close: BaseException | None = None,
    ) -> None:
        self.chunks = chunks
        self.delay = delay
        self.error = error
        self.on_close = on_close
        self.recorder = Recorder()

    def stream(self, options: GenerateOptions) -> Iterator[StreamChunk]:
        rec = self.recorder
        rec.calls += 1
        rec.signals.append(options.signal)
        exit_exc: BaseException | None = None
        try:
            rec.step()
            for chunk in self.chunks:
                if self.delay:
                    time.sleep(self.delay)
                rec.produced += 1
                yield chunk
                rec.step()
            if self.error is not None:
                raise self.error
        except GeneratorExit as exc:
            exit_exc = exc
            raise
        finally:
            rec.close(exit_exc)
            if self.on_close is not None and exit_exc is not None:
                raise self.on_close


class EndlessAdapter(LlmAdapter):
    """Yields text deltas forever (only a consumer leaving ends it)."""

    def __init__(self) -> None:
        self.recorder = Recorder()

    def stream(self, options: GenerateOptions) -> Iterator[StreamChunk]:
        rec = self.recorder
        rec.calls += 1
        exit_exc: BaseException | None = None
        try:
            rec.step()
            yield BlockStart(index=0, block_type="text")
            while True:
                rec.produced += 1
                yield TextDelta(index=0, text="x")
                rec.step()
        except GeneratorExit as exc:
            exit_exc = exc
            raise
        finally:
            rec.close(exit_exc)


class BlockingAdapter(LlmAdapter):
    """Yields one chunk, then blocks like a stalled HTTP read until its signal
    aborts, then raises ``ABORTED`` as a network adapter does."""

    def __init__(self) -> None:
        self.recorder = Recorder()
        self.aborted_at: float | None = None
        self.blocked = threading.Event()

    def stream(self, options: GenerateOptions) -> Iterator[StreamChunk]:
        rec = self.recorder
        rec.calls += 1
        signal = options.signal
        assert signal is not None

        def on_abort() -> None:
            self.aborted_at = time.perf_counter()

        signal.add_listener(on_abort)
        try:
            rec.step()
            yield BlockStart(index=0, block_type="text")
            self.blocked.set()
            if not signal.wait(10.0):
                raise AssertionError("the signal never aborted")
            raise LlmError("mem request aborted by caller", ErrorCode.ABORTED)
        finally:
            rec.close()


async def collect(stream: AsyncChunkStream) -> list[StreamChunk]:
    return [chunk async for chunk in stream]


def worker_threads() -> list[threading.Thread]:
    return [
        t
        for t in threading.enumerate()
        if t.name.startswith(SHARED_EXECUTOR_THREAD_PREFIX)
    ]
