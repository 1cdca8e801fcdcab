"""Assembly: chunks in, complete blocks, an assistant message, usage and finish out.

``BlockAssembler`` is the one canonical assembly algorithm, the TypeScript
harness's.
It is tolerant, like the TypeScript original: it checks no grammar (run
``dsh_llm.validate_stream`` in front of it for that) and never raises for a
malformed but well-typed stream. Contracts callers may rely on:

- ``push`` a chunk at a time; read ``blocks()``, ``message()``, ``usage``,
  ``finish`` and ``replay_state`` at any time, as often as wanted (idempotent).
- Blocks come in first-seen index order, one per distinct index. A repeated
  ``block-start`` is ignored; deltas without a ``block-start`` open their block
  (delta-only streams assemble); the first ``block-end`` of an index wins and
  freezes the block, so later deltas and ends for it are ignored.
- A block never closed assembles from its deltas: text and reasoning from their
  text, a tool call as ``(last delta id, or "call-<index>" when that is None;
  last non-empty name, or ""; concatenated arguments)``. An open block of any
  other type cannot be assembled: ``blocks()`` raises ``ValueError``
  (``cannot assemble incomplete block of type "video"``).
- A ``max-tokens`` finish drops every tool call (a truncated call is unsafe to
  run), and ``replay_state`` drops their per-block entries in step.
- One assembler serves one stream and one thread.

``assemble_stream(chunks)`` pushes a whole stream into a fresh assembler and
closes the stream; ``collect(chunks)`` builds on it and raises the failure of an
``error``/``aborted`` finish as ``LlmError``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any
from typing import Final
from typing import NoReturn
from typing import Protocol
from typing import TypeVar
from typing import overload

import attrs

from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import BlockEnd
from dsh_llm.protocol import BlockStart
from dsh_llm.protocol import CallId
from dsh_llm.protocol import Citation
from dsh_llm.protocol import ContentBlock
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import LlmFailure
from dsh_llm.protocol import Message
from dsh_llm.protocol import MessageSource
from dsh_llm.protocol import PluginSource
from dsh_llm.protocol import ReasoningBlock
from dsh_llm.protocol import ReasoningDelta
from dsh_llm.protocol import ReplayEnvelope
from dsh_llm.protocol import ResponseFormat
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import TextDelta
from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.protocol import ToolCallDelta
from dsh_llm.protocol import UsageChunk
from dsh_llm.protocol import checks
from dsh_llm.protocol import citations_of
from dsh_llm.protocol import create_assistant_message
from dsh_llm.protocol import create_message
from dsh_llm.protocol import reasoning_of
from dsh_llm.protocol import text_of
from dsh_llm.protocol import tool_calls_of
from dsh_llm.protocol.checks import MAX_SAFE_INTEGER
from dsh_llm.protocol.display import blocks_markdown
from dsh_llm.protocol.display import clip
from dsh_llm.protocol.display import finish_text
from dsh_llm.protocol.display import footer_markdown
from dsh_llm.protocol.display import usage_text
from dsh_llm.protocol.message import source_label
from dsh_llm.protocol.text_buffer import TextBuffer
from dsh_llm.sources import close_source
from dsh_llm.structured.parse import parse_json

__all__ = [
    "ASSEMBLER_SOURCE",
    "AssembledResponse",
    "BlockAssembler",
    "KnownCost",
    "ParsedToolCall",
    "PriceLookup",
    "assemble_stream",
    "collect",
    "total_usage",
    "unreachable_variant",
]

T = TypeVar("T")

ASSEMBLER_SOURCE: Final = PluginSource(plugin="dsh-llm/assembler")
"""The source ``BlockAssembler.message()`` gives when none is passed."""


def unreachable_variant(value: object, context: str | None = None) -> NoReturn:
    """Fail for a value that escaped a closed union (e.g. a foreign "chunk").

    The message is ``unreachable variant in <context>: <json>`` (``unreachable
    variant: <json>`` without a context), with the value rendered as compact JSON
    when it is JSON-serialisable and as its ``repr`` otherwise.

    Raises:
        TypeError: always.
    """
    try:
        rendered = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        rendered = repr(value)
    where = f" in {context}" if context else ""
    raise TypeError(f"unreachable variant{where}: {rendered}")


class _Partial:
    """What one index has received so far; ``block`` set means closed."""

    __slots__ = (
        "block",
        "block_type",
        "citations",
        "parts",
        "tool_call_id",
        "tool_call_name",
    )

    def __init__(self, block_type: str) -> None:
        self.block_type = block_type
        self.parts = TextBuffer()
        """Text, or a tool call's argument fragments, in order."""
        self.tool_call_id: CallId | None = None
        self.tool_call_name: str | None = None
        self.citations: list[Citation] | None = None
        """A text block's citations so far (``None`` while it has none)."""
        self.block: ContentBlock | None = None
        """The authoritative block from the first ``block-end``."""

    def joined(self) -> str:
        # The buffer keeps what it joined: repeated blocks() calls stay linear.
        return self.parts.value()


