"""The conformance kit (``dsh_llm.testing.assert_adapter_conforms``) run on
``VertexAdapter`` for both publishers, with cassettes of the Gemini (Vertex
shaped) and Anthropic fixtures: re-split and re-framed bodies give the same
chunks, every cut fails with one code whatever the framing, a stall times out,
an abort aborts, HTTP errors map. The recorded request's ``model`` picks the
publisher.

Where Vertex puts ``finishReason: "STOP"`` on every chunk (``EVERY_CHUNK``), a
close-delimited body cut between two chunks cannot be told from a whole one
(the Gemini wire has no end marker: the body's end ends it), so those cases
skip the ``truncation`` group; the framings Vertex uses (chunked, or a length)
do show the cut, which ``test_a_cut_chunked_body_is_stream_closed`` checks."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from dsh_llm.adapters.vertex import VertexAdapter
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import create_user_message
from dsh_llm.testing import Cut
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply
from dsh_llm.testing import assert_adapter_conforms
from dsh_llm.testing.cassette import BodyRead
from dsh_llm.testing.cassette import Cassette
from dsh_llm.testing.cassette import CassetteRequest
from dsh_llm.testing.cassette import CassetteResponse
from dsh_llm.testing.conformance import GROUPS

FIXTURES = Path(__file__).parents[2] / "fixtures"
TOKEN = "ya29.conformance-0123456789"
CASES = (
    ("gemini", "vertex_stop_on_every_chunk", "gemini-2.5-flash"),
    ("gemini", "vertex_streamed_function_call_args", "gemini-2.5-flash"),
    ("gemini", "function_call_signed", "gemini-3-flash-preview"),
    ("gemini", "usage_running_totals_cached", "gemini-3-flash-preview"),
    ("anthropic", "thinking_signature_text", "claude-haiku-4-5@20251001"),
    ("anthropic", "tool_use_input_deltas", "claude-haiku-4-5@20251001"),
    ("anthropic", "pings_everywhere", "claude-sonnet-5"),
    ("anthropic", "max_tokens_cut_block", "claude-sonnet-5"),
)


EVERY_CHUNK = ("vertex_stop_on_every_chunk", "vertex_streamed_function_call_args")


def _factory(base_url: str, **options: Any) -> VertexAdapter:
    return VertexAdapter(
        TOKEN,
        base_url=base_url,
        project="p",
        location="us-east5",
        environ={},
        **options,
    )


def _cassette(family: str, name: str, model: str) -> Cassette:
    body = (FIXTURES / family / f"{name}.sse").read_bytes()
    # Reads of about one event's size, as a socket would give them.
    reads = tuple(
        BodyRead(at_ms=float(i), data=body[at : at + 61])
        for i, at in enumerate(range(0, len(body), 61))
    )
    return Cassette(
        request=CassetteRequest(
            method="POST",
            url="https://us-east5-aiplatform.googleapis.com/v1/projects/p/locations/"
            f"us-east5/publishers/x/models/{model}:stream",
            headers=(("content-type", "application/json"),),
            body=f'{{"model": "{model}"}}'.encode(),
        ),
        response=CassetteResponse(
            status=200,
            headers=(("content-type", "text/event-stream"),),
            reads=reads,
        ),
        adapter="dsh_llm.adapters.vertex:VertexAdapter",
    )


@pytest.mark.parametrize(("family", "name", "model"), CASES, ids=[c[1] for c in CASES])
def test_vertex_adapter_conforms(family: str, name: str, model: str) -> None:
    groups = [g for g in GROUPS if name not in EVERY_CHUNK or g != "truncation"]
    report = assert_adapter_conforms(
        _factory, _cassette(family, name, model), groups=groups
    )
    assert "stall after half the events" in report.variants
    assert "abort while waiting" in report.variants
    assert "http 429 with Retry-After" in report.variants
    cuts = [variant for variant in report.variants if variant.startswith("cut ")]
    assert bool(cuts) == (name not in EVERY_CHUNK)


@pytest.mark.parametrize("name", EVERY_CHUNK)
def test_a_cut_chunked_body_is_stream_closed(server: LoopbackServer, name: str) -> None:
    body = (FIXTURES / "gemini" / f"{name}.sse").read_bytes()
    end = re.search(rb"\r?\n\r?\n", body)
    assert end is not None
    first = end.end()  # after the first event, STOP and all
    server.enqueue(Reply(body=(body[:first], Cut()), framing="chunked"))
    options = GenerateOptions(
        provider="vertex",
        model="gemini-2.5-flash",
        messages=(create_user_message("x"),),
    )
    with _factory(server.url) as adapter, pytest.raises(LlmError) as caught:
        list(adapter.stream(options))
    assert caught.value.code == ErrorCode.STREAM_CLOSED
