"""OpenAIResponsesAdapter's configuration, exact request shapes (recorded with
``responses``), metadata, and the ``llm-openai-responses`` plugin loaded from
YAML by module path (tests never load entry points)."""

from __future__ import annotations

import inspect
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import responses

from dsh_llm.adapter import LlmProviderInfo
from dsh_llm.adapters import AdapterConfigError
from dsh_llm.adapters import CatalogModel
from dsh_llm.adapters.openai_responses import OpenAIResponsesAdapter
from dsh_llm.adapters.openai_responses import OpenAIResponsesConfig
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.plugins import PluginContext
from dsh_llm.plugins import load_composition
from dsh_llm.plugins.builtin import OPENAI_RESPONSES as plugin
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import ToolSchema
from dsh_llm.protocol import create_user_message
from dsh_llm.runtime import LlmRuntime
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply
from dsh_llm.transport.attribution import user_agent
from dsh_llm.validator import validate_stream

from ...plugin_loading import load_error

KEY = "sk-resp-test-key"
COMPLETED = (
    b"event: response.output_item.added\n"
    b'data: {"type":"response.output_item.added","output_index":0,'
    b'"item":{"type":"message","id":"m1","role":"assistant","content":[]}}\n\n'
    b"event: response.output_text.delta\n"
    b'data: {"type":"response.output_text.delta","item_id":"m1","output_index":0,'
    b'"content_index":0,"delta":"ok"}\n\n'
    b"event: response.completed\n"
    b'data: {"type":"response.completed","response":{"id":"r","status":"completed",'
    b'"output":[],"usage":{"input_tokens":3,"output_tokens":1}}}\n\n'
)
WEATHER = ToolSchema(
    name="get_weather",
    description="Weather for a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


@pytest.fixture
def mocked() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        for url in (
            "https://api.openai.com/v1/responses",
            "http://localhost:11434/v1/responses",
            "https://gateway.test/openai/responses?api-version=2025-04-01",
        ):
            mock.add(
                responses.POST, url, body=COMPLETED, content_type="text/event-stream"
            )
        yield mock


def _options(**fields: Any) -> GenerateOptions:
    fields.setdefault("messages", (create_user_message("hi"),))
    fields.setdefault("model", "gpt-5.2")
    return GenerateOptions(provider="r", **fields)


def _send(
    mock: responses.RequestsMock, adapter: OpenAIResponsesAdapter, **fields: Any
) -> Any:
    with adapter as used:
        list(validate_stream(used.stream(_options(**fields)), strict=True))
    return mock.calls[-1].request


# --- request shapes -------------------------------------------------------------------


def test_the_default_request_is_exact(mocked):
    request = _send(mocked, OpenAIResponsesAdapter(api_key=KEY), system="Be brief.")
    assert request.url == "https://api.openai.com/v1/responses"
    assert json.loads(request.body) == {
        "model": "gpt-5.2",
        "instructions": "Be brief.",
        "input": [
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "hi"}],
            }
        ],
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "stream": True,
    }
    assert list(json.loads(request.body)) == [
        "model",
        "instructions",
        "input",
        "store",
        "include",
        "stream",
    ]
    headers = {name.lower(): value for name, value in request.headers.items()}
    assert headers["authorization"] == f"Bearer {KEY}"
    assert headers["accept"] == "text/event-stream"
    assert headers["content-type"] == "application/json"
    assert headers["user-agent"] == user_agent()


def test_tools_effort_cap_and_temperature_are_sent(mocked):
    request = _send(
        mocked,
        OpenAIResponsesAdapter(api_key=KEY),
        tools=(WEATHER,),
        tool_choice="get_weather",
        reasoning_effort="high",
        max_tokens=512,
        temperature=0.5,
    )
    body = json.loads(request.body)
    assert body["tools"] == [
        {
            "type": "function",
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
            },
            "strict": False,
        }
    ]
    assert body["tool_choice"] == {"type": "function", "name": "get_weather"}
    assert body["reasoning"] == {"effort": "high", "summary": "auto"}
    assert (body["max_output_tokens"], body["temperature"]) == (512, 0.5)


def test_the_catalog_cap_is_sent_when_the_request_names_none(mocked):
    adapter = OpenAIResponsesAdapter(
        "http://localhost:11434/v1", models=[{"id": "gpt-oss:20b", "maxTokens": 2048}]
    )
    request = _send(mocked, adapter, model="gpt-oss:20b")
    assert json.loads(request.body)["max_output_tokens"] == 2048
    assert "authorization" not in {name.lower() for name in request.headers}


def test_a_query_string_stays_after_the_endpoint(mocked):
    adapter = OpenAIResponsesAdapter(
        "https://gateway.test/openai?api-version=2025-04-01", api_key=KEY
    )
    request = _send(mocked, adapter)
    assert request.url == "https://gateway.test/openai/responses?api-version=2025-04-01"