class BlockAssembler:
    """Incrementally assembles chunks into blocks and an assistant message.

    Example::

        assembler = BlockAssembler()
        for chunk in adapter.stream(options):
            assembler.push(chunk)
        reply = assembler.message()
    """

    __slots__ = ("_finish", "_order", "_partials", "_replay_state", "_usage")

    def __init__(self) -> None:
        self._partials: dict[int, _Partial] = {}
        self._order: list[int] = []
        self._usage: TokenUsage | None = None
        self._finish: FinishReason | None = None
        self._replay_state: ReplayEnvelope | None = None

    def push(self, chunk: StreamChunk) -> None:
        """Feed the next chunk, in stream order.

        Raises:
            TypeError: ``unreachable variant in BlockAssembler.push: <json>`` for
                an object that is not one of the seven chunk classes.
        """
        match chunk:
            case BlockStart():
                if chunk.index not in self._partials:
                    self._partials[chunk.index] = _Partial(chunk.block_type)
                    self._order.append(chunk.index)
            case TextDelta() | ReasoningDelta():
                block_type = (
                    TextBlock.TAG
                    if isinstance(chunk, TextDelta)
                    else (ReasoningBlock.TAG)
                )
                partial = self._ensure(chunk.index, block_type)
                if partial.block is None:
                    partial.parts.append(chunk.text)
                    if isinstance(chunk, TextDelta) and chunk.citations:
                        if partial.citations is None:
                            partial.citations = []
                        partial.citations.extend(chunk.citations)
            case ToolCallDelta():
                partial = self._ensure(chunk.index, ToolCallBlock.TAG)
                if partial.block is None:
                    partial.tool_call_id = chunk.id
                    if chunk.name:
                        partial.tool_call_name = chunk.name
                    partial.parts.append(chunk.arguments_delta)
            case BlockEnd():
                partial = self._ensure(chunk.index, chunk.block.type)
                if partial.block is None:
                    partial.block = chunk.block
                    partial.parts.clear()
            case UsageChunk():
                self._usage = chunk.usage
            case Finish():
                self._finish = chunk.reason
                self._replay_state = chunk.replay_state
            case _:
                unreachable_variant(chunk, "BlockAssembler.push")

    def _ensure(self, index: int, block_type: str) -> _Partial:
        partial = self._partials.get(index)
        if partial is None:
            partial = _Partial(block_type)
            self._partials[index] = partial
            self._order.append(index)
        return partial

    def _must_get(self, index: int) -> _Partial:
        partial = self._partials.get(index)
        if partial is None:
            raise RuntimeError(
                f"BlockAssembler invariant violated: no partial for index {index}"
            )
        return partial

    @staticmethod
    def _assemble(partial: _Partial, index: int) -> ContentBlock:
        if partial.block is not None:
            return partial.block
        if partial.block_type == TextBlock.TAG:
            return TextBlock(
                text=partial.joined(), citations=tuple(partial.citations or ())
            )
        if partial.block_type == ReasoningBlock.TAG:
            return ReasoningBlock(text=partial.joined())
        if partial.block_type == ToolCallBlock.TAG:
            call_id = partial.tool_call_id
            return ToolCallBlock(
                id=CallId(f"call-{index}") if call_id is None else call_id,
                name=partial.tool_call_name or "",
                arguments=partial.joined(),
            )
        raise ValueError(
            f'cannot assemble incomplete block of type "{partial.block_type}"'
        )

    def _assembled(
        self,
    ) -> tuple[tuple[ContentBlock, ...], ReplayEnvelope | None]:
        # One keep/drop decision feeds both the blocks and the replay entries,
        # so the two can never disagree.
        every = tuple(
            self._assemble(self._must_get(index), index) for index in self._order
        )
        kept: tuple[bool, ...] | None = None
        blocks = every
        if self.finish.kind == FinishReason.MAX_TOKENS.kind:
            kept = tuple(not isinstance(block, ToolCallBlock) for block in every)
            blocks = tuple(
                block for block, keep in zip(every, kept, strict=True) if keep
            )
        envelope = self._replay_state
        if envelope is None or envelope.blocks is None:
            return blocks, envelope
        if len(envelope.blocks) != len(every):
            return blocks, None
        if kept is None or len(blocks) == len(every):
            return blocks, envelope
        entries = tuple(
            entry for entry, keep in zip(envelope.blocks, kept, strict=True) if keep
        )
        return blocks, ReplayEnvelope(response=envelope.response, blocks=entries)

    def blocks(self) -> tuple[ContentBlock, ...]:
        """Every block seen so far, assembled, in first-seen index order.

        A ``max-tokens`` finish drops tool calls. Open blocks assemble from their
        deltas.

        Raises:
            ValueError: ``cannot assemble incomplete block of type "<t>"`` when a
                block of a type other than text, reasoning or tool-call was never
                closed.
        """
        return self._assembled()[0]

    def interrupted_blocks(self) -> tuple[ContentBlock, ...]:
        """The prefix an interrupted (cancelled) stream can keep.

        Closed and open text and reasoning blocks, in order, without those whose
        text is empty or whitespace only. Tool calls are left out (interruption
        precedes their dispatch), and so are blocks of other types. Never raises
        for an open block of an unknown type.
        """
        kept: list[ContentBlock] = []
        for index in self._order:
            partial = self._must_get(index)
            block_type = (
                partial.block.type if partial.block is not None else partial.block_type
            )
            if block_type not in (TextBlock.TAG, ReasoningBlock.TAG):
                continue
            block = self._assemble(partial, index)
            if isinstance(block, TextBlock | ReasoningBlock) and block.text.strip():
                kept.append(block)
        return tuple(kept)

    @property
    def usage(self) -> TokenUsage | None:
        """The last usage received, or ``None`` before any usage chunk."""
        return self._usage

    @property
    def finish(self) -> FinishReason:
        """The last finish reason received, or ``FinishReason.STOP`` before any."""
        return self._finish if self._finish is not None else FinishReason.STOP

    @property
    def replay_state(self) -> ReplayEnvelope | None:
        """The finish's replay envelope, pruned in step with ``blocks()``.

        ``None`` without an envelope, or when its per-block entries do not match
        the blocks seen one for one. An envelope without per-block entries, or one
        from which nothing was dropped, is returned as the same object.
        """
        return self._assembled()[1]

    @property
    def text(self) -> str:
        """The text blocks of ``blocks()`` joined without a separator."""
        return text_of(self.blocks())

    @property
    def reasoning(self) -> str:
        """The reasoning blocks of ``blocks()`` joined without a separator."""
        return reasoning_of(self.blocks())

    @property
    def tool_calls(self) -> tuple[ToolCallBlock, ...]:
        """The tool calls of ``blocks()``, in order (none after ``max-tokens``)."""
        return tool_calls_of(self.blocks())

    def message(self, source: MessageSource | None = None) -> Message:
        """A new assistant message over ``blocks()`` (fresh id each call).

        Args:
            source: Who produced it; ``PluginSource("dsh-llm/assembler")`` when
                ``None``.
        """
        return create_message(
            "assistant",
            self.blocks(),
            ASSEMBLER_SOURCE if source is None else source,
        )


