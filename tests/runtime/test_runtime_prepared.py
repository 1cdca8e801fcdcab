"""dsh_llm.runtime: prepared calls (LlmRuntime.prepare_call and PreparedLlmCall)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs
import pytest

from dsh_llm.adapter import LlmModelContext
from dsh_llm.adapter import LlmModelReasoningInfo
from dsh_llm.adapter import LlmReasoningEffortInfo
from dsh_llm.adapter import LlmResolvedModelInfo
from dsh_llm.adapter import PreparedAdapterCall
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import LlmCallConfig
from dsh_llm.protocol import LlmFailure
from dsh_llm.protocol import StreamChunk
from dsh_llm.retry import resolve_retry_policy
from dsh_llm.runtime import AdapterDefaults
from dsh_llm.runtime import LlmRuntime
from dsh_llm.runtime import StreamNext
from dsh_llm.signal import AbortController
from dsh_llm.signal import AbortSignal
from tests.runtime_adapters import EFFORTS
from tests.runtime_adapters import SCRIPT
from tests.runtime_adapters import ModelAdapter
from tests.runtime_adapters import RaisingAdapter
from tests.runtime_adapters import ScriptedAdapter
from tests.runtime_adapters import drain
from tests.runtime_adapters import only_finish
from tests.runtime_adapters import options


def test_prepared_call_keeps_its_registration_and_policy_after_replacement() -> None:
    old_policy = resolve_retry_policy({"mode": "always"}, "old")
    new_policy = resolve_retry_policy({"mode": "normal", "maxRetries": 0}, "new")

    class Old(RaisingAdapter):
        def provider_retry_policy(self, provider: str) -> Any:
            return old_policy

    class New(ScriptedAdapter):
        def provider_retry_policy(self, provider: str) -> Any:
            return new_policy

    runtime = LlmRuntime()
    dispose_old = runtime.register_adapter(
        ["route"], Old(LlmError("old route failed", "AUTH"))
    )
    prepared = runtime.prepare_call(LlmCallConfig(provider="route", model="model"))
    dispose_old()
    new = New()
    runtime.register_adapter(["route"], new)
    chunks = drain(prepared.stream(options(model="model")))
    assert chunks == [
        Finish(
            reason=FinishReason.error(
                LlmFailure(message="old route failed", code="AUTH")
            )
        )
    ]
    assert prepared.retry_policy is old_policy
    assert runtime.provider_retry_policy("route") is new_policy
    assert new.seen == []


def test_prepared_call_dispatches_once_and_refuses_config_drift() -> None:
    runtime = LlmRuntime()
    reasoning = LlmModelReasoningInfo(efforts=EFFORTS, default_effort="ultra")
    runtime.register_adapter(["route"], ModelAdapter(model={"reasoning": reasoning}))
    prepared = runtime.prepare_call(LlmCallConfig(provider="route", model="model"))
    assert prepared.config == LlmCallConfig(
        provider="route", model="model", reasoning_effort="ultra"
    )
    assert prepared.adapter_defaults == AdapterDefaults(reasoning_effort=True)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        prepared.config.model = "x"  # type: ignore[misc]
    with pytest.raises(LlmError) as drift:
        prepared.stream(options(model="other", reasoning_effort="ultra"))
    assert drift.value.code == ErrorCode.INVALID_PREPARED_CALL
    assert drain(prepared.stream(options(reasoning_effort="ultra")))[-1] == SCRIPT[-1]
    with pytest.raises(LlmError) as reuse:
        prepared.stream(options(reasoning_effort="ultra"))
    assert reuse.value.code == ErrorCode.INVALID_PREPARED_CALL
    assert "only be dispatched once" in reuse.value.message


def test_late_drift_in_middleware_becomes_an_error_finish() -> None:
    runtime = LlmRuntime()
    adapter = ModelAdapter()
    runtime.register_adapter(["route"], adapter)
    prepared = runtime.prepare_call(LlmCallConfig(provider="route", model="model"))

    def drift(opts: GenerateOptions, next_: StreamNext) -> Iterator[StreamChunk]:
        return next_(opts.evolve(model="other"))

    runtime.use(drift)
    assert drain(prepared.stream(options())) == [
        Finish(
            reason=FinishReason.error(
                LlmFailure(
                    message="prepared LLM call config changed before adapter dispatch",
                    code="INVALID_PREPARED_CALL",
                )
            )
        )
    ]
    assert adapter.seen == []


def test_prepared_call_uses_one_model_lookup_and_detached_context() -> None:
    runtime = LlmRuntime()
    efforts = (LlmReasoningEffortInfo(id="high", name="High"),)
    adapter = ModelAdapter(
        model={
            "context": LlmModelContext(context_window=128_000),
            "description": "Resolved model",
            "reasoning": LlmModelReasoningInfo(efforts=efforts, default_effort="high"),
        },
        **{"no-default": {"reasoning": LlmModelReasoningInfo(efforts=efforts)}},
    )
    runtime.register_adapter(["route"], adapter)
    prepared = runtime.prepare_call(LlmCallConfig(provider="route", model="model"))
    assert prepared.config.reasoning_effort == "high"
    assert prepared.context == LlmModelContext(context_window=128_000)
    assert prepared.model.description == "Resolved model"
    drain(prepared.stream(options(reasoning_effort="high")))
    assert adapter.resolutions == 1
    no_default = runtime.prepare_call(
        LlmCallConfig(provider="route", model="no-default")
    )
    assert no_default.config == LlmCallConfig(provider="route", model="no-default")
    assert no_default.adapter_defaults == AdapterDefaults()
    assert adapter.resolutions == 2


def test_prepared_dispatch_uses_the_generation_captured_by_prepare_call() -> None:
    generation = ["first"]
    dispatched: list[str] = []

    class Generational(ScriptedAdapter):
        def prepare_call(
            self, provider: str, model: str, signal: AbortSignal | None = None
        ) -> PreparedAdapterCall:
            captured = generation[0]

            def dispatch(opts: GenerateOptions) -> Iterator[StreamChunk]:
                dispatched.append(captured)
                return self.stream(opts)

            info = LlmResolvedModelInfo(
                provider=provider, id=model, name=model, input_modalities=("text",)
            )
            return PreparedAdapterCall(model=info, stream=dispatch)

    runtime = LlmRuntime()
    runtime.register_adapter(["route"], Generational())
    prepared = runtime.prepare_call(LlmCallConfig(provider="route", model="model"))
    generation[0] = "second"
    assert prepared.input_modalities == ("text",)
    drain(prepared.stream(options()))
    assert dispatched == ["first"]


def test_the_callers_signal_reaches_adapter_prepare_call_in_both_paths() -> None:
    received: list[AbortSignal | None] = []

    class Recording(ScriptedAdapter):
        def prepare_call(
            self, provider: str, model: str, signal: AbortSignal | None = None
        ) -> PreparedAdapterCall:
            received.append(signal)
            return super().prepare_call(provider, model, signal)

    runtime = LlmRuntime()
    runtime.register_adapter(["route"], Recording())
    streamed, prepared = AbortController(), AbortController()
    drain(runtime.stream(options(signal=streamed.signal)))
    runtime.prepare_call(LlmCallConfig(provider="route", model="m"), prepared.signal)
    assert received == [streamed.signal, prepared.signal]


def test_prepare_call_answer_that_is_not_a_prepared_adapter_call_is_refused() -> None:
    class Broken(ScriptedAdapter):
        def prepare_call(self, provider: str, model: str, signal: Any = None) -> Any:
            return "nope"

    runtime = LlmRuntime()
    runtime.register_adapter(["route"], Broken())
    with pytest.raises(LlmError) as caught:
        runtime.prepare_call(LlmCallConfig(provider="route", model="m"))
    assert caught.value.code == ErrorCode.INVALID_ADAPTER
    finish = only_finish(drain(runtime.stream(options())))
    assert finish.reason.failure is not None
    assert finish.reason.failure.code == ErrorCode.INVALID_ADAPTER
