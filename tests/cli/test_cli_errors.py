"""Exit statuses and error messages of the command line: 1 with
``error[CODE]: message`` for a failed call, 2 for usage errors and unreadable
input, 130 for Ctrl-C (the request aborted through its signal); never a
traceback."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dsh_llm.cli import main
from dsh_llm.cli.demo import demo_wire_events
from dsh_llm.cli.targets import NOTHING_TO_TALK_TO
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply
from dsh_llm.testing import Stall
from dsh_llm.testing import sse_event
from dsh_llm.testing import sse_events

from ..cli_run import clean_env
from ..cli_run import deepseek_event
from ..cli_run import deepseek_text_reply
from ..cli_run import run_cli

EXAMPLES = Path(__file__).parents[2] / "examples"


def _env(server: LoopbackServer, **extra: str) -> dict[str, str]:
    return clean_env(DEEPSEEK_API_KEY="sk-test", DEEPSEEK_BASE_URL=server.url, **extra)


def _no_traceback(result: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in result.stderr
    assert "Traceback" not in result.stdout


# --- usage errors: exit 2 ------------------------------------------------------


def test_chat_without_any_key_route_or_base_url_says_what_to_set(tmp_path):
    result = run_cli("chat", "hi", cwd=tmp_path)

    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == f"error: {NOTHING_TO_TALK_TO}\n"
    for hint in ("DEEPSEEK_API_KEY", "--base-url", "--provider", "dsh-llm demo"):
        assert hint in result.stderr


def test_chat_names_an_unset_api_key_env(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MY_KEY", raising=False)
    assert main(["chat", "--api-key-env", "MY_KEY", "hi"]) == 2
    assert capsys.readouterr().err.startswith("error: MY_KEY is not set: no model")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            # Without --model the server's model list is asked for; nothing
            # listens on port 9.
            ["--base-url", "http://127.0.0.1:9/v1"],
            "error: cannot list the server's models (Server API request to "
            "http://127.0.0.1:9/v1/models failed: connection refused); "
            "pass --model NAME",
        ),
        (
            ["--base-url", "http://x/v1", "--model", "m", "--provider", "p"],
            "error: --base-url serves the route openai-compatible; drop --provider",
        ),
        (
            ["--base-url", "http://x/v1", "--model", "m", "--config", "dsh.yml"],
            "error: --base-url and --config cannot be combined",
        ),
        (
            ["--provider", "nowhere"],
            'error: no route "nowhere" in built-in routes (registered: '
            "deepseek-official, anthropic, gemini, ollama, groq, mistral, xai, "
            "openrouter, together, fireworks, cerebras, deepinfra, perplexity, "
            "vertex; not available here: bedrock, azure)",
        ),
    ],
)
def test_chat_refuses_options_that_do_not_go_together(
    args, message, tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    assert main(["chat", *args, "hi"]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(message)
    assert captured.out == ""


@pytest.mark.parametrize("value", ["0", "-3", "many"])
def test_chat_refuses_a_max_tokens_that_is_not_a_positive_integer(value, capsys):
    with pytest.raises(SystemExit) as info:
        main(["chat", "--max-tokens", value, "hi"])
    assert info.value.code == 2
    assert "--max-tokens" in capsys.readouterr().err


@pytest.mark.parametrize("option", ["--api-key-env", "--reasoning-effort"])
def test_chat_refuses_an_empty_option_value(option, capsys):
    with pytest.raises(SystemExit) as info:
        main(["chat", option, "", "hi"])
    assert info.value.code == 2
    assert "must not be empty" in capsys.readouterr().err


def test_chat_refuses_a_blank_prompt(server, tmp_path):
    result = run_cli("chat", env=_env(server), cwd=tmp_path, stdin="  \n")

    assert result.returncode == 2
    assert result.stderr == "error: empty prompt: pass PROMPT or pipe it on stdin\n"
    assert server.requests == ()


def test_a_broken_composition_file_exits_2_with_the_plugin_load_error(tmp_path):
    (tmp_path / "dsh.yml").write_text(
        "- id: deepseek\n  name: llm-deepseek\n  config:\n    baseUrll: http://x\n",
        encoding="utf-8",
    )

    for command in (["chat", "hi"], ["providers"]):
        result = run_cli(*command, cwd=tmp_path)
        assert result.returncode == 2, result.stderr
        assert result.stderr.startswith(
            'error[PLUGIN_LOAD]: plugin "deepseek": config key "baseUrll"'
        )
        _no_traceback(result)


def test_a_missing_config_file_exits_2(tmp_path, capsys):
    assert main(["providers", "--config", str(tmp_path / "absent.yml")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error[PLUGIN_LOAD]: ")
    assert "absent.yml" in err


def test_api_key_env_is_refused_with_a_composition(tmp_path, capsys, monkeypatch):
    (tmp_path / "dsh.yml").write_text("[]\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["chat", "--api-key-env", "K", "hi"]) == 2
    assert "name the variable in its config (apiKeyEnv)" in capsys.readouterr().err


def test_a_route_without_catalog_needs_a_model(tmp_path, capsys, monkeypatch):
    (tmp_path / "my_llm_adapter.py").write_bytes(
        (EXAMPLES / "my_llm_adapter.py").read_bytes()
    )
    (tmp_path / "dsh.yml").write_text(
        "- name: ./my_llm_adapter.py\n"
        "  config: {apiKey: k, providers: [echo-a, echo-b]}\n",
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)

    assert main(["chat", "hi"]) == 2
    assert "registers several routes (echo-a, echo-b); choose one with --provider" in (
        capsys.readouterr().err
    )
    assert main(["chat", "--provider", "echo-a", "hi"]) == 2
    assert capsys.readouterr().err == (
        'error: route "echo-a" lists no models; pass --model NAME\n'
    )


# --- failed calls: exit 1 -------------------------------------------------------------


def test_a_rejected_key_exits_1_with_the_error_code(server, tmp_path):
    server.enqueue(
        Reply(
            status=401,
            reason="Unauthorized",
            headers={"content-type": "application/json"},
            body=b'{"error":{"message":"Authentication Fails","type":"auth"}}',
            framing="length",
        )
    )

    result = run_cli("chat", "hi", env=_env(server), cwd=tmp_path)

    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == (
        "error[AUTH]: Authentication Fails (the key is read from DEEPSEEK_API_KEY; "
        "--api-key-env VAR names another variable)\n"
    )
    assert "sk-test" not in result.stderr
    _no_traceback(result)


def test_an_explicit_route_without_its_key_exits_2_saying_both_ways_to_give_one(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    assert main(["chat", "--provider", "deepseek-official", "hi"]) == 2
    err = capsys.readouterr().err
    assert err == (
        'error[MISSING_CREDENTIAL]: no API key for route "deepseek-official": '
        "export DEEPSEEK_API_KEY=... in the environment, or store it with: "
        "dsh-llm keys set deepseek-official\n"
    )


def test_an_unreachable_server_exits_1(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    monkeypatch.setenv("DEEPSEEK_BASE_URL", "http://127.0.0.1:9")
    assert main(["chat", "hi"]) == 1
    assert capsys.readouterr().err.startswith("error[TRANSPORT]: ")


def test_an_error_in_the_stream_keeps_the_text_already_printed(server, tmp_path):
    events = [
        deepseek_event({"content": "partial "}),
        {"error": {"message": "the server is overloaded", "type": "server_error"}},
    ]
    server.enqueue(Reply(body=sse_events(events, done=False)))

    result = run_cli("chat", "hi", env=_env(server), cwd=tmp_path)

    assert result.returncode == 1
    assert result.stdout == "partial \n"
    assert result.stderr.startswith("error[")
    assert "the server is overloaded" in result.stderr
    _no_traceback(result)


def test_an_effort_the_model_does_not_offer_exits_1_before_any_request(
    server, tmp_path
):
    result = run_cli(
        "chat", "--reasoning-effort", "extreme", "hi", env=_env(server), cwd=tmp_path
    )

    assert result.returncode == 1
    assert result.stderr.startswith("error[UNSUPPORTED_REASONING_EFFORT]: ")
    assert server.requests == ()


def test_json_output_of_a_failed_call_ends_with_the_error_finish(server, tmp_path):
    server.enqueue(Reply(status=500, reason="Server Error", body=b"", framing="length"))

    result = run_cli("chat", "--json", "hi", env=_env(server), cwd=tmp_path)

    assert result.returncode == 1
    assert result.stdout.startswith('{"type":"finish","reason":{"kind":"error"')
    assert result.stderr.startswith("error[SERVER]: ")


def test_chat_json_output_passes_validate_and_trace(server, tmp_path):
    server.enqueue(deepseek_text_reply(["a", "b"]))
    chat = run_cli("chat", "--json", "hi", env=_env(server), cwd=tmp_path)
    assert chat.returncode == 0, chat.stderr
    recorded = tmp_path / "chunks.jsonl"
    recorded.write_text(chat.stdout, encoding="utf-8")

    validate = run_cli("validate", str(recorded), cwd=tmp_path)
    assert validate.returncode == 0, validate.stderr
    assert validate.stdout == (
        f"{recorded}: valid (strict): 6 chunks, 1 block, finish stop\n"
    )
    trace = run_cli("trace", str(recorded), cwd=tmp_path)
    assert trace.returncode == 0
    assert trace.stdout.splitlines()[-1] == (
        "[chunks.jsonl] total chunks 6, order check passed"
    )
    # Drop the finish: the recording is no longer a complete stream.
    recorded.write_text("".join(chat.stdout.splitlines(True)[:-1]), encoding="utf-8")
    broken = run_cli("validate", str(recorded), cwd=tmp_path)
    assert broken.returncode == 1
    assert broken.stderr.startswith("error[INVARIANT]: ")


# --- interrupts: exit 130 ------------------------------------------------------


# A test runner started in the background may ignore SIGINT, and an ignored
# signal stays ignored across exec. This launcher restores the default before it
# execs the CLI, so the CLI gets Python's own handler as from an interactive shell
# (no preexec_fn: forking a threaded process with one is unsafe).
_WITH_DEFAULT_SIGINT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.executable, [sys.executable, '-m', 'dsh_llm', *sys.argv[1:]])"
)


def _interrupt_after_output(
    args: list[str], env: dict[str, str], cwd: Path, marker: bytes
) -> tuple[int, bytes, str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _WITH_DEFAULT_SIGINT, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=env,
        cwd=cwd,
    )
    try:
        assert proc.stdout is not None
        seen = b""
        deadline = time.monotonic() + 30
        while marker not in seen and time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], 0.1)
            if ready:
                seen += os.read(proc.stdout.fileno(), 4096)
        assert marker in seen, seen
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, seen + out, err.decode("utf-8")


def test_ctrl_c_aborts_a_stalled_stream_and_closes_the_connection(server, tmp_path):
    first = sse_event(deepseek_event({"content": "Thinking about it"}))
    server.enqueue(Reply(body=(first, Stall())))

    status, out, err = _interrupt_after_output(
        ["chat", "hi"], _env(server), tmp_path, b"Thinking about it"
    )

    assert status == 130
    assert out == b"Thinking about it\n"
    assert err == "interrupted\n"
    # The server saw the client close the connection: nothing is left open.
    assert server.wait_until_idle(timeout=5)
    assert server.connections_opened == server.connections_closed == 1


def test_ctrl_c_interrupts_the_demo(tmp_path):
    status, out, err = _interrupt_after_output(
        ["demo"], clean_env(), tmp_path, b"Let me check"
    )

    assert status == 130
    assert b"strict validation" not in out
    assert err.endswith("interrupted\n")
    assert "Traceback" not in err


def test_a_closed_stdout_ends_the_demo_quietly(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "dsh_llm", "demo", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=clean_env(),
        cwd=tmp_path,
    )
    assert proc.stdout is not None
    assert proc.stderr is not None
    first_line = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode("utf-8")
    proc.stderr.close()
    assert proc.wait(timeout=30) == 1
    assert first_line.startswith(b'{"type":"block-start"')
    assert err == ""
    assert len(demo_wire_events()) > 1


def _run_bytes(args: list[str | bytes], **popen: Any) -> tuple[int, str]:
    """Run ``python -m dsh_llm ARGS`` (arguments may be raw bytes); return the
    exit status and stderr. ``popen`` may redirect stdout or feed stdin."""
    popen.setdefault("stdout", subprocess.PIPE)
    proc = subprocess.run(
        [sys.executable, "-m", "dsh_llm", *args],
        stderr=subprocess.PIPE,
        env=clean_env(),
        timeout=60,
        check=False,
        **popen,
    )
    return proc.returncode, proc.stderr.decode("utf-8")


BASE_URL = ["chat", "--base-url", "http://127.0.0.1:9/v1", "--model", "m"]


def test_a_prompt_argument_that_is_not_utf8_is_a_usage_error(tmp_path):
    status, err = _run_bytes([*BASE_URL, b"caf\xe9"], cwd=tmp_path)
    assert (status, err) == (2, "error: PROMPT is not valid UTF-8\n")


def test_a_system_prompt_that_is_not_utf8_is_a_usage_error(tmp_path):
    status, err = _run_bytes([*BASE_URL, "--system", b"\xff", "hi"], cwd=tmp_path)
    assert (status, err) == (2, "error: --system is not valid UTF-8\n")


def test_a_prompt_on_stdin_that_is_not_utf8_is_a_usage_error(tmp_path):
    status, err = _run_bytes(BASE_URL, input=b"\xff\xfe bad", cwd=tmp_path)
    assert status == 2
    assert err.startswith("error: the prompt")
    assert err.endswith("is not valid UTF-8\n")


def test_a_closed_stdin_is_a_usage_error(tmp_path):
    status, err = _run_bytes(
        BASE_URL,
        stdin=None,
        cwd=tmp_path,
        close_fds=True,
        pass_fds=(),
        preexec_fn=lambda: os.close(0),
    )
    assert (status, err) == (2, "error: there is no standard input: pass PROMPT\n")


def test_a_closed_stdout_is_a_usage_error(tmp_path):
    status, err = _run_bytes(
        [*BASE_URL, "hi"], cwd=tmp_path, stdout=None, preexec_fn=lambda: os.close(1)
    )
    assert (status, err) == (2, "error: there is no standard output\n")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_output_that_cannot_be_written_is_reported_without_a_traceback(tmp_path):
    with open("/dev/full", "w") as full:
        status, err = _run_bytes(["demo"], cwd=tmp_path, stdout=full)
    assert status == 1
    assert err == "error: cannot write output: No space left on device\n"
