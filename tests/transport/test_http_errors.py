"""Provider error reports (dsh_llm.transport.http_errors), SPEC 8.6."""

from __future__ import annotations

import email.utils
import json

import pytest

from dsh_llm.errors import ErrorCode
from dsh_llm.transport.http_errors import AnswerReading
from dsh_llm.transport.http_errors import error_code
from dsh_llm.transport.http_errors import http_date_ms
from dsh_llm.transport.http_errors import http_error
from dsh_llm.transport.http_errors import in_band_failure
from dsh_llm.transport.http_errors import not_a_stream_error
from dsh_llm.transport.http_errors import parse_error_report
from dsh_llm.transport.http_errors import request_id
from dsh_llm.transport.http_errors import retry_after_ms
from dsh_llm.transport.redaction import Redactor

NOW = 1_800_000_000.0


def _body(**error: object) -> bytes:
    return json.dumps({"error": error}).encode()


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (401, "AUTH"),
        (403, "AUTH"),
        (429, "RATE_LIMIT"),
        (400, "INVALID_REQUEST"),
        (422, "INVALID_REQUEST"),
        (413, "INVALID_REQUEST"),
        (402, "QUOTA"),
        (500, "SERVER"),
        (503, "SERVER"),
        (404, "HTTP_404"),
        (418, "HTTP_418"),
    ],
)
def test_status_maps_to_a_code_with_the_body_message(status, code):
    error = http_error(
        status, {}, _body(message=f"failed with {status}"), provider="DeepSeek"
    )
    assert (error.code, error.message, error.status) == (
        code,
        f"failed with {status}",
        status,
    )


def test_context_overflow_only_on_400():
    detail = _body(message="This model's maximum context length is 131072 tokens")
    assert (
        http_error(400, {}, detail, provider="DeepSeek").code
        == "CONTEXT_WINDOW_EXCEEDED"
    )
    assert http_error(413, {}, detail, provider="DeepSeek").code == "INVALID_REQUEST"
    assert (
        error_code(400, "request too large for model context")
        == "CONTEXT_WINDOW_EXCEEDED"
    )
    assert (
        error_code(400, "invalid input: temperature exceeds maximum allowed value")
        == "INVALID_REQUEST"
    )
    assert error_code(413, "context_length_exceeded") == "INVALID_REQUEST"


def test_quota_beats_rate_limit_but_not_auth():
    assert error_code(429, "insufficient_quota account credits exhausted") == "QUOTA"
    assert error_code(429, "request rate limit exceeded") == "RATE_LIMIT"
    assert error_code(401, "insufficient balance") == "AUTH"
    assert (
        http_error(402, {}, _body(message="Insufficient Balance"), provider="D").code
        == "QUOTA"
    )


TOO_LARGE = (
    "Request too large for gpt-x in organization org-1 on tokens per min (TPM): "
    "Limit 30000, Requested 52011."
)


def test_a_429_for_one_request_above_the_tpm_limit_is_invalid_request():
    error = http_error(
        429,
        {"retry-after": "1"},
        _body(message=TOO_LARGE, type="tokens", code="rate_limit_exceeded"),
        provider="OpenAI",
    )
    assert (error.code, error.status, error.message) == (
        "INVALID_REQUEST",
        429,
        TOO_LARGE,
    )
    # The provider's facts are kept even though no retry can help.
    assert error.failure.provider_retry_after_ms == 1000
    assert error_code(429, f"rate_limit_exceeded tokens {TOO_LARGE}") == (
        "INVALID_REQUEST"
    )
    assert error_code(429, "rate_limit_exceeded REQUEST TOO LARGE for x") == (
        "INVALID_REQUEST"
    )


def test_the_request_too_large_rule_keeps_its_place_in_the_order():
    assert error_code(429, "Rate limit reached for gpt-x on requests per min") == (
        "RATE_LIMIT"
    )
    assert error_code(401, TOO_LARGE) == "AUTH"
    assert error_code(413, TOO_LARGE) == "INVALID_REQUEST"
    assert error_code(429, f"insufficient_quota {TOO_LARGE}") == "QUOTA"
    assert error_code(400, TOO_LARGE) == "INVALID_REQUEST"
    assert error_code(500, TOO_LARGE) == "SERVER"


@pytest.mark.parametrize(
    ("value", "status"),
    [
        (
            {
                "error": {
                    "message": TOO_LARGE,
                    "type": "tokens",
                    "code": "rate_limit_exceeded",
                }
            },
            None,
        ),
        ({"error": {"code": 429, "message": TOO_LARGE}}, 429),
        (f"rate limit: {TOO_LARGE}", None),
    ],
    ids=["openai", "int-code", "error-field"],
)
def test_an_in_stream_request_too_large_uses_the_same_rule(value, status):
    failure = in_band_failure(value, provider="OpenAI")
    assert (failure.code, failure.status) == ("INVALID_REQUEST", status)


def test_bodies_without_a_message_keep_the_status_line():
    for body in (
        b'{"error":{"type":"x"}}',
        b"Bad Gateway",
        b"",
        b"[1]",
        b'{"error":5}',
    ):
        error = http_error(502, {}, body, provider="DeepSeek")
        assert error.message == "DeepSeek API error (HTTP 502)"
        assert error.code == "SERVER"


