"""Gemini models and the effort table: what each reasoning effort sends.

Pure data and one lookup; no I/O. Contracts callers may rely on:

- ``GeminiModel`` describes one advertised model: its context window, output
  cap, how it takes thinking (``"level"``: Gemini 3's ``thinkingLevel``;
  ``"budget"``: Gemini 2.5's ``thinkingBudget``), the efforts it offers and the
  default one, and its inputs. ``DEFAULT_MODELS`` is the catalog advertised
  when none is configured (every model takes text and images); it is advisory
  (any model id is sent as is, an unlisted one as text only).
- ``model_for(model_id, models)`` is the listed entry, else the entry an
  unlisted id is treated as: ids starting ``gemini-2.`` take budgets
  (``UNLISTED_BUDGET_EFFORTS``), every other id takes levels
  (``UNLISTED_LEVEL_EFFORTS``), both with no default effort.
- ``thinking_config(model, effort)`` is the ``generationConfig.thinkingConfig``
  object (``EFFORT_LEVELS`` / ``EFFORT_BUDGETS``): every effort but ``off``
  sets ``includeThoughts: true`` so thought summaries stream as reasoning; no
  effort sends ``includeThoughts`` alone (the model's own default thinking); an
  effort the model does not offer raises ``UNSUPPORTED_REASONING_EFFORT``.
"""

from __future__ import annotations

from typing import Any, Final, Literal

import attrs

from dsh_llm.errors import ErrorCode, LlmError

__all__ = [
    "DEFAULT_MODELS",
    "EFFORT_BUDGETS",
    "EFFORT_LEVELS",
    "UNLISTED_BUDGET_EFFORTS",
    "UNLISTED_LEVEL_EFFORTS",
    "GeminiModel",
    "ThinkingStyle",
    "model_for",
    "thinking_config",
]

ThinkingStyle = Literal["level", "budget"]
"""How a model takes its thinking setting."""

EFFORT_LEVELS: Final[dict[str, str]] = {
    "minimal": "MINIMAL",
    "low": "LOW",
    "medium": "MEDIUM",
    "high": "HIGH",
}
"""Effort id to ``thinkingLevel`` (Gemini 3 and later)."""

EFFORT_BUDGETS: Final[dict[str, int]] = {
    "off": 0,
    "low": 1024,
    "medium": 8192,
    "high": 24576,
    "auto": -1,
}
"""Effort id to ``thinkingBudget`` in tokens (Gemini 2.5; ``0`` turns thinking
off, ``-1`` lets the model decide)."""

UNLISTED_LEVEL_EFFORTS: Final = ("minimal", "low", "medium", "high")
"""Efforts offered for an unlisted model that takes levels."""
UNLISTED_BUDGET_EFFORTS: Final = ("off", "low", "medium", "high", "auto")
"""Efforts offered for an unlisted ``gemini-2.*`` model."""

_CONTEXT: Final = 1_048_576
_OUTPUT: Final = 65_536
_TEXT_AND_IMAGE: Final = ("text", "image")


@attrs.frozen(kw_only=True)
class GeminiModel:
    """One advertised Gemini model."""

    id: str
    """The wire model id (``gemini-3-pro-preview``)."""
    name: str | None = None
    """Display name (default: the id)."""
    description: str | None = None
    """What sets it apart."""
    context_window: int | None = None
    """Input plus output tokens, when known."""
    max_tokens: int | None = None
    """The model's output cap, sent as ``maxOutputTokens`` when a request has
    none; ``None``: the server's default."""
    thinking: ThinkingStyle = "level"
    """How the model takes thinking (see the module docstring)."""
    efforts: tuple[str, ...] = UNLISTED_LEVEL_EFFORTS
    """The efforts offered, in display order (keys of ``EFFORT_LEVELS`` or
    ``EFFORT_BUDGETS``, by ``thinking``)."""
    default_effort: str | None = None
    """The effort advertised as the default (``None``: the model's own)."""
    input_modalities: tuple[str, ...] = ("text",)
    """Accepted inputs (``"text"``, ``"image"``); images are sent only to a
    model whose entry lists ``"image"`` (a configured entry without
    ``inputModalities`` is text only)."""