def _usages(value: Iterable[TokenUsage | None]) -> tuple[TokenUsage | None, ...]:
    return tuple(value)


@attrs.frozen(kw_only=True)
class ParsedToolCall:
    """A tool call with its arguments parsed (see
    ``AssembledResponse.parsed_tool_calls``)."""

    id: CallId
    """The call id, for the tool result."""
    name: str
    """The tool's name."""
    arguments: Any = attrs.field(hash=False)
    """The arguments, parsed from the call's JSON text (normally a dict)."""


class KnownCost(Protocol):
    """A priced call, as ``dsh_llm.observe.cost.Cost`` is."""

    @property
    def total(self) -> float:
        """The amount."""
        ...

    @property
    def currency(self) -> str:
        """Its currency label."""
        ...


class PriceLookup(Protocol):
    """What prices a response for its display: ``dsh_llm.observe.cost.PriceTable``
    fits."""

    def cost_of(self, result: AssembledResponse) -> KnownCost | None:
        """The response's cost, ``None`` when unknown."""
        ...


def _cost_text(prices: PriceLookup | None, response: AssembledResponse) -> str | None:
    """``cost 0.000123 USD`` when ``prices`` knows the response's cost."""
    cost = None if prices is None else prices.cost_of(response)
    return None if cost is None else f"cost {cost.total:.6f} {cost.currency}"


