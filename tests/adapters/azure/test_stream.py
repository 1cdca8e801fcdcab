"""AzureOpenAIAdapter end to end against the loopback server: every fixture
(written from Azure's documentation) under each framing and split on both
wires and both URL layouts, and the request each layout sends (path, query,
``api-key``, the deployment as ``model``). Every stream is strictly
validated."""

from __future__ import annotations

import json
from typing import Any
from typing import Literal

import pytest

from dsh_llm.adapters.azure import PROVIDER_ROUTE
from dsh_llm.adapters.azure import AzureOpenAIAdapter
from dsh_llm.attachments import MemoryAttachmentStore
from dsh_llm.attachments import image_block
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import Message
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import create_user_message
from dsh_llm.serde import chunk_to_dict
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply
from dsh_llm.validator import validate_stream

from ...attachments.images import png
from .replay import body
from .replay import expected
from .replay import stream_names

KEY = "azure-key-0123456789abcdef0123"
ENV = {"AZURE_OPENAI_API_KEY": KEY}


def _adapter(server: LoopbackServer, **options: Any) -> AzureOpenAIAdapter:
    options.setdefault("environ", ENV)
    options.setdefault("base_url", server.url)
    return AzureOpenAIAdapter(**options)


def _options(**fields: Any) -> GenerateOptions:
    fields.setdefault("messages", (create_user_message("hi"),))
    fields.setdefault("model", "my-gpt-4o")
    return GenerateOptions(provider=PROVIDER_ROUTE, **fields)


def _outcome(adapter: AzureOpenAIAdapter, **fields: Any) -> list[StreamChunk]:
    chunks: list[StreamChunk] = []
    try:
        for chunk in validate_stream(adapter.stream(_options(**fields)), strict=True):
            chunks.append(chunk)
    except LlmError as error:
        chunks.append(Finish(reason=FinishReason.error(error.failure)))
    return chunks


def _failure(adapter: AzureOpenAIAdapter, **fields: Any) -> LlmError:
    with pytest.raises(LlmError) as caught:
        list(validate_stream(adapter.stream(_options(**fields)), strict=True))
    return caught.value


CASES = [("chat", name) for name in stream_names("chat")] + [
    ("responses", name) for name in stream_names("responses")
]


@pytest.mark.parametrize("split", [None, 1, 7], ids=["whole", "1-byte", "7-bytes"])
@pytest.mark.parametrize(("wire", "name"), CASES)
def test_each_fixture_gives_its_chunks(
    server: LoopbackServer, wire: str, name: str, split: int | None
) -> None:
    server.enqueue(Reply(body=body(name), split=split))
    with _adapter(server, wire=wire) as adapter:
        chunks = _outcome(adapter)
    assert [chunk_to_dict(c) for c in chunks] == expected(name)


@pytest.mark.parametrize("framing", ["close", "length"])
@pytest.mark.parametrize(("wire", "name"), CASES)
def test_each_fixture_gives_its_chunks_under_other_framings(
    server: LoopbackServer,
    wire: str,
    name: str,
    framing: Literal["close", "length"],
) -> None:
    server.enqueue(Reply(body=body(name), framing=framing))
    with _adapter(server, wire=wire, api_version="2024-10-21") as adapter:
        chunks = _outcome(adapter)
    assert [chunk_to_dict(c) for c in chunks] == expected(name)


def test_the_v1_chat_request(server: LoopbackServer) -> None:
    server.enqueue(Reply(body=body("chat_prompt_filter_results_first")))
    with _adapter(server) as adapter:
        _outcome(adapter, max_tokens=200, temperature=0.2, system="Be brief.")
    (request,) = server.requests
    assert request.method == "POST"
    assert request.path == "/openai/v1/chat/completions"
    assert request.header("api-key") == KEY
    assert request.header("authorization") is None
    assert request.header("accept") == "text/event-stream"
    sent = request.json()
    assert sent["model"] == "my-gpt-4o"
    assert sent["stream"] is True
    assert sent["stream_options"] == {"include_usage": True}
    assert sent["max_completion_tokens"] == 200
    assert "max_tokens" not in sent
    assert sent["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
    ]


