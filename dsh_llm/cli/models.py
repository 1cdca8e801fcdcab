"""``dsh-llm models`` and ``dsh-llm aliases``: the models to choose from, the
default one, and short names for the ones used often.

Contracts callers may rely on:

- The default model and the aliases live in ``models.json`` of the user's
  config directory (``dsh_llm.cli.userdirs``): ``{"default": {"provider":
  ROUTE, "model": ID}, "aliases": {NAME: {"provider": ROUTE, "model": ID}}}``,
  replaced in one step on every change. Each names a route and a model.
- ``choose`` decides what ``chat`` talks to: with ``--base-url`` what was typed;
  else ``--model NAME`` naming an alias is the alias's route and model (unless
  ``--provider`` names another route); else, with neither ``--provider`` nor
  ``--model``, the continued conversation's route, model and server, else the
  default model; else what was typed. (``chat`` reports a ``models.json`` that
  cannot be read on stderr and goes on without it.) ``choose_from`` chooses
  from the flags ``add_choice_arguments`` added
  (``dsh_llm.cli.targets.open_target`` opens the choice).
- ``models default NAME`` and ``aliases set NAME MODEL`` take MODEL as an alias,
  or a model id whose route is ``--provider``, else the one route whose catalog
  lists it (a provider's own built-in route before a cloud front door listing
  the same id; ``UsageError`` when none or several do).
- ``dsh-llm models`` prints ``ROUTE: MODEL  NAME`` per model of every route's
  catalog (or ``--provider``'s; a server-listed catalog such as Ollama's is
  asked for only then), marking the default and the aliases; with
  ``--base-url URL`` the ids the server lists at ``GET /models``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any
from typing import Final

import attrs

from dsh_llm.cli.parser import Commands
from dsh_llm.cli.parser import add_command
from dsh_llm.cli.parser import add_listing_command
from dsh_llm.cli.targets import Choice
from dsh_llm.cli.targets import add_config_option
from dsh_llm.cli.usage import UsageError
from dsh_llm.cli.userdirs import UserFileError
from dsh_llm.cli.userdirs import config_dir
from dsh_llm.cli.userdirs import read_json
from dsh_llm.cli.userdirs import write_json
from dsh_llm.errors import LlmError

if TYPE_CHECKING:
    from dsh_llm.cli.logs import Continued
    from dsh_llm.cli.targets import Routes


MODELS_FILE: Final = "models.json"
"""The file's name in the config directory."""

_NAME: Final = re.compile(r"[^\s/]+")


def models_path() -> Path:
    """Where the default model and the aliases are kept."""
    return config_dir() / MODELS_FILE


@attrs.frozen(kw_only=True)
class ModelChoice:
    """A route and a model."""

    provider: str
    """The route."""
    model: str
    """The model id."""

    def to_json(self) -> dict[str, str]:
        """``{"provider": ..., "model": ...}``."""
        return {"provider": self.provider, "model": self.model}


def _model_choice(value: Any, where: str) -> ModelChoice:
    if (
        not isinstance(value, dict)
        or set(value) != {"provider", "model"}
        or not all(isinstance(v, str) and v for v in value.values())
    ):
        raise UserFileError(f'{where} must be {{"provider": ROUTE, "model": ID}}')
    return ModelChoice(provider=value["provider"], model=value["model"])


class ModelSettings:
    """The default model and the aliases, read once and written on each change."""

    def __init__(
        self,
        path: Path,
        default: ModelChoice | None = None,
        aliases: Mapping[str, ModelChoice] | None = None,
    ) -> None:
        self.path = path
        """The file."""
        self.default = default
        """The default model, if set."""
        self.aliases: dict[str, ModelChoice] = dict(aliases or {})
        """The aliases, by name."""

    @classmethod
    def load(cls, path: Path | None = None) -> ModelSettings:
        """The settings of ``path`` (default ``models_path()``); none when missing.

        Raises:
            UserFileError: when the file cannot be read or has another shape.
        """
        path = models_path() if path is None else path
        data = read_json(path) or {}
        unknown = sorted(set(data) - {"default", "aliases"})
        if unknown:
            raise UserFileError(f"{path}: unknown key {unknown[0]!r}")
        default = data.get("default")
        aliases = data.get("aliases", {})
        if not isinstance(aliases, dict):
            raise UserFileError(f"{path}: aliases must be an object")
        return cls(
            path,
            None if default is None else _model_choice(default, f"{path}: default"),
            {
                name: _model_choice(value, f"{path}: alias {name!r}")
                for name, value in aliases.items()
            },
        )

    def save(self) -> None:
        """Write the file.

        Raises:
            UserFileError: when it cannot be written.
        """
        data: dict[str, Any] = {
            "aliases": {name: c.to_json() for name, c in sorted(self.aliases.items())}
        }
        if self.default is not None:
            data["default"] = self.default.to_json()
        write_json(self.path, data)

    def aliases_of(self, provider: str, model: str) -> tuple[str, ...]:
        """The aliases naming ``provider`` and ``model``, sorted."""
        wanted = ModelChoice(provider=provider, model=model)
        return tuple(sorted(n for n, c in self.aliases.items() if c == wanted))


