"""The hosted-service profiles of ``OpenAICompatAdapter`` (``service="groq"``...):
what a profile fills in and what explicit options override, the request each
service gets (checked with ``responses``), and one recorded-style stream per
quirk (``tests/fixtures/hosted``) replayed over the loopback server, the table
of ``docs/hosted-services.md``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import responses

from dsh_llm.adapters import AdapterConfigError
from dsh_llm.adapters import CatalogModel
from dsh_llm.adapters.chat.request import CHAT_REPLAY_WIRE
from dsh_llm.adapters.chat.request import WireProfile
from dsh_llm.adapters.chat.services import SERVICE_NAMES
from dsh_llm.adapters.chat.services import SERVICES
from dsh_llm.adapters.chat.services import service
from dsh_llm.adapters.openai_compat import OpenAICompatAdapter
from dsh_llm.adapters.openai_compat import OpenAICompatConfig
from dsh_llm.assembler import BlockAssembler
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.plugins import load_composition
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import Message
from dsh_llm.protocol import ModelSource
from dsh_llm.protocol import ReasoningBlock
from dsh_llm.protocol import ReplayEnvelope
from dsh_llm.protocol import ResponseFormat
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.protocol import create_assistant_message
from dsh_llm.protocol import create_tool_result_message
from dsh_llm.protocol import create_user_message
from dsh_llm.serde import chunk_to_dict
from dsh_llm.serde import read_jsonl
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply
from dsh_llm.testing import assert_adapter_conforms
from dsh_llm.testing import sse_body
from dsh_llm.testing.conformance import GROUPS
from dsh_llm.validator import validate_stream

from .chat_chunks import finish
from .chat_chunks import text

FIXTURES = Path(__file__).parent.parent / "fixtures" / "hosted"
NAMES = sorted(p.stem for p in FIXTURES.glob("*.sse"))


def _options(model: str = "m", **fields: Any) -> GenerateOptions:
    fields.setdefault("messages", (create_user_message("hi"),))
    return GenerateOptions(provider="hosted", model=model, **fields)


# --- the profiles ---------------------------------------------------------------------


def test_every_service_the_issue_names_has_a_profile():
    assert SERVICE_NAMES == (
        "groq",
        "mistral",
        "xai",
        "openrouter",
        "together",
        "fireworks",
        "cerebras",
        "deepinfra",
        "perplexity",
    )
    for name in SERVICE_NAMES:
        profile = service(name)
        assert profile.name == name
        assert profile.base_url.startswith("https://")
        assert profile.api_key_env
        assert profile.models, name
        assert set(profile.model_efforts) <= {m.id for m in profile.models}


@pytest.mark.parametrize("name", SERVICE_NAMES)
def test_a_service_fills_in_the_config(name):
    profile = service(name)
    config = OpenAICompatConfig(service=name)
    assert config.base_url == profile.base_url
    assert config.api_key_env == profile.api_key_env
    assert config.display_name == profile.display_name
    assert config.models == profile.models
    assert config.include_usage is profile.include_usage
    assert config.max_tokens_field == profile.max_tokens_field
    assert config.response_format_style == profile.response_format_style
    assert config.reasoning_passback_field == profile.reasoning_passback_field
    assert config.reasoning_efforts is None


@pytest.mark.parametrize("name", SERVICE_NAMES)
def test_the_endpoint_profile_carries_the_services_stream_quirks(name):
    profile = service(name)
    with OpenAICompatAdapter.for_service(name, environ={}) as adapter:
        wire = adapter.endpoint.profile
        assert adapter.display_name == profile.display_name
    assert isinstance(wire, WireProfile)
    assert wire.provider == profile.display_name
    for key, value in profile.wire_quirks().items():
        assert getattr(wire, key) == value


def test_explicit_options_win_over_the_profile():
    config = OpenAICompatConfig(
        service="groq",
        base_url="https://proxy.test/groq/v1",
        api_key_env="MY_GROQ",
        display_name="Groq via proxy",
        models=["my-model"],
        include_usage=False,
        max_tokens_field="max_tokens",
        response_format_style="json_object",
        reasoning_passback_field=None,
        reasoning_efforts=["low"],
    )
    assert config.base_url == "https://proxy.test/groq/v1"
    assert config.api_key_env == "MY_GROQ"
    assert config.display_name == "Groq via proxy"
    assert config.models == (CatalogModel(id="my-model"),)
    assert config.include_usage is False
    assert config.max_tokens_field == "max_tokens"
    assert config.response_format_style == "json_object"
    assert config.reasoning_passback_field is None
    with OpenAICompatAdapter.from_config(config, environ={}) as adapter:
        # The stream's quirks stay the service's.
        assert adapter.endpoint.profile.usage_paths == (("x_groq", "usage"),)


def test_without_a_service_nothing_changes():
    config = OpenAICompatConfig(base_url="http://127.0.0.1:8080/v1")
    assert config.service is None
    assert config.api_key_env is None
    assert config.display_name == "OpenAI-compatible"
    assert config.models == ()
    with OpenAICompatAdapter.from_config(config) as adapter:
        assert adapter.endpoint.profile == WireProfile(
            provider="OpenAI-compatible", reasoning_passback_field=None
        )


def test_an_unknown_service_is_refused_by_its_key():
    with pytest.raises(AdapterConfigError) as caught:
        OpenAICompatAdapter.for_service("groqq")
    assert caught.value.key == "service"
    assert "groq, mistral, xai" in caught.value.detail


def test_a_base_url_is_required_without_a_service():
    with pytest.raises(AdapterConfigError) as caught:
        OpenAICompatAdapter()
    assert caught.value.key == "baseURL"
    assert "is required" in caught.value.detail


def test_for_service_is_the_constructor_with_service():
    with (
        OpenAICompatAdapter.for_service("xai", environ={}) as one,
        OpenAICompatAdapter(service="xai", environ={}) as other,
    ):
        assert one.config == other.config
        assert repr(one) == (
            "OpenAICompatAdapter(base_url='https://api.x.ai/v1', service='xai', "
            "api_key_env='XAI_API_KEY')"
        )


def test_an_explicit_key_replaces_the_services_variable():
    with OpenAICompatAdapter.for_service("groq", api_key="sk-explicit") as adapter:
        assert "api_key=***" in repr(adapter)
    with pytest.raises(AdapterConfigError) as caught:
        OpenAICompatAdapter.for_service("groq", api_key="sk-x", api_key_env="OTHER")
    assert caught.value.key == "apiKey"


def test_a_composition_entry_names_a_service():
    entry = {
        "id": "groq",
        "name": "llm-openai-compatible",
        "config": {"providers": ["groq"], "service": "groq"},
    }
    with load_composition([entry], environ={}) as composition:
        runtime = composition.runtime
        assert [p.name for p in runtime.list_providers()] == ["Groq"]
        assert [m.id for m in runtime.list_models("groq")] == [
            m.id for m in service("groq").models
        ]
        efforts = runtime.resolve_model_info("groq", "openai/gpt-oss-20b").reasoning
        assert efforts is not None
        assert [e.id for e in efforts.efforts] == ["low", "medium", "high"]


def test_a_composition_entry_with_a_wrong_service_fails_by_its_key():
    from dsh_llm.plugins import PluginLoadError

    entry = {
        "id": "x",
        "name": "llm-openai-compatible",
        "config": {"providers": ["x"], "service": 3},
    }
    with pytest.raises(PluginLoadError) as caught:
        load_composition([entry], environ={})
    assert 'config key "service"' in str(caught.value)


# --- model efforts --------------------------------------------------------------------


def test_a_service_model_takes_its_own_efforts():
    with OpenAICompatAdapter.for_service("xai", environ={}) as adapter:
        mini = adapter.resolve_model("xai", "grok-3-mini").reasoning
        assert mini is not None
        assert [e.id for e in mini.efforts] == ["low", "high"]
        assert adapter.resolve_model("xai", "grok-4").reasoning is None


def test_configured_efforts_apply_to_every_model():
    with OpenAICompatAdapter.for_service(
        "xai", environ={}, reasoning_efforts=["max"]
    ) as adapter:
        for model in ("grok-3-mini", "grok-4", "unlisted"):
            info = adapter.resolve_model("xai", model).reasoning
            assert info is not None
            assert [e.id for e in info.efforts] == ["max"]


# --- the request each service gets ----------------------------------------------------


@pytest.fixture
def mocked() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        for profile in SERVICES.values():
            mock.add(
                responses.POST,
                f"{profile.base_url}/chat/completions",
                body=sse_body([text("ok"), finish()]),
                content_type="text/event-stream",
            )
        yield mock


def _sent(
    mock: responses.RequestsMock, name: str, **fields: Any
) -> tuple[Any, dict[str, Any]]:
    environ = {service(name).api_key_env: "sk-test"}
    with OpenAICompatAdapter.for_service(name, environ=environ) as adapter:
        list(validate_stream(adapter.stream(_options(**fields)), strict=True))
    request = mock.calls[-1].request
    return request, json.loads(request.body)


@pytest.mark.parametrize("name", SERVICE_NAMES)
def test_each_service_gets_its_url_key_and_spellings(mocked, name):
    profile = service(name)
    request, body = _sent(mocked, name, max_tokens=100)
    assert request.url == f"{profile.base_url}/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert ("stream_options" in body) is profile.include_usage
    assert body[profile.max_tokens_field] == 100
    other = {"max_tokens", "max_completion_tokens"} - {profile.max_tokens_field}
    assert not other & set(body)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("together", {"type": "json_object", "schema": {"type": "object"}}),
        (
            "groq",
            {
                "type": "json_schema",
                "json_schema": {
                    "name": "answer",
                    "schema": {"type": "object"},
                    "strict": False,
                },
            },
        ),
    ],
)
def test_response_format_is_spelled_as_the_service_reads_it(mocked, name, expected):
    wanted = ResponseFormat(name="answer", schema={"type": "object"})
    _, body = _sent(mocked, name, response_format=wanted)
    assert body["response_format"] == expected


def test_a_missing_key_names_the_services_variable():
    with (
        OpenAICompatAdapter.for_service("mistral", environ={}) as adapter,
        pytest.raises(LlmError) as caught,
    ):
        next(adapter.stream(_options()))
    assert caught.value.code == ErrorCode.MISSING_CREDENTIAL
    assert "MISTRAL_API_KEY" in caught.value.message


@pytest.mark.parametrize(
    ("name", "field"),
    [("groq", "reasoning"), ("cerebras", "reasoning"), ("mistral", None)],
)
def test_reasoning_goes_back_where_the_service_reads_it(mocked, name, field):
    turn = create_assistant_message(
        (
            ReasoningBlock(text="think"),
            ToolCallBlock(id="c1", name="f", arguments="{}"),
        ),
        provider="hosted",
        model="m",
    )
    messages = (
        create_user_message("hi"),
        turn,
        create_tool_result_message("c1", "done"),
    )
    _, body = _sent(mocked, name, messages=messages)
    assistant = body["messages"][1]
    passback = {"reasoning", "reasoning_content"} & set(assistant)
    assert passback == ({field} if field else set())
    if field:
        assert assistant[field] == "think"


def test_a_listed_effort_is_sent_and_an_unlisted_one_refused_before_io(mocked):
    _, body = _sent(mocked, "xai", model="grok-3-mini", reasoning_effort="high")
    assert body["reasoning_effort"] == "high"
    calls = len(mocked.calls)
    with (
        OpenAICompatAdapter.for_service("xai", api_key="sk") as adapter,
        pytest.raises(LlmError) as caught,
    ):
        next(adapter.stream(_options(model="grok-4", reasoning_effort="high")))
    assert caught.value.code == ErrorCode.UNSUPPORTED_REASONING_EFFORT
    assert len(mocked.calls) == calls


def _answered(name: str) -> Message:
    """The assistant turn a recorded OpenRouter answer assembles to."""
    assembler = BlockAssembler()
    for chunk in read_jsonl(str(FIXTURES / f"{name}.chunks.jsonl")):
        assembler.push(chunk)
    return assembler.message(
        ModelSource(
            provider="openrouter",
            model="anthropic/claude-haiku-4.5",
            replay_state=assembler.replay_state,
        )
    )


def test_openrouter_sends_the_reasoning_details_back(mocked):
    turn = _answered("openrouter_reasoning_details")
    messages = (
        create_user_message("Weather in Florence?"),
        turn,
        create_tool_result_message("toolu_bdrk_01N8hD5c", "40C"),
    )
    _, body = _sent(mocked, "openrouter", messages=messages)
    assistant = body["messages"][1]
    assert assistant["reasoning_details"] == [
        {
            "index": 0,
            "type": "reasoning.text",
            "format": "anthropic-claude-v1",
            "text": "The user wants the weather.",
            "signature": "EqQBCkgIBxABGAIqQKZ2s0m3cUx9sig==",
        }
    ]
    assert "reasoning" not in assistant


def test_reasoning_details_go_only_where_they_came_from(mocked):
    turn = _answered("openrouter_encrypted_reasoning")
    messages = (create_user_message("q"), turn, create_user_message("more"))
    _, body = _sent(mocked, "groq", messages=messages)
    assert "reasoning_details" not in body["messages"][1]
    foreign = create_assistant_message(
        turn.content,
        provider="gemini",
        model="g",
        replay_state=ReplayEnvelope(
            response={"wire": "gemini-generate-content", "reasoningDetails": [{}]}
        ),
    )
    _, body = _sent(mocked, "openrouter", messages=(messages[0], foreign, messages[2]))
    assert "reasoning_details" not in body["messages"][1]
    _, body = _sent(mocked, "openrouter", messages=messages)
    assert body["messages"][1]["reasoning_details"][0]["type"] == (
        "reasoning.encrypted"
    )
    assert CHAT_REPLAY_WIRE == "chat-completions"


# --- recorded-style streams, one per quirk -------------------------------------------


def _service_of(fixture: str) -> str:
    return fixture.split("_", 1)[0]


def _consumed(
    server: LoopbackServer, name: str, body: bytes, *, split: int | None, framing: str
) -> list[Any]:
    server.enqueue(Reply(body=body, split=split, framing=framing))
    chunks: list[Any] = []
    with OpenAICompatAdapter.for_service(
        name, base_url=f"{server.url}/v1", api_key="sk-test"
    ) as adapter:
        try:
            chunks.extend(adapter.stream(_options()))
        except LlmError as error:
            chunks.append(Finish(reason=FinishReason.error(error.failure)))
    return list(validate_stream(chunks, strict=True))


@pytest.mark.parametrize("framing", ["chunked", "close"])
@pytest.mark.parametrize("split", [None, 1], ids=["whole", "1-byte"])
@pytest.mark.parametrize("name", NAMES)
def test_recorded_stream_translates_to_its_expected_chunks(
    server, name, split, framing
):
    expected = [
        chunk_to_dict(c) for c in read_jsonl(str(FIXTURES / f"{name}.chunks.jsonl"))
    ]
    body = (FIXTURES / f"{name}.sse").read_bytes()
    chunks = _consumed(server, _service_of(name), body, split=split, framing=framing)
    assert [chunk_to_dict(c) for c in chunks] == expected


def test_every_fixture_has_its_expected_chunks_and_a_service():
    assert NAMES
    assert (
        sorted(p.name.removesuffix(".chunks.jsonl") for p in FIXTURES.glob("*.jsonl"))
        == NAMES
    )
    assert {_service_of(name) for name in NAMES} == set(SERVICE_NAMES)


@pytest.mark.parametrize(
    ("name", "generic_code"),
    [
        ("groq_reasoning_and_x_groq_usage", None),
        ("groq_x_groq_error", ErrorCode.STREAM_CLOSED),
        ("together_eos_finish", "EOS"),
        ("perplexity_citations_without_done", ErrorCode.STREAM_CLOSED),
        ("xai_usage_without_total", None),
    ],
)
def test_a_generic_server_profile_gets_these_wrong(server, name, generic_code):
    # The quirk each profile exists for: without it the same bytes end wrong.
    body = (FIXTURES / f"{name}.sse").read_bytes()
    server.enqueue(Reply(body=body))
    chunks: list[Any] = []
    with OpenAICompatAdapter(f"{server.url}/v1") as adapter:
        try:
            chunks.extend(adapter.stream(_options()))
        except LlmError as error:
            chunks.append(Finish(reason=FinishReason.error(error.failure)))
    expected = list(read_jsonl(str(FIXTURES / f"{name}.chunks.jsonl")))
    if generic_code is None:
        # Same blocks, but the usage is not the service's truth.
        assert chunks[-2] != expected[-2]
    else:
        assert chunks[-1].reason.failure.code == generic_code


# --- the conformance kit on every profile ---------------------------------------------

CASSETTE = (
    FIXTURES.parent / "cassettes" / "openai_compat" / "openai_parallel_tool_calls.jsonl"
)


@pytest.mark.parametrize("name", SERVICE_NAMES)
def test_every_profile_conforms(name):
    def factory(base_url: str, **options: Any) -> OpenAICompatAdapter:
        return OpenAICompatAdapter.for_service(
            name, base_url=base_url, api_key="sk-test", **options
        )

    groups = GROUPS
    if service(name).end_at_eof:
        # A body cut after the finish reason is whole where no [DONE] comes:
        # the truncation and end-marker groups assume [DONE] ends the stream.
        groups = tuple(g for g in GROUPS if g not in ("truncation", "end-marker"))
    report = assert_adapter_conforms(factory, CASSETTE, groups=groups)
    assert "abort while waiting" in report.variants
