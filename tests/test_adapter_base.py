"""dsh_llm.adapter: the defaults every LlmAdapter inherits."""

from __future__ import annotations

from collections.abc import Iterator

import attrs
import pytest

from dsh_llm.adapter import MODALITIES
from dsh_llm.adapter import LlmAdapter
from dsh_llm.adapter import LlmModelInfo
from dsh_llm.adapter import LlmModelReasoningInfo
from dsh_llm.adapter import LlmProviderInfo
from dsh_llm.adapter import LlmReasoningEffortInfo
from dsh_llm.adapter import LlmResolvedModelInfo
from dsh_llm.adapter import PreparedAdapterCall
from dsh_llm.protocol import BlockEnd
from dsh_llm.protocol import BlockStart
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import TextDelta
from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol import UsageChunk
from dsh_llm.protocol import create_user_message
from dsh_llm.signal import AbortController
from dsh_llm.signal import AbortSignal

SCRIPT: tuple[StreamChunk, ...] = (
    BlockStart(index=0, block_type="text"),
    TextDelta(index=0, text="hello"),
    BlockEnd(index=0, block=TextBlock(text="hello")),
    UsageChunk(usage=TokenUsage(input_tokens=3, output_tokens=1)),
    Finish(reason=FinishReason.STOP),
)


class ScriptedAdapter(LlmAdapter):
    """Implements only ``stream``; everything else is the base's default."""

    def __init__(self) -> None:
        self.seen: list[GenerateOptions] = []

    def stream(self, options: GenerateOptions) -> Iterator[StreamChunk]:
        self.seen.append(options)
        yield from SCRIPT


def _options() -> GenerateOptions:
    return GenerateOptions(
        provider="route", model="model-x", messages=(create_user_message("hi"),)
    )


def test_stream_is_the_only_abstract_method() -> None:
    assert LlmAdapter.__abstractmethods__ == frozenset({"stream"})
    with pytest.raises(TypeError):
        LlmAdapter()  # type: ignore[abstract]


def test_provider_info_defaults_to_the_route_itself() -> None:
    assert ScriptedAdapter().provider_info("my-route") == LlmProviderInfo(
        id="my-route", name="my-route"
    )


def test_default_retry_policy_is_none_meaning_normal_defaults() -> None:
    assert ScriptedAdapter().provider_retry_policy("route") is None


def test_default_catalog_is_empty() -> None:
    assert ScriptedAdapter().list_models("route") == ()


def test_resolve_model_defaults_to_the_id_as_name() -> None:
    info = ScriptedAdapter().resolve_model("route", "any-model")

    assert info == LlmResolvedModelInfo(
        provider="route", id="any-model", name="any-model"
    )
    assert info.context is None
    assert info.default_max_tokens is None
    assert info.reasoning is None
    assert info.input_modalities is None


def test_resolve_model_accepts_a_signal() -> None:
    signal = AbortController().signal

    assert ScriptedAdapter().resolve_model("r", "m", signal).id == "m"


def test_prepare_call_binds_the_resolved_model_and_the_adapters_stream() -> None:
    adapter = ScriptedAdapter()

    prepared = adapter.prepare_call("route", "model-x")

    assert isinstance(prepared, PreparedAdapterCall)
    assert prepared.model == adapter.resolve_model("route", "model-x")
    options = _options()
    assert tuple(prepared.stream(options)) == SCRIPT
    assert adapter.seen == [options]


def test_prepare_call_uses_an_overridden_resolve_model() -> None:
    class Described(ScriptedAdapter):
        def resolve_model(
            self, provider: str, model: str, signal: AbortSignal | None = None
        ) -> LlmResolvedModelInfo:
            return LlmResolvedModelInfo(
                provider=provider, id=model, name="Pretty", default_max_tokens=256
            )

    prepared = Described().prepare_call("route", "m")

    assert prepared.model.name == "Pretty"
    assert prepared.model.default_max_tokens == 256


def test_stream_is_a_plain_lazy_generator() -> None:
    adapter = ScriptedAdapter()
    iterator = adapter.stream(_options())

    assert adapter.seen == []
    assert next(iterator) == SCRIPT[0]
    assert len(adapter.seen) == 1


def test_model_info_values_are_frozen_and_store_tuples() -> None:
    info = LlmModelInfo(
        provider="p", id="m", name="M", input_modalities=["text", "image"]
    )
    reasoning = LlmModelReasoningInfo(
        efforts=[LlmReasoningEffortInfo(id="high", name="High")], default_effort="high"
    )

    assert info.input_modalities == ("text", "image")
    assert reasoning.efforts == (LlmReasoningEffortInfo(id="high", name="High"),)
    assert MODALITIES == ("text", "image")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        info.name = "N"  # type: ignore[misc]
