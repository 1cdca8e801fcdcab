"""GeminiAdapter end to end against the loopback server: every recorded body under
every framing and split, the request it sends (URL, key header, body), HTTP
errors to stable codes, an echoed key redacted, abort and idle timeout. Every
stream is checked with ``validate_stream(strict=True)``."""

from __future__ import annotations

import base64
import json
import threading
import time
import types
from pathlib import Path
from typing import Any

import pytest

from dsh_llm.adapters.gemini import PROVIDER_ROUTE
from dsh_llm.adapters.gemini import GeminiAdapter
from dsh_llm.adapters.gemini.request import build_generate_request
from dsh_llm.assembler import collect
from dsh_llm.attachments import MemoryAttachmentStore
from dsh_llm.attachments import attachment_id
from dsh_llm.attachments import image_block
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import Finish
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import ImageBlock
from dsh_llm.protocol import ModelSource
from dsh_llm.protocol import TextDelta
from dsh_llm.protocol import create_user_message
from dsh_llm.runtime import LlmRuntime
from dsh_llm.serde import chunk_to_dict
from dsh_llm.serde import read_jsonl
from dsh_llm.signal import AbortController
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply
from dsh_llm.testing import Stall
from dsh_llm.testing import sse_event
from dsh_llm.transport.attribution import user_agent
from dsh_llm.validator import validate_stream

from ..adapter_replay import FRAMINGS
from ..adapter_replay import SPLIT_IDS
from ..adapter_replay import SPLITS
from ..adapter_replay import as_dicts
from ..adapter_replay import consumed
from ..gemini_tool_loop import assert_made_ids_are_fresh_each_turn
from .test_errors import RECORDED

FIXTURES = Path(__file__).parents[2] / "fixtures" / "gemini"
NAMES = sorted(p.stem for p in FIXTURES.glob("*.sse"))
KEY = "AIzaSyTEST-0123456789abcdefghijklmnopqr"
MODEL = "gemini-3-flash-preview"


def _adapter(server: LoopbackServer, **options: Any) -> GeminiAdapter:
    options.setdefault("environ", {"GEMINI_API_KEY": KEY})
    return GeminiAdapter(base_url=server.url, **options)


def _options(**fields: Any) -> GenerateOptions:
    fields.setdefault("messages", (create_user_message("hi"),))
    fields.setdefault("model", MODEL)
    return GenerateOptions(provider=PROVIDER_ROUTE, **fields)


def _failure(adapter: GeminiAdapter, **fields: Any) -> LlmError:
    with pytest.raises(LlmError) as caught:
        list(adapter.stream(_options(**fields)))
    return caught.value


def _text(text: str, **extra: Any) -> dict[str, Any]:
    return {
        "candidates": [{"content": {"parts": [{"text": text}], "role": "model"}}],
        **extra,
    }


STOP = {
    "candidates": [
        {"content": {"parts": [{"text": ""}], "role": "model"}, "finishReason": "STOP"}
    ],
    "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 2},
}


# --- recorded streams -----------------------------------------------------------------


@pytest.mark.parametrize("framing", FRAMINGS)
@pytest.mark.parametrize("split", SPLITS, ids=SPLIT_IDS)
@pytest.mark.parametrize("name", NAMES)
def test_recorded_stream_through_the_adapter(server, name, split, framing):
    body = (FIXTURES / f"{name}.sse").read_bytes()
    expected = [
        chunk_to_dict(c) for c in read_jsonl(str(FIXTURES / f"{name}.chunks.jsonl"))
    ]
    server.enqueue(Reply(body=body, framing=framing, split=split))
    with _adapter(server) as adapter:
        assert as_dicts(consumed(adapter.stream(_options()))) == expected


# --- the request ----------------------------------------------------------------------


def test_the_request_carries_the_key_in_its_header_and_the_body_built(server):
    server.enqueue(Reply(body=(sse_event(_text("hi")), sse_event(STOP))))
    options = _options(max_tokens=50, temperature=0.5, stop=("END",))
    with _adapter(server) as adapter:
        chunks = list(validate_stream(adapter.stream(options), strict=True))
    assert [c.type for c in chunks][-2:] == ["usage", "finish"]
    (request,) = server.requests
    assert request.method == "POST"
    assert request.path == f"/v1beta/models/{MODEL}:streamGenerateContent?alt=sse"
    assert KEY not in request.path
    assert request.header("x-goog-api-key") == KEY
    assert request.header("authorization") is None
    assert request.header("user-agent") == user_agent()
    assert request.header("accept") == "text/event-stream"
    assert request.header("content-type") == "application/json"
    # The configured default effort: the catalog's "high" for this model.
    expected = build_generate_request(
        _options(max_tokens=50, temperature=0.5, stop=("END",), reasoning_effort="high")
    )
    assert request.json() == expected
    assert request.json()["generationConfig"]["thinkingConfig"] == {
        "thinkingLevel": "HIGH",
        "includeThoughts": True,
    }


