"""dsh_llm.call: call_with_retry (SPEC 9.2 decisions over the runtime)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from collections.abc import Iterator
from typing import Any

import pytest

from dsh_llm.adapter import LlmAdapter
from dsh_llm.assembler import AssembledResponse
from dsh_llm.call import RetryEvent
from dsh_llm.call import call_with_retry
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import BlockEnd
from dsh_llm.protocol import BlockStart
from dsh_llm.protocol import CallId
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import LlmCallConfig
from dsh_llm.protocol import LlmFailure
from dsh_llm.protocol import ModelSource
from dsh_llm.protocol import ReplayEnvelope
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import TextDelta
from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.protocol import ToolCallDelta
from dsh_llm.protocol import UsageChunk
from dsh_llm.protocol import create_user_message
from dsh_llm.retry import RetryPolicy
from dsh_llm.retry import resolve_retry_policy
from dsh_llm.runtime import LlmRuntime
from dsh_llm.signal import AbortController
from dsh_llm.signal import AbortSignal
from tests.runtime_adapters import ScriptedAdapter

Outcome = LlmError | str


def success(text: str) -> tuple[StreamChunk, ...]:
    return (
        BlockStart(index=0, block_type="text"),
        TextDelta(index=0, text=text),
        BlockEnd(index=0, block=TextBlock(text=text)),
        UsageChunk(usage=TokenUsage(input_tokens=2, output_tokens=1)),
        Finish(
            reason=FinishReason.STOP,
            replay_state=ReplayEnvelope(response={"n": text}),
        ),
    )


class Scripted(LlmAdapter):
    """Each call plays the next outcome: a text to answer with, or an LlmError
    raised after a partial block (so failed output exists to be discarded)."""

    def __init__(
        self, outcomes: list[Outcome], policy: RetryPolicy | None = None
    ) -> None:
        self.outcomes = list(outcomes)
        self.policy = policy
        self.seen: list[GenerateOptions] = []

    def provider_retry_policy(self, provider: str) -> RetryPolicy | None:
        return self.policy

    def stream(self, options: GenerateOptions) -> Iterator[StreamChunk]:
        self.seen.append(options)
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, LlmError):
            yield BlockStart(index=0, block_type="text")
            yield TextDelta(index=0, text="partial output")
            raise outcome
        yield from success(outcome)


class RecordingSignal(AbortSignal):
    """A signal whose waits return at once, recording the requested delays."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        assert timeout is not None
        self.waits.append(round(timeout * 1000, 6))
        return False


def policy(**config: Any) -> RetryPolicy:
    return resolve_retry_policy(config, "test")


def build(config: LlmCallConfig) -> GenerateOptions:
    return GenerateOptions(
        provider=config.provider,
        model=config.model,
        reasoning_effort=config.reasoning_effort,
        temperature=config.temperature,
        max_tokens=config.max_tokens,
        stop=config.stop,
        messages=(QUESTION,),
    )


QUESTION = create_user_message("question")
CONFIG = LlmCallConfig(provider="route", model="m")


def failure(code: str, **facts: Any) -> LlmError:
    return LlmError(f"{code.lower()} failure", code, **facts)


def run(
    adapter: Scripted,
    *,
    random_values: list[float] | None = None,
    signal: AbortSignal | None = None,
    runtime: LlmRuntime | None = None,
) -> tuple[AssembledResponse, list[RetryEvent], RecordingSignal | AbortSignal]:
    if runtime is None:
        runtime = LlmRuntime()
        runtime.register_adapter(["route"], adapter)
    events: list[RetryEvent] = []
    values = iter(random_values or [0.5] * 100)
    waiter = RecordingSignal() if signal is None else signal
    result = call_with_retry(
        runtime,
        CONFIG,
        build,
        signal=waiter,
        on_retry=events.append,
        random=lambda: next(values),
    )
    return result, events, waiter


def test_a_first_success_returns_the_assembled_message() -> None:
    adapter = Scripted(["hello"])
    result, events, _ = run(adapter)
    assert result.ok
    assert result.text == "hello"
    assert result.attempts == 1
    assert result.usage == TokenUsage(input_tokens=2, output_tokens=1)
    assert result.message.source == ModelSource(
        provider="route",
        model="m",
        replay_state=ReplayEnvelope(response={"n": "hello"}),
    )
    assert events == []


