"""``dsh-llm chat``: streaming to stdout/stderr, ``--json``, stdin, the request it
sends, and the routes it picks (built-in DeepSeek, a composition file)."""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dsh_llm.cli import main
from dsh_llm.cli.chat import read_prompt
from dsh_llm.cli.demo import demo_reply
from dsh_llm.cli.targets import UsageError
from dsh_llm.serde import chunk_from_json
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Mark
from dsh_llm.testing import Reply
from dsh_llm.testing import Stall
from dsh_llm.testing import sse_event
from dsh_llm.validator import assert_chunk_sequence

from ..cli_run import clean_env
from ..cli_run import deepseek_event
from ..cli_run import deepseek_text_reply
from ..cli_run import run_cli

EXAMPLES = Path(__file__).parents[2] / "examples"


@pytest.fixture
def deepseek_env(server, monkeypatch, tmp_path):
    """In-process: DeepSeek pointed at the loopback server, in an empty directory."""
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    monkeypatch.setenv("DEEPSEEK_BASE_URL", server.url)
    monkeypatch.chdir(tmp_path)
    return server


def _env(server: LoopbackServer) -> dict[str, str]:
    return clean_env(DEEPSEEK_API_KEY="sk-test", DEEPSEEK_BASE_URL=server.url)


# --- as a process -------------------------------------------------------------------


