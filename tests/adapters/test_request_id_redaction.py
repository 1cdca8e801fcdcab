"""A key a server echoes in a request id never leaves the transport (issue 26.18):
every field of a failure goes through the one redactor."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from dsh_llm import LlmRuntime
from dsh_llm.adapters.anthropic import AnthropicAdapter
from dsh_llm.adapters.gemini import GeminiAdapter
from dsh_llm.adapters.ollama import OllamaAdapter
from dsh_llm.errors import LlmError
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import GenerateOptions
from dsh_llm.serde import chunk_to_dict
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply
from dsh_llm.testing import sse_event

KEY = "sk-echoed-secret-0123456789abcdef"

ADAPTERS: dict[str, Callable[[str], Any]] = {
    "anthropic": lambda url: AnthropicAdapter(api_key=KEY, base_url=url),
    "gemini": lambda url: GeminiAdapter(api_key=KEY, base_url=url),
    "ollama": lambda url: OllamaAdapter(url, api_key=KEY),
}


def _options(route: str) -> GenerateOptions:
    return GenerateOptions.from_prompt("m", "hi", provider=route)


def _failed(error: LlmError) -> FinishReason:
    return FinishReason.error(error.failure)


def _raised(adapter: Any, route: str) -> LlmError:
    with adapter, pytest.raises(LlmError) as caught:
        list(adapter.stream(_options(route)))
    return caught.value


@pytest.mark.parametrize("route", sorted(ADAPTERS))
@pytest.mark.parametrize("header", ["x-request-id", "request-id"])
def test_an_http_error_s_request_id_header_is_redacted(
    server: LoopbackServer, route: str, header: str
) -> None:
    body = json.dumps({"error": {"message": "boom", "type": "api_error"}}).encode()
    server.enqueue(
        Reply(
            status=500,
            headers={header: f"req-{KEY}", "Content-Type": "application/json"},
            body=body,
            framing="length",
        )
    )
    error = _raised(ADAPTERS[route](server.url), route)
    assert error.request_id is not None
    assert KEY not in error.request_id
    assert KEY not in repr(error)
    assert KEY not in json.dumps(chunk_to_dict(Finish(reason=_failed(error))))


def test_anthropic_request_ids_in_a_body_and_an_error_frame_are_redacted(
    server: LoopbackServer,
) -> None:
    body = json.dumps(
        {
            "type": "error",
            "error": {"type": "api_error", "message": "x"},
            "request_id": f"req_{KEY}",
        }
    ).encode()
    server.enqueue(
        Reply(
            status=500,
            headers={"Content-Type": "application/json"},
            body=body,
            framing="length",
        )
    )
    assert KEY not in (
        _raised(ADAPTERS["anthropic"](server.url), "anthropic").request_id or ""
    )

    frame = {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "busy"},
        "request_id": f"req_{KEY}",
    }
    server.enqueue(Reply(body=sse_event(frame)))
    runtime = LlmRuntime()
    with ADAPTERS["anthropic"](server.url) as adapter:
        runtime.register_adapter(["anthropic"], adapter)
        chunks = list(runtime.stream(_options("anthropic")))
    finish = chunks[-1]
    assert isinstance(finish, Finish)
    assert finish.reason.failure is not None
    assert finish.reason.failure.request_id is not None
    assert KEY not in json.dumps(chunk_to_dict(finish))
    assert "***" in finish.reason.failure.request_id
