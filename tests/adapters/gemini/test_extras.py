"""``response_format``, ``extra_body``, ``extra_headers`` and images on
``GeminiAdapter``, checked with ``responses``: the exact body and headers on the
wire, and every refusal before any I/O."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
import responses

from dsh_llm.adapters import AdapterConfigError
from dsh_llm.adapters.gemini import GeminiAdapter
from dsh_llm.adapters.gemini import GeminiModel
from dsh_llm.attachments import MemoryAttachmentStore
from dsh_llm.attachments import image_block
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import CallId
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import ImageBlock
from dsh_llm.protocol import Message
from dsh_llm.protocol import PluginSource
from dsh_llm.protocol import ResponseFormat
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.protocol import create_assistant_message
from dsh_llm.protocol import create_message
from dsh_llm.protocol import create_tool_result_message
from dsh_llm.protocol import create_user_message
from dsh_llm.testing import sse_event
from dsh_llm.transport.attribution import user_agent
from dsh_llm.validator import validate_stream

from ...attachments.images import gif
from ...attachments.images import png
from ..schemas import CITY_SCHEMA

BASE = "https://gemini.test"
KEY = "AIzaSyEXTRAS-0123456789abcdefghijklmn"
MODEL = "gemini-3-flash-preview"
SCHEMA = CITY_SCHEMA
THINKING = {"thinkingLevel": "HIGH", "includeThoughts": True}
"""What the catalog's default effort for ``MODEL`` sends."""
ANSWER = sse_event(
    {
        "candidates": [
            {
                "content": {"parts": [{"text": '{"city": "Paris"}'}], "role": "model"},
                "finishReason": "STOP",
            }
        ],
        "usageMetadata": {
            "promptTokenCount": 3,
            "candidatesTokenCount": 2,
            "totalTokenCount": 5,
        },
    }
)


@pytest.fixture
def mocked() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        mock.add(
            responses.POST,
            re.compile(re.escape(f"{BASE}/v1beta/models/") + ".*"),
            body=ANSWER,
            content_type="text/event-stream",
        )
        yield mock


def _adapter(**config: Any) -> GeminiAdapter:
    return GeminiAdapter(base_url=BASE, environ={"GEMINI_API_KEY": KEY}, **config)


def _options(*messages: Message, **fields: Any) -> GenerateOptions:
    fields.setdefault("messages", messages or (create_user_message("a city"),))
    fields.setdefault("model", MODEL)
    return GenerateOptions(provider="gemini", **fields)


def _send(
    mock: responses.RequestsMock,
    *messages: Message,
    adapter: GeminiAdapter | None = None,
    store: MemoryAttachmentStore | None = None,
    **fields: Any,
) -> Any:
    with adapter or _adapter() as running:
        running.attachments = store
        chunks = list(
            validate_stream(running.stream(_options(*messages, **fields)), strict=True)
        )
    assert chunks[-1].reason.kind == "stop"  # type: ignore[union-attr]
    assert len(mock.calls) == 1
    return mock.calls[-1].request


def _body(request: Any) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(request.body)
    return body


def _refused(
    mock: responses.RequestsMock,
    *messages: Message,
    adapter: GeminiAdapter | None = None,
    store: MemoryAttachmentStore | None = None,
    **fields: Any,
) -> LlmError:
    with adapter or _adapter() as running:
        running.attachments = store
        with pytest.raises(LlmError) as caught:
            next(iter(running.stream(_options(*messages, **fields))))
    assert len(mock.calls) == 0
    return caught.value


def _inline(data: bytes, media_type: str = "image/png") -> dict[str, Any]:
    encoded = base64.b64encode(data).decode("ascii")
    return {"inlineData": {"mimeType": media_type, "data": encoded}}


# --- response_format ------------------------------------------------------------------


@pytest.mark.parametrize("strict", [False, True])
def test_a_response_format_is_a_json_schema_in_generation_config(mocked, strict):
    wanted = ResponseFormat(schema=SCHEMA, name="city", strict=strict)
    body = _body(_send(mocked, response_format=wanted, temperature=0))
    # Strict or not, the same: Gemini constrains decoding to the schema.
    assert body["generationConfig"] == {
        "temperature": 0,
        "maxOutputTokens": 65_536,
        "responseMimeType": "application/json",
        "responseJsonSchema": SCHEMA,
        "thinkingConfig": THINKING,
    }
    assert "responseSchema" not in body["generationConfig"]


