"""VertexAdapter end to end against the loopback server: the Gemini fixtures
(Vertex's stream shapes equal the Gemini API's, with a ``finishReason`` on
every chunk) and the Anthropic fixtures (Claude on Vertex streams the Messages
SSE wire) replayed through it, each strictly validated; the requests it sends
(path, bearer token, each publisher's body); HTTP errors in both shapes Vertex
answers with. The token is the caller's here (``test_auth`` covers the Google
credentials)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest

from dsh_llm.adapters.anthropic.catalog import thinking_profile
from dsh_llm.adapters.anthropic.request import build_messages_request
from dsh_llm.adapters.gemini.request import build_generate_request
from dsh_llm.adapters.vertex import PROVIDER_ROUTE
from dsh_llm.adapters.vertex import VertexAdapter
from dsh_llm.adapters.vertex.request import vertex_messages_body
from dsh_llm.assembler import collect
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import TextDelta
from dsh_llm.protocol import create_user_message
from dsh_llm.runtime import LlmRuntime
from dsh_llm.serde import chunk_to_dict
from dsh_llm.serde import read_jsonl
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply
from dsh_llm.testing import sse_event
from dsh_llm.transport.attribution import user_agent
from dsh_llm.validator import validate_stream

from ..adapter_replay import FRAMINGS
from ..adapter_replay import SPLIT_IDS
from ..adapter_replay import SPLITS
from ..adapter_replay import as_dicts
from ..adapter_replay import consumed
from ..gemini_tool_loop import assert_made_ids_are_fresh_each_turn

FIXTURES = Path(__file__).parents[2] / "fixtures"
GEMINI_NAMES = sorted(p.stem for p in (FIXTURES / "gemini").glob("*.sse"))
VERTEX_NAMES = [name for name in GEMINI_NAMES if name.startswith("vertex_")]
CLAUDE_NAMES = sorted(p.stem for p in (FIXTURES / "anthropic").glob("*.sse"))
TOKEN = "ya29.stream-test-0123456789abcdef"
PROJECT = "my-project"
LOCATION = "us-east5"
GEMINI = "gemini-3-flash-preview"
CLAUDE = "claude-haiku-4-5@20251001"
ROOT = f"/v1/projects/{PROJECT}/locations/{LOCATION}/publishers"


def _adapter(server: LoopbackServer, **options: Any) -> VertexAdapter:
    options.setdefault("environ", {})
    options.setdefault("project", PROJECT)
    options.setdefault("location", LOCATION)
    return VertexAdapter(TOKEN, base_url=server.url, **options)


def _options(**fields: Any) -> GenerateOptions:
    fields.setdefault("messages", (create_user_message("hi"),))
    fields.setdefault("model", GEMINI)
    return GenerateOptions(provider=PROVIDER_ROUTE, **fields)


def _expected(family: str, name: str, provider: str) -> list[dict[str, Any]]:
    """A fixture's chunks as Vertex gives them: the failures name Vertex AI
    where the family's own adapter names itself."""
    chunks = [
        chunk_to_dict(c)
        for c in read_jsonl(str(FIXTURES / family / f"{name}.chunks.jsonl"))
    ]
    for chunk in chunks:
        failure = chunk.get("reason", {}).get("failure")
        if failure is not None:
            failure["message"] = failure["message"].replace(provider, "Vertex AI")
    return chunks


def _replayed(server: LoopbackServer, model: str) -> list[dict[str, Any]]:
    with _adapter(server) as adapter:
        return as_dicts(consumed(adapter.stream(_options(model=model))))


# --- recorded streams -----------------------------------------------------------------


@pytest.mark.parametrize("name", GEMINI_NAMES)
def test_every_gemini_fixture_replays_through_vertex(server, name):
    body = (FIXTURES / "gemini" / f"{name}.sse").read_bytes()
    server.enqueue(Reply(body=body, split=5))
    assert _replayed(server, GEMINI) == _expected("gemini", name, "Gemini")
    (request,) = server.requests
    assert request.path.startswith(f"{ROOT}/google/models/{GEMINI}:")


@pytest.mark.parametrize("framing", FRAMINGS)
@pytest.mark.parametrize("split", SPLITS, ids=SPLIT_IDS)
@pytest.mark.parametrize("name", VERTEX_NAMES)
def test_vertex_shaped_streams_in_every_framing_and_split(server, name, split, framing):
    body = (FIXTURES / "gemini" / f"{name}.sse").read_bytes()
    server.enqueue(Reply(body=body, framing=framing, split=split))
    assert _replayed(server, GEMINI) == _expected("gemini", name, "Gemini")


