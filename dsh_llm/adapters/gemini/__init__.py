"""``GeminiAdapter``: Google's Gemini API (``streamGenerateContent``).

- One route, ``gemini``, displayed as ``Gemini``; an advisory catalog of the
  current Gemini models with their thinking style and efforts;
  ``resolve_model`` and ``list_models`` need no I/O.
- Built like every family's adapter (``dsh_llm.adapters``): the constructor's
  keywords are ``GeminiConfig``'s fields, ``from_config`` takes one.
- The key is read per request (``api_key``, else ``GEMINI_API_KEY``), travels in
  the ``x-goog-api-key`` header and never appears in a URL, a message or a
  ``repr``.
- Beyond every family's parts: ``arguments`` (streamed call arguments),
  ``images``, ``replay``. User guide: ``docs/gemini.md``.
"""

from __future__ import annotations

from dsh_llm.adapters._wire.adapter import WireAdapter
from dsh_llm.adapters.gemini.catalog import DEFAULT_MODELS
from dsh_llm.adapters.gemini.catalog import GeminiModel
from dsh_llm.adapters.gemini.family import DEFAULT_API_KEY_ENV
from dsh_llm.adapters.gemini.family import FAMILY
from dsh_llm.adapters.gemini.family import PROVIDER_ROUTE
from dsh_llm.adapters.gemini.family import PUBLIC_BASE_URL
from dsh_llm.adapters.gemini.family import GeminiConfig

__all__ = [
    "DEFAULT_API_KEY_ENV",
    "DEFAULT_MODELS",
    "FAMILY",
    "PROVIDER_ROUTE",
    "PUBLIC_BASE_URL",
    "GeminiAdapter",
    "GeminiConfig",
    "GeminiModel",
]


class GeminiAdapter(WireAdapter[GeminiConfig]):
    """Streams Gemini ``streamGenerateContent`` (see the module docstring);
    ``WireAdapter``'s arguments, the keywords building a ``GeminiConfig``
    (``base_url`` ``None`` is ``PUBLIC_BASE_URL``)."""

    family = FAMILY
