"""``${VAR}`` interpolation in a composition file.

The strict structuring of a plugin's ``Config`` is ``dsh_llm.config``'s. This
module adds what only a composition file needs:

- ``interpolate`` replaces ``${VAR}`` and ``${VAR:-default}`` in every string
  (``$${`` is a literal ``${``); an unset variable without a default is a
  ``ConfigError`` at the key path where it occurs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from typing import Final

from dsh_llm.config import ConfigError
from dsh_llm.config import join_key

__all__ = ["interpolate"]

# --- ${VAR} interpolation ---------------------------------------------------------

_TOKEN: Final = re.compile(r"\$\$\{|\$\{(?P<body>[^}]*)\}|\$\{")
_EXPRESSION: Final = re.compile(
    r"(?P<var>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>.*))?", re.S
)


def interpolate(value: Any, environ: Mapping[str, str], path: str = "") -> Any:
    """Replace ``${VAR}`` / ``${VAR:-default}`` in every string of ``value``
    (mappings and lists are walked; keys are left alone).

    ``${VAR:-default}`` gives ``default`` when ``VAR`` is unset or empty;
    ``${VAR}`` gives ``VAR``'s value, which may be empty.

    A default is plain text: ``${`` inside it (nesting) is refused rather than
    half-substituted.

    Raises:
        ConfigError: for an unset variable without a default, an unterminated
            ``${``, a nested ``${`` or a malformed expression, at the key path
            where it occurs.
    """
    if isinstance(value, str):
        return _interpolate_text(value, environ, path)
    if isinstance(value, Mapping):
        return {
            key: interpolate(item, environ, join_key(path, str(key)))
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [
            interpolate(item, environ, f"{path}[{index}]")
            for index, item in enumerate(value)
        ]
    return value


def _interpolate_text(text: str, environ: Mapping[str, str], path: str) -> str:
    def substitute(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "$${":
            return "${"
        body = match.group("body")
        if body is None:
            raise ConfigError(
                [(path, "has an unterminated ${ (write $${ for a literal ${)")]
            )
        if "${" in body:
            raise ConfigError(
                [
                    (
                        path,
                        f"has ${{...}} inside ${{{body}}}: a default is plain "
                        "text (write $${ for a literal ${)",
                    )
                ]
            )
        expression = _EXPRESSION.fullmatch(body)
        if expression is None:
            raise ConfigError(
                [
                    (
                        path,
                        f"has the invalid expression ${{{body}}} (expected "
                        "${NAME} or ${NAME:-default})",
                    )
                ]
            )
        variable, default = expression.group("var"), expression.group("default")
        current = environ.get(variable)
        if default is not None:
            return current if current else default
        if current is None:
            raise ConfigError(
                [
                    (
                        path,
                        f"refers to ${{{variable}}}, which is not set (write "
                        f"${{{variable}:-default}} to give a default)",
                    )
                ]
            )
        return current

    return _TOKEN.sub(substitute, text)
