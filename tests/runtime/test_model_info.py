"""dsh_llm.runtime.prepare: catalog and exact-model checks, call-config resolution and
text-only projection, reached the way callers reach them (through LlmRuntime)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from dsh_llm import runtime as runtime_module
from dsh_llm.adapter import LlmModelContext
from dsh_llm.adapter import LlmModelInfo
from dsh_llm.adapter import LlmModelReasoningInfo
from dsh_llm.adapter import LlmProviderInfo
from dsh_llm.adapter import LlmReasoningEffortInfo
from dsh_llm.adapter import LlmResolvedModelInfo
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import LlmCallConfig
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import checks
from dsh_llm.protocol import create_user_message
from dsh_llm.runtime import AdapterDefaults
from dsh_llm.runtime import LlmRuntime
from dsh_llm.runtime import prepare as model_info
from dsh_llm.runtime.prepare import project_text_only
from dsh_llm.signal import AbortSignal
from tests.runtime_adapters import EFFORTS
from tests.runtime_adapters import ModelAdapter
from tests.runtime_adapters import ScriptedAdapter
from tests.runtime_adapters import image_block


class CatalogAdapter(ScriptedAdapter):
    def __init__(self, info: Any, models: Any) -> None:
        super().__init__()
        self.info = info
        self.models = models

    def provider_info(self, provider: str) -> Any:
        return self.info

    def list_models(self, provider: str) -> Any:
        return self.models


def test_provider_and_model_metadata_come_back_as_detached_values() -> None:
    runtime = LlmRuntime()
    model = LlmModelInfo(
        provider="catalog", id="fast", name="Fast", description="Low latency"
    )
    runtime.register_adapter(
        ["catalog"],
        CatalogAdapter(LlmProviderInfo(id="catalog", name="Catalog Provider"), [model]),
    )
    assert runtime.list_providers() == (
        LlmProviderInfo(id="catalog", name="Catalog Provider"),
    )
    models = runtime.list_models("catalog")
    assert models == (model,)
    assert isinstance(models, tuple)


@pytest.mark.parametrize(
    "entry",
    [
        {"provider": "other", "id": "m", "name": "M"},
        {"provider": "route", "id": "", "name": "M"},
        {"provider": "route", "id": 1, "name": "M"},
        {"provider": "route", "id": "m", "name": ""},
        {"provider": "route", "id": "m", "name": 1},
        {"provider": "route", "id": "m", "name": "M", "description": 1},
        {"provider": "route", "id": "m", "name": "M", "input_modalities": (1,)},
        "not-a-model",
    ],
)
def test_bad_catalog_entries_raise_invalid_catalog(entry: Any) -> None:
    bad = LlmModelInfo(**entry) if isinstance(entry, dict) else entry
    runtime = LlmRuntime()
    runtime.register_adapter(
        ["route"], CatalogAdapter(LlmProviderInfo(id="route", name="R"), [bad])
    )
    with pytest.raises(LlmError) as caught:
        runtime.list_models("route")
    assert caught.value.code == ErrorCode.INVALID_CATALOG


def test_duplicate_catalog_ids_and_non_iterables_raise_invalid_catalog() -> None:
    runtime = LlmRuntime()
    same = LlmModelInfo(provider="route", id="same", name="Same")
    runtime.register_adapter(
        ["route"], CatalogAdapter(LlmProviderInfo(id="route", name="R"), [same, same])
    )
    runtime.register_adapter(
        ["other"], CatalogAdapter(LlmProviderInfo(id="other", name="O"), 42)
    )
    for provider in ("route", "other"):
        with pytest.raises(LlmError) as caught:
            runtime.list_models(provider)
        assert caught.value.code == ErrorCode.INVALID_CATALOG


class FixedModel(ScriptedAdapter):
    def __init__(self, resolved: Any) -> None:
        super().__init__()
        self.resolved = resolved

    def resolve_model(
        self, provider: str, model: str, signal: AbortSignal | None = None
    ) -> Any:
        return self.resolved


@pytest.mark.parametrize(
    "changes",
    [
        {"provider": 1},
        {"provider": "other"},
        {"id": 1},
        {"id": "other"},
        {"name": 1},
        {"name": ""},
        {"description": 1},
    ],
)
def test_invalid_exact_model_metadata_raises_invalid_model_info(
    changes: dict[str, Any],
) -> None:
    values = {"provider": "route", "id": "model", "name": "Model", **changes}
    runtime = LlmRuntime()
    runtime.register_adapter(["route"], FixedModel(LlmResolvedModelInfo(**values)))
    with pytest.raises(LlmError) as caught:
        runtime.resolve_model_info("route", "model")
    assert caught.value.code == ErrorCode.INVALID_MODEL_INFO


def test_model_info_that_is_not_a_resolved_model_info_is_refused() -> None:
    runtime = LlmRuntime()
    runtime.register_adapter(["route"], FixedModel({"provider": "route"}))
    with pytest.raises(LlmError) as caught:
        runtime.resolve_model_info("route", "model")
    assert caught.value.code == ErrorCode.INVALID_MODEL_INFO


def test_modalities_survive_exact_model_resolution() -> None:
    runtime = LlmRuntime()
    resolved = LlmResolvedModelInfo(
        provider="route", id="model", name="Model", input_modalities=["text", "image"]
    )
    runtime.register_adapter(["route"], FixedModel(resolved))
    assert runtime.resolve_model_info("route", "model").input_modalities == (
        "text",
        "image",
    )


def test_context_resolves_independently_of_the_catalog() -> None:
    runtime = LlmRuntime()
    adapter = ModelAdapter(unlisted={"context": LlmModelContext(context_window=32_000)})
    runtime.register_adapter(["route"], adapter)
    resolved = runtime.resolve_model_info("route", "unlisted")
    assert resolved.context == LlmModelContext(context_window=32_000)
    assert runtime.list_models("route") == ()
    assert runtime.resolve_model_info("route", "other").context is None


@pytest.mark.parametrize("window", [0, -1, 1.5, math.nan, True])
def test_invalid_context_windows_raise_invalid_model_context(window: Any) -> None:
    runtime = LlmRuntime()
    runtime.register_adapter(
        ["route"],
        ModelAdapter(model={"context": LlmModelContext(context_window=window)}),
    )
    with pytest.raises(LlmError) as caught:
        runtime.resolve_model_info("route", "model")
    assert caught.value.code == ErrorCode.INVALID_MODEL_CONTEXT


@pytest.mark.parametrize(
    "reasoning",
    [
        LlmModelReasoningInfo(efforts=()),
        LlmModelReasoningInfo(efforts=(LlmReasoningEffortInfo(id="", name="Empty"),)),
        LlmModelReasoningInfo(efforts=(LlmReasoningEffortInfo(id="ok", name=""),)),
        LlmModelReasoningInfo(
            efforts=(LlmReasoningEffortInfo(id="ok", name="Ok", description=1),)  # type: ignore[arg-type]
        ),
        LlmModelReasoningInfo(
            efforts=(
                LlmReasoningEffortInfo(id="same", name="One"),
                LlmReasoningEffortInfo(id="same", name="Two"),
            )
        ),
        LlmModelReasoningInfo(
            efforts=(LlmReasoningEffortInfo(id="ok", name="Ok"),),
            default_effort="other",
        ),
    ],
    ids=["empty", "empty-id", "empty-name", "bad-description", "duplicate", "default"],
)
def test_invalid_reasoning_metadata_raises_invalid_model_reasoning(
    reasoning: LlmModelReasoningInfo,
) -> None:
    runtime = LlmRuntime()
    runtime.register_adapter(["route"], ModelAdapter(model={"reasoning": reasoning}))
    with pytest.raises(LlmError) as caught:
        runtime.resolve_model_info("route", "model")
    assert caught.value.code == ErrorCode.INVALID_MODEL_REASONING


def test_reasoning_default_is_materialised_and_unchanged_configs_kept() -> None:
    runtime = LlmRuntime()
    reasoning = LlmModelReasoningInfo(efforts=EFFORTS, default_effort="standard")
    runtime.register_adapter(
        ["route"],
        ModelAdapter(
            model={"reasoning": reasoning},
            provider_default={"reasoning": LlmModelReasoningInfo(efforts=EFFORTS[:1])},
        ),
    )
    assert runtime.resolve_model_info("route", "model").reasoning == reasoning
    assert runtime.resolve_call_config(
        LlmCallConfig(provider="route", model="model")
    ) == LlmCallConfig(provider="route", model="model", reasoning_effort="standard")
    explicit = LlmCallConfig(provider="route", model="model", reasoning_effort="ultra")
    assert runtime.resolve_call_config(explicit) is explicit
    provider_default = LlmCallConfig(provider="route", model="provider_default")
    assert runtime.resolve_call_config(provider_default) is provider_default


def test_unsupported_reasoning_efforts_are_refused_without_clamping() -> None:
    runtime = LlmRuntime()
    adapter = ModelAdapter(
        model={"reasoning": LlmModelReasoningInfo(efforts=EFFORTS[1:])}
    )
    runtime.register_adapter(["route"], adapter)
    for model in ("model", "plain"):
        config = LlmCallConfig(
            provider="route", model=model, reasoning_effort="standard"
        )
        with pytest.raises(LlmError) as caught:
            runtime.resolve_call_config(config)
        assert caught.value.code == ErrorCode.UNSUPPORTED_REASONING_EFFORT
        assert '"standard"' in caught.value.message


def test_default_max_tokens_is_materialised_and_an_explicit_cap_kept() -> None:
    runtime = LlmRuntime()
    runtime.register_adapter(
        ["route"], ModelAdapter(model={"default_max_tokens": 256_000})
    )
    assert runtime.resolve_model_info("route", "model").default_max_tokens == 256_000
    assert runtime.resolve_call_config(
        LlmCallConfig(provider="route", model="model")
    ) == LlmCallConfig(provider="route", model="model", max_tokens=256_000)
    prepared = runtime.prepare_call(LlmCallConfig(provider="route", model="model"))
    assert prepared.adapter_defaults == AdapterDefaults(max_tokens=True)
    explicit = LlmCallConfig(provider="route", model="model", max_tokens=8192)
    assert runtime.resolve_call_config(explicit) is explicit
    assert runtime.prepare_call(explicit).adapter_defaults == AdapterDefaults()


@pytest.mark.parametrize("cap", [0, 1.5, 2**53, -3, True])
def test_invalid_default_max_tokens_raise_invalid_model_max_tokens(cap: Any) -> None:
    runtime = LlmRuntime()
    runtime.register_adapter(["route"], ModelAdapter(model={"default_max_tokens": cap}))
    with pytest.raises(LlmError) as caught:
        runtime.resolve_model_info("route", "model")
    assert caught.value.code == ErrorCode.INVALID_MODEL_MAX_TOKENS


def test_the_runtime_package_re_exports_the_defaults_and_one_safe_integer() -> None:
    assert runtime_module.AdapterDefaults is model_info.AdapterDefaults
    assert model_info.MAX_SAFE_INTEGER is checks.MAX_SAFE_INTEGER == 2**53 - 1


def test_catalog_entries_come_back_in_the_adapter_order() -> None:
    entries = [
        LlmModelInfo(provider="route", id=name, name=name.upper())
        for name in ("zeta", "alpha", "mid")
    ]
    runtime = LlmRuntime()
    runtime.register_adapter(
        ["route"], CatalogAdapter(LlmProviderInfo(id="route", name="R"), entries)
    )
    assert [m.id for m in runtime.list_models("route")] == ["zeta", "alpha", "mid"]


def test_text_only_projection_leaves_requests_without_work_untouched() -> None:
    image = image_block("b")
    text_only = GenerateOptions(
        provider="route", model="m", messages=(create_user_message("no image"),)
    )
    with_image = text_only.evolve(messages=(create_user_message([image]),))
    assert project_text_only(text_only, ("text",)) is text_only
    assert project_text_only(with_image, None) is with_image
    assert project_text_only(with_image, ("text", "image")) is with_image
    projected = project_text_only(with_image, ("text",))
    assert projected.messages[0].content[0].type == "text"


def test_text_only_projection_keeps_the_blocks_beside_an_image() -> None:
    image = image_block("c")
    caption = TextBlock(text="what is this?")
    options = GenerateOptions(
        provider="route", model="m", messages=(create_user_message([caption, image]),)
    )
    projected = project_text_only(options, ("text",))
    kept, replaced = projected.messages[0].content
    assert kept is caption
    assert isinstance(replaced, TextBlock)
    assert replaced.text.startswith("[image omitted")
