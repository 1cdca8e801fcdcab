"""The request-extras rules every wire family shares: ``extra_body`` wins,
``extra_headers`` never replaces an adapter's own header, and images are
refused before any I/O unless the model takes them and a store holds them."""

from __future__ import annotations

import base64

import pytest

from dsh_llm.adapters import check_image_input
from dsh_llm.adapters import has_images
from dsh_llm.adapters import image_data
from dsh_llm.adapters import merge_extra_body
from dsh_llm.adapters import refuse_misplaced_images
from dsh_llm.adapters import request_headers
from dsh_llm.adapters._wire.extras import check_reasoning_effort
from dsh_llm.adapters._wire.extras import sampling_fields
from dsh_llm.attachments import MemoryAttachmentStore
from dsh_llm.attachments import image_block
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import ToolResultBlock
from dsh_llm.protocol import create_user_message

from ..attachments.images import png


def _with_image(store: MemoryAttachmentStore | None = None) -> GenerateOptions:
    image = image_block(png(1, 1), store=store)
    return GenerateOptions.from_prompt("m", "hi").evolve(
        messages=(create_user_message([TextBlock(text="see"), image]),)
    )


def test_extra_body_is_merged_last_and_wins():
    options = GenerateOptions.from_prompt(
        "m", "hi", extra_body={"temperature": 0.2, "top_k": 3}
    )
    body = {"model": "m", "temperature": 1.0}
    assert merge_extra_body(body, options) == {
        "model": "m",
        "temperature": 0.2,
        "top_k": 3,
    }


def test_sampling_fields_use_the_wire_names_in_order_and_omit_the_unset():
    options = GenerateOptions.from_prompt("m", "hi", temperature=0.5, stop=("x",))
    fields = sampling_fields(options, cap=64, cap_key="num_predict", stop_key="stop")
    assert list(fields.items()) == [
        ("temperature", 0.5),
        ("num_predict", 64),
        ("stop", ["x"]),
    ]
    bare = GenerateOptions.from_prompt("m", "hi")
    assert sampling_fields(bare, cap=None, cap_key="c", stop_key="s") == {}


@pytest.mark.parametrize("effort", [None, "low"])
def test_an_offered_or_default_reasoning_effort_passes(effort):
    check_reasoning_effort(effort, ("off", "low"), who="Test")


def test_a_reasoning_effort_not_offered_is_refused_naming_the_offered_ones():
    with pytest.raises(LlmError) as caught:
        check_reasoning_effort("max", ("off", "low"), who="Test")
    assert caught.value.code == ErrorCode.UNSUPPORTED_REASONING_EFFORT
    assert caught.value.message == (
        'Test does not support reasoning effort "max" (offered: off, low)'
    )


def test_no_extra_body_leaves_the_body_alone():
    body = {"model": "m"}
    assert merge_extra_body(body, GenerateOptions.from_prompt("m", "hi")) == {
        "model": "m"
    }


def test_extra_headers_are_sent_lower_cased_beside_the_base():
    options = GenerateOptions.from_prompt("m", "hi", extra_headers={"X-Trace": "1"})
    headers = request_headers({"Accept": "text/event-stream"}, options, provider="P")
    assert headers == {"Accept": "text/event-stream", "x-trace": "1"}


@pytest.mark.parametrize(
    ("name", "base", "taken"),
    [
        ("X-Api-Key", {}, ("x-api-key",)),  # the adapter's key header
        ("x-custom", {"X-Custom": "mine"}, ()),  # a configured header
        ("User-Agent", {}, ()),  # the transport's
        ("content-length", {}, ()),
    ],
)
def test_an_extra_header_the_adapter_sets_is_refused_without_its_value(
    name, base, taken
):
    options = GenerateOptions.from_prompt(
        "m", "hi", extra_headers={name: "secret-value"}
    )
    with pytest.raises(LlmError) as caught:
        request_headers(base, options, provider="P", taken=taken)
    assert caught.value.code == ErrorCode.UNSUPPORTED_OPTION
    assert f'"{name.lower()}"' in caught.value.message
    assert "secret-value" not in caught.value.message


def test_a_request_without_images_passes_every_image_check():
    options = GenerateOptions.from_prompt("m", "hi")
    assert not has_images(options)
    check_image_input(options, provider="P", modalities=None, store=None)


@pytest.mark.parametrize("modalities", [None, ("text",)])
def test_a_text_only_or_unlisted_model_refuses_images(modalities):
    options = _with_image()
    with pytest.raises(LlmError) as caught:
        check_image_input(
            options, provider="P", modalities=modalities, store=MemoryAttachmentStore()
        )
    assert caught.value.code == ErrorCode.UNSUPPORTED_CONTENT
    assert '"m"' in caught.value.message


def test_an_image_model_without_a_store_is_a_missing_attachment():
    with pytest.raises(LlmError) as caught:
        check_image_input(
            _with_image(), provider="P", modalities=("text", "image"), store=None
        )
    assert caught.value.code == ErrorCode.MISSING_ATTACHMENT


def test_an_image_inside_a_tool_result_counts():
    image = image_block(png(1, 1))
    result = ToolResultBlock(tool_call_id="c", content=(image,))
    options = GenerateOptions.from_prompt("m", "hi").evolve(
        messages=(create_user_message([result]),)
    )
    assert has_images(options)


def test_image_data_reads_the_bytes_as_base64():
    store = MemoryAttachmentStore()
    data = png(2, 3)
    block = image_block(data, store=store)
    assert image_data(block, store, provider="P") == (
        "image/png",
        base64.b64encode(data).decode("ascii"),
    )


@pytest.mark.parametrize("store", [None, MemoryAttachmentStore()])
def test_image_data_without_the_bytes_names_the_attachment(store):
    block = image_block(png(1, 1))
    with pytest.raises(LlmError) as caught:
        image_data(block, store, provider="P")
    assert caught.value.code == ErrorCode.MISSING_ATTACHMENT
    assert block.attachment.attachment_id in caught.value.message


def test_an_extra_object_merges_into_the_adapters_object_one_level_deep():
    options = GenerateOptions.from_prompt(
        "m", "hi", extra_body={"config": {"topK": 3, "temperature": 0.1}}
    )
    body = {"config": {"temperature": 1.0, "schema": {"type": "object"}}}
    assert merge_extra_body(body, options) == {
        "config": {"temperature": 0.1, "schema": {"type": "object"}, "topK": 3}
    }


@pytest.mark.parametrize("value", ["json", ["a"], None, {"x": 1}])
def test_an_extra_value_replaces_a_value_that_is_not_an_object(value):
    options = GenerateOptions.from_prompt("m", "hi", extra_body={"format": value})
    assert merge_extra_body({"format": [1]}, options) == {"format": value}


def test_an_image_nested_in_a_result_inside_a_result_is_misplaced():
    image = image_block(png(1, 1))
    inner = ToolResultBlock(tool_call_id="c0", content=(image,))
    outer = ToolResultBlock(tool_call_id="c1", content=(inner,))
    options = GenerateOptions.from_prompt("m", "hi").evolve(
        messages=(create_user_message([outer]),)
    )
    with pytest.raises(LlmError) as caught:
        refuse_misplaced_images(options.messages, provider="P")
    assert caught.value.code == ErrorCode.UNSUPPORTED_CONTENT
    assert "nested inside a tool result" in caught.value.message
    # One level is a place a wire can carry (a tool result's own content).
    refuse_misplaced_images((create_user_message([inner]),), provider="P")