def _settings() -> ModelSettings:
    try:
        return ModelSettings.load()
    except UserFileError as exc:
        raise UsageError(str(exc)) from None


def choose(
    *,
    provider: str | None,
    model: str | None,
    base_url: str | None,
    wire: str | None,
    continued: Continued | None = None,
    settings: ModelSettings | None = None,
) -> Choice:
    """What ``chat`` talks to (the rules are in the module docstring).

    A ``models.json`` that cannot be read is reported on stderr and ignored.
    """
    typed = Choice(provider=provider, model=model, base_url=base_url, wire=wire)
    if base_url is not None:
        return typed
    if settings is None:
        try:
            settings = ModelSettings.load()
        except UserFileError as exc:
            print(
                f"dsh-llm: warning: the default model and aliases are ignored: {exc}",
                file=sys.stderr,
            )
            settings = ModelSettings(models_path())
    alias = settings.aliases.get(model) if model is not None else None
    if alias is not None and provider in (None, alias.provider):
        return Choice(
            provider=alias.provider, model=alias.model, origin=f"alias {model!r}"
        )
    if provider is not None:
        return typed
    if continued is not None:
        origin = f"conversation {continued.conversation_id}"
        if continued.base_url is not None:
            from dsh_llm.cli.targets import RESPONSES_ROUTE

            responses = continued.provider == RESPONSES_ROUTE
            return Choice(
                provider=None,
                model=model or continued.model,
                base_url=continued.base_url,
                wire="responses" if responses else None,
                origin=origin,
            )
        return Choice(
            provider=continued.provider,
            model=model or continued.model,
            origin=origin,
        )
    if model is None and settings.default is not None:
        return Choice(
            provider=settings.default.provider,
            model=settings.default.model,
            origin="the default model (dsh-llm models default)",
        )
    return typed


# --- naming a model -----------------------------------------------------------------


def add_choice_arguments(
    command: argparse.ArgumentParser,
    *,
    model: str,
    base_url: str,
    wire: str,
    api_key_env: str,
) -> None:
    """Add the flags ``choose_from`` and ``open_target`` read, in this order:
    ``--provider``, ``--model``, ``--base-url``, ``--wire``, ``--api-key-env``,
    ``--config``; ``model``, ``base_url``, ``wire`` and ``api_key_env`` are the
    command's help texts of theirs."""
    from dsh_llm.cli.parser import non_empty

    command.add_argument("--provider", metavar="ROUTE", help="the route to use")
    command.add_argument("--model", metavar="NAME", help=model)
    command.add_argument("--base-url", metavar="URL", help=base_url)
    command.add_argument("--wire", choices=("chat", "responses"), help=wire)
    command.add_argument(
        "--api-key-env", metavar="VAR", type=non_empty, help=api_key_env
    )
    add_config_option(command)


def choose_from(args: argparse.Namespace, continued: Continued | None = None) -> Choice:
    """``choose`` for the flags ``add_choice_arguments`` added (and the
    conversation ``chat -c`` continues)."""
    return choose(
        provider=args.provider,
        model=args.model,
        base_url=args.base_url,
        wire=args.wire,
        continued=continued,
    )


def _catalog_ids(routes: Routes, route: str) -> tuple[str, ...] | None:
    """The ids ``route`` lists, or ``None`` when it cannot say without asking a
    server (or fails to list)."""
    from dsh_llm.adapters import builtin_family

    row = builtin_family(route) if routes.origin == "built-in" else None
    if row is not None and row.server_catalog:
        return None
    try:
        return tuple(m.id for m in routes.runtime.list_models(route))
    except LlmError:
        return None


def _without_front_doors(found: list[str]) -> list[str]:
    """``found`` without the cloud front doors when a provider's own route is
    among them (``claude-haiku-4-5`` is Anthropic's before it is Vertex's)."""
    from dsh_llm.adapters import builtin_family

    rows = [(route, builtin_family(route)) for route in found]
    own = [route for route, row in rows if row is None or not row.front_door]
    return own or found


