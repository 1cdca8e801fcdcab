"""Advisory facts about current Claude models, as plain frozen data.

The catalog is advice, not a gate: any model id is sent as given. It says how big
a model's context window and output cap are, what the adapter sends as
``max_tokens`` by default, and how the model thinks (``ThinkingProfile``), which
decides the shape of the ``thinking`` request fields (``request.thinking_fields``).

Contracts callers may rely on:

- ``CATALOG`` lists the current Claude API models (December 2026) in the order a
  picker should show them; ids are unique. Every entry takes text and image
  input (``input_modalities``), which the adapter sends as ``image`` blocks.
- ``ThinkingProfile.style`` is ``budget`` (``thinking: {type: enabled,
  budget_tokens}``, extended thinking) or ``adaptive`` (``thinking: {type:
  adaptive}`` with ``output_config.effort``; these models reject a budget with a
  400). ``efforts`` lists ``off`` only where thinking can be turned off.
- ``ClaudeModel.catalog_model(cls)`` is the entry as a config catalog entry
  (the Anthropic, Bedrock and Vertex AI catalogs make theirs with it).
- ``model_entry(id)`` is the entry or ``None``; ``thinking_profile(id)`` is the
  entry's profile, else ``BUDGET_THINKING`` (the shape older Claude models and
  Anthropic-compatible servers accept). ``reasoning_info(profile)`` is the
  profile as the ``LlmModelReasoningInfo`` a ``resolve_model`` reports.
"""

from __future__ import annotations

from typing import Any
from typing import Final
from typing import Literal
from typing import TypeVar

import attrs

from dsh_llm.adapter import LlmModelReasoningInfo
from dsh_llm.adapter import LlmReasoningEffortInfo
from dsh_llm.adapters._wire.config import CatalogModel

M = TypeVar("M", bound=CatalogModel)

BUDGET_EFFORTS: Final = ("off", "low", "medium", "high", "max")
"""The efforts of a ``budget`` model: ``off`` sends no thinking, the others a
budget (``request.BUDGET_TOKENS``)."""
ADAPTIVE_EFFORTS: Final = ("low", "medium", "high", "xhigh", "max")
"""The ``output_config.effort`` levels of an ``adaptive`` model."""


@attrs.frozen(kw_only=True)
class ThinkingProfile:
    """How a model thinks, and what the request may say about it."""

    style: Literal["budget", "adaptive"]
    """``budget``: extended thinking with ``budget_tokens``; ``adaptive``: the
    model decides, ``output_config.effort`` steers it."""
    efforts: tuple[str, ...]
    """The effort ids the adapter accepts for this model (``off`` included only
    when thinking can be disabled)."""
    default_effort: str
    """The effort the model uses when the request names none."""
    thinks_by_default: bool
    """Whether the model thinks when the request sends no ``thinking`` field (so
    options refused with thinking on are refused without an effort too)."""


BUDGET_THINKING: Final = ThinkingProfile(
    style="budget",
    efforts=BUDGET_EFFORTS,
    default_effort="off",
    thinks_by_default=False,
)
"""Extended thinking, off unless asked for: Claude Haiku 4.5, older models, and
the profile assumed for a model id the catalog does not know."""

_ALWAYS_ON: Final = ADAPTIVE_EFFORTS
_SWITCHABLE: Final = ("off", *ADAPTIVE_EFFORTS)


@attrs.frozen(kw_only=True)
class ClaudeModel:
    """One catalog entry."""

    id: str
    """The Claude API model id, sent as ``model``."""
    name: str
    """The display name."""
    context_window: int
    """Input plus output tokens the model can hold."""
    max_output_tokens: int
    """The largest ``max_tokens`` the model accepts."""
    default_max_tokens: int
    """The ``max_tokens`` sent when the request sets none (``max_tokens`` is
    required by the API)."""
    thinking: ThinkingProfile
    """How the model thinks."""
    input_modalities: tuple[str, ...] = ("text", "image")
    """What the adapter can send this model: text and images (every Claude
    model in the catalog reads images)."""

    def catalog_model(
        self, cls: type[M], model_id: str | None = None, **extra: Any
    ) -> M:
        """This model as a config catalog entry of ``cls`` (``CatalogModel``, or
        a family's subclass with its ``extra`` fields): the id (or ``model_id``,
        a front door's spelling of it), name, context window and inputs, with
        ``default_max_tokens`` as the entry's ``max_tokens``."""
        return cls(
            id=model_id or self.id,
            name=self.name,
            context_window=self.context_window,
            max_tokens=self.default_max_tokens,
            input_modalities=self.input_modalities,
            **extra,
        )


def _claude_5(
    model_id: str, name: str, default_effort: str, efforts: tuple[str, ...] = _ALWAYS_ON
) -> ClaudeModel:
    """A Claude 5 entry: 1M context, 128k output (64k by default), adaptive
    thinking on by default."""
    return ClaudeModel(
        id=model_id,
        name=name,
        context_window=1_000_000,
        max_output_tokens=128_000,
        default_max_tokens=64_000,
        thinking=ThinkingProfile(
            style="adaptive",
            efforts=efforts,
            default_effort=default_effort,
            thinks_by_default=True,
        ),
    )


CATALOG: Final[tuple[ClaudeModel, ...]] = (
    _claude_5("claude-opus-5-5", "Claude Opus 5.5", "medium"),
    _claude_5("claude-fable-5-1", "Claude Fable 5.1", "high"),
    _claude_5("claude-sonnet-5-5", "Claude Sonnet 5.5", "high"),
    # Thinking may be disabled on Opus 5 (at effort high or below, which its
    # default effort is).
    _claude_5("claude-opus-5", "Claude Opus 5", "high", _SWITCHABLE),
    _claude_5("claude-sonnet-5", "Claude Sonnet 5", "high"),
    ClaudeModel(
        id="claude-haiku-4-5",
        name="Claude Haiku 4.5",
        context_window=200_000,
        max_output_tokens=64_000,
        default_max_tokens=32_000,
        thinking=BUDGET_THINKING,
    ),
)
"""The current Claude models, newest first."""

_BY_ID: Final = {entry.id: entry for entry in CATALOG}


def model_entry(model: str) -> ClaudeModel | None:
    """The catalog entry for ``model``, or ``None``."""
    return _BY_ID.get(model)


def thinking_profile(model: str) -> ThinkingProfile:
    """``model``'s thinking profile; ``BUDGET_THINKING`` for an unknown id."""
    entry = _BY_ID.get(model)
    return BUDGET_THINKING if entry is None else entry.thinking


_EFFORT_NAMES: Final = {"off": "Off", "xhigh": "Extra high", "max": "Max"}


def reasoning_info(
    profile: ThinkingProfile, default_effort: str | None = None
) -> LlmModelReasoningInfo:
    """``profile``'s efforts as ``LlmModelReasoningInfo``, in the profile's order;
    the default is ``default_effort`` (a configured one) when the profile offers
    it, else the profile's own."""
    default = (
        default_effort if default_effort in profile.efforts else profile.default_effort
    )
    return LlmModelReasoningInfo(
        efforts=tuple(
            LlmReasoningEffortInfo(
                id=effort, name=_EFFORT_NAMES.get(effort, effort.capitalize())
            )
            for effort in profile.efforts
        ),
        default_effort=default if default in profile.efforts else None,
    )
