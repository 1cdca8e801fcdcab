"""The README's install command leaves ``dsh_llm`` visible to type checkers.

setuptools' default editable install is an import hook (a ``_finder.py``) that
mypy and IDEs cannot follow, so ``mypy --strict`` on a user's script outside the
repository reports ``import-not-found``. The README installs in ``compat`` mode
(a plain path in a ``.pth`` file). This test runs the README's own ``pip
install`` into a fresh virtual environment and ``mypy --strict`` on a one-line
script outside the repository against it. Skipped without mypy, or when pip
cannot fetch the build backend (no package index).
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from .test_readme import block

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = 'import dsh_llm\nreveal_type(dsh_llm.GenerateOptions.from_prompt("m", "hi"))\n'
_OFFLINE_HINTS = ("No matching distribution", "Could not find a version", "connection")


def _readme_install_args() -> list[str]:
    first = block("setup").code.splitlines()[0].split("#", 1)[0]
    install = first.split("&&")[0].strip()
    words = shlex.split(install)
    assert words[:3] == ["pip", "install", "-e"], words
    return words[1:]


@pytest.mark.skipif(
    importlib.util.find_spec("mypy") is None, reason="mypy is not installed"
)
def test_mypy_sees_the_package_installed_by_the_readme_command(tmp_path):
    environment = tmp_path / "venv"
    venv.create(environment, with_pip=True)
    python = environment / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    installed = subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            *_readme_install_args(),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if installed.returncode != 0 and any(h in installed.stderr for h in _OFFLINE_HINTS):
        pytest.skip(f"pip could not fetch the build backend: {installed.stderr[-300:]}")
    assert installed.returncode == 0, installed.stderr
    script = tmp_path / "user_script.py"
    script.write_text(SCRIPT, encoding="utf-8")
    checked = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-incremental",
            "--follow-imports=silent",
            "--python-executable",
            str(python),
            str(script),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert "import-not-found" not in checked.stdout, checked.stdout
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert (
        'Revealed type is "dsh_llm.protocol.request.GenerateOptions"' in checked.stdout
    )
