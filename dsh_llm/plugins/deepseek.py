"""The ``llm-deepseek`` plugin: registers ``DeepSeekAdapter`` for the
``deepseek-official`` route from a composition entry.

Contracts callers may rely on:

- ``Config`` is ``DeepSeekConfig``: camelCase keys (``apiKeyEnv``, ``baseURL``,
  ``thinking``, ``reasoningEffort``, ``maxTokens``, ``defaultContextWindow``,
  ``models``, ``streamIdleTimeoutMs``, ``streamKeepaliveTimeoutMs``,
  ``totalTimeoutMs``, ``retryPolicy``, ``poolMaxsize``, ``emptyResponseAsStop``),
  all optional. A config never holds a key: ``apiKeyEnv`` names the variable.
- The loader structures the entry into ``DeepSeekConfig`` (the one config
  mechanism), whose own checks key a bad value by its config key (``maxTokens``,
  ``models[0].contextWindow``); ``apply`` builds the adapter with
  ``DeepSeekAdapter.from_config`` and ``ctx.environ`` before registering
  anything, so a bad ``DEEPSEEK_BASE_URL`` also fails the load, keyed
  ``baseURL``; nothing stays registered. Loading needs no key:
  the route registers, the catalog is browsable, and a request without a key ends
  in ``MISSING_CREDENTIAL`` naming the variable.
- Disposing the plugin unregisters the route, then closes the adapter's pool.
"""

from __future__ import annotations

from typing import Final

from dsh_llm.adapters.deepseek import PROVIDER_ROUTE, DeepSeekAdapter, DeepSeekConfig
from dsh_llm.plugins import PluginContext

__all__ = ["Config", "apply", "inject", "name"]

name: Final = "llm-deepseek"
"""The plugin's label."""
inject: Final = ("llm",)
"""Services the plugin needs."""
Config = DeepSeekConfig
"""The plugin's config class."""


def apply(ctx: PluginContext, config: DeepSeekConfig | None) -> None:
    """Register ``DeepSeekAdapter`` for ``deepseek-official``.

    Raises:
        AdapterConfigError: a ``PluginConfigError`` keyed ``baseURL`` for a bad
            ``DEEPSEEK_BASE_URL``.
    """
    adapter = DeepSeekAdapter.from_config(
        DeepSeekConfig() if config is None else config, environ=ctx.environ
    )
    ctx.effect(adapter.close)
    ctx.llm.register_adapter([PROVIDER_ROUTE], adapter)