def _resolve(
    name: str, provider: str | None, config: str | None, settings: ModelSettings
) -> ModelChoice:
    """The route and model ``name`` means (see the module docstring)."""
    alias = settings.aliases.get(name)
    if alias is not None and provider in (None, alias.provider):
        return alias
    from dsh_llm.cli.targets import open_routes

    with open_routes(config=config, provider=provider) as routes:
        ids = routes.route_ids()
        if provider is not None:
            if provider not in ids:
                raise UsageError(
                    f'no route "{provider}" in {routes.origin} routes (registered: '
                    f"{', '.join(ids) or 'none'})"
                )
            listed = _catalog_ids(routes, provider)
            if listed is not None and name not in listed:
                print(
                    f'dsh-llm: note: route "{provider}" does not list {name!r} '
                    "in its catalog",
                    file=sys.stderr,
                )
            return ModelChoice(provider=provider, model=name)
        found = [r for r in ids if name in (_catalog_ids(routes, r) or ())]
        if routes.origin == "built-in":
            found = _without_front_doors(found)
    if len(found) == 1:
        return ModelChoice(provider=found[0], model=name)
    if not found:
        raise UsageError(
            f"no route lists the model {name!r} (dsh-llm models shows them); "
            "pass --provider ROUTE to use it anyway"
        )
    raise UsageError(
        f"several routes list {name!r} ({', '.join(found)}); choose one with "
        "--provider ROUTE"
    )


# --- the commands -------------------------------------------------------------------


def add_parsers(commands: Commands) -> None:
    """Add ``models`` (with ``list``, ``default``) and ``aliases`` (with ``list``,
    ``set``, ``remove``, ``path``)."""
    _add_models(commands)
    _add_aliases(commands)


def _add_source_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--provider", metavar="ROUTE", help="only this route")
    add_config_option(parser)


def _add_list_options(parser: argparse.ArgumentParser) -> None:
    _add_source_options(parser)
    parser.add_argument(
        "--base-url",
        metavar="URL",
        help="list what the OpenAI-compatible server at URL serves (GET /models)",
    )
    parser.add_argument(
        "--api-key-env",
        metavar="VAR",
        help="the variable holding the --base-url server's key",
    )


def _add_models(commands: Commands) -> None:
    actions = add_listing_command(
        commands,
        "models",
        _run_models,
        help="list the models; set the default one",
        description=(
            "List every route's models as ROUTE: MODEL NAME (the default and "
            "the aliases marked), or those of --provider ROUTE (asking its "
            "server when the server lists them, as Ollama's does), or the ids an "
            "OpenAI-compatible server lists (--base-url URL). `dsh-llm models "
            "default NAME` makes NAME the model chat uses when neither --provider "
            "nor --model is given."
        ),
        dest="models_command",
        list_help="list the models (the default)",
        options=_add_list_options,
    )
    default = add_command(
        actions,
        "default",
        _run_default,
        help="show or set the model chat uses by default",
        description=(
            "Without NAME, print the default model. With NAME (an alias, or a "
            "model id: its route is --provider, else the one route whose catalog "
            "lists it), make it the default. --clear forgets it."
        ),
    )
    default.add_argument("name", nargs="?", metavar="NAME")
    _add_source_options(default)
    default.add_argument(
        "--clear", action="store_true", help="forget the default model"
    )


def _add_json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON")


def _add_aliases(commands: Commands) -> None:
    actions = add_listing_command(
        commands,
        "aliases",
        _run_aliases,
        help="short names for a route and a model (chat --model NAME)",
        description=(
            "An alias names a route and a model: `dsh-llm aliases set fast "
            "claude-haiku-4-5`, then `dsh-llm chat --model fast ...`."
        ),
        dest="aliases_command",
        list_help="list the aliases (the default)",
        options=_add_json_option,
    )
    store = add_command(
        actions,
        "set",
        _run_set_alias,
        help="name a route and a model",
        description=(
            "Make NAME stand for MODEL (a model id: its route is --provider, else "
            "the one route whose catalog lists it; or another alias)."
        ),
    )
    store.add_argument("name", metavar="NAME")
    store.add_argument("model", metavar="MODEL")
    _add_source_options(store)
    remove = add_command(actions, "remove", _run_remove_alias, help="forget an alias")
    remove.add_argument("name", metavar="NAME")
    add_command(actions, "path", _run_path, help="print the file's path")


def _marks(settings: ModelSettings, provider: str, model: str) -> str:
    marks = []
    if settings.default == ModelChoice(provider=provider, model=model):
        marks.append("default")
    aliases = settings.aliases_of(provider, model)
    if aliases:
        marks.append(f"aliases: {', '.join(aliases)}")
    return f"  ({'; '.join(marks)})" if marks else ""


