"""``dsh-llm keys``: keys stored owner-only, never printed, used when the
variable is unset (and only then), and the missing-key error that names both
ways to give one."""

from __future__ import annotations

import json
import os
import select
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_llm.cli.keys import KeyedEnviron
from dsh_llm.cli.keys import KeyStore
from dsh_llm.cli.keys import key_name
from dsh_llm.cli.keys import keys_path
from dsh_llm.cli.userdirs import UserFileError
from dsh_llm.testing import Reply

from ..cli_run import clean_env
from ..cli_run import deepseek_text_reply
from ..cli_run import run_cli

SECRET = "sk-stored-5a1b9c"


def _set(name: str, key: str) -> subprocess.CompletedProcess[str]:
    return run_cli("keys", "set", name, stdin=key + "\n")


def test_keys_set_stores_the_key_owner_only_and_never_prints_it(user_dir):
    result = _set("deepseek-official", SECRET)

    assert result.returncode == 0, result.stderr
    assert SECRET not in result.stdout + result.stderr
    path = user_dir / "keys.json"
    assert json.loads(path.read_text(encoding="utf-8")) == {"deepseek-official": SECRET}
    if os.name == "posix":
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    listed = run_cli("keys", "list")
    assert listed.stdout == "deepseek-official\n"
    assert SECRET not in listed.stdout + listed.stderr
    assert run_cli("keys", "path").stdout == f"{path}\n"
    # `keys` alone lists too.
    assert run_cli("keys").stdout == "deepseek-official\n"


def test_keys_set_refuses_an_empty_key_and_one_no_header_can_carry(user_dir):
    empty = run_cli("keys", "set", "anthropic", stdin="  \n")
    assert empty.returncode == 2
    assert empty.stderr.startswith("error: no key given")
    spaced = run_cli("keys", "set", "anthropic", stdin="sk-ant with space\n")
    assert spaced.returncode == 2
    assert "no HTTP header can carry" in spaced.stderr
    assert "with space" not in spaced.stderr
    bad_name = run_cli("keys", "set", "two words", stdin="k\n")
    assert bad_name.returncode == 2
    assert not (user_dir / "keys.json").exists()


def test_keys_remove_forgets_one_and_names_an_unknown_one():
    assert _set("anthropic", "sk-a").returncode == 0
    assert _set("gemini", "g-1").returncode == 0
    removed = run_cli("keys", "remove", "anthropic")
    assert removed.returncode == 0, removed.stderr
    assert run_cli("keys", "list").stdout == "gemini\n"
    unknown = run_cli("keys", "remove", "anthropic")
    assert unknown.returncode == 2
    assert unknown.stderr == (
        "error: no key named 'anthropic' is stored (stored: gemini)\n"
    )


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_keys_set_at_a_terminal_asks_without_echo(user_dir):
    import pty

    primary, secondary = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "dsh_llm", "keys", "set", "anthropic"],
        stdin=secondary,
        stdout=secondary,
        stderr=secondary,
        env=clean_env(),
        close_fds=True,
    )
    os.close(secondary)
    seen = b""
    try:
        while b"not shown" not in seen:
            ready, _, _ = select.select([primary], [], [], 60)
            assert ready, f"no prompt; got {seen!r}"
            seen += os.read(primary, 1024)
        os.write(primary, SECRET.encode() + b"\n")
        assert process.wait(timeout=60) == 0
        while True:
            ready, _, _ = select.select([primary], [], [], 0)
            if not ready:
                break
            try:
                piece = os.read(primary, 1024)
            except OSError:  # the terminal closed with the process
                break
            if not piece:
                break
            seen += piece
    finally:
        os.close(primary)
        if process.poll() is None:
            process.kill()
    assert SECRET.encode() not in seen  # not echoed, not printed
    assert b"key for anthropic (not shown): " in seen
    assert KeyStore.load(user_dir / "keys.json").get("anthropic") == SECRET


# --- keys as a key source ------------------------------------------------------------


def test_a_stored_key_is_used_when_the_variable_is_unset(server, tmp_path):
    assert _set("deepseek-official", SECRET).returncode == 0
    server.enqueue(deepseek_text_reply(["hi"]))

    result = run_cli(
        "chat", "hello", env=clean_env(DEEPSEEK_BASE_URL=server.url), cwd=tmp_path
    )

    assert result.returncode == 0, result.stderr
    assert server.requests[0].header("authorization") == f"Bearer {SECRET}"