def test_a_retry_waits_exactly_the_computed_delay() -> None:
    adapter = Scripted(
        [failure("RATE_LIMIT"), "ok"],
        policy(
            mode="normal",
            maxRetries=2,
            retryableCodes=["SERVER", "RATE_LIMIT"],
            backoff={"jitterRatio": 0},
        ),
    )
    result, events, waiter = run(adapter)
    assert result.text == "ok"
    assert result.attempts == 2
    assert isinstance(waiter, RecordingSignal)
    assert waiter.waits == [500]
    assert events == [
        RetryEvent(
            retry=1,
            max_retries=2,
            provider="route",
            mode="normal",
            delay_ms=500,
            failure=LlmFailure(message="rate_limit failure", code="RATE_LIMIT"),
        )
    ]


def test_without_a_signal_the_helper_really_sleeps() -> None:
    adapter = Scripted(
        [failure("SERVER"), "ok"],
        policy(mode="normal", backoff={"initialDelayMs": 30, "jitterRatio": 0}),
    )
    runtime = LlmRuntime()
    runtime.register_adapter(["route"], adapter)
    started = time.monotonic()
    result = call_with_retry(runtime, CONFIG, build)
    assert time.monotonic() - started >= 0.03
    assert result.text == "ok"


def test_empty_response_is_retried_by_default_and_partial_output_discarded() -> None:
    adapter = Scripted([failure("EMPTY_RESPONSE"), "answer"])
    result, events, _ = run(adapter)
    assert result.text == "answer"
    assert "partial" not in repr(result.message)
    assert [e.failure.code for e in events] == ["EMPTY_RESPONSE"]


def test_jittered_delays_then_stop_at_max_retries() -> None:
    adapter = Scripted([failure("SERVER")] * 3, policy(mode="normal", maxRetries=2))
    result, events, waiter = run(adapter, random_values=[0, 1])
    assert isinstance(waiter, RecordingSignal)
    assert waiter.waits == [450, 1100]
    assert [event.retry for event in events] == [1, 2]
    assert result.attempts == 3
    assert result.finish == FinishReason.error(
        LlmFailure(message="server failure", code="SERVER")
    )
    assert result.message.content == ()
    assert not result.ok


def test_full_jitter_may_give_a_zero_delay() -> None:
    adapter = Scripted(
        [failure("SERVER"), "ok"], policy(mode="normal", backoff={"jitterRatio": 1})
    )
    _, events, _ = run(adapter, random_values=[0])
    assert events[0].delay_ms == 0


def test_retry_after_within_the_maximum_is_used_verbatim() -> None:
    adapter = Scripted([failure("RATE_LIMIT", provider_retry_after_ms=1500), "ok"])
    _, events, _ = run(adapter)
    assert events[0].delay_ms == 1500


def test_retry_after_beyond_the_maximum_stops_a_normal_policy() -> None:
    adapter = Scripted([failure("RATE_LIMIT", provider_retry_after_ms=60_000), "ok"])
    result, events, _ = run(adapter)
    assert events == []
    assert result.attempts == 1
    assert result.finish.failure is not None
    assert result.finish.failure.provider_retry_after_ms == 60_000


def test_retry_after_beyond_the_maximum_uses_the_local_delay_when_always() -> None:
    adapter = Scripted(
        [failure("RATE_LIMIT", provider_retry_after_ms=60_000), "ok"],
        policy(mode="always", backoff={"jitterRatio": 0}),
    )
    result, events, _ = run(adapter)
    assert events[0].delay_ms == 500
    assert events[0].max_retries is None
    assert result.ok


def test_codes_outside_the_policy_are_not_retried() -> None:
    adapter = Scripted([failure("AUTH"), "never"])
    result, events, _ = run(adapter)
    assert events == []
    assert result.finish.failure is not None
    assert result.finish.failure.code == "AUTH"
    assert adapter.outcomes == ["never"]


def test_an_unserved_call_is_never_retried_even_when_always() -> None:
    with pytest.raises(LlmError) as caught:
        call_with_retry(LlmRuntime(), CONFIG, build)
    assert caught.value.code == ErrorCode.NO_ADAPTER

    # A middleware rerouting a prepared call changes its config before dispatch:
    # that in-band failure never reached an adapter and is final too.
    runtime = LlmRuntime()
    runtime.register_adapter(["route"], Scripted(["x"], policy(mode="always")))
    runtime.use(lambda opts, next_: next_(opts.evolve(provider="nowhere")))
    result, events, _ = run(Scripted([]), runtime=runtime)
    assert events == []
    assert result.finish.failure is not None
    assert result.finish.failure.code == ErrorCode.INVALID_PREPARED_CALL