def _run_models(args: argparse.Namespace) -> int:
    if args.base_url is not None:
        return _server_models(args)
    if args.api_key_env is not None:
        raise UsageError("--api-key-env applies to --base-url here")
    from dsh_llm.adapters import builtin_family
    from dsh_llm.cli.targets import open_routes

    settings = _settings()
    status = 0
    with open_routes(config=args.config, provider=args.provider) as routes:
        ids = routes.route_ids()
        if args.provider is not None and args.provider not in ids:
            raise UsageError(
                f'no route "{args.provider}" in {routes.origin} routes '
                f"(registered: {', '.join(ids) or 'none'})"
            )
        for route in ids if args.provider is None else (args.provider,):
            members = routes.failover.get(route)
            if members is not None:
                tried = ", ".join(r if m is None else f"{r} ({m})" for r, m in members)
                print(f"{route}: failover over {tried}")
                continue
            row = builtin_family(route) if routes.origin == "built-in" else None
            if args.provider is None and row is not None and row.server_catalog:
                print(
                    f"{route}: (its server lists the models: dsh-llm models "
                    f"--provider {route})"
                )
                continue
            try:
                models = routes.runtime.list_models(route)
            except LlmError as exc:
                print(
                    f'error[{exc.code}]: route "{route}": {exc.message}',
                    file=sys.stderr,
                )
                status = 1
                continue
            width = max((len(m.id) for m in models), default=0)
            for info in models:
                line = f"{route}: {info.id:<{width}}  {info.name}".rstrip()
                print(line + _marks(settings, route, info.id))
            if not models:
                print(f"{route}: (no models listed; chat --model NAME)")
    return status


def _server_models(args: argparse.Namespace) -> int:
    if args.provider is not None or args.config is not None:
        raise UsageError("--base-url lists one server: drop --provider and --config")
    from dsh_llm.cli.discover import DiscoveryError
    from dsh_llm.cli.discover import server_models
    from dsh_llm.cli.keys import user_environ

    try:
        ids = server_models(
            args.base_url, api_key_env=args.api_key_env, environ=user_environ()
        )
    except DiscoveryError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for model in ids:
        print(model)
    return 0


def _run_default(args: argparse.Namespace) -> int:
    settings = _settings()
    if args.clear:
        if args.name is not None:
            raise UsageError("--clear takes no NAME")
        settings.default = None
        _save(settings)
        print("no default model: chat picks its route's first model", file=sys.stderr)
        return 0
    if args.name is None:
        if settings.default is None:
            print("no default model set: dsh-llm models default NAME", file=sys.stderr)
            return 0
        print(f"{settings.default.model} (route {settings.default.provider})")
        return 0
    choice = _resolve(args.name, args.provider, args.config, settings)
    settings.default = choice
    _save(settings)
    print(f"default model: {choice.model} (route {choice.provider})", file=sys.stderr)
    return 0


def _save(settings: ModelSettings) -> None:
    try:
        settings.save()
    except UserFileError as exc:
        raise UsageError(str(exc)) from None


def _run_aliases(args: argparse.Namespace) -> int:
    settings = _settings()
    if args.json:
        data = {name: c.to_json() for name, c in sorted(settings.aliases.items())}
        print(json.dumps(data, indent=2))
        return 0
    if not settings.aliases:
        print("no aliases: dsh-llm aliases set NAME MODEL", file=sys.stderr)
        return 0
    width = max(len(name) for name in settings.aliases)
    for name, choice in sorted(settings.aliases.items()):
        print(f"{name:<{width}}  {choice.model} (route {choice.provider})")
    return 0


def _run_set_alias(args: argparse.Namespace) -> int:
    name: str = args.name
    if not _NAME.fullmatch(name):
        raise UsageError(f"an alias is one word without '/', got {name!r}")
    settings = _settings()
    choice = _resolve(args.model, args.provider, args.config, settings)
    settings.aliases[name] = choice
    _save(settings)
    print(f"alias {name}: {choice.model} (route {choice.provider})", file=sys.stderr)
    return 0


def _run_remove_alias(args: argparse.Namespace) -> int:
    settings = _settings()
    if settings.aliases.pop(args.name, None) is None:
        listed = ", ".join(sorted(settings.aliases)) or "none"
        raise UsageError(f"no alias {args.name!r} (aliases: {listed})")
    _save(settings)
    print(f"alias {args.name} removed", file=sys.stderr)
    return 0


def _run_path(args: argparse.Namespace) -> int:
    print(models_path())
    return 0
