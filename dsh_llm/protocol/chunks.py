"""The stream vocabulary: chunks, finish reasons, token usage and failures.

See ``dsh_llm.protocol`` for the grammar these chunks follow. Every class is a
frozen, slotted, keyword-only attrs value validated at construction: a negative or
non-int index, an empty failure code, an ``error`` finish without a failure, or a
field of the wrong type raises ``TypeError``/``ValueError`` naming the field.
"""

from __future__ import annotations

from typing import Any
from typing import ClassVar
from typing import Final

import attrs

from dsh_llm.protocol import checks as c
from dsh_llm.protocol.citations import Citation
from dsh_llm.protocol.content import BLOCK_TYPES
from dsh_llm.protocol.content import CallId
from dsh_llm.protocol.content import ContentBlock
from dsh_llm.protocol.content import Tagged
from dsh_llm.protocol.content import citations_field
from dsh_llm.protocol.ratelimits import RateLimits

__all__ = [
    "BlockEnd",
    "BlockStart",
    "Finish",
    "FinishReason",
    "LlmFailure",
    "ReasoningDelta",
    "ReplayEnvelope",
    "StreamChunk",
    "TextDelta",
    "TokenUsage",
    "ToolCallDelta",
    "UsageChunk",
    "is_token_delta",
]

FAILURE_KINDS: Final = frozenset({"error", "aborted"})
"""Finish kinds that carry an ``LlmFailure`` (and only those do)."""


@attrs.frozen(kw_only=True)
class LlmFailure:
    """Serializable facts about a failed model call; policy decides retryability.

    Valid values only: ``message`` and ``code`` non-empty, ``status`` an int in
    100..599, ``provider_retry_after_ms`` finite and > 0, ``request_id`` non-empty.
    """

    message: str = attrs.field(validator=c.non_empty_str)
    """Human-readable description; never contains a secret."""
    code: str = attrs.field(validator=c.non_empty_str)
    """Stable routing code (see ``dsh_llm.errors.ErrorCode``); route on this."""
    status: int | None = attrs.field(default=None)
    """HTTP status returned by the provider, when there was one."""
    provider_retry_after_ms: float | None = attrs.field(
        default=None, converter=c.json_number
    )
    """Delay the provider asked for before a retry, in milliseconds."""
    request_id: str | None = attrs.field(
        default=None, validator=c.optional(c.non_empty_str)
    )
    """Provider-issued request id, for diagnostics."""
    rate_limits: RateLimits | None = attrs.field(
        default=None, validator=c.optional(c.instance_of(RateLimits))
    )
    """The rate limits the refusing response reported (a 429's headers), when
    it reported any."""

    @status.validator
    def _check_status(self, attribute: attrs.Attribute[Any], value: object) -> None:
        if value is None:
            return
        c.non_negative_int(self, attribute, value)
        assert isinstance(value, int)
        if not 100 <= value <= 599:
            raise c.bad_value(self, "status", f"must be in 100..599, got {value}")

    @provider_retry_after_ms.validator
    def _check_retry_after(
        self, attribute: attrs.Attribute[Any], value: object
    ) -> None:
        if value is None:
            return
        c.finite_number(self, attribute, value)
        assert isinstance(value, int | float)
        if value <= 0:
            raise c.bad_value(
                self, "provider_retry_after_ms", f"must be > 0, got {value}"
            )


@attrs.frozen(kw_only=True)
class FinishReason:
    """Why a response ended. ``kind`` is an open set; the known kinds are
    ``stop``, ``tool-calls``, ``max-tokens``, ``error`` and ``aborted``.

    ``failure`` is present exactly when ``kind`` is ``error`` or ``aborted``.
    Use the constants ``FinishReason.STOP``, ``TOOL_CALLS``, ``MAX_TOKENS`` and the
    constructors ``FinishReason.error(failure)`` / ``FinishReason.aborted(failure)``.
    """

    STOP: ClassVar[FinishReason]
    TOOL_CALLS: ClassVar[FinishReason]
    MAX_TOKENS: ClassVar[FinishReason]

    kind: str = attrs.field(validator=c.non_empty_str)
    """``stop``, ``tool-calls``, ``max-tokens``, ``error``, ``aborted``, or another
    provider-specific kind."""
    failure: LlmFailure | None = attrs.field(
        default=None, validator=c.optional(c.instance_of(LlmFailure))
    )
    """What went wrong; only (and always) for ``error`` and ``aborted``."""

    def __attrs_post_init__(self) -> None:
        if self.kind in FAILURE_KINDS and self.failure is None:
            raise c.bad_value(
                self, "failure", f"is required when kind is {self.kind!r}"
            )
        if self.kind not in FAILURE_KINDS and self.failure is not None:
            raise c.bad_value(
                self,
                "failure",
                f"is only allowed for 'error' and 'aborted', not {self.kind!r}",
            )

    @classmethod
    def error(cls, failure: LlmFailure) -> FinishReason:
        """An ``error`` finish carrying ``failure``."""
        return cls(kind="error", failure=failure)

    @classmethod
    def aborted(cls, failure: LlmFailure) -> FinishReason:
        """An ``aborted`` finish carrying ``failure``."""
        return cls(kind="aborted", failure=failure)

    @property
    def is_failure(self) -> bool:
        """Whether this is an ``error`` or ``aborted`` finish."""
        return self.kind in FAILURE_KINDS


