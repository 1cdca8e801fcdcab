"""What the command line talks to: the ``LlmRuntime``, the route and the model.

This module owns how ``dsh-llm chat`` and ``dsh-llm providers`` pick their
routes (the README's "The command line" section lists every source and flag):

- Routes come from one source: ``--base-url`` (the ``--wire`` rows of
  ``dsh_llm.adapters.BUILTIN_FAMILIES``: ``chat``, an ``OpenAICompatAdapter`` on
  ``openai-compatible``; ``responses``, an ``OpenAIResponsesAdapter`` on
  ``openai-responses``), else the composition file (``--config``, else
  ``./dsh.yml``), else every built-in provider route of that table;
  ``--api-key-env`` names the chosen route's key.
- The route is ``--provider``, else the only route, else ``deepseek-official``;
  a failover alias of the composition (an ``llm-failover`` entry's ``alias``)
  is a route too. The model is ``--model``, else the route's first catalog
  model (an alias's: its first route's model, else that route's first catalog
  model), else (with ``--base-url``) the one model the server lists
  (``dsh_llm.cli.discover``).
- Keys are read from ``environ``, by default the process environment with the
  keys ``dsh-llm keys set`` stored standing in for unset variables
  (``dsh_llm.cli.keys.user_environ``); the adapters, the composition and the
  model list all read that one mapping.
- ``--timeout SECONDS`` bounds the whole call for the built-in routes and
  ``--base-url``; ``Target.key_hint`` says where the key comes from (``AUTH``).
- What the user must fix before a request can be sent raises ``UsageError``
  (exit status 2) saying what to set; a composition that cannot be loaded raises
  its ``PluginLoadError``.
- ``open_routes`` and ``open_target`` (of a ``Choice``) are context managers that
  dispose what they opened; adapter modules are imported only when a source is
  opened (the table names classes by import path).
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any
from typing import Final

import attrs

from dsh_llm.adapters import BUILTIN_FAMILIES
from dsh_llm.adapters import BuiltinFamily
from dsh_llm.adapters import builtin_family
from dsh_llm.cli.keys import KeyedEnviron
from dsh_llm.cli.keys import user_environ
from dsh_llm.cli.usage import UsageError
from dsh_llm.runtime import LlmRuntime

if TYPE_CHECKING:
    from dsh_llm.adapters import WireAdapter


DEFAULT_CONFIG: Final = "dsh.yml"
"""The composition file used when present in the working directory."""
_BY_WIRE: Final = {row.wire: row for row in BUILTIN_FAMILIES if row.wire is not None}
WIRES: Final = tuple(_BY_WIRE)
"""The ``--wire`` values, each a wire any server may speak (``chat``:
``POST /chat/completions``; ``responses``: ``POST /responses``)."""
BASE_URL_ROUTE: Final = _BY_WIRE["chat"].route
"""The route ``--base-url`` registers its ``OpenAICompatAdapter`` under."""
RESPONSES_ROUTE: Final = _BY_WIRE["responses"].route
"""The route ``--base-url`` with ``--wire responses`` registers its adapter under."""
_PROVIDER_ROWS: Final = tuple(row for row in BUILTIN_FAMILIES if row.wire is None)
BUILTIN_ROUTES: Final = tuple(row.route for row in _PROVIDER_ROWS)
"""The built-in provider routes (the table ``dsh_llm.adapters.BUILTIN_FAMILIES``)."""
DEEPSEEK_ROUTE: Final = BUILTIN_ROUTES[0]
"""The route chosen when nothing else says which."""
_WIRE_WITHOUT_BASE_URL: Final = (
    "--wire applies to --base-url (the wire the server at that URL speaks)"
)

NOTHING_TO_TALK_TO: Final = (
    "no model to talk to. Set DEEPSEEK_API_KEY (or store the key: dsh-llm keys "
    "set deepseek-official) to use DeepSeek (or ANTHROPIC_API_KEY and pass "
    "--provider anthropic for Claude), or pass "
    "--base-url URL --model NAME for an OpenAI-compatible server (llama.cpp, "
    "Ollama, vLLM...), or --provider ROUTE with routes defined in dsh.yml "
    "(--config FILE). `dsh-llm demo` runs without any of these."
)
"""What ``chat`` says when neither a key, a route nor a base URL is given."""


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
    unavailable: tuple[tuple[str, str], ...] = ()
    """Built-in routes that cannot be built here (route, why): Bedrock without
    a region, say. Listed, never registered."""
    environ: Mapping[str, str] = attrs.field(factory=dict, repr=False)
    """Where the routes read their variables and keys."""
    failover: Mapping[str, tuple[tuple[str, str | None], ...]] = attrs.field(
        factory=dict
    )
    """The composition's failover aliases: each alias's ``(route, model)`` pairs
    in the order they are tried (a model of ``None`` keeps the caller's)."""

    def route_ids(self) -> tuple[str, ...]:
        """The registered routes, then the failover aliases not registered."""
        ids = tuple(info.id for info in self.runtime.list_providers())
        return ids + tuple(alias for alias in self.failover if alias not in ids)


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
    members: tuple[str, ...] = ()
    """The registered routes that may serve the call: the route itself, or a
    failover alias's routes in order."""
    environ: Mapping[str, str] = attrs.field(factory=dict, repr=False)
    """Where the routes read their variables and keys."""


def add_config_option(command: argparse.ArgumentParser) -> None:
    """Add ``--config FILE`` (``args.config``, for ``find_config``)."""
    command.add_argument(
        "--config",
        metavar="FILE",
        help=f"composition file (default: ./{DEFAULT_CONFIG} when present)",
    )


def find_config(explicit: str | None, cwd: Path | None = None) -> str | None:
    """The composition file to load: ``explicit`` (whether or not it exists; the
    loader reports a missing file), else ``dsh.yml`` in ``cwd`` when it is a file."""
    if explicit is not None:
        return explicit
    candidate = (Path.cwd() if cwd is None else cwd) / DEFAULT_CONFIG
    return str(candidate) if candidate.is_file() else None


def _timeout_ms(timeout_s: float | None) -> float | None:
    return None if timeout_s is None else timeout_s * 1000


def _builtin_key_env(row: BuiltinFamily, api_key_env: str | None) -> str | None:
    """The variable the built-in route of ``row`` reads its key from."""
    return api_key_env if api_key_env is not None else row.key_env


def _builtin_adapter(
    row: BuiltinFamily,
    api_key_env: str | None,
    timeout_ms: float | None,
    environ: Mapping[str, str],
) -> WireAdapter[Any]:
    """The built-in adapter of ``row``; ``api_key_env`` replaces its default key
    variable when given."""
    options: dict[str, Any] = {"total_timeout_ms": timeout_ms}
    if api_key_env is not None:
        options["api_key_env"] = api_key_env
    if row.service is not None:
        options["service"] = row.service
    return row.adapter_class()(environ=environ, **options)


def _key_source(variable: str, environ: Mapping[str, str]) -> str:
    """Where the key of ``variable`` comes from, in words."""
    stored = (
        environ.stored_name(variable) if isinstance(environ, KeyedEnviron) else None
    )
    if stored is not None:
        return (
            f"the key is the one stored with `dsh-llm keys set {stored}` "
            f"({variable} is unset)"
        )
    return f"the key is read from {variable}"


@contextlib.contextmanager
def _builtin(
    api_key_env: str | None,
    provider: str | None,
    timeout_s: float | None,
    environ: Mapping[str, str],
) -> Iterator[Routes]:
    # Every built-in route is there (none does I/O before a call), but one that
    # cannot be built here (no region for Bedrock) only when asked for;
    # --api-key-env names the key of the route asked for.
    chosen = builtin_family(provider or DEEPSEEK_ROUTE) or _PROVIDER_ROWS[0]
    unavailable: list[tuple[str, str]] = []
    with contextlib.ExitStack() as stack:
        runtime = LlmRuntime()
        for row in _PROVIDER_ROWS:
            key = api_key_env if row is chosen else None
            try:
                adapter = stack.enter_context(
                    _builtin_adapter(row, key, _timeout_ms(timeout_s), environ)
                )
            except ValueError as exc:
                if row is chosen:
                    raise UsageError(str(exc)) from exc
                unavailable.append((row.route, str(exc)))
                continue
            stack.callback(runtime.register_adapter([row.route], adapter).dispose)
        variable = _builtin_key_env(chosen, api_key_env)
        hint = (
            f"{_key_source(variable, environ)}; --api-key-env VAR names another "
            "variable"
            if variable is not None
            else "no key is sent: pass --api-key-env VAR naming the variable that "
            "holds the key"
        )
        yield Routes(
            runtime=runtime,
            origin="built-in",
            key_hint=hint,
            unavailable=tuple(unavailable),
            environ=environ,
        )


@contextlib.contextmanager
def _base_url(
    base_url: str,
    api_key_env: str | None,
    reasoning_effort: str | None,
    wire: str,
    timeout_s: float | None,
    environ: Mapping[str, str],
) -> Iterator[Routes]:
    cls = _BY_WIRE[wire].adapter_class()
    options: dict[str, Any] = {
        "api_key_env": api_key_env,
        "total_timeout_ms": _timeout_ms(timeout_s),
    }
    if any(
        f.name == "reasoning_efforts" for f in attrs.fields(cls.family.config_class)
    ):
        # A generic server advertises no efforts; the one asked for on the
        # command line is the user's statement that this server takes it.
        # (A server profile that lists its efforts has no such field.)
        options["reasoning_efforts"] = (
            None if reasoning_effort is None else (reasoning_effort,)
        )
    try:
        adapter = cls(base_url, environ=environ, **options)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    route = _BY_WIRE[wire].route
    hint = (
        _key_source(api_key_env, environ)
        if api_key_env
        else "no key is sent: pass --api-key-env VAR naming the variable that "
        "holds the server's key"
    )
    try:
        runtime = LlmRuntime()
        registration = runtime.register_adapter([route], adapter)
        try:
            yield Routes(
                runtime=runtime,
                origin=f"--base-url {base_url}",
                key_hint=hint,
                environ=environ,
            )
        finally:
            registration.dispose()
    finally:
        adapter.close()


@contextlib.contextmanager
def _composition(path: str, environ: Mapping[str, str]) -> Iterator[Routes]:
    from dsh_llm.plugins import load_composition
    from dsh_llm.routing.plugins import FailoverConfig

    with load_composition(path, environ=environ) as composition:
        failover = {
            plugin.config.alias: tuple(
                (route.provider, route.model) for route in plugin.config.routes
            )
            for plugin in composition.plugins
            if isinstance(plugin.config, FailoverConfig)
        }
        yield Routes(
            runtime=composition.runtime,
            origin=path,
            key_hint=f"the route's key is configured in {path} (apiKey or apiKeyEnv)",
            environ=environ,
            failover=failover,
        )


@contextlib.contextmanager
def open_routes(
    *,
    config: str | None = None,
    base_url: str | None = None,
    api_key_env: str | None = None,
    reasoning_effort: str | None = None,
    wire: str | None = None,
    provider: str | None = None,
    timeout_s: float | None = None,
    environ: Mapping[str, str] | None = None,
) -> Iterator[Routes]:
    """Open the route source the options choose (see the module docstring).

    Args:
        config: ``--config`` (``None``: ``./dsh.yml`` when present).
        base_url: ``--base-url``.
        api_key_env: ``--api-key-env`` (for the built-in routes: the key of
            ``provider``, DeepSeek's when ``provider`` is not ``anthropic``).
        reasoning_effort: ``--reasoning-effort``; with ``base_url`` the adapter
            is told the server takes it (a generic server lists no efforts).
        wire: ``--wire`` (``chat`` or ``responses``; ``None``: ``chat``), only
            with ``base_url``.
        provider: ``--provider``; without a composition it chooses which built-in
            route ``api_key_env`` is for, and adds ``gemini`` or ``ollama``.
        timeout_s: ``--timeout`` (not with a composition).
        environ: Where variables and keys are read (default: ``os.environ``
            with the stored keys, ``dsh_llm.cli.keys.user_environ``).

    Raises:
        UsageError: for options that do not go together.
        PluginLoadError: when the composition cannot be loaded.
    """
    environ = user_environ() if environ is None else environ
    if wire is not None and wire not in WIRES:
        raise UsageError(f"--wire must be one of {', '.join(WIRES)}")
    if base_url is not None:
        if config is not None:
            raise UsageError("--base-url and --config cannot be combined")
        with _base_url(
            base_url, api_key_env, reasoning_effort, wire or "chat", timeout_s, environ
        ) as routes:
            yield routes
        return
    if wire is not None:
        raise UsageError(_WIRE_WITHOUT_BASE_URL)
    path = find_config(config)
    if path is None:
        with _builtin(api_key_env, provider, timeout_s, environ) as routes:
            yield routes
        return
    if timeout_s is not None:
        raise UsageError(
            f"--timeout applies to the built-in DeepSeek route and to --base-url; "
            f"with a composition ({path}) set totalTimeoutMs in its config"
        )
    if api_key_env is not None:
        raise UsageError(
            "--api-key-env applies to the built-in routes and to --base-url; "
            f"with a composition ({path}) name the variable in its config (apiKeyEnv)"
        )
    with _composition(path, environ) as routes:
        yield routes


def _choose_route(routes: Routes, provider: str | None, origin: str | None) -> str:
    ids = routes.route_ids()
    listed = ", ".join(ids) or "none"
    if provider is not None:
        if provider not in ids:
            chosen_by = f" (named by {origin})" if origin else ""
            missing = ", ".join(route for route, _ in routes.unavailable)
            also = f"; not available here: {missing}" if missing else ""
            raise UsageError(
                f'no route "{provider}"{chosen_by} in {routes.origin} routes '
                f"(registered: {listed}{also}); define it in dsh.yml or pass "
                "--config FILE"
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


def _choose_model(routes: Routes, route: str, model: str | None) -> str:
    if model is not None:
        return model
    members = routes.failover.get(route)
    if members is not None:
        first, first_model = members[0]
        if first_model is not None:
            return first_model
        route = first
    catalog = routes.runtime.list_models(route)
    if not catalog:
        raise UsageError(f'route "{route}" lists no models; pass --model NAME')
    return catalog[0].id


@attrs.frozen(kw_only=True)
class Choice:
    """What ``chat`` is to talk to, before the routes are opened
    (``dsh_llm.cli.models.choose``)."""

    provider: str | None
    """The route (``None``: the usual choice)."""
    model: str | None
    """The model (``None``: the route's first)."""
    base_url: str | None = None
    """The server, for ``--base-url``."""
    wire: str | None = None
    """``--wire``."""
    origin: str | None = None
    """What chose ``provider`` when it was not typed, in words."""


@contextlib.contextmanager
def open_target(
    args: argparse.Namespace,
    choice: Choice,
    environ: Mapping[str, str] | None = None,
) -> Iterator[Target]:
    """Open the routes and choose the route and model for one ``chat`` call.

    Args:
        args: The command's ``--config``, ``--api-key-env``,
            ``--reasoning-effort`` and ``--timeout`` (see ``open_routes``).
        choice: The route, model, server and wire chosen, and what chose them
            (for the message when there is no such route).
        environ: Where variables and keys are read, the DeepSeek key's
            presence checked (default: see ``open_routes``).

    Raises:
        UsageError: see the module docstring.
        PluginLoadError: when the composition cannot be loaded.
        LlmError: when a route's catalog cannot be listed.
    """
    environ = user_environ() if environ is None else environ
    provider, model, base_url = choice.provider, choice.model, choice.base_url
    config, api_key_env = args.config, args.api_key_env
    if choice.wire is not None and base_url is None:
        raise UsageError(_WIRE_WITHOUT_BASE_URL)
    if base_url is not None:
        if provider is not None:
            route = _BY_WIRE[choice.wire or "chat"].route
            raise UsageError(f"--base-url serves the route {route}; drop --provider")
    elif (
        provider is None
        and find_config(config) is None
        and not environ.get(api_key_env or _PROVIDER_ROWS[0].key_env or "")
    ):
        message = NOTHING_TO_TALK_TO
        if api_key_env is not None:
            message = f"{api_key_env} is not set: {message}"
        raise UsageError(message)
    with open_routes(
        config=config,
        base_url=base_url,
        api_key_env=api_key_env,
        reasoning_effort=args.reasoning_effort,
        wire=choice.wire,
        provider=provider,
        timeout_s=args.timeout,
        environ=environ,
    ) as routes:
        route = _choose_route(routes, provider, choice.origin)
        if base_url is not None and model is None:
            # After the adapter accepted the URL, so a bad one is named as such.
            from dsh_llm.cli.discover import DiscoveryError
            from dsh_llm.cli.discover import server_model

            try:
                model = server_model(base_url, api_key_env=api_key_env, environ=environ)
            except DiscoveryError as exc:
                raise UsageError(str(exc)) from None
        members = tuple(r for r, _ in routes.failover.get(route, ())) or (route,)
        yield Target(
            runtime=routes.runtime,
            route=route,
            model=_choose_model(routes, route, model),
            key_hint=routes.key_hint,
            members=members,
            environ=environ,
        )
