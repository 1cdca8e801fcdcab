"""The layers of DESIGN.md section 3, read from the import graph of dsh_llm.

Every module of the package is parsed with ``ast`` (no import runs), and every
import counts: at module level, inside functions and under ``TYPE_CHECKING``.
The check fails when a module imports one of a higher layer, when modules import
each other (any cycle), when a private name or a private module is imported from
outside its package, or when the package's top level holds more than 18 modules.
The layers, lowest first:

- primitives: ``signal``, ``sources``, ``_version``, ``protocol.text_buffer``
  (``GenerateOptions`` holds an ``AbortSignal``, so these sit below the values);
- protocol: ``dsh_llm/protocol/*``, the values;
- contract: ``errors``, ``serde``, ``validator``, ``assembler``, ``trace``,
  ``credentials``, ``converter`` (the strict cattrs base of ``serde`` and
  ``config``), ``config``, ``structured`` (reading a JSON answer), ``attachments``
  (the bytes behind an ``ImageBlock``) and ``retry``. DESIGN puts ``serde`` with
  the values and "retry" in the runtime; here ``serde`` raises ``LlmError`` (so it
  sits with the errors), and ``retry`` holds the retry *policies*, values with pure
  delay math that adapter configs carry and the runtime captures: below both. The
  retry *loops* (``call.call_with_retry``, ``routing.retrying``) are surfaces;
- transport: ``dsh_llm/transport/*`` (``attribution`` included, as in DESIGN);
- adapters: ``adapter.py``, ``dsh_llm/adapters/**``;
- runtime: ``dsh_llm/runtime/*``;
- the surfaces, each above the ones before it: bridges (``call``, ``aio``,
  ``conversation``, ``tools``), ``plugins``, ``routing``, ``observe``, ``batch``,
  ``testing``, ``cli``, and the package root (``dsh_llm``, ``__main__``).

An import of a package counts as an import of its ``__init__``; ``from pkg
import name`` counts as an import of ``pkg.name`` when that is a module.
"""

from __future__ import annotations

import ast
import pathlib
from collections.abc import Iterator
from typing import Final

PACKAGE: Final = pathlib.Path(__file__).resolve().parent.parent / "dsh_llm"

LAYERS: Final = (
    "primitives",
    "protocol",
    "contract",
    "transport",
    "adapters",
    "runtime",
    "bridges",
    "plugins",
    "routing",
    "observe",
    "batch",
    "testing",
    "cli",
    "root",
)
"""Lowest first: a module may import its own layer and the ones before it."""

PRIMITIVES: Final = frozenset(
    {
        "dsh_llm._version",
        "dsh_llm.signal",
        "dsh_llm.sources",
        "dsh_llm.protocol.text_buffer",
    }
)

CONTRACT: Final = frozenset(
    {
        "dsh_llm.assembler",
        "dsh_llm.attachments",
        "dsh_llm.attachments.images",
        "dsh_llm.attachments.store",
        "dsh_llm.config",
        "dsh_llm.credentials",
        "dsh_llm.errors",
        "dsh_llm.retry",
        "dsh_llm.serde",
        "dsh_llm.converter",
        "dsh_llm.structured",
        "dsh_llm.structured.parse",
        "dsh_llm.structured.partial",
        "dsh_llm.structured.schema",
        "dsh_llm.trace",
        "dsh_llm.validator",
    }
)

ALLOWED_UPWARD: Final[frozenset[tuple[str, str]]] = frozenset()
"""Known upward imports still to be removed; each entry must be a violation."""

ALLOWED_CYCLES: Final[frozenset[frozenset[str]]] = frozenset()
"""Known import cycles (as sets of modules) still to be removed."""


def layer_of(module: str) -> str:
    """The layer of a module, by the map in this file's docstring."""
    parts = module.split(".")
    if module in PRIMITIVES:
        return "primitives"
    if module in CONTRACT:
        return "contract"
    if len(parts) > 1 and parts[1] == "protocol":
        return "protocol"
    if len(parts) > 1 and parts[1] == "transport":
        return "transport"
    if module == "dsh_llm.adapter" or (len(parts) > 1 and parts[1] == "adapters"):
        return "adapters"
    if len(parts) > 1 and parts[1] == "runtime":
        return "runtime"
    if len(parts) > 1 and parts[1] in _SURFACE_PACKAGES:
        return _SURFACE_PACKAGES[parts[1]]
    return "root"


_SURFACE_PACKAGES: Final = {
    "call": "bridges",
    "aio": "bridges",
    "conversation": "bridges",
    "tools": "bridges",
    "plugins": "plugins",
    "routing": "routing",
    "observe": "observe",
    "batch": "batch",
    "testing": "testing",
    "cli": "cli",
}
"""The surfaces by their module or package under ``dsh_llm``."""


