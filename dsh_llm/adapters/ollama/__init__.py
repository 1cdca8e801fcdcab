"""``OllamaAdapter``: Ollama's native ``POST /api/chat`` (NDJSON).

- One route, ``ollama``, displayed as ``Ollama``; ``OllamaConfig`` is its one
  validated configuration (the constructor's keywords build it; ``from_config``
  takes one); a bad value raises ``dsh_llm.adapters.AdapterConfigError`` keyed by
  its config key (``llm-ollama: <key> <detail>``).
- No key by default (a local server); ``api_key`` or ``api_key_env`` (read at
  each request) sends ``authorization: Bearer`` for a hosted Ollama, never shown
  in a message or a ``repr``.
- No I/O on construction or in ``resolve_model``; ``list_models`` reads
  ``GET {base}/api/tags`` (bounded as a whole) only when ``models`` is unset.
- The family's parts: ``family`` (config, endpoint, request hook, listing,
  ``FAMILY``), ``request`` (pure builder), ``translate`` (pure translator),
  ``errors``. User guide: ``docs/ollama.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dsh_llm.adapters._wire.adapter import WireAdapter
from dsh_llm.adapters._wire.config import config_from_options
from dsh_llm.adapters.ollama.family import DEFAULT_BASE_URL
from dsh_llm.adapters.ollama.family import FAMILY
from dsh_llm.adapters.ollama.family import PROVIDER_ROUTE
from dsh_llm.adapters.ollama.family import OllamaConfig
from dsh_llm.credentials import Secret

__all__ = [
    "DEFAULT_BASE_URL",
    "FAMILY",
    "PROVIDER_ROUTE",
    "OllamaAdapter",
    "OllamaConfig",
]


class OllamaAdapter(WireAdapter[OllamaConfig]):
    """Streams Ollama ``/api/chat`` (see the module docstring).

    The keyword arguments are ``OllamaConfig``'s fields (``api_key_env``,
    ``keep_alive``, ``reasoning_effort``, ``models``, the three stream timeouts,
    ``retry_policy``, ``pool_maxsize``, ``empty_response_as_stop``) and build one;
    ``OllamaAdapter.from_config(config)`` takes one built elsewhere.

    Args:
        base_url: The server's root (default ``http://127.0.0.1:11434``).
        api_key: A bearer key for a hosted Ollama (``str`` or ``Secret``).
        environ: Where ``api_key_env`` is read (default ``os.environ``, live).
        **options: Further ``OllamaConfig`` fields.

    Raises:
        AdapterConfigError: for an invalid option.
        TypeError: for a keyword that is not an ``OllamaConfig`` field.
        LlmError: ``INVALID_CREDENTIAL`` for an explicit key no header can carry.
    """

    family = FAMILY

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        *,
        api_key: str | Secret | None = None,
        environ: Mapping[str, str] | None = None,
        **options: Any,
    ) -> None:
        options["base_url"] = base_url
        self._setup(
            config_from_options(OllamaConfig, options),
            api_key=api_key,
            environ=environ,
        )
