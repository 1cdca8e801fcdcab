"""Where the command line keeps what it remembers for the user, and how it writes it.

Contracts callers may rely on:

- ``DSH_LLM_USER_DIR``, when set and not empty, is the one directory for both
  the configuration (keys, aliases, the logging switch) and the data (the log
  database, the images sent). Otherwise the platform's conventions apply, with
  no dependency: ``$XDG_CONFIG_HOME/dsh-llm`` (default ``~/.config/dsh-llm``) and
  ``$XDG_DATA_HOME/dsh-llm`` (default ``~/.local/share/dsh-llm``) on Linux and
  other Unix systems, ``~/Library/Application Support/dsh-llm`` for both on
  macOS, ``%APPDATA%\\dsh-llm`` for both on Windows.
- Nothing here creates a directory until something is written there.
- ``write_json`` replaces a file in one step (a temporary file in the same
  directory, then ``os.replace``), so a reader sees the old content or the new,
  never half; the file has mode 0600 (owner only), and ``private=True``
  creates its directory with mode 0700 when it has to create it.
- ``read_json`` returns ``None`` for a missing file and raises
  ``UserFileError`` (a message naming the file) for one that cannot be read or
  is not a JSON object.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from typing import Final

APP_NAME: Final = "dsh-llm"
"""The name of the directories under the platform's roots."""
USER_DIR_ENV: Final = "DSH_LLM_USER_DIR"
"""The variable naming one directory for everything (tests, portable setups)."""


class UserFileError(Exception):
    """A file of the user's directory cannot be read or written; the message
    names the file and the reason."""


def _home(environ: Mapping[str, str]) -> Path:
    home = environ.get("HOME")
    return Path(home) if home else Path.home()


def _override(environ: Mapping[str, str]) -> Path | None:
    value = environ.get(USER_DIR_ENV)
    return Path(value) if value else None


def _xdg(environ: Mapping[str, str], variable: str, default: str) -> Path:
    value = environ.get(variable)
    # The XDG spec: a relative path in these variables is invalid and ignored.
    if value and os.path.isabs(value):
        return Path(value) / APP_NAME
    return _home(environ) / default / APP_NAME


def _windows(environ: Mapping[str, str]) -> Path:
    value = environ.get("APPDATA")
    root = Path(value) if value else _home(environ) / "AppData" / "Roaming"
    return root / APP_NAME


def _macos(environ: Mapping[str, str]) -> Path:
    return _home(environ) / "Library" / "Application Support" / APP_NAME


def _user_dir(
    environ: Mapping[str, str] | None,
    platform: str | None,
    xdg_variable: str,
    xdg_default: str,
) -> Path:
    # Settings and data share one folder on Windows and macOS; only the XDG
    # platforms keep them apart.
    environ = os.environ if environ is None else environ
    platform = sys.platform if platform is None else platform
    override = _override(environ)
    if override is not None:
        return override
    if platform == "win32":
        return _windows(environ)
    if platform == "darwin":
        return _macos(environ)
    return _xdg(environ, xdg_variable, xdg_default)


def config_dir(
    environ: Mapping[str, str] | None = None, platform: str | None = None
) -> Path:
    """The directory of the user's settings (see the module docstring).

    Args:
        environ: Where variables are read (default ``os.environ``).
        platform: ``sys.platform``'s value to follow (default: this one's).
    """
    return _user_dir(environ, platform, "XDG_CONFIG_HOME", ".config")


def data_dir(
    environ: Mapping[str, str] | None = None, platform: str | None = None
) -> Path:
    """The directory of the user's data: the log database, the images sent
    (``environ`` and ``platform`` as for ``config_dir``)."""
    return _user_dir(
        environ, platform, "XDG_DATA_HOME", os.path.join(".local", "share")
    )


def read_json(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``; ``None`` when there is no such file.

    Raises:
        UserFileError: when it cannot be read or does not hold a JSON object.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise UserFileError(f"cannot read {path}: {reason}") from None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise UserFileError(f"{path} is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise UserFileError(f"{path} must hold a JSON object")
    return value


def write_json(path: Path, value: Mapping[str, Any], *, private: bool = False) -> None:
    """Replace ``path`` with ``value`` as JSON in one step (see the module
    docstring); ``private``: mode 0700 for a directory it creates.

    Raises:
        UserFileError: when the directory or the file cannot be written.
    """
    text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    try:
        path.parent.mkdir(mode=0o700 if private else 0o777, parents=True, exist_ok=True)
        # mkstemp creates the file with mode 0600 whatever the umask.
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.write(text)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
    except OSError as exc:
        raise UserFileError(f"cannot write {path}: {exc.strerror or exc}") from None