@pytest.mark.parametrize(
    ("framing", "split"), [("chunked", None), ("close", 7), ("length", 1)]
)
@pytest.mark.parametrize("name", CLAUDE_NAMES)
def test_every_anthropic_fixture_replays_through_vertex(server, name, framing, split):
    body = (FIXTURES / "anthropic" / f"{name}.sse").read_bytes()
    server.enqueue(Reply(body=body, framing=framing, split=split))
    assert _replayed(server, CLAUDE) == _expected("anthropic", name, "Anthropic")
    (request,) = server.requests
    assert request.path == f"{ROOT}/anthropic/models/{CLAUDE}:streamRawPredict"


# --- the requests ---------------------------------------------------------------------

GEMINI_STOP = {
    "candidates": [
        {
            "content": {"parts": [{"text": "ok"}], "role": "model"},
            "finishReason": "STOP",
        }
    ],
    "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 1},
}


def _claude_reply(text: str = "ok") -> Reply:
    events = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_vrtx_01",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-haiku-4-5-20251001",
                    "content": [],
                    "stop_reason": None,
                    "usage": {"input_tokens": 5, "output_tokens": 1},
                },
            },
        ),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": text},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": 2},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    body = b"".join(
        f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events
    )
    return Reply(headers={"content-type": "text/event-stream"}, body=body)


def test_a_gemini_request_goes_to_the_google_publisher_with_the_gemini_body(server):
    server.enqueue(Reply(body=(sse_event(GEMINI_STOP),)))
    options = _options(max_tokens=50, temperature=0.5, stop=("END",))
    with _adapter(server) as adapter:
        chunks = list(validate_stream(adapter.stream(options), strict=True))
    assert chunks[-1].reason.kind == "stop"  # type: ignore[union-attr]
    (request,) = server.requests
    assert request.method == "POST"
    assert request.path == (
        f"{ROOT}/google/models/{GEMINI}:streamGenerateContent?alt=sse"
    )
    assert request.header("authorization") == f"Bearer {TOKEN}"
    assert request.header("x-goog-api-key") is None
    assert request.header("user-agent") == user_agent()
    assert request.header("accept") == "text/event-stream"
    # The catalog's default effort for this model, as the Gemini adapter sends.
    assert request.json() == build_generate_request(
        _options(max_tokens=50, temperature=0.5, stop=("END",), reasoning_effort="high")
    )


def test_a_claude_request_has_no_model_and_the_vertex_anthropic_version(server):
    server.enqueue(_claude_reply())
    options = _options(model=CLAUDE, max_tokens=100, system="be brief")
    with _adapter(server) as adapter:
        chunks = list(validate_stream(adapter.stream(options), strict=True))
    assert [c.text for c in chunks if isinstance(c, TextDelta)] == ["ok"]
    (request,) = server.requests
    assert request.path == f"{ROOT}/anthropic/models/{CLAUDE}:streamRawPredict"
    assert request.header("authorization") == f"Bearer {TOKEN}"
    assert request.header("x-api-key") is None
    assert request.header("anthropic-version") is None
    body = request.json()
    assert next(iter(body)) == "anthropic_version"
    assert body == {
        "anthropic_version": "vertex-2023-10-16",
        "max_tokens": 100,
        "system": "be brief",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "stream": True,
    }
    assert body == vertex_messages_body(
        build_messages_request(
            options,
            model_max_tokens=32_000,
            thinking=thinking_profile("claude-haiku-4-5"),
        )
    )


def test_anthropic_beta_features_travel_in_extra_headers(server):
    server.enqueue(_claude_reply())
    beta = {"anthropic-beta": "context-1m-2025-08-07"}
    with _adapter(server) as adapter:
        list(adapter.stream(_options(model=CLAUDE, extra_headers=beta)))
    (request,) = server.requests
    assert request.header("anthropic-beta") == "context-1m-2025-08-07"


def test_a_configured_effort_goes_to_each_model_that_offers_it(server):
    server.enqueue(Reply(body=(sse_event(GEMINI_STOP),)))
    server.enqueue(_claude_reply())
    server.enqueue(Reply(body=(sse_event(GEMINI_STOP),)))
    server.enqueue(_claude_reply())
    with _adapter(server, reasoning_effort="low") as adapter:
        list(adapter.stream(_options()))
        list(adapter.stream(_options(model=CLAUDE, max_tokens=8000)))
    with _adapter(server, reasoning_effort="minimal") as adapter:
        list(adapter.stream(_options()))
        list(adapter.stream(_options(model=CLAUDE, max_tokens=8000)))
    gemini_low, claude_low, gemini_minimal, claude_default = (
        request.json() for request in server.requests
    )
    assert gemini_low["generationConfig"]["thinkingConfig"] == {
        "thinkingLevel": "LOW",
        "includeThoughts": True,
    }
    assert claude_low["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert gemini_minimal["generationConfig"]["thinkingConfig"]["thinkingLevel"] == (
        "MINIMAL"
    )
    # Claude Haiku has no "minimal": the model's own default (no thinking).
    assert "thinking" not in claude_default