def test_the_variable_wins_over_the_stored_key(server, tmp_path):
    assert _set("deepseek-official", SECRET).returncode == 0
    server.enqueue(deepseek_text_reply(["hi"]))
    env = clean_env(DEEPSEEK_BASE_URL=server.url, DEEPSEEK_API_KEY="sk-from-env")

    result = run_cli("chat", "hello", env=env, cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert server.requests[0].header("authorization") == "Bearer sk-from-env"


def test_a_key_stored_under_a_variable_name_serves_api_key_env(server, tmp_path):
    assert _set("LOCAL_KEY", SECRET).returncode == 0
    server.enqueue(deepseek_text_reply(["hi"]))

    result = run_cli(
        "chat",
        "--base-url",
        server.url,
        "--model",
        "m",
        "--api-key-env",
        "LOCAL_KEY",
        "hello",
        env=clean_env(),
        cwd=tmp_path,
    )

    assert result.returncode == 0, result.stderr
    assert server.requests[0].header("authorization") == f"Bearer {SECRET}"


def test_a_composition_reads_stored_keys_for_its_api_key_env(server, tmp_path):
    assert _set("MY_SERVER_KEY", SECRET).returncode == 0
    (tmp_path / "dsh.yml").write_text(
        "- id: local\n"
        "  name: llm-openai-compatible\n"
        "  config:\n"
        "    providers: [local]\n"
        f"    baseURL: {server.url}\n"
        "    apiKeyEnv: MY_SERVER_KEY\n"
        "    models: [m]\n",
        encoding="utf-8",
    )
    server.enqueue(deepseek_text_reply(["hi"]))

    result = run_cli("chat", "hello", env=clean_env(), cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert server.requests[0].header("authorization") == f"Bearer {SECRET}"


def test_a_rejected_stored_key_says_where_it_came_from(server, tmp_path):
    assert _set("deepseek-official", SECRET).returncode == 0
    server.enqueue(
        Reply(
            status=401,
            reason="Unauthorized",
            headers={"content-type": "application/json"},
            body=b'{"error":{"message":"Authentication Fails","type":"auth"}}',
            framing="length",
        )
    )

    result = run_cli(
        "chat", "hello", env=clean_env(DEEPSEEK_BASE_URL=server.url), cwd=tmp_path
    )

    assert result.returncode == 1
    assert "the key is the one stored with `dsh-llm keys set deepseek-official`" in (
        result.stderr
    )
    assert SECRET not in result.stderr


def test_a_missing_key_exits_2_naming_both_ways_to_give_one(tmp_path):
    result = run_cli("chat", "--provider", "anthropic", "hi", cwd=tmp_path)

    assert result.returncode == 2
    assert result.stderr == (
        'error[MISSING_CREDENTIAL]: no API key for route "anthropic": export '
        "ANTHROPIC_API_KEY=... in the environment, or store it with: dsh-llm keys "
        "set anthropic\n"
    )


def test_a_session_without_its_key_ends_with_2_after_the_first_turn(tmp_path):
    result = run_cli(
        "chat", "-i", "--provider", "gemini", cwd=tmp_path, stdin="hi\nagain\n"
    )

    assert result.returncode == 2
    assert result.stderr.count("error[MISSING_CREDENTIAL]") == 1
    assert (
        'no API key for route "gemini": export GEMINI_API_KEY=... in the '
        "environment, or store it with: dsh-llm keys set gemini\n"
    ) in result.stderr


def test_the_library_keeps_its_own_message_for_python_callers(monkeypatch):
    from dsh_llm import GenerateOptions
    from dsh_llm import collect
    from dsh_llm import create_user_message
    from dsh_llm.adapters.anthropic import AnthropicAdapter
    from dsh_llm.errors import LlmError

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    options = GenerateOptions(
        provider="anthropic",
        model="claude-haiku-4-5",
        messages=(create_user_message("hi"),),
    )
    with AnthropicAdapter() as adapter, pytest.raises(LlmError) as caught:
        collect(adapter.stream(options))
    assert caught.value.code == "MISSING_CREDENTIAL"
    assert "pass api_key or export ANTHROPIC_API_KEY" in caught.value.message


def test_the_stored_deepseek_key_is_enough_to_chat_without_flags(server, tmp_path):
    # Without a stored key this is "no model to talk to" (exit 2).
    assert run_cli("chat", "hello", cwd=tmp_path).returncode == 2
    assert _set("deepseek-official", SECRET).returncode == 0
    server.enqueue(deepseek_text_reply(["hi"]))

    result = run_cli(
        "chat", "hello", env=clean_env(DEEPSEEK_BASE_URL=server.url), cwd=tmp_path
    )

    assert result.returncode == 0, result.stderr


# --- the mapping ---------------------------------------------------------------------


def test_keyed_environ_prefers_a_set_variable_then_its_name_then_its_route(tmp_path):
    store = KeyStore(tmp_path / "keys.json", {"anthropic": "by-route", "X_KEY": "x"})
    environ = KeyedEnviron({"HOME": "/h", "ANTHROPIC_API_KEY": ""}, store)

    assert environ["ANTHROPIC_API_KEY"] == "by-route"  # empty counts as unset
    assert environ.stored_name("ANTHROPIC_API_KEY") == "anthropic"
    assert environ["X_KEY"] == "x"
    assert environ.get("GEMINI_API_KEY") is None
    assert set(environ) == {"HOME", "ANTHROPIC_API_KEY", "X_KEY"}
    assert len(environ) == 3
    both = KeyStore(tmp_path / "k.json", {"anthropic": "r", "ANTHROPIC_API_KEY": "v"})
    assert KeyedEnviron({}, both)["ANTHROPIC_API_KEY"] == "v"
    assert KeyedEnviron({"ANTHROPIC_API_KEY": "env"}, both)["ANTHROPIC_API_KEY"] == (
        "env"
    )
    assert "by-route" not in repr(environ)
    assert "by-route" not in repr(store)


def test_key_names_are_routes_for_built_in_variables():
    assert key_name("DEEPSEEK_API_KEY") == "deepseek-official"
    assert key_name("GEMINI_API_KEY") == "gemini"
    assert key_name("MY_KEY") == "MY_KEY"


def test_a_broken_keys_file_is_reported_and_the_chat_goes_on(server, tmp_path):
    keys_path().write_text("{not json", encoding="utf-8")
    server.enqueue(deepseek_text_reply(["hi"]))
    env = clean_env(DEEPSEEK_BASE_URL=server.url, DEEPSEEK_API_KEY="sk-env")

    result = run_cli("chat", "hello", env=env, cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stderr.startswith("dsh-llm: warning: stored keys ignored: ")
    with pytest.raises(UserFileError):
        KeyStore.load()
    assert run_cli("keys", "list").returncode == 2


def test_a_keys_file_holding_a_non_string_is_refused(tmp_path: Path):
    path = tmp_path / "keys.json"
    path.write_text('{"anthropic": 5}', encoding="utf-8")
    with pytest.raises(UserFileError, match="the key of 'anthropic' is not a string"):
        KeyStore.load(path)