DEEP = b"[" * 100_000 + b"]" * 100_000


def test_json_nested_deeper_than_the_parser_follows_keeps_the_status_line():
    error = http_error(500, {"content-type": "application/json"}, DEEP, provider="D")
    assert (error.code, error.message) == ("SERVER", "D API error (HTTP 500)")
    shallow_enough = b"[" * 900 + b"]" * 900
    assert http_error(502, {}, shallow_enough, provider="D").code == "SERVER"
    not_stream = not_a_stream_error(
        {}, DEEP, provider="D", content_type="application/json"
    )
    assert not_stream.code == ErrorCode.MALFORMED_RESPONSE


def test_the_cause_is_the_raw_body_or_the_status():
    assert (
        str(http_error(500, {}, b"", provider="DeepSeek").__cause__)
        == "DeepSeek HTTP 500"
    )
    assert str(http_error(500, {}, b"oops", provider="DeepSeek").__cause__) == "oops"


def test_retry_after_seconds_and_request_id_are_facts():
    error = http_error(
        429,
        {"Retry-After": "2", "X-Request-Id": "req-429"},
        _body(message="slow down"),
        provider="DeepSeek",
    )
    assert error.failure.provider_retry_after_ms == 2000
    assert error.failure.request_id == "req-429"


def test_retry_after_http_date_and_deepseek_request_id():
    date = email.utils.formatdate(NOW + 3, usegmt=True)
    error = http_error(
        503,
        {"retry-after": date, "x-deepseek-request-id": "deepseek-503"},
        _body(message="come back later"),
        provider="DeepSeek",
        now=lambda: NOW,
    )
    assert error.failure.provider_retry_after_ms == pytest.approx(3000)
    assert error.failure.request_id == "deepseek-503"


@pytest.mark.parametrize(
    "value",
    [
        "0",
        "9" * 400,
        "not-a-date",
        email.utils.formatdate(0, usegmt=True),
        # A date in an unknown zone ("-0000") cannot be turned into a delay.
        email.utils.formatdate(NOW + 60),
        "-1",
        "1.5",
        "",
    ],
)
def test_unusable_retry_after_values_are_dropped(value):
    assert retry_after_ms({"retry-after": value}, now=lambda: NOW) is None


def test_retry_after_ms_wins_and_must_be_positive():
    assert retry_after_ms({"retry-after-ms": "1500", "retry-after": "9"}) == 1500
    assert retry_after_ms({"retry-after-ms": "0", "retry-after": "9"}) == 9000
    assert retry_after_ms({"retry-after-ms": "abc"}) is None
    assert retry_after_ms({}) is None


def test_request_id_prefers_x_request_id_and_skips_empty():
    assert request_id({"x-request-id": "", "x-deepseek-request-id": "b"}) == "b"
    assert request_id({"request-id": "req_1"}) == "req_1"
    assert request_id({}) is None
    assert request_id({"request-id": "a", "Other-Id": "b"}, ("other-id",)) == "b"


def test_http_date_ms_is_signed_and_needs_a_zone():
    date = email.utils.formatdate(NOW - 2, usegmt=True)
    assert http_date_ms(date, now=lambda: NOW) == pytest.approx(-2000)
    assert http_date_ms(email.utils.formatdate(NOW), now=lambda: NOW) is None
    assert http_date_ms("soon") is None


def test_a_family_reader_decides_the_code_and_fills_what_headers_lack():
    seen = []

    def read(status, headers, value):
        seen.append((status, headers.get("x-kind"), value))
        return AnswerReading(
            code="BUSY", message="busy sk-1", retry_after_ms=700, request_id="body-id"
        )

    error = http_error(
        409,
        {"x-kind": "busy", "family-id": "sk-1"},
        b'{"why": "sk-1"}',
        provider="P",
        read=read,
        request_id_headers=("family-id",),
        redact=lambda text: text.replace("sk-1", "***"),
    )
    assert (error.code, error.message, error.request_id) == ("BUSY", "busy ***", "***")
    assert error.provider_retry_after_ms == 700
    assert str(error.__cause__) == '{"why": "***"}'
    without = http_error(409, {"retry-after": "2"}, b"", provider="P", read=read)
    assert (without.request_id, without.provider_retry_after_ms) == ("body-id", 2000)
    assert seen == [(409, "busy", {"why": "sk-1"}), (409, None, None)]


