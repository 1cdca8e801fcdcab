"""dsh_llm.plugins: how a composition's names resolve to plugins (entry points,
modules, files) and how resolution fails."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh_llm.plugins import PLUGIN_GROUP
from dsh_llm.plugins import load_composition
from dsh_llm.plugins import resolve_plugin
from dsh_llm.runtime import LlmRuntime
from tests.plugin_loading import load_error
from tests.plugin_loading import write

# --- resolution -------------------------------------------------------------------


def make_module(tmp_path: Path, name: str, body: str) -> None:
    write(tmp_path / f"{name}.py", body)


@pytest.fixture
def importable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[str, str], None]]:
    created: list[str] = []
    monkeypatch.syspath_prepend(str(tmp_path))

    def create(name: str, body: str) -> None:
        make_module(tmp_path, name, body)
        created.append(name)

    yield create
    for name in created:
        sys.modules.pop(name, None)


PLUGIN_BODY = """\
from dsh_llm.protocol import Finish, FinishReason, TokenUsage, UsageChunk
from dsh_llm.adapter import LlmAdapter

class Quiet(LlmAdapter):
    def stream(self, options):
        yield UsageChunk(usage=TokenUsage.unknown())
        yield Finish(reason=FinishReason.STOP)

name = "{label}"

def apply(ctx, config):
    ctx.llm.register_adapter(["{route}"], Quiet())

class Holder:
    name = "held"
    @staticmethod
    def apply(ctx, config):
        ctx.llm.register_adapter(["held-route"], Quiet())