def test_always_policies_retry_without_bound_with_growing_delays() -> None:
    adapter = Scripted(
        [failure("AUTH")] * 5 + ["finally"],
        policy(mode="always", backoff={"initialDelayMs": 1, "maxDelayMs": 4}),
    )
    result, events, waiter = run(adapter, random_values=[1] * 5)
    assert isinstance(waiter, RecordingSignal)
    assert waiter.waits == [1.1, 2.2, 4, 4, 4]
    assert [e.retry for e in events] == [1, 2, 3, 4, 5]
    assert result.text == "finally"
    assert result.attempts == 6


def test_retried_requests_are_identical_and_free_of_failure_text() -> None:
    adapter = Scripted([failure("SERVER"), failure("RATE_LIMIT"), "ok"])
    run(adapter)
    first, second, third = adapter.seen
    assert first == second == third
    assert first.messages == (QUESTION,)
    assert "failure" not in repr(third.messages)


def test_the_serving_registration_policy_applies_and_a_new_policy_restarts() -> None:
    runtime = LlmRuntime()
    one_retry = policy(mode="normal", maxRetries=1)
    first = Scripted([failure("SERVER"), failure("SERVER")], one_retry)
    handle = runtime.register_adapter(["route"], first)
    swapped: list[str] = []

    def swap(event: RetryEvent) -> None:
        # Between attempts the route moves to an adapter with another policy.
        if not swapped:
            handle.dispose()
            runtime.register_adapter(
                ["route"],
                Scripted(
                    [failure("SERVER"), failure("SERVER"), "ok"],
                    policy(mode="normal", maxRetries=2),
                ),
            )
            swapped.append("done")

    result = call_with_retry(
        runtime,
        CONFIG,
        build,
        signal=RecordingSignal(),
        on_retry=swap,
        random=lambda: 0.5,
    )
    # One retry under the first policy, then numbering restarts at 1 under the
    # second one, which allows two more.
    assert result.ok
    assert result.attempts == 4


def test_budgets_are_counted_per_provider() -> None:
    runtime = LlmRuntime()
    limited = policy(mode="normal", maxRetries=1)
    runtime.register_adapter(["a"], Scripted([failure("SERVER"), "a-ok"], limited))
    runtime.register_adapter(["b"], Scripted([failure("SERVER"), "b-ok"], limited))
    waiter = RecordingSignal()
    for provider in ("a", "b"):
        result = call_with_retry(
            runtime,
            LlmCallConfig(provider=provider, model="m"),
            build,
            signal=waiter,
        )
        assert result.text == f"{provider}-ok"


def test_an_abort_during_the_wait_ends_without_a_new_attempt() -> None:
    controller = AbortController()
    adapter = Scripted([failure("SERVER"), "never"])
    threading.Timer(0.05, controller.abort).start()
    result, events, _ = run(adapter, signal=controller.signal)
    assert len(events) == 1
    assert result.attempts == 1
    assert result.finish.kind == "aborted"
    assert result.finish.failure is not None
    assert result.finish.failure.code == ErrorCode.ABORTED
    assert adapter.outcomes == ["never"]
    assert adapter.seen[0].signal is controller.signal


def test_an_aborted_attempt_is_returned_as_is() -> None:
    controller = AbortController()
    controller.abort()
    adapter = Scripted([failure("TRANSPORT"), "never"])
    result, events, _ = run(adapter, signal=controller.signal)
    assert result.finish.kind == "aborted"
    assert events == []


def test_a_stream_without_finish_counts_as_stream_closed() -> None:
    class NoFinish(LlmAdapter):
        def stream(self, options: GenerateOptions) -> Iterator[StreamChunk]:
            yield BlockStart(index=0, block_type="text")

    runtime = LlmRuntime()
    runtime.register_adapter(["route"], NoFinish())
    result = call_with_retry(runtime, CONFIG, build)
    assert result.finish.failure is not None
    assert result.finish.failure.code == ErrorCode.STREAM_CLOSED


def test_a_builder_that_changes_the_config_is_refused() -> None:
    runtime = LlmRuntime()
    runtime.register_adapter(["route"], Scripted(["x"]))
    changing: Callable[[LlmCallConfig], GenerateOptions] = lambda config: build(  # noqa: E731
        config
    ).evolve(model="other")
    with pytest.raises(LlmError) as caught:
        call_with_retry(runtime, CONFIG, changing)
    assert caught.value.code == ErrorCode.INVALID_PREPARED_CALL


