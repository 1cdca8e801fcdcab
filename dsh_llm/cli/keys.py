"""``dsh-llm keys``: API keys kept for the user, used when the variable is unset.

Contracts callers may rely on:

- Keys live in ``keys.json`` of the user's config directory
  (``dsh_llm.cli.userdirs``), a JSON object of name to key, mode 0600, replaced
  in one step on every change. No command prints a key back.
- A key's NAME is a built-in route (``deepseek-official``, ``anthropic``,
  ``gemini``: it stands in for that route's variable, ``DEEPSEEK_API_KEY``...)
  or the name of a variable itself (``MY_API_KEY``: a ``--api-key-env`` or a
  composition's ``apiKeyEnv``).
- ``KeyedEnviron`` is the environment the command line's routes read: a variable
  that is set and not empty wins; an unset or empty one falls back on the
  stored key that stands in for it (the variable's own name first, then the
  route whose variable it is).
- ``keys set NAME`` reads the key from a prompt without echo on a terminal,
  else from stdin (surrounding whitespace trimmed); an empty key or one no HTTP
  header can carry is refused. ``keys list`` prints the names only,
  ``keys remove NAME`` forgets one, ``keys path`` prints the file.
"""

from __future__ import annotations

import argparse
import getpass
import os
import re
import sys
from collections.abc import Iterator
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from dsh_llm.adapters import BUILTIN_FAMILIES
from dsh_llm.cli.parser import Commands
from dsh_llm.cli.parser import add_command
from dsh_llm.cli.parser import add_listing_command
from dsh_llm.cli.usage import UsageError
from dsh_llm.cli.userdirs import UserFileError
from dsh_llm.cli.userdirs import config_dir
from dsh_llm.cli.userdirs import read_json
from dsh_llm.cli.userdirs import write_json
from dsh_llm.credentials import normalize_api_key

KEYS_FILE: Final = "keys.json"
"""The file's name in the config directory."""

_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")
_ROUTE_OF_VARIABLE: Final = {
    row.key_env: row.route for row in BUILTIN_FAMILIES if row.key_env is not None
}


def keys_path(environ: Mapping[str, str] | None = None) -> Path:
    """Where the keys are kept."""
    return config_dir(environ) / KEYS_FILE


def key_name(variable: str) -> str:
    """The NAME ``dsh-llm keys set`` stores the key of ``variable`` under: the
    built-in route whose variable it is, else the variable's own name."""
    return _ROUTE_OF_VARIABLE.get(variable, variable)


def _names_for(variable: str) -> tuple[str, ...]:
    route = _ROUTE_OF_VARIABLE.get(variable)
    return (variable,) if route is None else (variable, route)


class KeyStore:
    """The stored keys, read once (``load``) and written on each change.

    Its ``repr`` names the file and the names, never a key.
    """

    def __init__(self, path: Path, keys: Mapping[str, str]) -> None:
        self.path = path
        """The file."""
        self._keys = dict(keys)

    @classmethod
    def load(cls, path: Path | None = None) -> KeyStore:
        """The keys of ``path`` (default: ``keys_path()``); none when it is
        missing.

        Raises:
            UserFileError: when the file cannot be read or holds something other
                than names and string keys.
        """
        path = keys_path() if path is None else path
        data = read_json(path) or {}
        bad = sorted(name for name, key in data.items() if not isinstance(key, str))
        if bad:
            raise UserFileError(f"{path}: the key of {bad[0]!r} is not a string")
        return cls(path, data)

    def names(self) -> tuple[str, ...]:
        """The names, sorted."""
        return tuple(sorted(self._keys))

    def get(self, name: str) -> str | None:
        """The key stored under ``name``."""
        return self._keys.get(name)

    def set(self, name: str, key: str) -> None:
        """Store ``key`` under ``name`` and write the file.

        Raises:
            UserFileError: when the file cannot be written.
        """
        keys = {**self._keys, name: key}
        write_json(self.path, keys, private=True)
        self._keys = keys

    def remove(self, name: str) -> bool:
        """Forget ``name``; whether it was stored.

        Raises:
            UserFileError: when the file cannot be written.
        """
        if name not in self._keys:
            return False
        keys = {k: v for k, v in self._keys.items() if k != name}
        write_json(self.path, keys, private=True)
        self._keys = keys
        return True

    def __repr__(self) -> str:
        return f"KeyStore({str(self.path)!r}, names={list(self.names())})"


