"""What the runtime and plugin tests share: an empty generation, a scripted stream,
configurable models, an image block, and small request and stream helpers."""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Iterator
from typing import Any

from dsh_llm.adapter import LlmAdapter
from dsh_llm.adapter import LlmReasoningEffortInfo
from dsh_llm.adapter import LlmResolvedModelInfo
from dsh_llm.protocol import BlockEnd
from dsh_llm.protocol import BlockStart
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import ImageBlock
from dsh_llm.protocol import ImageRef
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import TextDelta
from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol import UsageChunk
from dsh_llm.signal import AbortSignal

SCRIPT: tuple[StreamChunk, ...] = (
    BlockStart(index=0, block_type="text"),
    TextDelta(index=0, text="hi"),
    BlockEnd(index=0, block=TextBlock(text="hi")),
    UsageChunk(usage=TokenUsage(input_tokens=1, output_tokens=1)),
    Finish(reason=FinishReason.STOP),
)


DONE: tuple[StreamChunk, ...] = (
    UsageChunk(usage=TokenUsage.unknown()),
    Finish(reason=FinishReason.STOP),
)
"""An empty generation: usage, then a stop."""


class Quiet(LlmAdapter):
    """Streams ``DONE`` for every request."""

    def stream(self, options: GenerateOptions) -> Iterator[StreamChunk]:
        yield from DONE


class ScriptedAdapter(LlmAdapter):
    """Streams a fixed script and records every options it was given."""

    def __init__(self, script: Iterable[StreamChunk] = SCRIPT) -> None:
        self.script = tuple(script)
        self.seen: list[GenerateOptions] = []

    @property
    def last(self) -> GenerateOptions:
        return self.seen[-1]

    def stream(self, options: GenerateOptions) -> Iterator[StreamChunk]:
        self.seen.append(options)
        yield from self.script


class ModelAdapter(ScriptedAdapter):
    """Answers resolve_model with a fixed LlmResolvedModelInfo per model id."""

    def __init__(self, **by_model: Any) -> None:
        super().__init__()
        self.by_model = by_model
        self.resolutions = 0

    def resolve_model(
        self, provider: str, model: str, signal: AbortSignal | None = None
    ) -> LlmResolvedModelInfo:
        self.resolutions += 1
        extra = self.by_model.get(model, {})
        return LlmResolvedModelInfo(provider=provider, id=model, name=model, **extra)


EFFORTS = (
    LlmReasoningEffortInfo(id="standard", name="Standard"),
    LlmReasoningEffortInfo(id="ultra", name="Ultra", description="Largest budget"),
)


def image_block(digit: str) -> ImageBlock:
    """A small PNG reference whose attachment id repeats the hex ``digit``."""
    return ImageBlock(
        attachment=ImageRef(
            attachment_id="sha256:" + digit * 64,
            media_type="image/png",
            bytes=3,
            width=1,
            height=1,
        )
    )


class RaisingAdapter(LlmAdapter):
    """Raises ``failure`` as soon as stream() is called (not a generator)."""

    def __init__(self, failure: BaseException) -> None:
        self.failure = failure

    def stream(self, options: GenerateOptions) -> Iterator[StreamChunk]:
        raise self.failure


def options(provider: str = "route", **changes: Any) -> GenerateOptions:
    """A request for ``provider`` (model ``"model"``, no messages) with ``changes``."""
    base: dict[str, Any] = {"model": "model", "messages": ()}
    base.update(changes)
    return GenerateOptions(provider=provider, **base)


def drain(stream: Iterable[StreamChunk]) -> list[StreamChunk]:
    return list(stream)


def only_finish(chunks: list[StreamChunk]) -> Finish:
    """The one finish of ``chunks``, checked to be last."""
    finishes = [chunk for chunk in chunks if isinstance(chunk, Finish)]
    assert len(finishes) == 1
    assert chunks[-1] is finishes[0]
    return finishes[0]