DEFAULT_MODELS: Final = (
    GeminiModel(
        id="gemini-3-pro-preview",
        name="Gemini 3 Pro (preview)",
        context_window=_CONTEXT,
        max_tokens=_OUTPUT,
        thinking="level",
        efforts=("low", "high"),
        default_effort="high",
        input_modalities=_TEXT_AND_IMAGE,
    ),
    GeminiModel(
        id="gemini-3-flash-preview",
        name="Gemini 3 Flash (preview)",
        context_window=_CONTEXT,
        max_tokens=_OUTPUT,
        thinking="level",
        efforts=("minimal", "low", "medium", "high"),
        default_effort="high",
        input_modalities=_TEXT_AND_IMAGE,
    ),
    GeminiModel(
        id="gemini-2.5-pro",
        name="Gemini 2.5 Pro",
        context_window=_CONTEXT,
        max_tokens=_OUTPUT,
        thinking="budget",
        efforts=("low", "medium", "high", "auto"),
        default_effort="auto",
        input_modalities=_TEXT_AND_IMAGE,
    ),
    GeminiModel(
        id="gemini-2.5-flash",
        name="Gemini 2.5 Flash",
        context_window=_CONTEXT,
        max_tokens=_OUTPUT,
        thinking="budget",
        efforts=("off", "low", "medium", "high", "auto"),
        default_effort="auto",
        input_modalities=_TEXT_AND_IMAGE,
    ),
    GeminiModel(
        id="gemini-2.5-flash-lite",
        name="Gemini 2.5 Flash-Lite",
        context_window=_CONTEXT,
        max_tokens=_OUTPUT,
        thinking="budget",
        efforts=("off", "low", "medium", "high", "auto"),
        default_effort="off",
        input_modalities=_TEXT_AND_IMAGE,
    ),
)
"""The catalog advertised when none is configured."""


def model_for(
    model_id: str, models: tuple[GeminiModel, ...] = DEFAULT_MODELS
) -> GeminiModel:
    """The entry of ``models`` for ``model_id``, else how an unlisted id is
    treated (see the module docstring)."""
    for entry in models:
        if entry.id == model_id:
            return entry
    if model_id.startswith("gemini-2."):
        return GeminiModel(
            id=model_id, thinking="budget", efforts=UNLISTED_BUDGET_EFFORTS
        )
    return GeminiModel(id=model_id, thinking="level", efforts=UNLISTED_LEVEL_EFFORTS)


def thinking_config(model: GeminiModel, effort: str | None) -> dict[str, Any]:
    """The ``thinkingConfig`` for ``effort`` on ``model``.

    Raises:
        LlmError: ``UNSUPPORTED_REASONING_EFFORT`` for an effort ``model`` does
            not offer.
    """
    if effort is None:
        return {"includeThoughts": True}
    if effort not in model.efforts:
        offered = ", ".join(model.efforts)
        raise LlmError(
            f'Gemini model "{model.id}" does not support reasoning effort '
            f'"{effort}" (offered: {offered})',
            ErrorCode.UNSUPPORTED_REASONING_EFFORT,
        )
    if model.thinking == "budget" and effort in EFFORT_BUDGETS:
        budget = EFFORT_BUDGETS[effort]
        if budget == 0:
            return {"thinkingBudget": 0}
        return {"thinkingBudget": budget, "includeThoughts": True}
    if model.thinking == "level" and effort in EFFORT_LEVELS:
        return {"thinkingLevel": EFFORT_LEVELS[effort], "includeThoughts": True}
    raise LlmError(
        f'Gemini model "{model.id}" lists reasoning effort "{effort}", which its '
        f"thinking style ({model.thinking}) has no setting for",
        ErrorCode.UNSUPPORTED_REASONING_EFFORT,
    )
