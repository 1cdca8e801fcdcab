"""The kit itself: ``assert_adapter_conforms`` catches the bugs it is for, and
says which variant failed and where. Each broken adapter wraps the real
``OpenAICompatAdapter`` with one realistic bug."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import attrs
import pytest

from dsh_llm.adapter import LlmAdapter
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import BlockEnd
from dsh_llm.protocol import BlockStart
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import TextDelta
from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol import UsageChunk
from dsh_llm.testing import assert_adapter_conforms
from dsh_llm.testing.conformance import GROUPS

from .adapters import openai_compat
from .sse_cassettes import cassette_path

TEXT = cassette_path("openai_compat", "openai_length")


class _Wrapper(LlmAdapter):
    def __init__(self, base_url: str, **options: Any) -> None:
        self.inner = openai_compat(base_url, **options)

    def close(self) -> None:
        self.inner.close()

    def stream(self, options: GenerateOptions) -> Iterator[StreamChunk]:
        return self.inner.stream(options)


class _ForgesStop(_Wrapper):
    """Papers over a broken stream with a clean finish."""

    def stream(self, options: GenerateOptions) -> Iterator[StreamChunk]:
        try:
            yield from self.inner.stream(options)
        except LlmError:
            yield UsageChunk(usage=TokenUsage(input_tokens=None, output_tokens=None))
            yield Finish(reason=FinishReason.STOP)


class _StopsAtErrorFinish(_Wrapper):
    """Reports a cut answer with no block open as a clean stop."""

    def stream(self, options: GenerateOptions) -> Iterator[StreamChunk]:
        usage_seen = block_open = False
        for chunk in self.inner.stream(options):
            usage_seen = usage_seen or isinstance(chunk, UsageChunk)
            if isinstance(chunk, BlockStart | BlockEnd):
                block_open = isinstance(chunk, BlockStart)
            if isinstance(chunk, Finish) and chunk.reason.is_failure and not block_open:
                if not usage_seen:
                    yield UsageChunk(usage=TokenUsage.unknown())
                yield Finish(reason=FinishReason.STOP)
                return
            yield chunk


class _IgnoresSignal(_Wrapper):
    def stream(self, options: GenerateOptions) -> Iterator[StreamChunk]:
        return self.inner.stream(attrs.evolve(options, signal=None))


class _IgnoresIdleTimeout(_Wrapper):
    def __init__(self, base_url: str, **options: Any) -> None:
        options.pop("stream_idle_timeout_ms", None)
        self.inner = openai_compat(base_url)


class _RateLimitIsServer(_Wrapper):
    def stream(self, options: GenerateOptions) -> Iterator[StreamChunk]:
        try:
            yield from self.inner.stream(options)
        except LlmError as exc:
            if exc.code == ErrorCode.RATE_LIMIT:
                raise LlmError(exc.message, ErrorCode.SERVER) from exc
            raise


_calls = itertools.count()


class _DiffersAfterTheFirstCall(_Wrapper):
    """Consistent but different text on every call after the first (as an
    adapter whose output depends on how the bytes were split would be)."""

    def stream(self, options: GenerateOptions) -> Iterator[StreamChunk]:
        later = next(_calls) > 0
        for chunk in self.inner.stream(options):
            if later and isinstance(chunk, TextDelta):
                chunk = TextDelta(index=chunk.index, text=chunk.text.upper())
            elif (
                later
                and isinstance(chunk, BlockEnd)
                and isinstance(chunk.block, TextBlock)
            ):
                chunk = BlockEnd(
                    index=chunk.index, block=TextBlock(text=chunk.block.text.upper())
                )
            yield chunk


def test_the_real_adapter_passes_every_group_but_the_issue_13_ones():
    report = assert_adapter_conforms(
        openai_compat,
        TEXT,
        groups=[g for g in GROUPS if g not in ("truncation", "end-marker")],
    )
    assert report.variants[0] == "recorded"
    assert {"1-byte writes", "close-delimited", "UTF-8 BOM (chunked)"} <= set(
        report.variants
    )


def test_a_forged_clean_finish_on_a_cut_body_fails_naming_the_cut():
    with pytest.raises(AssertionError) as caught:
        assert_adapter_conforms(_ForgesStop, TEXT, groups=["truncation"])
    message = str(caught.value)
    assert "variant 'cut inside event 1 (byte " in message
    assert "a cut body ended with a clean finish" in message


def test_an_end_marker_before_the_finish_reason_must_not_finish_cleanly():
    assert_adapter_conforms(openai_compat, TEXT, groups=["end-marker"])
    with pytest.raises(AssertionError) as caught:
        assert_adapter_conforms(_StopsAtErrorFinish, TEXT, groups=["end-marker"])
    message = str(caught.value)
    assert message.startswith("variant 'end marker")
    assert (
        "a stream whose end marker came before its finish reason ended with a "
        "clean finish" in message
    )


def test_an_adapter_ignoring_the_signal_fails_the_abort_variant():
    with pytest.raises(AssertionError) as caught:
        assert_adapter_conforms(_IgnoresSignal, TEXT, groups=["abort"], guard_s=1.0)
    assert "variant 'abort while waiting': expected ABORTED, got" in str(caught.value)


def test_an_adapter_ignoring_the_idle_timeout_fails_the_stall_variant():
    with pytest.raises(AssertionError) as caught:
        assert_adapter_conforms(
            _IgnoresIdleTimeout, TEXT, groups=["stall"], guard_s=1.0
        )
    assert "variant 'stall after half the events': expected TIMEOUT" in str(
        caught.value
    )


def test_a_wrong_status_mapping_fails_the_http_error_variant():
    with pytest.raises(AssertionError) as caught:
        assert_adapter_conforms(_RateLimitIsServer, TEXT, groups=["http-errors"])
    assert (
        "variant 'http 429 with Retry-After': expected RATE_LIMIT, got 0 chunks, "
        "raised SERVER"
    ) in str(caught.value)


def test_a_diverging_chunk_is_shown_with_the_variant():
    with pytest.raises(AssertionError) as caught:
        assert_adapter_conforms(_DiffersAfterTheFirstCall, TEXT, groups=["resplit"])
    message = str(caught.value)
    assert message.startswith("variant '1-byte writes': chunk #")
    assert "differs from the recording's" in message
    assert '"text":"' in message  # both chunks are shown as JSON


class _RaisesPlainErrors(_Wrapper):
    def stream(self, options: GenerateOptions) -> Iterator[StreamChunk]:
        try:
            yield from self.inner.stream(options)
        except LlmError as exc:
            raise RuntimeError("boom") from exc


def test_an_exception_that_is_not_an_llm_error_fails_naming_the_variant():
    with pytest.raises(AssertionError) as caught:
        assert_adapter_conforms(_RaisesPlainErrors, TEXT, groups=["http-errors"])
    assert str(caught.value) == (
        "variant 'http 401': the adapter raised RuntimeError('boom'), not an LlmError"
    )


def test_an_unknown_group_is_refused():
    with pytest.raises(ValueError, match="unknown conformance groups"):
        assert_adapter_conforms(openai_compat, TEXT, groups=["nope"])
