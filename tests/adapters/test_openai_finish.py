"""Usage and finish-reason mapping (dsh_llm.adapters.chat.finish)."""

from __future__ import annotations

from dsh_llm.adapters.chat.finish import map_finish_reason
from dsh_llm.adapters.chat.finish import map_usage
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import LlmFailure
from dsh_llm.protocol import TokenUsage

from .chat_chunks import usage


def test_map_finish_reason_table():
    # The writer corrects stop/tool-calls by whether a tool-call block went out.
    assert map_finish_reason("stop") == FinishReason.STOP
    assert map_finish_reason("tool_calls") == FinishReason.TOOL_CALLS
    assert map_finish_reason("function_call") == FinishReason.TOOL_CALLS
    assert map_finish_reason("length") == FinishReason.MAX_TOKENS
    assert map_finish_reason(None) == FinishReason.STOP


def test_an_unlisted_identifier_becomes_its_upper_cased_code():
    assert map_finish_reason("content_filter") == FinishReason.error(
        LlmFailure(message="model stopped: content_filter", code="CONTENT_FILTER")
    )


def test_a_reason_that_is_not_a_short_identifier_gets_a_fixed_code():
    long = "x" * 200
    reason = map_finish_reason(long)
    assert reason == FinishReason.error(
        LlmFailure(message="model stopped: " + "x" * 120, code="UNKNOWN_FINISH_REASON")
    )
    spaced = map_finish_reason("out of budget").failure
    assert spaced is not None
    assert spaced.code == "UNKNOWN_FINISH_REASON"


def test_usage_is_disjoint():
    assert map_usage(
        {
            "prompt_tokens": 283,
            "completion_tokens": 69,
            "prompt_cache_hit_tokens": 256,
            "prompt_cache_miss_tokens": 27,
            "prompt_tokens_details": {"cached_tokens": 256},
            "completion_tokens_details": {"reasoning_tokens": 24},
        }
    ) == TokenUsage(
        input_tokens=27, output_tokens=69, cache_read_tokens=256, reasoning_tokens=24
    )


def test_usage_falls_back_to_hit_tokens_and_omits_unreported_fields():
    assert map_usage(usage(10, 2, prompt_cache_hit_tokens=8)) == TokenUsage(
        input_tokens=2, output_tokens=2, cache_read_tokens=8
    )
    assert map_usage(usage(10, 2)) == TokenUsage(input_tokens=10, output_tokens=2)
    assert map_usage({"prompt_tokens_details": None}) == TokenUsage.unknown()
    assert map_usage(usage(5, 1, prompt_cache_hit_tokens=9)).input_tokens is None
    assert (
        map_usage({"prompt_tokens": "7", "completion_tokens": -1})
        == TokenUsage.unknown()
    )


def test_counts_above_the_largest_safe_integer_are_not_reported():
    top = 2**53 - 1
    mapped = map_usage(
        {
            "prompt_tokens": top + 1,
            "completion_tokens": top,
            "prompt_tokens_details": {"cached_tokens": 2**64},
            "completion_tokens_details": {"reasoning_tokens": 10**30},
        }
    )
    assert mapped == TokenUsage(
        input_tokens=None,
        output_tokens=top,
        cache_read_tokens=None,
        reasoning_tokens=None,
    )