FinishReason.STOP = FinishReason(kind="stop")
FinishReason.TOOL_CALLS = FinishReason(kind="tool-calls")
FinishReason.MAX_TOKENS = FinishReason(kind="max-tokens")

_count = c.optional(c.non_negative_int)


@attrs.frozen(kw_only=True)
class TokenUsage:
    """Token accounting for one call, with DISJOINT input counts.

    ``input_tokens`` is uncached input only; cached input is in
    ``cache_read_tokens``/``cache_write_tokens``; billed input is the sum of the
    three. ``reasoning_tokens`` is already inside ``output_tokens``. A count the
    provider did not report is ``None`` (JSON ``null``), never an invented 0.
    """

    input_tokens: int | None = attrs.field(validator=_count)
    """Uncached input tokens, or ``None`` when not reported."""
    output_tokens: int | None = attrs.field(validator=_count)
    """Output tokens (reasoning included), or ``None`` when not reported."""
    cache_read_tokens: int | None = attrs.field(default=None, validator=_count)
    """Input tokens served from the provider's cache, when reported."""
    cache_write_tokens: int | None = attrs.field(default=None, validator=_count)
    """Input tokens written to the provider's cache, when reported."""
    reasoning_tokens: int | None = attrs.field(default=None, validator=_count)
    """The part of ``output_tokens`` spent on reasoning, when reported."""

    @classmethod
    def unknown(cls) -> TokenUsage:
        """Usage for a provider that reported none: every count is ``None``."""
        return cls(input_tokens=None, output_tokens=None)

    def __str__(self) -> str:
        """``in 27 / out 69 (cache 256, cache write 12, reasoning 24)``.

        An unknown input or output count shows as ``?``; an unknown cache or
        reasoning count is left out (a reported 0 is shown); a usage without
        any count reads ``not reported``. ``cache`` is the cache reads.
        """
        optional = (
            ("cache", self.cache_read_tokens),
            ("cache write", self.cache_write_tokens),
            ("reasoning", self.reasoning_tokens),
        )
        shown = [f"{name} {count}" for name, count in optional if count is not None]
        if self.input_tokens is None and self.output_tokens is None and not shown:
            return "not reported"
        text = f"in {_shown(self.input_tokens)} / out {_shown(self.output_tokens)}"
        return f"{text} ({', '.join(shown)})" if shown else text


def _shown(count: int | None) -> str:
    return "?" if count is None else str(count)


def _detached_response(value: Any) -> Any:
    return c.json_copy(value, "ReplayEnvelope", "response")


def _detached_blocks(value: Any) -> tuple[Any, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list | tuple):
        raise c.FieldTypeError(
            "ReplayEnvelope",
            "blocks",
            f"must be a tuple or list, got {type(value).__name__}",
        )
    return tuple(c.json_copy(list(value), "ReplayEnvelope", "blocks"))


@attrs.frozen(kw_only=True)
class ReplayEnvelope:
    """Adapter-private, JSON-safe state for replaying a successful response.

    ``response`` is response-level metadata; ``blocks`` has one entry per emitted
    block in first-seen order, or is ``None`` when the metadata does not depend on
    the blocks. Both halves are opaque to everything but the adapter.

    Both are detached copies made of JSON values only (dicts with str keys,
    lists, str, finite numbers, bool, ``None``; a tuple is stored as a list), so
    the envelope survives a JSON round trip unchanged. Anything else raises
    ``TypeError``/``ValueError`` naming the field. The halves are left out of
    the hash (they hold dicts), so chunks and messages carrying an envelope stay
    hashable.
    """

    response: Any = attrs.field(converter=_detached_response, hash=False)
    """Response-level metadata (any JSON value)."""
    blocks: tuple[Any, ...] | None = attrs.field(
        default=None, converter=_detached_blocks, hash=False
    )
    """Per-block metadata in first-seen block order, or ``None``."""


