"""The ``llm-openai-responses`` plugin: registers an ``OpenAIResponsesAdapter`` for
the routes a composition entry names.

Contracts callers may rely on:

- ``Config`` is ``OpenAIResponsesPluginConfig``: the adapter's
  ``OpenAIResponsesConfig`` plus ``providers`` (required: a non-empty list of
  distinct routes) and ``apiKey``; camelCase keys. ``baseURL`` (default
  ``https://api.openai.com/v1``), ``apiKeyEnv``, ``server``, ``models``,
  ``streamIdleTimeoutMs``, ``streamKeepaliveTimeoutMs``, ``totalTimeoutMs``,
  ``retryPolicy``, ``poolMaxsize`` and ``emptyResponseAsStop`` mean what the
  adapter's arguments of the same name mean.
- ``apiKey`` is read as a ``Secret``: write it as ``${MY_API_KEY}`` (or name the
  variable with ``apiKeyEnv``, read at each request); not both.
- A bad value fails the load as a ``PluginLoadError`` naming the key and never
  echoing a value; ``apply`` builds the adapter before registering anything.
- Disposing the plugin unregisters the routes, then closes the adapter's pool.
"""

from __future__ import annotations

from typing import Any, Final

import attrs

from dsh_llm.adapters import adapter_field_order
from dsh_llm.adapters.openai_responses import (
    OpenAIResponsesAdapter,
    OpenAIResponsesConfig,
)
from dsh_llm.credentials import Secret, normalize_api_key
from dsh_llm.plugins import PluginContext
from dsh_llm.plugins.config import PluginConfigError

__all__ = ["Config", "OpenAIResponsesPluginConfig", "apply", "inject", "name"]

name: Final = "llm-openai-responses"
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


@attrs.frozen(kw_only=True, field_transformer=adapter_field_order)
class OpenAIResponsesPluginConfig(OpenAIResponsesConfig):
    """``OpenAIResponsesConfig`` plus what only a composition entry says: the
    routes to serve and an explicit key."""

    providers: tuple[str, ...] = attrs.field(validator=_routes)
    """The routes served by this adapter (required, non-empty)."""
    api_key: Secret | None = None
    """The key itself; write ``${VAR}`` in YAML, never the key."""


Config = OpenAIResponsesPluginConfig
"""The plugin's config class."""


def apply(ctx: PluginContext, config: OpenAIResponsesPluginConfig) -> None:
    """Build the adapter from ``config`` and register it for ``providers``.

    Raises:
        PluginConfigError: naming the config key of an invalid value (a blank
            ``apiKey``, or one no header can carry, included).
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
    adapter = OpenAIResponsesAdapter.from_config(
        config, api_key=config.api_key, environ=ctx.environ
    )
    ctx.effect(adapter.close)
    ctx.llm.register_adapter(list(config.providers), adapter)