def test_a_bare_schema_is_sent_the_same(mocked):
    body = _body(_send(mocked, response_format=SCHEMA))
    assert body["generationConfig"]["responseJsonSchema"] == SCHEMA
    assert body["generationConfig"]["responseMimeType"] == "application/json"


def test_no_response_format_sends_no_mime_type_or_schema(mocked):
    generation = _body(_send(mocked))["generationConfig"]
    assert generation == {"maxOutputTokens": 65_536, "thinkingConfig": THINKING}


# --- extra_body -----------------------------------------------------------------------


def test_extra_body_is_merged_last_and_wins_over_the_adapters_keys(mocked):
    safety = [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}]
    generation = {"temperature": 0.5, "topK": 3}
    extra = {"safetySettings": safety, "generationConfig": generation}
    body = _body(_send(mocked, temperature=0, response_format=SCHEMA, extra_body=extra))
    assert body == {
        "contents": [{"role": "user", "parts": [{"text": "a city"}]}],
        "generationConfig": {  # merged into the adapter's, theirs win
            "temperature": 0.5,
            "maxOutputTokens": 65536,
            "responseMimeType": "application/json",
            "responseJsonSchema": SCHEMA,
            "thinkingConfig": THINKING,
            "topK": 3,
        },
        "safetySettings": safety,
    }
    assert list(body) == ["contents", "generationConfig", "safetySettings"]


# --- extra_headers --------------------------------------------------------------------


def test_extra_headers_are_sent_lower_cased_beside_the_adapters(mocked):
    request = _send(
        mocked, extra_headers={"X-Trace-Id": "t-1", "X-Server-Timeout": "600"}
    )
    sent = {name.lower(): value for name, value in request.headers.items()}
    # What requests itself adds, not the adapter.
    sent.pop("content-length")
    sent.pop("connection")
    assert sent == {
        "user-agent": user_agent(),
        "accept": "text/event-stream",
        "accept-encoding": "identity",
        "content-type": "application/json",
        "x-trace-id": "t-1",
        "x-server-timeout": "600",
        "x-goog-api-key": KEY,
    }


@pytest.mark.parametrize(
    "name",
    ["X-Goog-Api-Key", "User-Agent", "accept", "Accept-Encoding", "Content-Type"],
)
def test_extra_headers_cannot_replace_the_adapters_headers(mocked, name):
    error = _refused(mocked, extra_headers={name: "secret-value"})
    assert error.code == ErrorCode.UNSUPPORTED_OPTION
    assert f'"{name.lower()}"' in error.message
    assert "secret-value" not in error.message


# --- images ---------------------------------------------------------------------------


def test_images_in_a_user_message_are_inline_parts_in_block_order(mocked):
    store = MemoryAttachmentStore()
    first, second = png(2, 3), gif(4, 5)
    blocks = [
        TextBlock(text="Compare"),
        image_block(first, store=store),
        TextBlock(text="with"),
        image_block(second, store=store),
    ]
    body = _body(_send(mocked, create_user_message(blocks), store=store))
    assert body["contents"] == [
        {
            "role": "user",
            "parts": [
                {"text": "Compare"},
                _inline(first),
                {"text": "with"},
                _inline(second, "image/gif"),
            ],
        }
    ]


def _screenshot_turn(image: ImageBlock, model: str = MODEL) -> tuple[Message, ...]:
    call = ToolCallBlock(id=CallId("c1"), name="screenshot", arguments="{}")
    return (
        create_user_message("Look at the screen"),
        create_assistant_message([call], provider="gemini", model=model),
        create_tool_result_message("c1", [TextBlock(text="the screen"), image]),
    )


def test_images_in_a_tool_result_are_function_response_parts_on_gemini_3(mocked):
    store = MemoryAttachmentStore()
    data = png(3, 2)
    body = _body(
        _send(mocked, *_screenshot_turn(image_block(data, store=store)), store=store)
    )
    assert body["contents"][-1] == {
        "role": "user",
        "parts": [
            {
                "functionResponse": {
                    "name": "screenshot",
                    "response": {"output": "the screen"},
                    "parts": [_inline(data)],
                }
            }
        ],
    }


