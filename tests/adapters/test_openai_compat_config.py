"""OpenAICompatAdapter configuration, catalog and metadata, and the
``llm-openai-compatible`` plugin (direct ``apply`` and YAML compositions)."""

from __future__ import annotations

import importlib.metadata
import inspect
import math
import traceback
from pathlib import Path
from typing import Any

import attrs
import pytest

from dsh_llm.adapter import LlmProviderInfo
from dsh_llm.adapters import AdapterConfigError
from dsh_llm.adapters import CatalogModel
from dsh_llm.adapters.openai_compat import OpenAICompatAdapter
from dsh_llm.adapters.openai_compat import OpenAICompatConfig
from dsh_llm.credentials import Secret
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.plugins import PluginContext
from dsh_llm.plugins import PluginLoadError
from dsh_llm.plugins import load_composition
from dsh_llm.plugins.builtin import OPENAI_COMPATIBLE as openai_compat_plugin
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import create_user_message
from dsh_llm.retry import DEFAULT_RETRY_POLICY
from dsh_llm.retry import NormalRetryPolicy
from dsh_llm.retry import resolve_retry_policy
from dsh_llm.runtime import LlmRuntime
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply
from dsh_llm.testing import sse_events
from dsh_llm.validator import validate_stream

from .chat_chunks import finish
from .chat_chunks import text

BASE = "http://127.0.0.1:8080/v1"


def _config_error(**options: Any) -> AdapterConfigError:
    options.setdefault("base_url", BASE)
    with pytest.raises(AdapterConfigError) as caught:
        OpenAICompatAdapter(**options)
    return caught.value


# --- constructor checks ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "key", "detail"),
    [
        ({"base_url": "127.0.0.1:8080/v1"}, "baseURL", "must be an http"),
        ({"base_url": "ftp://host/v1"}, "baseURL", "must be an http"),
        ({"base_url": "http:///v1"}, "baseURL", "must be an http"),
        ({"base_url": "http://[::1/v1"}, "baseURL", "must be an http"),
        ({"base_url": 8080}, "baseURL", "must be a string"),
        ({"base_url": "http://h/v1#frag"}, "baseURL", "#fragment"),
        (
            {"base_url": "http://h/v1/chat/completions/"},
            "baseURL",
            "must end at the API root",
        ),
        ({"api_key": "k", "api_key_env": "K"}, "apiKey", "cannot both be set"),
        ({"api_key_env": ""}, "apiKeyEnv", "non-empty"),
        ({"display_name": " "}, "displayName", "non-empty"),
        ({"max_tokens_field": "n_predict"}, "maxTokensField", "max_completion_tokens"),
        ({"reasoning_passback_field": "thoughts"}, "reasoningPassbackField", "must be"),
        ({"reasoning_efforts": []}, "reasoningEfforts", "non-empty list"),
        ({"reasoning_efforts": "high"}, "reasoningEfforts", "non-empty list"),
        ({"reasoning_efforts": ["high", ""]}, "reasoningEfforts", "non-empty strings"),
        ({"reasoning_efforts": ["high", "high"]}, "reasoningEfforts", "duplicates"),
        ({"include_usage": 1}, "includeUsage", "boolean"),
        ({"empty_response_as_stop": "yes"}, "emptyResponseAsStop", "boolean"),
        ({"pool_maxsize": 0}, "poolMaxsize", "positive integer"),
        ({"stream_idle_timeout_ms": 0}, "streamIdleTimeoutMs", "positive finite"),
        ({"stream_idle_timeout_ms": math.inf}, "streamIdleTimeoutMs", "finite"),
        ({"stream_keepalive_timeout_ms": -1}, "streamKeepaliveTimeoutMs", "positive"),
        ({"total_timeout_ms": math.nan}, "totalTimeoutMs", "finite"),
        ({"total_timeout_ms": 2**31}, "totalTimeoutMs", "no greater than"),
        ({"retry_policy": 42}, "retryPolicy", "must be a mapping"),
        ({"retry_policy": {"mode": "sometimes"}}, "retryPolicy.mode", '"normal"'),
        (
            {"retry_policy": {"mode": "normal", "maxRetires": 1}},
            "retryPolicy.maxRetires",
            'did you mean "maxRetries"?',
        ),
        (
            {"retry_policy": {"mode": "always", "backoff": {"maxDelayMs": 0}}},
            "retryPolicy.backoff.maxDelayMs",
            "positive finite number",
        ),
        ({"base_url": "http://h:port/v1"}, "baseURL", "must be an http"),
        ({"models": "m1"}, "models", "list of models"),
        ({"models": [""]}, "models[0]", "non-empty model id"),
        ({"models": [3]}, "models[0]", "model id or a mapping"),
        ({"models": ["a", {"name": "x"}]}, "models[1].id", "is required"),
        ({"models": [{"id": "a", "ctx": 1}]}, "models[0].ctx", "not a known key"),
        (
            {"models": [{"id": "a", "contextWindow": 0}]},
            "models[0].contextWindow",
            "must be a positive integer no greater than 9007199254740991",
        ),
        (
            {"models": [CatalogModel(id="a"), {"id": "b", "name": 3}]},
            "models[1].name",
            "must be a string or null, got an integer",
        ),
        (
            {"models": [{"id": "a", "maxTokens": "8k"}]},
            "models[0].maxTokens",
            "must be an int",
        ),
        ({"models": [{"id": "a", "name": ""}]}, "models[0].name", "non-empty string"),
        ({"models": ["a", {"id": "a"}]}, "models[1].id", 'repeats the model "a"'),
    ],
)
def test_a_bad_option_names_its_config_key(options, key, detail):
    error = _config_error(**options)
    assert isinstance(error, ValueError)
    assert error.key == key
    assert detail in error.detail
    assert str(error).startswith(f"llm-openai-compatible: {key} ")