@attrs.frozen(kw_only=True)
class AssembledResponse:
    """The outcome of a whole stream: the one outcome type of the library.

    ``collect`` returns it for a successful stream (so its ``finish`` is never
    ``error`` nor ``aborted``); ``dsh_llm.call.call_with_retry`` returns it for
    the last attempt, whatever its finish (check ``ok``).
    """

    message: Message = attrs.field(validator=checks.instance_of(Message))
    """The assistant message (``BlockAssembler.message()``; no content when the
    attempt failed before any block)."""
    usage: TokenUsage | None = attrs.field(
        validator=checks.optional(checks.instance_of(TokenUsage))
    )
    """The stream's usage, or ``None`` when it carried none."""
    finish: FinishReason = attrs.field(validator=checks.instance_of(FinishReason))
    """Why the response ended."""
    attempts: int = attrs.field(default=1, validator=checks.positive_int)
    """How many attempts were made (1 for a single stream)."""
    attempt_usages: tuple[TokenUsage | None, ...] = attrs.field(
        default=(), converter=_usages
    )
    """Each attempt's usage, in order (``None`` for one that reported none);
    empty for a single stream, whose one usage is ``usage``."""

    @property
    def total_usage(self) -> TokenUsage | None:
        """The usage of every attempt together (``total_usage``): each count
        summed, unknown when any attempt did not report it."""
        return total_usage(self.attempt_usages or (self.usage,))

    @property
    def ok(self) -> bool:
        """Whether the response ended without an ``error`` or ``aborted`` finish."""
        return not self.finish.is_failure

    @property
    def text(self) -> str:
        """The message's text blocks joined without a separator."""
        return self.message.text

    @property
    def reasoning(self) -> str:
        """The message's reasoning blocks joined without a separator."""
        return self.message.reasoning

    @property
    def tool_calls(self) -> tuple[ToolCallBlock, ...]:
        """The message's tool calls, in order."""
        return self.message.tool_calls

    @property
    def citations(self) -> tuple[Citation, ...]:
        """The citations of the message's text blocks, in order."""
        return citations_of(self.message.content)

    def parsed_tool_calls(self) -> tuple[ParsedToolCall, ...]:
        """The message's tool calls with their arguments parsed, in order.

        Raises:
            LlmError: ``INVALID_JSON_OUTPUT`` naming the call when its arguments
                are not JSON.
        """
        parsed: list[ParsedToolCall] = []
        for call in self.tool_calls:
            try:
                arguments = json.loads(call.arguments)
            except ValueError as exc:
                raise LlmError(
                    f"the arguments of tool call {call.name!r} ({call.id}) are not "
                    f"JSON: {exc}",
                    ErrorCode.INVALID_JSON_OUTPUT,
                ) from None
            parsed.append(
                ParsedToolCall(id=call.id, name=call.name, arguments=arguments)
            )
        return tuple(parsed)

    @overload
    def parsed(self, into: type[T]) -> T: ...

    @overload
    def parsed(self, into: Mapping[str, Any] | ResponseFormat | None = None) -> Any: ...

    def parsed(self, into: Any = None) -> Any:
        """The answer's text read as JSON (``dsh_llm.structured.parse_json``):
        an instance of ``into`` when it is a type (a pydantic model, a
        dataclass, a ``TypedDict``, ``list[City]``...), the JSON value checked
        against ``into`` when it is a schema, the bare value for ``None``.

        Example::

            options = GenerateOptions.from_prompt(model, "...", response_format=City)
            city = collect(adapter.stream(options)).parsed(City)

        Raises:
            LlmError: ``INVALID_JSON_OUTPUT`` when the text is not JSON or does
                not fit ``into`` (naming the path of the first mismatch).
        """
        return parse_json(self.text, into)

    def __repr__(self) -> str:
        """``AssembledResponse(stop, text='…', usage=in 9 / out 7, from
        route/model)``: what a person looks for first, no ids."""
        parts = [finish_text(self.finish)]
        if self.text:
            parts.append(f"text={clip(self.text)}")
        if self.reasoning:
            parts.append(f"reasoning={len(self.reasoning)} chars")
        if self.tool_calls:
            parts.append(f"tool_calls=[{', '.join(c.name for c in self.tool_calls)}]")
        if self.citations:
            parts.append(f"citations={len(self.citations)}")
        parts.append(f"usage={usage_text(self.usage)}")
        if self.attempts > 1:
            parts.append(f"attempts={self.attempts}")
        parts.append(f"from {source_label(self.message.source)}")
        return f"AssembledResponse({', '.join(parts)})"

    def footer(self, prices: PriceLookup | None = None) -> list[str]:
        """The facts under a rich display: finish, usage (and the total over
        the attempts when there were several), route and model, cost when
        ``prices`` knows it."""
        parts = [finish_text(self.finish), usage_text(self.usage)]
        if self.attempts > 1:
            parts.append(
                f"{self.attempts} attempts, in all {usage_text(self.total_usage)}"
            )
        parts.append(source_label(self.message.source))
        cost = _cost_text(prices, self)
        if cost is not None:
            parts.append(cost)
        return parts

    def to_markdown(self, prices: PriceLookup | None = None) -> str:
        """The response as Markdown: its blocks (text as it is, reasoning
        folded, tool calls with their arguments), then one line with the finish,
        usage, route and model, and the cost when ``prices`` (a
        ``dsh_llm.observe.cost.PriceTable``) knows it."""
        body = blocks_markdown(self.message.content)
        footer = footer_markdown(self.footer(prices))
        return f"{body}\n\n---\n\n{footer}" if body else footer

    def _repr_markdown_(self) -> str:
        return self.to_markdown()


