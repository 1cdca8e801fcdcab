"""The ``llm-anthropic`` plugin: registers ``AnthropicAdapter`` for the
``anthropic`` route from a composition entry.

Contracts callers may rely on:

- ``Config`` is ``AnthropicConfig``: camelCase keys (``apiKeyEnv``, ``baseURL``,
  ``anthropicVersion``, ``beta``, ``reasoningEffort``, ``maxTokens``,
  ``defaultContextWindow``, ``models``, ``streamIdleTimeoutMs``,
  ``streamKeepaliveTimeoutMs``, ``totalTimeoutMs``, ``retryPolicy``,
  ``poolMaxsize``, ``emptyResponseAsStop``), all optional. A config never holds
  a key: ``apiKeyEnv`` names the variable (default ``ANTHROPIC_API_KEY``).
- The loader structures the entry into ``AnthropicConfig`` (the one config
  mechanism), whose checks key a bad value by its config key; ``apply`` builds
  the adapter with ``AnthropicAdapter.from_config`` and ``ctx.environ`` before
  registering anything, so a bad ``ANTHROPIC_BASE_URL`` also fails the load,
  keyed ``baseURL``, and nothing stays registered. Loading needs no key: a
  request without one ends in ``MISSING_CREDENTIAL`` naming the variable.
- Disposing the plugin unregisters the route, then closes the adapter's pool.
"""

from __future__ import annotations

from typing import Final

from dsh_llm.adapters.anthropic import (
    PROVIDER_ROUTE,
    AnthropicAdapter,
    AnthropicConfig,
)
from dsh_llm.plugins import PluginContext

__all__ = ["Config", "apply", "inject", "name"]

name: Final = "llm-anthropic"
"""The plugin's label."""
inject: Final = ("llm",)
"""Services the plugin needs."""
Config = AnthropicConfig
"""The plugin's config class."""


def apply(ctx: PluginContext, config: AnthropicConfig | None) -> None:
    """Register ``AnthropicAdapter`` for ``anthropic``.

    Raises:
        AnthropicConfigError: a ``PluginConfigError`` keyed ``baseURL`` for a bad
            ``ANTHROPIC_BASE_URL``.
    """
    adapter = AnthropicAdapter.from_config(
        AnthropicConfig() if config is None else config, environ=ctx.environ
    )
    ctx.effect(adapter.close)
    ctx.llm.register_adapter([PROVIDER_ROUTE], adapter)