def test_a_catalog_entry_names_the_publisher_of_an_id_that_does_not(server):
    server.enqueue(_claude_reply())
    server.enqueue(Reply(body=(sse_event(GEMINI_STOP),)))
    models = [
        {"id": "house-model", "publisher": "anthropic"},
        {"id": "claude-lookalike", "publisher": "google"},
    ]
    with _adapter(server, models=models) as adapter:
        list(validate_stream(adapter.stream(_options(model="house-model"))))
        list(validate_stream(adapter.stream(_options(model="claude-lookalike"))))
    claude, gemini = server.requests
    assert claude.path.endswith(
        "/publishers/anthropic/models/house-model:streamRawPredict"
    )
    assert "model" not in claude.json()
    assert gemini.path.endswith(
        "/publishers/google/models/claude-lookalike:streamGenerateContent?alt=sse"
    )


def test_the_runtime_streams_the_route(server):
    server.enqueue(_claude_reply("hey"))
    runtime = LlmRuntime()
    with _adapter(server) as adapter:
        registration = runtime.register_adapter([PROVIDER_ROUTE], adapter)
        try:
            chunks = list(
                validate_stream(runtime.stream(_options(model=CLAUDE)), strict=True)
            )
        finally:
            registration.dispose()
    assert [c.text for c in chunks if isinstance(c, TextDelta)] == ["hey"]
    assert runtime.list_providers() == ()


def test_refusals_come_before_any_request(server):
    with _adapter(server) as adapter:
        with pytest.raises(LlmError) as caught:
            list(adapter.stream(_options(extra_headers={"Authorization": "x"})))
        assert caught.value.code == ErrorCode.UNSUPPORTED_OPTION
        with pytest.raises(LlmError) as caught:
            list(adapter.stream(_options(model=CLAUDE, reasoning_effort="minimal")))
        assert caught.value.code == ErrorCode.UNSUPPORTED_REASONING_EFFORT
        with pytest.raises(LlmError) as caught:
            list(adapter.stream(_options(stop=tuple("abcdef"))))
        assert caught.value.code == ErrorCode.UNSUPPORTED_OPTION
    assert server.requests == ()


# --- HTTP errors ----------------------------------------------------------------------


def _rpc(code: int, status: str, message: str, *details: Any) -> bytes:
    error: dict[str, Any] = {"code": code, "message": message, "status": status}
    if details:
        error["details"] = list(details)
    return json.dumps({"error": error}).encode()


RETRY = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "12s"}
PER_DAY = {
    "@type": "type.googleapis.com/google.rpc.QuotaFailure",
    "violations": [{"quotaId": "GenerateRequestsPerDayPerProjectPerModel"}],
}
PER_MINUTE_QUOTA = (
    "Quota exceeded for aiplatform.googleapis.com/"
    "generate_content_requests_per_minute_per_project_per_base_model with base "
    "model: gemini-3-flash. Please submit a quota increase request."
)


