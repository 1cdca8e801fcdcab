"""``AzureOpenAIConfig`` and the endpoint: the resource, a base URL or
``AZURE_OPENAI_ENDPOINT``; the v1 API or the deployment paths; every bad value
an ``AdapterConfigError`` keyed by its config key (never echoing a URL); the
``repr``; ``from_config``; the ``llm-azure`` plugin made from its table row."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import pytest

from dsh_llm import collect
from dsh_llm.adapters import AdapterConfigError
from dsh_llm.adapters import BuiltinFamily
from dsh_llm.adapters.azure import PROVIDER_ROUTE
from dsh_llm.adapters.azure import AzureModel
from dsh_llm.adapters.azure import AzureOpenAIAdapter
from dsh_llm.adapters.azure import AzureOpenAIConfig
from dsh_llm.config import structure_config
from dsh_llm.plugins import PluginLoadError
from dsh_llm.plugins import load_composition
from dsh_llm.plugins.builtin import BuiltinPlugin
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import create_user_message
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply

from .replay import body

ROW = BuiltinFamily(
    route="azure",
    plugin="llm-azure",
    adapter="dsh_llm.adapters.azure:AzureOpenAIAdapter",
    display_name="Azure OpenAI",
    key_env="AZURE_OPENAI_API_KEY",
)
"""The row this family needs in ``dsh_llm.adapters.BUILTIN_FAMILIES``."""
PLUGIN = BuiltinPlugin(ROW)
"""The ``llm-azure`` plugin that row makes (loaded by name below)."""


def _base(**options: Any) -> str:
    options.setdefault("environ", {})
    with AzureOpenAIAdapter(**options) as adapter:
        return adapter.base_url


@pytest.mark.parametrize(
    ("options", "root"),
    [
        ({"resource": "contoso"}, "https://contoso.openai.azure.com/openai/v1"),
        (
            {"resource": "contoso", "api_version": "2024-10-21"},
            "https://contoso.openai.azure.com/openai?api-version=2024-10-21",
        ),
        (
            {"base_url": "https://contoso.cognitiveservices.azure.com/"},
            "https://contoso.cognitiveservices.azure.com/openai/v1",
        ),
        (
            {"base_url": "https://contoso.openai.azure.com/openai/v1/"},
            "https://contoso.openai.azure.com/openai/v1",
        ),
        (
            {"base_url": "https://contoso.openai.azure.com/openai"},
            "https://contoso.openai.azure.com/openai/v1",
        ),
        (
            {"base_url": "https://contoso.openai.azure.com?api-version=preview"},
            "https://contoso.openai.azure.com/openai?api-version=preview",
        ),
        (
            {"environ": {"AZURE_OPENAI_ENDPOINT": "https://env.openai.azure.com/"}},
            "https://env.openai.azure.com/openai/v1",
        ),
        (
            {
                "resource": "cfg",
                "environ": {"AZURE_OPENAI_ENDPOINT": "https://env.openai.azure.com"},
            },
            "https://cfg.openai.azure.com/openai/v1",
        ),
    ],
)
def test_the_api_root(options: dict[str, Any], root: str) -> None:
    assert _base(**options) == root


@pytest.mark.parametrize(
    ("options", "key", "detail"),
    [
        ({"resource": "bad_name"}, "resource", "must be an Azure resource name"),
        ({"resource": "-x"}, "resource", "must be an Azure resource name"),
        ({"resource": "a", "base_url": "https://a"}, "resource", "cannot both be set"),
        ({"base_url": "ftp://host"}, "baseURL", "must be an http:// or https:// URL"),
        (
            {"base_url": "https://h/openai/deployments/d/chat/completions"},
            "baseURL",
            "not an operation's URL",
        ),
        ({"base_url": "https://h/openai/v1/responses"}, "baseURL", "operation"),
        (
            {"base_url": "https://h/openai/v1", "api_version": "2024-10-21"},
            "apiVersion",
            "does not apply to the v1 API",
        ),
        (
            {"base_url": "https://h?api-version=2024-10-21", "api_version": "x"},
            "apiVersion",
            "give it once",
        ),
        (
            {"resource": "a", "api_version": "2024 10 21"},
            "apiVersion",
            "must be an API",
        ),
        ({"resource": "a", "api_version": ""}, "apiVersion", "non-empty"),
        ({"resource": "a", "wire": "completions"}, "wire", "must be one of"),
        ({"resource": "a", "auth": "key"}, "auth", "must be one of"),
        ({"resource": "a", "max_tokens_field": "n"}, "maxTokensField", "one of"),
        (
            {"resource": "a", "models": [{"id": "m", "deployment": ""}]},
            "models[0].deployment",
            "non-empty",
        ),
        ({"resource": "a", "models": ["m", "m"]}, "models[1].id", "repeats"),
        ({}, "resource", "export AZURE_OPENAI_ENDPOINT"),
    ],
)
def test_a_bad_value_is_keyed_by_its_config_key(
    options: dict[str, Any], key: str, detail: str
) -> None:
    with pytest.raises(AdapterConfigError) as caught:
        AzureOpenAIAdapter(environ={}, **options)
    assert caught.value.key == key
    assert detail in caught.value.detail
    assert str(caught.value).startswith(f"llm-azure: {key} ")


def test_a_bad_endpoint_in_the_environment_names_the_variable() -> None:
    secret_url = "ftp://user:hunter2-password@host"
    with pytest.raises(AdapterConfigError) as caught:
        AzureOpenAIAdapter(environ={"AZURE_OPENAI_ENDPOINT": secret_url})
    assert caught.value.key == "baseURL"
    assert "AZURE_OPENAI_ENDPOINT" in str(caught.value)
    assert "hunter2" not in str(caught.value)


def test_the_repr_shows_the_root_wire_and_key_source_only() -> None:
    with AzureOpenAIAdapter(
        resource="contoso", api_version="2024-10-21", wire="responses", environ={}
    ) as adapter:
        assert repr(adapter) == (
            "AzureOpenAIAdapter(base_url='https://contoso.openai.azure.com/openai"
            "?api-version=2024-10-21', wire='responses', "
            "api_key_env='AZURE_OPENAI_API_KEY')"
        )
    with AzureOpenAIAdapter(
        "k" * 30,
        base_url="https://u:pw-secret@gw.example/?subscription-key=abcd1234",
        auth="api-key",
    ) as adapter:
        shown = repr(adapter)
    assert "pw-secret" not in shown
    assert "subscription-key=***" in shown
    assert "abcd1234" not in shown
    assert "auth='api-key'" in shown
    assert "k" * 30 not in shown


def test_the_yaml_keys_build_the_config() -> None:
    config = structure_config(
        AzureOpenAIConfig,
        {
            "resource": "contoso",
            "apiVersion": "2025-04-01-preview",
            "wire": "responses",
            "auth": "entra-id",
            "apiKeyEnv": "MY_KEY",
            "tokenScope": "https://cognitiveservices.azure.us/.default",
            "maxTokensField": "max_tokens",
            "includeUsage": False,
            "models": [
                "plain-deployment",
                {
                    "id": "gpt-4o",
                    "deployment": "prod",
                    "inputModalities": ["text", "image"],
                },
            ],
        },
    )
    assert config.api_version == "2025-04-01-preview"
    assert config.auth == "entra-id"
    assert config.models == (
        AzureModel(id="plain-deployment"),
        AzureModel(id="gpt-4o", deployment="prod", input_modalities=("text", "image")),
    )
    assert config.deployment("gpt-4o") == "prod"
    assert config.deployment("plain-deployment") == "plain-deployment"
    assert config.deployment("unlisted") == "unlisted"
    with AzureOpenAIAdapter.from_config(config, environ={}) as adapter:
        assert adapter.config is config
        models = adapter.list_models(PROVIDER_ROUTE)
    assert [m.id for m in models] == ["plain-deployment", "gpt-4o"]
    assert models[1].input_modalities == ("text", "image")


def test_from_config_refuses_another_config_class() -> None:
    from dsh_llm.adapters.openai_responses import OpenAIResponsesConfig

    with pytest.raises(TypeError, match="AzureOpenAIConfig"):
        AzureOpenAIAdapter.from_config(OpenAIResponsesConfig())  # type: ignore[arg-type]


def test_an_unknown_keyword_lists_the_fields() -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'deployment'"):
        AzureOpenAIAdapter(resource="a", deployment="d", environ={})


def test_resolve_model_without_io() -> None:
    with AzureOpenAIAdapter(
        resource="contoso",
        models=[{"id": "gpt-4o", "contextWindow": 128000, "maxTokens": 4096}],
        environ={},
    ) as adapter:
        listed = adapter.resolve_model(PROVIDER_ROUTE, "gpt-4o")
        unlisted = adapter.resolve_model(PROVIDER_ROUTE, "other")
        info = adapter.provider_info(PROVIDER_ROUTE)
    assert listed.context is not None
    assert listed.context.context_window == 128000
    assert listed.default_max_tokens == 4096
    assert unlisted.context is None
    assert unlisted.input_modalities == ("text",)
    assert listed.reasoning is not None
    assert "high" in [effort.id for effort in listed.reasoning.efforts]
    assert info.name == "Azure OpenAI"


def test_the_row_makes_a_plugin_a_composition_loads(
    server: LoopbackServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "plugin-key-0123456789")
    composition = tmp_path / "dsh.yml"
    composition.write_text(
        "- id: azure\n"
        "  name: tests.adapters.azure.test_config:PLUGIN\n"
        f"  config: {{baseURL: '{server.url}', apiVersion: '2024-10-21',"
        " models: [{id: gpt-4o, deployment: prod}]}\n",
        encoding="utf-8",
    )
    server.enqueue(Reply(body=body("chat_prompt_filter_results_first")))
    with load_composition(composition) as loaded:
        assert [p.id for p in loaded.runtime.list_providers()] == ["azure"]
        options = GenerateOptions(
            provider="azure", model="gpt-4o", messages=(create_user_message("hi"),)
        )
        reply = collect(loaded.runtime.stream(options))
    assert reply.text == "Hello! How can I help?"
    (request,) = server.requests
    assert request.path == (
        "/openai/deployments/prod/chat/completions?api-version=2024-10-21"
    )
    assert request.header("api-key") == "plugin-key-0123456789"


def test_a_bad_composition_value_fails_the_load_keyed(tmp_path: Path) -> None:
    composition = tmp_path / "dsh.yml"
    composition.write_text(
        "- id: azure\n"
        "  name: tests.adapters.azure.test_config:PLUGIN\n"
        "  config: {resource: contoso, baseURL: 'https://x.example'}\n",
        encoding="utf-8",
    )
    with pytest.raises(PluginLoadError) as caught:
        load_composition(composition)
    assert "resource" in str(caught.value)
    assert "cannot both be set" in str(caught.value)


def test_an_unquoted_yaml_api_version_is_read_as_written(tmp_path: Path) -> None:
    # YAML reads 2024-10-21 as a date: the config takes it back as the version.
    composition = tmp_path / "dsh.yml"
    composition.write_text(
        "- id: azure\n"
        "  name: tests.adapters.azure.test_config:PLUGIN\n"
        "  config: {resource: contoso, apiVersion: 2024-10-21}\n",
        encoding="utf-8",
    )
    with load_composition(composition, environ={}) as loaded:
        (info,) = loaded.runtime.list_providers()
    assert info.id == "azure"
    config = structure_config(
        AzureOpenAIConfig, {"resource": "contoso", "apiVersion": date(2024, 10, 21)}
    )
    assert config.api_version == "2024-10-21"
    with pytest.raises(AdapterConfigError) as caught:
        AzureOpenAIConfig(resource="contoso", api_version=20241021)  # type: ignore[arg-type]
    assert caught.value.key == "apiVersion"
