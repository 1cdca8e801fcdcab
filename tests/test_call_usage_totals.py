"""call_with_retry over a real adapter and a loopback server (issue 13): the
result reports the last attempt's usage, each attempt's and their total (a count
unknown in any attempt is unknown in the total), and a provider dropping
mid-generation is not re-run by a normal policy once content reached the
consumer."""

from __future__ import annotations

from collections.abc import Iterator
from collections.abc import Sequence
from typing import Any

import pytest

from dsh_llm.adapters.deepseek import PROVIDER_ROUTE
from dsh_llm.adapters.deepseek import DeepSeekAdapter
from dsh_llm.assembler import AssembledResponse
from dsh_llm.assembler import total_usage
from dsh_llm.call import RetryEvent
from dsh_llm.call import call_with_retry
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol import create_user_message
from dsh_llm.runtime import LlmRuntime
from dsh_llm.testing import Cut
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply
from dsh_llm.testing import Stall
from dsh_llm.testing import sse_events

NORMAL = {
    "mode": "normal",
    "maxRetries": 2,
    "retryableCodes": ["SERVER", "TRANSPORT", "TIMEOUT", "STREAM_CLOSED"],
    "backoff": {"initialDelayMs": 1, "maxDelayMs": 2, "jitterRatio": 0},
}
ALWAYS = {
    "mode": "always",
    "backoff": {"initialDelayMs": 1, "maxDelayMs": 2, "jitterRatio": 0},
}


def _event(
    delta: dict[str, Any],
    *,
    finish_reason: str | None = None,
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "model": "deepseek-v4-flash",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        "usage": usage,
    }


def _usage(prompt: int, completion: int) -> dict[str, Any]:
    return {"prompt_tokens": prompt, "completion_tokens": completion}


def _answer(pieces: Sequence[str], prompt: int, completion: int) -> Reply:
    events = [_event({"content": piece}) for piece in pieces]
    events.append(
        _event({"content": ""}, finish_reason="stop", usage=_usage(prompt, completion))
    )
    return Reply(body=sse_events(events))


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:
        yield srv
        assert srv.wait_until_idle(), "a connection was left open"


def _call(
    server: LoopbackServer, policy: dict[str, Any] = NORMAL, **adapter_options: Any
) -> tuple[AssembledResponse, list[RetryEvent]]:
    events: list[RetryEvent] = []
    runtime = LlmRuntime()
    with DeepSeekAdapter(
        base_url=server.url,
        environ={"DEEPSEEK_API_KEY": "sk-test"},
        retry_policy=policy,
        **adapter_options,
    ) as adapter:
        runtime.register_adapter([PROVIDER_ROUTE], adapter)
        result = call_with_retry(
            runtime,
            GenerateOptions(
                provider=PROVIDER_ROUTE,
                model="deepseek-v4-flash",
                messages=(create_user_message("hi"),),
                reasoning_effort="off",
            ),
            on_retry=events.append,
        )
    return result, events


def _in_stream_error_after_usage(prompt: int, completion: int) -> Reply:
    events = [
        _event({"content": "par"}),
        {"choices": [], "usage": _usage(prompt, completion)},
        {"error": {"message": "overloaded", "type": "server_error"}},
    ]
    return Reply(body=sse_events(events))


def test_the_total_adds_up_a_billed_failure_and_the_success(server):
    server.enqueue(_in_stream_error_after_usage(100, 50), _answer(["ok"], 3, 1))
    result, events = _call(server)
    assert result.ok
    assert result.attempts == 2
    assert [e.failure.code for e in events] == ["SERVER"]
    last = TokenUsage(input_tokens=3, output_tokens=1, cache_read_tokens=None)
    assert result.usage == last
    assert result.attempt_usages == (
        TokenUsage(input_tokens=100, output_tokens=50, cache_read_tokens=None),
        last,
    )
    assert result.total_usage == TokenUsage(
        input_tokens=103, output_tokens=51, cache_read_tokens=None
    )


def test_an_attempt_that_reported_no_usage_leaves_the_total_unknown(server):
    server.enqueue(Reply(status=503, body=b'{"error":{"message":"busy"}}'))
    server.enqueue(_answer(["ok"], 3, 1))
    result, _ = _call(server)
    assert result.ok
    assert result.attempt_usages[0] is None
    assert result.total_usage == TokenUsage(input_tokens=None, output_tokens=None)


def test_a_single_attempt_totals_its_own_usage(server):
    server.enqueue(_answer(["ok"], 5, 2))
    result, _ = _call(server)
    assert result.total_usage == result.usage
    assert result.attempt_usages == (result.usage,)


def test_total_usage_sums_each_count_and_keeps_unknowns_unknown():
    a = TokenUsage(input_tokens=1, output_tokens=2, cache_read_tokens=3)
    b = TokenUsage(input_tokens=10, output_tokens=None, cache_read_tokens=30)
    assert total_usage([a, b]) == TokenUsage(
        input_tokens=11, output_tokens=None, cache_read_tokens=33
    )
    assert total_usage([]) is None
    big = TokenUsage(input_tokens=2**53 - 1, output_tokens=0)
    assert total_usage([big, big]) == TokenUsage(input_tokens=None, output_tokens=0)


@pytest.mark.parametrize(
    "cut",
    [
        (Cut(),),
        (Cut(reset=True),),
        (Stall(),),
    ],
    ids=["fin", "rst", "stall"],
)
def test_a_drop_after_content_is_not_re_run_by_a_normal_policy(server, cut):
    body = (*sse_events([_event({"content": "Once upon"})], done=False), *cut)
    server.enqueue(Reply(body=body), _answer(["never sent"], 1, 1))
    result, events = _call(server, stream_idle_timeout_ms=300)
    assert result.finish.kind == "error"
    assert result.finish.failure is not None
    assert result.finish.failure.code in ("STREAM_CLOSED", "TRANSPORT", "TIMEOUT")
    assert result.attempts == 1
    assert events == []
    assert len(server.requests) == 1


def test_a_drop_before_any_content_is_retried(server):
    server.enqueue(Reply(body=(Cut(reset=True),)), _answer(["ok"], 1, 1))
    result, events = _call(server)
    assert result.ok
    assert [e.failure.code for e in events] == ["TRANSPORT"]


def test_an_always_policy_re_runs_a_drop_after_content(server):
    body = (*sse_events([_event({"content": "Once"})], done=False), Cut(reset=True))
    server.enqueue(Reply(body=body), _answer(["ok"], 1, 1))
    result, events = _call(server, ALWAYS)
    assert result.ok
    assert result.attempts == 2
    assert [e.failure.code for e in events] == ["TRANSPORT"]
