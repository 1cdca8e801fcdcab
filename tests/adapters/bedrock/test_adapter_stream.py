"""BedrockAdapter end to end against the loopback server: every fixture under
each framing and split, the request it sends (path, headers, bearer key), HTTP
errors to stable codes, redaction, cancellation, and a reasoning + tool-use
turn replayed to the next request. Every stream is strictly validated."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any
from typing import Literal

import pytest

from dsh_llm.adapters.bedrock import PROVIDER_ROUTE
from dsh_llm.adapters.bedrock import BedrockAdapter
from dsh_llm.assembler import BlockAssembler
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import ModelSource
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import ToolSchema
from dsh_llm.protocol import create_tool_result_message
from dsh_llm.protocol import create_user_message
from dsh_llm.serde import chunk_to_dict
from dsh_llm.signal import AbortController
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply
from dsh_llm.testing import Stall
from dsh_llm.validator import validate_stream
from tests.eventstream_frames import event
from tests.eventstream_frames import exception

from .replay import MODEL
from .replay import expected
from .replay import fixture_body
from .replay import fixture_names

KEY = "ABSKQmVkcm9ja0FQSUtleS1test0123456789abcdef"
EVENT_STREAM = "application/vnd.amazon.eventstream"
NAMES = fixture_names()


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:
        yield srv
        assert srv.wait_until_idle(), "a connection was left open"


def _adapter(server: LoopbackServer, **options: Any) -> BedrockAdapter:
    options.setdefault("environ", {"AWS_BEARER_TOKEN_BEDROCK": KEY})
    options.setdefault("region", "us-west-2")
    return BedrockAdapter(base_url=server.url, **options)


def _reply(body: bytes, **fields: Any) -> Reply:
    fields.setdefault("headers", {"content-type": EVENT_STREAM})
    return Reply(body=body, **fields)


def _options(**fields: Any) -> GenerateOptions:
    fields.setdefault("messages", (create_user_message("hi"),))
    fields.setdefault("model", MODEL)
    return GenerateOptions(provider=PROVIDER_ROUTE, **fields)


def _outcome(adapter: BedrockAdapter, **fields: Any) -> list[StreamChunk]:
    chunks: list[StreamChunk] = []
    try:
        for chunk in validate_stream(adapter.stream(_options(**fields)), strict=True):
            chunks.append(chunk)
    except LlmError as error:
        chunks.append(Finish(reason=FinishReason.error(error.failure)))
    return chunks


def _failure(adapter: BedrockAdapter, **fields: Any) -> LlmError:
    def drain() -> None:
        list(validate_stream(adapter.stream(_options(**fields)), strict=True))

    with pytest.raises(LlmError) as caught:
        drain()
    return caught.value


@pytest.mark.parametrize("framing", ["chunked", "close", "length"])
@pytest.mark.parametrize("split", [None, 1, 7], ids=["whole", "1-byte", "7-bytes"])
@pytest.mark.parametrize("name", NAMES)
def test_fixture_through_the_adapter_gives_its_expected_chunks(
    server: LoopbackServer,
    name: str,
    split: int | None,
    framing: Literal["chunked", "close", "length"],
) -> None:
    server.enqueue(_reply(fixture_body(name), framing=framing, split=split))
    with _adapter(server) as adapter:
        chunks = _outcome(adapter)
    assert [chunk_to_dict(c) for c in chunks] == expected(name)


def test_the_request_goes_to_converse_stream_with_the_bearer_key(
    server: LoopbackServer,
) -> None:
    server.enqueue(_reply(fixture_body("text")))
    arn = (
        "arn:aws:bedrock:us-west-2:123456789012:inference-profile/"
        "us.anthropic.claude-haiku-4-5-20251001-v1:0"
    )
    with _adapter(server) as adapter:
        _outcome(
            adapter,
            model=arn,
            system="Be brief.",
            temperature=0.5,
            max_tokens=300,
            stop=("END",),
        )
    (request,) = server.requests
    assert request.path == (
        "/model/arn%3Aaws%3Abedrock%3Aus-west-2%3A123456789012%3Ainference-profile"
        "%2Fus.anthropic.claude-haiku-4-5-20251001-v1%3A0/converse-stream"
    )
    assert request.header("authorization") == f"Bearer {KEY}"
    assert request.header("accept") == EVENT_STREAM
    assert request.header("content-type") == "application/json"
    assert request.header("x-amz-date") is None
    assert request.json() == {
        "messages": [{"role": "user", "content": [{"text": "hi"}]}],
        "system": [{"text": "Be brief."}],
        "inferenceConfig": {
            "maxTokens": 300,
            "temperature": 0.5,
            "stopSequences": ["END"],
        },
    }


def test_an_explicit_key_wins_over_the_environment(server: LoopbackServer) -> None:
    server.enqueue(_reply(fixture_body("text")))
    with _adapter(server, api_key="ABSK-explicit-key-0123") as adapter:
        _outcome(adapter)
    assert server.requests[0].header("authorization") == "Bearer ABSK-explicit-key-0123"


def test_the_public_endpoint_is_the_regions_and_the_repr_hides_the_key() -> None:
    adapter = BedrockAdapter(KEY, region="eu-central-1")
    assert adapter.base_url == "https://bedrock-runtime.eu-central-1.amazonaws.com"
    assert repr(adapter) == (
        "BedrockAdapter(base_url='https://bedrock-runtime.eu-central-1.amazonaws.com',"
        " region='eu-central-1', api_key=***)"
    )
    assert KEY not in repr(adapter)
    adapter = BedrockAdapter(environ={"AWS_REGION": "ap-south-1"}, profile="dev")
    assert repr(adapter) == (
        "BedrockAdapter(base_url='https://bedrock-runtime.ap-south-1.amazonaws.com',"
        " region='ap-south-1', profile='dev', api_key_env='AWS_BEARER_TOKEN_BEDROCK')"
    )


# --- HTTP errors ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "kind", "message", "code"),
    [
        (400, "ValidationException", "Malformed input request", "INVALID_REQUEST"),
        (
            400,
            "ValidationException",
            "Input is too long for requested model.",
            "CONTEXT_WINDOW_EXCEEDED",
        ),
        (403, "AccessDeniedException", "You don't have access", "AUTH"),
        (403, "UnrecognizedClientException", "The security token is invalid", "AUTH"),
        (404, "ResourceNotFoundException", "Model not found", "INVALID_REQUEST"),
        (408, "ModelTimeoutException", "Model timed out", "TIMEOUT"),
        (424, "ModelErrorException", "The model failed", "SERVER"),
        (429, "ThrottlingException", "Too many requests", "RATE_LIMIT"),
        (429, "ModelNotReadyException", "Model is not ready", "SERVER"),
        (400, "ServiceQuotaExceededException", "Quota exceeded", "QUOTA"),
        (500, "InternalServerException", "Internal error", "SERVER"),
        (503, "ServiceUnavailableException", "Unavailable", "SERVER"),
        (418, "SomethingNewException", "New", "HTTP_418"),
    ],
)
def test_http_errors_map_to_stable_codes(
    server: LoopbackServer, status: int, kind: str, message: str, code: str
) -> None:
    server.enqueue(
        Reply(
            status=status,
            headers={
                "content-type": "application/json",
                "x-amzn-errortype": f"{kind}:http://internal.amazon.com/coral/",
                "x-amzn-requestid": "8f7a4bde-0000-4000-8000-000000000001",
            },
            body=(f'{{"message": "{message}"}}').encode(),
            framing="length",
        )
    )
    with _adapter(server) as adapter:
        failure = _failure(adapter)
    assert failure.code == code
    assert failure.status == status
    assert failure.message == message
    assert failure.request_id == "8f7a4bde-0000-4000-8000-000000000001"


def test_an_error_body_naming_its_type_without_the_header_is_classified(
    server: LoopbackServer,
) -> None:
    server.enqueue(
        Reply(
            status=400,
            headers={"content-type": "application/json"},
            body=b'{"__type": "com.amazon.coral#ThrottlingException", "Message": "x"}',
            framing="length",
        )
    )
    with _adapter(server) as adapter:
        failure = _failure(adapter)
    assert (failure.code, failure.message) == ("RATE_LIMIT", "x")


def test_an_echoed_key_is_redacted_from_errors(server: LoopbackServer) -> None:
    server.enqueue(
        Reply(
            status=403,
            headers={"content-type": "application/json"},
            body=f'{{"message": "bad key {KEY}"}}'.encode(),
            framing="length",
        )
    )
    server.enqueue(
        _reply(
            event("messageStart", {"role": "assistant"})
            + exception("validationException", {"message": f"no: {KEY}"})
        )
    )
    with _adapter(server) as adapter:
        for failure in (_failure(adapter), _failure(adapter)):
            assert KEY not in failure.message
            assert "***" in failure.message
            assert KEY not in repr(failure.__cause__)


def test_a_2xx_answer_that_is_not_an_event_stream_is_refused(
    server: LoopbackServer,
) -> None:
    server.enqueue(
        Reply(
            headers={"content-type": "application/json"},
            body=b'{"output": {}}',
            framing="length",
        )
    )
    with _adapter(server) as adapter:
        failure = _failure(adapter)
    assert failure.code == ErrorCode.MALFORMED_RESPONSE
    assert "an AWS event stream" in failure.message


# --- the stream's life ----------------------------------------------------------------


def test_an_abort_while_waiting_ends_with_aborted(server: LoopbackServer) -> None:
    body = fixture_body("text")
    server.enqueue(
        Reply(
            headers={"content-type": EVENT_STREAM}, body=(body[:60], Stall(seconds=10))
        )
    )
    controller = AbortController()

    def abort_later() -> None:
        server.wait_for_requests(1, timeout=10)
        controller.abort()

    waiter = threading.Thread(target=abort_later)
    waiter.start()
    with _adapter(server) as adapter:
        failure = _failure(adapter, signal=controller.signal)
    waiter.join()
    assert failure.code == ErrorCode.ABORTED


def test_a_silent_stream_ends_with_the_idle_timeout(server: LoopbackServer) -> None:
    server.enqueue(
        Reply(headers={"content-type": EVENT_STREAM}, body=(Stall(seconds=10),))
    )
    with _adapter(server, stream_idle_timeout_ms=200) as adapter:
        failure = _failure(adapter)
    assert failure.code == ErrorCode.TIMEOUT


def test_a_corrupt_frame_fails_as_malformed_after_the_good_ones(
    server: LoopbackServer,
) -> None:
    good = event("messageStart", {"role": "assistant"}) + event(
        "contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "ok"}}
    )
    bad = bytearray(event("contentBlockStop", {"contentBlockIndex": 0}))
    bad[-1] ^= 1
    server.enqueue(_reply(good + bytes(bad)))
    with _adapter(server) as adapter:
        chunks = _outcome(adapter)
    assert [type(c).__name__ for c in chunks] == ["BlockStart", "TextDelta", "Finish"]
    assert chunks[-1].reason.failure.code == ErrorCode.MALFORMED_RESPONSE  # type: ignore[union-attr]


# --- replay: reasoning and a tool call round-trip ------------------------------------

TOOLS = (
    ToolSchema(
        name="get_weather",
        description="Weather for a city",
        parameters={"type": "object", "properties": {"city": {"type": "string"}}},
    ),
)


def test_a_reasoning_and_tool_use_turn_is_sent_back_with_its_signature(
    server: LoopbackServer,
) -> None:
    server.enqueue(_reply(fixture_body("reasoning_signature_tool_use")))
    server.enqueue(_reply(fixture_body("redacted_reasoning")))
    server.enqueue(_reply(fixture_body("text")))
    question = create_user_message("Weather in Oslo?")
    with _adapter(server) as adapter:

        def turn(*messages: Any) -> Any:
            assembler = BlockAssembler()
            for chunk in validate_stream(
                adapter.stream(
                    _options(messages=messages, tools=TOOLS, reasoning_effort="low")
                ),
                strict=True,
            ):
                assembler.push(chunk)
            return assembler.message(
                ModelSource(
                    provider=PROVIDER_ROUTE,
                    model=MODEL,
                    replay_state=assembler.replay_state,
                )
            )

        first = turn(question)
        result = create_tool_result_message("tooluse_r1", "4C and clear")
        second = turn(question, first, result)
        turn(question, first, result, second, create_user_message("Thanks"))
    body = server.requests[1].json()
    assert body["additionalModelRequestFields"] == {
        "thinking": {"type": "enabled", "budget_tokens": 2048}
    }
    assert body["messages"] == [
        {"role": "user", "content": [{"text": "Weather in Oslo?"}]},
        {
            "role": "assistant",
            "content": [
                {
                    "reasoningContent": {
                        "reasoningText": {
                            "text": "The user wants the weather.",
                            "signature": "EqQBCkYIBxgCKkBsig==",
                        }
                    }
                },
                {
                    "toolUse": {
                        "toolUseId": "tooluse_r1",
                        "name": "get_weather",
                        "input": {"city": "Oslo"},
                    }
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "toolResult": {
                        "toolUseId": "tooluse_r1",
                        "content": [{"text": "4C and clear"}],
                    }
                }
            ],
        },
    ]
    third = server.requests[2].json()["messages"]
    assert third[3] == {
        "role": "assistant",
        "content": [
            {"reasoningContent": {"redactedContent": "AAECAwQFBg=="}},
            {"text": "Done."},
        ],
    }


def test_reasoning_from_another_model_is_not_replayed(server: LoopbackServer) -> None:
    server.enqueue(_reply(fixture_body("reasoning_signature_tool_use")))
    server.enqueue(_reply(fixture_body("text")))
    other = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
    with _adapter(server) as adapter:
        assembler = BlockAssembler()
        for chunk in adapter.stream(_options(tools=TOOLS)):
            assembler.push(chunk)
        answer = assembler.message(
            ModelSource(
                provider=PROVIDER_ROUTE,
                model=MODEL,
                replay_state=assembler.replay_state,
            )
        )
        _outcome(
            adapter,
            model=other,
            tools=TOOLS,
            messages=(
                create_user_message("q"),
                answer,
                create_tool_result_message("tooluse_r1", "ok"),
            ),
        )
    content = server.requests[1].json()["messages"][1]["content"]
    assert [list(part) for part in content] == [["toolUse"]]
