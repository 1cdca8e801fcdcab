"""The request-side caching controls and the rate-limit values: checked at
construction, TypeScript-shaped JSON, omitted when empty (DESIGN.md rule 13)."""

from __future__ import annotations

import math
import pickle

import attrs
import pytest

from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import CacheBreakpoint
from dsh_llm.protocol import ChunkStream
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import LlmFailure
from dsh_llm.protocol import RateLimit
from dsh_llm.protocol import RateLimits
from dsh_llm.protocol import ResponseInfo
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import StreamMetadata
from dsh_llm.protocol import create_user_message
from dsh_llm.serde import InvalidValueError
from dsh_llm.serde import chunk_from_json
from dsh_llm.serde import chunk_to_json
from dsh_llm.serde import message_from_dict
from dsh_llm.serde import message_to_dict
from dsh_llm.serde import options_from_dict
from dsh_llm.serde import options_to_dict

LIMITS = RateLimits(
    requests=RateLimit(limit=60, remaining=0, reset_ms=1500.0),
    tokens=RateLimit(limit=40_000, remaining=1_200),
)


def test_a_message_without_a_breakpoint_keeps_its_exact_json() -> None:
    message = create_user_message("Hi")
    assert list(message_to_dict(message)) == ["id", "role", "content", "source"]


def test_a_breakpoint_is_written_after_the_source_and_read_back() -> None:
    message = attrs.evolve(create_user_message("Hi"), cache=CacheBreakpoint(ttl="1h"))
    data = message_to_dict(message)
    assert list(data) == ["id", "role", "content", "source", "cache"]
    assert data["cache"] == {"ttl": "1h"}
    assert message_from_dict(data) == message
    default = attrs.evolve(message, cache=CacheBreakpoint())
    assert message_to_dict(default)["cache"] == {}
    assert message_from_dict(message_to_dict(default)).cache == CacheBreakpoint()


def test_a_breakpoint_needs_a_non_empty_lifetime_and_a_message_a_breakpoint() -> None:
    with pytest.raises(ValueError, match="ttl"):
        CacheBreakpoint(ttl="")
    with pytest.raises(TypeError, match="cache"):
        attrs.evolve(create_user_message("Hi"), cache="1h")
    with pytest.raises(InvalidValueError, match=r"\$\.cache\.ttl"):
        message_from_dict(
            {**message_to_dict(create_user_message("Hi")), "cache": {"ttl": 5}}
        )


def test_the_request_caching_fields_are_omitted_unless_set() -> None:
    plain = GenerateOptions.from_prompt("m", "Hi")
    assert "cacheKey" not in options_to_dict(plain)
    assert "cachedContent" not in options_to_dict(plain)
    keyed = plain.evolve(cache_key="tenant-7", cached_content="cachedContents/abc")
    data = options_to_dict(keyed)
    assert (data["cacheKey"], data["cachedContent"]) == (
        "tenant-7",
        "cachedContents/abc",
    )
    assert options_from_dict(data) == keyed
    assert "cache_key='tenant-7'" in repr(keyed)
    for field in ("cache_key", "cached_content"):
        with pytest.raises(ValueError, match=field):
            plain.evolve(**{field: ""})


def test_a_failure_without_rate_limits_keeps_its_exact_json() -> None:
    finish = Finish(
        reason=FinishReason.error(
            LlmFailure(message="slow down", code="RATE_LIMIT", status=429)
        )
    )
    assert chunk_to_json(finish) == (
        '{"type":"finish","reason":{"kind":"error","failure":'
        '{"message":"slow down","code":"RATE_LIMIT","status":429}}}'
    )


def test_a_failure_carries_its_rate_limits_in_camel_case() -> None:
    failure = LlmFailure(message="slow down", code="RATE_LIMIT", rate_limits=LIMITS)
    text = chunk_to_json(Finish(reason=FinishReason.error(failure)))
    assert text.endswith(
        '"rateLimits":{"requests":{"limit":60,"remaining":0,"resetMs":1500},'
        '"tokens":{"limit":40000,"remaining":1200}}}}}'
    )
    chunk: StreamChunk = chunk_from_json(text)
    assert isinstance(chunk, Finish)
    assert chunk.reason.failure == failure


@pytest.mark.parametrize(
    ("fields", "name"),
    [
        ({"remaining": -1}, "remaining"),
        ({"limit": 1.5}, "limit"),
        ({"reset_ms": -1}, "reset_ms"),
        ({"reset_ms": math.nan}, "reset_ms"),
        ({"reset_ms": math.inf}, "reset_ms"),
    ],
)
def test_a_rate_limit_refuses_impossible_values(
    fields: dict[str, object], name: str
) -> None:
    with pytest.raises((TypeError, ValueError), match=name):
        RateLimit(**fields)  # type: ignore[arg-type]


def test_rate_limits_read_as_a_person_would_say_them() -> None:
    assert str(LIMITS) == "requests 0/60 (reset 1.5s), tokens 1200/40000"
    assert str(RateLimits()) == "not reported"
    assert RateLimit(remaining=3).exhausted(3)
    assert not RateLimit(remaining=4).exhausted(3)
    assert not RateLimit().exhausted()


def test_an_error_carries_its_rate_limits_through_its_failure_and_a_pickle() -> None:
    error = LlmError("slow down", ErrorCode.RATE_LIMIT, status=429, rate_limits=LIMITS)
    assert error.rate_limits == LIMITS
    assert error.failure.rate_limits == LIMITS
    assert LlmError.from_failure(error.failure).rate_limits == LIMITS
    assert pickle.loads(pickle.dumps(error)).rate_limits == LIMITS
    assert "rate_limits=" in repr(error)
    assert LlmError("x", "UNKNOWN").rate_limits is None


def test_a_stream_shows_its_response_once_the_producer_received_it() -> None:
    metadata = StreamMetadata()
    stream = ChunkStream(
        iter(()),  # type: ignore[arg-type]
        GenerateOptions.from_prompt("m", "Hi"),
        metadata,
    )
    assert stream.response is None
    assert stream.rate_limits is None
    info = ResponseInfo(request_id="req_1", rate_limits=LIMITS)
    metadata.received(info)
    assert stream.response == info
    assert stream.rate_limits == LIMITS


def test_followed_metadata_shows_the_latest_stream_it_follows() -> None:
    outer, first, second = StreamMetadata(), StreamMetadata(), StreamMetadata()
    outer.follow(first)
    first.received(ResponseInfo(request_id="a"))
    assert outer.response == ResponseInfo(request_id="a")
    outer.follow(second)
    assert outer.response is None
    second.received(ResponseInfo(request_id="b"))
    assert outer.response == ResponseInfo(request_id="b")
    outer.follow(outer)  # following itself changes nothing
    assert outer.response == ResponseInfo(request_id="b")


def test_a_stream_without_metadata_given_has_its_own_empty_cell() -> None:
    stream = ChunkStream(
        iter([]),  # type: ignore[arg-type]
        GenerateOptions.from_prompt("m", "Hi"),
    )
    assert stream.response is None
    assert isinstance(stream.metadata, StreamMetadata)


def test_response_info_refuses_an_empty_request_id() -> None:
    with pytest.raises(ValueError, match="request_id"):
        ResponseInfo(request_id="")
    assert ResponseInfo().rate_limits is None