def test_a_tool_result_without_images_has_no_parts(mocked):
    call = ToolCallBlock(id=CallId("c1"), name="f", arguments="{}")
    body = _body(
        _send(
            mocked,
            create_user_message("go"),
            create_assistant_message([call], provider="gemini", model=MODEL),
            create_tool_result_message("c1", "done"),
        )
    )
    assert body["contents"][-1]["parts"] == [
        {"functionResponse": {"name": "f", "response": {"output": "done"}}}
    ]


def test_a_gemini_2_model_refuses_images_in_tool_results(mocked):
    store = MemoryAttachmentStore()
    model = "gemini-2.5-flash"
    image = image_block(png(1, 1), store=store)
    error = _refused(mocked, *_screenshot_turn(image, model), store=store, model=model)
    assert error.code == ErrorCode.UNSUPPORTED_CONTENT
    assert "Gemini 3" in error.message


def test_an_image_nested_twice_in_tool_results_is_refused(mocked):
    store = MemoryAttachmentStore()
    image = image_block(png(1, 1), store=store)
    inner = create_tool_result_message("c0", [image]).content[0]
    error = _refused(mocked, *_screenshot_turn(inner), store=store)  # type: ignore[arg-type]
    assert error.code == ErrorCode.UNSUPPORTED_CONTENT
    assert "nested" in error.message


@pytest.mark.parametrize("role", ["assistant", "system"])
def test_images_outside_user_messages_are_refused(mocked, role):
    store = MemoryAttachmentStore()
    image = image_block(png(1, 1), store=store)
    if role == "assistant":
        message = create_assistant_message([image], provider="gemini", model=MODEL)
    else:
        message = create_message("system", [image], PluginSource(plugin="p"))
    error = _refused(mocked, create_user_message("hi"), message, store=store)
    assert error.code == ErrorCode.UNSUPPORTED_CONTENT
    assert role in error.message


@pytest.mark.parametrize("with_store", [False, True])
def test_a_missing_attachment_is_refused_before_io(mocked, with_store):
    image = image_block(png(1, 1))  # never stored
    store = MemoryAttachmentStore() if with_store else None
    error = _refused(mocked, create_user_message([image]), store=store)
    assert error.code == ErrorCode.MISSING_ATTACHMENT
    wanted = image.attachment.attachment_id if with_store else "no attachment store"
    assert wanted in error.message


def test_a_missing_attachment_in_a_tool_result_is_refused_before_io(mocked):
    image = image_block(png(1, 1))
    error = _refused(mocked, *_screenshot_turn(image), store=MemoryAttachmentStore())
    assert error.code == ErrorCode.MISSING_ATTACHMENT
    assert image.attachment.attachment_id in error.message


TEXT_ONLY = GeminiModel(id="gemini-text", thinking="level")


@pytest.mark.parametrize("model", ["gemini-text", "gemini-unlisted"])
def test_a_text_only_or_unlisted_model_refuses_images(mocked, model):
    store = MemoryAttachmentStore()
    image = image_block(png(1, 1), store=store)
    adapter = _adapter(models=[TEXT_ONLY])
    error = _refused(
        mocked, create_user_message([image]), adapter=adapter, store=store, model=model
    )
    assert error.code == ErrorCode.UNSUPPORTED_CONTENT
    assert model in error.message


# --- what the catalog advertises ------------------------------------------------------


def test_the_catalog_advertises_image_only_where_it_can_be_sent():
    with _adapter() as built_in:
        listed = {m.id: m.input_modalities for m in built_in.list_models("gemini")}
        assert set(listed.values()) == {("text", "image")}
        assert built_in.resolve_model("gemini", MODEL).input_modalities == (
            "text",
            "image",
        )
        assert built_in.resolve_model("gemini", "gemini-x").input_modalities == (
            "text",
        )
    vision = GeminiModel(id="v", input_modalities=("text", "image"))
    with _adapter(models=[TEXT_ONLY, vision]) as configured:
        listed = {m.id: m.input_modalities for m in configured.list_models("gemini")}
        assert listed == {"gemini-text": ("text",), "v": ("text", "image")}


def test_bad_input_modalities_are_refused_naming_the_key():
    with pytest.raises(AdapterConfigError) as caught:
        GeminiModel(id="m", input_modalities=("audio",))
    assert caught.value.key == "inputModalities"
    with pytest.raises(AdapterConfigError) as caught:
        _adapter(models=[{"id": "m", "inputModalities": ["audio"]}])
    assert caught.value.key == "models[0].inputModalities"
    assert str(caught.value).startswith("llm-gemini: models[0].inputModalities ")
