"""Gemini error classification (dsh_llm.adapters.gemini.errors): Google RPC
error bodies as the API sends them, to stable codes and retry delays."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dsh_llm.adapters.gemini.errors import gemini_error_code
from dsh_llm.adapters.gemini.errors import gemini_http_error
from dsh_llm.adapters.gemini.errors import gemini_stream_failure
from dsh_llm.adapters.gemini.errors import parse_gemini_error
from dsh_llm.adapters.gemini.errors import retry_delay_ms
from dsh_llm.errors import ErrorCode

RETRY = "type.googleapis.com/google.rpc.RetryInfo"
QUOTA_FAILURE = "type.googleapis.com/google.rpc.QuotaFailure"
ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
HELP = "type.googleapis.com/google.rpc.Help"
FREE_TIER = "generativelanguage.googleapis.com/generate_content_free_tier_requests"


def body(code: int, status: str, message: str, *details: dict[str, Any]) -> bytes:
    error: dict[str, Any] = {"code": code, "message": message, "status": status}
    if details:
        error["details"] = list(details)
    return json.dumps({"error": error}, indent=2).encode()


PER_MINUTE = {
    "@type": QUOTA_FAILURE,
    "violations": [
        {
            "quotaMetric": FREE_TIER,
            "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
            "quotaDimensions": {"location": "global", "model": "gemini-2.5-flash"},
            "quotaValue": "10",
        }
    ],
}
PER_DAY = {
    "@type": QUOTA_FAILURE,
    "violations": [
        {
            "quotaMetric": FREE_TIER,
            "quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
            "quotaValue": "250",
        }
    ],
}
QUOTA_TEXT = (
    "You exceeded your current quota, please check your plan and billing details. "
    "For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits."
)


@pytest.mark.parametrize(
    ("status", "payload", "code"),
    [
        (
            400,
            body(
                400,
                "INVALID_ARGUMENT",
                "Function call is missing a thought_signature in functionCall parts.",
            ),
            ErrorCode.INVALID_REQUEST,
        ),
        (
            400,
            body(
                400,
                "INVALID_ARGUMENT",
                "The input token count (1200000) exceeds the maximum number of tokens "
                "allowed (1048576).",
            ),
            ErrorCode.CONTEXT_WINDOW_EXCEEDED,
        ),
        (
            400,
            body(
                400,
                "INVALID_ARGUMENT",
                "API key not valid. Please pass a valid API key.",
                {
                    "@type": ERROR_INFO,
                    "reason": "API_KEY_INVALID",
                    "domain": "googleapis.com",
                },
                {
                    "@type": "type.googleapis.com/google.rpc.LocalizedMessage",
                    "locale": "en-US",
                },
            ),
            ErrorCode.AUTH,
        ),
        (
            400,
            body(
                400,
                "FAILED_PRECONDITION",
                "User location is not supported for the API use.",
            ),
            ErrorCode.INVALID_REQUEST,
        ),
        (
            401,
            body(
                401,
                "UNAUTHENTICATED",
                "Request had invalid authentication credentials.",
            ),
            ErrorCode.AUTH,
        ),
        (
            403,
            body(403, "PERMISSION_DENIED", "The caller does not have permission"),
            ErrorCode.AUTH,
        ),
        (
            404,
            body(
                404,
                "NOT_FOUND",
                "models/gemini-9-ultra is not found for API version v1beta, or is not "
                "supported for generateContent.",
            ),
            ErrorCode.INVALID_REQUEST,
        ),
        (
            429,
            body(
                429,
                "RESOURCE_EXHAUSTED",
                QUOTA_TEXT,
                {"@type": HELP},
                PER_MINUTE,
                {"@type": RETRY, "retryDelay": "37s"},
            ),
            ErrorCode.RATE_LIMIT,
        ),
        (
            429,
            body(
                429,
                "RESOURCE_EXHAUSTED",
                QUOTA_TEXT,
                PER_DAY,
                {"@type": RETRY, "retryDelay": "3s"},
            ),
            ErrorCode.QUOTA,
        ),
        (429, body(429, "RESOURCE_EXHAUSTED", QUOTA_TEXT), ErrorCode.QUOTA),
        (
            429,
            body(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted."),
            ErrorCode.RATE_LIMIT,
        ),
        (
            500,
            body(500, "INTERNAL", "An internal error has occurred."),
            ErrorCode.SERVER,
        ),
        (
            503,
            body(
                503, "UNAVAILABLE", "The model is overloaded. Please try again later."
            ),
            ErrorCode.SERVER,
        ),
        (
            504,
            body(
                504,
                "DEADLINE_EXCEEDED",
                "Deadline expired before operation could complete.",
            ),
            ErrorCode.SERVER,
        ),
        (502, b"<html><body>Bad Gateway</body></html>", ErrorCode.SERVER),
        (418, b"", "HTTP_418"),
    ],
)
def test_http_errors_get_stable_codes(status, payload, code):
    error = gemini_http_error(status, {}, payload)
    assert error.code == code
    assert error.status == status


def test_the_message_is_gemini_s_and_the_retry_delay_is_surfaced():
    error = gemini_http_error(
        429,
        {"x-request-id": "req-1"},
        body(
            429,
            "RESOURCE_EXHAUSTED",
            QUOTA_TEXT,
            PER_MINUTE,
            {"@type": RETRY, "retryDelay": "37s"},
        ),
    )
    assert error.message == QUOTA_TEXT
    assert error.provider_retry_after_ms == 37000
    assert error.request_id == "req-1"


def test_a_retry_after_header_wins_over_retry_delay():
    error = gemini_http_error(
        429,
        {"Retry-After": "5"},
        body(
            429,
            "RESOURCE_EXHAUSTED",
            "slow down",
            {"@type": RETRY, "retryDelay": "37s"},
        ),
    )
    assert error.provider_retry_after_ms == 5000


def test_a_body_without_a_message_gets_the_default_one():
    assert gemini_http_error(500, {}, b"").message == "Gemini API error (HTTP 500)"
    assert gemini_http_error(500, {}, b"{}").message == "Gemini API error (HTTP 500)"
    assert str(gemini_http_error(500, {}, b"").__cause__) == "Gemini HTTP 500"


def test_a_vertex_array_body_is_read():
    payload = b"[" + body(503, "UNAVAILABLE", "overloaded") + b"]"
    error = gemini_http_error(503, {}, payload)
    assert (error.code, error.message) == (ErrorCode.SERVER, "overloaded")


def test_server_text_passes_through_redact():
    secret = "AIzaSyD-secret"
    error = gemini_http_error(
        400,
        {},
        body(400, "INVALID_ARGUMENT", f"API key {secret} not valid"),
        redact=lambda text: text.replace(secret, "***"),
    )
    assert secret not in error.message
    assert secret not in str(error.__cause__)


@pytest.mark.parametrize(
    ("delay", "ms"),
    [
        ("37s", 37000),
        ("0.5s", 500),
        ("1.250s", 1250),
        ("0s", None),
        ("soon", None),
        (37, None),
    ],
)
def test_retry_delay_ms(delay, ms):
    assert retry_delay_ms({"details": [{"@type": RETRY, "retryDelay": delay}]}) == ms


def test_retry_delay_ignores_other_details_and_bad_shapes():
    assert retry_delay_ms({}) is None
    assert retry_delay_ms({"details": "x"}) is None
    assert retry_delay_ms({"details": [1, {"@type": HELP, "retryDelay": "3s"}]}) is None


def test_parse_gemini_error_shapes():
    assert parse_gemini_error({"error": {"code": 1}}) == {"code": 1}
    assert parse_gemini_error([{"error": {"code": 1}}]) == {"code": 1}
    assert parse_gemini_error({"error": "text"}) == {"message": "text"}
    assert parse_gemini_error({"error": None}) is None
    assert parse_gemini_error([]) is None
    assert parse_gemini_error("x") is None


def test_a_stream_failure_uses_the_report_s_own_code_as_status():
    failure = gemini_stream_failure(
        {
            "code": 429,
            "status": "RESOURCE_EXHAUSTED",
            "message": "slow",
            "details": [{"@type": RETRY, "retryDelay": "2s"}],
        }
    )
    assert (failure.code, failure.status, failure.provider_retry_after_ms) == (
        "RATE_LIMIT",
        429,
        2000,
    )
    bare = gemini_stream_failure({})
    assert (bare.code, bare.message) == ("SERVER", "Gemini stream reported an error")


def test_an_unknown_rpc_status_falls_back_to_the_http_rules():
    assert gemini_error_code(409, {"status": "ALREADY_EXISTS"}) == "HTTP_409"
    assert gemini_error_code(None, {"status": "CANCELLED"}) == ErrorCode.SERVER


FIXTURES = Path(__file__).parent.parent.parent / "fixtures" / "gemini"
RECORDED = {
    "http_400_api_key_invalid": (ErrorCode.AUTH, None),
    "http_400_input_too_long": (ErrorCode.CONTEXT_WINDOW_EXCEEDED, None),
    "http_400_missing_thought_signature": (ErrorCode.INVALID_REQUEST, None),
    "http_401_unauthenticated": (ErrorCode.AUTH, None),
    "http_403_permission_denied": (ErrorCode.AUTH, None),
    "http_404_not_found": (ErrorCode.INVALID_REQUEST, None),
    "http_429_daily_quota": (ErrorCode.QUOTA, 14000),
    "http_429_resource_exhausted": (ErrorCode.RATE_LIMIT, 37000),
    "http_500_internal": (ErrorCode.SERVER, None),
    "http_503_unavailable": (ErrorCode.SERVER, None),
}


def test_every_recorded_error_body_is_listed():
    assert {p.stem for p in FIXTURES.glob("http_*.json")} == set(RECORDED)


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_recorded_error_bodies(name):
    status = int(name.split("_")[1])
    payload = (FIXTURES / f"{name}.json").read_bytes()
    error = gemini_http_error(status, {"content-type": "application/json"}, payload)
    code, retry = RECORDED[name]
    assert (error.code, error.provider_retry_after_ms, error.status) == (
        code,
        retry,
        status,
    )
    assert error.message == json.loads(payload)["error"]["message"]
