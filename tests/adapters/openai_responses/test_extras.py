"""``response_format``, ``extra_body``, ``extra_headers`` and images on the
Responses adapter, checked with ``responses``: what goes on the wire, and the
refusals that happen before any I/O."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
import responses

from dsh_llm.adapters.openai_responses import OpenAIResponsesAdapter
from dsh_llm.attachments import MemoryAttachmentStore
from dsh_llm.attachments import image_block
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import ContentBlock
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import Message
from dsh_llm.protocol import ResponseFormat
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import ToolResultBlock
from dsh_llm.protocol import create_assistant_message
from dsh_llm.protocol import create_user_message
from dsh_llm.testing import sse_body
from dsh_llm.transport.session import stream_headers
from dsh_llm.validator import validate_stream

from ...attachments.images import png
from ..schemas import CITY_SCHEMA

BASE = "http://gpu-box.test:9999/v1"
URL = f"{BASE}/responses"
KEY = "sk-responses-test-0123456789"
SCHEMA = CITY_SCHEMA
MODELS = [{"id": "vision", "inputModalities": ["text", "image"]}, "text-only"]
SERVERS = ("openai", "vllm", "ollama", "lmstudio", "openrouter")


def _reply() -> bytes:
    item = {"type": "message", "id": "m1", "role": "assistant", "content": []}
    completed = {
        "id": "resp_1",
        "model": "vision",
        "status": "completed",
        "output": [],
        "usage": {"input_tokens": 5, "output_tokens": 2},
    }
    return sse_body(
        [
            {"type": "response.output_item.added", "output_index": 0, "item": item},
            {
                "type": "response.output_text.delta",
                "item_id": "m1",
                "output_index": 0,
                "content_index": 0,
                "delta": '{"city": "Paris"}',
            },
            {"type": "response.completed", "response": completed},
        ],
        done=False,
    )


@pytest.fixture
def mocked() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        mock.add(responses.POST, URL, body=_reply(), content_type="text/event-stream")
        yield mock


def _adapter(server: str = "openai", **config: Any) -> OpenAIResponsesAdapter:
    config.setdefault("models", MODELS)
    return OpenAIResponsesAdapter(BASE, server=server, **config)


def _options(*messages: Message, **fields: Any) -> GenerateOptions:
    if not messages:
        messages = (create_user_message("a city as JSON"),)
    fields.setdefault("model", "vision")
    return GenerateOptions(messages=messages, **fields)


def _send(
    mock: responses.RequestsMock,
    adapter: OpenAIResponsesAdapter,
    *messages: Message,
    **fields: Any,
) -> Any:
    with adapter:
        chunks = list(
            validate_stream(adapter.stream(_options(*messages, **fields)), strict=True)
        )
    assert chunks[-1].type == "finish"
    assert len(mock.calls) == 1
    return mock.calls[0].request


def _body(request: Any) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(request.body)
    return body


def _refused(
    mock: responses.RequestsMock,
    adapter: OpenAIResponsesAdapter,
    *messages: Message,
    **fields: Any,
) -> LlmError:
    with adapter, pytest.raises(LlmError) as caught:
        next(iter(adapter.stream(_options(*messages, **fields))))
    assert len(mock.calls) == 0, "a refusal must send nothing"
    return caught.value


# --- response_format ------------------------------------------------------------------


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("server", SERVERS)
def test_response_format_is_text_format_json_schema(mocked, server, strict):
    wanted = ResponseFormat(schema=SCHEMA, name="city", strict=strict)
    body = _body(_send(mocked, _adapter(server), response_format=wanted))
    assert body == {
        "model": "vision",
        "input": [
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "a city as JSON"}],
            }
        ],
        "text": {
            "format": {
                "type": "json_schema",
                "name": "city",
                "schema": SCHEMA,
                "strict": strict,
            }
        },
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "stream": True,
    }
    assert list(body) == ["model", "input", "text", "store", "include", "stream"]


def test_a_bare_schema_goes_with_the_default_name_not_strict(mocked):
    body = _body(_send(mocked, _adapter(), response_format=SCHEMA))
    assert body["text"] == {
        "format": {
            "type": "json_schema",
            "name": "response",
            "schema": SCHEMA,
            "strict": False,
        }
    }


def test_no_response_format_sends_no_text(mocked):
    assert "text" not in _body(_send(mocked, _adapter()))


# --- extra_body -----------------------------------------------------------------------


def test_extra_body_is_merged_last_and_replaces_the_adapters_keys(mocked):
    extra = {"top_p": 0.9, "temperature": 0.5, "store": True, "seed": None}
    body = _body(
        _send(mocked, _adapter(), temperature=0, max_tokens=7, extra_body=extra)
    )
    assert body["temperature"] == 0.5
    assert body["store"] is True
    assert body["max_output_tokens"] == 7
    assert list(body)[-2:] == ["top_p", "seed"]
    assert body["top_p"] == 0.9
    assert body["seed"] is None


def test_a_text_mapping_in_extra_body_is_merged_into_the_format(mocked):
    wanted = ResponseFormat(schema=SCHEMA, name="city", strict=True)
    body = _body(
        _send(
            mocked,
            _adapter(),
            response_format=wanted,
            extra_body={"text": {"verbosity": "low"}},
        )
    )
    assert body["text"] == {
        "format": {
            "type": "json_schema",
            "name": "city",
            "schema": SCHEMA,
            "strict": True,
        },
        "verbosity": "low",
    }


def test_a_format_in_extra_body_wins_over_response_format(mocked):
    body = _body(
        _send(
            mocked,
            _adapter(),
            response_format=SCHEMA,
            extra_body={"text": {"format": {"type": "json_object"}}},
        )
    )
    assert body["text"] == {"format": {"type": "json_object"}}


def test_extra_body_text_alone_is_sent_as_given(mocked):
    body = _body(_send(mocked, _adapter(), extra_body={"text": {"verbosity": "high"}}))
    assert body["text"] == {"verbosity": "high"}


# --- extra_headers --------------------------------------------------------------------


def _headers(request: Any) -> dict[str, str]:
    return {name.lower(): value for name, value in request.headers.items()}


def test_extra_headers_are_sent_lower_cased_beside_the_adapters(mocked):
    request = _send(
        mocked,
        _adapter(api_key=KEY),
        extra_headers={"X-Trace-Id": "t-1", "OpenAI-Organization": "org-1"},
    )
    expected = {
        **stream_headers(),
        "x-trace-id": "t-1",
        "openai-organization": "org-1",
        "authorization": f"Bearer {KEY}",
    }
    sent = _headers(request)
    assert {name: sent[name] for name in expected} == expected
    assert set(sent) - set(expected) <= {"connection", "content-length"}


def test_without_a_key_authorization_may_come_from_extra_headers(mocked):
    request = _send(
        mocked, _adapter(), extra_headers={"Authorization": "Bearer proxy-token"}
    )
    assert _headers(request)["authorization"] == "Bearer proxy-token"


@pytest.mark.parametrize(
    ("name", "config"),
    [
        ("Authorization", {"api_key": KEY}),
        ("authorization", {"api_key_env": "RESPONSES_KEY"}),
        ("Accept", {}),
        ("User-Agent", {}),
        ("content-type", {}),
        ("Host", {}),
    ],
)
def test_a_header_the_adapter_sets_is_refused_naming_it(mocked, name, config):
    environ = {"RESPONSES_KEY": KEY}
    adapter = _adapter(environ=environ, **config)
    error = _refused(mocked, adapter, extra_headers={name: "secret-value-42"})
    assert error.code == ErrorCode.UNSUPPORTED_OPTION
    assert f'"{name.lower()}"' in error.message
    assert "secret-value-42" not in error.message
    assert KEY not in error.message


# --- images ---------------------------------------------------------------------------


def _data_url(data: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(data).decode()


def _user(*blocks: ContentBlock) -> Message:
    return create_user_message(list(blocks))


@pytest.mark.parametrize("server", SERVERS)
def test_an_image_model_gets_input_image_parts_in_block_order(mocked, server):
    store = MemoryAttachmentStore()
    first, second = png(2, 3), png(4, 1)
    adapter = _adapter(server)
    adapter.attachments = store
    message = _user(
        TextBlock(text="Compare"),
        image_block(first, store=store),
        TextBlock(text="with"),
        image_block(second, store=store),
    )
    body = _body(_send(mocked, adapter, message))
    assert body["input"] == [
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "Compare"},
                {
                    "type": "input_image",
                    "image_url": _data_url(first),
                    "detail": "auto",
                },
                {"type": "input_text", "text": "with"},
                {
                    "type": "input_image",
                    "image_url": _data_url(second),
                    "detail": "auto",
                },
            ],
        }
    ]


@pytest.mark.parametrize("server", ["openai", "ollama"])
def test_an_image_in_a_tool_result_goes_as_output_parts(mocked, server):
    store = MemoryAttachmentStore()
    data = png(3, 3)
    adapter = _adapter(server)
    adapter.attachments = store
    result = ToolResultBlock(
        tool_call_id="call_1",
        content=(TextBlock(text="the chart"), image_block(data, store=store)),
    )
    body = _body(_send(mocked, adapter, _user(result)))
    assert body["input"] == [
        {
            "type": "function_call_output",
            "call_id": "call_1",
            "output": [
                {"type": "input_text", "text": "the chart"},
                {"type": "input_image", "image_url": _data_url(data), "detail": "auto"},
            ],
        }
    ]


@pytest.mark.parametrize("server", ["vllm", "lmstudio", "openrouter"])
def test_an_image_in_a_tool_result_is_refused_where_the_server_cannot_read_it(
    mocked, server
):
    store = MemoryAttachmentStore()
    adapter = _adapter(server)
    adapter.attachments = store
    result = ToolResultBlock(
        tool_call_id="call_1", content=(image_block(png(1, 1), store=store),)
    )
    error = _refused(mocked, adapter, _user(result))
    assert error.code == ErrorCode.UNSUPPORTED_CONTENT
    assert "tool result" in error.message


def test_an_image_nested_in_a_results_own_result_is_refused(mocked):
    store = MemoryAttachmentStore()
    adapter = _adapter()
    adapter.attachments = store
    inner = ToolResultBlock(
        tool_call_id="call_0", content=(image_block(png(1, 1), store=store),)
    )
    outer = ToolResultBlock(tool_call_id="call_1", content=(inner,))
    error = _refused(mocked, adapter, _user(outer))
    assert error.code == ErrorCode.UNSUPPORTED_CONTENT
    assert "nested" in error.message


def test_an_image_in_an_assistant_turn_is_refused(mocked):
    store = MemoryAttachmentStore()
    adapter = _adapter()
    adapter.attachments = store
    turn = create_assistant_message(
        [image_block(png(1, 1), store=store)], provider="lab", model="vision"
    )
    error = _refused(mocked, adapter, _user(TextBlock(text="hi")), turn)
    assert error.code == ErrorCode.UNSUPPORTED_CONTENT
    assert "assistant" in error.message


@pytest.mark.parametrize("model", ["text-only", "unlisted"])
def test_a_text_only_or_unlisted_model_refuses_images(mocked, model):
    store = MemoryAttachmentStore()
    adapter = _adapter()
    adapter.attachments = store
    message = _user(TextBlock(text="look"), image_block(png(1, 1), store=store))
    error = _refused(mocked, adapter, message, model=model)
    assert error.code == ErrorCode.UNSUPPORTED_CONTENT
    assert f'"{model}"' in error.message


def test_an_image_without_a_store_is_a_missing_attachment(mocked):
    message = _user(image_block(png(1, 1), store=MemoryAttachmentStore()))
    error = _refused(mocked, _adapter(), message)
    assert error.code == ErrorCode.MISSING_ATTACHMENT
    assert "no attachment store" in error.message


def test_an_image_the_store_lacks_is_a_missing_attachment(mocked):
    block = image_block(png(5, 5))  # never stored
    adapter = _adapter()
    adapter.attachments = MemoryAttachmentStore()
    error = _refused(mocked, adapter, _user(TextBlock(text="look"), block))
    assert error.code == ErrorCode.MISSING_ATTACHMENT
    assert block.attachment.attachment_id in error.message


def test_the_image_check_comes_before_the_key(mocked):
    message = _user(image_block(png(1, 1)))
    adapter = _adapter(api_key_env="UNSET_RESPONSES_KEY", environ={})
    error = _refused(mocked, adapter, message, model="text-only")
    assert error.code == ErrorCode.UNSUPPORTED_CONTENT


def test_the_catalog_advertises_image_only_where_listed():
    with _adapter(models=[*MODELS, {"id": "plain"}]) as adapter:
        listed = {m.id: m.input_modalities for m in adapter.list_models("lab")}
        assert listed == {
            "vision": ("text", "image"),
            "text-only": ("text",),
            "plain": ("text",),
        }
        resolve = adapter.resolve_model
        assert resolve("lab", "vision").input_modalities == ("text", "image")
        assert resolve("lab", "text-only").input_modalities == ("text",)
        assert resolve("lab", "unlisted").input_modalities == ("text",)
