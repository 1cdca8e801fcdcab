"""The ``llm-gemini`` plugin: registers ``GeminiAdapter`` for the ``gemini`` route
from a composition entry.

Contracts callers may rely on:

- ``Config`` is ``GeminiConfig``: camelCase keys (``apiKeyEnv``, ``baseURL``,
  ``reasoningEffort``, ``models``, ``streamIdleTimeoutMs``,
  ``streamKeepaliveTimeoutMs``, ``totalTimeoutMs``, ``retryPolicy``,
  ``poolMaxsize``, ``emptyResponseAsStop``), all optional. A config never holds
  a key: ``apiKeyEnv`` names the variable (default ``GEMINI_API_KEY``).
- The loader structures the entry into ``GeminiConfig``, whose checks key a bad
  value by its config key; nothing stays registered then. Loading needs no key:
  a request without one ends in ``MISSING_CREDENTIAL`` naming the variable.
- Disposing the plugin unregisters the route, then closes the adapter's pool.
"""

from __future__ import annotations

from typing import Final

from dsh_llm.adapters.gemini import PROVIDER_ROUTE, GeminiAdapter, GeminiConfig
from dsh_llm.plugins import PluginContext

__all__ = ["Config", "apply", "inject", "name"]

name: Final = "llm-gemini"
"""The plugin's label."""
inject: Final = ("llm",)
"""Services the plugin needs."""
Config = GeminiConfig
"""The plugin's config class."""


def apply(ctx: PluginContext, config: GeminiConfig | None) -> None:
    """Register ``GeminiAdapter`` for ``gemini``."""
    adapter = GeminiAdapter.from_config(
        GeminiConfig() if config is None else config, environ=ctx.environ
    )
    ctx.effect(adapter.close)
    ctx.llm.register_adapter([PROVIDER_ROUTE], adapter)
