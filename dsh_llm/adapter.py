"""``LlmAdapter``: the one base class every provider adapter extends.

Contracts callers may rely on:

- Only ``stream(options)`` is abstract. It is a plain generator (no asyncio) that
  yields ``StreamChunk`` values in the protocol's order (see ``dsh_llm.protocol``),
  raises ``LlmError`` with a stable code on failure (never forging a ``Finish`` to
  hide an exception), honours ``options.signal``, never mutates its input, and
  closes every HTTP response it opened when it ends, fails or is closed early.
- One call, one attempt: adapters never retry; retries happen above them.
- The metadata methods have working defaults (a route named after itself, no
  catalog, a model resolved to its own id, the normal retry policy) and may be
  overridden. They do no I/O unless an adapter documents otherwise.
- ``count_tokens(options)`` counts a request's input tokens where the provider
  can; the default refuses with ``UNSUPPORTED_OPTION``.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from collections.abc import Iterator
from typing import Final

import attrs

from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import checks as c
from dsh_llm.retry import RetryPolicy
from dsh_llm.signal import AbortSignal

__all__ = [
    "MODALITIES",
    "LlmAdapter",
    "LlmModelContext",
    "LlmModelInfo",
    "LlmModelReasoningInfo",
    "LlmProviderInfo",
    "LlmReasoningEffortInfo",
    "LlmResolvedModelInfo",
    "PreparedAdapterCall",
]

MODALITIES: Final = ("text", "image")
"""The input modalities a model may declare."""


@attrs.frozen(kw_only=True)
class LlmProviderInfo:
    """Display facts about one provider route."""

    id: str = attrs.field(validator=c.is_str)
    """The route (must equal the route it describes)."""
    name: str = attrs.field(validator=c.is_str)
    """Human-readable name, e.g. ``DeepSeek``."""


@attrs.frozen(kw_only=True)
class LlmModelInfo:
    """One model an adapter advertises. Advisory: catalogs never gate requests."""

    provider: str
    """The route that owns the model."""
    id: str
    """The model id to put in ``GenerateOptions.model``."""
    name: str
    """Human-readable name."""
    description: str | None = None
    """What sets it apart, when useful."""
    input_modalities: tuple[str, ...] | None = attrs.field(
        default=None, converter=c.to_optional_tuple
    )
    """Accepted inputs; ``None`` means unknown, a tuple without ``image`` means
    text only."""


@attrs.frozen(kw_only=True)
class LlmModelContext:
    """Context capacity of one model."""

    context_window: int
    """Maximum request plus response tokens."""


@attrs.frozen(kw_only=True)
class LlmReasoningEffortInfo:
    """One selectable reasoning effort."""

    id: str
    """The value for ``GenerateOptions.reasoning_effort``."""
    name: str
    """Human-readable name."""
    description: str | None = None
    """What sets it apart, when useful."""


@attrs.frozen(kw_only=True)
class LlmModelReasoningInfo:
    """The reasoning efforts one model offers."""

    efforts: tuple[LlmReasoningEffortInfo, ...] = attrs.field(converter=c.to_tuple)
    """Offered efforts, in display order."""
    default_effort: str | None = None
    """The effort applied when a request names none (``None``: provider default)."""


@attrs.frozen(kw_only=True)
class LlmResolvedModelInfo(LlmModelInfo):
    """Everything known about one exact provider/model pair: its catalog facts
    and what a call needs."""

    context: LlmModelContext | None = None
    """Context capacity, when known."""
    default_max_tokens: int | None = None
    """Output cap applied when a request names none."""
    reasoning: LlmModelReasoningInfo | None = None
    """Selectable efforts; ``None`` when the model has no reasoning control."""


@attrs.frozen(kw_only=True)
class PreparedAdapterCall:
    """Model facts and the dispatch function taken from one adapter generation,
    so a configuration change between the two cannot mix them."""

    model: LlmResolvedModelInfo
    """The resolved model."""
    stream: Callable[[GenerateOptions], Iterator[StreamChunk]]
    """Dispatches the call (normally the adapter's own ``stream``)."""


class LlmAdapter(abc.ABC):
    """Base class of every provider adapter. Subclasses implement ``stream``."""

    def provider_info(self, provider: str) -> LlmProviderInfo:
        """Display facts for route ``provider`` (default: named after itself)."""
        return LlmProviderInfo(id=provider, name=provider)

    def provider_retry_policy(self, provider: str) -> RetryPolicy | None:
        """The retry policy for route ``provider``; ``None`` means the normal
        defaults. Captured by the runtime when the route is registered."""
        return None

    def list_models(
        self, provider: str, signal: AbortSignal | None = None
    ) -> tuple[LlmModelInfo, ...]:
        """The models this adapter advertises for ``provider`` (default: none);
        an adapter that asks its server honours ``signal``."""
        return ()

    def resolve_model(
        self, provider: str, model: str, signal: AbortSignal | None = None
    ) -> LlmResolvedModelInfo:
        """Everything known about ``model`` on ``provider`` (default: only its id,
        used as its name). Unlisted ids resolve too."""
        return LlmResolvedModelInfo(provider=provider, id=model, name=model)

    def prepare_call(
        self, provider: str, model: str, signal: AbortSignal | None = None
    ) -> PreparedAdapterCall:
        """Resolve ``model`` and bind the dispatch to the same adapter generation.

        Adapters whose configuration can change at run time override this.
        """
        return PreparedAdapterCall(
            model=self.resolve_model(provider, model, signal), stream=self.stream
        )

    def count_tokens(self, options: GenerateOptions) -> int:
        """The input tokens ``options`` would cost, counted by the provider
        before any call (default: refused).

        Raises:
            LlmError: ``UNSUPPORTED_OPTION`` when the adapter cannot count
                (the default); what counting raises otherwise.
        """
        raise LlmError(
            f"the adapter for provider route {options.provider!r} cannot count "
            "tokens before a call",
            ErrorCode.UNSUPPORTED_OPTION,
        )

    @abc.abstractmethod
    def stream(self, options: GenerateOptions) -> Iterator[StreamChunk]:
        """Stream one model call as protocol chunks (a plain generator).

        Raises:
            LlmError: with a stable code when the call fails.
        """
        ...