@pytest.mark.parametrize(
    ("headers", "key", "detail"),
    [
        ({"User-Agent": "mine/1.0"}, "headers.User-Agent", "attribution"),
        ({"Accept-Encoding": "gzip"}, "headers.Accept-Encoding", "cannot be replaced"),
        ({"content-type": "text/plain"}, "headers.content-type", "cannot be replaced"),
        ({"X-A": "1", "x-a": "2"}, "headers.x-a", "given twice"),
        ({"bad name": "v"}, "headers", "valid HTTP header name"),
        (
            {"X-Token": "secret-value\r\nX-Injected: 1"},
            "headers.X-Token",
            "line breaks",
        ),
        ({"X-Token": 5}, "headers.X-Token", "must be a string"),
        ([("X-A", "1")], "headers", "mapping"),
    ],
)
def test_bad_headers_are_refused_without_echoing_values(headers, key, detail):
    error = _config_error(headers=headers)
    assert (error.key, detail in error.detail) == (key, True)
    assert "secret-value" not in str(error)
    assert "mine/1.0" not in str(error)


@pytest.mark.parametrize(
    "value",
    [
        " sk-HEADERSECRET999",
        "sk-HEADERSECRET999 ",
        "sk-HEADERSECRET999\t",
        "\tsk-HEADERSECRET999",
        "sk-HEADERSECRET999\U0001f600",
        "sk-HEADERSECRET999\u00e9",
        "sk-HEADER\x01SECRET999",
        "sk-HEADER\x7fSECRET999",
        "sk-HEADER\x00SECRET999",
        "sk-HEADERSECRET999\r\n",
    ],
    ids=[
        "leading-space",
        "trailing-space",
        "trailing-tab",
        "leading-tab",
        "emoji",
        "latin-1",
        "control",
        "delete",
        "nul",
        "line-break",
    ],
)
def test_a_header_value_that_cannot_be_sent_unchanged_is_refused(value):
    with pytest.raises(AdapterConfigError) as caught:
        OpenAICompatAdapter(BASE, headers={"X-Api-Key": value})
    error = caught.value
    assert error.key == "headers.X-Api-Key"
    assert "printable ASCII" in error.detail
    shown = "".join(traceback.format_exception(error)) + repr(error) + repr(error.args)
    assert "HEADERSECRET" not in shown


@pytest.mark.parametrize("value", ["a b\tc", "", "Bearer sk-x", "!~"])
def test_header_values_with_interior_spaces_are_sent_exactly(value):
    with LoopbackServer() as server:
        server.enqueue(Reply(body=sse_events([text("ok"), finish()])))
        with OpenAICompatAdapter(
            f"{server.url}/v1", headers={"X-Custom": value}
        ) as adapter:
            options = GenerateOptions(
                provider="local", model="m", messages=(create_user_message("hi"),)
            )
            list(validate_stream(adapter.stream(options)))
        assert server.requests[0].header("x-custom") == value