def test_a_configured_effort_is_sent_when_the_request_names_none(server):
    server.enqueue(Reply(body=(sse_event(_text("hi")), sse_event(STOP))))
    with _adapter(server, reasoning_effort="low") as adapter:
        list(adapter.stream(_options()))
    (request,) = server.requests
    thinking = request.json()["generationConfig"]["thinkingConfig"]
    assert thinking == {"thinkingLevel": "LOW", "includeThoughts": True}


def test_the_runtime_streams_the_route(server):
    server.enqueue(Reply(body=(sse_event(_text("hello")), sse_event(STOP))))
    runtime = LlmRuntime()
    with _adapter(server) as adapter:
        runtime.register_adapter([PROVIDER_ROUTE], adapter)
        chunks = list(validate_stream(runtime.stream(_options()), strict=True))
    assert [c.type for c in chunks] == [
        "block-start",
        "text-delta",
        "block-end",
        "usage",
        "finish",
    ]
    assert chunks[-1].reason.kind == "stop"  # type: ignore[union-attr]


def test_calls_without_ids_get_new_ids_each_turn_of_a_tool_loop(server):
    # LiteLLM's Gemini route: no functionCall id and no responseId.
    with _adapter(server) as adapter:
        assert_made_ids_are_fresh_each_turn(
            server, adapter.stream, lambda messages: _options(messages=messages)
        )


def test_refusals_and_a_missing_key_come_before_any_request(server):
    with _adapter(server, environ={}) as adapter:
        error = _failure(adapter, stop=tuple("abcdef"))
        assert error.code == ErrorCode.UNSUPPORTED_OPTION
        error = _failure(adapter, reasoning_effort="max")
        assert error.code == ErrorCode.UNSUPPORTED_REASONING_EFFORT
        error = _failure(adapter)
        assert error.code == ErrorCode.MISSING_CREDENTIAL
        assert "GEMINI_API_KEY" in error.message
    assert server.requests == ()


def test_the_repr_never_shows_the_key(server):
    with GeminiAdapter(KEY, base_url=server.url) as adapter:
        assert KEY not in repr(adapter)
        assert "api_key=***" in repr(adapter)


# --- HTTP errors ----------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_recorded_http_errors_get_stable_codes_and_keep_the_request_id(server, name):
    status = int(name.split("_")[1])
    code, retry_after = RECORDED[name]
    body = (FIXTURES / f"{name}.json").read_bytes()
    server.enqueue(
        Reply(
            status=status,
            headers={"content-type": "application/json", "x-request-id": "req-7"},
            body=body,
        )
    )
    with _adapter(server) as adapter:
        error = _failure(adapter)
    assert error.code == code
    assert error.status == status
    assert error.request_id == "req-7"
    assert error.provider_retry_after_ms == retry_after
    assert error.message == json.loads(body)["error"]["message"]


def test_a_key_echoed_in_an_http_error_is_redacted(server):
    echoed = {
        "error": {
            "code": 400,
            "message": f"API key not valid: {KEY}",
            "status": "INVALID_ARGUMENT",
        }
    }
    server.enqueue(Reply(status=400, body=json.dumps(echoed).encode()))
    with _adapter(server) as adapter:
        error = _failure(adapter)
    assert error.code == ErrorCode.INVALID_REQUEST
    assert KEY not in error.message
    assert "***" in error.message
    assert KEY not in str(error.__cause__)


def test_a_key_echoed_in_an_in_stream_error_or_a_bad_payload_is_redacted(server):
    in_stream = {"error": {"code": 500, "message": f"bad {KEY}", "status": "INTERNAL"}}
    server.enqueue(Reply(body=(sse_event(_text("a")), sse_event(in_stream))))
    server.enqueue(Reply(body=(sse_event(f"{{not json {KEY}"),)))
    with _adapter(server) as adapter:
        chunks = consumed(adapter.stream(_options()))
        failure = chunks[-1].reason.failure  # type: ignore[union-attr]
        assert failure is not None
        assert (failure.code, failure.message) == ("SERVER", "bad ***")
        error = _failure(adapter)
    assert error.code == ErrorCode.MALFORMED_RESPONSE
    assert KEY not in error.message
    assert KEY not in str(error.__cause__)


# --- cancellation and the watchdog ----------------------------------------------------


def test_abort_mid_stream_ends_with_aborted(server):
    server.enqueue(Reply(body=(sse_event(_text("partial")), Stall())))
    controller = AbortController()
    with _adapter(server) as adapter:
        stream = adapter.stream(_options(signal=controller.signal))
        seen = [next(stream), next(stream)]
        assert isinstance(seen[1], TextDelta)
        threading.Timer(0.05, controller.abort).start()
        started = time.monotonic()
        with pytest.raises(LlmError) as caught:
            list(stream)
    assert caught.value.code == ErrorCode.ABORTED
    assert time.monotonic() - started < 5


