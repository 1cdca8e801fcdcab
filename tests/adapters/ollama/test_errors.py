"""Ollama error classification (dsh_llm.adapters.ollama.errors): ``{"error":
"..."}`` bodies and lines, to stable codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsh_llm.adapters.ollama.errors import error_text
from dsh_llm.adapters.ollama.errors import ollama_http_error
from dsh_llm.adapters.ollama.errors import ollama_stream_failure
from dsh_llm.errors import ErrorCode

THINK = (
    'invalid think value: "extreme" (must be "high", "medium", "low", true, or false)'
)
MEMORY = "model requires more system memory (12.3 GiB) than is available (8.0 GiB)"


@pytest.mark.parametrize(
    ("status", "body", "code", "message"),
    [
        (
            404,
            b'{"error":"model \\"llama9\\" not found, try pulling it first"}',
            ErrorCode.INVALID_REQUEST,
            'model "llama9" not found, try pulling it first',
        ),
        (
            400,
            json.dumps({"error": THINK}).encode(),
            ErrorCode.INVALID_REQUEST,
            THINK,
        ),
        (
            400,
            b'{"error":"the input length exceeds the context length"}',
            ErrorCode.CONTEXT_WINDOW_EXCEEDED,
            "the input length exceeds the context length",
        ),
        (
            500,
            json.dumps({"error": MEMORY}).encode(),
            ErrorCode.SERVER,
            MEMORY,
        ),
        (
            502,
            b'{"error":"cloud model unreachable"}',
            ErrorCode.SERVER,
            "cloud model unreachable",
        ),
        (
            429,
            b'{"error":"too many requests"}',
            ErrorCode.RATE_LIMIT,
            "too many requests",
        ),
        (401, b'{"error":"unauthorized"}', ErrorCode.AUTH, "unauthorized"),
        (500, b"", ErrorCode.SERVER, "Ollama API error (HTTP 500)"),
        (
            502,
            b"<html>Bad Gateway</html>",
            ErrorCode.SERVER,
            "Ollama API error (HTTP 502)",
        ),
        (400, b'{"error":{"message":"bad"}}', ErrorCode.INVALID_REQUEST, "bad"),
    ],
)
def test_http_errors_get_stable_codes(status, body, code, message):
    error = ollama_http_error(status, {}, body)
    assert (error.code, error.message, error.status) == (code, message, status)


def test_retry_after_and_redaction():
    error = ollama_http_error(
        429,
        {"Retry-After": "2"},
        b'{"error":"key sk-live over limit"}',
        redact=lambda text: text.replace("sk-live", "***"),
    )
    assert error.provider_retry_after_ms == 2000
    assert "sk-live" not in error.message
    assert "sk-live" not in str(error.__cause__)


def test_stream_failures():
    assert ollama_stream_failure("unexpected EOF").code == ErrorCode.SERVER
    assert ollama_stream_failure(5).message == "Ollama stream reported an error"


def test_error_text():
    assert error_text(" x ") == "x"
    assert error_text({"message": "m"}) == "m"
    assert error_text([1]) == ""


FIXTURES = Path(__file__).parent.parent.parent / "fixtures" / "ollama"
RECORDED = {
    "http_400_invalid_think": ErrorCode.INVALID_REQUEST,
    "http_404_model_not_found": ErrorCode.INVALID_REQUEST,
    "http_500_out_of_memory": ErrorCode.SERVER,
    "http_502_cloud_unreachable": ErrorCode.SERVER,
}


def test_every_recorded_error_body_is_listed():
    assert {p.stem for p in FIXTURES.glob("http_*.json")} == set(RECORDED)


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_recorded_error_bodies(name):
    status = int(name.split("_")[1])
    payload = (FIXTURES / f"{name}.json").read_bytes()
    error = ollama_http_error(status, {"content-type": "application/json"}, payload)
    assert (error.code, error.status) == (RECORDED[name], status)
    assert error.message == json.loads(payload)["error"]
