"""The same ``GenerateOptions`` send the same request body through
``adapter.stream`` and ``LlmRuntime.stream`` (issue 13): the default effort is
decided once, by the adapter, which advertises it in ``resolve_model`` and
applies it itself; a request one path refuses, the other refuses with the same
code. Checked with ``responses``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import responses

from dsh_llm.adapter import LlmAdapter
from dsh_llm.adapters.deepseek import DeepSeekAdapter
from dsh_llm.adapters.openai_compat import OpenAICompatAdapter
from dsh_llm.errors import LlmError
from dsh_llm.protocol import Finish
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import create_user_message
from dsh_llm.runtime import LlmRuntime
from dsh_llm.testing import sse_body

from .chat_chunks import FIRST
from .chat_chunks import finish
from .chat_chunks import text

BASE = "https://api.same.test"
SSE = sse_body([FIRST, text("ok"), finish()])

CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "nothing set": ({}, {}),
    "a temperature": ({}, {"temperature": 0.7}),
    "a temperature with effort off": (
        {},
        {"temperature": 0.7, "reasoning_effort": "off"},
    ),
    "an effort": ({}, {"reasoning_effort": "low"}),
    "a configured effort": ({"reasoning_effort": "max"}, {}),
    "a configured effort off and a temperature": (
        {"reasoning_effort": "off"},
        {"temperature": 0.2},
    ),
    "thinking enabled": ({"thinking": "enabled"}, {}),
    "thinking disabled and a temperature": (
        {"thinking": "disabled"},
        {"temperature": 0.2},
    ),
    "a session title": ({}, {"purpose": "session-title", "temperature": 0.5}),
    "max tokens and stop": ({}, {"max_tokens": 9, "stop": ("END",)}),
}


@pytest.fixture
def mocked() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        mock.add(
            responses.POST,
            f"{BASE}/chat/completions",
            body=SSE,
            content_type="text/event-stream",
        )
        yield mock


def _options(route: str, **fields: Any) -> GenerateOptions:
    return GenerateOptions(
        provider=route,
        model="deepseek-v4-flash",
        messages=(create_user_message("hi"),),
        **fields,
    )


def _through_adapter(
    adapter: LlmAdapter, route: str, mock: responses.RequestsMock, **fields: Any
) -> Any:
    before = len(mock.calls)
    try:
        list(adapter.stream(_options(route, **fields)))
    except LlmError as exc:
        return ("refused", exc.code)
    assert len(mock.calls) == before + 1
    return json.loads(mock.calls[-1].request.body)


def _through_runtime(
    adapter: LlmAdapter, route: str, mock: responses.RequestsMock, **fields: Any
) -> Any:
    runtime = LlmRuntime()
    registration = runtime.register_adapter([route], adapter)
    before = len(mock.calls)
    try:
        end = list(runtime.stream(_options(route, **fields)))[-1]
    finally:
        registration.dispose()
    assert isinstance(end, Finish)
    if end.reason.failure is not None and len(mock.calls) == before:
        return ("refused", end.reason.failure.code)
    assert len(mock.calls) == before + 1
    return json.loads(mock.calls[-1].request.body)


@pytest.mark.parametrize(("config", "fields"), CASES.values(), ids=CASES.keys())
def test_deepseek_sends_the_same_body_through_either_path(mocked, config, fields):
    with DeepSeekAdapter(
        base_url=BASE, environ={"DEEPSEEK_API_KEY": "sk-test"}, **config
    ) as adapter:
        direct = _through_adapter(adapter, "deepseek-official", mocked, **fields)
        routed = _through_runtime(adapter, "deepseek-official", mocked, **fields)
    assert direct == routed


def test_a_temperature_without_an_effort_is_refused_the_same_way_on_both_paths(
    mocked,
):
    with DeepSeekAdapter(
        base_url=BASE, environ={"DEEPSEEK_API_KEY": "sk-test"}
    ) as adapter:
        direct = _through_adapter(adapter, "deepseek-official", mocked, temperature=0.7)
        routed = _through_runtime(adapter, "deepseek-official", mocked, temperature=0.7)
    assert direct == routed == ("refused", "UNSUPPORTED_OPTION")


@pytest.mark.parametrize(
    "fields",
    [{}, {"temperature": 0.7}, {"max_tokens": 5}],
    ids=["nothing", "temperature", "max-tokens"],
)
def test_openai_compat_sends_the_same_body_through_either_path(mocked, fields):
    with OpenAICompatAdapter(BASE) as adapter:
        direct = _through_adapter(adapter, "local", mocked, **fields)
        routed = _through_runtime(adapter, "local", mocked, **fields)
    assert direct == routed
