"""Anthropic error reports to stable codes (dsh_llm.adapters.anthropic.errors):
HTTP error bodies as the API sends them, and ``event: error`` frames."""

from __future__ import annotations

import json

import pytest

from dsh_llm.adapters.anthropic.errors import error_code
from dsh_llm.adapters.anthropic.errors import http_error
from dsh_llm.adapters.anthropic.errors import stream_failure
from dsh_llm.errors import ErrorCode


def anthropic_body(kind: str, message: str, request_id: str | None = None) -> bytes:
    body: dict[str, object] = {
        "type": "error",
        "error": {"type": kind, "message": message},
    }
    if request_id is not None:
        body["request_id"] = request_id
    return json.dumps(body).encode()


@pytest.mark.parametrize(
    ("status", "kind", "message", "code"),
    [
        (400, "invalid_request_error", "max_tokens: Field required", "INVALID_REQUEST"),
        (
            400,
            "invalid_request_error",
            "prompt is too long: 201234 tokens > 200000 maximum",
            "CONTEXT_WINDOW_EXCEEDED",
        ),
        (401, "authentication_error", "invalid x-api-key", "AUTH"),
        (402, "billing_error", "Your credit balance is too low", "QUOTA"),
        (403, "permission_error", "Your API key does not have permission", "AUTH"),
        (404, "not_found_error", "model: claude-nope", "INVALID_REQUEST"),
        (
            413,
            "request_too_large",
            "Request exceeds the maximum size",
            "INVALID_REQUEST",
        ),
        (
            429,
            "rate_limit_error",
            "Number of request tokens has exceeded",
            "RATE_LIMIT",
        ),
        (500, "api_error", "Internal server error", "SERVER"),
        (504, "timeout_error", "Request timed out", "SERVER"),
        (529, "overloaded_error", "Overloaded", "SERVER"),
    ],
)
def test_http_errors_map_to_stable_codes_keeping_message_and_request_id(
    status: int, kind: str, message: str, code: str
) -> None:
    error = http_error(
        status,
        {
            "request-id": "req_011CSHoEeqs5C35K2UUqR7Fy",
            "content-type": "application/json",
        },
        anthropic_body(kind, message, "req_body"),
    )
    assert error.code == code
    assert error.message == message
    assert error.status == status
    assert error.request_id == "req_011CSHoEeqs5C35K2UUqR7Fy"


def test_a_429_keeps_retry_after_and_the_body_request_id_without_the_header() -> None:
    error = http_error(
        429,
        {"retry-after": "7"},
        anthropic_body("rate_limit_error", "slow down", "req_from_body"),
    )
    assert error.code == ErrorCode.RATE_LIMIT
    assert error.provider_retry_after_ms == 7000
    assert error.request_id == "req_from_body"


def test_a_529_without_a_json_body_is_still_server() -> None:
    error = http_error(529, {}, b"<html>overloaded</html>")
    assert error.code == ErrorCode.SERVER
    assert error.message == "Anthropic API error (HTTP 529)"


def test_a_404_without_an_anthropic_body_keeps_its_status_code() -> None:
    assert http_error(404, {}, b"").code == "HTTP_404"


def test_redact_reaches_the_message_and_the_cause() -> None:
    error = http_error(
        401,
        {},
        anthropic_body("authentication_error", "bad key sk-ant-secret"),
        redact=lambda text: text.replace("sk-ant-secret", "***"),
    )
    assert "sk-ant-secret" not in error.message
    assert "sk-ant-secret" not in str(error.__cause__)


@pytest.mark.parametrize(
    ("kind", "code"),
    [
        ("overloaded_error", "SERVER"),
        ("api_error", "SERVER"),
        ("rate_limit_error", "RATE_LIMIT"),
        ("invalid_request_error", "INVALID_REQUEST"),
        ("billing_error", "QUOTA"),
        ("some_new_error", "SERVER"),
    ],
)
def test_stream_error_frames_are_classified_by_type(kind: str, code: str) -> None:
    failure = stream_failure({"type": "error", "error": {"type": kind, "message": "m"}})
    assert (failure.code, failure.message, failure.status) == (code, "m", None)


def test_a_stream_error_without_a_message_names_its_type() -> None:
    failure = stream_failure({"type": "error", "error": {"type": "overloaded_error"}})
    assert failure.message == "Anthropic stream reported an overloaded_error"
    assert stream_failure({"type": "error"}).message == (
        "Anthropic stream reported an error"
    )


def test_a_flat_openai_style_stream_error_keeps_its_message_and_status() -> None:
    # llama-server's /v1/messages sends this under event: error.
    failure = stream_failure(
        {"code": 503, "message": "loading model", "type": "unavailable_error"}
    )
    assert (failure.code, failure.message, failure.status) == (
        "SERVER",
        "loading model",
        503,
    )
    failure = stream_failure({"code": 429, "message": "busy", "type": "x"})
    assert (failure.code, failure.status) == ("RATE_LIMIT", 429)


def test_the_type_table_wins_over_the_status() -> None:
    assert error_code(400, "rate_limit_error", "") == ErrorCode.RATE_LIMIT
    assert error_code(None, "", "") == ErrorCode.SERVER
