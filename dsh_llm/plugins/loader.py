"""Plugins and YAML compositions: how adapters get into an ``LlmRuntime`` from config.

This module owns loading: resolving each entry's plugin and applying a
composition. The plugin contract (``Plugin``, ``PluginContext``,
``ScopedLlmRuntime``) is ``dsh_llm.plugins.context``'s and the config rules are
``dsh_llm.plugins.interpolation``'s; docs/plugins.md is the user guide. Contracts
callers may rely on:

- A composition is a YAML list of entries ``{id, name, config, disabled}``;
  ``name`` is looked up first as an entry point of group ``dsh_llm.plugins``,
  then as a ``.py`` file (relative to the YAML file) or an importable
  ``module`` / ``module:attribute``.
- Every load failure raises ``PluginLoadError`` (``PLUGIN_LOAD``) naming the
  plugin id, the config key and what was expected, never a config value.
- All entries are resolved and their configs checked before any ``apply``
  runs; when an ``apply`` fails, every plugin applied so far is disposed again.
- ``Composition.dispose()`` disposes plugins in reverse order, each plugin's
  effects in reverse; it is idempotent, and a failing disposer is logged while
  the rest still run.
- No repr of the loader's values shows a config value.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import os
import re
import sys
import threading
from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from typing import Final

import attrs
import yaml

from dsh_llm.config import ConfigError
from dsh_llm.config import PluginConfigError
from dsh_llm.config import config_key
from dsh_llm.config import quoted
from dsh_llm.config import structure_config
from dsh_llm.config import value_kind
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.plugins.context import PluginContext
from dsh_llm.plugins.interpolation import interpolate
from dsh_llm.runtime import LlmRuntime

__all__ = [
    "PLUGIN_GROUP",
    "Composition",
    "LoadedPlugin",
    "PluginLoadError",
    "load_composition",
    "resolve_plugin",
]

PLUGIN_GROUP: Final = "dsh_llm.plugins"
"""The entry-point group plugins are registered under."""

_ENTRY_KEYS: Final = ("id", "name", "config", "disabled")


# --- errors -----------------------------------------------------------------------


class PluginLoadError(LlmError):
    """A plugin or composition entry could not be loaded; nothing stayed registered.

    The message starts with ``plugin "<id>": `` when the entry is known and names
    the config key and what was expected.

    Args:
        plugin_id: The composition entry's id, or ``None`` for a problem with the
            composition as a whole (unreadable file, not a list).
        detail: What went wrong.
        key: The config key (or entry key: ``name``, ``inject``...) concerned.
        cause: The underlying exception.
    """

    def __init__(
        self,
        plugin_id: str | None,
        detail: str,
        *,
        key: str | None = None,
        cause: BaseException | None = None,
    ) -> None:
        message = detail if plugin_id is None else f'plugin "{plugin_id}": {detail}'
        super().__init__(message, ErrorCode.PLUGIN_LOAD, cause=cause)
        self.plugin_id: str | None = plugin_id
        """The entry's id, when the problem belongs to one entry."""
        self.key: str | None = key
        """The key concerned, e.g. ``apiKey`` or ``models[0].contextWindow``."""

    def _extra_state(self) -> dict[str, Any]:
        return {**super()._extra_state(), "plugin_id": self.plugin_id, "key": self.key}


# --- compositions -----------------------------------------------------------------


def _config_outline(config: object) -> str:
    """A config for a repr: its class and field names, never a value (a config
    usually holds a key or a header carrying one)."""
    if config is None:
        return "None"
    cls = type(config)
    if attrs.has(cls):
        names = ", ".join(field.name for field in attrs.fields(cls))
        return f"<{cls.__name__}: {names}>"
    return f"<{cls.__name__}>"


@attrs.frozen(kw_only=True)
class LoadedPlugin:
    """One applied entry of a composition.

    Its ``repr`` shows the config's class and field names only, never a value.
    """

    id: str
    """The entry's id."""
    name: str
    """The plugin's name (its own ``name``, else the entry's)."""
    config: Any = attrs.field(repr=_config_outline)
    """The structured ``Config`` instance, or ``None``."""


_Applied = tuple[LoadedPlugin, PluginContext]


def _applied(loaded: Sequence[_Applied]) -> tuple[_Applied, ...]:
    return tuple(loaded)