def test_the_deployment_chat_request_puts_the_deployment_in_the_path(
    server: LoopbackServer,
) -> None:
    server.enqueue(Reply(body=body("chat_prompt_filter_results_first")))
    with _adapter(server, api_version="2024-10-21") as adapter:
        _outcome(adapter, model="gpt-4o.prod_eu-1")
    (request,) = server.requests
    assert request.path == (
        "/openai/deployments/gpt-4o.prod_eu-1/chat/completions?api-version=2024-10-21"
    )
    assert request.json()["model"] == "gpt-4o.prod_eu-1"


def test_a_deployment_name_is_percent_encoded_in_the_path(
    server: LoopbackServer,
) -> None:
    server.enqueue(Reply(body=body("chat_prompt_filter_results_first")))
    with _adapter(server, api_version="2024-10-21") as adapter:
        _outcome(adapter, model="a/b c?")
    (request,) = server.requests
    assert request.path == (
        "/openai/deployments/a%2Fb%20c%3F/chat/completions?api-version=2024-10-21"
    )


@pytest.mark.parametrize(
    ("api_version", "path"),
    [
        (None, "/openai/v1/responses"),
        ("2025-04-01-preview", "/openai/responses?api-version=2025-04-01-preview"),
    ],
)
def test_the_responses_request(
    server: LoopbackServer, api_version: str | None, path: str
) -> None:
    server.enqueue(Reply(body=body("responses_reasoning_text")))
    with _adapter(server, wire="responses", api_version=api_version) as adapter:
        _outcome(adapter, reasoning_effort="low", max_tokens=64)
    (request,) = server.requests
    assert request.path == path
    assert request.header("api-key") == KEY
    sent = request.json()
    assert sent["model"] == "my-gpt-4o"
    assert sent["input"] == [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "hi"}],
        }
    ]
    assert sent["reasoning"] == {"effort": "low", "summary": "auto"}
    assert sent["max_output_tokens"] == 64
    assert sent["store"] is False
    assert sent["stream"] is True


def test_a_catalog_entry_maps_a_model_id_to_its_deployment(
    server: LoopbackServer,
) -> None:
    models = [
        {"id": "gpt-4o", "deployment": "prod-4o", "contextWindow": 128000},
        {"id": "gpt-4.1", "maxTokens": 900},
    ]
    server.enqueue(Reply(body=body("chat_prompt_filter_results_first")))
    server.enqueue(Reply(body=body("chat_prompt_filter_results_first")))
    with _adapter(server, api_version="2024-10-21", models=models) as adapter:
        _outcome(adapter, model="gpt-4o")
        _outcome(adapter, model="gpt-4.1")
        info = adapter.resolve_model(PROVIDER_ROUTE, "gpt-4o")
    first, second = server.requests
    assert first.path.startswith("/openai/deployments/prod-4o/chat/completions?")
    assert first.json()["model"] == "prod-4o"
    assert second.path.startswith("/openai/deployments/gpt-4.1/chat/completions?")
    assert second.json()["max_completion_tokens"] == 900
    assert info.context is not None
    assert info.context.context_window == 128000
    assert info.id == "gpt-4o"


def test_a_gateway_path_and_its_query_are_kept(server: LoopbackServer) -> None:
    server.enqueue(Reply(body=body("chat_prompt_filter_results_first")))
    server.enqueue(Reply(body=body("chat_prompt_filter_results_first")))
    with _adapter(server, base_url=f"{server.url}/aoai/?tenant=eu") as adapter:
        _outcome(adapter)
    with _adapter(
        server, base_url=f"{server.url}/aoai?tenant=eu&api-version=2024-10-21"
    ) as adapter:
        _outcome(adapter, model="d1")
    first, second = server.requests
    assert first.path == "/aoai/openai/v1/chat/completions?tenant=eu"
    assert second.path == (
        "/aoai/openai/deployments/d1/chat/completions?tenant=eu&api-version=2024-10-21"
    )


def test_the_v1_root_itself_is_accepted(server: LoopbackServer) -> None:
    server.enqueue(Reply(body=body("responses_function_call")))
    with _adapter(server, base_url=f"{server.url}/openai/v1/", wire="responses") as a:
        chunks = _outcome(a)
    assert chunks[-1].reason.kind == "tool-calls"
    assert server.requests[0].path == "/openai/v1/responses"


