"""dsh_llm.runtime under threads: streams running while others register,
replace and dispose.

The interpreter's switch interval is lowered for these tests so threads
interleave every few bytecodes; a registry that publishes a change in two steps
(remove, then insert) is then caught within a few hundred commits.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from collections.abc import Iterator
from typing import Any

import pytest

from dsh_llm.adapter import LlmAdapter
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import BlockEnd
from dsh_llm.protocol import BlockStart
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import LlmCallConfig
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import TextDelta
from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol import UsageChunk
from dsh_llm.runtime import LlmRuntime

STREAMERS = 8


def script(text: str) -> tuple[StreamChunk, ...]:
    return (
        BlockStart(index=0, block_type="text"),
        TextDelta(index=0, text=text),
        BlockEnd(index=0, block=TextBlock(text=text)),
        UsageChunk(usage=TokenUsage.unknown()),
        Finish(reason=FinishReason.STOP),
    )


class EchoRoute(LlmAdapter):
    """Answers with the route it was called for, so a reply proves the routing."""

    def stream(self, options: GenerateOptions) -> Iterator[StreamChunk]:
        yield from script(options.provider)


@pytest.fixture(autouse=True)
def fast_switching() -> Iterator[None]:
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(previous)


def run_threads(*targets: Callable[[], None]) -> list[BaseException]:
    """Run ``targets`` concurrently; return what they raised."""
    failures: list[BaseException] = []
    lock = threading.Lock()

    def guarded(target: Callable[[], None]) -> None:
        try:
            target()
        except BaseException as exc:
            with lock:
                failures.append(exc)

    threads = [threading.Thread(target=guarded, args=(t,)) for t in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
        assert not thread.is_alive()
    return failures


def options(provider: str) -> GenerateOptions:
    return GenerateOptions(provider=provider, model="m", messages=())


def test_streams_never_see_a_missing_route_while_routes_are_swapped() -> None:
    runtime = LlmRuntime()
    adapter = EchoRoute()
    handle = runtime.register_adapter(["p1", "p2"], adapter)
    done = threading.Event()
    commits = 0
    problems: list[str] = []
    states = ({"p1", "p2", "p3"}, {"p1", "p2"})

    def mutate() -> None:
        nonlocal commits
        try:
            for i in range(600):
                # Same routes re-ordered, one route added and removed, and an
                # unrelated registration coming and going: every commit keeps
                # p1 and p2 served.
                handle.replace(["p1", "p2", "p3"] if i % 2 else ["p2", "p1"])
                other = runtime.register_adapter([f"q{i}"], EchoRoute())
                other.dispose()
                commits += 3
        finally:
            done.set()

    def stream() -> None:
        turn = 0
        while not done.is_set():
            provider = "p1" if turn % 2 else "p2"
            turn += 1
            chunks = list(runtime.stream(options(provider)))
            if chunks != list(script(provider)):
                problems.append(f"{provider}: {chunks[-1]!r}")

    def observe() -> None:
        while not done.is_set():
            routes = {p.id for p in runtime.list_providers()}
            mine = {r for r in routes if not r.startswith("q")}
            if mine not in states or len(routes - mine) > 1:
                problems.append(f"half-applied registry: {sorted(routes)}")

    failures = run_threads(mutate, observe, *([stream] * STREAMERS))
    assert failures == []
    assert problems == []
    assert commits == 1800
    assert {p.id for p in runtime.list_providers()} == {"p1", "p2", "p3"}


def test_concurrent_registrations_of_one_route_admit_exactly_one() -> None:
    runtime = LlmRuntime()
    barrier = threading.Barrier(16)
    winners: list[LlmAdapter] = []
    refusals: list[str] = []

    def register() -> None:
        adapter = EchoRoute()
        barrier.wait()
        try:
            runtime.register_adapter(["shared", f"own-{id(adapter)}"], adapter)
        except LlmError as exc:
            refusals.append(exc.code)
        else:
            winners.append(adapter)

    assert run_threads(*([register] * 16)) == []
    assert len(winners) == 1
    assert refusals == [ErrorCode.DUPLICATE_ADAPTER] * 15
    # The refused registrations left nothing behind, not even their own routes.
    assert len(runtime.list_providers()) == 2


def test_every_commit_emits_once_and_the_final_registry_is_consistent() -> None:
    runtime = LlmRuntime()
    events = 0
    lock = threading.Lock()

    def count() -> None:
        nonlocal events
        with lock:
            events += 1

    runtime.on_adapters_updated(count)
    kept: list[str] = []

    def churn(worker: int) -> Callable[[], None]:
        def run() -> None:
            for i in range(120):
                handle = runtime.register_adapter([f"w{worker}-{i}"], EchoRoute())
                handle.replace([f"w{worker}-{i}", f"w{worker}-{i}-b"])
                if i % 10:
                    handle.dispose()
                else:
                    kept.append(f"w{worker}-{i}")

        return run

    assert run_threads(*(churn(w) for w in range(8))) == []
    assert events == 8 * (120 * 3 - 12)
    routes = {p.id for p in runtime.list_providers()}
    assert routes == {r for k in kept for r in (k, f"{k}-b")}
    for route in sorted(routes)[:5]:
        assert list(runtime.stream(options(route))) == list(script(route))


def test_a_prepared_call_dispatches_once_across_threads() -> None:
    runtime = LlmRuntime()
    runtime.register_adapter(["route"], EchoRoute())
    prepared = runtime.prepare_call(LlmCallConfig(provider="route", model="m"))
    barrier = threading.Barrier(8)
    results: list[Any] = []

    def dispatch() -> None:
        barrier.wait()
        try:
            results.append(list(prepared.stream(options("route"))))
        except LlmError as exc:
            results.append(exc.code)

    assert run_threads(*([dispatch] * 8)) == []
    assert results.count(ErrorCode.INVALID_PREPARED_CALL) == 7
    assert [r for r in results if isinstance(r, list)] == [list(script("route"))]


def test_a_stream_keeps_the_registration_it_resolved_when_the_route_is_swapped() -> (
    None
):
    resolving = threading.Event()
    release = threading.Event()

    class Slow(LlmAdapter):
        def __init__(self) -> None:
            self.calls = 0

        def resolve_model(self, provider: str, model: str, signal: Any = None) -> Any:
            resolving.set()
            assert release.wait(10)
            return super().resolve_model(provider, model, signal)

        def stream(self, options: GenerateOptions) -> Iterator[StreamChunk]:
            self.calls += 1
            yield from script("first")

    first = Slow()
    second = EchoRoute()
    runtime = LlmRuntime()
    dispose_first = runtime.register_adapter(["route"], first)
    outcome: list[list[StreamChunk]] = []

    def consume() -> None:
        outcome.append(list(runtime.stream(options("route"))))

    worker = threading.Thread(target=consume)
    worker.start()
    assert resolving.wait(10)
    dispose_first()
    runtime.register_adapter(["route"], second)
    release.set()
    worker.join(10)
    assert outcome == [list(script("first"))]
    assert first.calls == 1
    assert list(runtime.stream(options("route"))) == list(script("route"))
