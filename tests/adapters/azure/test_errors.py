"""Azure OpenAI's HTTP errors (fixtures written from Azure's documentation)
through the adapter on both wires: the stable code (a content-filtered prompt
is ``CONTENT_FILTER``, never retryable), the ``retry-after-ms`` /
``retry-after`` delay, the request id (``apim-request-id`` too), and no key in
any message."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dsh_llm.adapters.azure import PROVIDER_ROUTE
from dsh_llm.adapters.azure import AzureOpenAIAdapter
from dsh_llm.adapters.azure.errors import http_error
from dsh_llm.errors import LlmError
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import create_user_message
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply
from dsh_llm.validator import validate_stream

from .replay import error_case
from .replay import error_names

KEY = "azure-key-0123456789abcdef0123"


def _error(server: LoopbackServer, wire: str, case: dict[str, Any]) -> LlmError:
    server.enqueue(
        Reply(
            status=case["status"],
            reason="Error",
            headers=case["headers"],
            body=json.dumps(case["body"]).encode(),
            framing="length",
        )
    )
    options = GenerateOptions(
        provider=PROVIDER_ROUTE, model="dep", messages=(create_user_message("hi"),)
    )
    with (
        AzureOpenAIAdapter(KEY, base_url=server.url, wire=wire, environ={}) as adapter,
        pytest.raises(LlmError) as caught,
    ):
        list(validate_stream(adapter.stream(options), strict=True))
    return caught.value


@pytest.mark.parametrize("wire", ["chat", "responses"])
@pytest.mark.parametrize("name", error_names())
def test_each_error_answer_gets_its_code(
    server: LoopbackServer, name: str, wire: str
) -> None:
    case = error_case(name)
    error = _error(server, wire, case)
    assert error.code == case["code"]
    assert error.status == case["status"]
    assert error.request_id == case.get("requestId")
    assert error.provider_retry_after_ms == case.get("retryAfterMs")
    assert error.message == case["body"]["error"]["message"]
    assert KEY not in str(error)


def test_a_filtered_prompt_is_not_retryable(server: LoopbackServer) -> None:
    error = _error(server, "chat", error_case("http_content_filter_prompt"))
    assert error.code == "CONTENT_FILTER"
    assert error.retryable is False


def test_a_key_the_server_echoes_is_redacted(server: LoopbackServer) -> None:
    case = {
        "status": 401,
        "headers": {"content-type": "application/json", "x-request-id": KEY},
        "body": {"error": {"code": "401", "message": f"bad key {KEY} for resource"}},
    }
    error = _error(server, "chat", case)
    assert error.code == "AUTH"
    assert KEY not in error.message
    assert KEY not in (error.request_id or "")
    assert KEY not in repr(error.__cause__)
    assert "***" in error.message


def test_an_answer_that_is_not_json_keeps_the_shared_rules() -> None:
    error = http_error(503, {"retry-after": "3"}, b"<html>Service Unavailable</html>")
    assert error.code == "SERVER"
    assert error.provider_retry_after_ms == 3000
    assert error.message == "Azure OpenAI API error (HTTP 503)"


def test_an_auth_or_rate_limit_answer_keeps_its_code_whatever_it_names() -> None:
    body = json.dumps({"error": {"code": "content_filter", "message": "x"}}).encode()
    assert http_error(429, {}, body).code == "RATE_LIMIT"
    assert http_error(401, {}, body).code == "AUTH"
    assert http_error(400, {}, body).code == "CONTENT_FILTER"