def test_the_chat_wire_sends_the_reasoning_effort(server: LoopbackServer) -> None:
    server.enqueue(Reply(body=body("chat_prompt_filter_results_first")))
    with _adapter(server, max_tokens_field="max_tokens") as adapter:
        _outcome(adapter, reasoning_effort="high", max_tokens=10)
    sent = server.requests[0].json()
    assert sent["reasoning_effort"] == "high"
    assert sent["max_tokens"] == 10
    assert "max_completion_tokens" not in sent


@pytest.mark.parametrize("wire", ["chat", "responses"])
def test_an_unknown_effort_is_refused_before_any_io(
    server: LoopbackServer, wire: str
) -> None:
    with _adapter(server, wire=wire) as adapter:
        error = _failure(adapter, reasoning_effort="extreme")
    assert error.code == ErrorCode.UNSUPPORTED_REASONING_EFFORT
    assert server.requests == ()


@pytest.mark.parametrize("name", ["api-key", "Authorization"])
def test_an_extra_header_may_not_carry_a_credential(
    server: LoopbackServer, name: str
) -> None:
    with _adapter(server) as adapter:
        error = _failure(adapter, extra_headers={name: "other"})
    assert error.code == ErrorCode.UNSUPPORTED_OPTION
    assert "other" not in str(error)
    assert server.requests == ()


def test_other_extra_headers_travel(server: LoopbackServer) -> None:
    server.enqueue(Reply(body=body("chat_prompt_filter_results_first")))
    with _adapter(server) as adapter:
        _outcome(adapter, extra_headers={"x-ms-useragent": "mine/1"})
    assert server.requests[0].header("x-ms-useragent") == "mine/1"


def _image_message(store: MemoryAttachmentStore) -> Message:
    image = image_block(png(2, 3), store=store)
    return create_user_message([TextBlock(text="What is this?"), image])


@pytest.mark.parametrize("wire", ["chat", "responses"])
def test_images_go_to_a_model_listed_with_image_input(
    server: LoopbackServer, wire: str
) -> None:
    name = (
        "chat_prompt_filter_results_first"
        if wire == "chat"
        else "responses_function_call"
    )
    server.enqueue(Reply(body=body(name)))
    store = MemoryAttachmentStore()
    models = [{"id": "vision", "inputModalities": ["text", "image"]}]
    with _adapter(server, wire=wire, models=models) as adapter:
        adapter.attachments = store
        _outcome(adapter, model="vision", messages=(_image_message(store),))
    sent = json.dumps(server.requests[0].json())
    assert "data:image/png;base64," in sent


def test_images_to_an_unlisted_model_are_refused_before_any_io(
    server: LoopbackServer,
) -> None:
    store = MemoryAttachmentStore()
    with _adapter(server) as adapter:
        adapter.attachments = store
        error = _failure(adapter, messages=(_image_message(store),))
    assert error.code == ErrorCode.UNSUPPORTED_CONTENT
    assert server.requests == ()


def test_the_responses_wire_refuses_stop_sequences_before_any_io(
    server: LoopbackServer,
) -> None:
    with _adapter(server, wire="responses") as adapter:
        error = _failure(adapter, stop=("END",))
    assert error.code == ErrorCode.UNSUPPORTED_OPTION
    assert server.requests == ()


def test_a_reasoning_turn_replays_its_encrypted_reasoning(
    server: LoopbackServer,
) -> None:
    from dsh_llm import collect

    server.enqueue(Reply(body=body("responses_reasoning_text")))
    server.enqueue(Reply(body=body("responses_reasoning_text")))
    with _adapter(server, wire="responses") as adapter:
        reply = collect(adapter.stream(_options()))
        _outcome(
            adapter,
            messages=(
                create_user_message("hi"),
                reply.message,
                create_user_message("again"),
            ),
        )
    items = server.requests[1].json()["input"]
    reasoning = [item for item in items if item["type"] == "reasoning"]
    assert reasoning == [
        {
            "type": "reasoning",
            "id": "rs_67cb3252a1c48190b0d1f2e3a4b5c6d7",
            "summary": [],
            "encrypted_content": "gAAAAABoAzureEncryptedReasoning0123456789",
        }
    ]
