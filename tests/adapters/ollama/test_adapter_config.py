"""OllamaConfig, the llm-ollama plugin (loaded from YAML by module path: tests
never load entry points), the CLI listing, and the request shape with
``responses``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import responses

from dsh_llm.adapters import AdapterConfigError
from dsh_llm.adapters.ollama import DEFAULT_BASE_URL
from dsh_llm.adapters.ollama import PROVIDER_ROUTE
from dsh_llm.adapters.ollama import OllamaAdapter
from dsh_llm.adapters.ollama import OllamaConfig
from dsh_llm.cli.targets import open_routes
from dsh_llm.plugins import PluginLoadError
from dsh_llm.plugins import load_composition
from dsh_llm.plugins.builtin import OLLAMA as ollama_plugin
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import create_user_message
from dsh_llm.runtime import LlmRuntime
from dsh_llm.transport.attribution import user_agent
from dsh_llm.validator import validate_stream

from ...cli_run import run_cli

PLUGIN = "dsh_llm.plugins.builtin:OLLAMA"
DONE = {
    "message": {"role": "assistant", "content": "ok"},
    "done": True,
    "done_reason": "stop",
}


def _compose(tmp_path: Path, config: str) -> Path:
    path = tmp_path / "dsh.yml"
    path.write_text(f"- id: o\n  name: {PLUGIN}\n  config:\n    {config}\n")
    return path


def test_the_plugin_contract_names():
    assert ollama_plugin.name == "llm-ollama"
    assert ollama_plugin.inject == ("llm",)
    assert ollama_plugin.Config is OllamaConfig


def test_the_plugin_loads_from_yaml_without_io(tmp_path):
    path = _compose(
        tmp_path,
        "baseURL: http://127.0.0.1:9\n    keepAlive: 5m\n"
        "    models: [{id: 'qwen3:8b', name: Qwen3, contextWindow: 40960}]",
    )
    with load_composition(path, environ={}) as composition:
        runtime = composition.runtime
        (info,) = runtime.list_providers()
        assert (info.id, info.name) == (PROVIDER_ROUTE, "Ollama")
        (model,) = runtime.list_models(PROVIDER_ROUTE)
        assert (model.id, model.name) == ("qwen3:8b", "Qwen3")
    assert runtime.list_providers() == ()


@pytest.mark.parametrize(
    ("config", "key"),
    [
        ("baseURL: localhost", "baseURL"),
        ("baseURL: http://127.0.0.1:11434/api", "baseURL"),
        ("keepAlive: ''", "keepAlive"),
        ("keepAlive: [1]", "keepAlive"),
        ("reasoningEffort: extreme", "reasoningEffort"),
        ("apiKeyEnv: ''", "apiKeyEnv"),
        ("models: [{id: a}, {id: a}]", "models[1].id"),
        ("models: [{id: a, contextWindow: 0}]", "models[0].contextWindow"),
        ("kepAlive: 5m", "kepAlive"),
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
        OllamaAdapter(keep_alive=float("nan"))
    assert caught.value.key == "keepAlive"
    assert str(caught.value).startswith("llm-ollama: keepAlive ")
    with pytest.raises(TypeError, match="OllamaConfig fields"):
        OllamaAdapter(bogus=1)


def test_defaults_and_from_config():
    with OllamaAdapter() as adapter:
        assert adapter.base_url == DEFAULT_BASE_URL
        assert repr(adapter) == f"OllamaAdapter(base_url={DEFAULT_BASE_URL!r}, no key)"
        info = adapter.resolve_model(PROVIDER_ROUTE, "llama3.2")
        assert [e.id for e in info.reasoning.efforts][:2] == ["off", "on"]  # type: ignore[union-attr]
        assert info.context is None
    with OllamaAdapter.from_config(OllamaConfig(reasoning_effort="high")) as adapter:
        info = adapter.resolve_model(PROVIDER_ROUTE, "llama3.2")
        assert info.reasoning.default_effort == "high"  # type: ignore[union-attr]
    with pytest.raises(TypeError):
        OllamaAdapter.from_config({})  # type: ignore[arg-type]


@responses.activate
def test_the_request_shape_exact_url_headers_and_body():
    responses.add(
        responses.POST,
        f"{DEFAULT_BASE_URL}/api/chat",
        body=(json.dumps(DONE) + "\n").encode(),
        content_type="application/x-ndjson",
    )
    options = GenerateOptions(
        provider=PROVIDER_ROUTE,
        model="llama3.2",
        system="be brief",
        messages=(create_user_message("hi"),),
        max_tokens=64,
        stop=("END",),
    )
    with OllamaAdapter(keep_alive=-1, reasoning_effort="off") as adapter:
        chunks = list(validate_stream(adapter.stream(options), strict=True))
    assert chunks[-1].reason.kind == "stop"  # type: ignore[union-attr]
    (call,) = responses.calls
    request = call.request
    assert request.url == f"{DEFAULT_BASE_URL}/api/chat"
    assert "authorization" not in request.headers
    assert request.headers["accept"] == "application/x-ndjson"
    assert request.headers["user-agent"] == user_agent()
    assert isinstance(request.body, bytes)
    assert request.body.decode() == json.dumps(
        {
            "model": "llama3.2",
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "hi"},
            ],
            "stream": True,
            "think": False,
            "options": {"num_predict": 64, "stop": ["END"]},
            "keep_alive": -1,
        },
        separators=(",", ":"),
    )


def test_the_built_in_route_opens_when_the_provider_names_it():
    with open_routes(provider="ollama", config=None) as routes:
        # Beside the other built-in routes, which are always there.
        assert [info.id for info in routes.runtime.list_providers()][:4] == [
            "deepseek-official",
            "anthropic",
            "gemini",
            "ollama",
        ]


def test_the_cli_lists_the_plugin_route_and_its_configured_models(tmp_path):
    (tmp_path / "dsh.yml").write_text(
        f"- id: o\n  name: {PLUGIN}\n  config:\n    models: [{{id: 'qwen3:8b'}}]\n"
    )
    result = run_cli("providers", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"ollama  (Ollama, {tmp_path / 'dsh.yml'})",
        "  qwen3:8b  qwen3:8b",
    ]
