"""``OllamaAdapter``: Ollama's native ``POST /api/chat`` (NDJSON).

- One route, ``ollama``, displayed as ``Ollama``; built like every family's
  adapter (``dsh_llm.adapters``): the constructor's ``base_url`` and keywords
  build an ``OllamaConfig``, ``from_config`` takes one; a bad value's message
  reads ``llm-ollama: <key> <detail>``.
- No key by default (a local server); ``api_key`` or ``api_key_env`` (read at
  each request) sends ``authorization: Bearer`` for a hosted Ollama, never shown
  in a message or a ``repr``.
- No I/O on construction or in ``resolve_model``; ``list_models`` reads
  ``GET {base}/api/tags`` (bounded as a whole) only when ``models`` is unset.
- ``family`` holds the listing; no ``catalog``. User guide: ``docs/ollama.md``.
"""

from __future__ import annotations

from dsh_llm.adapters._wire.adapter import ServerAdapter
from dsh_llm.adapters.ollama.family import DEFAULT_BASE_URL
from dsh_llm.adapters.ollama.family import FAMILY
from dsh_llm.adapters.ollama.family import PROVIDER_ROUTE
from dsh_llm.adapters.ollama.family import OllamaConfig

__all__ = [
    "DEFAULT_BASE_URL",
    "FAMILY",
    "PROVIDER_ROUTE",
    "OllamaAdapter",
    "OllamaConfig",
]


class OllamaAdapter(ServerAdapter[OllamaConfig]):
    """Streams Ollama ``/api/chat`` (see the module docstring); ``ServerAdapter``'s
    arguments, the keywords building an ``OllamaConfig`` (``base_url`` by
    default ``DEFAULT_BASE_URL``, ``http://127.0.0.1:11434``)."""

    family = FAMILY