def assemble_stream(
    chunks: Iterable[StreamChunk],
) -> tuple[BlockAssembler, FinishReason]:
    """Push a whole stream into a fresh ``BlockAssembler``.

    The stream is consumed to its end, not validated, and closed (its ``close()``
    is called when it has one) even when a chunk cannot be assembled, so an
    adapter's HTTP response is released at once. Exceptions raised by the stream
    or by ``push`` propagate unchanged.

    Args:
        chunks: The stream, e.g. ``runtime.stream(options)``.

    Returns:
        The assembler, and the stream's finish reason: ``assembler.finish`` when
        a ``finish`` chunk came, otherwise an ``error`` with code
        ``STREAM_CLOSED`` (a stream cut short is not passed off as a ``stop``).
    """
    assembler = BlockAssembler()
    return assembler, _push_all(assembler, chunks)


def _push_all(assembler: BlockAssembler, chunks: Iterable[StreamChunk]) -> FinishReason:
    finished = False
    iterator = iter(chunks)
    try:
        for chunk in iterator:
            assembler.push(chunk)
            finished = finished or isinstance(chunk, Finish)
    finally:
        # Release the source (an adapter's HTTP response) now, not at garbage
        # collection, when a chunk could not be assembled.
        close_source(iterator)
    if not finished:
        return FinishReason.error(
            LlmFailure(
                message="stream ended without a finish chunk; its output may be "
                "truncated",
                code=ErrorCode.STREAM_CLOSED.value,
            )
        )
    return assembler.finish


