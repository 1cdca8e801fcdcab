"""``response_format``, ``extra_body`` and ``extra_headers`` on the two
chat-completions adapters, checked with ``responses``: what goes on the wire, and
the refusals that happen before any I/O."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import responses

from dsh_llm.adapters import AdapterConfigError
from dsh_llm.adapters.deepseek import DeepSeekAdapter
from dsh_llm.adapters.openai_compat import OpenAICompatAdapter
from dsh_llm.assembler import collect
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import ResponseFormat
from dsh_llm.structured import parse_json
from dsh_llm.testing import Cassette
from dsh_llm.testing import replay_chunks
from dsh_llm.testing import sse_body
from dsh_llm.validator import validate_stream

from .chat_chunks import FIRST
from .chat_chunks import finish
from .chat_chunks import text

LOCAL = "http://gpu-box.test:8000/v1"
DEEPSEEK = "https://api.deepseek.test"
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}


@pytest.fixture
def mocked() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        for url in (f"{LOCAL}/chat/completions", f"{DEEPSEEK}/chat/completions"):
            mock.add(
                responses.POST,
                url,
                body=sse_body([FIRST, text("{}"), finish()]),
                content_type="text/event-stream",
            )
        yield mock


def _local(**config: Any) -> OpenAICompatAdapter:
    return OpenAICompatAdapter(LOCAL, **config)


def _deepseek() -> DeepSeekAdapter:
    return DeepSeekAdapter(base_url=DEEPSEEK, environ={"DEEPSEEK_API_KEY": "sk-t"})


def _options(**fields: Any) -> GenerateOptions:
    return GenerateOptions.from_prompt("some-model", "a city as JSON", **fields)


def _send(
    mock: responses.RequestsMock,
    adapter: OpenAICompatAdapter | DeepSeekAdapter,
    **f: Any,
) -> Any:
    with adapter:
        list(validate_stream(adapter.stream(_options(**f)), strict=True))
    return mock.calls[-1].request


def _body(request: Any) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(request.body)
    return body


def _refused(adapter: OpenAICompatAdapter | DeepSeekAdapter, **f: Any) -> LlmError:
    with adapter, pytest.raises(LlmError) as caught:
        next(iter(adapter.stream(_options(**f))))
    return caught.value


@pytest.mark.parametrize("strict", [False, True])
def test_openai_compatible_sends_a_json_schema_response_format(mocked, strict):
    wanted = ResponseFormat(schema=SCHEMA, name="city", strict=strict)
    body = _body(_send(mocked, _local(), response_format=wanted))
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "city", "schema": SCHEMA, "strict": strict},
    }
    assert list(body)[-1] == "response_format"


def test_a_bare_schema_goes_with_the_default_name_not_strict(mocked):
    body = _body(_send(mocked, _local(), response_format=SCHEMA))
    assert body["response_format"]["json_schema"] == {
        "name": "response",
        "schema": SCHEMA,
        "strict": False,
    }


def test_no_response_format_sends_none(mocked):
    assert "response_format" not in _body(_send(mocked, _local()))


def test_deepseek_sends_json_mode_for_a_non_strict_format(mocked):
    body = _body(_send(mocked, _deepseek(), response_format=SCHEMA))
    assert body["response_format"] == {"type": "json_object"}


def test_deepseek_refuses_a_strict_schema_before_io(mocked):
    wanted = ResponseFormat(schema=SCHEMA, strict=True)
    error = _refused(_deepseek(), response_format=wanted)
    assert error.code == ErrorCode.UNSUPPORTED_OPTION
    assert "does not enforce a schema" in error.message
    assert len(mocked.calls) == 0


@pytest.mark.parametrize("adapter", [_local, _deepseek])
def test_extra_body_is_merged_last_and_replaces_the_adapters_keys(mocked, adapter):
    extra = {"top_k": 20, "temperature": 0.5, "seed": None}
    # DeepSeek samples with a temperature only with thinking off.
    thinking = {"reasoning_effort": "off"} if adapter is _deepseek else {}
    body = _body(_send(mocked, adapter(), temperature=0, extra_body=extra, **thinking))
    assert list(body)[-2:] == ["top_k", "seed"]
    assert body["temperature"] == 0.5
    assert body["top_k"] == 20
    assert body["seed"] is None


@pytest.mark.parametrize("adapter", [_local, _deepseek])
def test_extra_headers_are_sent_lower_cased(mocked, adapter):
    request = _send(mocked, adapter(), extra_headers={"X-Trace-Id": "t-1"})
    assert request.headers["x-trace-id"] == "t-1"


@pytest.mark.parametrize("name", ["User-Agent", "accept", "Content-Type", "Host"])
@pytest.mark.parametrize("adapter", [_local, _deepseek])
def test_extra_headers_cannot_replace_the_adapters_headers(mocked, adapter, name):
    error = _refused(adapter(), extra_headers={name: "x"})
    assert error.code == ErrorCode.UNSUPPORTED_OPTION
    assert name.lower() in error.message
    assert len(mocked.calls) == 0


def test_authorization_is_refused_beside_a_key_and_allowed_without(mocked):
    error = _refused(_deepseek(), extra_headers={"Authorization": "Bearer other"})
    assert error.code == ErrorCode.UNSUPPORTED_OPTION
    assert "other" not in error.message
    request = _send(mocked, _local(), extra_headers={"Authorization": "Bearer t"})
    assert request.headers["authorization"] == "Bearer t"


def test_a_configured_header_cannot_be_replaced_per_call(mocked):
    adapter = _local(headers={"X-Title": "app"})
    error = _refused(adapter, extra_headers={"x-title": "other"})
    assert error.code == ErrorCode.UNSUPPORTED_OPTION
    assert "other" not in error.message


# -- recorded from a real llama-cpp-python server ------------------------------------

LLAMACPP_STRUCTURED = (
    Path(__file__).parents[1]
    / "fixtures"
    / "cassettes"
    / "llamacpp"
    / "structured.jsonl"
)
CAPITAL = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
    "required": ["city", "country"],
    "additionalProperties": False,
}


def _capital_options() -> GenerateOptions:
    return GenerateOptions.from_prompt(
        "smollm2",
        "What is the capital of France? Answer as JSON with city and country.",
        max_tokens=60,
        response_format=ResponseFormat(schema=CAPITAL, name="capital", strict=True),
    )


def test_the_json_object_schema_style_is_what_llama_cpp_python_accepted():
    # The recorded request is the one the server answered 200 with a
    # grammar-constrained answer (it refuses {"type": "json_schema"} with a 500).
    recorded = json.loads(Cassette.load(LLAMACPP_STRUCTURED).request.body)
    assert recorded["response_format"] == {"type": "json_object", "schema": CAPITAL}
    with responses.RequestsMock() as mocked:
        mocked.post(f"{LOCAL}/chat/completions", body=sse_body([text("{}"), finish()]))
        adapter = OpenAICompatAdapter(LOCAL, response_format_style="json_object_schema")
        list(adapter.stream(_capital_options()))
        sent = json.loads(mocked.calls[0].request.body)
    assert sent == recorded


def test_the_recorded_structured_answer_parses_against_its_schema():
    chunks = replay_chunks(
        LLAMACPP_STRUCTURED,
        OpenAICompatAdapter,
        options=_capital_options(),
        response_format_style="json_object_schema",
    )
    value = parse_json(collect(iter(chunks)), CAPITAL)
    assert set(value) == {"city", "country"}
    assert value["city"] == "Paris"


def test_a_bad_response_format_style_is_refused_keyed():
    with pytest.raises(AdapterConfigError) as caught:
        OpenAICompatAdapter(LOCAL, response_format_style="grammar")
    assert caught.value.key == "responseFormatStyle"
