"""DeepSeek configuration, catalog and plugin (SPEC 8.1; items 74-80, 82)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

import dsh_llm
import dsh_llm.adapters
from dsh_llm.adapter import LlmProviderInfo
from dsh_llm.adapters import AdapterConfigError
from dsh_llm.adapters import CatalogModel
from dsh_llm.adapters.deepseek import DEFAULT_MODELS
from dsh_llm.adapters.deepseek import PROVIDER_ROUTE
from dsh_llm.adapters.deepseek import PUBLIC_BASE_URL
from dsh_llm.adapters.deepseek import DeepSeekAdapter
from dsh_llm.adapters.deepseek import DeepSeekConfig
from dsh_llm.adapters.deepseek import resolve_base_url
from dsh_llm.config import ConfigError
from dsh_llm.config import PluginConfigError
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.plugins import PluginContext
from dsh_llm.plugins import PluginLoadError
from dsh_llm.plugins import load_composition
from dsh_llm.plugins.builtin import DEEPSEEK as deepseek_plugin
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import LlmCallConfig
from dsh_llm.protocol import create_user_message
from dsh_llm.retry import DEFAULT_RETRY_POLICY
from dsh_llm.retry import NormalRetryPolicy
from dsh_llm.retry import resolve_retry_policy
from dsh_llm.runtime import LlmRuntime
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply
from dsh_llm.testing import sse_events
from dsh_llm.validator import validate_stream

from .chat_chunks import FIRST
from .chat_chunks import finish
from .chat_chunks import text


def _info(adapter: DeepSeekAdapter, model: str = "deepseek-v4-flash") -> Any:
    return adapter.resolve_model(PROVIDER_ROUTE, model)


# --- catalog and model info -----------------------------------------------------------


def test_the_default_catalog_and_resolved_info():
    with DeepSeekAdapter(environ={}) as adapter:
        models = adapter.list_models(PROVIDER_ROUTE)
        assert [(m.id, m.name, m.input_modalities) for m in models] == [
            ("deepseek-v4-flash", "DeepSeek-V4-Flash", ("text",)),
            ("deepseek-v4-pro", "DeepSeek-V4-Pro", ("text",)),
            # The catalog lists image input, but the adapter cannot send one
            # (no Files API), so it does not claim it.
            (
                "deepseek-v4-flash-vision-exp",
                "DeepSeek-V4-Flash-Vision-Exp",
                ("text",),
            ),
        ]
        info = _info(adapter)
    assert info.context.context_window == 1_000_000
    assert info.default_max_tokens == 256_000
    assert [e.id for e in info.reasoning.efforts] == ["off", "low", "high", "max"]
    assert [e.name for e in info.reasoning.efforts] == ["Off", "Low", "High", "Max"]
    assert info.reasoning.default_effort == "high"
    vision = adapter.resolve_model(PROVIDER_ROUTE, "deepseek-v4-flash-vision-exp")
    assert vision.input_modalities == ("text",)
    assert adapter.provider_info(PROVIDER_ROUTE) == LlmProviderInfo(
        id=PROVIDER_ROUTE, name="DeepSeek"
    )


@pytest.mark.parametrize("effort", ["off", "low", "max"])
def test_a_configured_effort_is_the_default(effort):
    with DeepSeekAdapter(reasoning_effort=effort, environ={}) as adapter:
        assert _info(adapter).reasoning.default_effort == effort


def test_disabled_thinking_publishes_only_off():
    with DeepSeekAdapter(
        thinking="disabled", reasoning_effort="off", environ={}
    ) as adapter:
        reasoning = _info(adapter).reasoning
    assert [e.id for e in reasoning.efforts] == ["off"]
    assert reasoning.default_effort == "off"


@pytest.mark.parametrize("effort", ["low", "high", "max"])
def test_disabled_thinking_with_another_effort_fails_to_load(effort):
    with pytest.raises(
        AdapterConfigError, match='only reasoningEffort "off" can be configured'
    ):
        DeepSeekConfig(thinking="disabled", reasoning_effort=effort)
    with pytest.raises(AdapterConfigError, match="reasoningEffort"):
        DeepSeekAdapter(thinking="disabled", reasoning_effort=effort, environ={})


def test_configured_models_are_advertised_but_any_id_resolves():
    models = [
        CatalogModel(
            id="m1", context_window=64_000, max_tokens=8_000, description="small"
        )
    ]
    with DeepSeekAdapter(
        models=models, default_context_window=500_000, max_tokens=9_000, environ={}
    ) as adapter:
        assert [
            (m.id, m.name, m.description) for m in adapter.list_models(PROVIDER_ROUTE)
        ] == [("m1", "m1", "small")]
        listed = _info(adapter, "m1")
        other = _info(adapter, "unlisted")
    assert (listed.context.context_window, listed.default_max_tokens) == (64_000, 8_000)
    assert (other.name, other.input_modalities) == ("unlisted", ("text",))
    assert (other.context.context_window, other.default_max_tokens) == (500_000, 9_000)


def test_an_empty_catalog_is_allowed():
    with DeepSeekAdapter(models=[], environ={}) as adapter:
        assert adapter.list_models(PROVIDER_ROUTE) == ()
        assert _info(adapter).context.context_window == 1_000_000


NON_EMPTY = "must be a non-empty string"
MODALITIES = 'must be ["text"] or ["text", "image"]'
POSITIVE = "must be a positive integer"
SAFE = "must be a positive integer no greater than 9007199254740991"


@pytest.mark.parametrize(
    ("fields", "key", "detail"),
    [
        ({"id": ""}, "id", NON_EMPTY),
        ({"id": 3}, "id", NON_EMPTY),
        ({"id": "a", "name": ""}, "name", NON_EMPTY),
        ({"id": "a", "description": 3}, "description", "must be a string"),
        ({"id": "a", "context_window": 0}, "contextWindow", SAFE),
        ({"id": "a", "context_window": 1.5}, "contextWindow", SAFE),
        ({"id": "a", "context_window": True}, "contextWindow", SAFE),
        ({"id": "a", "context_window": 2**53}, "contextWindow", SAFE),
        ({"id": "a", "max_tokens": 0}, "maxTokens", SAFE),
        ({"id": "a", "max_tokens": 1.5}, "maxTokens", SAFE),
        ({"id": "a", "max_tokens": 2**53}, "maxTokens", SAFE),
        ({"id": "a", "input_modalities": ()}, "inputModalities", MODALITIES),
        (
            {"id": "a", "input_modalities": ("audio",)},
            "inputModalities",
            MODALITIES,
        ),
        (
            {"id": "a", "input_modalities": ("text", "text")},
            "inputModalities",
            MODALITIES,
        ),
    ],
)
def test_a_model_built_directly_is_checked_keyed_by_its_field(fields, key, detail):
    with pytest.raises(AdapterConfigError) as caught:
        CatalogModel(**fields)
    error = caught.value
    assert (error.key, error.detail) == (key, detail)
    # The shared catalog model belongs to no package (a config's catalog errors
    # name the config's package and the entry's index).
    assert str(error) == f"{key} {detail}"


def test_a_model_list_entry_is_keyed_by_its_index_from_python_and_yaml(
    tmp_path: Path,
):
    # Built directly, the model knows no index; from YAML the key path has one.
    with pytest.raises(AdapterConfigError) as caught:
        CatalogModel(id="")
    assert caught.value.key == "id"
    path = tmp_path / "dsh.yml"
    path.write_text(
        "- id: ds\n  name: llm-deepseek\n  config:\n    models: [{id: a}, {id: ''}]\n"
    )
    with pytest.raises(PluginLoadError) as loaded:
        load_composition(path, environ={})
    assert loaded.value.key == "models[1].id"
    assert loaded.value.message == (
        f'plugin "ds": config key "models[1].id" {NON_EMPTY}'
    )


@pytest.mark.parametrize(
    ("models", "key", "detail"),
    [
        ("m1", "models", "must be a list of models"),
        ((3,), "models[0]", "must be a model id or a mapping, got int"),
        (({"id": "a", "bogus": 1},), "models[0].bogus", "is not a known key"),
        (
            (CatalogModel(id="a"), CatalogModel(id="a")),
            "models[1].id",
            'repeats the model "a"',
        ),
    ],
)
def test_catalog_errors_are_keyed_by_the_entry(models, key, detail):
    with pytest.raises(AdapterConfigError) as caught:
        DeepSeekConfig(models=models)
    assert caught.value.key == key
    assert caught.value.detail.startswith(detail)
    assert str(caught.value) == f"llm-deepseek: {key} {caught.value.detail}"


@pytest.mark.parametrize(
    ("field", "value", "key", "detail"),
    [
        ("default_context_window", 0, "defaultContextWindow", POSITIVE),
        ("default_context_window", 1.5, "defaultContextWindow", POSITIVE),
        ("max_tokens", 0, "maxTokens", SAFE),
        ("max_tokens", 2**53, "maxTokens", SAFE),
        ("stream_idle_timeout_ms", math.inf, "streamIdleTimeoutMs", "positive finite"),
        ("stream_idle_timeout_ms", 2_147_483_648, "streamIdleTimeoutMs", "no greater"),
        ("stream_idle_timeout_ms", 0, "streamIdleTimeoutMs", "positive finite"),
        ("stream_keepalive_timeout_ms", -1, "streamKeepaliveTimeoutMs", "positive"),
        ("total_timeout_ms", math.nan, "totalTimeoutMs", "finite"),
        ("pool_maxsize", 0, "poolMaxsize", POSITIVE),
        ("thinking", "sometimes", "thinking", 'must be one of "enabled", "disabled"'),
        ("reasoning_effort", "medium", "reasoningEffort", 'one of "off", "low"'),
        ("api_key_env", "", "apiKeyEnv", NON_EMPTY),
        ("base_url", "ftp://x", "baseURL", "must be an http:// or https:// URL"),
        ("retry_policy", {"mode": "sometimes"}, "retryPolicy.mode", "must be one of"),
        (
            "retry_policy",
            {"mode": "normal", "maxRetires": 1},
            "retryPolicy.maxRetires",
            'is not a known key (expected one of "mode", "maxRetries"',
        ),
        (
            "retry_policy",
            {"mode": "normal", "backoff": {"jitterRatio": 2}},
            "retryPolicy.backoff.jitterRatio",
            "must be between 0 and 1",
        ),
        ("retry_policy", 42, "retryPolicy", "must be a mapping"),
        ("empty_response_as_stop", "yes", "emptyResponseAsStop", "must be a boolean"),
    ],
)
def test_every_bad_value_is_a_config_error_keyed_by_its_config_key(
    field, value, key, detail
):
    with pytest.raises(AdapterConfigError) as caught:
        DeepSeekConfig(**{field: value})
    error = caught.value
    assert isinstance(error, PluginConfigError)
    assert isinstance(error, ValueError)
    assert error.key == key
    assert detail in error.detail
    assert error.problems == ((key, error.detail),)
    assert str(error) == f"llm-deepseek: {key} {error.detail}"


def test_the_retry_policy_is_resolved_and_exposed():
    config = DeepSeekConfig(retry_policy={"mode": "normal", "maxRetries": 2})  # type: ignore[arg-type]
    assert config.retry_policy == NormalRetryPolicy(max_retries=2)
    policy = resolve_retry_policy({"mode": "always"}, "x")
    # A config built in Python may hold a resolved policy: it is kept as is.
    assert DeepSeekConfig(retry_policy=policy).retry_policy is policy
    assert DeepSeekConfig().retry_policy is DEFAULT_RETRY_POLICY
    with DeepSeekAdapter(retry_policy=policy, environ={}) as adapter:
        assert adapter.provider_retry_policy(PROVIDER_ROUTE) is policy
    with DeepSeekAdapter(environ={}) as adapter:
        assert adapter.provider_retry_policy(PROVIDER_ROUTE) == DEFAULT_RETRY_POLICY
    with pytest.raises(AdapterConfigError, match="retryPolicy must be"):
        DeepSeekAdapter(retry_policy=42, environ={})


def test_the_constructor_builds_a_config_and_refuses_unknown_keywords():
    with DeepSeekAdapter(max_tokens=9_000, environ={}) as adapter:
        assert adapter.config == DeepSeekConfig(max_tokens=9_000)
    with pytest.raises(TypeError) as caught:
        DeepSeekAdapter(max_token=9_000, environ={})
    assert "'max_token'" in str(caught.value)
    assert "DeepSeekConfig fields: api_key_env, base_url" in str(caught.value)


def test_from_config_takes_a_built_config():
    config = DeepSeekConfig(base_url="http://gateway.test/v1/", max_tokens=7)
    with DeepSeekAdapter.from_config(config, api_key="k", environ={}) as adapter:
        assert adapter.config is config
        assert adapter.base_url == "http://gateway.test/v1"
        assert _info(adapter).default_max_tokens == 7
        assert "api_key=***" in repr(adapter)
    with pytest.raises(TypeError, match="config must be a DeepSeekConfig"):
        DeepSeekAdapter.from_config({"maxTokens": 7})  # type: ignore[arg-type]
    with pytest.raises(AdapterConfigError) as caught:
        DeepSeekAdapter.from_config(
            DeepSeekConfig(), environ={"DEEPSEEK_BASE_URL": "api.deepseek.com"}
        )
    assert caught.value.key == "baseURL"


# --- environment ----------------------------------------------------------------------


def test_the_base_url_comes_from_config_then_environment_then_public_default():
    env = {"DEEPSEEK_BASE_URL": "http://gateway.test/"}
    assert resolve_base_url(DeepSeekConfig(), env) == "http://gateway.test"
    assert (
        resolve_base_url(DeepSeekConfig(base_url="https://x.test/"), env)
        == "https://x.test"
    )
    assert resolve_base_url(DeepSeekConfig(), {}) == PUBLIC_BASE_URL
    assert resolve_base_url(DeepSeekConfig(), {"DEEPSEEK_BASE_URL": ""}) == (
        PUBLIC_BASE_URL
    )
    with DeepSeekAdapter(environ=env) as adapter:
        assert adapter.base_url == "http://gateway.test"


def test_the_adapter_is_constructible_directly_with_defaults():
    with DeepSeekAdapter(environ={}) as adapter:
        assert [m.id for m in adapter.list_models(PROVIDER_ROUTE)] == [
            m.id for m in DEFAULT_MODELS
        ]


def test_config_reprs_hide_credentials_in_the_base_url():
    url = "https://user:pw-secret@h.test/v1?api_key=q-secret"
    config = DeepSeekConfig(base_url=url)
    with DeepSeekAdapter.from_config(config, environ={}) as adapter:
        shown_adapter = repr(adapter)
    for shown in (repr(config), str(config), shown_adapter):
        assert "pw-secret" not in shown
        assert "q-secret" not in shown
        assert "https://***@h.test/v1?api_key=***" in shown
    with pytest.raises(AdapterConfigError) as caught:
        DeepSeekConfig(base_url="https://user:pw-secret@h.test/v1#frag")
    assert "pw-secret" not in str(caught.value)


def test_the_repr_never_shows_the_key():
    with DeepSeekAdapter("sk-very-secret", environ={}) as adapter:
        assert "sk-very-secret" not in repr(adapter)
        assert "api_key=***" in repr(adapter)
    with DeepSeekAdapter(environ={"DEEPSEEK_API_KEY": "sk-env-secret"}) as adapter:
        assert "sk-env-secret" not in repr(adapter)
        assert "DEEPSEEK_API_KEY" in repr(adapter)


def test_an_explicit_key_no_header_can_carry_fails_at_construction_without_echo():
    with pytest.raises(LlmError) as caught:
        DeepSeekAdapter("sk bad\u00e9", environ={})
    assert caught.value.code == ErrorCode.INVALID_CREDENTIAL
    assert "sk bad" not in caught.value.message


def test_a_call_keeps_the_config_it_was_prepared_with():
    with LoopbackServer() as server:
        server.enqueue(Reply(body=sse_events([FIRST, text("x"), finish()])))
        adapter = DeepSeekAdapter("k", base_url=server.url, max_tokens=11)
        try:
            prepared = adapter.prepare_call(PROVIDER_ROUTE, "m")
            assert prepared.model.default_max_tokens == 11
            options = GenerateOptions(
                provider=PROVIDER_ROUTE,
                model="m",
                messages=(create_user_message("hi"),),
            )
            list(validate_stream(prepared.stream(options)))
            assert server.requests[0].json()["max_tokens"] == 11
        finally:
            adapter.close()


# --- plugin ---------------------------------------------------------------------------


def test_the_plugin_registers_the_route_and_unregisters_on_dispose():
    runtime = LlmRuntime()
    ctx = PluginContext(runtime, plugin_id="llm-deepseek", environ={})
    deepseek_plugin.apply(
        ctx, DeepSeekConfig(retry_policy={"mode": "normal", "maxRetries": 1})
    )
    assert runtime.list_providers() == (
        LlmProviderInfo(id=PROVIDER_ROUTE, name="DeepSeek"),
    )
    assert runtime.provider_retry_policy(PROVIDER_ROUTE) == NormalRetryPolicy(
        max_retries=1
    )
    assert len(runtime.list_models(PROVIDER_ROUTE)) == 3
    ctx.dispose()
    assert runtime.list_providers() == ()


def test_the_plugin_contract_names():
    assert deepseek_plugin.name == "llm-deepseek"
    assert deepseek_plugin.inject == ("llm",)
    assert deepseek_plugin.Config is DeepSeekConfig


def test_a_bad_config_registers_nothing():
    runtime = LlmRuntime()
    ctx = PluginContext(
        runtime, plugin_id="llm-deepseek", environ={"DEEPSEEK_BASE_URL": "x"}
    )
    with pytest.raises(AdapterConfigError, match="baseURL"):
        deepseek_plugin.apply(ctx, None)
    assert runtime.list_providers() == ()


def test_keyless_load_keeps_the_catalog_and_requests_fail_missing_credential():
    runtime = LlmRuntime()
    ctx = PluginContext(runtime, plugin_id="llm-deepseek", environ={})
    deepseek_plugin.apply(ctx, None)
    try:
        assert len(runtime.list_models(PROVIDER_ROUTE)) == 3
        options = GenerateOptions(
            provider=PROVIDER_ROUTE, model="deepseek-v4-flash", messages=()
        )
        (chunk,) = list(validate_stream(runtime.stream(options)))
        assert chunk.reason.failure.code == "MISSING_CREDENTIAL"  # type: ignore[union-attr]
        assert "DEEPSEEK_API_KEY" in chunk.reason.failure.message  # type: ignore[union-attr]
    finally:
        ctx.dispose()


def test_a_yaml_composition_boots_and_streams_with_the_env_key(tmp_path: Path):
    with LoopbackServer() as server:
        server.enqueue(Reply(body=sse_events([FIRST, text("from yaml"), finish()])))
        path = tmp_path / "cordis.yml"
        path.write_text(
            "- id: llm-deepseek\n"
            "  name: llm-deepseek\n"
            "  config:\n"
            "    baseURL: ${DEEPSEEK_BASE_URL}\n"
            "    reasoningEffort: max\n"
            "    streamIdleTimeoutMs: 5000\n"
            "    models: [{id: deepseek-v4-flash, contextWindow: 128000}]\n"
        )
        env = {"DEEPSEEK_BASE_URL": server.url, "DEEPSEEK_API_KEY": "sk-yaml"}
        with load_composition(path, environ=env) as composition:
            runtime = composition.runtime
            assert (
                runtime.resolve_model_info(
                    PROVIDER_ROUTE, "deepseek-v4-flash"
                ).context.context_window
                == 128_000
            )  # type: ignore[union-attr]
            config = runtime.resolve_call_config(
                LlmCallConfig(provider=PROVIDER_ROUTE, model="deepseek-v4-flash")
            )
            options = GenerateOptions(
                provider=PROVIDER_ROUTE,
                model="deepseek-v4-flash",
                messages=(create_user_message("hi"),),
                reasoning_effort=config.reasoning_effort,
                max_tokens=config.max_tokens,
            )
            chunks = list(validate_stream(runtime.stream(options)))
        assert chunks[-1].reason.kind == "stop"  # type: ignore[union-attr]
        (request,) = server.requests
        assert request.header("authorization") == "Bearer sk-yaml"
        assert request.json()["reasoning_effort"] == "max"
        assert server.wait_until_idle()


def test_a_yaml_composition_with_a_bad_value_fails_loudly(tmp_path: Path):
    path = tmp_path / "cordis.yml"
    path.write_text("- id: ds\n  name: llm-deepseek\n  config: {maxTokens: 0}\n")
    with pytest.raises(PluginLoadError, match="maxTokens"):
        load_composition(path, environ={})


def test_wire_helpers_stay_off_the_package_roots():
    for helper in (
        "build_body",
        "ChatCompletionsTranslator",
        "iter_sse",
        "DONE",
        "http_error",
        "StreamingCall",
    ):
        assert not hasattr(dsh_llm, helper)
        assert not hasattr(dsh_llm.adapters, helper)


def test_through_the_runtime_a_disabled_deployment_refuses_high_without_a_request():
    with LoopbackServer() as server:
        runtime = LlmRuntime()
        adapter = DeepSeekAdapter(
            "k", base_url=server.url, thinking="disabled", reasoning_effort="off"
        )
        runtime.register_adapter([PROVIDER_ROUTE], adapter)
        try:
            options = GenerateOptions(
                provider=PROVIDER_ROUTE,
                model="deepseek-v4-flash",
                messages=(create_user_message("hi"),),
                reasoning_effort="high",
            )
            (chunk,) = list(validate_stream(runtime.stream(options)))
            assert chunk.reason.failure.code == "UNSUPPORTED_REASONING_EFFORT"  # type: ignore[union-attr]
            assert server.requests == ()
            server.enqueue(Reply(body=sse_events([FIRST, text("x"), finish()])))
            config = runtime.resolve_call_config(
                LlmCallConfig(provider=PROVIDER_ROUTE, model="deepseek-v4-flash")
            )
            assert config.reasoning_effort == "off"
            list(
                validate_stream(runtime.stream(options.evolve(reasoning_effort="off")))
            )
            body = server.requests[0].json()
            assert body["thinking"] == {"type": "disabled"}
            assert "reasoning_effort" not in body
        finally:
            adapter.close()


# --- keyed config errors ----------------------------------------------------------


def test_thinking_disabled_with_another_effort_is_keyed_reasoning_effort():
    with pytest.raises(AdapterConfigError) as caught:
        DeepSeekConfig(thinking="disabled", reasoning_effort="max")
    assert caught.value.key == "reasoningEffort"
    assert caught.value.detail == (
        'must be "off" or unset (only reasoningEffort "off" can be configured when '
        "thinking is disabled)"
    )


def test_the_constructor_raises_the_same_keyed_error():
    with pytest.raises(AdapterConfigError) as caught:
        DeepSeekAdapter(max_tokens=0, environ={})
    assert caught.value.key == "maxTokens"
    with pytest.raises(AdapterConfigError) as caught:
        DeepSeekAdapter(retry_policy=42, environ={})
    assert caught.value.key == "retryPolicy"


def test_the_adapter_error_is_a_plugin_config_error_naming_the_package():
    with pytest.raises(PluginConfigError) as caught:
        DeepSeekConfig(max_tokens=0)
    assert type(caught.value) is AdapterConfigError
    assert caught.value.key == "maxTokens"
    assert str(caught.value) == f"llm-deepseek: maxTokens {SAFE}"


# Every value the YAML types allow but the adapter refuses: the loader reports
# it as `config key "<key>" ...` with `PluginLoadError.key` set, never as a
# failed apply(), and registers nothing.
KEYED_LOAD_ERRORS = [
    ("apiKeyEnv: ''", "apiKeyEnv", NON_EMPTY),
    ("maxTokens: 0", "maxTokens", SAFE),
    ("maxTokens: 9007199254740992", "maxTokens", SAFE),
    ("maxTokens: '8'", "maxTokens", "must be an integer, got a string"),
    ("thinking: sometimes", "thinking", '"enabled", "disabled" or null'),
    ("pooolMaxsize: 1", "pooolMaxsize", 'did you mean "poolMaxsize"?'),
    ("defaultContextWindow: 0", "defaultContextWindow", "must be a positive integer"),
    ("streamIdleTimeoutMs: 0", "streamIdleTimeoutMs", "positive finite number"),
    ("streamIdleTimeoutMs: .inf", "streamIdleTimeoutMs", "positive finite number"),
    ("streamIdleTimeoutMs: 2147483648", "streamIdleTimeoutMs", "no greater than"),
    ("streamKeepaliveTimeoutMs: -1", "streamKeepaliveTimeoutMs", "positive finite"),
    ("totalTimeoutMs: .nan", "totalTimeoutMs", "positive finite number"),
    ("poolMaxsize: 0", "poolMaxsize", "must be a positive integer"),
    (
        "thinking: disabled\n    reasoningEffort: high",
        "reasoningEffort",
        'only reasoningEffort "off" can be configured when thinking is disabled',
    ),
    ("baseURL: ftp://x", "baseURL", "must be an http:// or https:// URL"),
    ("baseURL: 'http://h/v1#top'", "baseURL", "must not have a #fragment"),
    ("baseURL: http://h/v1/chat/completions", "baseURL", "must end at the API root"),
    ("retryPolicy: {mode: sometimes}", "retryPolicy.mode", '"normal", "always"'),
    (
        "retryPolicy: {mode: normal, maxRetires: 1}",
        "retryPolicy.maxRetires",
        'did you mean "maxRetries"?',
    ),
    (
        "retryPolicy: {mode: normal, maxRetries: -1}",
        "retryPolicy.maxRetries",
        "non-negative safe integer",
    ),
    (
        "retryPolicy: {mode: always, backoff: {initialDelayMs: 0}}",
        "retryPolicy.backoff.initialDelayMs",
        "positive finite number",
    ),
    ("models: [{id: ''}]", "models[0].id", NON_EMPTY),
    ("models: [{id: a, name: ''}]", "models[0].name", NON_EMPTY),
    ("models: [{id: a, description: 3}]", "models[0].description", "a string"),
    ("models: [{id: a, contextWindow: 0}]", "models[0].contextWindow", "positive"),
    ("models: [{id: a}, {id: b, maxTokens: 0}]", "models[1].maxTokens", "positive"),
    ("models: [{id: a, inputModalities: []}]", "models[0].inputModalities", "must be"),
    (
        "models: [{id: a, inputModalities: [audio]}]",
        "models[0].inputModalities",
        '["text", "image"]',
    ),
    (
        "models: [{id: a, inputModalities: [text, text]}]",
        "models[0].inputModalities",
        '["text", "image"]',
    ),
    ("models: [{id: a}, {id: a}]", "models[1].id", "repeats the model"),
]


@pytest.mark.parametrize(("config", "key", "detail"), KEYED_LOAD_ERRORS)
def test_a_value_out_of_bounds_fails_the_load_keyed(
    tmp_path: Path, config, key, detail
):
    path = tmp_path / "dsh.yml"
    path.write_text(f"- id: ds\n  name: llm-deepseek\n  config:\n    {config}\n")
    runtime = LlmRuntime()
    with pytest.raises(PluginLoadError) as caught:
        load_composition(path, runtime, environ={})
    error = caught.value
    assert error.plugin_id == "ds"
    assert error.key == key
    assert error.message.startswith(f'plugin "ds": config key "{key}" ')
    assert detail in error.message
    assert "apply() failed" not in error.message
    assert isinstance(error.__cause__, ConfigError)
    assert error.__cause__.key == key
    assert detail in error.__cause__.detail
    assert runtime.list_providers() == ()


def test_a_bad_deepseek_base_url_variable_fails_the_load_keyed_base_url(
    tmp_path: Path,
):
    path = tmp_path / "dsh.yml"
    path.write_text("- id: ds\n  name: llm-deepseek\n")
    with pytest.raises(PluginLoadError) as caught:
        load_composition(path, environ={"DEEPSEEK_BASE_URL": "api.deepseek.com"})
    assert caught.value.key == "baseURL"
    assert caught.value.message == (
        'plugin "ds": config key "baseURL" must be an http:// or https:// URL '
        "(read from DEEPSEEK_BASE_URL)"
    )
