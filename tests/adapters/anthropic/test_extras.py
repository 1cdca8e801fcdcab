"""``response_format``, ``extra_body``, ``extra_headers`` and images on
AnthropicAdapter, checked with ``responses``: the exact body and headers sent,
and every refusal raised before any I/O."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
import responses

from dsh_llm.adapters import AdapterConfigError
from dsh_llm.adapters import CatalogModel
from dsh_llm.adapters.anthropic import PROVIDER_ROUTE
from dsh_llm.adapters.anthropic import AnthropicAdapter
from dsh_llm.attachments import MemoryAttachmentStore
from dsh_llm.attachments import image_block
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import CallId
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import Message
from dsh_llm.protocol import PluginSource
from dsh_llm.protocol import ResponseFormat
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import ToolResultBlock
from dsh_llm.protocol import create_assistant_message
from dsh_llm.protocol import create_message
from dsh_llm.protocol import create_tool_result_message
from dsh_llm.protocol import create_user_message
from dsh_llm.transport.attribution import user_agent
from dsh_llm.validator import validate_stream

from ...attachments.images import gif
from ...attachments.images import png
from ..schemas import CITY_SCHEMA
from .replay import FIXTURES

BASE = "https://anthropic.test"
SSE = (FIXTURES / "text.sse").read_bytes()
KEY = "sk-ant-extras-test"
SCHEMA = CITY_SCHEMA
FORMAT = {"type": "json_schema", "schema": SCHEMA}


@pytest.fixture
def mocked() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        mock.add(
            responses.POST,
            f"{BASE}/v1/messages",
            body=SSE,
            content_type="text/event-stream",
        )
        yield mock


def _adapter(**config: Any) -> AnthropicAdapter:
    return AnthropicAdapter(base_url=BASE, environ={"ANTHROPIC_API_KEY": KEY}, **config)


def _options(*messages: Message, **fields: Any) -> GenerateOptions:
    fields.setdefault("model", "claude-haiku-4-5")
    fields.setdefault("max_tokens", 100)
    return GenerateOptions(
        provider=PROVIDER_ROUTE,
        messages=messages or (create_user_message("a city as JSON"),),
        **fields,
    )


def _send(
    mock: responses.RequestsMock,
    adapter: AnthropicAdapter,
    options: GenerateOptions,
) -> dict[str, Any]:
    with adapter:
        assert list(validate_stream(adapter.stream(options), strict=True))
    body = mock.calls[-1].request.body
    assert isinstance(body, bytes)
    decoded: dict[str, Any] = json.loads(body)
    return decoded


def _refused(
    mock: responses.RequestsMock, adapter: AnthropicAdapter, options: GenerateOptions
) -> LlmError:
    with adapter, pytest.raises(LlmError) as caught:
        next(adapter.stream(options))
    assert len(mock.calls) == 0
    return caught.value


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


# --- response_format ------------------------------------------------------------------


@pytest.mark.parametrize("strict", [False, True])
def test_response_format_is_output_config_format_strict_or_not(
    mocked: responses.RequestsMock, strict: bool
) -> None:
    wanted = ResponseFormat(schema=SCHEMA, name="capital", strict=strict)
    body = _send(mocked, _adapter(), _options(response_format=wanted))
    # The API enforces the schema natively; it takes no name and no strict flag.
    assert body == {
        "model": "claude-haiku-4-5",
        "max_tokens": 100,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "a city as JSON"}]}
        ],
        "stream": True,
        "output_config": {"format": FORMAT},
    }


def test_a_bare_schema_mapping_is_sent_the_same_way(
    mocked: responses.RequestsMock,
) -> None:
    body = _send(mocked, _adapter(), _options(response_format=SCHEMA))
    assert body["output_config"] == {"format": FORMAT}


def test_the_format_joins_the_adaptive_effort_in_one_output_config(
    mocked: responses.RequestsMock,
) -> None:
    body = _send(
        mocked,
        _adapter(),
        _options(
            model="claude-opus-5-5",
            reasoning_effort="high",
            response_format=ResponseFormat(schema=SCHEMA, strict=True),
        ),
    )
    assert list(body) == [
        "model",
        "max_tokens",
        "messages",
        "stream",
        "thinking",
        "output_config",
    ]
    assert body["thinking"] == {"type": "adaptive"}
    assert body["output_config"] == {"effort": "high", "format": FORMAT}


def test_budget_thinking_and_a_format_both_go(mocked: responses.RequestsMock) -> None:
    body = _send(
        mocked,
        _adapter(),
        _options(
            reasoning_effort="low",
            max_tokens=4096,
            response_format=ResponseFormat(schema=SCHEMA),
        ),
    )
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["output_config"] == {"format": FORMAT}


# --- extra_body -----------------------------------------------------------------------


def test_extra_body_is_merged_last_and_wins(mocked: responses.RequestsMock) -> None:
    body = _send(
        mocked,
        _adapter(),
        _options(
            temperature=0.5,
            response_format=SCHEMA,
            extra_body={
                "temperature": 0.2,
                "top_k": 5,
                "output_config": {"effort": "low"},
            },
        ),
    )
    assert body == {
        "model": "claude-haiku-4-5",
        "max_tokens": 100,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "a city as JSON"}]}
        ],
        "stream": True,
        "output_config": {"format": FORMAT, "effort": "low"},  # merged, theirs win
        "temperature": 0.2,
        "top_k": 5,
    }


# --- extra_headers --------------------------------------------------------------------


def test_extra_headers_are_sent_lower_cased_beside_the_adapters(
    mocked: responses.RequestsMock,
) -> None:
    _send(
        mocked,
        _adapter(),
        _options(
            extra_headers={
                "X-Trace-Id": "trace-1",
                "Anthropic-Beta": "context-1m-2025-08-07",
            }
        ),
    )
    request = mocked.calls[0].request
    assert isinstance(request.body, bytes)
    headers = {name.lower(): value for name, value in request.headers.items()}
    # anthropic-beta is the caller's to set while no beta is configured.
    assert headers == {
        "user-agent": user_agent(),
        "accept": "text/event-stream",
        "accept-encoding": "identity",
        "content-type": "application/json",
        "anthropic-version": "2023-06-01",
        "x-trace-id": "trace-1",
        "anthropic-beta": "context-1m-2025-08-07",
        "x-api-key": KEY,
        "connection": "keep-alive",
        "content-length": str(len(request.body)),
    }
    assert {"X-Trace-Id", "Anthropic-Beta"}.isdisjoint(request.headers.keys())


@pytest.mark.parametrize(
    ("name", "config"),
    [
        ("x-api-key", {}),
        ("X-Api-Key", {}),
        ("anthropic-version", {}),
        ("Anthropic-Beta", {"beta": ["context-1m-2025-08-07"]}),
        ("user-agent", {}),
        ("content-type", {}),
        ("accept", {}),
    ],
)
def test_the_adapters_own_headers_are_refused_by_name_never_value(
    mocked: responses.RequestsMock, name: str, config: dict[str, Any]
) -> None:
    secret = "sk-ant-should-never-show"
    error = _refused(mocked, _adapter(**config), _options(extra_headers={name: secret}))
    assert error.code == ErrorCode.UNSUPPORTED_OPTION
    assert f'"{name.lower()}"' in str(error)
    assert secret not in str(error)


def test_a_header_refusal_needs_no_key(mocked: responses.RequestsMock) -> None:
    adapter = AnthropicAdapter(base_url=BASE, environ={})
    error = _refused(
        mocked, adapter, _options(extra_headers={"anthropic-version": "2099-01-01"})
    )
    assert error.code == ErrorCode.UNSUPPORTED_OPTION


# --- images ---------------------------------------------------------------------------


def test_images_in_a_user_message_go_in_block_order(
    mocked: responses.RequestsMock,
) -> None:
    store = MemoryAttachmentStore()
    first, second = png(2, 3), gif(4, 5)
    adapter = _adapter()
    adapter.attachments = store
    message = create_user_message(
        [
            TextBlock(text="Compare"),
            image_block(first, store=store),
            TextBlock(text="with"),
            image_block(second, store=store),
        ]
    )
    body = _send(mocked, adapter, _options(message))
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Compare"},
                {
                    "type": "image",
                    "source": {
                        "type": "base64",
                        "media_type": "image/png",
                        "data": _b64(first),
                    },
                },
                {"type": "text", "text": "with"},
                {
                    "type": "image",
                    "source": {
                        "type": "base64",
                        "media_type": "image/gif",
                        "data": _b64(second),
                    },
                },
            ],
        }
    ]


def test_an_image_in_a_tool_result_goes_inside_its_content(
    mocked: responses.RequestsMock,
) -> None:
    store = MemoryAttachmentStore()
    data = png(1, 1)
    adapter = _adapter()
    adapter.attachments = store
    result = create_tool_result_message(
        "toolu_1",
        [
            TextBlock(text="the chart"),
            TextBlock(text=""),
            image_block(data, store=store),
        ],
    )
    plain = create_tool_result_message("toolu_2", "no image here", is_error=True)
    body = _send(mocked, adapter, _options(create_user_message("look"), result, plain))
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [
                        {"type": "text", "text": "the chart"},
                        {
                            "type": "image",
                            "source": {
                                "type": "base64",
                                "media_type": "image/png",
                                "data": _b64(data),
                            },
                        },
                    ],
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": "no image here",
                    "is_error": True,
                },
                {"type": "text", "text": "look"},
            ],
        }
    ]


def test_without_a_store_an_image_is_missing_attachment(
    mocked: responses.RequestsMock,
) -> None:
    image = image_block(png(1, 1))
    error = _refused(mocked, _adapter(), _options(create_user_message([image])))
    assert error.code == ErrorCode.MISSING_ATTACHMENT
    assert "no attachment store" in str(error)


def test_an_attachment_the_store_lacks_is_missing_attachment(
    mocked: responses.RequestsMock,
) -> None:
    image = image_block(png(1, 1))  # never stored
    adapter = _adapter()
    adapter.attachments = MemoryAttachmentStore()
    nested = create_tool_result_message("toolu_1", [image])
    error = _refused(mocked, adapter, _options(nested))
    assert error.code == ErrorCode.MISSING_ATTACHMENT
    assert image.attachment.attachment_id in str(error)


@pytest.mark.parametrize(
    ("model", "models"),
    [
        ("claude-3-haiku-20240307", None),  # not in the catalog
        ("plain", [CatalogModel(id="plain")]),  # unknown id: text only
        (
            "claude-haiku-4-5",
            [CatalogModel(id="claude-haiku-4-5", input_modalities=["text"])],
        ),
    ],
)
def test_a_text_only_or_unlisted_model_refuses_images(
    mocked: responses.RequestsMock, model: str, models: list[CatalogModel] | None
) -> None:
    store = MemoryAttachmentStore()
    image = image_block(png(1, 1), store=store)
    adapter = _adapter(models=models)
    adapter.attachments = store
    error = _refused(
        mocked, adapter, _options(create_user_message([image]), model=model)
    )
    assert error.code == ErrorCode.UNSUPPORTED_CONTENT
    assert f'"{model}"' in str(error)


def test_a_configured_model_may_take_images(mocked: responses.RequestsMock) -> None:
    store = MemoryAttachmentStore()
    image = image_block(png(1, 1), store=store)
    adapter = _adapter(
        models=[CatalogModel(id="proxy-claude", input_modalities=["text", "image"])]
    )
    adapter.attachments = store
    body = _send(
        mocked, adapter, _options(create_user_message([image]), model="proxy-claude")
    )
    assert body["messages"][0]["content"][0]["type"] == "image"


@pytest.mark.parametrize("role", ["system", "assistant"])
def test_an_image_where_the_wire_has_no_place_is_unsupported_content(
    mocked: responses.RequestsMock, role: str
) -> None:
    store = MemoryAttachmentStore()
    image = image_block(png(1, 1), store=store)
    adapter = _adapter()
    adapter.attachments = store
    if role == "system":
        misplaced = create_message("system", [image], PluginSource(plugin="p"))
    else:
        misplaced = create_assistant_message(
            [image], provider=PROVIDER_ROUTE, model="claude-haiku-4-5"
        )
    error = _refused(mocked, adapter, _options(create_user_message("hi"), misplaced))
    assert error.code == ErrorCode.UNSUPPORTED_CONTENT
    assert f"not in the {role} message" in str(error)


# --- what the catalog advertises ------------------------------------------------------


def test_list_and_resolve_advertise_image_only_where_it_can_be_sent() -> None:
    # An id takes the built-in catalog's inputs; a value says its own.
    models = [
        "claude-opus-5",
        CatalogModel(id="claude-haiku-4-5", input_modalities=("text",)),
        CatalogModel(id="other"),
    ]
    with AnthropicAdapter(environ={}, models=models) as adapter:
        listed = {m.id: m.input_modalities for m in adapter.list_models(PROVIDER_ROUTE)}
        assert listed == {
            "claude-opus-5": ("text", "image"),
            "claude-haiku-4-5": ("text",),
            "other": ("text",),
        }
        resolved = adapter.resolve_model(PROVIDER_ROUTE, "claude-opus-5")
        assert resolved.input_modalities == ("text", "image")
        unlisted = adapter.resolve_model(PROVIDER_ROUTE, "claude-sonnet-5")
        assert unlisted.input_modalities == ("text",)


@pytest.mark.parametrize("value", [["image"], ["text", "audio"], "text", []])
def test_bad_input_modalities_are_a_config_error(value: Any) -> None:
    with pytest.raises(AdapterConfigError) as caught:
        CatalogModel(id="m", input_modalities=value)
    assert caught.value.key == "inputModalities"


def test_an_image_in_a_result_nested_in_a_tool_result_is_refused_not_dropped(
    mocked: responses.RequestsMock,
) -> None:
    store = MemoryAttachmentStore()
    image = image_block(png(1, 1), store=store)
    adapter = _adapter()
    adapter.attachments = store
    inner = ToolResultBlock(tool_call_id=CallId("toolu_0"), content=(image,))
    outer = create_tool_result_message("toolu_1", [TextBlock(text="x"), inner])
    error = _refused(mocked, adapter, _options(create_user_message("look"), outer))
    assert error.code == ErrorCode.UNSUPPORTED_CONTENT
    assert "nested inside a tool result" in str(error)
