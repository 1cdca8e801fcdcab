"""``response_format``, ``extra_body``, ``extra_headers`` and images on
``OllamaAdapter``, checked with ``responses``: the exact body and headers sent,
and every refusal, made before any I/O."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import responses

from dsh_llm.adapters import AdapterConfigError
from dsh_llm.adapters import CatalogModel
from dsh_llm.adapters.ollama import DEFAULT_BASE_URL
from dsh_llm.adapters.ollama import PROVIDER_ROUTE
from dsh_llm.adapters.ollama import OllamaAdapter
from dsh_llm.attachments import MemoryAttachmentStore
from dsh_llm.attachments import image_block
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.plugins import load_composition
from dsh_llm.protocol import CallId
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import Message
from dsh_llm.protocol import ResponseFormat
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.protocol import ToolResultBlock
from dsh_llm.protocol import UserSource
from dsh_llm.protocol import create_assistant_message
from dsh_llm.protocol import create_message
from dsh_llm.protocol import create_tool_result_message
from dsh_llm.protocol import create_user_message
from dsh_llm.transport.attribution import user_agent
from dsh_llm.validator import validate_stream

from ...attachments.images import png

CHAT = f"{DEFAULT_BASE_URL}/api/chat"
DONE = {
    "message": {"role": "assistant", "content": '{"city":"Paris"}'},
    "done": True,
    "done_reason": "stop",
}
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}
CATALOG = (
    CatalogModel(id="llava", input_modalities=("text", "image")),
    CatalogModel(id="llama3.2"),
)


@pytest.fixture
def mocked() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        mock.add(
            responses.POST,
            CHAT,
            body=(json.dumps(DONE) + "\n").encode(),
            content_type="application/x-ndjson",
        )
        yield mock


def _options(*messages: Message, **fields: Any) -> GenerateOptions:
    fields.setdefault("model", "llava")
    return GenerateOptions(
        provider=PROVIDER_ROUTE,
        messages=messages or (create_user_message("a city as JSON"),),
        **fields,
    )


def _send(
    mock: responses.RequestsMock, adapter: OllamaAdapter, options: GenerateOptions
) -> Any:
    with adapter:
        chunks = list(validate_stream(adapter.stream(options), strict=True))
    assert chunks[-1].reason.kind == "stop"  # type: ignore[union-attr]
    (call,) = mock.calls
    return call.request


def _body(request: Any) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(request.body)
    return body


def _refused(
    mock: responses.RequestsMock, adapter: OllamaAdapter, options: GenerateOptions
) -> LlmError:
    with adapter, pytest.raises(LlmError) as caught:
        next(iter(adapter.stream(options)))
    assert len(mock.calls) == 0
    return caught.value


def _vision(store: MemoryAttachmentStore | None = None) -> OllamaAdapter:
    adapter = OllamaAdapter(models=CATALOG)
    adapter.attachments = store
    return adapter


# -- response_format ------------------------------------------------------------------


@pytest.mark.parametrize("strict", [False, True])
def test_a_response_format_goes_as_the_schema_in_format(mocked, strict):
    wanted = ResponseFormat(schema=SCHEMA, name="city", strict=strict)
    request = _send(mocked, OllamaAdapter(), _options(response_format=wanted))
    assert request.body.decode() == json.dumps(
        {
            "model": "llava",
            "messages": [{"role": "user", "content": "a city as JSON"}],
            "stream": True,
            "format": SCHEMA,
        },
        separators=(",", ":"),
    )


def test_format_comes_before_the_tools_and_options(mocked):
    options = _options(response_format=SCHEMA, temperature=0, reasoning_effort="off")
    body = _body(_send(mocked, OllamaAdapter(keep_alive="5m"), options))
    assert list(body) == [
        "model",
        "messages",
        "stream",
        "format",
        "think",
        "options",
        "keep_alive",
    ]
    assert body["format"] == SCHEMA


def test_no_response_format_sends_no_format(mocked):
    assert "format" not in _body(_send(mocked, OllamaAdapter(), _options()))


# -- extra_body -----------------------------------------------------------------------


def test_extra_body_is_merged_last_and_wins_over_the_adapters_keys(mocked):
    extra = {"options": {"top_k": 20}, "truncate": False, "format": "json"}
    options = _options(temperature=0, response_format=SCHEMA, extra_body=extra)
    request = _send(mocked, OllamaAdapter(), options)
    assert request.body.decode() == json.dumps(
        {
            "model": "llava",
            "messages": [{"role": "user", "content": "a city as JSON"}],
            "stream": True,
            "format": "json",  # a string replaces the schema
            "options": {"temperature": 0, "top_k": 20},  # an object merges
            "truncate": False,
        },
        separators=(",", ":"),
    )


# -- extra_headers --------------------------------------------------------------------


def test_extra_headers_are_sent_lower_cased_beside_the_adapters(mocked):
    options = _options(extra_headers={"X-Trace-Id": "t-1", "OpenAI-Project": "p"})
    request = _send(mocked, OllamaAdapter(), options)
    sent = {name.lower(): value for name, value in request.headers.items()}
    assert sent == {
        "user-agent": user_agent(),
        "accept": "application/x-ndjson",
        "accept-encoding": "identity",
        "content-type": "application/json",
        "content-length": str(len(request.body)),
        "connection": "keep-alive",
        "x-trace-id": "t-1",
        "openai-project": "p",
    }


@pytest.mark.parametrize(
    "name", ["User-Agent", "accept", "Accept-Encoding", "Content-Type", "Host"]
)
def test_extra_headers_cannot_replace_the_adapters_headers(mocked, name):
    options = _options(extra_headers={name: "secret-value"})
    error = _refused(mocked, OllamaAdapter(), options)
    assert error.code == ErrorCode.UNSUPPORTED_OPTION
    assert f'"{name.lower()}"' in error.message
    assert "secret-value" not in error.message


def test_authorization_is_refused_beside_a_key_and_sent_without_one(mocked):
    options = _options(extra_headers={"Authorization": "Bearer other"})
    error = _refused(mocked, OllamaAdapter(api_key="sk-hosted"), options)
    assert error.code == ErrorCode.UNSUPPORTED_OPTION
    assert '"authorization"' in error.message
    assert "other" not in error.message
    assert "sk-hosted" not in error.message
    keyed = OllamaAdapter(api_key_env="OLLAMA_KEY", environ={"OLLAMA_KEY": "k"})
    assert _refused(mocked, keyed, options).code == ErrorCode.UNSUPPORTED_OPTION
    request = _send(mocked, OllamaAdapter(), options)
    assert request.headers["authorization"] == "Bearer other"


# -- images ---------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def test_a_user_images_go_beside_the_joined_text_in_block_order(mocked):
    store = MemoryAttachmentStore()
    first, second = png(2, 3), png(4, 1)
    message = create_user_message(
        [
            TextBlock(text="Compare "),
            image_block(first, store=store),
            TextBlock(text="and this."),
            image_block(second, store=store),
        ]
    )
    request = _send(mocked, _vision(store), _options(message))
    assert request.body.decode() == json.dumps(
        {
            "model": "llava",
            "messages": [
                {
                    "role": "user",
                    "content": "Compare and this.",
                    "images": [_b64(first), _b64(second)],
                }
            ],
            "stream": True,
        },
        separators=(",", ":"),
    )


def test_a_user_message_of_only_an_image_is_sent(mocked):
    store = MemoryAttachmentStore()
    data = png(1, 1)
    message = create_user_message([image_block(data, store=store)])
    body = _body(_send(mocked, _vision(store), _options(message)))
    assert body["messages"] == [{"role": "user", "content": "", "images": [_b64(data)]}]


def test_an_image_in_a_tool_result_goes_on_the_tool_message(mocked):
    store = MemoryAttachmentStore()
    data = png(3, 3)
    call = ToolCallBlock(id=CallId("c1"), name="screenshot", arguments="{}")
    messages = (
        create_user_message("look"),
        create_assistant_message([call], provider=PROVIDER_ROUTE, model="llava"),
        create_tool_result_message(
            "c1", [TextBlock(text="the screen"), image_block(data, store=store)]
        ),
    )
    body = _body(_send(mocked, _vision(store), _options(*messages)))
    assert body["messages"] == [
        {"role": "user", "content": "look"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "c1",
                    "function": {"index": 0, "name": "screenshot", "arguments": {}},
                }
            ],
        },
        {
            "role": "tool",
            "content": "the screen",
            "images": [_b64(data)],
            "tool_name": "screenshot",
            "tool_call_id": "c1",
        },
    ]


def test_images_without_a_store_are_missing_attachments(mocked):
    image = image_block(png(1, 1), store=MemoryAttachmentStore())
    error = _refused(mocked, _vision(), _options(create_user_message([image])))
    assert error.code == ErrorCode.MISSING_ATTACHMENT


def test_an_image_the_store_lacks_is_a_missing_attachment(mocked):
    image = image_block(png(1, 1), store=MemoryAttachmentStore())
    options = _options(create_user_message([TextBlock(text="what?"), image]))
    error = _refused(mocked, _vision(MemoryAttachmentStore()), options)
    assert error.code == ErrorCode.MISSING_ATTACHMENT
    assert image.attachment.attachment_id in error.message


@pytest.mark.parametrize("model", ["llama3.2", "unlisted"])
def test_a_text_only_or_unlisted_model_refuses_images(mocked, model):
    store = MemoryAttachmentStore()
    image = image_block(png(1, 1), store=store)
    options = _options(create_user_message([image]), model=model)
    error = _refused(mocked, _vision(store), options)
    assert error.code == ErrorCode.UNSUPPORTED_CONTENT
    assert model in error.message


def _misplaced(store: MemoryAttachmentStore) -> list[Message]:
    image = image_block(png(1, 1), store=store)
    call = ToolCallBlock(id=CallId("c1"), name="f", arguments="{}")
    nested = ToolResultBlock(tool_call_id=CallId("c0"), content=(image,))
    return [
        create_message("system", [image], UserSource()),
        create_assistant_message(
            [TextBlock(text="here"), image], provider=PROVIDER_ROUTE, model="llava"
        ),
        create_tool_result_message("c1", [nested]),
        create_assistant_message([call], provider=PROVIDER_ROUTE, model="llava"),
    ]


@pytest.mark.parametrize(
    ("where", "said"),
    [
        (0, "only, not in the system message"),
        (1, "only, not in the assistant message"),
        (2, "in a tool result nested inside a tool result"),
    ],
)
def test_images_where_the_wire_cannot_carry_them_are_refused(mocked, where, said):
    store = MemoryAttachmentStore()
    misplaced = _misplaced(store)
    messages = (misplaced[3], misplaced[where]) if where == 2 else (misplaced[where],)
    error = _refused(mocked, _vision(store), _options(*messages))
    assert error.code == ErrorCode.UNSUPPORTED_CONTENT
    assert said in error.message


def test_a_request_without_images_needs_no_store(mocked):
    request = _send(mocked, OllamaAdapter(models=CATALOG), _options(model="llama3.2"))
    assert "images" not in request.body.decode()


# -- catalog --------------------------------------------------------------------------


def test_the_catalog_advertises_image_only_for_models_listed_with_it():
    with OllamaAdapter(models=CATALOG) as adapter:
        listed = {m.id: m.input_modalities for m in adapter.list_models("ollama")}
        assert listed == {"llava": ("text", "image"), "llama3.2": ("text",)}
        resolved = {
            model: adapter.resolve_model("ollama", model).input_modalities
            for model in ("llava", "llama3.2", "unlisted")
        }
    assert resolved == {
        "llava": ("text", "image"),
        "llama3.2": ("text",),
        "unlisted": ("text",),
    }


@pytest.mark.parametrize("value", [["image"], ["text", "audio"], "text", []])
def test_a_bad_input_modalities_is_a_config_error(value):
    with pytest.raises(AdapterConfigError) as caught:
        CatalogModel(id="m", input_modalities=value)
    assert caught.value.key == "inputModalities"


def test_yaml_input_modalities_reach_the_listing(tmp_path: Path):
    path = tmp_path / "dsh.yml"
    path.write_text(
        "- id: o\n  name: dsh_llm.plugins.builtin:OLLAMA\n  config:\n"
        "    models: [{id: llava, inputModalities: [text, image]}, {id: llama3.2}]\n"
    )
    with load_composition(path, environ={}) as composition:
        listed = composition.runtime.list_models(PROVIDER_ROUTE)
    assert [(m.id, m.input_modalities) for m in listed] == [
        ("llava", ("text", "image")),
        ("llama3.2", ("text",)),
    ]
