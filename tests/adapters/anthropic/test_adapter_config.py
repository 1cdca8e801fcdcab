"""AnthropicConfig, AnthropicAdapter metadata and the ``llm-anthropic`` plugin:
defaults, ``resolve_model`` without I/O, every bad value keyed by its config key,
reprs without secrets, and a YAML composition that boots (the plugin loaded by
module path: tests never load entry points) or fails naming the bad key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dsh_llm.adapter import LlmProviderInfo
from dsh_llm.adapters import AdapterConfigError
from dsh_llm.adapters import CatalogModel
from dsh_llm.adapters.anthropic import DEFAULT_MODELS
from dsh_llm.adapters.anthropic import PROVIDER_ROUTE
from dsh_llm.adapters.anthropic import AnthropicAdapter
from dsh_llm.adapters.anthropic import AnthropicConfig
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.plugins import PluginContext
from dsh_llm.plugins import PluginLoadError
from dsh_llm.plugins import load_composition
from dsh_llm.plugins.builtin import ANTHROPIC as anthropic_plugin
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import create_user_message
from dsh_llm.retry import NormalRetryPolicy
from dsh_llm.runtime import LlmRuntime
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply
from dsh_llm.validator import validate_stream

from .replay import FIXTURES

PLUGIN = "dsh_llm.plugins.builtin:ANTHROPIC"


def test_the_default_catalog_is_the_claude_catalog_with_image_input() -> None:
    with AnthropicAdapter(environ={}) as adapter:
        models = adapter.list_models(PROVIDER_ROUTE)
        assert [m.id for m in models] == [
            "claude-opus-5-5",
            "claude-fable-5-1",
            "claude-sonnet-5-5",
            "claude-opus-5",
            "claude-sonnet-5",
            "claude-haiku-4-5",
        ]
        assert {m.input_modalities for m in models} == {("text", "image")}
        assert adapter.provider_info(PROVIDER_ROUTE) == LlmProviderInfo(
            id=PROVIDER_ROUTE, name="Anthropic"
        )
        assert adapter.base_url == "https://api.anthropic.com"


def test_resolve_model_gives_window_cap_and_efforts_without_io() -> None:
    with AnthropicAdapter(environ={}, reasoning_effort="low") as adapter:
        haiku = adapter.resolve_model(PROVIDER_ROUTE, "claude-haiku-4-5")
        opus = adapter.resolve_model(PROVIDER_ROUTE, "claude-opus-5-5")
        other = adapter.resolve_model(PROVIDER_ROUTE, "claude-3-haiku-20240307")
    assert (haiku.name, haiku.default_max_tokens) == ("Claude Haiku 4.5", 32000)
    assert haiku.context is not None
    assert haiku.context.context_window == 200_000
    assert haiku.reasoning is not None
    assert [e.id for e in haiku.reasoning.efforts] == [
        "off",
        "low",
        "medium",
        "high",
        "max",
    ]
    assert haiku.reasoning.default_effort == "low"
    assert opus.reasoning is not None
    assert [e.id for e in opus.reasoning.efforts] == [
        "low",
        "medium",
        "high",
        "xhigh",
        "max",
    ]
    assert opus.reasoning.default_effort == "low"
    assert opus.context is not None
    assert opus.context.context_window == 1_000_000
    # An unlisted id: the configured defaults, text only, budget thinking.
    assert (other.name, other.default_max_tokens, other.input_modalities) == (
        "claude-3-haiku-20240307",
        8192,
        ("text",),
    )
    assert other.context is not None
    assert other.context.context_window == 200_000


def test_configured_models_replace_the_catalog() -> None:
    config = AnthropicConfig(
        models=[CatalogModel(id="proxy-claude", name="Proxy", context_window=50_000)]
    )
    with AnthropicAdapter.from_config(config, environ={}) as adapter:
        (model,) = adapter.list_models(PROVIDER_ROUTE)
        info = adapter.resolve_model(PROVIDER_ROUTE, "proxy-claude")
    assert (model.id, model.name) == ("proxy-claude", "Proxy")
    assert info.context is not None
    assert info.context.context_window == 50_000
    assert AnthropicConfig(models=[]).models == ()
    assert AnthropicConfig().models == DEFAULT_MODELS


@pytest.mark.parametrize(
    ("field", "value", "key"),
    [
        ("max_tokens", 0, "maxTokens"),
        ("default_context_window", -1, "defaultContextWindow"),
        ("stream_idle_timeout_ms", 0, "streamIdleTimeoutMs"),
        ("stream_keepalive_timeout_ms", -5, "streamKeepaliveTimeoutMs"),
        ("total_timeout_ms", float("nan"), "totalTimeoutMs"),
        ("pool_maxsize", 0, "poolMaxsize"),
        ("base_url", "ftp://anthropic", "baseURL"),
        ("base_url", "https://api.anthropic.com/v1/messages", "baseURL"),
        ("api_key_env", "", "apiKeyEnv"),
        ("anthropic_version", "2023-06-01\n", "anthropicVersion"),
        ("beta", ["a,b"], "beta"),
        ("reasoning_effort", "extreme", "reasoningEffort"),
        ("empty_response_as_stop", 1, "emptyResponseAsStop"),
        ("unmarked_cap_cut", "yes", "unmarkedCapCut"),
        ("models", [CatalogModel(id="a"), CatalogModel(id="a")], "models[1].id"),
    ],
)
def test_every_bad_value_is_keyed_by_its_config_key(
    field: str, value: Any, key: str
) -> None:
    with pytest.raises(AdapterConfigError) as caught:
        AnthropicAdapter(environ={}, **{field: value})
    error = caught.value
    assert error.key == key
    assert str(error) == f"llm-anthropic: {key} {error.detail}"


def test_a_catalog_entry_error_is_keyed_by_its_field() -> None:
    with pytest.raises(AdapterConfigError) as caught:
        CatalogModel(id="x", context_window=0)
    assert caught.value.key == "contextWindow"


def test_an_unknown_keyword_is_a_type_error_listing_the_fields() -> None:
    with pytest.raises(TypeError, match=r"anthropic_version"):
        AnthropicAdapter(environ={}, max_token=5)


def test_a_bad_base_url_in_the_environment_names_the_variable_not_the_url() -> None:
    url = "ftp://user:hunter2@host"
    with pytest.raises(AdapterConfigError) as caught:
        AnthropicAdapter(environ={"ANTHROPIC_BASE_URL": url})
    assert caught.value.key == "baseURL"
    assert "ANTHROPIC_BASE_URL" in str(caught.value)
    assert "hunter2" not in str(caught.value)


def test_reprs_never_show_the_key_nor_url_credentials() -> None:
    adapter = AnthropicAdapter(
        "sk-ant-secret-repr", base_url="https://user:hunter2@proxy.test", environ={}
    )
    with adapter:
        text = repr(adapter)
    assert "sk-ant-secret-repr" not in text
    assert "hunter2" not in text
    assert text == "AnthropicAdapter(base_url='https://***@proxy.test', api_key=***)"
    assert "hunter2" not in repr(AnthropicConfig(base_url="https://u:hunter2@h.test"))


def test_an_explicit_key_no_header_can_carry_fails_at_construction() -> None:
    with pytest.raises(LlmError) as caught:
        AnthropicAdapter("sk-ant\nbad", environ={})
    assert caught.value.code == ErrorCode.INVALID_CREDENTIAL
    assert "sk-ant" not in caught.value.message


# --- plugin ---------------------------------------------------------------------------


def test_the_plugin_contract_names() -> None:
    assert anthropic_plugin.name == "llm-anthropic"
    assert anthropic_plugin.inject == ("llm",)
    assert anthropic_plugin.Config is AnthropicConfig


def test_the_plugin_registers_the_route_and_unregisters_on_dispose() -> None:
    runtime = LlmRuntime()
    ctx = PluginContext(runtime, plugin_id="llm-anthropic", environ={})
    anthropic_plugin.apply(
        ctx, AnthropicConfig(retry_policy={"mode": "normal", "maxRetries": 1})
    )
    assert runtime.list_providers() == (
        LlmProviderInfo(id=PROVIDER_ROUTE, name="Anthropic"),
    )
    assert runtime.provider_retry_policy(PROVIDER_ROUTE) == NormalRetryPolicy(
        max_retries=1
    )
    ctx.dispose()
    assert runtime.list_providers() == ()


def test_keyless_load_keeps_the_catalog_and_a_request_fails_missing_credential() -> (
    None
):
    runtime = LlmRuntime()
    ctx = PluginContext(runtime, plugin_id="llm-anthropic", environ={})
    anthropic_plugin.apply(ctx, None)
    try:
        assert len(runtime.list_models(PROVIDER_ROUTE)) == len(DEFAULT_MODELS)
        options = GenerateOptions(
            provider=PROVIDER_ROUTE, model="claude-haiku-4-5", messages=()
        )
        (chunk,) = list(validate_stream(runtime.stream(options)))
        assert chunk.reason.failure.code == "MISSING_CREDENTIAL"  # type: ignore[union-attr]
        assert "ANTHROPIC_API_KEY" in chunk.reason.failure.message  # type: ignore[union-attr]
    finally:
        ctx.dispose()


def test_a_yaml_composition_boots_and_streams_with_the_env_key(tmp_path: Path) -> None:
    with LoopbackServer() as server:
        server.enqueue(Reply(body=(FIXTURES / "text.sse").read_bytes()))
        path = tmp_path / "dsh.yml"
        path.write_text(
            "- id: claude\n"
            f"  name: {PLUGIN}\n"
            "  config:\n"
            "    baseURL: ${ANTHROPIC_BASE_URL}\n"
            "    apiKeyEnv: MY_CLAUDE_KEY\n"
            '    anthropicVersion: "2023-06-01"  # quoted: YAML reads a date\n'
            "    beta: [context-1m]\n"
            "    reasoningEffort: medium\n"
            "    maxTokens: 4000\n"
            "    streamIdleTimeoutMs: 5000\n"
            "    models: [{id: claude-haiku-4-5, contextWindow: 100000}]\n",
            encoding="utf-8",
        )
        env = {"ANTHROPIC_BASE_URL": server.url, "MY_CLAUDE_KEY": "sk-yaml"}
        with load_composition(path, environ=env) as composition:
            runtime = composition.runtime
            info = runtime.resolve_model_info(PROVIDER_ROUTE, "claude-haiku-4-5")
            assert info.context is not None
            assert info.context.context_window == 100_000
            options = GenerateOptions(
                provider=PROVIDER_ROUTE,
                model="claude-haiku-4-5",
                messages=(create_user_message("hi"),),
            )
            chunks = list(validate_stream(runtime.stream(options), strict=True))
        assert chunks[-1].reason.kind == "stop"  # type: ignore[union-attr]
        (request,) = server.requests
        assert request.header("x-api-key") == "sk-yaml"
        assert request.header("anthropic-beta") == "context-1m"
        body = request.json()
        assert body["thinking"] == {"type": "enabled", "budget_tokens": 3999}
        assert body["max_tokens"] == 4000
        assert server.wait_until_idle()


@pytest.mark.parametrize(
    ("config", "key"),
    [
        ("{maxTokenz: 5}", "maxTokenz"),
        ("{maxTokens: 0}", "maxTokens"),
        ("{models: [{id: a, contextWindow: 0}]}", "models[0].contextWindow"),
        ("{reasoningEffort: huge}", "reasoningEffort"),
    ],
)
def test_a_bad_yaml_entry_fails_the_load_naming_the_key(
    tmp_path: Path, config: str, key: str
) -> None:
    path = tmp_path / "dsh.yml"
    path.write_text(f"- id: claude\n  name: {PLUGIN}\n  config: {config}\n")
    with pytest.raises(PluginLoadError) as caught:
        load_composition(path, environ={})
    assert key in str(caught.value)


def test_a_bad_base_url_variable_fails_the_load_and_registers_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "dsh.yml"
    path.write_text(f"- id: claude\n  name: {PLUGIN}\n")
    with pytest.raises(PluginLoadError) as caught:
        load_composition(path, environ={"ANTHROPIC_BASE_URL": "not a url"})
    assert "baseURL" in str(caught.value)
    assert "ANTHROPIC_BASE_URL" in str(caught.value)
