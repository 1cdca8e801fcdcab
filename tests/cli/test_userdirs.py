"""``dsh_llm.cli.userdirs``: where the user's settings and data live on each
platform, the one variable that moves both, and the one-step JSON writes."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from dsh_llm.cli.userdirs import USER_DIR_ENV
from dsh_llm.cli.userdirs import UserFileError
from dsh_llm.cli.userdirs import config_dir
from dsh_llm.cli.userdirs import data_dir
from dsh_llm.cli.userdirs import read_json
from dsh_llm.cli.userdirs import write_json

HOME = "/home/ada"


def test_linux_follows_xdg_with_its_defaults():
    environ = {"HOME": HOME}
    assert config_dir(environ, "linux") == Path(HOME, ".config", "dsh-llm")
    assert data_dir(environ, "linux") == Path(HOME, ".local", "share", "dsh-llm")
    environ = {"HOME": HOME, "XDG_CONFIG_HOME": "/cfg", "XDG_DATA_HOME": "/data"}
    assert config_dir(environ, "linux") == Path("/cfg", "dsh-llm")
    assert data_dir(environ, "linux") == Path("/data", "dsh-llm")


def test_a_relative_xdg_directory_is_ignored_as_the_spec_says():
    environ = {"HOME": HOME, "XDG_CONFIG_HOME": "relative/cfg", "XDG_DATA_HOME": ""}
    assert config_dir(environ, "linux") == Path(HOME, ".config", "dsh-llm")
    assert data_dir(environ, "freebsd13") == Path(HOME, ".local", "share", "dsh-llm")


def test_macos_keeps_both_in_application_support():
    expected = Path(HOME, "Library", "Application Support", "dsh-llm")
    environ = {"HOME": HOME, "XDG_CONFIG_HOME": "/cfg"}
    assert config_dir(environ, "darwin") == expected
    assert data_dir(environ, "darwin") == expected


def test_windows_keeps_both_in_appdata():
    environ = {"APPDATA": r"C:\Users\ada\AppData\Roaming", "HOME": HOME}
    assert config_dir(environ, "win32") == Path(environ["APPDATA"], "dsh-llm")
    assert data_dir(environ, "win32") == Path(environ["APPDATA"], "dsh-llm")


def test_one_variable_moves_both_on_every_platform():
    environ = {"HOME": HOME, USER_DIR_ENV: "/tmp/mine", "APPDATA": "C:/x"}
    for platform in ("linux", "darwin", "win32"):
        assert config_dir(environ, platform) == Path("/tmp/mine")
        assert data_dir(environ, platform) == Path("/tmp/mine")
    # Empty means unset.
    environ[USER_DIR_ENV] = ""
    assert config_dir(environ, "linux") == Path(HOME, ".config", "dsh-llm")


def test_the_cli_tests_run_in_a_temporary_user_dir(user_dir):
    assert config_dir() == user_dir == data_dir()
    assert not str(user_dir).startswith(str(Path.home() / ".config"))


def test_write_json_replaces_the_file_in_one_step_owner_only(tmp_path):
    path = tmp_path / "new" / "settings.json"
    write_json(path, {"b": 1, "a": "é"}, private=True)
    assert read_json(path) == {"a": "é", "b": 1}
    write_json(path, {"c": 2}, private=True)
    assert read_json(path) == {"c": 2}
    # Nothing left behind by the replacement.
    assert [p.name for p in path.parent.iterdir()] == ["settings.json"]
    if os.name == "posix":
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_read_json_reports_a_missing_a_broken_and_a_wrong_file(tmp_path):
    assert read_json(tmp_path / "missing.json") is None
    broken = tmp_path / "broken.json"
    broken.write_text("{nope", encoding="utf-8")
    with pytest.raises(UserFileError, match=r"broken\.json is not JSON"):
        read_json(broken)
    listed = tmp_path / "list.json"
    listed.write_text("[1]", encoding="utf-8")
    with pytest.raises(UserFileError, match="must hold a JSON object"):
        read_json(listed)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
def test_write_json_into_a_read_only_directory_is_a_user_file_error(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("running as a user who can write anywhere")
        with pytest.raises(UserFileError, match="cannot write"):
            write_json(locked / "x.json", {"a": 1})
    finally:
        locked.chmod(0o700)
