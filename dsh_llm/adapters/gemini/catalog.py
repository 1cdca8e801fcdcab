"""Gemini models and the effort table: what each reasoning effort sends.

Pure data and one lookup; no I/O. Contracts callers may rely on:

- ``GeminiModel`` is a ``CatalogModel`` (validated like it) that adds how the
  model takes thinking (``"level"``: Gemini 3's ``thinkingLevel``;
  ``"budget"``: Gemini 2.5's ``thinkingBudget``), the efforts it offers and the
  default one. ``DEFAULT_MODELS`` is the catalog advertised when none is
  configured (every model takes text and images); it is advisory (any model id
  is sent as is, an unlisted one as text only).
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

from typing import Any
from typing import Final
from typing import Literal

import attrs

from dsh_llm.adapter import LlmModelReasoningInfo
from dsh_llm.adapter import LlmReasoningEffortInfo
from dsh_llm.adapters._wire.config import CatalogModel
from dsh_llm.config import check_one_of
from dsh_llm.config import field_error
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError

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


def _efforts_tuple(value: Any) -> Any:
    return tuple(value) if isinstance(value, list | tuple) else value


def _default_efforts(model: GeminiModel) -> tuple[str, ...]:
    if model.thinking == "budget":
        return UNLISTED_BUDGET_EFFORTS
    return UNLISTED_LEVEL_EFFORTS


def _check_efforts(
    inst: GeminiModel, attribute: attrs.Attribute[Any], value: Any
) -> None:
    table = EFFORT_LEVELS if inst.thinking == "level" else EFFORT_BUDGETS
    if not isinstance(value, tuple) or any(
        type(effort) is not str or effort not in table for effort in value
    ):
        raise field_error(
            inst,
            attribute.name,
            f'must contain only {", ".join(table)} for thinking "{inst.thinking}"',
        )


def _check_default_effort(
    inst: GeminiModel, attribute: attrs.Attribute[Any], value: Any
) -> None:
    if value is not None and value not in inst.efforts:
        raise field_error(inst, attribute.name, "must be one of the model's efforts")


@attrs.frozen(kw_only=True)
class GeminiModel(CatalogModel):
    """One advertised Gemini model: a ``CatalogModel`` (checked like it, a bad
    value raising ``AdapterConfigError`` keyed by its config key) with how it
    takes thinking."""

    thinking: ThinkingStyle = attrs.field(
        default="level", validator=check_one_of("level", "budget")
    )
    """How the model takes thinking (see the module docstring)."""
    efforts: tuple[str, ...] = attrs.field(
        default=attrs.Factory(_default_efforts, takes_self=True),
        converter=_efforts_tuple,
        validator=_check_efforts,
    )
    """The efforts offered, in display order (keys of ``EFFORT_LEVELS`` or
    ``EFFORT_BUDGETS``, by ``thinking``; default ``UNLISTED_LEVEL_EFFORTS`` or
    ``UNLISTED_BUDGET_EFFORTS``)."""
    default_effort: str | None = attrs.field(
        default=None, validator=_check_default_effort
    )
    """The effort advertised as the default (``None``: the model's own)."""


def _thinking(model_id: str) -> ThinkingStyle:
    """How a model takes thinking, by its id: Gemini 2 budgets, later levels."""
    return "budget" if model_id.startswith("gemini-2.") else "level"


_LEVELS: Final = tuple(EFFORT_LEVELS)  # every effort of a style
_BUDGETS: Final = tuple(EFFORT_BUDGETS)

_CURRENT: Final = (
    # id, name, efforts, default effort
    ("gemini-3-pro-preview", "Gemini 3 Pro (preview)", ("low", "high"), "high"),
    ("gemini-3-flash-preview", "Gemini 3 Flash (preview)", _LEVELS, "high"),
    ("gemini-2.5-pro", "Gemini 2.5 Pro", ("low", "medium", "high", "auto"), "auto"),
    ("gemini-2.5-flash", "Gemini 2.5 Flash", _BUDGETS, "auto"),
    ("gemini-2.5-flash-lite", "Gemini 2.5 Flash-Lite", _BUDGETS, "off"),
)

DEFAULT_MODELS: Final = tuple(
    GeminiModel(
        id=model_id,
        name=name,
        context_window=1_048_576,
        max_tokens=65_536,
        thinking=_thinking(model_id),
        efforts=efforts,
        default_effort=default_effort,
        input_modalities=("text", "image"),
    )
    for model_id, name, efforts, default_effort in _CURRENT
)
"""The catalog advertised when none is configured: every model holds 1M tokens,
writes up to 64k and reads text and images."""


def model_for(
    model_id: str, models: tuple[GeminiModel, ...] = DEFAULT_MODELS
) -> GeminiModel:
    """The entry of ``models`` for ``model_id``, else how an unlisted id is
    treated (see the module docstring)."""
    for entry in models:
        if entry.id == model_id:
            return entry
    return GeminiModel(id=model_id, thinking=_thinking(model_id))


def effort_in_force(model: GeminiModel, configured: str | None) -> str | None:
    """The effort sent to ``model`` when a request names none: ``configured``
    (a config's ``reasoning_effort``) when the model offers it, else the
    model's default."""
    if configured in model.efforts:
        return configured
    return model.default_effort


def reasoning_info(model: GeminiModel, configured: str | None) -> LlmModelReasoningInfo:
    """``model``'s efforts as ``LlmModelReasoningInfo`` (``auto`` shown as
    ``Auto``, the others capitalised), the default ``effort_in_force``."""
    return LlmModelReasoningInfo(
        efforts=tuple(
            LlmReasoningEffortInfo(
                id=effort, name="Auto" if effort == "auto" else effort.capitalize()
            )
            for effort in model.efforts
        ),
        default_effort=effort_in_force(model, configured),
    )


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
    # A model's efforts are checked against its thinking style on construction.
    if model.thinking == "budget":
        budget = EFFORT_BUDGETS[effort]
        if budget == 0:
            return {"thinkingBudget": 0}
        return {"thinkingBudget": budget, "includeThoughts": True}
    return {"thinkingLevel": EFFORT_LEVELS[effort], "includeThoughts": True}