def test_an_authorization_header_beside_a_key_is_refused():
    for source in ({"api_key": "sk-x"}, {"api_key_env": "K"}):
        error = _config_error(headers={"Authorization": "Bearer other"}, **source)
        assert error.key == "headers.Authorization"
        assert "other" not in str(error)


def test_an_explicit_key_no_header_can_carry_fails_without_echo():
    with pytest.raises(LlmError) as caught:
        OpenAICompatAdapter(BASE, api_key="sk bad\u00e9")
    assert caught.value.code == ErrorCode.INVALID_CREDENTIAL
    assert "sk bad" not in caught.value.message
    with pytest.raises(TypeError, match="api_key must be a str or Secret"):
        OpenAICompatAdapter(BASE, api_key=123)  # type: ignore[arg-type]


def test_the_config_repr_hides_credentials_in_the_base_url():
    url = "http://user:pw-secret@127.0.0.1:8080/v1"
    for config in (
        OpenAICompatConfig(base_url=url),
        openai_compat_plugin.Config(providers=("local",), base_url=url),
    ):
        assert "pw-secret" not in repr(config)
        assert "base_url='http://***@127.0.0.1:8080/v1'" in repr(config)


def test_the_repr_never_shows_the_key_or_header_values():
    with OpenAICompatAdapter(
        "http://user:pw@gpu.test/v1",
        api_key=Secret("sk-very-secret"),
        headers={"X-Api-Key": "hdr-secret"},
    ) as adapter:
        text_ = repr(adapter)
    assert "sk-very-secret" not in text_
    assert "hdr-secret" not in text_
    assert "pw" not in text_
    assert text_ == (
        "OpenAICompatAdapter(base_url='http://***@gpu.test/v1', "
        "headers=('x-api-key',), api_key=***)"
    )
    with OpenAICompatAdapter(
        BASE, api_key_env="MY_KEY", environ={"MY_KEY": "sk-e"}
    ) as a:
        assert repr(a) == (
            "OpenAICompatAdapter(base_url='http://127.0.0.1:8080/v1', "
            "api_key_env='MY_KEY')"
        )
    with OpenAICompatAdapter(f"{BASE}/") as a:
        assert repr(a) == (
            "OpenAICompatAdapter(base_url='http://127.0.0.1:8080/v1', no key)"
        )
        assert a.base_url == BASE


# --- catalog and metadata -------------------------------------------------------------


def test_the_catalog_from_ids_mappings_and_values():
    models: list[Any] = [
        "llama-3.1-8b",
        {
            "id": "qwen3-8b",
            "name": "Qwen3 8B",
            "contextWindow": 32768,
            "maxTokens": 8192,
        },
        CatalogModel(id="gpt-x", description="hosted"),
    ]
    with OpenAICompatAdapter(BASE, models=models, display_name="Lab vLLM") as adapter:
        listed = adapter.list_models("lab")
        assert [(m.provider, m.id, m.name, m.description) for m in listed] == [
            ("lab", "llama-3.1-8b", "llama-3.1-8b", None),
            ("lab", "qwen3-8b", "Qwen3 8B", None),
            ("lab", "gpt-x", "gpt-x", "hosted"),
        ]
        assert all(m.input_modalities == ("text",) for m in listed)
        qwen = adapter.resolve_model("lab", "qwen3-8b")
        unlisted = adapter.resolve_model("lab", "mystery")
        assert adapter.provider_info("lab") == LlmProviderInfo(
            id="lab", name="Lab vLLM"
        )
        assert adapter.display_name == "Lab vLLM"
    assert (qwen.name, qwen.context.context_window, qwen.default_max_tokens) == (  # type: ignore[union-attr]
        "Qwen3 8B",
        32768,
        8192,
    )
    assert (unlisted.name, unlisted.context, unlisted.default_max_tokens) == (
        "mystery",
        None,
        None,
    )
    assert unlisted.input_modalities == ("text",)
    assert qwen.reasoning is None


def test_no_catalog_by_default_and_any_model_resolves():
    with OpenAICompatAdapter(BASE) as adapter:
        assert adapter.list_models("local") == ()
        assert adapter.resolve_model("local", "whatever").id == "whatever"
        assert adapter.provider_info("local").name == "OpenAI-compatible"