def test_the_key_variable_is_read_at_each_request(mocked):
    environ = {"RESP_KEY": "sk-one"}
    adapter = OpenAIResponsesAdapter(api_key_env="RESP_KEY", environ=environ)
    first = _send(mocked, adapter)
    environ["RESP_KEY"] = "sk-two"
    second = _send(mocked, adapter)
    assert first.headers["authorization"] == "Bearer sk-one"
    assert second.headers["authorization"] == "Bearer sk-two"


@pytest.mark.parametrize(
    ("server", "fields", "code"),
    [
        (
            "ollama",
            {"tools": (WEATHER,), "tool_choice": "required"},
            "UNSUPPORTED_OPTION",
        ),
        ("vllm", {"reasoning_effort": "xhigh"}, "UNSUPPORTED_REASONING_EFFORT"),
        ("openai", {"stop": ("END",)}, "UNSUPPORTED_OPTION"),
    ],
)
def test_refusals_raise_before_any_request(mocked, server, fields, code):
    adapter = OpenAIResponsesAdapter(server=server)
    with adapter, pytest.raises(LlmError) as caught:
        list(adapter.stream(_options(**fields)))
    assert caught.value.code == code
    assert len(mocked.calls) == 0


# --- configuration --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "server"),
    [
        ("https://api.openai.com/v1", "openai"),
        ("https://openrouter.ai/api/v1", "openrouter"),
        ("http://127.0.0.1:11434/v1", "ollama"),
        ("http://localhost:1234/v1", "lmstudio"),
        ("http://10.0.0.5:8000/v1", "vllm"),
        ("http://10.0.0.5:9999/v1", "openai"),
    ],
)
def test_the_server_profile_is_guessed_from_the_base_url(url, server):
    with OpenAIResponsesAdapter(url) as adapter:
        assert adapter.profile.server == server
        assert adapter.provider_info("x") == LlmProviderInfo(
            id="x", name=adapter.profile.provider
        )


def test_an_explicit_server_wins_over_the_guess():
    with OpenAIResponsesAdapter("http://127.0.0.1:11434/v1", server="vllm") as adapter:
        assert adapter.profile.server == "vllm"
        assert adapter.profile.provider == "vLLM (Responses API)"


@pytest.mark.parametrize(
    ("options", "key"),
    [
        ({"base_url": "ftp://x"}, "baseURL"),
        ({"base_url": "http://127.0.0.1:8000/v1/responses"}, "baseURL"),
        ({"server": "tgi"}, "server"),
        ({"api_key_env": ""}, "apiKeyEnv"),
        ({"stream_idle_timeout_ms": 0}, "streamIdleTimeoutMs"),
        ({"models": ["a", "a"]}, "models[1].id"),
        ({"models": [{"id": "a", "contextWindow": -1}]}, "models[0].contextWindow"),
        (
            {"models": [{"id": "a", "inputModalities": ["image"]}]},
            "models[0].inputModalities",
        ),
        ({"retry_policy": {"mode": "sometimes"}}, "retryPolicy.mode"),
        ({"unmarked_cap_cut": 1}, "unmarkedCapCut"),
    ],
)
def test_a_bad_option_is_keyed_by_its_config_key(options, key):
    with pytest.raises(AdapterConfigError) as caught:
        OpenAIResponsesConfig(**options)
    assert caught.value.key == key
    assert str(caught.value).startswith(f"llm-openai-responses: {key} ")


def test_a_key_given_both_ways_is_refused():
    with pytest.raises(AdapterConfigError) as caught:
        OpenAIResponsesAdapter(api_key=KEY, api_key_env="K")
    assert caught.value.key == "apiKey"


def test_an_unknown_keyword_is_a_type_error_listing_the_fields():
    with pytest.raises(TypeError, match="OpenAIResponsesConfig fields"):
        OpenAIResponsesAdapter(servr="vllm")


def test_from_config_takes_only_its_config_class():
    config = OpenAIResponsesConfig(base_url="http://127.0.0.1:8000/v1/")
    with OpenAIResponsesAdapter.from_config(config) as adapter:
        assert adapter.base_url == "http://127.0.0.1:8000/v1"
        assert adapter.profile.server == "vllm"
    with pytest.raises(TypeError):
        OpenAIResponsesAdapter.from_config({"baseURL": "x"})  # type: ignore[arg-type]


def test_every_config_field_is_a_constructor_keyword_with_the_same_default():
    parameters = inspect.signature(OpenAIResponsesAdapter).parameters
    assert set(parameters) == {"base_url", "api_key", "environ", "options"}
    assert parameters["base_url"].default is None  # the config's default
    with OpenAIResponsesAdapter() as adapter:
        assert adapter.config.base_url == "https://api.openai.com/v1"
    default = OpenAIResponsesConfig()
    for field in attrs.fields(OpenAIResponsesConfig):
        value = getattr(default, field.name)
        with OpenAIResponsesAdapter(**{field.name: value}) as adapter:
            assert adapter.config == default, field.name