class KeyedEnviron(Mapping[str, str]):
    """``environ`` with the stored keys standing in for unset variables (see the
    module docstring). Reads ``environ`` live; its ``repr`` shows no value."""

    def __init__(self, environ: Mapping[str, str], keys: KeyStore) -> None:
        self._environ = environ
        self._keys = keys

    def stored_name(self, variable: str) -> str | None:
        """The stored key's name that gives ``variable`` its value, or ``None``
        (the variable is set, or nothing stands in for it)."""
        if self._environ.get(variable):
            return None
        return next((n for n in _names_for(variable) if self._keys.get(n)), None)

    def __getitem__(self, variable: str) -> str:
        name = self.stored_name(variable)
        if name is not None:
            key = self._keys.get(name)
            assert key is not None
            return key
        return self._environ[variable]

    def _stood_in(self) -> Iterator[str]:
        for name in self._keys.names():
            variables = [v for v, route in _ROUTE_OF_VARIABLE.items() if route == name]
            for variable in variables or [name]:
                if not self._environ.get(variable):
                    yield variable

    def __iter__(self) -> Iterator[str]:
        yield from self._environ
        yield from (
            v for v in dict.fromkeys(self._stood_in()) if v not in self._environ
        )

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __repr__(self) -> str:
        return f"<KeyedEnviron over {len(self._environ)} variables and {self._keys!r}>"


def user_environ(environ: Mapping[str, str] | None = None) -> KeyedEnviron:
    """``environ`` (default ``os.environ``) with the user's stored keys; a key
    file that cannot be read is reported on stderr and ignored."""
    environ = os.environ if environ is None else environ
    path = keys_path(environ)
    try:
        store = KeyStore.load(path)
    except UserFileError as exc:
        print(f"dsh-llm: warning: stored keys ignored: {exc}", file=sys.stderr)
        store = KeyStore(path, {})
    return KeyedEnviron(environ, store)


# --- the command ------------------------------------------------------------------


def add_parser(commands: Commands) -> None:
    """Add ``keys`` (``list``, ``set``, ``remove``, ``path``) to the subcommands."""
    actions = add_listing_command(
        commands,
        "keys",
        _run_list,
        help="store API keys for the routes (used when the variable is unset)",
        description=(
            "Keep API keys in keys.json of your config directory (mode 0600; "
            "`dsh-llm keys path` prints where). A route reads its variable "
            "first (DEEPSEEK_API_KEY...); when it is unset, the key stored under "
            "the route's name (deepseek-official, anthropic, gemini) or under the "
            "variable's own name is used. No command prints a key."
        ),
        dest="keys_command",
        list_help="the names of the stored keys",
    )
    store = add_command(
        actions,
        "set",
        _run_set,
        help="store a key (typed without echo, or read from stdin)",
        description=(
            "Store the key for NAME: typed at a prompt that does not echo it, or "
            "read from stdin when it is not a terminal "
            "(`printenv MY_KEY | dsh-llm keys set NAME`)."
        ),
    )
    store.add_argument(
        "name",
        metavar="NAME",
        help="a built-in route (deepseek-official, anthropic, gemini) or a "
        "variable's name (MY_API_KEY)",
    )
    remove = add_command(actions, "remove", _run_remove, help="forget a stored key")
    remove.add_argument("name", metavar="NAME")
    add_command(actions, "path", _run_path, help="print the keys file's path")


def _store() -> KeyStore:
    try:
        return KeyStore.load()
    except UserFileError as exc:
        raise UsageError(str(exc)) from None


def _read_key(name: str) -> str:
    stdin = sys.stdin
    if stdin is None:
        raise UsageError("there is no standard input to read the key from")
    isatty = getattr(stdin, "isatty", None)
    if isatty is not None and isatty():
        return getpass.getpass(f"key for {name} (not shown): ", stream=sys.stderr)
    try:
        return stdin.read()
    except UnicodeDecodeError:
        raise UsageError("the key on stdin is not valid UTF-8") from None


def _run_set(args: argparse.Namespace) -> int:
    name: str = args.name
    if not _NAME.fullmatch(name):
        raise UsageError(f"NAME must be letters, digits, '_', '.' or '-', got {name!r}")
    store = _store()
    checked = normalize_api_key(_read_key(name))
    if not checked.ok or checked.value is None:
        if checked.reason == "empty":
            raise UsageError("no key given: type it at the prompt or pipe it on stdin")
        raise UsageError(
            "the key contains characters no HTTP header can carry (spaces, "
            "non-ASCII); give the raw key alone"
        )
    try:
        store.set(name, checked.value.reveal())
    except UserFileError as exc:
        raise UsageError(str(exc)) from None
    print(f"key {name} stored in {store.path}", file=sys.stderr)
    return 0


def _run_list(args: argparse.Namespace) -> int:
    store = _store()
    for name in store.names():
        print(name)
    if not store.names():
        print("no keys stored: dsh-llm keys set NAME", file=sys.stderr)
    return 0


def _run_remove(args: argparse.Namespace) -> int:
    store = _store()
    try:
        removed = store.remove(args.name)
    except UserFileError as exc:
        raise UsageError(str(exc)) from None
    if not removed:
        listed = ", ".join(store.names()) or "none"
        raise UsageError(f"no key named {args.name!r} is stored (stored: {listed})")
    print(f"key {args.name} removed", file=sys.stderr)
    return 0


def _run_path(args: argparse.Namespace) -> int:
    print(keys_path())
    return 0
