"""VertexConfig and the family's endpoint: the URL per location (the global
one included) and per publisher, checked with ``responses``; project and
location from the config or the environment; the config's checks; model
facts from the Gemini and Anthropic catalogs; the ``repr``; the plugin, built
from the row the built-in table is to hold."""

from __future__ import annotations

import json
from typing import Any

import pytest
import responses

from dsh_llm.adapters import AdapterConfigError
from dsh_llm.adapters import BuiltinFamily
from dsh_llm.adapters.vertex import DEFAULT_MODELS
from dsh_llm.adapters.vertex import PROVIDER_ROUTE
from dsh_llm.adapters.vertex import VertexAdapter
from dsh_llm.adapters.vertex import VertexConfig
from dsh_llm.adapters.vertex import VertexModel
from dsh_llm.adapters.vertex.catalog import claude_id
from dsh_llm.adapters.vertex.catalog import publisher_for
from dsh_llm.adapters.vertex.request import model_url
from dsh_llm.adapters.vertex.request import public_base_url
from dsh_llm.config import structure_config
from dsh_llm.plugins import PluginLoadError
from dsh_llm.plugins import load_composition
from dsh_llm.plugins.builtin import BuiltinPlugin
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import create_user_message
from dsh_llm.testing import sse_event
from dsh_llm.validator import validate_stream

TOKEN = "ya29.config-test-0123456789"
ROW = BuiltinFamily(
    route="vertex",
    plugin="llm-vertex",
    adapter="dsh_llm.adapters.vertex:VertexAdapter",
    display_name="Vertex AI",
    key_env="GOOGLE_OAUTH_ACCESS_TOKEN",
)
"""The row ``dsh_llm.adapters.BUILTIN_FAMILIES`` is to hold for Vertex."""
STOP = {
    "candidates": [{"content": {"parts": [{"text": "ok"}]}, "finishReason": "STOP"}]
}


def _options(model: str = "gemini-2.5-flash", **fields: Any) -> GenerateOptions:
    return GenerateOptions(
        provider=PROVIDER_ROUTE,
        model=model,
        messages=(create_user_message("hi"),),
        **fields,
    )


# --- the URLs -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("location", "host"),
    [
        ("global", "https://aiplatform.googleapis.com"),
        ("us-central1", "https://us-central1-aiplatform.googleapis.com"),
        ("europe-west4", "https://europe-west4-aiplatform.googleapis.com"),
    ],
)
@responses.activate
def test_the_request_goes_to_the_location_s_host(location, host):
    url = (
        f"{host}/v1/projects/proj-1/locations/{location}/publishers/google/models/"
        "gemini-2.5-flash:streamGenerateContent?alt=sse"
    )
    responses.add(
        responses.POST,
        url,
        body=sse_event(STOP),
        content_type="text/event-stream",
        match=[responses.matchers.query_param_matcher({"alt": "sse"})],
    )
    with VertexAdapter(TOKEN, project="proj-1", location=location) as adapter:
        chunks = list(validate_stream(adapter.stream(_options()), strict=True))
        assert adapter.base_url == host
    assert chunks[-1].reason.kind == "stop"  # type: ignore[union-attr]
    (call,) = responses.calls
    assert call.request.url == url
    assert call.request.headers["authorization"] == f"Bearer {TOKEN}"


@responses.activate
def test_a_claude_request_goes_to_stream_raw_predict_of_the_anthropic_publisher():
    url = (
        "https://us-east5-aiplatform.googleapis.com/v1/projects/proj-1/locations/"
        "us-east5/publishers/anthropic/models/claude-sonnet-5@20260101:"
        "streamRawPredict"
    )
    body = (
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"m",'
        b'"type":"message","role":"assistant","model":"claude-sonnet-5","content":[],'
        b'"usage":{"input_tokens":1,"output_tokens":1}}}\n\n'
        b'event: message_delta\ndata: {"type":"message_delta","delta":'
        b'{"stop_reason":"end_turn"},"usage":{"output_tokens":1}}\n\n'
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    )
    responses.add(responses.POST, url, body=body, content_type="text/event-stream")
    environ = {"CLOUD_ML_REGION": "us-east5", "GOOGLE_CLOUD_PROJECT": "proj-1"}
    with VertexAdapter(TOKEN, environ=environ, empty_response_as_stop=True) as a:
        chunks = list(
            validate_stream(a.stream(_options("claude-sonnet-5@20260101")), strict=True)
        )
    assert chunks[-1].reason.kind == "stop"  # type: ignore[union-attr]
    (call,) = responses.calls
    assert call.request.url == url
    sent = json.loads(call.request.body)
    assert sent["anthropic_version"] == "vertex-2023-10-16"
    assert "model" not in sent
    # Claude Sonnet 5 thinks adaptively (the Anthropic catalog's profile).
    assert sent["max_tokens"] == 64_000


