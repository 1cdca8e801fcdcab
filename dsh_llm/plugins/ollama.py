"""The ``llm-ollama`` plugin: registers ``OllamaAdapter`` for the ``ollama`` route
from a composition entry.

Contracts callers may rely on:

- ``Config`` is ``OllamaConfig``: camelCase keys (``baseURL``, ``apiKeyEnv``,
  ``keepAlive``, ``reasoningEffort``, ``models``, ``streamIdleTimeoutMs``,
  ``streamKeepaliveTimeoutMs``, ``totalTimeoutMs``, ``retryPolicy``,
  ``poolMaxsize``, ``emptyResponseAsStop``), all optional (``baseURL`` defaults
  to ``http://127.0.0.1:11434``; no key unless ``apiKeyEnv`` names one).
- The loader structures the entry into ``OllamaConfig``, whose checks key a bad
  value by its config key; nothing stays registered then. Loading does no I/O:
  without ``models`` the catalog is read from the server when listed.
- Disposing the plugin unregisters the route, then closes the adapter's pool.
"""

from __future__ import annotations

from typing import Final

from dsh_llm.adapters.ollama import PROVIDER_ROUTE, OllamaAdapter, OllamaConfig
from dsh_llm.plugins import PluginContext

__all__ = ["Config", "apply", "inject", "name"]

name: Final = "llm-ollama"
"""The plugin's label."""
inject: Final = ("llm",)
"""Services the plugin needs."""
Config = OllamaConfig
"""The plugin's config class."""


def apply(ctx: PluginContext, config: OllamaConfig | None) -> None:
    """Register ``OllamaAdapter`` for ``ollama``."""
    adapter = OllamaAdapter.from_config(
        OllamaConfig() if config is None else config, environ=ctx.environ
    )
    ctx.effect(adapter.close)
    ctx.llm.register_adapter([PROVIDER_ROUTE], adapter)
