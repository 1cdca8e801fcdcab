"""The source distribution is complete, and its own tests pass (issue 29, 8-9).

From a copy of the repository's files (``git ls-files``: what a clean clone
holds), ``python -m build`` makes the sdist and then the wheel from that sdist,
as a package index user gets them. The test checks that

- the sdist holds every file of the repository (the package, the whole test
  suite with its conftest, fixtures and helper modules, the docs, the examples,
  the benchmarks, README, CHANGELOG, LICENSE, .ci/run) and nothing else but the
  metadata setuptools writes;
- the wheel holds every module of the package, ``py.typed`` and the MIT
  LICENSE, and no tests;
- installed into a fresh virtual environment, the package imports from there;
- the unpacked sdist's test suite collects without an error (every module), and
  a subset that reads the shipped files passes: the README blocks, the docs
  tables, the examples plugin, the recorded-stream conformance and the layers.

Inside the unpacked tree, pytest imports the tree's own ``dsh_llm`` (``python
-m pytest`` puts the current directory first), as a user's run would; the
``dsh-llm`` commands the README tests start are the installed wheel's, and the
import check above runs from outside the tree. Running the whole suite a second
time would double CI's test time (about 4 minutes on 2 cores), hence the
subset; the build, the venv, the collection and the subset take about 80 s on
2 cores (3 minutes when the machine is shared with other jobs). The
dependencies come from this interpreter's environment (a path line in the fresh
venv), so nothing is downloaded. Skipped without ``build`` and ``wheel`` (the
``dev`` extra has them).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

SUBSET = (
    "tests/test_readme.py",
    "tests/test_docs_errors.py",
    "tests/test_docs_protocol.py",
    "tests/plugins/test_examples_plugin.py",
    "tests/testing/test_conformance_shipped.py",
    "tests/test_layers.py",
)
"""What the unpacked sdist runs: the tests that read the files it ships."""

_JUNK_DIRS = frozenset(
    {
        ".git",
        "__pycache__",
        "build",
        "dist",
        ".venv",
        ".tox",
        ".hypothesis",
        ".mypy_cache",
        ".ruff_cache",
        ".pytest_cache",
    }
)


def _repository_files() -> list[str]:
    """The repository's files, as a clean clone has them."""
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z"],
        capture_output=True,
        check=False,
    )
    if listed.returncode == 0 and listed.stdout:
        return sorted(
            name
            for name in listed.stdout.decode().split("\0")
            if name and (ROOT / name).is_file()
        )
    # Not a git checkout: every file but caches and build output.
    found = []
    for directory, subdirectories, names in os.walk(ROOT):
        subdirectories[:] = [
            d
            for d in subdirectories
            if d not in _JUNK_DIRS and not d.endswith(".egg-info")
        ]
        for name in names:
            if not name.endswith((".pyc", ".pyo")):
                found.append((Path(directory) / name).relative_to(ROOT).as_posix())
    return sorted(found)


def _copy(files: list[str], to: Path) -> None:
    for name in files:
        target = to / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)


def _environment() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYTEST_ADDOPTS", "PYTEST_PLUGINS")
    }
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["PIP_NO_INDEX"] = "1"
    return env


def _run(
    args: list[str], cwd: Path, timeout: float
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args,
        cwd=cwd,
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], Path, Path]:
    for module in ("build", "wheel"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed (pip install -e '.[dev]')")
    files = _repository_files()
    source = tmp_path_factory.mktemp("source")
    _copy(files, source)
    dist = tmp_path_factory.mktemp("dist")
    made = _run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), "."],
        cwd=source,
        timeout=600,
    )
    assert made.returncode == 0, made.stdout[-3000:] + made.stderr[-3000:]
    (sdist,) = dist.glob("*.tar.gz")
    (wheel,) = dist.glob("*.whl")
    return files, sdist, wheel


def test_the_sdist_holds_every_file_of_the_repository(built):
    files, sdist, _ = built
    with tarfile.open(sdist) as archive:
        names = [m.name.split("/", 1)[1] for m in archive.getmembers() if m.isfile()]
    shipped = set(names)
    missing = sorted(set(files) - shipped - {".gitignore"})
    assert not missing, f"files left out of the sdist: {missing[:20]}"
    extra = sorted(
        name
        for name in shipped - set(files)
        if name != "PKG-INFO" and not name.startswith("dsh_llm.egg-info/")
    )
    assert not extra, f"files in the sdist that the repository lacks: {extra[:20]}"
    for needed in (
        "LICENSE",
        "README.md",
        "CHANGELOG.md",
        "tests/conftest.py",
        "tests/cli_run.py",
        "docs/index.md",
        "examples/my_llm_adapter.py",
        ".ci/run",
    ):
        assert needed in shipped, needed
    assert any(name.startswith("tests/fixtures/") for name in shipped)


def test_the_wheel_ships_the_package_py_typed_and_the_license(built):
    files, _, wheel = built
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        licenses = [
            name
            for name in names
            if ".dist-info/" in name and name.rsplit("/", 1)[-1] == "LICENSE"
        ]
        assert len(licenses) == 1, names
        assert archive.read(licenses[0]).decode().startswith("MIT License")
        metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
        assert "License: MIT" in archive.read(metadata).decode()
    assert "dsh_llm/py.typed" in names
    modules = {f for f in files if f.startswith("dsh_llm/") and f.endswith(".py")}
    assert modules <= set(names)
    assert not [name for name in names if name.startswith("tests/")]


def test_the_unpacked_sdist_installs_and_its_tests_pass(built, tmp_path):
    _, sdist, wheel = built
    environment = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(environment)
    python = environment / "bin" / "python"
    # The dependencies (and the test tools) of this environment, by a path line:
    # nothing is downloaded. The fresh venv's own site-packages comes first.
    purelib = _run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        cwd=tmp_path,
        timeout=60,
    ).stdout.strip()
    ours = [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    Path(purelib, "outer-environment.pth").write_text("\n".join(ours) + "\n")
    installed = _run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", str(wheel)],
        cwd=tmp_path,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stderr
    where = _run(
        [str(python), "-c", "import dsh_llm; print(dsh_llm.__file__)"],
        cwd=tmp_path,
        timeout=60,
    )
    assert where.returncode == 0, where.stderr
    assert where.stdout.strip().startswith(purelib)
    assert Path(where.stdout.strip()).with_name("py.typed").is_file()

    with tarfile.open(sdist) as archive:
        archive.extractall(tmp_path / "unpacked", filter="data")
    (unpacked,) = (tmp_path / "unpacked").iterdir()
    pytest_args = [str(python), "-m", "pytest", "-p", "no:cacheprovider", "-q"]
    collected = _run([*pytest_args, "--collect-only"], cwd=unpacked, timeout=600)
    assert collected.returncode == 0, (
        collected.stdout[-4000:] + collected.stderr[-2000:]
    )
    assert "error" not in collected.stdout.splitlines()[-1]
    ran = _run([*pytest_args, *SUBSET], cwd=unpacked, timeout=900)
    assert ran.returncode == 0, ran.stdout[-6000:] + ran.stderr[-2000:]
    assert " passed" in ran.stdout.splitlines()[-1]
    assert "failed" not in ran.stdout.splitlines()[-1]
