"""Vertex AI models: which publisher serves an id, and the advertised catalog.

Pure data and lookups; no I/O. Contracts callers may rely on:

- ``VertexModel`` is a ``GeminiModel`` (validated like it) that adds its
  ``publisher``: ``google`` (Gemini, ``streamGenerateContent``, the Gemini
  wire) or ``anthropic`` (Claude, ``streamRawPredict``, the Messages wire). By
  default an id starting ``claude`` is ``anthropic``, any other ``google``. The
  Gemini thinking fields (``thinking``, ``efforts``, ``default_effort``) apply
  to Gemini models only: a Claude model's efforts are the Anthropic catalog's.
- ``DEFAULT_MODELS`` lists the Gemini catalog's models and the Anthropic
  catalog's Claude models, with their windows, output caps and inputs.
- ``publisher_for(model_id, models)`` is the listed entry's publisher, else the
  one the id's prefix says.
- ``claude_id(model_id)`` is the Anthropic catalog id of a Vertex Claude id
  (``claude-haiku-4-5@20251001`` is ``claude-haiku-4-5``); ``claude_entry`` is
  the listed entry of a Claude id, else one made from the Anthropic catalog
  (text and images), else ``None``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from typing import Final
from typing import Literal

import attrs

from dsh_llm.adapters._wire.config import catalog_entry
from dsh_llm.adapters.anthropic import catalog as claude
from dsh_llm.adapters.gemini.catalog import DEFAULT_MODELS as GEMINI_MODELS
from dsh_llm.adapters.gemini.catalog import GeminiModel
from dsh_llm.config import check_one_of

Publisher = Literal["google", "anthropic"]
"""Who publishes a model on Vertex AI (the path's ``publishers/{publisher}``)."""

GOOGLE: Final = "google"
"""Gemini models: ``streamGenerateContent``, the Gemini wire."""
ANTHROPIC: Final = "anthropic"
"""Claude models: ``streamRawPredict``, the Anthropic Messages wire."""
PUBLISHERS: Final = (GOOGLE, ANTHROPIC)
"""Every publisher this adapter speaks to."""


def publisher_of_id(model_id: str) -> Publisher:
    """The publisher an id names by itself: ``anthropic`` for ``claude*``, else
    ``google``."""
    return ANTHROPIC if model_id.startswith("claude") else GOOGLE


def _default_publisher(model: VertexModel) -> Publisher:
    return publisher_of_id(model.id)


@attrs.frozen(kw_only=True)
class VertexModel(GeminiModel):
    """One advertised Vertex AI model: a ``GeminiModel`` (checked like it, a bad
    value raising ``AdapterConfigError`` keyed by its config key) with its
    publisher."""

    publisher: Publisher = attrs.field(
        default=attrs.Factory(_default_publisher, takes_self=True),
        validator=check_one_of(*PUBLISHERS),
    )
    """``google`` or ``anthropic`` (default: ``anthropic`` for an id starting
    ``claude``, else ``google``)."""


def claude_id(model_id: str) -> str:
    """The Anthropic catalog id of a Vertex Claude id (its ``@version`` cut)."""
    return model_id.partition("@")[0]


def _gemini_entry(model: GeminiModel) -> VertexModel:
    return VertexModel(**attrs.asdict(model, recurse=False), publisher=GOOGLE)


def _claude_entry(model: claude.ClaudeModel, model_id: str) -> VertexModel:
    return model.catalog_model(VertexModel, model_id, efforts=(), publisher=ANTHROPIC)


DEFAULT_MODELS: Final = tuple(_gemini_entry(model) for model in GEMINI_MODELS) + tuple(
    _claude_entry(model, model.id) for model in claude.CATALOG
)
"""The catalog advertised when none is configured: Gemini's, then Claude's."""


def configured_defaults(model_id: str) -> Mapping[str, Any]:
    """What a configured entry of ``model_id`` takes by default (config keys): a
    Claude id reads images; a Gemini id nothing (an entry without
    ``inputModalities`` is text only)."""
    if publisher_of_id(model_id) == ANTHROPIC:
        return {"inputModalities": ["text", "image"]}
    return {}


def publisher_for(
    model_id: str, models: tuple[VertexModel, ...] = DEFAULT_MODELS
) -> Publisher:
    """The publisher of ``model_id``: its entry's in ``models``, else the id's."""
    entry = catalog_entry(models, model_id)
    return publisher_of_id(model_id) if entry is None else entry.publisher


def claude_entry(
    model_id: str, models: tuple[VertexModel, ...] = DEFAULT_MODELS
) -> VertexModel | None:
    """The entry of Claude id ``model_id``: listed in ``models``, else made from
    the Anthropic catalog entry of ``claude_id(model_id)``, else ``None``."""
    entry = catalog_entry(models, model_id)
    if entry is not None:
        return entry
    known = claude.model_entry(claude_id(model_id))
    return None if known is None else _claude_entry(known, model_id)