@attrs.frozen(eq=False, repr=False)
class Composition:
    """The plugins one ``load_composition`` call applied, and their runtime.

    Use it as a context manager to dispose it on exit.
    """

    runtime: LlmRuntime
    """The runtime the plugins registered into."""
    _loaded: tuple[_Applied, ...] = attrs.field(converter=_applied)
    _disposing: threading.Lock = attrs.field(init=False, factory=threading.Lock)
    """Taken, and never released, by the one ``dispose()`` that runs."""

    @property
    def plugins(self) -> tuple[LoadedPlugin, ...]:
        """The applied plugins, in load order (disabled entries excluded)."""
        return tuple(plugin for plugin, _ in self._loaded)

    @property
    def disposed(self) -> bool:
        """Whether ``dispose()`` has run."""
        return self._disposing.locked()

    def dispose(self) -> None:
        """Dispose every plugin, last loaded first. Idempotent; a failing disposer
        is logged and the rest still run."""
        if self._disposing.acquire(blocking=False):
            _dispose_all(context for _, context in self._loaded)

    def __enter__(self) -> Composition:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.dispose()

    def __repr__(self) -> str:
        ids = [plugin.id for plugin, _ in self._loaded]
        return f"<Composition plugins={ids}{' disposed' if self.disposed else ''}>"


def _dispose_all(contexts: Iterable[PluginContext]) -> None:
    # Never raises: a context logs a failing disposer and runs the others.
    for context in reversed(list(contexts)):
        context.dispose()


@attrs.frozen(kw_only=True)
class _Pending:
    id: str
    name: str
    plugin: Any
    config: Any = attrs.field(repr=_config_outline)


def load_composition(
    path_or_entries: str | os.PathLike[str] | Iterable[Mapping[str, Any]],
    runtime: LlmRuntime | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    services: Mapping[str, object] | None = None,
) -> Composition:
    """Load and apply every enabled entry of a composition.

    Args:
        path_or_entries: A YAML file holding a list of entries, or the entries
            themselves (mappings with ``id``, ``name``, ``config``, ``disabled``;
            from Python, ``name`` may also be the plugin object).
        runtime: The runtime to register into (default: a new ``LlmRuntime``).
        environ: Variables for ``${VAR}`` and ``ctx.environ`` (default:
            ``os.environ``).
        services: Further services plugins may ``inject`` besides ``"llm"``.

    Returns:
        The applied ``Composition``.

    Raises:
        PluginLoadError: for any problem; nothing stays registered then.
    """
    env: Mapping[str, str] = os.environ if environ is None else environ
    extra = dict(services or {})
    if "llm" in extra:
        raise ValueError('services cannot replace "llm"; pass runtime instead')
    if isinstance(path_or_entries, str | os.PathLike):
        source = os.fspath(path_or_entries)
        entries = _read_composition_file(source)
        base_dir = Path(source).resolve().parent
    else:
        source = "composition"
        entries = _entry_list(path_or_entries, source)
        base_dir = Path.cwd()
    provided = ("llm", *extra)
    pending: list[_Pending] = []
    seen: set[str] = set()
    for position, raw in enumerate(entries, start=1):
        prepared = _prepare_entry(position, raw, source, base_dir, env, provided, seen)
        if prepared is not None:
            pending.append(prepared)
    target = LlmRuntime() if runtime is None else runtime
    loaded: list[tuple[LoadedPlugin, PluginContext]] = []
    for entry in pending:
        context = PluginContext(target, plugin_id=entry.id, environ=env, services=extra)
        try:
            _apply(entry, context)
        except BaseException:
            _dispose_all([*(c for _, c in loaded), context])
            raise
        loaded.append(
            (LoadedPlugin(id=entry.id, name=entry.name, config=entry.config), context)
        )
    return Composition(target, loaded)


def _apply(entry: _Pending, context: PluginContext) -> None:
    try:
        undo = entry.plugin.apply(context, entry.config)
    except PluginConfigError as exc:
        key = config_key(type(entry.config), exc.key)
        raise PluginLoadError(
            entry.id, f'config key "{key}" {exc.detail}', key=key, cause=exc
        ) from exc
    except Exception as exc:
        raise PluginLoadError(
            entry.id, f"apply() failed: {_describe_exception(exc)}", cause=exc
        ) from exc
    if undo is None:
        return
    if not callable(undo):
        raise PluginLoadError(
            entry.id,
            f"apply() returned {type(undo).__name__}; expected None or a function "
            "that undoes it",
        )
    context.effect(undo)


def _describe_exception(exc: BaseException) -> str:
    if isinstance(exc, LlmError):
        return f"{exc.message} [{exc.code}]"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class _StrictLoader(yaml.SafeLoader):
    """``SafeLoader`` that refuses a key written twice in one mapping.

    Merge keys (``<<: *defaults``) work as in ``SafeLoader``: a key written in
    the mapping overrides the merged one, which is not a duplicate.
    """


_MERGE_TAG: Final = "tag:yaml.org,2002:merge"


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> Any:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        if key_node.tag == _MERGE_TAG:
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            duplicate = key in seen
            seen.add(key)
        except TypeError:
            continue
        if duplicate:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping",
                node.start_mark,
                f"found duplicate key {key!r}",
                key_node.start_mark,
            )
    return loader.construct_mapping(node, deep=True)


_StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _construct_mapping,
)


def _read_composition_file(source: str) -> list[Any]:
    try:
        with open(source, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise PluginLoadError(
            None, f'cannot read composition file "{source}": {exc}', cause=exc
        ) from exc
    try:
        data = yaml.load(text, Loader=_StrictLoader)
    except yaml.YAMLError as exc:
        raise PluginLoadError(
            None,
            f'cannot parse composition file "{source}": {_yaml_problem(exc)}',
            cause=exc,
        ) from exc
    if data is None:
        return []
    return _entry_list(data, f'composition file "{source}"')


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """The parser's complaint and position, without the source snippet PyYAML
    would quote (the offending line may hold a key)."""
    if not isinstance(exc, yaml.MarkedYAMLError):
        return type(exc).__name__
    parts = [part for part in (exc.context, exc.problem) if part]
    text = ": ".join(parts) or "invalid YAML"
    mark = exc.problem_mark or exc.context_mark
    if mark is not None:
        text += f" (line {mark.line + 1}, column {mark.column + 1})"
    return text


def _entry_list(data: object, source: str) -> list[Any]:
    if isinstance(data, Mapping | str | bytes) or not isinstance(data, Iterable):
        raise PluginLoadError(
            None,
            f"{source} must hold a list of plugin entries, got {value_kind(data)}",
        )
    return list(data)


def _prepare_entry(
    position: int,
    raw: object,
    source: str,
    base_dir: Path,
    environ: Mapping[str, str],
    provided: tuple[str, ...],
    seen: set[str],
) -> _Pending | None:
    """Resolve one entry and check its config; no side effects on the runtime."""
    where = f"{source}: entry {position}"
    if not isinstance(raw, Mapping):
        raise PluginLoadError(
            None, f"{where} must be a mapping with id and name, got {value_kind(raw)}"
        )
    unknown = [key for key in raw if key not in _ENTRY_KEYS]
    if unknown:
        raise PluginLoadError(
            None,
            f"{where} has the unknown key {quoted([str(k) for k in unknown])} "
            f"(expected {quoted(_ENTRY_KEYS)})",
            key=str(unknown[0]),
        )
    name = raw.get("name")
    if name is None or name == "":
        raise PluginLoadError(
            None, f"{where}: name is required (the plugin to load)", key="name"
        )
    plugin_id = raw.get("id", name if isinstance(name, str) else None)
    if not isinstance(plugin_id, str) or plugin_id == "":
        raise PluginLoadError(None, f"{where}: id must be a non-empty string", key="id")
    if plugin_id in seen:
        raise PluginLoadError(
            plugin_id, f"{where}: the id is used by an earlier entry", key="id"
        )
    seen.add(plugin_id)
    disabled = raw.get("disabled", False)
    if not isinstance(disabled, bool):
        raise PluginLoadError(
            plugin_id,
            f"disabled must be a boolean, got {value_kind(disabled)}",
            key="disabled",
        )
    if disabled:
        return None
    if isinstance(name, str):
        try:
            name = interpolate(name, environ)
        except ConfigError as exc:
            detail = exc.problems[0][1]
            raise PluginLoadError(plugin_id, f"name {detail}", key="name") from exc
    plugin, label = _resolve(plugin_id, name, base_dir)
    inject = _inject_of(plugin_id, plugin)
    for service in inject:
        if service not in provided:
            raise PluginLoadError(
                plugin_id,
                f'inject lists the service "{service}", which this composition '
                f"does not provide (provided: {quoted(provided)})",
                key="inject",
            )
    config_cls = getattr(plugin, "Config", None)
    raw_config = raw.get("config")
    if config_cls is None:
        if raw_config not in (None, {}):
            keys = list(raw_config) if isinstance(raw_config, Mapping) else []
            raise PluginLoadError(
                plugin_id,
                "takes no config (it has no Config class), but config was given"
                + (f" with {quoted([str(k) for k in keys])}" if keys else ""),
                key="config",
            )
        config = None
    else:
        if not (isinstance(config_cls, type) and attrs.has(config_cls)):
            raise PluginLoadError(
                plugin_id,
                f"Config must be an attrs class, got {type(config_cls).__name__}",
                key="config",
            )
        try:
            config = structure_config(config_cls, interpolate(raw_config, environ))
        except ConfigError as exc:
            raise PluginLoadError(
                plugin_id, str(exc), key=exc.key or "config", cause=exc
            ) from exc
    own_name = getattr(plugin, "name", None)
    return _Pending(
        id=plugin_id,
        name=own_name if isinstance(own_name, str) and own_name else label,
        plugin=plugin,
        config=config,
    )


def _inject_of(plugin_id: str, plugin: object) -> tuple[str, ...]:
    inject = getattr(plugin, "inject", ())
    if inject is None:
        return ()
    if isinstance(inject, str) or not isinstance(inject, Sequence | frozenset | set):
        raise PluginLoadError(
            plugin_id,
            f"inject must be a list of service names, got {value_kind(inject)}",
            key="inject",
        )
    services = tuple(inject)
    if any(not isinstance(s, str) or s == "" for s in services):
        raise PluginLoadError(
            plugin_id, "inject must hold non-empty service names", key="inject"
        )
    return services


# --- resolving plugins ------------------------------------------------------------


def resolve_plugin(name: str, base_dir: str | os.PathLike[str] | None = None) -> Any:
    """Find the plugin ``name`` the way a composition does.

    Order: an entry point of group ``dsh_llm.plugins`` named ``name``; a ``.py``
    file (a path, relative to ``base_dir``, default the working directory); an
    importable ``module`` or ``module:attribute``.

    Raises:
        PluginLoadError: when nothing is found, loading fails, or the object has
            no callable ``apply``.
    """
    directory = Path.cwd() if base_dir is None else Path(base_dir)
    plugin, _ = _resolve(None, name, directory)
    return plugin


def _resolve(plugin_id: str | None, name: object, base_dir: Path) -> tuple[Any, str]:
    if not isinstance(name, str):
        if callable(getattr(name, "apply", None)):
            label = getattr(name, "name", None) or getattr(name, "__name__", None)
            return name, str(label or type(name).__name__)
        raise PluginLoadError(
            plugin_id,
            f"name must be a string, got {value_kind(name)}",
            key="name",
        )
    plugin = _load_named(plugin_id, name, base_dir)
    if not callable(getattr(plugin, "apply", None)):
        raise PluginLoadError(
            plugin_id,
            f'"{name}" is not a plugin: it has no apply(ctx, config) function',
            key="name",
        )
    return plugin, name


def _load_named(plugin_id: str | None, name: str, base_dir: Path) -> Any:
    found = importlib.metadata.entry_points(group=PLUGIN_GROUP, name=name)
    for entry_point in found:
        try:
            return entry_point.load()
        except Exception as exc:
            raise PluginLoadError(
                plugin_id,
                f'entry point "{name}" ({entry_point.value}) failed to load: '
                f"{_describe_exception(exc)}",
                key="name",
                cause=exc,
            ) from exc
    if name.endswith(".py") or "/" in name or os.sep in name:
        return _load_file(plugin_id, name, base_dir)
    module_name, _, attribute = name.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (
            module_name == exc.name or module_name.startswith(exc.name + ".")
        ):
            raise PluginLoadError(
                plugin_id,
                f'cannot find plugin "{name}": it is neither an entry point in '
                f'group "{PLUGIN_GROUP}" nor an importable module',
                key="name",
                cause=exc,
            ) from exc
        raise _import_failed(plugin_id, name, exc) from exc
    except Exception as exc:
        raise _import_failed(plugin_id, name, exc) from exc
    if not attribute:
        return module
    try:
        target: Any = module
        for part in attribute.split("."):
            target = getattr(target, part)
    except AttributeError as exc:
        raise PluginLoadError(
            plugin_id,
            f'cannot find plugin "{name}": module "{module_name}" has no '
            f'attribute "{attribute}"',
            key="name",
            cause=exc,
        ) from exc
    return target


def _import_failed(plugin_id: str | None, name: str, exc: Exception) -> PluginLoadError:
    return PluginLoadError(
        plugin_id,
        f'importing plugin "{name}" failed: {_describe_exception(exc)}',
        key="name",
        cause=exc,
    )


def _load_file(plugin_id: str | None, name: str, base_dir: Path) -> Any:
    path = Path(name)
    if not path.is_absolute():
        path = base_dir / path
    path = path.resolve()
    if not path.is_file():
        raise PluginLoadError(
            plugin_id,
            f'cannot find plugin file "{name}" (relative paths start at the '
            "composition file's directory)",
            key="name",
        )
    digest = hashlib.sha1(str(path).encode(), usedforsecurity=False).hexdigest()[:10]
    stem = re.sub(r"\W", "_", path.stem)
    module_name = f"dsh_llm_plugin_{stem}_{digest}"
    existing = sys.modules.get(module_name)
    if existing is not None:
        return existing
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise PluginLoadError(
            plugin_id, f'cannot load plugin file "{name}"', key="name"
        )
    module = importlib.util.module_from_spec(spec)
    # Registered before running so attrs/cattrs can resolve the module's
    # postponed annotations through sys.modules.
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:
        sys.modules.pop(module_name, None)
        if not isinstance(exc, Exception):
            raise
        raise _import_failed(plugin_id, name, exc) from exc
    return module