def test_an_abort_after_a_stop_but_before_the_end_of_the_body_stays_aborted(server):
    # Vertex AI sends finishReason STOP on every chunk: no chunk proves the
    # answer whole, so an abort before the body ends is never a clean stop.
    first = _text("The Oslofjord is ")
    first["candidates"][0]["finishReason"] = "STOP"
    server.enqueue(Reply(body=(sse_event(first), Stall())))
    controller = AbortController()
    with _adapter(server) as adapter:
        stream = adapter.stream(_options(signal=controller.signal))
        assert [next(stream).type, next(stream).type] == ["block-start", "text-delta"]
        controller.abort()
        with pytest.raises(LlmError) as caught:
            next(stream)
    assert caught.value.code == ErrorCode.ABORTED


def test_a_silent_body_times_out(server):
    server.enqueue(Reply(body=(sse_event(_text("thinking")), Stall())))
    with _adapter(server, stream_idle_timeout_ms=150) as adapter:
        error = _failure(adapter)
    assert error.code == ErrorCode.TIMEOUT
    assert error.message == "Gemini stream idle timeout after 150ms"


def test_eof_without_a_finish_reason_is_never_a_success(server):
    server.enqueue(Reply(body=(sse_event(_text("half an answer")),)))
    with _adapter(server) as adapter:
        chunks = consumed(adapter.stream(_options()))
    finish = chunks[-1]
    assert isinstance(finish, Finish)
    assert finish.reason.failure is not None
    assert finish.reason.failure.code == ErrorCode.STREAM_CLOSED


# --- images the model returns ---------------------------------------------------------


def _returned_image(name: str) -> tuple[dict[str, Any], bytes]:
    """The final image's ``inlineData`` in a recorded body, and its bytes."""
    for line in (FIXTURES / f"{name}.sse").read_text().splitlines():
        if not line.startswith("data: "):
            continue
        for part in json.loads(line[6:])["candidates"][0]["content"]["parts"]:
            if "inlineData" in part and not part.get("thought"):
                inline = part["inlineData"]
                return inline, base64.b64decode(inline["data"])
    raise AssertionError(name)


def test_a_returned_image_is_a_block_whose_bytes_the_store_holds(server):
    _, data = _returned_image("image_returned")
    server.enqueue(Reply(body=(FIXTURES / "image_returned.sse").read_bytes()))
    with _adapter(server) as adapter:
        adapter.attachments = store = MemoryAttachmentStore()
        reply = collect(validate_stream(adapter.stream(_options()), strict=True))
    (image,) = [b for b in reply.message.content if isinstance(b, ImageBlock)]
    assert store.get(image.attachment.attachment_id) == data
    assert image.attachment == image_block(data).attachment


def test_without_a_store_that_keeps_bytes_the_block_comes_all_the_same(server):
    # A reader without put (or no store) keeps nothing: the block still comes,
    # the bytes stay in the reply's replay state.
    inline, data = _returned_image("image_returned")
    server.enqueue(Reply(body=(FIXTURES / "image_returned.sse").read_bytes()))
    reader = MemoryAttachmentStore()
    with _adapter(server) as adapter:
        adapter.attachments = types.SimpleNamespace(get=reader.get)
        reply = collect(adapter.stream(_options()))
    (image,) = [b for b in reply.message.content if isinstance(b, ImageBlock)]
    assert image.attachment.attachment_id == attachment_id(data)
    assert len(reader) == 0
    source = reply.message.source
    assert isinstance(source, ModelSource)
    assert source.replay_state is not None
    assert source.replay_state.blocks[1] == {"inlineData": inline}  # type: ignore[index]


def test_a_returned_image_goes_back_as_the_part_it_came_in(server):
    inline, _ = _returned_image("image_thought_draft_then_final_signed")
    body = (FIXTURES / "image_thought_draft_then_final_signed.sse").read_bytes()
    server.enqueue(Reply(body=body))
    server.enqueue(Reply(body=(sse_event(_text("Done.")), sse_event(STOP))))
    first = create_user_message("A small red banner, please.")
    with _adapter(server) as adapter:
        reply = collect(adapter.stream(_options(messages=(first,))))
        again = create_user_message("Make it blue.")
        chunks = consumed(
            adapter.stream(_options(messages=(first, reply.message, again)))
        )
    assert chunks[-1].reason.kind == "stop"  # type: ignore[union-attr]
    model_turn = server.requests[1].json()["contents"][1]
    assert model_turn["role"] == "model"
    parts = model_turn["parts"]
    # The unsigned summary stays home; the draft kept after it goes back, then
    # the final image with its signature.
    assert [sorted(part) for part in parts] == [
        ["inlineData", "thought"],
        ["inlineData", "thoughtSignature"],
    ]
    assert parts[0]["inlineData"]["data"] != inline["data"]
    assert parts[1]["inlineData"] == inline
    assert parts[1]["thoughtSignature"].startswith("CvQBAY89")
