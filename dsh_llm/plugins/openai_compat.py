"""The ``llm-openai-compatible`` plugin: registers an ``OpenAICompatAdapter`` for
the routes a composition entry names.

Contracts callers may rely on:

- ``Config`` is ``OpenAICompatConfig``: camelCase keys. ``providers`` (a
  non-empty list of distinct routes) and ``baseURL`` are required; ``apiKey`` or
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
- ``apply`` builds the adapter (every check runs there) before registering
  anything: a bad value fails the load as a ``PluginLoadError`` naming the key
  (``baseURL``, ``models[1].contextWindow``) and never echoing a value; nothing
  stays registered.
- Disposing the plugin unregisters the routes, then closes the adapter's pool.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

import attrs

from dsh_llm.adapters.openai_compat import (
    DEFAULT_DISPLAY_NAME,
    DEFAULT_KEEPALIVE_TIMEOUT_MS,
    DEFAULT_STREAM_IDLE_TIMEOUT_MS,
    OpenAICompatAdapter,
    OpenAICompatConfigError,
)
from dsh_llm.credentials import Secret, normalize_api_key
from dsh_llm.plugins import PluginContext
from dsh_llm.plugins.config import PluginConfigError
from dsh_llm.transport.call import url_repr
from dsh_llm.transport.session import DEFAULT_POOL_MAXSIZE

__all__ = ["Config", "OpenAICompatConfig", "apply", "inject", "name"]

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


@attrs.frozen(kw_only=True)
class OpenAICompatConfig:
    """The ``llm-openai-compatible`` configuration, as written in a composition
    (see the module docstring). Values are checked by ``OpenAICompatAdapter``
    when ``apply`` builds it, so direct construction and YAML loading are judged
    alike."""

    providers: tuple[str, ...] = attrs.field(validator=_routes)
    """The routes served by this adapter (required, non-empty)."""
    base_url: str = attrs.field(repr=url_repr)
    """The API root, e.g. ``http://127.0.0.1:8080/v1`` (required; its
    credentials are hidden in the ``repr``)."""
    api_key: Secret | None = None
    """The key itself; write ``${VAR}`` in YAML, never the key."""
    api_key_env: str | None = None
    """Variable read for the key at each request."""
    headers: Mapping[str, str] | None = attrs.field(
        default=None, hash=False, repr=_header_names
    )
    """Extra request headers (their values may be credentials: the repr shows
    only the names)."""
    display_name: str = DEFAULT_DISPLAY_NAME
    """Provider name in messages."""
    models: tuple[str | Mapping[str, Any], ...] | None = attrs.field(
        default=None, hash=False
    )
    """The advertised catalog."""
    include_usage: bool = True
    """Send ``stream_options: {"include_usage": true}``."""
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    """The output-cap field the server reads."""
    reasoning_efforts: tuple[str, ...] | None = None
    """Effort ids sent as ``reasoning_effort``."""
    reasoning_passback_field: Literal["reasoning_content", "reasoning"] | None = None
    """Field that sends earlier reasoning back."""
    stream_idle_timeout_ms: float = DEFAULT_STREAM_IDLE_TIMEOUT_MS
    """Idle timeout: the longest silence while waiting for the next chunk."""
    stream_keepalive_timeout_ms: float | None = DEFAULT_KEEPALIVE_TIMEOUT_MS
    """Keep-alive bound (``None``: unbounded)."""
    total_timeout_ms: float | None = None
    """Longest whole call (``None``: unbounded)."""
    retry_policy: Mapping[str, Any] | None = attrs.field(default=None, hash=False)
    """Retry policy config (``docs/plugins.md``; ``None``: normal defaults)."""
    pool_maxsize: int = DEFAULT_POOL_MAXSIZE
    """Idle connections kept per host."""
    empty_response_as_stop: bool = False
    """Report a blockless ``stop`` as ``stop`` instead of ``EMPTY_RESPONSE``."""


Config = OpenAICompatConfig
"""The plugin's config class."""


def apply(ctx: PluginContext, config: OpenAICompatConfig) -> None:
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
    options = attrs.asdict(config, recurse=False)
    routes = options.pop("providers")
    try:
        adapter = OpenAICompatAdapter(**options, environ=ctx.environ)
    except OpenAICompatConfigError as exc:
        raise PluginConfigError(exc.key, exc.detail) from exc
    ctx.effect(adapter.close)
    ctx.llm.register_adapter(list(routes), adapter)