def module_name(path: pathlib.Path) -> str:
    relative = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = relative.parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def all_modules() -> dict[str, pathlib.Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imports_of(
    module: str, path: pathlib.Path, known: dict[str, pathlib.Path]
) -> Iterator[str]:
    """The dsh_llm modules ``module`` imports, wherever the import is written."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "dsh_llm":
                    yield alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base if is_package else base[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            if target.split(".")[0] != "dsh_llm":
                continue
            for alias in node.names:
                submodule = f"{target}.{alias.name}"
                yield submodule if submodule in known else target


def import_graph() -> dict[str, set[str]]:
    known = all_modules()
    graph: dict[str, set[str]] = {}
    for module, path in known.items():
        targets = {t for t in imports_of(module, path, known) if t != module}
        unknown = targets - known.keys()
        assert not unknown, f"{module} imports modules that do not exist: {unknown}"
        graph[module] = targets
    return graph


def upward_imports(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    return {
        (module, target)
        for module, targets in graph.items()
        for target in targets
        if LAYERS.index(layer_of(target)) > LAYERS.index(layer_of(module))
    }


def cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[frozenset[str]] = set()

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.add(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


GRAPH: Final = import_graph()


def test_no_module_imports_a_higher_layer() -> None:
    violations = upward_imports(GRAPH) - ALLOWED_UPWARD
    assert not violations, "\n".join(
        f"{module} ({layer_of(module)}) imports {target} ({layer_of(target)})"
        for module, target in sorted(violations)
    )


def test_no_modules_import_each_other() -> None:
    found = cycles(GRAPH) - ALLOWED_CYCLES
    assert not found, "\n".join(" <-> ".join(sorted(cycle)) for cycle in found)


def test_every_allow_list_entry_is_still_a_violation() -> None:
    # A fixed violation must leave the allow-list with its fix.
    stale_upward = ALLOWED_UPWARD - upward_imports(GRAPH)
    assert not stale_upward, f"stale ALLOWED_UPWARD entries: {sorted(stale_upward)}"
    stale_cycles = ALLOWED_CYCLES - cycles(GRAPH)
    assert not stale_cycles, f"stale ALLOWED_CYCLES entries: {stale_cycles}"


def test_the_check_sees_what_it_must(tmp_path: pathlib.Path) -> None:
    # Imports inside functions and under TYPE_CHECKING count, relative ones
    # resolve, and the map knows every layer of the real tree.
    source = tmp_path / "mod.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "import json\n"
        "if TYPE_CHECKING:\n"
        "    from dsh_llm.runtime import LlmRuntime\n"
        "def f():\n"
        "    import dsh_llm.aio\n"
        "    from . import retry\n"
        "    from .protocol import TextBlock\n",
        encoding="utf-8",
    )
    known = all_modules()
    assert set(imports_of("dsh_llm.mod", source, known)) == {
        "dsh_llm.runtime",
        "dsh_llm.aio",
        "dsh_llm.retry",
        "dsh_llm.protocol",
    }
    assert {layer_of(module) for module in GRAPH} == set(LAYERS)
    assert "dsh_llm.cli.chat" in GRAPH["dsh_llm.cli.main"]
    synthetic = {"a.low": {"a.high"}, "a.high": {"a.low"}, "a.alone": set()}
    assert cycles(synthetic) == {frozenset({"a.low", "a.high"})}
    assert upward_imports({"dsh_llm.errors": {"dsh_llm.runtime"}}) == {
        ("dsh_llm.errors", "dsh_llm.runtime")
    }


TOP_LEVEL_BOUND: Final = 18
"""Modules directly in ``dsh_llm/`` (``__init__`` and ``__main__`` included)."""


def test_the_top_level_stays_small() -> None:
    top = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert len(top) <= TOP_LEVEL_BOUND, top


def private_imports(module: str, path: pathlib.Path) -> Iterator[tuple[str, str]]:
    """``(what, from where)`` for each private name ``module`` imports from
    another module, and each private module it imports from outside that
    module's package."""
    is_package = path.name == "__init__.py"
    home = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base if is_package else base[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            if target.split(".")[0] != "dsh_llm":
                continue
            for alias in node.names:
                name = alias.name
                private = name.startswith("_") and not name.startswith("__")
                # A private module imported by name is judged below, as a module.
                if private and f"{target}.{name}" not in GRAPH:
                    yield (name, target)
            modules = [target]
        elif isinstance(node, ast.Import):
            modules = [a.name for a in node.names if a.name.startswith("dsh_llm")]
        else:
            continue
        for target in modules:
            parts = target.split(".")
            for depth, part in enumerate(parts):
                if part.startswith("_") and not part.startswith("__"):
                    owner = ".".join(parts[:depth])
                    if not (home == owner or home.startswith(owner + ".")):
                        yield (target, owner)
                    break


def test_no_private_name_or_module_is_imported_from_outside_its_home() -> None:
    found = [
        f"{module} imports {what} (private to {where})"
        for module, path in all_modules().items()
        for what, where in private_imports(module, path)
    ]
    assert not found, "\n".join(found)


def test_the_private_import_check_sees_what_it_must(tmp_path: pathlib.Path) -> None:
    source = tmp_path / "mod.py"
    source.write_text(
        "from dsh_llm.adapters._wire.writer import BlockWriter\n"
        "from dsh_llm.errors import _secret_helper\n"
        "from dsh_llm._version import __version__\n",
        encoding="utf-8",
    )
    outside = set(private_imports("dsh_llm.cli.mod", source))
    assert outside == {
        ("dsh_llm.adapters._wire.writer", "dsh_llm.adapters"),
        ("_secret_helper", "dsh_llm.errors"),
    }
    inside = set(private_imports("dsh_llm.adapters.anthropic.mod", source))
    assert inside == {("_secret_helper", "dsh_llm.errors")}