def test_model_url_quotes_the_project_and_model_but_keeps_a_version():
    assert model_url(
        "https://h",
        project="a/b",
        location="us-central1",
        publisher="anthropic",
        model="claude-x@2026?#/",
    ) == (
        "https://h/v1/projects/a%2Fb/locations/us-central1/publishers/anthropic/"
        "models/claude-x@2026%3F%23%2F:streamRawPredict"
    )
    assert model_url(
        "https://h/root?x=1",
        project="p",
        location="global",
        publisher="google",
        model="gemini-2.5-pro",
    ) == (
        "https://h/root/v1/projects/p/locations/global/publishers/google/models/"
        "gemini-2.5-pro:streamGenerateContent?x=1&alt=sse"
    )
    assert public_base_url("global") == "https://aiplatform.googleapis.com"


# --- project and location -------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "environ", "location", "project"),
    [
        ({}, {}, "global", None),
        ({}, {"CLOUD_ML_REGION": "us-east5"}, "us-east5", None),
        (
            {},
            {"GOOGLE_CLOUD_LOCATION": "europe-west1", "CLOUD_ML_REGION": "us-east5"},
            "europe-west1",
            None,
        ),
        (
            {"location": "asia-northeast1"},
            {"GOOGLE_CLOUD_LOCATION": "europe-west1"},
            "asia-northeast1",
            None,
        ),
        ({}, {"ANTHROPIC_VERTEX_PROJECT_ID": "claude-proj"}, "global", "claude-proj"),
        (
            {},
            {"GOOGLE_CLOUD_PROJECT": "g", "ANTHROPIC_VERTEX_PROJECT_ID": "a"},
            "global",
            "g",
        ),
        ({"project": "mine"}, {"GOOGLE_CLOUD_PROJECT": "g"}, "global", "mine"),
    ],
)
def test_project_and_location_come_from_the_config_then_the_environment(
    options, environ, location, project
):
    adapter = VertexAdapter(environ=environ, **options)
    profile = adapter.endpoint.profile
    assert (profile.location, profile.project) == (location, project)


@pytest.mark.parametrize(
    ("environ", "key", "variable"),
    [
        ({"GOOGLE_CLOUD_LOCATION": "US Central"}, "location", "GOOGLE_CLOUD_LOCATION"),
        ({"CLOUD_ML_REGION": "us_east5"}, "location", "CLOUD_ML_REGION"),
        ({"GOOGLE_CLOUD_PROJECT": "a b"}, "project", "GOOGLE_CLOUD_PROJECT"),
    ],
)
def test_a_bad_environment_value_is_a_config_error_naming_it(environ, key, variable):
    with pytest.raises(AdapterConfigError) as caught:
        VertexAdapter(environ=environ)
    assert caught.value.key == key
    assert f"(read from {variable})" in str(caught.value)
    assert str(caught.value).startswith(f"llm-vertex: {key} ")


@pytest.mark.parametrize(
    ("options", "key"),
    [
        ({"location": "us central1"}, "location"),
        ({"location": ""}, "location"),
        ({"project": "a/b"}, "project"),
        ({"project": ""}, "project"),
        ({"credentials_file": ""}, "credentialsFile"),
        ({"api_key_env": ""}, "apiKeyEnv"),
        ({"base_url": "https://x.example/v1"}, "baseURL"),
        ({"base_url": "ftp://x"}, "baseURL"),
        ({"reasoning_effort": "extreme"}, "reasoningEffort"),
        ({"models": [{"id": "m", "publisher": "meta"}]}, "models[0].publisher"),
        ({"models": ["a", "a"]}, "models[1].id"),
        ({"models": [{"id": "g", "efforts": ["xhigh"]}]}, "models[0].efforts"),
    ],
)
def test_bad_options_are_config_errors_keyed_by_their_config_key(options, key):
    with pytest.raises(AdapterConfigError) as caught:
        VertexConfig(**options)
    assert caught.value.key == key
    assert str(caught.value).startswith(f"llm-vertex: {key} ")


def test_the_config_structures_from_camel_case_keys():
    config = structure_config(
        VertexConfig,
        {
            "project": "p",
            "location": "us-east5",
            "credentialsFile": "/k.json",
            "apiKeyEnv": "MY_TOKEN",
            "baseURL": "https://psc.example.com",
            "reasoningEffort": "low",
            "models": [
                "claude-opus-5@20260301",
                {"id": "tuned", "publisher": "google"},
            ],
        },
    )
    assert config.credentials_file == "/k.json"
    assert config.api_key_env == "MY_TOKEN"
    claude, tuned = config.models
    assert (claude.publisher, claude.input_modalities) == (
        "anthropic",
        ("text", "image"),
    )
    assert (tuned.publisher, tuned.input_modalities) == ("google", ("text",))


# --- model facts ----------------------------------------------------------------------


