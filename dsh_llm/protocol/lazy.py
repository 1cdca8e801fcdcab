"""Lazy exports (PEP 562): a package's names imported from their modules on first use.

A package ``__init__`` that re-exports names of modules it must not import at
once (the adapter kit, the testing kit) states where each name lives and gets
its module ``__getattr__`` and ``__dir__`` from ``lazy_exports``. Contracts:

- Importing the package imports none of those modules; reading a name imports
  its module, then stores the value in the package, so later reads are plain
  attribute reads that never come back here.
- A name the table does not hold raises ``AttributeError``, as for any module.
- ``dir(package)`` lists the table's names with those already loaded.
- The package's ``__all__`` is made from the table, and its type checkers read
  the names from ``if TYPE_CHECKING:`` imports in the ``import X as X`` form
  (an explicit re-export), so each name is written once for each reader.

An internal helper (this module has no ``__all__``); it sits with the protocol's
values only because both packages that use it may import from this layer.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any


def lazy_exports(
    namespace: dict[str, Any], modules: str, homes: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of the package whose ``globals()`` is
    ``namespace``: the name ``name`` is read from the module
    ``f"{modules}.{homes[name]}"`` (``modules`` is the package or one below it)."""
    package = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{modules}.{home}"), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *homes})

    return __getattr__, __dir__