def collect(
    stream: Iterable[StreamChunk],
    *,
    source: MessageSource | None = None,
    options: GenerateOptions | None = None,
) -> AssembledResponse:
    """Assemble a whole stream in one call (for notebooks and scripts).

    The stream is consumed to its end and not validated (wrap it in
    ``dsh_llm.validate_stream`` for that: a violation then raises ``INVARIANT``
    first). Exceptions raised by the stream propagate unchanged.

    The reply's ``message`` is ready to append to the next request: from a
    ``ChunkStream`` (what ``adapter.stream`` and ``runtime.stream`` return), or
    with ``options`` given, it names the route and model and keeps the finish's
    replay state (a signed thought, an encrypted reasoning item), which the
    provider needs back in a tool loop.

    Args:
        stream: The chunks, e.g. ``adapter.stream(options)``.
        source: The message's source (overrides the one ``options`` give);
            ``PluginSource("dsh-llm/assembler")`` when neither is known.
        options: The request the stream answers, when ``stream`` does not carry
            them.

    Returns:
        The assembled message, usage and finish reason.

    Raises:
        LlmError: with the failure's code and facts when the stream finished with
            ``error`` or ``aborted`` (the partial output is discarded; its
            ``usage`` is the usage reported before the failure); with code
            ``STREAM_CLOSED`` when the stream ended without a ``finish`` chunk,
            rather than passing a truncated response off as a ``stop``.
    """
    if options is None:
        carried = getattr(stream, "options", None)
        options = carried if isinstance(carried, GenerateOptions) else None
    assembler = BlockAssembler()
    try:
        reason = _push_all(assembler, stream)
    except LlmError as error:
        # An adapter raises its failure after the usage it already reported.
        if error.usage is None:
            error.usage = assembler.usage
        raise
    if reason.failure is not None:
        failed = LlmError.from_failure(reason.failure)
        failed.usage = assembler.usage
        raise failed
    if source is None and options is not None:
        message = create_assistant_message(
            assembler.blocks(),
            provider=options.provider,
            model=options.model,
            replay_state=assembler.replay_state,
        )
    else:
        message = assembler.message(source)
    return AssembledResponse(message=message, usage=assembler.usage, finish=reason)


_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
)


def total_usage(usages: Sequence[TokenUsage | None]) -> TokenUsage | None:
    """The usage of all ``usages`` together: each count is the sum over every
    attempt; a count unknown in any attempt (``None``, or an attempt that reported
    no usage at all) is unknown in the total (whether it was billed is not known);
    a sum above ``2**53 - 1`` is not reported (``None``); no attempt gives
    ``None``."""
    if not usages:
        return None
    counts: dict[str, int | None] = {}
    for field in _FIELDS:
        total: int | None = 0
        for usage in usages:
            count = None if usage is None else getattr(usage, field)
            if count is None or total is None:
                total = None
                break
            total += count
        counts[field] = total if total is None or total <= MAX_SAFE_INTEGER else None
    return TokenUsage(**counts)