def test_configured_efforts_are_advertised_without_a_default():
    with OpenAICompatAdapter(BASE, reasoning_efforts=("low", "high")) as adapter:
        reasoning = adapter.resolve_model("local", "m").reasoning
    assert reasoning is not None
    assert [e.id for e in reasoning.efforts] == ["low", "high"]
    assert reasoning.default_effort is None


def test_the_runtime_refuses_an_effort_not_configured_without_a_request():
    runtime = LlmRuntime()
    with LoopbackServer() as server, OpenAICompatAdapter(f"{server.url}/v1") as adapter:
        runtime.register_adapter(["local"], adapter)
        options = GenerateOptions(
            provider="local",
            model="m",
            messages=(create_user_message("hi"),),
            reasoning_effort="high",
        )
        (chunk,) = list(validate_stream(runtime.stream(options)))
        assert chunk.reason.failure.code == "UNSUPPORTED_REASONING_EFFORT"  # type: ignore[union-attr]
        assert server.requests == ()


def test_the_retry_policy_is_resolved_and_exposed():
    with OpenAICompatAdapter(BASE) as adapter:
        assert adapter.provider_retry_policy("local") == DEFAULT_RETRY_POLICY
    with OpenAICompatAdapter(
        BASE, retry_policy={"mode": "normal", "maxRetries": 1}
    ) as adapter:
        assert adapter.provider_retry_policy("local") == NormalRetryPolicy(
            max_retries=1
        )
    policy = resolve_retry_policy({"mode": "always"}, "x")
    with OpenAICompatAdapter(BASE, retry_policy=policy) as adapter:
        assert adapter.provider_retry_policy("local") is policy


@pytest.mark.parametrize(
    ("fields", "key", "detail"),
    [
        ({"id": ""}, "id", "must be a non-empty string"),
        ({"id": "a", "name": ""}, "name", "must be a non-empty string"),
        ({"id": "a", "description": 3}, "description", "must be a string"),
        (
            {"id": "a", "context_window": -5},
            "contextWindow",
            "must be a positive integer no greater than 9007199254740991",
        ),
        (
            {"id": "a", "max_tokens": True},
            "maxTokens",
            "must be a positive integer no greater than 9007199254740991",
        ),
    ],
)
def test_model_values_check_their_fields(fields, key, detail):
    with pytest.raises(AdapterConfigError) as caught:
        CatalogModel(**fields)
    assert (caught.value.key, caught.value.detail) == (key, detail)
    # The shared catalog model belongs to no package (a config's catalog errors
    # name the config's package and the entry's index).
    assert str(caught.value) == f"{key} {detail}"
    assert CatalogModel(id="a").input_modalities == ("text",)


# --- plugin ---------------------------------------------------------------------------


def test_the_plugin_contract_names_and_entry_point():
    assert openai_compat_plugin.name == "llm-openai-compatible"
    assert openai_compat_plugin.inject == ("llm",)
    assert issubclass(openai_compat_plugin.Config, OpenAICompatConfig)
    assert openai_compat_plugin.Config.__name__ == "OpenAICompatPluginConfig"
    (entry,) = [
        e
        for e in importlib.metadata.entry_points(group="dsh_llm.plugins")
        if e.name == "llm-openai-compatible"
    ]
    assert entry.value == "dsh_llm.plugins.builtin:OPENAI_COMPATIBLE"


def test_the_constructor_builds_the_one_config_class_from_its_keywords():
    parameters = inspect.signature(OpenAICompatAdapter).parameters
    assert list(parameters) == ["base_url", "api_key", "environ", "options"]
    with OpenAICompatAdapter(BASE) as adapter:
        assert adapter.config == OpenAICompatConfig(base_url=BASE)
    options: dict[str, Any] = {
        "api_key_env": "K",
        "headers": {"X-Title": "dsh"},
        "display_name": "Lab",
        "models": ["m1"],
        "include_usage": False,
        "max_tokens_field": "max_completion_tokens",
        "response_format_style": "json_object_schema",
        "reasoning_efforts": ["low"],
        "reasoning_passback_field": "reasoning",
        "stream_idle_timeout_ms": 1,
        "stream_keepalive_timeout_ms": None,
        "total_timeout_ms": 5,
        "retry_policy": {"mode": "always"},
        "pool_maxsize": 2,
        "empty_response_as_stop": True,
    }
    fields = {field.name for field in attrs.fields(OpenAICompatConfig)}
    assert set(options) | {"base_url", "service"} == fields
    with OpenAICompatAdapter(BASE, environ={}, **options) as adapter:
        assert adapter.config == OpenAICompatConfig(base_url=BASE, **options)
        assert adapter.config.models == (CatalogModel(id="m1"),)
    with pytest.raises(TypeError) as caught:
        OpenAICompatAdapter(BASE, providers=("x",))
    assert "'providers'" in str(caught.value)
    assert "OpenAICompatConfig fields: service, base_url, api_key_env" in str(
        caught.value
    )


