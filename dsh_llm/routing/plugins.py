"""``failover`` and ``retrying`` from a composition file: configs and plugins.

Two plugins, ``llm-failover`` and ``llm-retrying`` (entry points of group
``dsh_llm.plugins``; also loadable as ``dsh_llm.routing.plugins:FAILOVER_PLUGIN``
and ``dsh_llm.routing.plugins:RETRYING_PLUGIN``), each adding one middleware of
``dsh_llm.routing`` with ``ctx.llm.use``. Contracts callers may rely on:

- ``FailoverConfig`` and ``RetryingConfig`` are frozen attrs classes read with
  the composition's rules (camelCase keys, nothing coerced); every check runs at
  construction, so a bad value fails the load as a ``PluginLoadError`` naming
  the key (``routes[1].provider``, ``policy.backoff.maxDelayMs``) before
  anything is registered.
- Middleware order is composition order: an entry listed earlier is outer.
  List ``llm-failover`` before ``llm-retrying`` to retry each route before
  moving on, and observability plugins after both to see every attempt.
- Every retry and failover is logged on the plugin's logger
  (``dsh_llm.plugins.<id>``): INFO before a wait or the next route, WARNING
  for a restart after content. Lines name routes, codes and delays, never
  content or a key.
- Disposing the plugin removes its middleware.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Mapping
from typing import Any
from typing import Final

import attrs

from dsh_llm.config import PluginConfigError
from dsh_llm.plugins.context import PluginContext
from dsh_llm.retry import resolve_retry_policy
from dsh_llm.routing import FailoverEvent
from dsh_llm.routing import StreamRetryEvent
from dsh_llm.routing import failover
from dsh_llm.routing import retrying

__all__ = [
    "FAILOVER_PLUGIN",
    "RETRYING_PLUGIN",
    "FailoverConfig",
    "RetryingConfig",
    "RouteConfig",
    "RoutingPlugin",
]


def _non_empty(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str) or value == "":
        raise PluginConfigError(attribute.name, "must be a non-empty string")


def _optional_model(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        _non_empty(_, attribute, value)


@attrs.frozen(kw_only=True)
class RouteConfig:
    """One route of ``FailoverConfig.routes``: ``{provider, model?}``."""

    provider: str = attrs.field(validator=_non_empty)
    """The registered route to call."""
    model: str | None = attrs.field(default=None, validator=_optional_model)
    """The model to ask it for (default: the caller's)."""


def _codes(_: object, attribute: attrs.Attribute[Any], value: tuple[str, ...]) -> None:
    if any(code == "" for code in value):
        raise PluginConfigError(attribute.name, "must not contain an empty code")
    if "ABORTED" in value:
        raise PluginConfigError(attribute.name, "must not contain ABORTED")


@attrs.frozen(kw_only=True)
class FailoverConfig:
    """``llm-failover``'s config: ``alias``, ``routes`` (required), ``onCodes``,
    ``restartAfterContent``; they mean what ``dsh_llm.routing.failover``'s
    arguments of the same name mean."""

    alias: str = attrs.field(validator=_non_empty)
    """The route the consumer asks for."""
    routes: tuple[RouteConfig, ...]
    """The routes tried, in order (at least one, each provider once)."""
    on_codes: tuple[str, ...] = attrs.field(default=(), validator=_codes)
    """Further codes that move on to the next route."""
    restart_after_content: bool = False
    """Restart on the next route after content (logged as a WARNING)."""

    def __attrs_post_init__(self) -> None:
        if not self.routes:
            raise PluginConfigError("routes", "must list at least one route")
        seen: set[str] = set()
        for position, route in enumerate(self.routes):
            if route.provider in seen:
                raise PluginConfigError(
                    f"routes[{position}].provider", "repeats an earlier route"
                )
            seen.add(route.provider)


def _policy(_: object, __: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    if not isinstance(value, Mapping):
        raise PluginConfigError("policy", "must be a mapping")
    # Its ConfigError names each key (policy.backoff.maxDelayMs) as data; the
    # config mechanism reports them as they are.
    resolve_retry_policy(value, "policy")


def _providers(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    assert isinstance(value, tuple)
    if not value or any(route == "" for route in value):
        raise PluginConfigError(attribute.name, "must list non-empty routes")


@attrs.frozen(kw_only=True)
class RetryingConfig:
    """``llm-retrying``'s config: ``policy`` (a retry-policy mapping as in
    ``docs/plugins.md``; default: the normal defaults) and ``providers`` (the
    routes it applies to; default: every route)."""

    policy: Mapping[str, Any] | None = attrs.field(
        default=None, validator=_policy, hash=False
    )
    """The retry policy, camelCase as a route's ``retryPolicy``."""
    providers: tuple[str, ...] | None = attrs.field(default=None, validator=_providers)
    """The routes retried (``None``: every route)."""


def _apply_failover(ctx: PluginContext, config: FailoverConfig) -> None:
    logger = ctx.logger

    def told(event: FailoverEvent) -> None:
        if event.after_content:
            logger.warning(
                'failover of "%s": "%s" failed with %s after its content reached '
                'the consumer; restarting on "%s"',
                event.alias,
                event.failed_provider,
                event.failure.code,
                event.next_provider,
            )
        else:
            logger.info(
                'failover of "%s": "%s" failed with %s; trying "%s"',
                event.alias,
                event.failed_provider,
                event.failure.code,
                event.next_provider,
            )

    ctx.llm.use(
        failover(
            config.alias,
            [(route.provider, route.model) for route in config.routes],
            on_codes=config.on_codes,
            restart_after_content=config.restart_after_content,
            on_failover=told,
        )
    )


def _apply_retrying(ctx: PluginContext, config: RetryingConfig) -> None:
    logger = ctx.logger

    def told(event: StreamRetryEvent) -> None:
        logger.info(
            'retrying "%s" after attempt %d failed with %s; waiting %.0f ms',
            event.provider,
            event.attempt,
            event.failure.code,
            event.delay_ms,
        )

    ctx.llm.use(retrying(config.policy, providers=config.providers, on_retry=told))


@attrs.frozen
class RoutingPlugin:
    """A plugin object (``name``, ``inject``, ``Config``, ``apply``), so one
    module can hold both routing plugins."""

    name: str
    """The plugin's label."""
    Config: type[Any]
    """Its config class."""
    _apply: Callable[[PluginContext, Any], None] = attrs.field(repr=False)
    inject: tuple[str, ...] = ("llm",)
    """Services it needs."""

    def apply(self, ctx: PluginContext, config: Any) -> None:
        """Add the middleware through ``ctx.llm`` (removed with the plugin)."""
        self._apply(ctx, config)


FAILOVER_PLUGIN: Final = RoutingPlugin("llm-failover", FailoverConfig, _apply_failover)
"""The ``llm-failover`` plugin."""
RETRYING_PLUGIN: Final = RoutingPlugin("llm-retrying", RetryingConfig, _apply_retrying)
"""The ``llm-retrying`` plugin."""