def test_the_repr_never_shows_the_key_or_url_credentials():
    adapter = OpenAIResponsesAdapter("https://user:pw@gw.test/v1", api_key=KEY)
    with adapter:
        text = repr(adapter) + repr(adapter.config)
    assert KEY not in text
    assert "pw" not in text
    assert "api_key=***" in repr(adapter)


def test_resolve_model_offers_the_profile_efforts_and_the_catalog_facts():
    adapter = OpenAIResponsesAdapter(
        server="lmstudio",
        models=[
            CatalogModel(
                id="qwen3", name="Qwen3", context_window=32768, max_tokens=4096
            )
        ],
    )
    with adapter:
        info = adapter.resolve_model("r", "qwen3")
        other = adapter.resolve_model("r", "unlisted")
        listed = adapter.list_models("r")
    assert info.name == "Qwen3"
    assert info.context is not None
    assert info.context.context_window == 32768
    assert info.default_max_tokens == 4096
    assert info.reasoning is not None
    assert [e.id for e in info.reasoning.efforts] == ["low", "medium", "high"]
    assert (other.context, other.default_max_tokens) == (None, None)
    assert [m.id for m in listed] == ["qwen3"]


# --- plugin ---------------------------------------------------------------------------


def test_the_plugin_contract_names():
    assert plugin.name == "llm-openai-responses"
    assert plugin.inject == ("llm",)
    assert issubclass(plugin.Config, OpenAIResponsesConfig)


def test_the_entry_point_is_declared_in_setup_cfg():
    text = (Path(__file__).parents[3] / "setup.cfg").read_text(encoding="utf-8")
    assert "llm-openai-responses = dsh_llm.plugins.builtin:OPENAI_RESPONSES" in text


def test_the_plugin_registers_its_routes_and_unregisters_on_dispose():
    runtime = LlmRuntime()
    ctx = PluginContext(runtime, plugin_id="lab", environ={})
    plugin.apply(
        ctx,
        plugin.Config(
            providers=("lab-ollama",),
            base_url="http://127.0.0.1:11434/v1",
            models=("gpt-oss:20b",),
        ),
    )
    assert runtime.list_providers() == (
        LlmProviderInfo(id="lab-ollama", name="Ollama (Responses API)"),
    )
    assert [m.id for m in runtime.list_models("lab-ollama")] == ["gpt-oss:20b"]
    ctx.dispose()
    assert runtime.list_providers() == ()


def test_a_yaml_composition_streams_with_an_interpolated_key(tmp_path: Path):
    with LoopbackServer() as server:
        server.enqueue(Reply(body=COMPLETED))
        path = tmp_path / "dsh.yml"
        path.write_text(
            f"""
- id: lab
  name: dsh_llm.plugins.builtin:OPENAI_RESPONSES
  config:
    providers: [lab]
    baseURL: {server.url}/v1/
    server: vllm
    apiKey: ${{LAB_KEY}}
    models:
      - id: gpt-oss-20b
        maxTokens: 1000
""",
            encoding="utf-8",
        )
        with load_composition(str(path), environ={"LAB_KEY": KEY}) as composition:
            options = GenerateOptions(
                provider="lab",
                model="gpt-oss-20b",
                messages=(create_user_message("hi"),),
            )
            chunks = list(
                validate_stream(composition.runtime.stream(options), strict=True)
            )
            assert composition.runtime.list_providers()[0].name == (
                "vLLM (Responses API)"
            )
        (request,) = server.requests
    assert [c.type for c in chunks][-2:] == ["usage", "finish"]
    assert request.path == "/v1/responses"
    assert request.header("authorization") == f"Bearer {KEY}"
    assert request.json()["max_output_tokens"] == 1000


@pytest.mark.parametrize(
    ("config", "key"),
    [
        ("{providers: [lab], baseURLL: http://x}", "baseURLL"),
        ("{providers: [lab], server: tgi}", "server"),
        ("{providers: [], baseURL: 'http://127.0.0.1:1/v1'}", "providers"),
        ("{providers: [lab], baseURL: 'ftp://x'}", "baseURL"),
        ("{providers: [lab], models: [{id: a, maxTokens: 0}]}", "models[0].maxTokens"),
    ],
)
def test_a_bad_yaml_key_fails_the_load_naming_it(tmp_path: Path, config, key):
    path = tmp_path / "dsh.yml"
    path.write_text(
        "- id: lab\n  name: dsh_llm.plugins.builtin:OPENAI_RESPONSES\n"
        f"  config: {config}\n",
        encoding="utf-8",
    )
    error = load_error(str(path), environ={})
    assert error.code == ErrorCode.PLUGIN_LOAD
    assert key in error.message