def test_from_config_takes_a_built_config():
    config = OpenAICompatConfig(base_url=f"{BASE}/", display_name="Lab")
    with OpenAICompatAdapter.from_config(config, api_key="sk-x") as adapter:
        assert adapter.config is config
        assert (adapter.base_url, adapter.display_name) == (BASE, "Lab")
        assert "api_key=***" in repr(adapter)
    with pytest.raises(TypeError, match="config must be an OpenAICompatConfig"):
        OpenAICompatAdapter.from_config({"baseURL": BASE})  # type: ignore[arg-type]
    keyed = OpenAICompatConfig(base_url=BASE, api_key_env="K")
    with pytest.raises(AdapterConfigError) as caught:
        OpenAICompatAdapter.from_config(keyed, api_key="sk-x")
    assert caught.value.key == "apiKey"


def test_the_plugin_registers_every_route_and_unregisters_on_dispose():
    runtime = LlmRuntime()
    ctx = PluginContext(runtime, plugin_id="lab", environ={})
    openai_compat_plugin.apply(
        ctx,
        openai_compat_plugin.Config(
            providers=("lab-vllm", "lab-llama"),
            base_url=BASE,
            display_name="Lab",
            models=("m1",),
        ),
    )
    assert runtime.list_providers() == (
        LlmProviderInfo(id="lab-vllm", name="Lab"),
        LlmProviderInfo(id="lab-llama", name="Lab"),
    )
    assert [m.id for m in runtime.list_models("lab-llama")] == ["m1"]
    ctx.dispose()
    assert runtime.list_providers() == ()


def _compose(tmp_path: Path, text_: str, environ: dict[str, str] | None = None) -> Any:
    path = tmp_path / "dsh.yml"
    path.write_text(text_)
    return load_composition(str(path), environ=environ or {})


def test_a_yaml_composition_streams_with_an_interpolated_key(tmp_path: Path):
    with LoopbackServer() as server:
        server.enqueue(Reply(body=sse_events([text("from yaml"), finish()])))
        yaml_text = f"""
- id: lab
  name: llm-openai-compatible
  config:
    providers: [lab]
    baseURL: {server.url}/v1/
    apiKey: ${{LAB_KEY}}
    headers:
      X-Title: dsh
    includeUsage: false
    models:
      - id: qwen3-8b
        contextWindow: 32768
"""
        with _compose(tmp_path, yaml_text, {"LAB_KEY": "sk-lab"}) as composition:
            options = GenerateOptions(
                provider="lab", model="qwen3-8b", messages=(create_user_message("hi"),)
            )
            chunks = list(validate_stream(composition.runtime.stream(options)))
        assert [c.type for c in chunks][-2:] == ["usage", "finish"]
        (request,) = server.requests
        assert request.path == "/v1/chat/completions"
        assert request.header("authorization") == "Bearer sk-lab"
        assert request.header("x-title") == "dsh"
        assert "stream_options" not in request.json()


