"""The friendlier ``dsh-llm chat``: model discovery for --base-url, sampling and
provider options, --schema, the key and retry-after hints, and the interactive
session (kept conversation, /exit, Ctrl-D, Ctrl-C aborting one answer)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Mark
from dsh_llm.testing import RecordedRequest
from dsh_llm.testing import Reply
from dsh_llm.testing import Stall

from ..cli_run import clean_env
from ..cli_run import deepseek_text_reply
from ..cli_run import run_cli


def _models(*ids: str) -> Reply:
    body = json.dumps({"object": "list", "data": [{"id": i} for i in ids]})
    return Reply(
        headers={"content-type": "application/json"},
        body=body.encode(),
        framing="length",
    )


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as running:
        yield running


def test_base_url_without_model_uses_the_servers_only_model(server, tmp_path):
    server.enqueue(_models("qwen3-8b"), deepseek_text_reply(["hi"]))
    result = run_cli("chat", "--base-url", f"{server.url}/v1", "hello", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout == "hi\n"
    listing, chat = server.requests
    assert (listing.method, listing.path) == ("GET", "/v1/models")
    assert chat.json()["model"] == "qwen3-8b"


def test_base_url_without_model_lists_several_models_and_exits_2(server, tmp_path):
    server.enqueue(_models("a-model", "b-model"))
    result = run_cli("chat", "--base-url", f"{server.url}/v1", "hello", cwd=tmp_path)

    assert result.returncode == 2
    assert "several models; choose one with --model NAME" in result.stderr
    assert "  a-model\n  b-model" in result.stderr
    assert len(server.requests) == 1


def test_temperature_options_and_schema_reach_the_request(server, tmp_path):
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    (tmp_path / "schema.json").write_text(json.dumps(schema), encoding="utf-8")
    server.enqueue(deepseek_text_reply(['{"n": ', "3}"]))
    result = run_cli(
        "chat",
        "--base-url",
        f"{server.url}/v1",
        "--model",
        "m",
        "--temperature",
        "0.5",
        "-o",
        "top_k=20",
        "-o",
        "mode=fast",
        "--schema",
        "schema.json",
        "--timeout",
        "30",
        "a number",
        cwd=tmp_path,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout == '{"n": 3}\n'
    body = server.requests[0].json()
    assert body["temperature"] == 0.5
    assert (body["top_k"], body["mode"]) == (20, "fast")
    assert body["response_format"]["json_schema"]["schema"] == schema


def test_an_answer_outside_the_schema_exits_1(server, tmp_path):
    (tmp_path / "schema.json").write_text('{"type": "object"}', encoding="utf-8")
    server.enqueue(deepseek_text_reply(["not json"]))
    result = run_cli(
        "chat", "--base-url", f"{server.url}/v1", "--model", "m",
        "--schema", "schema.json", "x", cwd=tmp_path,
    )  # fmt: skip

    assert result.returncode == 1
    assert "error[INVALID_JSON_OUTPUT]: the answer is not JSON" in result.stderr


def test_bad_option_values_are_usage_errors(tmp_path):
    result = run_cli("chat", "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
                     "-o", "novalue", "x", cwd=tmp_path)  # fmt: skip
    assert result.returncode == 2
    assert "error: -o expects key=value, got 'novalue'" in result.stderr
    result = run_cli("chat", "--temperature", "-1", "x", cwd=tmp_path)
    assert result.returncode == 2


def test_a_rate_limit_shows_the_retry_after(server, tmp_path):
    server.enqueue(
        Reply(
            status=429,
            reason="Too Many Requests",
            headers={"content-type": "application/json", "retry-after": "7"},
            body=b'{"error": {"message": "slow down", "type": "rate_limit"}}',
            framing="length",
        )
    )
    result = run_cli(
        "chat", "--base-url", f"{server.url}/v1", "--model", "m", "x", cwd=tmp_path
    )

    assert result.returncode == 1
    assert result.stderr.startswith("error[RATE_LIMIT]: ")
    assert result.stderr.endswith("(retry after 7.0 s)\n")


def test_auth_for_base_url_names_the_flag(server, tmp_path):
    server.enqueue(Reply(status=401, body=b'{"error": {"message": "no"}}'))
    result = run_cli(
        "chat", "--base-url", f"{server.url}/v1", "--model", "m", "x", cwd=tmp_path
    )

    assert result.returncode == 1
    assert "pass --api-key-env VAR naming the variable" in result.stderr


# --- the interactive session ---------------------------------------------------------


def _echo(request: RecordedRequest) -> Reply:
    messages = request.json()["messages"]
    turns = sum(m["role"] == "user" for m in messages)
    return deepseek_text_reply([f"turn {turns}: ", messages[-1]["content"]])


def test_a_session_keeps_the_conversation_until_exit(server, tmp_path):
    server.handler = _echo
    result = run_cli(
        "chat", "-i", "--base-url", f"{server.url}/v1", "--model", "m",
        "--system", "Be brief.", cwd=tmp_path, stdin="one\n\ntwo\n/exit\nnever\n",
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    assert result.stdout == "turn 1: one\nturn 2: two\n"
    assert result.stderr.count("you> ") == 4
    assert len(server.requests) == 2
    sent = server.requests[1].json()["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]


def test_end_of_input_ends_the_session(server, tmp_path):
    server.handler = _echo
    result = run_cli(
        "chat", "-i", "--base-url", f"{server.url}/v1", "--model", "m",
        cwd=tmp_path, stdin="one\n",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout == "turn 1: one\n"


def test_a_failed_turn_does_not_end_the_session(server, tmp_path):
    server.enqueue(Reply(status=500, body=b"{}"), deepseek_text_reply(["fine"]))
    result = run_cli(
        "chat", "-i", "--base-url", f"{server.url}/v1", "--model", "m",
        cwd=tmp_path, stdin="one\ntwo\n",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "error[SERVER]" in result.stderr
    assert result.stdout == "fine\n"
    assert [m["content"] for m in server.requests[1].json()["messages"]] == ["two"]


@pytest.mark.skipif(os.name != "posix", reason="needs SIGINT")
def test_ctrl_c_aborts_the_answer_not_the_session(server, tmp_path):
    # The first answer sends its opening events, then holds the connection
    # until the client lets go: the interrupt lands mid-answer however slow
    # the machine is, and nothing after it can reach the screen.
    opening = deepseek_text_reply(["never shown"]).body[0]
    assert isinstance(opening, bytes)
    assert b"never shown" not in opening
    server.enqueue(
        Reply(body=(opening, Mark(name="holding"), Stall())),
        deepseek_text_reply(["second answer"]),
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "dsh_llm", "chat", "-i", "--base-url",
         f"{server.url}/v1", "--model", "m"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(),
        cwd=tmp_path,
    )  # fmt: skip
    try:
        assert process.stdin is not None
        process.stdin.write("first\n")
        process.stdin.flush()
        deadline = time.monotonic() + 30
        while "holding" not in server.marks and time.monotonic() < deadline:
            time.sleep(0.01)
        assert "holding" in server.marks
        process.send_signal(signal.SIGINT)
        process.stdin.write("second\n/exit\n")
        process.stdin.flush()
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, err
    assert "[aborted]" in err
    assert out.endswith("second answer\n")
    assert "never shown" not in out
    sent = server.requests[1].json()["messages"]
    assert sent == [{"role": "user", "content": "second"}]


def test_interactive_refuses_a_prompt_argument(tmp_path):
    result = run_cli("chat", "-i", "hello", cwd=tmp_path)
    assert result.returncode == 2
    assert "--interactive reads prompts itself" in result.stderr
