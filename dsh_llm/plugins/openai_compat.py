"""The ``llm-openai-compatible`` plugin: registers an ``OpenAICompatAdapter`` for
the routes a composition entry names.

Contracts callers may rely on:

- ``Config`` is ``OpenAICompatPluginConfig``: the adapter's ``OpenAICompatConfig``
  (structured and checked by the one config mechanism) plus ``providers`` and
  ``apiKey``; camelCase keys. ``providers`` (a
  non-empty list of distinct routes) is required, and ``baseURL`` unless
  ``service`` names a hosted service (whose profile fills it in); ``apiKey`` or
  ``apiKeyEnv`` (not both), ``headers``, ``displayName``, ``models`` (ids or
  mappings with ``id``, ``name``, ``description``, ``contextWindow``,
  ``maxTokens``, ``inputModalities``), ``includeUsage``, ``maxTokensField``,
  ``reasoningEfforts``,
  ``reasoningPassbackField``, ``streamIdleTimeoutMs``,
  ``streamKeepaliveTimeoutMs``, ``totalTimeoutMs``, ``retryPolicy``,
  ``poolMaxsize`` and ``emptyResponseAsStop`` are optional and mean what the
  ``OpenAICompatAdapter`` arguments of the same name mean.
- ``apiKey`` is read as a ``Secret``: write it as ``${MY_API_KEY}`` so the file
  never holds the key (``apiKeyEnv: MY_API_KEY`` instead reads the variable at
  each request, so the plugin loads without it). Neither is needed for a local
  server.
- A bad value fails the load as a ``PluginLoadError`` naming the key
  (``baseURL``, ``models[1].contextWindow``) and never echoing a value; ``apply``
  builds the adapter before registering anything, so nothing stays registered.
- Disposing the plugin unregisters the routes, then closes the adapter's pool.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import attrs

from dsh_llm.adapters._wire.config import adapter_field_order
from dsh_llm.adapters.openai_compat import OpenAICompatAdapter, OpenAICompatConfig
from dsh_llm.credentials import Secret, normalize_api_key
from dsh_llm.plugins import PluginContext
from dsh_llm.plugins.config import PluginConfigError

__all__ = ["Config", "OpenAICompatPluginConfig", "apply", "inject", "name"]

name: Final = "llm-openai-compatible"
"""The plugin's label."""
inject: Final = ("llm",)
"""Services the plugin needs."""


def _routes(_: object, __: attrs.Attribute[Any], value: tuple[str, ...]) -> None:
    if not value:
        raise PluginConfigError("providers", "must list at least one provider route")
    if any(route == "" for route in value):
        raise PluginConfigError("providers", "must not contain an empty route")
    if len(set(value)) != len(value):
        raise PluginConfigError("providers", "must not list a route twice")


def _header_names(headers: Mapping[str, str] | None) -> str:
    if headers is None:
        return "None"
    return "<headers: " + ", ".join(sorted(headers)) + ">"


@attrs.frozen(kw_only=True, field_transformer=adapter_field_order)
class OpenAICompatPluginConfig(OpenAICompatConfig):
    """``OpenAICompatConfig`` (the adapter's one config class) plus what only a
    composition entry says: the routes to serve and an explicit key."""

    providers: tuple[str, ...] = attrs.field(validator=_routes)
    """The routes served by this adapter (required, non-empty)."""
    api_key: Secret | None = None
    """The key itself; write ``${VAR}`` in YAML, never the key."""


Config = OpenAICompatPluginConfig
"""The plugin's config class."""


def apply(ctx: PluginContext, config: OpenAICompatPluginConfig) -> None:
    """Build the adapter from ``config`` and register it for ``providers``.

    Raises:
        PluginConfigError: naming the config key of an invalid value (an
            ``apiKey`` that is blank or holds characters no header can carry
            included).
    """
    if config.api_key is not None:
        checked = normalize_api_key(config.api_key.reveal())
        if not checked.ok:
            raise PluginConfigError(
                "apiKey",
                "is blank"
                if checked.reason == "empty"
                else "contains characters no HTTP header can carry",
            )
    adapter = OpenAICompatAdapter.from_config(
        config, api_key=config.api_key, environ=ctx.environ
    )
    ctx.effect(adapter.close)
    ctx.llm.register_adapter(list(config.providers), adapter)
