"""What the command line talks to: the ``LlmRuntime``, the route and the model.

This module owns how ``dsh-llm chat`` and ``dsh-llm providers`` pick their
routes. Contracts callers may rely on:

- Routes come from one source: ``--base-url`` (an ``OpenAICompatAdapter`` on the
  route ``openai-compatible``, no key unless ``--api-key-env`` names one, and the
  ``--reasoning-effort`` given, if any, declared as one the server takes), else
  the composition file (``--config``, else
  ``./dsh.yml`` when that file exists), else the built-in route
  ``deepseek-official`` (``DeepSeekAdapter``; key from ``DEEPSEEK_API_KEY`` or the
  variable ``--api-key-env`` names; ``DEEPSEEK_BASE_URL`` honoured).
- The route is ``--provider``, else the only route the source registers, else
  ``deepseek-official`` when registered. The model is ``--model``, else the first
  model the route's catalog lists (``deepseek-v4-flash`` for DeepSeek); with
  ``--base-url``, the one model the server lists (``dsh_llm.cli.discover``).
- ``--timeout SECONDS`` bounds the whole call (the adapter's
  ``total_timeout_ms``) for the built-in route and ``--base-url``; a composition
  sets ``totalTimeoutMs`` in its file instead.
- ``Target.key_hint`` says where the route's key comes from (the variable, the
  flag or the composition file), for ``AUTH`` messages.
- Whatever the user must fix before a request can be sent raises ``UsageError``
  with a message saying what to set (exit status 2): no key, route or base URL
  at all; ``--base-url`` with ``--provider``/``--config``, or without ``--model``
  when the server does not list exactly one model;
  ``--api-key-env`` with a composition; an unknown route; a route without a
  catalog and no ``--model``; an invalid built-in setting. A composition that
  cannot be loaded raises its ``PluginLoadError`` (code ``PLUGIN_LOAD``).
- ``open_routes`` and ``open_target`` are context managers: leaving them disposes
  the composition or closes the adapter (its connection pool).
- Adapter modules (and so ``requests``) are imported only when a source is opened.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Final

import attrs

from dsh_llm.runtime import LlmRuntime

__all__ = [
    "BASE_URL_ROUTE",
    "DEEPSEEK_ROUTE",
    "DEFAULT_CONFIG",
    "NOTHING_TO_TALK_TO",
    "Routes",
    "Target",
    "UsageError",
    "find_config",
    "open_routes",
    "open_target",
    "require_utf8",
]

DEFAULT_CONFIG: Final = "dsh.yml"
"""The composition file used when present in the working directory."""
BASE_URL_ROUTE: Final = "openai-compatible"
"""The route ``--base-url`` registers its ``OpenAICompatAdapter`` under."""
DEEPSEEK_ROUTE: Final = "deepseek-official"
"""The built-in route (same value as ``dsh_llm.adapters.deepseek.PROVIDER_ROUTE``)."""
_DEEPSEEK_KEY_ENV: Final = "DEEPSEEK_API_KEY"

NOTHING_TO_TALK_TO: Final = (
    "no model to talk to. Set DEEPSEEK_API_KEY to use DeepSeek, or pass "
    "--base-url URL --model NAME for an OpenAI-compatible server (llama.cpp, "
    "Ollama, vLLM...), or --provider ROUTE with routes defined in dsh.yml "
    "(--config FILE). `dsh-llm demo` runs without any of these."
)
"""What ``chat`` says when neither a key, a route nor a base URL is given."""


class UsageError(Exception):
    """The command cannot run as invoked; the message says what to set or pass."""


def require_utf8(text: str, what: str) -> None:
    """Refuse text that cannot be sent as UTF-8.

    Bytes that are not UTF-8 in a command-line argument or on a terminal's
    stdin reach Python as lone surrogates (``surrogateescape``); sent on, they
    would be garbage to the model.

    Raises:
        UsageError: ``"<what> is not valid UTF-8"``.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError(f"{what} is not valid UTF-8") from None