def test_chat_streams_text_to_stdout_reasoning_and_summary_to_stderr(server, tmp_path):
    server.enqueue(
        deepseek_text_reply(["Hello", ", world", "!"], reasoning=["Greet ", "them."])
    )

    result = run_cli("chat", "hello there", env=_env(server), cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout == "Hello, world!\n"
    assert result.stderr == (
        "[reasoning] Greet them.\nfinish stop; usage: input 9, cache read 3, output 7\n"
    )
    (request,) = server.requests
    assert request.path == "/chat/completions"
    assert request.header("authorization") == "Bearer sk-test"
    body = request.json()
    assert body["model"] == "deepseek-v4-flash"
    assert body["stream"] is True
    assert body["messages"] == [{"role": "user", "content": "hello there"}]


def test_chat_escapes_what_the_console_encoding_cannot_hold(server, tmp_path):
    # An ASCII console, an emoji, and half of a split surrogate pair.
    server.enqueue(deepseek_text_reply(["caf\u00e9 ", "\U0001f600 ", "\ud83d"]))

    result = run_cli(
        "chat", "hi", env={**_env(server), "PYTHONIOENCODING": "ascii"}, cwd=tmp_path
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout == "caf\\xe9 \\U0001f600 \\ud83d\n"
    assert "Traceback" not in result.stderr


def test_chat_json_on_an_ascii_console_is_valid_json(server, tmp_path):
    server.enqueue(deepseek_text_reply(["caf\u00e9 ", "\U0001f600"]))

    result = run_cli(
        "chat",
        "--json",
        "hi",
        env={**_env(server), "PYTHONIOENCODING": "ascii"},
        cwd=tmp_path,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.isascii()
    chunks = [chunk_from_json(line) for line in result.stdout.splitlines()]
    assert_chunk_sequence(chunks)
    assert "".join(c.text for c in chunks if c.type == "text-delta") == (
        "caf\u00e9 \U0001f600"
    )


def test_chat_json_keeps_a_lone_surrogate_as_a_json_escape(server, tmp_path):
    server.enqueue(deepseek_text_reply(["a", "\ud83d"]))

    result = run_cli("chat", "--json", "hi", env=_env(server), cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    chunks = [chunk_from_json(line) for line in result.stdout.splitlines()]
    assert_chunk_sequence(chunks)
    assert '"text":"\\ud83d"' in result.stdout


def test_chat_json_writes_strict_valid_chunks_and_nothing_else(server, tmp_path):
    server.enqueue(deepseek_text_reply(["Hel", "lo"], reasoning=["hm"]))

    result = run_cli("chat", "--json", "hi", env=_env(server), cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    chunks = [chunk_from_json(line) for line in result.stdout.splitlines()]
    assert_chunk_sequence(chunks, strict=True)
    assert [chunk.type for chunk in chunks] == [
        "block-start",
        "reasoning-delta",
        "block-end",
        "block-start",
        "text-delta",
        "text-delta",
        "block-end",
        "usage",
        "finish",
    ]


def test_chat_reads_the_prompt_from_stdin(server, tmp_path):
    server.enqueue(deepseek_text_reply(["ok"]))

    result = run_cli(
        "chat", env=_env(server), cwd=tmp_path, stdin="summarise this\nplease\n"
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout == "ok\n"
    body = server.requests[0].json()
    assert body["messages"][-1]["content"] == "summarise this\nplease\n"


def test_chat_dash_reads_the_prompt_from_stdin(server, tmp_path):
    server.enqueue(deepseek_text_reply(["ok"]))

    result = run_cli("chat", "-", env=_env(server), cwd=tmp_path, stdin="from stdin\n")

    assert result.returncode == 0, result.stderr
    body = server.requests[0].json()
    assert body["messages"][-1]["content"] == "from stdin\n"


def test_chat_prints_each_delta_as_it_arrives(server, tmp_path):
    # The server sends the first delta, then holds the stream. The first delta
    # must reach the terminal while the server is still holding it back.
    first = sse_event(deepseek_event({"content": "Hello"}))
    rest = deepseek_text_reply([" there"]).body
    server.enqueue(Reply(body=(first, Stall(seconds=2), Mark(name="resumed"), *rest)))
    proc = subprocess.Popen(
        [sys.executable, "-m", "dsh_llm", "chat", "hi"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(server),
        cwd=tmp_path,
    )
    try:
        assert proc.stdout is not None
        seen = b""
        deadline = time.monotonic() + 30
        while b"Hello" not in seen and time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], 0.1)
            if ready:
                seen += os.read(proc.stdout.fileno(), 1024)
        assert seen == b"Hello"
        assert "resumed" not in server.marks
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert seen + out == b"Hello there\n"


# --- in process ----------------------------------------------------------------------


def test_chat_sends_system_max_tokens_reasoning_effort_and_model(deepseek_env, capsys):
    server = deepseek_env
    server.enqueue(deepseek_text_reply(["fine"]))

    status = main(
        [
            "chat",
            "--system",
            "Be brief.",
            "--max-tokens",
            "64",
            "--reasoning-effort",
            "low",
            "--model",
            "deepseek-v4-pro",
            "how are you?",
        ]
    )

    assert status == 0, capsys.readouterr().err
    body = server.requests[0].json()
    assert body["model"] == "deepseek-v4-pro"
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "how are you?"},
    ]
    assert body["max_tokens"] == 64
    assert body["reasoning_effort"] == "low"
    assert body["thinking"] == {"type": "enabled"}
    assert capsys.readouterr().out == "fine\n"


def test_chat_prints_a_tool_call_as_one_json_line(deepseek_env, capsys):
    deepseek_env.enqueue(demo_reply(0))

    assert main(["chat", "weather?"]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [
        "Let me check the live forecast for Paris before I answer.",
        '{"type":"tool-call","id":"call_00_Dm0ParisWx","name":"get_weather",'
        '"arguments":"{\\"city\\": \\"Paris\\", \\"unit\\": \\"celsius\\"}"}',
    ]
    assert captured.err.endswith(
        "finish tool-calls; usage: input 259, cache read 1024, output 96 "
        "(reasoning 41)\n"
    )


def _write_composition(directory: Path, url: str, *, with_example: bool) -> Path:
    entries = [
        "- id: deepseek",
        "  name: llm-deepseek",
        "  config:",
        "    apiKeyEnv: MY_DEEPSEEK_KEY",
        f"    baseURL: {url}",
    ]
    if with_example:
        shutil.copy(EXAMPLES / "my_llm_adapter.py", directory / "my_llm_adapter.py")
        entries += [
            "- id: echo",
            "  name: ./my_llm_adapter.py",
            "  config:",
            "    apiKey: ${MY_API_KEY:-unused}",
            "    providers: [my-provider]",
        ]
    path = directory / "dsh.yml"
    path.write_text("\n".join(entries) + "\n", encoding="utf-8")
    return path


def test_chat_uses_the_dsh_yml_of_the_working_directory(
    server, tmp_path, monkeypatch, capsys
):
    _write_composition(tmp_path, server.url, with_example=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    monkeypatch.setenv("MY_DEEPSEEK_KEY", "sk-from-composition")
    server.enqueue(deepseek_text_reply(["composed"]))

    assert main(["chat", "hi"]) == 0
    assert capsys.readouterr().out == "composed\n"
    assert server.requests[0].header("authorization") == "Bearer sk-from-composition"


def test_chat_routes_to_the_provider_chosen_from_the_config(
    server, tmp_path, monkeypatch, capsys
):
    config = _write_composition(tmp_path, server.url, with_example=True)
    monkeypatch.chdir(tmp_path.parent)
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)

    status = main(
        [
            "chat",
            "--config",
            str(config),
            "--provider",
            "my-provider",
            "--model",
            "echo-1",
            "echo these words",
        ]
    )

    assert status == 0
    captured = capsys.readouterr()
    assert captured.out == "echo these words\n"
    assert captured.err == "finish stop; usage: not reported\n"
    assert server.requests == ()


def test_chat_defaults_to_deepseek_among_several_routes(
    server, tmp_path, monkeypatch, capsys
):
    _write_composition(tmp_path, server.url, with_example=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MY_DEEPSEEK_KEY", "sk-test")
    server.enqueue(deepseek_text_reply(["from deepseek"]))

    assert main(["chat", "hi"]) == 0
    assert capsys.readouterr().out == "from deepseek\n"
    assert server.requests[0].json()["model"] == "deepseek-v4-flash"


# --- prompt -------------------------------------------------------------------------


class _Stdin:
    def __init__(self, text: str, tty: bool) -> None:
        self._text = text
        self._tty = tty

    def read(self) -> str:
        return self._text

    def isatty(self) -> bool:
        return self._tty


def test_read_prompt_tells_a_terminal_user_how_to_end_the_input(capsys):
    prompt = read_prompt(None, _Stdin("typed\n", tty=True), sys.stderr)  # type: ignore[arg-type]
    assert prompt == "typed\n"
    assert capsys.readouterr().err == "dsh-llm chat: type the prompt, then Ctrl-D\n"


def test_read_prompt_prefers_the_argument_and_refuses_a_blank_one(capsys):
    assert read_prompt("given", _Stdin("ignored", tty=True), sys.stderr) == "given"  # type: ignore[arg-type]
    assert capsys.readouterr().err == ""
    with pytest.raises(UsageError, match="empty prompt"):
        read_prompt(None, _Stdin(" \n", tty=False), sys.stderr)  # type: ignore[arg-type]


def test_read_prompt_takes_a_dash_as_stdin_and_refuses_a_blank_stdin(capsys):
    assert read_prompt("-", _Stdin("piped\n", tty=False), sys.stderr) == "piped\n"  # type: ignore[arg-type]
    assert read_prompt("-", _Stdin("typed", tty=True), sys.stderr) == "typed"  # type: ignore[arg-type]
    assert capsys.readouterr().err == "dsh-llm chat: type the prompt, then Ctrl-D\n"
    with pytest.raises(UsageError, match="empty prompt"):
        read_prompt("-", _Stdin("", tty=False), sys.stderr)  # type: ignore[arg-type]


# --- --base-url: any OpenAI-compatible server ----------------------------------------


def test_chat_base_url_streams_from_an_openai_compatible_server_without_a_key(
    server, tmp_path
):
    server.enqueue(deepseek_text_reply(["local ", "answer"]))
    # A broken dsh.yml in the directory does not matter: --base-url wins.
    (tmp_path / "dsh.yml").write_text("- name: no-such-plugin\n", encoding="utf-8")

    result = run_cli(
        "chat",
        "--base-url",
        f"{server.url}/v1",
        "--model",
        "qwen2.5-7b-instruct",
        "hi",
        env=clean_env(),
        cwd=tmp_path,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout == "local answer\n"
    assert result.stderr == "finish stop; usage: input 9, cache read 3, output 7\n"
    (request,) = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.header("authorization") is None
    body = request.json()
    assert body["model"] == "qwen2.5-7b-instruct"
    assert body["messages"] == [{"role": "user", "content": "hi"}]


def test_chat_base_url_sends_the_key_named_by_api_key_env_and_the_effort(
    server, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LOCAL_KEY", "sk-local")
    server.enqueue(deepseek_text_reply(["ok"]))

    status = main(
        [
            "chat",
            "--base-url",
            f"{server.url}/v1",
            "--model",
            "m",
            "--api-key-env",
            "LOCAL_KEY",
            "--reasoning-effort",
            "high",
            "hi",
        ]
    )

    assert status == 0, capsys.readouterr().err
    request = server.requests[0]
    assert request.header("authorization") == "Bearer sk-local"
    assert request.json()["reasoning_effort"] == "high"


def test_chat_base_url_with_an_unset_key_variable_is_a_usage_error(
    server, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LOCAL_KEY", raising=False)

    status = main(
        [
            "chat",
            "--base-url",
            server.url,
            "--model",
            "m",
            "--api-key-env",
            "LOCAL_KEY",
            "hi",
        ]
    )

    assert status == 2
    err = capsys.readouterr().err
    assert err.startswith("error[MISSING_CREDENTIAL]: ")
    assert "export LOCAL_KEY=" in err
    assert "dsh-llm keys set LOCAL_KEY" in err
    assert server.requests == ()


def test_chat_base_url_that_is_not_an_api_root_is_a_usage_error(tmp_path, capsys):
    status = main(
        [
            "chat",
            "--base-url",
            "http://127.0.0.1:8080/v1/chat/completions",
            "--model",
            "m",
            "hi",
        ]
    )

    assert status == 2
    assert capsys.readouterr().err.startswith("error: llm-openai-compatible: ")


def test_the_cli_imports_no_adapter_until_a_command_needs_one():
    probe = (
        "import sys, dsh_llm.cli; "
        "print(sorted(m for m in ('requests', 'yaml', 'dsh_llm.adapters.deepseek') "
        "if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "[]\n"


# --- cost from a price table ----------------------------------------------------------


def test_chat_summary_shows_the_cost_when_the_price_is_known(server, tmp_path):
    server.enqueue(deepseek_text_reply(["Hi"]))
    prices = tmp_path / "prices.yml"
    prices.write_text(
        "prices:\n"
        "  deepseek-v4-flash: {input: 1000000, cacheRead: 0, output: 2000000}\n"
    )
    result = run_cli(
        "chat", "hi", "--prices", str(prices), env=_env(server), cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    # input 9 x 1 + cache read 3 x 0 + output 7 x 2 (per token here) = 23 USD.
    assert result.stderr.endswith(
        "finish stop; usage: input 9, cache read 3, output 7; cost: 23.000000 USD\n"
    )


def test_chat_summary_says_nothing_of_cost_without_a_price(server, tmp_path):
    server.enqueue(deepseek_text_reply(["Hi"]))
    prices = tmp_path / "prices.yml"
    prices.write_text("prices:\n  some-other-model: {input: 1, output: 1}\n")
    result = run_cli(
        "chat", "hi", "--prices", str(prices), env=_env(server), cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.endswith("output 7\n")
    assert "cost" not in result.stderr


def test_a_bad_price_table_is_a_usage_error(server, tmp_path):
    prices = tmp_path / "prices.yml"
    prices.write_text("prices:\n  m: {input: -1, output: 1}\n")
    result = run_cli(
        "chat", "hi", "--prices", str(prices), env=_env(server), cwd=tmp_path
    )
    assert result.returncode == 2
    assert "--prices" in result.stderr
    assert server.requests == ()