def _index_field() -> Any:
    return attrs.field(validator=c.non_negative_int)


@attrs.frozen(kw_only=True)
class BlockStart(Tagged):
    """Opens content block ``index`` of type ``block_type``."""

    TAG: ClassVar[str] = "block-start"

    index: int = _index_field()
    """The block's index: 0, 1, 2... in opening order."""
    block_type: str = attrs.field(validator=c.non_empty_str)
    """The block's tag: ``text``, ``reasoning``, ``tool-call``... (open set)."""


@attrs.frozen(kw_only=True)
class _TextPiece(Tagged):
    """The fields a text or reasoning delta shares (not a chunk of its own)."""

    index: int = _index_field()
    """The open block (of the delta's kind) this delta extends."""
    text: str = attrs.field(validator=c.is_str)
    """The next piece of the block's text."""


@attrs.frozen(kw_only=True)
class TextDelta(_TextPiece):
    """Appends ``text`` to text block ``index`` (``text`` is ``""`` for a delta
    carrying only citations)."""

    TAG: ClassVar[str] = "text-delta"

    citations: tuple[Citation, ...] = citations_field()
    """The citations arriving with this piece, in order (omitted from the JSON
    when empty); the block's ``TextBlock.citations`` is all of them."""


@attrs.frozen(kw_only=True)
class ReasoningDelta(_TextPiece):
    """Appends ``text`` to reasoning block ``index``."""

    TAG: ClassVar[str] = "reasoning-delta"


@attrs.frozen(kw_only=True)
class ToolCallDelta(Tagged):
    """Extends tool-call block ``index`` with a piece of its raw JSON arguments."""

    TAG: ClassVar[str] = "tool-call-delta"

    index: int = _index_field()
    """The open tool-call block this delta extends."""
    id: CallId | None = attrs.field(default=None, validator=c.optional(c.is_str))
    """The call id, repeated on every delta once known (``None`` if not yet)."""
    name: str | None = attrs.field(default=None, validator=c.optional(c.is_str))
    """The tool name, repeated on every delta once known (``None`` if not yet)."""
    arguments_delta: str = attrs.field(validator=c.is_str)
    """Raw JSON text to append to the arguments; not valid JSON on its own."""


@attrs.frozen(kw_only=True)
class BlockEnd(Tagged):
    """Closes block ``index`` and carries the complete block."""

    TAG: ClassVar[str] = "block-end"

    index: int = _index_field()
    """The block being closed."""
    block: ContentBlock = attrs.field(validator=c.instance_of(*BLOCK_TYPES.values()))
    """The complete block; equal to what its deltas add up to."""


@attrs.frozen(kw_only=True)
class UsageChunk(Tagged):
    """The call's token usage; comes once, after the last block, before ``Finish``."""

    TAG: ClassVar[str] = "usage"

    usage: TokenUsage = attrs.field(validator=c.instance_of(TokenUsage))
    """The counts."""


@attrs.frozen(kw_only=True)
class Finish(Tagged):
    """The terminal chunk: why the response ended. Nothing follows it."""

    TAG: ClassVar[str] = "finish"

    reason: FinishReason = attrs.field(validator=c.instance_of(FinishReason))
    """Why the response ended."""
    replay_state: ReplayEnvelope | None = attrs.field(
        default=None, validator=c.optional(c.instance_of(ReplayEnvelope))
    )
    """Adapter-private replay state, on a successful finish only."""


StreamChunk = (
    BlockStart
    | TextDelta
    | ReasoningDelta
    | ToolCallDelta
    | BlockEnd
    | UsageChunk
    | Finish
)
"""Any chunk of the stream protocol (a closed union)."""

CHUNK_TYPES: Final[dict[str, type[StreamChunk]]] = {
    cls.TAG: cls
    for cls in (
        BlockStart,
        TextDelta,
        ReasoningDelta,
        ToolCallDelta,
        BlockEnd,
        UsageChunk,
        Finish,
    )
}
"""The seven chunk tags and their classes, in protocol order."""


def is_token_delta(chunk: StreamChunk) -> bool:
    """Whether ``chunk`` carries model output: a text or reasoning delta with
    non-empty text, or a tool-call delta with a non-empty ``arguments_delta`` or a
    name."""
    if isinstance(chunk, TextDelta | ReasoningDelta):
        return chunk.text != ""
    if isinstance(chunk, ToolCallDelta):
        return chunk.arguments_delta != "" or bool(chunk.name)
    return False
