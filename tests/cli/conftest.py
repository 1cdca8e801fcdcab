"""The command-line tests: each gets its own user directory.

``user_dir`` (autouse) points ``DSH_LLM_USER_DIR`` at a fresh temporary directory,
in this process and (through the environment ``clean_env`` copies) in every
``dsh-llm`` process a test starts: logs, keys, aliases and the logging switch of
one test never reach another test or the real home.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_llm.cli.userdirs import USER_DIR_ENV


@pytest.fixture(autouse=True)
def user_dir(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """This test's user directory (config and data)."""
    path = tmp_path_factory.mktemp("user")
    monkeypatch.setenv(USER_DIR_ENV, str(path))
    return path