@pytest.mark.parametrize(
    ("value", "code", "status"),
    [
        (
            {"error": {"message": "Overloaded", "type": "overloaded_error"}},
            "SERVER",
            None,
        ),
        (
            {
                "error": {
                    "code": 400,
                    "message": "the request exceeds the available context size",
                    "type": "invalid_request_error",
                }
            },
            "CONTEXT_WINDOW_EXCEEDED",
            400,
        ),
        (
            {"error": {"message": "Rate limit reached", "code": "rate_limit_exceeded"}},
            "RATE_LIMIT",
            None,
        ),
        (
            {
                "error": {
                    "message": "You exceeded your current quota",
                    "code": "insufficient_quota",
                }
            },
            "QUOTA",
            None,
        ),
        (
            {"error": {"message": "bad", "type": "invalid_request_error"}},
            "INVALID_REQUEST",
            None,
        ),
        ({"error": {"message": "no", "type": "authentication_error"}}, "AUTH", None),
        ({"object": "error", "message": "boom", "code": 500}, "SERVER", 500),
        ({"error": "model not found"}, "SERVER", None),
        (
            '{"code":503,"message":"Loading model","type":"unavailable_error"}',
            "SERVER",
            503,
        ),
        ("plain text", "SERVER", None),
        (
            [{"error": {"code": 429, "message": "Resource exhausted"}}],
            "RATE_LIMIT",
            429,
        ),
    ],
)
def test_in_band_errors_use_the_same_classifier(value, code, status):
    failure = in_band_failure(value, provider="DeepSeek")
    assert (failure.code, failure.status) == (code, status)


def test_in_band_error_without_details_names_the_provider():
    failure = in_band_failure({"error": {}}, provider="DeepSeek")
    assert failure.message == "DeepSeek stream reported an error"
    assert failure.code == ErrorCode.SERVER
    assert parse_error_report({"choices": []}) is None
    assert parse_error_report("  ") is None
    assert parse_error_report([]) is None


def test_an_error_field_holding_a_json_scalar_is_its_text():
    report = parse_error_report('"model overloaded"')
    assert report is not None
    text = '"model overloaded"'
    assert (report.message, report.detail) == (text, text)
    failure = in_band_failure("503", provider="llama.cpp")
    assert (failure.message, failure.code, failure.status) == ("503", "SERVER", None)


# --- secrets the server echoes back ---------------------------------------------------

KEY = "sk-SUPERSECRETKEY1234567890"


def test_an_echoed_key_is_redacted_from_the_message_and_the_cause():
    body = _body(message=f"Incorrect API key provided: {KEY}", code="invalid_api_key")
    error = http_error(401, {}, body, provider="DeepSeek", redact=Redactor([KEY]))
    assert (error.code, error.message) == ("AUTH", "Incorrect API key provided: ***")
    assert KEY not in str(error.__cause__)
    assert "Incorrect API key provided: ***" in str(error.__cause__)


def test_an_echoed_key_in_a_body_that_is_not_json_is_redacted():
    body = f"<html>bad key {KEY}</html>".encode()
    error = http_error(403, {}, body, provider="DeepSeek", redact=Redactor([KEY]))
    assert error.message == "DeepSeek API error (HTTP 403)"
    assert str(error.__cause__) == "<html>bad key ***</html>"


def test_an_echoed_key_in_an_in_band_error_is_redacted():
    redact = Redactor([KEY])
    for value in (
        {"error": {"message": f"key {KEY} revoked", "type": "authentication_error"}},
        f"key {KEY} revoked",
    ):
        failure = in_band_failure(value, provider="DeepSeek", redact=redact)
        assert failure.message == "key *** revoked"


# --- a 2xx answer that is not a stream ------------------------------------------------


def test_a_json_error_report_in_a_2xx_answer_uses_the_in_band_rules():
    body = _body(message="slow down", type="rate_limit_error")
    error = not_a_stream_error(
        {"retry-after": "3", "x-request-id": "r9"},
        body,
        provider="DeepSeek",
        content_type="application/json",
        now=lambda: NOW,
    )
    assert (error.code, error.message, error.status) == (
        "RATE_LIMIT",
        "slow down",
        None,
    )
    assert error.failure.provider_retry_after_ms == 3000
    assert error.failure.request_id == "r9"
    flat = json.dumps({"object": "error", "message": "bad", "code": 401}).encode()
    error = not_a_stream_error(
        {}, flat, provider="DeepSeek", content_type="application/json"
    )
    assert (error.code, error.status) == ("AUTH", 401)


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("application/json", b'{"choices": []}'),
        ("application/json", b'{"error": false}'),
        ("application/json", b"not json"),
        ("application/json", b""),
        ("text/html", b'{"error": {"message": "json inside html is not parsed"}}'),
    ],
)
def test_anything_else_in_a_2xx_answer_is_malformed_response(content_type, body):
    error = not_a_stream_error(
        {}, body, provider="vLLM", content_type=content_type, expected="a stream"
    )
    assert error.code == ErrorCode.MALFORMED_RESPONSE
    assert error.message == (
        f"vLLM API answered {content_type} instead of a stream "
        "(does the server support streaming?)"
    )
    assert str(error.__cause__) == (body.decode() or f"vLLM empty {content_type}")


def test_a_2xx_answer_echoing_the_key_is_redacted():
    redact = Redactor([KEY])
    body = _body(message=f"bad key {KEY}")
    error = not_a_stream_error(
        {}, body, provider="X", content_type="application/json", redact=redact
    )
    assert error.message == "bad key ***"
    assert KEY not in str(error.__cause__)
    error = not_a_stream_error(
        {}, KEY.encode(), provider="X", content_type="text/html", redact=redact
    )
    assert str(error.__cause__) == "***"
