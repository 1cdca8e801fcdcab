"""dsh_llm.cli: --version, --help and ``python -m dsh_llm``."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

import pytest

from dsh_llm import __version__
from dsh_llm.cli.main import EXIT_OK
from dsh_llm.cli.main import build_parser
from dsh_llm.cli.main import main


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dsh_llm", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])

    assert info.value.code == 0
    assert capsys.readouterr().out == f"dsh-llm {__version__}\n"
    assert __version__ == metadata.version("dsh-llm")


def test_help_describes_the_tool(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--help"])

    assert info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: dsh-llm")
    assert "--version" in out
    assert "chunk protocol" in out


def test_no_arguments_prints_help_and_succeeds(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main([]) == EXIT_OK
    assert capsys.readouterr().out.startswith("usage: dsh-llm")


def test_unknown_option_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--no-such-option"])

    assert info.value.code == 2
    assert "--no-such-option" in capsys.readouterr().err


def test_parser_is_named_after_the_console_script() -> None:
    assert build_parser().prog == "dsh-llm"


def test_python_dash_m_prints_the_version() -> None:
    result = _run("--version")

    assert result.returncode == 0, result.stderr
    assert result.stdout == f"dsh-llm {__version__}\n"


def test_python_dash_m_prints_help() -> None:
    result = _run("--help")

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: dsh-llm")
    assert result.stderr == ""
