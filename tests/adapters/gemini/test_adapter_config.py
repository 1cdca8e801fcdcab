"""GeminiConfig, the llm-gemini plugin (loaded from YAML by module path: tests
never load entry points), the CLI listing, the request shape with ``responses``,
and model facts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import responses

from dsh_llm.adapters import AdapterConfigError
from dsh_llm.adapters.gemini import PROVIDER_ROUTE
from dsh_llm.adapters.gemini import PUBLIC_BASE_URL
from dsh_llm.adapters.gemini import GeminiAdapter
from dsh_llm.adapters.gemini import GeminiConfig
from dsh_llm.cli.targets import open_routes
from dsh_llm.plugins import PluginLoadError
from dsh_llm.plugins import load_composition
from dsh_llm.plugins.builtin import GEMINI as gemini_plugin
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import create_user_message
from dsh_llm.runtime import LlmRuntime
from dsh_llm.testing import sse_event
from dsh_llm.transport.attribution import user_agent
from dsh_llm.validator import validate_stream

from ...cli_run import run_cli

KEY = "AIzaSyCONFIG-0123456789abcdefghijklmn"
PLUGIN = "dsh_llm.plugins.builtin:GEMINI"


def _compose(tmp_path: Path, config: str) -> Path:
    path = tmp_path / "dsh.yml"
    path.write_text(f"- id: g\n  name: {PLUGIN}\n  config:\n    {config}\n")
    return path


def test_the_plugin_contract_names():
    assert gemini_plugin.name == "llm-gemini"
    assert gemini_plugin.inject == ("llm",)
    assert gemini_plugin.Config is GeminiConfig


def test_the_plugin_loads_from_yaml_and_registers_the_route(tmp_path):
    path = _compose(
        tmp_path,
        "reasoningEffort: low\n    models: [{id: gemini-x, name: X, thinking: level, "
        "efforts: [low, high], defaultEffort: high}]",
    )
    with load_composition(path, environ={}) as composition:
        runtime = composition.runtime
        (info,) = runtime.list_providers()
        assert (info.id, info.name) == (PROVIDER_ROUTE, "Gemini")
        (model,) = runtime.list_models(PROVIDER_ROUTE)
        assert (model.id, model.name) == ("gemini-x", "X")
    assert runtime.list_providers() == ()


@pytest.mark.parametrize(
    ("config", "key"),
    [
        ("apiKeyEnv: ''", "apiKeyEnv"),
        ("baseURL: ftp://x", "baseURL"),
        ("baseURL: http://127.0.0.1:1/v1beta", "baseURL"),
        ("reasoningEffort: extreme", "reasoningEffort"),
        ("streamIdleTimeoutMs: 0", "streamIdleTimeoutMs"),
        ("models: [{id: a}, {id: a}]", "models[1].id"),
        ("models: [{id: a, thinking: level, efforts: [auto]}]", "models[0].efforts"),
        (
            "models: [{id: a, efforts: [low], defaultEffort: high}]",
            "models[0].defaultEffort",
        ),
        ("apiKey: x", "apiKey"),
    ],
)
def test_a_bad_key_fails_the_load_naming_it(tmp_path, config, key):
    runtime = LlmRuntime()
    with pytest.raises(PluginLoadError) as caught:
        load_composition(_compose(tmp_path, config), runtime, environ={})
    assert caught.value.key == key
    assert f'config key "{key}"' in caught.value.message
    assert runtime.list_providers() == ()


def test_config_errors_are_keyed_data():
    with pytest.raises(AdapterConfigError) as caught:
        GeminiAdapter(stream_idle_timeout_ms=-1)
    assert caught.value.key == "streamIdleTimeoutMs"
    assert str(caught.value).startswith("llm-gemini: streamIdleTimeoutMs ")
    with pytest.raises(TypeError, match="GeminiConfig fields"):
        GeminiAdapter(bogus=1)


def test_from_config_and_defaults():
    adapter = GeminiAdapter.from_config(GeminiConfig(), api_key=KEY)
    with adapter:
        assert adapter.base_url == PUBLIC_BASE_URL
        assert KEY not in repr(adapter)
    with pytest.raises(TypeError):
        GeminiAdapter.from_config({})  # type: ignore[arg-type]


def test_resolve_model_reports_efforts_without_io():
    adapter = GeminiAdapter(environ={}, reasoning_effort="low")
    with adapter:
        pro = adapter.resolve_model(PROVIDER_ROUTE, "gemini-2.5-pro")
        assert pro.reasoning is not None
        assert [e.id for e in pro.reasoning.efforts] == [
            "low",
            "medium",
            "high",
            "auto",
        ]
        assert pro.reasoning.default_effort == "low"
        assert pro.context.context_window == 1_048_576  # type: ignore[union-attr]
        lite = adapter.resolve_model(PROVIDER_ROUTE, "gemini-3-pro-preview")
        assert lite.reasoning.default_effort == "low"  # type: ignore[union-attr]
        unlisted = adapter.resolve_model(PROVIDER_ROUTE, "gemini-2.0-flash")
        assert unlisted.reasoning.efforts[0].id == "off"  # type: ignore[union-attr]


@responses.activate
def test_the_request_shape_exact_url_headers_and_body():
    url = (
        f"{PUBLIC_BASE_URL}/v1beta/models/gemini-2.5-flash"
        ":streamGenerateContent?alt=sse"
    )
    stop = {
        "candidates": [{"content": {"parts": [{"text": "ok"}]}, "finishReason": "STOP"}]
    }
    responses.add(
        responses.POST,
        url,
        body=sse_event(stop),
        content_type="text/event-stream",
        match=[responses.matchers.query_param_matcher({"alt": "sse"})],
    )
    options = GenerateOptions(
        provider=PROVIDER_ROUTE,
        model="gemini-2.5-flash",
        system="be brief",
        messages=(create_user_message("hi"),),
        max_tokens=100,
        reasoning_effort="off",
    )
    with GeminiAdapter(KEY) as adapter:
        chunks = list(validate_stream(adapter.stream(options), strict=True))
    assert chunks[-1].reason.kind == "stop"  # type: ignore[union-attr]
    (call,) = responses.calls
    request = call.request
    assert request.url == url
    assert request.headers["x-goog-api-key"] == KEY
    assert "authorization" not in request.headers
    assert request.headers["user-agent"] == user_agent()
    assert request.headers["accept-encoding"] == "identity"
    assert isinstance(request.body, bytes)
    assert json.loads(request.body) == {
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "systemInstruction": {"parts": [{"text": "be brief"}]},
        "generationConfig": {
            "maxOutputTokens": 100,
            "thinkingConfig": {"thinkingBudget": 0},
        },
    }


def test_the_built_in_route_opens_when_the_provider_names_it():
    with open_routes(provider="gemini", config=None) as routes:
        ids = [info.id for info in routes.runtime.list_providers()]
        # Beside the other built-in routes, which are always there.
        assert ids[:4] == ["deepseek-official", "anthropic", "gemini", "ollama"]
        models = routes.runtime.list_models("gemini")
        assert models[0].id == "gemini-3-pro-preview"


def test_the_cli_lists_the_plugin_route(tmp_path):
    (tmp_path / "dsh.yml").write_text(f"- id: g\n  name: {PLUGIN}\n")
    result = run_cli("providers", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"gemini  (Gemini, {tmp_path / 'dsh.yml'})"
    assert lines[1].split() == [
        "gemini-3-pro-preview",
        "Gemini",
        "3",
        "Pro",
        "(preview)",
        "[text,",
        "image]",
    ]
    assert len(lines) == 6