"""


def test_a_module_path_and_a_module_attribute_resolve(
    importable: Callable[[str, str], None],
) -> None:
    importable("dsh_test_mod_plugin", PLUGIN_BODY.format(label="mod", route="mod-r"))
    composition = load_composition(
        [
            {"id": "a", "name": "dsh_test_mod_plugin"},
            {"id": "b", "name": "dsh_test_mod_plugin:Holder"},
        ]
    )
    assert [p.id for p in composition.runtime.list_providers()] == [
        "mod-r",
        "held-route",
    ]
    assert [p.name for p in composition.plugins] == ["mod", "held"]


def test_a_missing_attribute_names_the_module(
    importable: Callable[[str, str], None],
) -> None:
    importable("dsh_test_attr_plugin", PLUGIN_BODY.format(label="x", route="x"))
    error = load_error([{"id": "a", "name": "dsh_test_attr_plugin:Nope"}])
    assert error.key == "name"
    assert 'module "dsh_test_attr_plugin" has no attribute "Nope"' in error.message


def test_an_import_error_inside_the_plugin_is_not_reported_as_not_found(
    importable: Callable[[str, str], None],
) -> None:
    importable("dsh_test_broken_plugin", "import dsh_no_such_dependency\n")
    error = load_error([{"id": "a", "name": "dsh_test_broken_plugin"}])
    assert 'importing plugin "dsh_test_broken_plugin" failed' in error.message
    assert "dsh_no_such_dependency" in error.message


def test_an_exception_raised_while_importing_the_plugin_is_reported(
    importable: Callable[[str, str], None],
) -> None:
    importable("dsh_test_raising_plugin", "raise ValueError('bad at import')\n")
    error = load_error([{"id": "a", "name": "dsh_test_raising_plugin"}])
    assert error.message == (
        'plugin "a": importing plugin "dsh_test_raising_plugin" failed: '
        "ValueError: bad at import"
    )


def test_an_object_without_apply_is_not_a_plugin(
    importable: Callable[[str, str], None],
) -> None:
    importable("dsh_test_not_plugin", "name = 'nothing here'\n")
    error = load_error([{"id": "a", "name": "dsh_test_not_plugin"}])
    assert error.message == (
        'plugin "a": "dsh_test_not_plugin" is not a plugin: it has no '
        "apply(ctx, config) function"
    )


def install_distribution(site: Path, entry_points: str, module: str, body: str) -> None:
    dist = site / "dsh_test_dist-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: dsh-test-dist\nVersion: 1.0\n", encoding="utf-8"
    )
    (dist / "entry_points.txt").write_text(
        textwrap.dedent(entry_points), encoding="utf-8"
    )
    (site / f"{module}.py").write_text(body, encoding="utf-8")


def test_entry_points_of_the_group_resolve_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A real (temporary) distribution on sys.path, found by importlib.metadata.
    site = tmp_path / "site"
    install_distribution(
        site,
        f"""\
        [{PLUGIN_GROUP}]
        llm-test-echo = dsh_test_ep_plugin
        dsh_test_shadowed = dsh_test_ep_plugin:Holder
        llm-test-broken = dsh_test_ep_missing_module
        """,
        "dsh_test_ep_plugin",
        PLUGIN_BODY.format(label="from-entry-point", route="ep-route"),
    )
    (site / "dsh_test_shadowed.py").write_text(
        PLUGIN_BODY.format(label="shadowed", route="shadow-route"), encoding="utf-8"
    )
    monkeypatch.syspath_prepend(str(site))
    try:
        composition = load_composition(
            [
                {"id": "echo", "name": "llm-test-echo"},
                {"id": "shadowed", "name": "dsh_test_shadowed"},
            ]
        )
        assert [p.id for p in composition.runtime.list_providers()] == [
            "ep-route",
            "held-route",
        ]
        assert resolve_plugin("llm-test-echo").name == "from-entry-point"
        error = load_error([{"id": "broken", "name": "llm-test-broken"}])
        assert error.message.startswith(
            'plugin "broken": entry point "llm-test-broken" '
            "(dsh_test_ep_missing_module) failed to load: "
        )
    finally:
        for name in ("dsh_test_ep_plugin", "dsh_test_shadowed"):
            sys.modules.pop(name, None)


def test_file_plugins_resolve_relative_to_the_composition_file(tmp_path: Path) -> None:
    nested = tmp_path / "conf"
    nested.mkdir()
    write(
        tmp_path / "local_plugin.py",
        PLUGIN_BODY.format(label="local", route="local-r"),
    )
    path = write(nested / "dsh.yml", "- id: local\n  name: ../local_plugin.py\n")
    composition = load_composition(path)
    assert [p.id for p in composition.runtime.list_providers()] == ["local-r"]
    # Loading the same file again reuses the module instead of executing it twice.
    again = load_composition(path, LlmRuntime())
    assert again.plugins[0].name == "local"


def test_a_failing_plugin_file_is_reported_and_not_kept(tmp_path: Path) -> None:
    write(tmp_path / "boom.py", "raise RuntimeError('boom at import')\n")
    path = write(tmp_path / "dsh.yml", "- id: boom\n  name: ./boom.py\n")
    error = load_error(path)
    assert error.message == (
        'plugin "boom": importing plugin "./boom.py" failed: '
        "RuntimeError: boom at import"
    )
    assert not [name for name in sys.modules if name.startswith("dsh_llm_plugin_boom")]


def test_a_plugin_file_python_cannot_load_is_refused(tmp_path: Path) -> None:
    write(tmp_path / "plugin.txt", "def apply(ctx, config):\n    pass\n")
    error = load_error(write(tmp_path / "dsh.yml", "- id: t\n  name: ./plugin.txt\n"))
    assert error.message == 'plugin "t": cannot load plugin file "./plugin.txt"'


def test_a_plugin_file_that_exits_propagates_and_is_not_kept(tmp_path: Path) -> None:
    write(tmp_path / "quits.py", "raise SystemExit(3)\n")
    path = write(tmp_path / "dsh.yml", "- id: q\n  name: ./quits.py\n")
    with pytest.raises(SystemExit):
        load_composition(path)
    assert not [name for name in sys.modules if name.startswith("dsh_llm_plugin_quits")]
