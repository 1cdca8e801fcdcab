"""Write docs/api.md: every public name of dsh_llm, once, under its module.

A module is public when no part of its dotted path starts with ``_``; its
public names are its ``__all__``. A value several modules export (``TextBlock``
is in ``dsh_llm``, ``dsh_llm.protocol`` and ``dsh_llm.protocol.content``) is
listed once, under the shortest of those paths: that is the one to import.

Usage: ``python tools/api_page.py`` rewrites the page; ``--check`` exits 1 when
the page is out of date (``tests/test_public_api.py`` runs the same check).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from pathlib import Path
from types import ModuleType

import dsh_llm

PAGE = Path(__file__).resolve().parent.parent / "docs" / "api.md"

INTRO = """\
# The public names, by module

Every name a user may import from `dsh_llm`, each listed once under the module
to import it from (the shortest path that exports it). A module not listed here,
a module whose path has a part starting with `_`, and a name not listed are
internal: they may change in any release.
`dsh_llm` itself exports at most 40 names (DESIGN section 4); the command line
`dsh-llm` is described in the README and [cli.md](cli.md).

This page is written by `python tools/api_page.py`; `tests/test_public_api.py`
fails when it is out of date.
"""


def public_modules() -> list[ModuleType]:
    """Every importable public module of the package, in dotted-path order."""
    names = ["dsh_llm"]
    for info in pkgutil.walk_packages(dsh_llm.__path__, "dsh_llm."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            names.append(info.name)
    return [importlib.import_module(name) for name in sorted(names)]


def _summary(module: ModuleType) -> str:
    doc = (module.__doc__ or "").strip()
    first = doc.split("\n\n")[0]
    return " ".join(first.split())


def _identity(value: object) -> object:
    # Plain values (str, int, tuples) may be equal objects by chance; only
    # classes, functions and other objects with a home are matched by identity.
    return id(value) if hasattr(value, "__module__") or callable(value) else None


def render() -> str:
    """The page's text."""
    modules = [m for m in public_modules() if hasattr(m, "__all__")]
    home: dict[object, str] = {}
    for module in sorted(modules, key=lambda m: (m.__name__.count("."), m.__name__)):
        for name in module.__all__:
            key = _identity(getattr(module, name))
            if key is not None:
                home.setdefault(key, module.__name__)
    lines = [INTRO]
    total = 0
    for module in modules:
        own = [
            name
            for name in module.__all__
            if home.get(_identity(getattr(module, name)), module.__name__)
            == module.__name__
        ]
        if not own:
            continue
        total += len(own)
        lines.append(f"## `{module.__name__}`\n")
        summary = _summary(module)
        if summary:
            lines.append(f"{summary}\n")
        lines.append(", ".join(f"`{name}`" for name in sorted(own)) + "\n")
    lines.append(f"_{total} names._\n")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only compare")
    args = parser.parse_args()
    text = render()
    if args.check:
        if PAGE.read_text(encoding="utf-8") != text:
            sys.stderr.write(f"{PAGE} is out of date: run python tools/api_page.py\n")
            return 1
        return 0
    PAGE.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
