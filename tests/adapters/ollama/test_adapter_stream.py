"""OllamaAdapter end to end against the loopback server: every recorded NDJSON
body under every framing and split (inside a line and inside a UTF-8
character), the request, HTTP errors, an error line after output, an echoed key
redacted, abort, idle timeout, and ``list_models`` reading ``/api/tags`` only
when asked, whole within its deadline and size cap. Every stream is checked
with ``validate_stream(strict=True)``."""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from dsh_llm.adapters import CatalogModel
from dsh_llm.adapters.ollama import PROVIDER_ROUTE
from dsh_llm.adapters.ollama import OllamaAdapter
from dsh_llm.adapters.ollama import OllamaConfig
from dsh_llm.adapters.ollama.family import LIST_MODELS_TIMEOUT_MS
from dsh_llm.adapters.ollama.family import listing_timeout_ms
from dsh_llm.adapters.ollama.request import build_chat_request
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import Finish
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import TextDelta
from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol import create_user_message
from dsh_llm.serde import chunk_to_dict
from dsh_llm.serde import read_jsonl
from dsh_llm.signal import AbortController
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply
from dsh_llm.testing import Stall
from dsh_llm.transport.attribution import user_agent
from dsh_llm.transport.fetch import MAX_BODY_BYTES
from dsh_llm.validator import validate_stream

from ..adapter_replay import FRAMINGS
from ..adapter_replay import SPLIT_IDS
from ..adapter_replay import SPLITS
from ..adapter_replay import as_dicts
from ..adapter_replay import consumed
from .test_errors import RECORDED

FIXTURES = Path(__file__).parents[2] / "fixtures" / "ollama"
NAMES = sorted(p.stem for p in FIXTURES.glob("*.ndjson"))
MODEL = "qwen3:8b"
KEY = "ollama-cloud-key-0123456789abcdef"
_SYNTHESIZED = re.compile(r"call_[0-9a-f]{24}")


def _adapter(server: LoopbackServer, **options: Any) -> OllamaAdapter:
    return OllamaAdapter(server.url, **options)


def _options(**fields: Any) -> GenerateOptions:
    fields.setdefault("messages", (create_user_message("hi"),))
    fields.setdefault("model", MODEL)
    return GenerateOptions(provider=PROVIDER_ROUTE, **fields)


def _failure(adapter: OllamaAdapter, **fields: Any) -> LlmError:
    with pytest.raises(LlmError) as caught:
        list(adapter.stream(_options(**fields)))
    return caught.value


def _lines(*values: Any) -> bytes:
    return b"".join(json.dumps(v, ensure_ascii=False).encode() + b"\n" for v in values)


def _content(text: str) -> dict[str, Any]:
    return {"model": MODEL, "message": {"role": "assistant", "content": text}}


DONE = {
    "model": MODEL,
    "message": {"role": "assistant", "content": ""},
    "done": True,
    "done_reason": "stop",
    "prompt_eval_count": 4,
    "eval_count": 2,
}


