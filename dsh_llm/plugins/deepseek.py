"""The ``llm-deepseek`` plugin: registers ``DeepSeekAdapter`` for the
``deepseek-official`` route from a composition entry.

Contracts callers may rely on:

- ``Config`` is ``DeepSeekConfig``: camelCase keys (``apiKeyEnv``, ``baseURL``,
  ``thinking``, ``reasoningEffort``, ``maxTokens``, ``defaultContextWindow``,
  ``models``, ``streamIdleTimeoutMs``, ``streamKeepaliveTimeoutMs``,
  ``totalTimeoutMs``, ``retryPolicy``, ``poolMaxsize``, ``emptyResponseAsStop``),
  all optional. A config never holds a key: ``apiKeyEnv`` names the variable.
- ``apply`` resolves the options (``resolve_adapter_options`` with
  ``ctx.environ``) before registering anything, so a bad value fails the load
  as a ``PluginLoadError`` whose ``key`` is the config key (``maxTokens``,
  ``models[0].contextWindow``; ``baseURL`` also for a bad ``DEEPSEEK_BASE_URL``)
  and whose cause is the ``DeepSeekConfigError`` (``llm-deepseek: <key> ...``);
  nothing stays registered. Loading needs no key:
  the route registers, the catalog is browsable, and a request without a key ends
  in ``MISSING_CREDENTIAL`` naming the variable.
- Disposing the plugin unregisters the route, then closes the adapter's pool.
"""

from __future__ import annotations

from typing import Final

from dsh_llm.adapters.deepseek import (
    PROVIDER_ROUTE,
    DeepSeekAdapter,
    DeepSeekConfig,
    DeepSeekConfigError,
    resolve_adapter_options,
)
from dsh_llm.plugins import PluginContext
from dsh_llm.plugins.config import PluginConfigError

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
        PluginConfigError: naming the config key of a value out of bounds; its
            cause is the ``DeepSeekConfigError`` (``llm-deepseek: <key> ...``).
    """
    try:
        options = resolve_adapter_options(config, ctx.environ)
    except DeepSeekConfigError as exc:
        raise PluginConfigError(exc.key, exc.detail) from exc
    adapter = DeepSeekAdapter.from_options(options, environ=ctx.environ)
    ctx.effect(adapter.close)
    ctx.llm.register_adapter([PROVIDER_ROUTE], adapter)