@attrs.frozen(kw_only=True)
class Routes:
    """An opened source of routes."""

    runtime: LlmRuntime
    """The runtime the routes are registered in."""
    origin: str
    """Where they come from: ``built-in``, ``--base-url <url>`` or a file path."""
    key_hint: str | None = None
    """Where the routes' key comes from, in words (``None``: no key involved)."""


@attrs.frozen(kw_only=True)
class Target:
    """The route and model one ``chat`` call uses."""

    runtime: LlmRuntime
    """The runtime to stream through."""
    route: str
    """The route (``GenerateOptions.provider``)."""
    model: str
    """The model id."""
    key_hint: str | None = None
    """Where the route's key comes from, in words."""


def find_config(explicit: str | None, cwd: Path | None = None) -> str | None:
    """The composition file to load: ``explicit`` (whether or not it exists; the
    loader reports a missing file), else ``dsh.yml`` in ``cwd`` when it is a file."""
    if explicit is not None:
        return explicit
    candidate = (Path.cwd() if cwd is None else cwd) / DEFAULT_CONFIG
    return str(candidate) if candidate.is_file() else None


def _timeout_ms(timeout_s: float | None) -> float | None:
    return None if timeout_s is None else timeout_s * 1000


@contextlib.contextmanager
def _builtin(api_key_env: str | None, timeout_s: float | None) -> Iterator[Routes]:
    from dsh_llm.adapters.deepseek import PROVIDER_ROUTE, DeepSeekAdapter

    variable = api_key_env or _DEEPSEEK_KEY_ENV
    try:
        adapter = DeepSeekAdapter(
            api_key_env=variable, total_timeout_ms=_timeout_ms(timeout_s)
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    hint = f"the key is read from {variable}; --api-key-env VAR names another variable"
    with adapter:
        runtime = LlmRuntime()
        registration = runtime.register_adapter([PROVIDER_ROUTE], adapter)
        try:
            yield Routes(runtime=runtime, origin="built-in", key_hint=hint)
        finally:
            registration.dispose()


@contextlib.contextmanager
def _base_url(
    base_url: str,
    api_key_env: str | None,
    reasoning_effort: str | None,
    timeout_s: float | None,
) -> Iterator[Routes]:
    from dsh_llm.adapters.openai_compat import OpenAICompatAdapter

    # A generic server advertises no efforts; the one asked for on the command
    # line is the user's statement that this server takes it.
    efforts = None if reasoning_effort is None else (reasoning_effort,)
    try:
        adapter = OpenAICompatAdapter(
            base_url,
            api_key_env=api_key_env,
            reasoning_efforts=efforts,
            total_timeout_ms=_timeout_ms(timeout_s),
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    hint = (
        f"the key is read from {api_key_env}"
        if api_key_env
        else "no key is sent: pass --api-key-env VAR naming the variable that "
        "holds the server's key"
    )
    try:
        runtime = LlmRuntime()
        registration = runtime.register_adapter([BASE_URL_ROUTE], adapter)
        try:
            yield Routes(
                runtime=runtime, origin=f"--base-url {base_url}", key_hint=hint
            )
        finally:
            registration.dispose()
    finally:
        adapter.close()


@contextlib.contextmanager
def _composition(path: str) -> Iterator[Routes]:
    from dsh_llm.plugins import load_composition

    with load_composition(path) as composition:
        yield Routes(
            runtime=composition.runtime,
            origin=path,
            key_hint=f"the route's key is configured in {path} (apiKey or apiKeyEnv)",
        )


@contextlib.contextmanager
def open_routes(
    *,
    config: str | None = None,
    base_url: str | None = None,
    api_key_env: str | None = None,
    reasoning_effort: str | None = None,
    timeout_s: float | None = None,
) -> Iterator[Routes]:
    """Open the route source the options choose (see the module docstring).

    Args:
        config: ``--config`` (``None``: ``./dsh.yml`` when present).
        base_url: ``--base-url``.
        api_key_env: ``--api-key-env``.
        reasoning_effort: ``--reasoning-effort``; with ``base_url`` the adapter
            is told the server takes it (a generic server lists no efforts).
        timeout_s: ``--timeout`` (not with a composition).

    Raises:
        UsageError: for options that do not go together.
        PluginLoadError: when the composition cannot be loaded.
    """
    if base_url is not None:
        if config is not None:
            raise UsageError("--base-url and --config cannot be combined")
        with _base_url(base_url, api_key_env, reasoning_effort, timeout_s) as routes:
            yield routes
        return
    path = find_config(config)
    if path is None:
        with _builtin(api_key_env, timeout_s) as routes:
            yield routes
        return
    if timeout_s is not None:
        raise UsageError(
            f"--timeout applies to the built-in DeepSeek route and to --base-url; "
            f"with a composition ({path}) set totalTimeoutMs in its config"
        )
    if api_key_env is not None:
        raise UsageError(
            "--api-key-env applies to the built-in DeepSeek route and to --base-url; "
            f"with a composition ({path}) name the variable in its config (apiKeyEnv)"
        )
    with _composition(path) as routes:
        yield routes


def _route_ids(runtime: LlmRuntime) -> tuple[str, ...]:
    return tuple(info.id for info in runtime.list_providers())


def _choose_route(routes: Routes, provider: str | None) -> str:
    ids = _route_ids(routes.runtime)
    listed = ", ".join(ids) or "none"
    if provider is not None:
        if provider not in ids:
            raise UsageError(
                f'no route "{provider}" in {routes.origin} routes (registered: '
                f"{listed}); define it in dsh.yml or pass --config FILE"
            )
        return provider
    if len(ids) == 1:
        return ids[0]
    if DEEPSEEK_ROUTE in ids:
        return DEEPSEEK_ROUTE
    if not ids:
        raise UsageError(f"{routes.origin} registers no route")
    raise UsageError(
        f"{routes.origin} registers several routes ({listed}); choose one with "
        "--provider ROUTE"
    )


def _choose_model(runtime: LlmRuntime, route: str, model: str | None) -> str:
    if model is not None:
        return model
    catalog = runtime.list_models(route)
    if not catalog:
        raise UsageError(f'route "{route}" lists no models; pass --model NAME')
    return catalog[0].id


@contextlib.contextmanager
def open_target(
    *,
    provider: str | None = None,
    model: str | None = None,
    config: str | None = None,
    base_url: str | None = None,
    api_key_env: str | None = None,
    reasoning_effort: str | None = None,
    timeout_s: float | None = None,
    environ: Mapping[str, str] | None = None,
) -> Iterator[Target]:
    """Open the routes and choose the route and model for one ``chat`` call.

    Args:
        provider: ``--provider``.
        model: ``--model``.
        config: ``--config``.
        base_url: ``--base-url``.
        api_key_env: ``--api-key-env``.
        reasoning_effort: ``--reasoning-effort`` (see ``open_routes``).
        timeout_s: ``--timeout`` (see ``open_routes``).
        environ: Where the DeepSeek key's presence is checked (default
            ``os.environ``).

    Raises:
        UsageError: see the module docstring.
        PluginLoadError: when the composition cannot be loaded.
        LlmError: when a route's catalog cannot be listed.
    """
    environ = os.environ if environ is None else environ
    if base_url is not None:
        if provider is not None:
            raise UsageError(
                f"--base-url serves the route {BASE_URL_ROUTE}; drop --provider"
            )
    elif (
        provider is None
        and find_config(config) is None
        and not environ.get(api_key_env or _DEEPSEEK_KEY_ENV)
    ):
        message = NOTHING_TO_TALK_TO
        if api_key_env is not None:
            message = f"{api_key_env} is not set: {message}"
        raise UsageError(message)
    with open_routes(
        config=config,
        base_url=base_url,
        api_key_env=api_key_env,
        reasoning_effort=reasoning_effort,
        timeout_s=timeout_s,
    ) as routes:
        route = _choose_route(routes, provider)
        if base_url is not None and model is None:
            # After the adapter accepted the URL, so a bad one is named as such.
            from dsh_llm.cli.discover import DiscoveryError, server_model

            try:
                model = server_model(base_url, api_key_env=api_key_env, environ=environ)
            except DiscoveryError as exc:
                raise UsageError(str(exc)) from None
        yield Target(
            runtime=routes.runtime,
            route=route,
            model=_choose_model(routes.runtime, route, model),
            key_hint=routes.key_hint,
        )
