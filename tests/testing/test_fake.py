"""FakeAdapter: scripted chunks through the real runtime, the signal honoured."""

from __future__ import annotations

import threading

import pytest

from dsh_llm import LlmRuntime
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import BlockEnd
from dsh_llm.protocol import BlockStart
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import TextDelta
from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol import UsageChunk
from dsh_llm.protocol import create_user_message
from dsh_llm.signal import AbortController
from dsh_llm.testing import FakeAdapter

from .adapters import openai_compat
from .sse_cassettes import cassette_path

SCRIPT = (
    BlockStart(index=0, block_type="text"),
    TextDelta(index=0, text="hi"),
    BlockEnd(index=0, block=TextBlock(text="hi")),
    UsageChunk(usage=TokenUsage(input_tokens=3, output_tokens=1)),
    Finish(reason=FinishReason.STOP),
)


def _options(**fields: object) -> GenerateOptions:
    return GenerateOptions(
        provider="fake",
        model="m",
        messages=(create_user_message("hello"),),
        **fields,  # type: ignore[arg-type]
    )


def test_every_call_yields_the_script_through_the_runtime():
    fake = FakeAdapter(SCRIPT)
    runtime = LlmRuntime()
    runtime.register_adapter(["fake"], fake)
    assert tuple(runtime.stream(_options())) == SCRIPT
    assert tuple(runtime.stream(_options())) == SCRIPT
    assert [o.model for o in fake.calls] == ["m", "m"]


def test_a_script_that_breaks_the_protocol_is_refused_at_once():
    with pytest.raises(LlmError) as caught:
        FakeAdapter(SCRIPT[1:])
    assert caught.value.code == ErrorCode.INVARIANT
    assert FakeAdapter(SCRIPT[1:], strict=False).chunks == SCRIPT[1:]


def test_raises_after_the_chunks():
    failure = LlmError("slow down", ErrorCode.RATE_LIMIT)
    fake = FakeAdapter(SCRIPT[:3], raises=failure)
    stream = fake.stream(_options())
    assert [next(stream) for _ in range(3)] == list(SCRIPT[:3])
    with pytest.raises(LlmError) as caught:
        next(stream)
    assert caught.value is failure


def test_an_abort_during_the_delay_ends_the_stream_with_aborted():
    controller = AbortController()
    fake = FakeAdapter(SCRIPT, delay_s=10.0)
    threading.Timer(0.05, controller.abort).start()
    stream = fake.stream(_options(signal=controller.signal))
    with pytest.raises(LlmError) as caught:
        next(stream)
    assert caught.value.code == ErrorCode.ABORTED


def test_an_aborted_signal_stops_before_the_next_chunk():
    controller = AbortController()
    stream = FakeAdapter(SCRIPT).stream(_options(signal=controller.signal))
    assert next(stream) == SCRIPT[0]
    controller.abort()
    with pytest.raises(LlmError, match="aborted"):
        next(stream)


def test_from_cassette_yields_what_the_real_adapter_reads():
    fake = FakeAdapter.from_cassette(
        cassette_path("openai_compat", "openai_length"), openai_compat
    )
    chunks = list(fake.stream(_options()))
    assert chunks[-1] == Finish(reason=FinishReason.MAX_TOKENS)
    assert chunks == list(fake.stream(_options()))