def test_whole_options_are_retried_with_the_prepared_config_filled_in() -> None:
    adapter = Scripted(
        [failure("SERVER"), "ok"],
        policy(mode="normal", backoff={"jitterRatio": 0}),
    )
    runtime = LlmRuntime()
    runtime.register_adapter(["route"], adapter)
    waiter = RecordingSignal()
    options = GenerateOptions(
        provider="route",
        model="m",
        messages=(QUESTION,),
        system="be brief",
        stop=("END",),
        signal=waiter,
    )
    result = call_with_retry(runtime, options)
    assert result.text == "ok"
    assert result.attempts == 2
    # The request's own signal paces the waits.
    assert waiter.waits == [500]
    # Both attempts send the caller's request, not a rebuilt one.
    assert [seen.system for seen in adapter.seen] == ["be brief", "be brief"]
    assert [seen.stop for seen in adapter.seen] == [("END",), ("END",)]
    assert adapter.seen[0] == adapter.seen[1]


def test_request_forms_are_checked() -> None:
    runtime = LlmRuntime()
    options = GenerateOptions(provider="route", model="m", messages=(QUESTION,))
    with pytest.raises(TypeError, match="only with an LlmCallConfig"):
        call_with_retry(runtime, options, build)
    with pytest.raises(TypeError, match="needs build_options"):
        call_with_retry(runtime, CONFIG)
    with pytest.raises(TypeError, match="got dict"):
        call_with_retry(runtime, {"provider": "route"})  # type: ignore[arg-type]


class WaitsForAbort(LlmAdapter):
    """Starts a block, then waits (at most two seconds) for its request's signal:
    an abort ends the attempt ABORTED, no abort lets it finish as a stop."""

    def __init__(self) -> None:
        self.started = threading.Event()

    def stream(self, options: GenerateOptions) -> Iterator[StreamChunk]:
        yield BlockStart(index=0, block_type="text")
        self.started.set()
        assert options.signal is not None
        if options.signal.wait(2.0):
            raise LlmError("request aborted", ErrorCode.ABORTED)
        yield from success("not cancelled")[1:]


def _abort_when_started(adapter: WaitsForAbort, controller: AbortController) -> None:
    def abort() -> None:
        adapter.started.wait(5.0)
        controller.abort()

    threading.Thread(target=abort, daemon=True).start()


@pytest.mark.parametrize("aborting", ["call", "request"])
def test_either_the_call_or_the_request_signal_cancels_the_attempt(
    aborting: str,
) -> None:
    adapter = WaitsForAbort()
    runtime = LlmRuntime()
    runtime.register_adapter(["route"], adapter)
    own = AbortController()
    caller = AbortController()
    request = GenerateOptions(
        provider="route", model="m", messages=(QUESTION,), signal=own.signal
    )
    _abort_when_started(adapter, caller if aborting == "call" else own)
    result = call_with_retry(runtime, request, signal=caller.signal)
    assert result.finish.kind == "aborted"
    # The request's own signal is only read, never aborted by the call.
    assert own.signal.aborted is (aborting == "request")


def test_the_call_signal_joins_a_signal_set_by_build_options() -> None:
    adapter = WaitsForAbort()
    runtime = LlmRuntime()
    runtime.register_adapter(["route"], adapter)
    own = AbortController()
    caller = AbortController()
    _abort_when_started(adapter, caller)
    result = call_with_retry(
        runtime,
        CONFIG,
        lambda config: build(config).evolve(signal=own.signal),
        signal=caller.signal,
    )
    assert result.finish.kind == "aborted"


def test_the_result_is_the_one_outcome_type_with_its_tool_calls() -> None:
    call = ToolCallBlock(id=CallId("c1"), name="lookup", arguments='{"q":1}')
    stream = [
        BlockStart(index=0, block_type="tool-call"),
        ToolCallDelta(
            index=0, id=call.id, name=call.name, arguments_delta=call.arguments
        ),
        BlockEnd(index=0, block=call),
        UsageChunk(usage=TokenUsage(input_tokens=2, output_tokens=1)),
        Finish(reason=FinishReason.TOOL_CALLS),
    ]
    runtime = LlmRuntime()
    runtime.register_adapter(["route"], ScriptedAdapter(stream))
    result = call_with_retry(runtime, CONFIG, build)
    assert type(result) is AssembledResponse
    assert result.ok
    assert result.tool_calls == (call,) == result.message.tool_calls
    assert result.text == ""
