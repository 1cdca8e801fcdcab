"""LlmRuntime tells what it serves (issue 13): each registration is logged at
INFO with its routes, and ``NO_ADAPTER`` lists the routes that exist."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from dsh_llm import ErrorCode
from dsh_llm import LlmError
from dsh_llm.adapter import LlmAdapter
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol import UsageChunk
from dsh_llm.runtime import LlmRuntime


class Quiet(LlmAdapter):
    def stream(self, options: GenerateOptions) -> Iterator[StreamChunk]:
        yield UsageChunk(usage=TokenUsage.unknown())
        yield Finish(reason=FinishReason.STOP)


def test_each_registration_is_logged_at_info_with_its_routes(caplog):
    runtime = LlmRuntime()
    with caplog.at_level(logging.INFO, logger="dsh_llm"):
        runtime.register_adapter(["beta", "alpha"], Quiet())
    records = [r for r in caplog.records if r.levelno == logging.INFO]
    assert [r.getMessage() for r in records] == ['registered Quiet for "alpha", "beta"']
    assert records[0].name == "dsh_llm"


def test_no_adapter_lists_the_routes_that_exist():
    runtime = LlmRuntime()
    runtime.register_adapter(["local", "deepseek"], Quiet())
    with pytest.raises(LlmError) as caught:
        runtime.provider_retry_policy("deepsek")
    assert caught.value.code == ErrorCode.NO_ADAPTER
    assert caught.value.message == (
        'no adapter registered for provider "deepsek" (registered: "deepseek", "local")'
    )


def test_no_adapter_says_when_nothing_is_registered():
    with pytest.raises(LlmError) as caught:
        LlmRuntime().provider_retry_policy("deepseek")
    assert caught.value.message.endswith("(registered: none)")