@pytest.mark.parametrize(
    ("status", "body", "code", "message", "delay"),
    [
        (
            401,
            _rpc(401, "UNAUTHENTICATED", "Request had invalid authentication"),
            ErrorCode.AUTH,
            "Request had invalid authentication",
            None,
        ),
        (
            403,
            _rpc(403, "PERMISSION_DENIED", "Permission 'aiplatform.endpoints.predict'"),
            ErrorCode.AUTH,
            "Permission 'aiplatform.endpoints.predict'",
            None,
        ),
        (
            404,
            _rpc(404, "NOT_FOUND", "Publisher Model was not found"),
            ErrorCode.INVALID_REQUEST,
            "Publisher Model was not found",
            None,
        ),
        (
            400,
            _rpc(400, "INVALID_ARGUMENT", "The input token count exceeds the max"),
            ErrorCode.CONTEXT_WINDOW_EXCEEDED,
            "The input token count exceeds the max",
            None,
        ),
        (
            429,
            _rpc(429, "RESOURCE_EXHAUSTED", PER_MINUTE_QUOTA),
            ErrorCode.RATE_LIMIT,
            PER_MINUTE_QUOTA,
            None,
        ),
        (
            429,
            _rpc(429, "RESOURCE_EXHAUSTED", "Resource exhausted", RETRY),
            ErrorCode.RATE_LIMIT,
            "Resource exhausted",
            12_000.0,
        ),
        (
            429,
            _rpc(429, "RESOURCE_EXHAUSTED", "Quota exceeded", PER_DAY),
            ErrorCode.QUOTA,
            "Quota exceeded",
            None,
        ),
        (
            500,
            b"[" + _rpc(500, "INTERNAL", "Internal error encountered.") + b"]",
            ErrorCode.SERVER,
            "Internal error encountered.",
            None,
        ),
        (503, b"", ErrorCode.SERVER, "Vertex AI error (HTTP 503)", None),
        (
            529,
            json.dumps(
                {
                    "type": "error",
                    "error": {"type": "overloaded_error", "message": "Overloaded"},
                }
            ).encode(),
            ErrorCode.SERVER,
            "Overloaded",
            None,
        ),
        (
            400,
            json.dumps(
                {
                    "type": "error",
                    "error": {
                        "type": "invalid_request_error",
                        "message": "prompt is too long: 210000 tokens > 200000 maximum",
                    },
                }
            ).encode(),
            ErrorCode.CONTEXT_WINDOW_EXCEEDED,
            "prompt is too long: 210000 tokens > 200000 maximum",
            None,
        ),
    ],
    ids=[
        "401-unauthenticated",
        "403-permission",
        "404-model",
        "400-too-long",
        "429-per-minute-quota",
        "429-retry-info",
        "429-per-day",
        "500-array",
        "503-empty",
        "529-anthropic-overloaded",
        "400-anthropic-too-long",
    ],
)
def test_http_errors_map_to_stable_codes(server, status, body, code, message, delay):
    server.enqueue(
        Reply(
            status=status,
            headers={"content-type": "application/json"},
            body=body,
            framing="length",
        )
    )
    with _adapter(server) as adapter, pytest.raises(LlmError) as caught:
        list(adapter.stream(_options()))
    error = caught.value
    assert (error.code, error.status, error.message) == (code, status, message)
    assert error.provider_retry_after_ms == delay


def test_the_retry_after_header_wins_over_retry_info(server):
    server.enqueue(
        Reply(
            status=429,
            headers={"content-type": "application/json", "retry-after": "3"},
            body=_rpc(429, "RESOURCE_EXHAUSTED", "Resource exhausted", RETRY),
            framing="length",
        )
    )
    with _adapter(server) as adapter, pytest.raises(LlmError) as caught:
        list(adapter.stream(_options(model=CLAUDE)))
    assert caught.value.provider_retry_after_ms == 3000.0


def test_gemini_calls_without_ids_get_new_ids_each_turn_of_a_tool_loop(server):
    # A made id never repeats one the conversation already holds (as with the
    # Gemini API's own adapter).
    with _adapter(server) as adapter:
        assert_made_ids_are_fresh_each_turn(
            server,
            adapter.stream,
            lambda messages: _options(messages=messages),
        )


# --- replay of reasoning in the next turn ---------------------------------------------


def _next_turn(server: LoopbackServer, family: str, name: str, model: str) -> Any:
    """The body of the request after a reply from fixture ``name``."""
    body = (FIXTURES / family / f"{name}.sse").read_bytes()
    server.enqueue(Reply(body=body))
    server.enqueue(Reply(body=body))
    with _adapter(server) as adapter:
        first = _options(model=model, max_tokens=4000)
        reply = collect(adapter.stream(first))
        follow = attrs.evolve(
            first,
            messages=(*first.messages, reply.message, create_user_message("more")),
        )
        list(adapter.stream(follow))
    return server.requests[1].json()


def test_claude_thinking_and_its_signature_go_back_to_the_same_model(server):
    body = _next_turn(server, "anthropic", "thinking_signature_text", CLAUDE)
    assistant = body["messages"][1]
    assert assistant["role"] == "assistant"
    thinking = assistant["content"][0]
    assert thinking["type"] == "thinking"
    assert thinking["signature"].startswith("EqQBCkYIBxgCKkBv7lJ3")
    assert "model" not in body


def test_a_gemini_thought_signature_goes_back_on_its_call(server):
    body = _next_turn(server, "gemini", "function_call_signed", GEMINI)
    model_turn = body["contents"][1]
    assert model_turn["role"] == "model"
    call = next(part for part in model_turn["parts"] if "functionCall" in part)
    assert call["thoughtSignature"].startswith("CiQBjz1rX2VnU2lnbmF0dXJlT25l")
