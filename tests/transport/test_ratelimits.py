"""dsh_llm.transport.ratelimits: every header dialect read into one RateLimits,
from recorded header sets (tests/fixtures/ratelimits), and what a stream and a
refused call expose of them over real HTTP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dsh_llm.adapters.openai_compat import OpenAICompatAdapter
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import Finish
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import RateLimit
from dsh_llm.protocol import RateLimits
from dsh_llm.protocol import ResponseInfo
from dsh_llm.runtime import LlmRuntime
from dsh_llm.serde import converter
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply
from dsh_llm.testing import sse_events
from dsh_llm.transport.ratelimits import parse_reset_ms
from dsh_llm.transport.ratelimits import rate_limits
from dsh_llm.transport.ratelimits import response_info

FIXTURES = Path(__file__).parent.parent / "fixtures" / "ratelimits"
NAMES = sorted(path.stem for path in FIXTURES.glob("*.json"))


def _approx(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _approx(item) for key, item in value.items()}
    if isinstance(value, float):
        return pytest.approx(value)
    return value


@pytest.mark.parametrize("name", NAMES)
def test_each_dialect_reads_into_the_rate_limits_it_reports(name: str) -> None:
    case = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    found = rate_limits(case["headers"], now=lambda: case["now"])
    if case["rateLimits"] is None:
        assert found is None
        return
    assert found is not None
    assert converter.unstructure(found) == _approx(case["rateLimits"])


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("6m0s", 360_000),
        ("1s", 1_000),
        ("20ms", 20),
        ("1h2m3s", 3_723_000),
        ("2m59.56s", 179_560),
        ("1.5s", 1_500),
        (".5s", 500),
        ("250us", 0.25),
        ("3", 3_000),
        ("0.25", 250),
    ],
)
def test_durations_and_seconds_are_delays(text: str, ms: float) -> None:
    assert parse_reset_ms(text, now=lambda: 0.0) == pytest.approx(ms)


@pytest.mark.parametrize(
    "text", ["", " ", "soon", "1m5x", "s", "5 s", "-3s", "1e3", "٣s", "nan"]
)
def test_a_reset_that_is_no_time_is_none(text: str) -> None:
    assert parse_reset_ms(text, now=lambda: 0.0) is None


def test_absolute_resets_are_read_as_times_unless_told_otherwise() -> None:
    now = 1_767_225_600.0
    assert parse_reset_ms("1767225610", now=lambda: now) == pytest.approx(10_000)
    assert parse_reset_ms("1767225610000", now=lambda: now) == pytest.approx(10_000)
    assert parse_reset_ms("Thu, 01 Jan 2026 00:00:05 GMT", now=lambda: now) == (
        pytest.approx(5_000)
    )
    assert parse_reset_ms("2026-01-01T00:00:05", now=lambda: now) is None  # no zone
    assert parse_reset_ms(
        "1767225610", now=lambda: now, absolute=False
    ) == pytest.approx(1_767_225_610_000)
    assert parse_reset_ms(None) is None


def test_header_names_are_compared_without_case() -> None:
    found = rate_limits(
        {"X-RateLimit-Remaining-Requests": "3", "X-RATELIMIT-RESET-REQUESTS": "2s"}
    )
    assert found == RateLimits(requests=RateLimit(remaining=3, reset_ms=2000))


def test_response_info_redacts_the_request_id_it_reports() -> None:
    info = response_info(
        {"x-request-id": "id-sk-secret", "x-ratelimit-remaining-requests": "1"},
        redact=lambda text: text.replace("sk-secret", "***"),
    )
    assert info == ResponseInfo(
        request_id="id-***", rate_limits=RateLimits(requests=RateLimit(remaining=1))
    )
    assert response_info({}, redact=lambda text: "") == ResponseInfo()
    assert response_info({"x-request-id": "sk"}, redact=lambda text: "") == (
        ResponseInfo()
    )


# --- over HTTP --------------------------------------------------------------------

HEADERS = {
    "x-request-id": "req-42",
    "x-ratelimit-limit-requests": "60",
    "x-ratelimit-remaining-requests": "0",
    "x-ratelimit-reset-requests": "1.5s",
    "x-ratelimit-limit-tokens": "40000",
    "x-ratelimit-remaining-tokens": "39000",
    "x-ratelimit-reset-tokens": "6m0s",
}
EXPECTED = RateLimits(
    requests=RateLimit(limit=60, remaining=0, reset_ms=1500),
    tokens=RateLimit(limit=40_000, remaining=39_000, reset_ms=360_000),
)


def _answer(text: str) -> Reply:
    def event(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    usage = {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}
    return Reply(
        headers=HEADERS,
        body=sse_events([event({"content": text}), event({}, "stop"), usage]),
    )


def _options(provider: str = "local") -> GenerateOptions:
    return GenerateOptions.from_prompt("m", "Hi", provider=provider)


def test_an_adapter_stream_shows_the_rate_limits_before_its_first_chunk(
    server: LoopbackServer,
) -> None:
    server.enqueue(_answer("Hello"))
    with OpenAICompatAdapter(f"{server.url}/v1") as adapter:
        stream = adapter.stream(_options())
        assert stream.response is None
        first = next(stream)
        assert first.type == "block-start"
        assert stream.rate_limits == EXPECTED
        assert stream.response == ResponseInfo(
            request_id="req-42", rate_limits=EXPECTED
        )
        rest = list(stream)
    assert isinstance(rest[-1], Finish)


def test_a_runtime_stream_shows_its_adapter_response(server: LoopbackServer) -> None:
    server.enqueue(_answer("Hello"), _answer("Again"))
    runtime = LlmRuntime()
    with OpenAICompatAdapter(f"{server.url}/v1") as adapter:
        runtime.register_adapter(["local"], adapter)
        stream = runtime.stream(_options())
        assert stream.rate_limits is None
        chunks = list(stream)
        assert isinstance(chunks[-1], Finish)
        assert stream.rate_limits == EXPECTED
        prepared = runtime.prepare_call(_options().call_config())
        again = prepared.stream(_options())
        list(again)
        assert again.response == ResponseInfo(request_id="req-42", rate_limits=EXPECTED)


def test_a_middleware_that_calls_on_twice_shows_the_latest_response(
    server: LoopbackServer,
) -> None:
    first = _answer("one")
    second = Reply(
        headers={"x-ratelimit-remaining-requests": "7"},
        body=first.body,
    )
    server.enqueue(first, second)
    runtime = LlmRuntime()

    def twice(options: GenerateOptions, call_next: Any) -> Any:
        yield from (c for c in call_next() if not isinstance(c, Finish))
        yield from call_next()

    runtime.use(twice)
    with OpenAICompatAdapter(f"{server.url}/v1") as adapter:
        runtime.register_adapter(["local"], adapter)
        stream = runtime.stream(_options())
        list(stream)
    assert stream.rate_limits == RateLimits(requests=RateLimit(remaining=7))


def test_a_refusal_carries_its_rate_limits_on_the_error_and_the_finish(
    server: LoopbackServer,
) -> None:
    refusal = Reply(
        status=429,
        reason="Too Many Requests",
        headers={"content-type": "application/json", "retry-after": "2", **HEADERS},
        body=b'{"error": {"message": "Rate limit reached", "type": "requests"}}',
        framing="length",
    )
    server.enqueue(refusal, refusal)
    with OpenAICompatAdapter(f"{server.url}/v1") as adapter:
        with pytest.raises(LlmError) as caught:
            list(adapter.stream(_options()))
        assert caught.value.code == ErrorCode.RATE_LIMIT
        assert caught.value.rate_limits == EXPECTED
        assert caught.value.provider_retry_after_ms == 2000
        runtime = LlmRuntime()
        runtime.register_adapter(["local"], adapter)
        finish = list(runtime.stream(_options()))[-1]
    assert isinstance(finish, Finish)
    assert finish.reason.failure is not None
    assert finish.reason.failure.rate_limits == EXPECTED


def test_a_refusal_without_rate_limit_headers_carries_none(
    server: LoopbackServer,
) -> None:
    server.enqueue(
        Reply(
            status=503,
            reason="Unavailable",
            headers={"content-type": "application/json"},
            body=b'{"error": {"message": "busy"}}',
            framing="length",
        )
    )
    with (
        OpenAICompatAdapter(f"{server.url}/v1") as adapter,
        pytest.raises(LlmError) as caught,
    ):
        list(adapter.stream(_options()))
    assert caught.value.code == ErrorCode.SERVER
    assert caught.value.rate_limits is None