def _named_like_the_fixtures(chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Synthesized call ids (random) renamed ``call_synth_<ordinal>``, as the
    translator tests make them."""
    names: dict[str, str] = {}
    calls = 0
    for chunk in chunks:
        if chunk["type"] == "block-start" and chunk["blockType"] == "tool-call":
            calls += 1
        for holder in (chunk, chunk.get("block") or {}):
            wire = holder.get("id")
            if isinstance(wire, str) and _SYNTHESIZED.fullmatch(wire):
                holder["id"] = names.setdefault(wire, f"call_synth_{calls - 1}")
    return chunks


# --- recorded streams -----------------------------------------------------------------


@pytest.mark.parametrize("framing", FRAMINGS)
@pytest.mark.parametrize("split", SPLITS, ids=SPLIT_IDS)
@pytest.mark.parametrize("name", NAMES)
def test_recorded_stream_through_the_adapter(server, name, split, framing):
    body = (FIXTURES / f"{name}.ndjson").read_bytes()
    expected = [
        chunk_to_dict(c) for c in read_jsonl(str(FIXTURES / f"{name}.chunks.jsonl"))
    ]
    server.enqueue(Reply(body=body, framing=framing, split=split))
    with _adapter(server) as adapter:
        got = _named_like_the_fixtures(as_dicts(consumed(adapter.stream(_options()))))
    assert got == expected


@pytest.mark.parametrize("framing", FRAMINGS)
def test_a_split_inside_a_utf8_character_is_joined(server, framing):
    body = _lines(_content("Zürich "), _content("具👍"), DONE)
    for cut in range(1, 4):
        # Cut every multi-byte character somewhere inside it.
        server.enqueue(Reply(body=body, framing=framing, split=cut))
    with _adapter(server) as adapter:
        for _ in range(1, 4):
            chunks = consumed(adapter.stream(_options()))
            text = "".join(c.text for c in chunks if isinstance(c, TextDelta))
            assert text == "Zürich 具👍"


# --- the request ----------------------------------------------------------------------


def test_the_request_is_the_built_body_with_keep_alive_and_no_key(server):
    server.enqueue(Reply(body=_lines(_content("hello"), DONE)))
    options = _options(max_tokens=9, temperature=0.2, reasoning_effort="low")
    with _adapter(server, keep_alive="10m") as adapter:
        chunks = list(validate_stream(adapter.stream(options), strict=True))
    assert chunks[-1].reason.kind == "stop"  # type: ignore[union-attr]
    (request,) = server.requests
    assert (request.method, request.path) == ("POST", "/api/chat")
    assert request.json() == build_chat_request(options, keep_alive="10m")
    assert request.json()["keep_alive"] == "10m"
    assert request.json()["think"] == "low"
    assert request.header("authorization") is None
    assert request.header("accept") == "application/x-ndjson"
    assert request.header("user-agent") == user_agent()


def test_a_hosted_key_travels_as_bearer_and_an_echo_is_redacted(server):
    server.enqueue(Reply(status=401, body=json.dumps({"error": f"bad {KEY}"}).encode()))
    server.enqueue(Reply(body=_lines(_content("a"), {"error": f"rejected {KEY}"})))
    with _adapter(
        server, api_key_env="OLLAMA_API_KEY", environ={"OLLAMA_API_KEY": KEY}
    ) as adapter:
        assert KEY not in repr(adapter)
        error = _failure(adapter)
        assert (error.code, error.message) == (ErrorCode.AUTH, "bad ***")
        assert KEY not in str(error.__cause__)
        chunks = consumed(adapter.stream(_options()))
    failure = chunks[-1].reason.failure  # type: ignore[union-attr]
    assert failure is not None
    assert (failure.code, failure.message) == (ErrorCode.SERVER, "rejected ***")
    assert server.requests[0].header("authorization") == f"Bearer {KEY}"


def test_refusals_come_before_any_request(server):
    with _adapter(server) as adapter:
        error = _failure(adapter, reasoning_effort="extreme")
        assert error.code == ErrorCode.UNSUPPORTED_REASONING_EFFORT
    assert server.requests == ()


# --- errors ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_recorded_http_errors_get_stable_codes_and_keep_the_request_id(server, name):
    status = int(name.split("_")[1])
    body = (FIXTURES / f"{name}.json").read_bytes()
    server.enqueue(
        Reply(
            status=status,
            headers={"content-type": "application/json", "x-request-id": "req-9"},
            body=body,
        )
    )
    with _adapter(server) as adapter:
        error = _failure(adapter)
    assert error.code == RECORDED[name]
    assert (error.status, error.request_id) == (status, "req-9")
    assert error.message == json.loads(body)["error"]


def test_a_body_cut_before_done_is_stream_closed(server):
    server.enqueue(Reply(body=_lines(_content("half"))))
    with _adapter(server) as adapter:
        chunks = consumed(adapter.stream(_options()))
    finish = chunks[-1]
    assert isinstance(finish, Finish)
    assert finish.reason.failure is not None
    assert finish.reason.failure.code == ErrorCode.STREAM_CLOSED


def _raised(stream: Any) -> tuple[list[Any], LlmError]:
    """What ``stream`` yielded before it raised, and what it raised."""
    chunks: list[Any] = []
    with pytest.raises(LlmError) as caught:
        chunks.extend(stream)
    return chunks, caught.value


def test_failures_in_the_body_are_raised_after_the_usage_reported(server):
    server.enqueue(Reply(body=_lines(_content("half"), {"error": "runner crashed"})))
    server.enqueue(Reply(body=_lines(_content("half"), {**DONE, "done_reason": None})))
    with _adapter(server) as adapter:
        chunks, error = _raised(adapter.stream(_options()))
        # An error line: the block stays open, no usage (Ollama reports it on
        # its done line only), and no finish is yielded.
        assert [c.type for c in chunks] == ["block-start", "text-delta"]
        assert (error.code, error.message) == (ErrorCode.SERVER, "runner crashed")
        chunks, error = _raised(adapter.stream(_options()))
    # A done line without a reason: the usage it reported, then the raise.
    assert [c.type for c in chunks] == ["block-start", "text-delta", "usage"]
    assert chunks[-1].usage == TokenUsage(input_tokens=4, output_tokens=2)
    assert error.code == ErrorCode.STREAM_CLOSED


def test_abort_mid_stream_ends_with_aborted(server):
    server.enqueue(Reply(body=(_lines(_content("partial")), Stall())))
    controller = AbortController()
    with _adapter(server) as adapter:
        stream = adapter.stream(_options(signal=controller.signal))
        assert isinstance([next(stream), next(stream)][1], TextDelta)
        threading.Timer(0.05, controller.abort).start()
        started = time.monotonic()
        with pytest.raises(LlmError) as caught:
            list(stream)
    assert caught.value.code == ErrorCode.ABORTED
    assert time.monotonic() - started < 5


def test_a_silent_body_times_out(server):
    server.enqueue(Reply(body=(_lines(_content("loading")), Stall())))
    with _adapter(server, stream_idle_timeout_ms=150) as adapter:
        error = _failure(adapter)
    assert error.code == ErrorCode.TIMEOUT
    assert error.message == "Ollama stream idle timeout after 150ms"


# --- list_models ----------------------------------------------------------------------

TAGS = {
    "models": [
        {"name": "qwen3:8b", "model": "qwen3:8b", "size": 5_200_000_000},
        {"name": "llama3.2:latest", "model": "llama3.2:latest"},
    ]
}


def _tags(value: Any) -> Reply:
    return Reply(
        headers={"content-type": "application/json"}, body=json.dumps(value).encode()
    )


def test_construction_does_no_io_and_list_models_reads_api_tags(server):
    adapter = _adapter(server)
    with adapter:
        assert server.requests == ()
        adapter.resolve_model(PROVIDER_ROUTE, MODEL)
        assert server.requests == ()
        server.enqueue(
            Reply(
                headers={"content-type": "application/json"},
                body=json.dumps(TAGS).encode(),
            )
        )
        models = adapter.list_models(PROVIDER_ROUTE)
    assert [m.id for m in models] == ["qwen3:8b", "llama3.2:latest"]
    # Text only: images go only to models the catalog lists with image input.
    assert {m.input_modalities for m in models} == {("text",)}
    (request,) = server.requests
    assert (request.method, request.path) == ("GET", "/api/tags")


def test_a_configured_catalog_is_listed_without_io(server):
    with _adapter(server, models=[CatalogModel(id="mine", name="Mine")]) as adapter:
        (model,) = adapter.list_models(PROVIDER_ROUTE)
    assert (model.id, model.name) == ("mine", "Mine")
    assert server.requests == ()


def test_list_models_failures_are_llm_errors(server):
    server.enqueue(Reply(status=500, body=b'{"error":"boom"}'))
    server.enqueue(Reply(headers={"content-type": "application/json"}, body=b"[]"))
    with _adapter(server) as adapter:
        with pytest.raises(LlmError) as caught:
            adapter.list_models(PROVIDER_ROUTE)
        assert (caught.value.code, caught.value.message) == (ErrorCode.SERVER, "boom")
        with pytest.raises(LlmError) as caught:
            adapter.list_models(PROVIDER_ROUTE)
        assert caught.value.code == ErrorCode.MALFORMED_RESPONSE
    closed = OllamaAdapter("http://127.0.0.1:9")
    with closed, pytest.raises(LlmError) as caught:
        closed.list_models(PROVIDER_ROUTE)
    assert caught.value.code == ErrorCode.TRANSPORT
    assert caught.value.message.startswith(
        "Ollama API request to http://127.0.0.1:9 failed"
    )


def test_the_listing_deadline_is_the_smallest_of_its_bounds():
    assert listing_timeout_ms(OllamaConfig()) == LIST_MODELS_TIMEOUT_MS == 30_000
    assert listing_timeout_ms(OllamaConfig(stream_idle_timeout_ms=5_000)) == 5_000
    assert listing_timeout_ms(OllamaConfig(total_timeout_ms=2_000)) == 2_000
    assert listing_timeout_ms(OllamaConfig(total_timeout_ms=90_000)) == 30_000


def test_a_listing_dripping_a_byte_every_50ms_ends_at_the_total_deadline(server):
    # 400 bytes at one every 50 ms: 20 s, each read well inside the idle bound.
    server.enqueue(
        Reply(
            headers={"content-type": "application/json"},
            body=b" " * 400,
            split=1,
            write_delay=0.05,
            framing="length",
        )
    )
    with _adapter(server, total_timeout_ms=1000) as adapter:
        started = time.monotonic()
        with pytest.raises(LlmError) as caught:
            adapter.list_models(PROVIDER_ROUTE)
        elapsed = time.monotonic() - started
    assert caught.value.code == ErrorCode.TIMEOUT
    assert caught.value.message == (
        f"Ollama API request to {server.url} timed out after 1000ms"
    )
    assert 1.0 <= elapsed < 4.0


def test_a_listing_over_the_size_cap_is_malformed(server):
    piece = b" " * 65536
    server.enqueue(
        Reply(
            headers={"content-type": "application/json"},
            body=(b'{"models": [', *(piece,) * (MAX_BODY_BYTES // len(piece) + 16)),
        )
    )
    with _adapter(server) as adapter, pytest.raises(LlmError) as caught:
        adapter.list_models(PROVIDER_ROUTE)
    assert caught.value.code == ErrorCode.MALFORMED_RESPONSE
    assert caught.value.message == (
        f"Ollama API answer from {server.url} is larger than the "
        f"{MAX_BODY_BYTES}-byte cap"
    )


def test_the_listing_sends_the_key_and_redacts_an_echo(server):
    server.enqueue(Reply(status=401, body=json.dumps({"error": f"bad {KEY}"}).encode()))
    server.enqueue(_tags(TAGS))
    with _adapter(server, api_key=KEY) as adapter:
        with pytest.raises(LlmError) as caught:
            adapter.list_models(PROVIDER_ROUTE)
        assert (caught.value.code, caught.value.message) == (ErrorCode.AUTH, "bad ***")
        assert len(adapter.list_models(PROVIDER_ROUTE)) == 2
    first, second = server.requests
    assert first.header("authorization") == second.header("authorization")
    assert first.header("authorization") == f"Bearer {KEY}"
    assert first.header("user-agent") == user_agent()
    assert first.header("accept") == "application/json"


def test_a_listing_key_variable_that_is_unset_is_a_missing_credential(server):
    with (
        _adapter(server, api_key_env="OLLAMA_API_KEY", environ={}) as adapter,
        pytest.raises(LlmError) as caught,
    ):
        adapter.list_models(PROVIDER_ROUTE)
    assert caught.value.code == ErrorCode.MISSING_CREDENTIAL
    assert "OLLAMA_API_KEY" in caught.value.message
    assert server.requests == ()


def test_a_listing_honours_the_caller_s_abort(server):
    server.enqueue(
        Reply(
            headers={"content-type": "application/json"},
            body=b" " * 400,
            split=1,
            write_delay=0.05,
            framing="length",
        )
    )
    controller = AbortController()

    def abort_once_asked() -> None:
        if server.wait_for_requests(1, timeout=30):
            controller.abort()

    aborter = threading.Thread(target=abort_once_asked, daemon=True)
    aborter.start()
    with _adapter(server) as adapter, pytest.raises(LlmError) as caught:
        adapter.list_models(PROVIDER_ROUTE, signal=controller.signal)
    aborter.join(30)
    assert caught.value.code == ErrorCode.ABORTED