def test_a_keyless_local_composition_and_a_key_env_read_per_request(tmp_path: Path):
    yaml_text = f"""
- id: local
  name: llm-openai-compatible
  config:
    providers: [local]
    baseURL: {BASE}
- id: router
  name: llm-openai-compatible
  config:
    providers: [openrouter]
    baseURL: https://openrouter.ai/api/v1
    apiKeyEnv: OPENROUTER_API_KEY
"""
    with _compose(tmp_path, yaml_text) as composition:
        runtime = composition.runtime
        assert [p.id for p in runtime.list_providers()] == ["local", "openrouter"]
        options = GenerateOptions(
            provider="openrouter", model="x", messages=(create_user_message("hi"),)
        )
        (chunk,) = list(validate_stream(runtime.stream(options)))
        assert chunk.reason.failure.code == "MISSING_CREDENTIAL"  # type: ignore[union-attr]
        assert "OPENROUTER_API_KEY" in chunk.reason.failure.message  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("config", "key", "message"),
    [
        ("baseURL: http://h/v1", "providers", "is required"),
        ("providers: []\n    baseURL: http://h/v1", "providers", "at least one"),
        ("providers: [a, a]\n    baseURL: http://h/v1", "providers", "twice"),
        ('providers: [""]\n    baseURL: http://h/v1', "providers", "empty route"),
        ("providers: [a]", "baseURL", "is required"),
        ("providers: [a]\n    baseURL: h/v1", "baseURL", "http:// or https://"),
        (
            "providers: [a]\n    baseURL: http://h/v1\n    apiKey: sk-1\n"
            "    apiKeyEnv: K",
            "apiKey",
            "cannot both be set",
        ),
        (
            "providers: [a]\n    baseURL: http://h/v1\n    models:\n"
            "      - m0\n      - id: m1\n        contextWindow: 0",
            "models[1].contextWindow",
            "must be a positive integer no greater than 9007199254740991",
        ),
        (
            "providers: [a]\n    baseURL: http://h/v1\n    headers:\n"
            "      User-Agent: hidden-value",
            "headers.User-Agent",
            "cannot be replaced",
        ),
        (
            "providers: [a]\n    baseURL: http://h/v1\n    apiKeyEnv: K\n"
            "    headers:\n      Authorization: hidden-value",
            "headers.Authorization",
            "conflicts with apiKey/apiKeyEnv",
        ),
        (
            'providers: [a]\n    baseURL: http://h/v1\n    apiKey: "  "',
            "apiKey",
            "is blank",
        ),
        (
            'providers: [a]\n    baseURL: http://h/v1\n    apiKey: "sk-1\\nx"',
            "apiKey",
            "contains characters no HTTP header can carry",
        ),
        (
            "providers: [a]\n    baseURL: http://h/v1\n    includeUsage: 1",
            "includeUsage",
            "boolean",
        ),
        (
            "providers: [a]\n    baseURL: http://h/v1\n    maxTokensField: n_predict",
            "maxTokensField",
            "n_predict",
        ),
    ],
)
def test_load_errors_name_the_key(tmp_path: Path, config, key, message):
    yaml_text = f"- id: lab\n  name: llm-openai-compatible\n  config:\n    {config}\n"
    with pytest.raises(PluginLoadError) as caught:
        _compose(tmp_path, yaml_text)
    error = caught.value
    assert error.plugin_id == "lab"
    assert error.key == key
    assert f'config key "{key}"' in error.message
    assert message in error.message
    assert "hidden-value" not in error.message
    assert "sk-1" not in error.message


def test_a_failed_load_leaves_nothing_registered(tmp_path: Path):
    runtime = LlmRuntime()
    yaml_text = f"""
- id: good
  name: llm-openai-compatible
  config:
    providers: [good]
    baseURL: {BASE}
- id: bad
  name: llm-openai-compatible
  config:
    providers: [bad]
    baseURL: {BASE}
    streamIdleTimeoutMs: 0
"""
    path = tmp_path / "dsh.yml"
    path.write_text(yaml_text)
    with pytest.raises(PluginLoadError, match="streamIdleTimeoutMs"):
        load_composition(str(path), runtime, environ={})
    assert runtime.list_providers() == ()


def test_the_plugin_config_repr_shows_header_names_but_never_values() -> None:
    config = openai_compat_plugin.Config(
        providers=("p",),
        base_url="http://127.0.0.1:1/v1",
        headers={"X-Api-Key": "hdr-SECRET-VALUE", "X-Org": "org-1"},
    )
    text = repr(config)
    assert "hdr-SECRET-VALUE" not in text
    assert "org-1" not in text
    assert "headers=<headers: X-Api-Key, X-Org>" in text
    assert "headers=<headers: >" in repr(attrs.evolve(config, headers=None))
    assert attrs.evolve(config, headers=None).headers == {}


def test_catalog_counts_above_the_safe_integer_bound_name_their_key():
    with pytest.raises(AdapterConfigError) as caught:
        OpenAICompatAdapter("http://h/v1", models=[{"id": "big", "maxTokens": 2**60}])
    assert caught.value.key == "models[0].maxTokens"
    assert "no greater than 9007199254740991" in caught.value.detail
    with pytest.raises(AdapterConfigError) as caught:
        OpenAICompatAdapter("http://h/v1", models=[{"id": "w", "contextWindow": 2**53}])
    assert caught.value.key == "models[0].contextWindow"
