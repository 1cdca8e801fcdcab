"""Images on the chat-completions adapters: an OpenAI-compatible model whose
catalog lists image input gets image_url data URLs read from the adapter's
store; a missing attachment, a text-only model and DeepSeek refuse before I/O."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import attrs
import pytest

from dsh_llm.adapters.deepseek import DeepSeekAdapter
from dsh_llm.adapters.openai_compat import OpenAICompatAdapter
from dsh_llm.attachments import MemoryAttachmentStore
from dsh_llm.attachments import image_block
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import create_user_message
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply
from dsh_llm.testing import sse_body
from dsh_llm.validator import validate_stream

from ..attachments.images import png
from .chat_chunks import finish
from .chat_chunks import text

MODELS = [{"id": "vision", "inputModalities": ["text", "image"]}, "text-only"]


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as running:
        yield running


def _options(model: str, *blocks: object) -> GenerateOptions:
    return GenerateOptions(
        model=model,
        messages=(create_user_message(list(blocks)),),  # type: ignore[arg-type]
    )


def test_an_image_model_gets_data_urls_in_block_order(server):
    server.enqueue(Reply(body=sse_body([text("a cat"), finish()])))
    store = MemoryAttachmentStore()
    data = png(2, 3)
    image = image_block(data, store=store)
    with OpenAICompatAdapter(server.url, models=MODELS) as adapter:
        adapter.attachments = store
        chunks = list(
            validate_stream(
                adapter.stream(
                    _options("vision", TextBlock(text="What is it?"), image)
                ),
                strict=True,
            )
        )
    assert chunks
    sent = server.requests[0].json()["messages"]
    url = "data:image/png;base64," + base64.b64encode(data).decode()
    assert sent == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is it?"},
                {"type": "image_url", "image_url": {"url": url}},
            ],
        }
    ]


def test_the_catalog_lists_image_input_for_providers():
    with OpenAICompatAdapter("http://127.0.0.1:9/v1", models=MODELS) as adapter:
        listed = {m.id: m.input_modalities for m in adapter.list_models("local")}
        assert listed == {"vision": ("text", "image"), "text-only": ("text",)}
        assert adapter.resolve_model("local", "vision").input_modalities == (
            "text",
            "image",
        )


@pytest.mark.parametrize("with_store", [False, True])
def test_a_missing_attachment_is_refused_before_io(server, with_store):
    image = image_block(png(1, 1))  # never stored
    with OpenAICompatAdapter(server.url, models=MODELS) as adapter:
        if with_store:
            adapter.attachments = MemoryAttachmentStore()
        with pytest.raises(LlmError) as caught:
            next(iter(adapter.stream(_options("vision", image))))
    assert caught.value.code == ErrorCode.MISSING_ATTACHMENT
    wanted = image.attachment.attachment_id if with_store else "no attachment store"
    assert wanted in caught.value.message
    assert server.requests == ()


@pytest.mark.parametrize("model", ["text-only", "unlisted"])
def test_a_text_only_model_still_refuses(server, model):
    store = MemoryAttachmentStore()
    image = image_block(png(1, 1), store=store)
    with OpenAICompatAdapter(server.url, models=MODELS) as adapter:
        adapter.attachments = store
        with pytest.raises(LlmError) as caught:
            next(iter(adapter.stream(_options(model, image))))
    assert caught.value.code == ErrorCode.UNSUPPORTED_CONTENT
    assert server.requests == ()


def test_deepseek_keeps_refusing_images_even_with_a_store(server):
    store = MemoryAttachmentStore()
    image = image_block(png(1, 1), store=store)
    adapter = DeepSeekAdapter(base_url=server.url, environ={"DEEPSEEK_API_KEY": "k"})
    with adapter:
        adapter.attachments = store
        with pytest.raises(LlmError) as caught:
            next(iter(adapter.stream(_options("deepseek-v4-flash-vision-exp", image))))
    assert caught.value.code == ErrorCode.UNSUPPORTED_CONTENT
    assert "Files API" in caught.value.message
    assert server.requests == ()


def test_a_bad_input_modalities_config_is_refused():
    with pytest.raises(ValueError, match="inputModalities"):
        OpenAICompatAdapter(
            "http://127.0.0.1:9/v1", models=[{"id": "m", "inputModalities": ["audio"]}]
        )


@pytest.mark.parametrize("role", ["system", "assistant"])
def test_an_image_outside_a_user_message_is_refused_not_dropped(server, role):
    store = MemoryAttachmentStore()
    image = image_block(png(1, 1), store=store)
    misplaced = attrs.evolve(
        create_user_message([TextBlock(text="look"), image]), role=role
    )
    options = GenerateOptions(
        model="vision", messages=(misplaced, create_user_message("hi"))
    )
    with OpenAICompatAdapter(server.url, models=MODELS) as adapter:
        adapter.attachments = store
        with pytest.raises(LlmError) as caught:
            list(adapter.stream(options))
    assert caught.value.code == ErrorCode.UNSUPPORTED_CONTENT
    assert f"the {role} message" in caught.value.message
    assert server.requests == ()
