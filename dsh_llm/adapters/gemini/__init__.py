"""``GeminiAdapter``: Google's Gemini API (``streamGenerateContent``).

- One route, ``gemini``, displayed as ``Gemini``; an advisory catalog of the
  current Gemini models with their thinking style and efforts;
  ``resolve_model`` and ``list_models`` need no I/O.
- ``GeminiConfig`` is its one validated configuration (the constructor's
  keywords build it; ``from_config`` takes one); a bad value raises
  ``dsh_llm.adapters.AdapterConfigError`` keyed by its config key.
- The key is read per request (``api_key``, else ``GEMINI_API_KEY``), travels in
  the ``x-goog-api-key`` header and never appears in a URL, a message or a
  ``repr``.
- The family's parts: ``family`` (config, endpoint, request hook, ``FAMILY``),
  ``request`` (pure builder), ``translate`` (pure translator), ``arguments``
  (streamed call arguments), ``images``, ``replay``, ``errors``, ``catalog``.
  User guide: ``docs/gemini.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dsh_llm.adapters._wire.adapter import WireAdapter
from dsh_llm.adapters._wire.config import config_from_options
from dsh_llm.adapters.gemini.catalog import DEFAULT_MODELS
from dsh_llm.adapters.gemini.catalog import GeminiModel
from dsh_llm.adapters.gemini.family import DEFAULT_API_KEY_ENV
from dsh_llm.adapters.gemini.family import FAMILY
from dsh_llm.adapters.gemini.family import PROVIDER_ROUTE
from dsh_llm.adapters.gemini.family import PUBLIC_BASE_URL
from dsh_llm.adapters.gemini.family import GeminiConfig
from dsh_llm.credentials import Secret

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
    """Streams Gemini ``streamGenerateContent`` (see the module docstring).

    ``GeminiAdapter.from_config(config)`` takes a ``GeminiConfig`` built
    elsewhere.

    Args:
        api_key: The key (``str`` or ``Secret``); ``None`` reads ``api_key_env``
            from the environment at each request.
        base_url: The API root (``None``: ``PUBLIC_BASE_URL``).
        api_key_env: The variable holding the key (``GEMINI_API_KEY``).
        environ: Where variables are read (default ``os.environ``, live).
        **options: Further ``GeminiConfig`` fields (``reasoning_effort``,
            ``models``, the three stream timeouts, ``retry_policy``,
            ``pool_maxsize``, ``empty_response_as_stop``).

    Raises:
        AdapterConfigError: for an invalid option.
        TypeError: for a keyword that is not a ``GeminiConfig`` field.
        LlmError: ``INVALID_CREDENTIAL`` for an explicit key no header can carry.
    """

    family = FAMILY

    def __init__(
        self,
        api_key: str | Secret | None = None,
        *,
        base_url: str | None = None,
        api_key_env: str = DEFAULT_API_KEY_ENV,
        environ: Mapping[str, str] | None = None,
        **options: Any,
    ) -> None:
        options.update(base_url=base_url, api_key_env=api_key_env)
        self._setup(
            config_from_options(GeminiConfig, options),
            api_key=api_key,
            environ=environ,
        )