def test_the_default_catalog_lists_gemini_then_claude_with_their_publishers():
    adapter = VertexAdapter(environ={})
    ids = [model.id for model in adapter.list_models(PROVIDER_ROUTE)]
    assert ids == [model.id for model in DEFAULT_MODELS]
    assert ids[0].startswith("gemini-")
    assert ids[-1].startswith("claude-")
    assert {m.publisher for m in DEFAULT_MODELS if m.id.startswith("gemini")} == {
        "google"
    }
    assert {m.publisher for m in DEFAULT_MODELS if m.id.startswith("claude")} == {
        "anthropic"
    }
    assert all(
        m.input_modalities == ("text", "image")
        for m in adapter.list_models(PROVIDER_ROUTE)
    )


def test_a_claude_id_with_a_version_takes_the_anthropic_catalog_s_facts():
    adapter = VertexAdapter(environ={}, reasoning_effort="high")
    info = adapter.resolve_model(PROVIDER_ROUTE, "claude-opus-5@20260301")
    assert info.name == "Claude Opus 5"
    assert info.input_modalities == ("text", "image")
    assert info.context is not None
    assert info.context.context_window == 1_000_000
    assert info.default_max_tokens == 64_000
    assert info.reasoning is not None
    assert next(e.id for e in info.reasoning.efforts) == "off"
    assert info.reasoning.default_effort == "high"
    assert claude_id("claude-opus-5@20260301") == "claude-opus-5"


def test_an_unknown_claude_id_is_text_only_with_the_anthropic_defaults():
    info = VertexAdapter(environ={}).resolve_model(PROVIDER_ROUTE, "claude-next")
    assert info.input_modalities == ("text",)
    assert info.context is not None
    assert info.context.context_window == 200_000
    assert info.default_max_tokens == 8_192


def test_a_gemini_model_takes_the_gemini_catalog_s_facts():
    adapter = VertexAdapter(environ={}, reasoning_effort="minimal")
    flash = adapter.resolve_model(PROVIDER_ROUTE, "gemini-3-flash-preview")
    assert flash.reasoning is not None
    assert flash.reasoning.default_effort == "minimal"
    pro = adapter.resolve_model(PROVIDER_ROUTE, "gemini-2.5-pro")
    assert pro.reasoning is not None
    assert pro.reasoning.default_effort == "auto"  # "minimal" is not offered
    assert [e.name for e in pro.reasoning.efforts][-1] == "Auto"
    unlisted = adapter.resolve_model(PROVIDER_ROUTE, "gemini-2.0-flash")
    assert unlisted.input_modalities == ("text",)


def test_publisher_for_prefers_the_catalog_entry():
    models = (VertexModel(id="claude-custom", publisher="google"),)
    assert publisher_for("claude-custom", models) == "google"
    assert publisher_for("claude-other", models) == "anthropic"
    assert publisher_for("anything", models) == "google"


# --- repr and the plugin --------------------------------------------------------------


def test_the_repr_names_the_endpoint_and_never_a_token():
    adapter = VertexAdapter(TOKEN, project="p", location="us-east5", environ={})
    assert repr(adapter) == (
        "VertexAdapter(base_url='https://us-east5-aiplatform.googleapis.com', "
        "project='p', location='us-east5', api_key=***)"
    )
    adc = VertexAdapter(environ={})
    assert repr(adc) == (
        "VertexAdapter(base_url='https://aiplatform.googleapis.com', "
        "location='global', api_key_env='GOOGLE_OAUTH_ACCESS_TOKEN')"
    )


def test_the_plugin_registers_the_route_from_a_composition_entry():
    entry = {
        "id": "v",
        "name": BuiltinPlugin(ROW),
        "config": {"project": "p", "location": "us-east5", "reasoningEffort": "low"},
    }
    with load_composition([entry], environ={}) as composition:
        runtime = composition.runtime
        (info,) = runtime.list_providers()
        assert (info.id, info.name) == ("vertex", "Vertex AI")
        assert any(m.id.startswith("claude") for m in runtime.list_models("vertex"))
    assert runtime.list_providers() == ()


def test_the_plugin_s_config_errors_name_the_key():
    entry = {"id": "v", "name": BuiltinPlugin(ROW), "config": {"location": "Mars"}}
    with pytest.raises(PluginLoadError) as caught:
        load_composition([entry], environ={})
    assert caught.value.key == "location"
    assert "must be a Vertex AI location" in caught.value.message


def test_a_gemini_entry_without_efforts_resolves_without_reasoning_info():
    from dsh_llm.runtime import LlmRuntime

    runtime = LlmRuntime()
    adapter = VertexAdapter(environ={}, models=[{"id": "plain", "efforts": []}])
    runtime.register_adapter([PROVIDER_ROUTE], adapter)
    info = runtime.resolve_model_info(PROVIDER_ROUTE, "plain")
    assert info.reasoning is None
    assert info.input_modalities == ("text",)
