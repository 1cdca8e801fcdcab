"""call_with_retry over a real adapter and a loopback server: retryable failures
of the wire (a 5xx, an empty answer, a cut before any byte, a stall) are retried
with the same request until one succeeds; what the policy does not retry is
returned after one attempt."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dsh_llm.adapters.deepseek import PROVIDER_ROUTE
from dsh_llm.adapters.deepseek import DeepSeekAdapter
from dsh_llm.assembler import AssembledResponse
from dsh_llm.call import RetryEvent
from dsh_llm.call import call_with_retry
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import create_user_message
from dsh_llm.runtime import LlmRuntime
from dsh_llm.testing import Cut
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply
from dsh_llm.testing import Stall
from dsh_llm.testing import sse_events

from .cli_run import deepseek_event
from .cli_run import deepseek_text_reply

FAST_RETRIES = {
    "mode": "normal",
    "maxRetries": 2,
    "backoff": {"initialDelayMs": 1, "maxDelayMs": 2, "jitterRatio": 0},
}


def _call(
    server: LoopbackServer, **adapter_options: Any
) -> tuple[AssembledResponse, list[RetryEvent]]:
    adapter_options.setdefault("retry_policy", FAST_RETRIES)
    events: list[RetryEvent] = []
    runtime = LlmRuntime()
    with DeepSeekAdapter(
        base_url=server.url, environ={"DEEPSEEK_API_KEY": "sk-test"}, **adapter_options
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


def _bodies(server: LoopbackServer) -> list[Any]:
    return [json.loads(request.body) for request in server.requests]


@pytest.mark.parametrize(
    ("failure", "code"),
    [
        (
            Reply(status=503, reason="Busy", body=b'{"error":{"message":"busy"}}'),
            "SERVER",
        ),
        (
            Reply(
                body=sse_events([deepseek_event({"content": ""}, finish_reason="stop")])
            ),
            "EMPTY_RESPONSE",
        ),
        (Reply(body=(Cut(reset=True),)), "TRANSPORT"),
    ],
    ids=["server-error", "empty-response", "reset-at-once"],
)
def test_a_retryable_failure_is_retried_with_the_same_request(server, failure, code):
    server.enqueue(failure, deepseek_text_reply(["ok"]))

    result, events = _call(server)

    assert result.ok
    assert result.text == "ok"
    assert result.attempts == 2
    assert [event.failure.code for event in events] == [code]
    first, second = _bodies(server)
    assert first == second


def test_a_stalled_attempt_times_out_and_the_retry_succeeds(server):
    server.enqueue(Reply(body=(Stall(),)), deepseek_text_reply(["late"]))

    result, events = _call(server, stream_idle_timeout_ms=200)

    assert result.text == "late"
    assert [event.failure.code for event in events] == ["TIMEOUT"]


def test_a_stream_closed_failure_is_not_retried_by_default(server):
    truncated = Reply(
        body=(*sse_events([deepseek_event({"content": "par"})], done=False),),
        framing="close",
    )
    server.enqueue(truncated, deepseek_text_reply(["never sent"]))

    result, events = _call(server)

    assert result.finish.kind == "error"
    assert result.finish.failure is not None
    assert result.finish.failure.code == "STREAM_CLOSED"
    assert result.attempts == 1
    assert events == []
    assert len(server.requests) == 1


def test_retries_stop_at_the_policy_bound_with_the_last_failure(server):
    server.enqueue(*[Reply(status=500, body=b"") for _ in range(3)])

    result, events = _call(server)

    assert result.attempts == 3
    assert [event.retry for event in events] == [1, 2]
    assert result.finish.failure is not None
    assert result.finish.failure.code == "SERVER"
    assert result.text == ""
