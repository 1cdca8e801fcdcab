"""``dsh-llm count``: a prompt's input tokens from the provider's own counting
endpoint, as a real process against a loopback server."""

from __future__ import annotations

import json

from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply
from tests.cli_run import clean_env
from tests.cli_run import run_cli

KEY = "sk-ant-count-0123456789"


def _answer(body: object) -> Reply:
    return Reply(
        headers={"content-type": "application/json"},
        body=json.dumps(body).encode(),
        framing="length",
    )


def test_count_prints_the_anthropic_count_for_the_prompt(
    server: LoopbackServer,
) -> None:
    server.enqueue(_answer({"input_tokens": 2095}))
    env = clean_env(ANTHROPIC_API_KEY=KEY, ANTHROPIC_BASE_URL=server.url)
    result = run_cli(
        "count",
        "--provider",
        "anthropic",
        "--model",
        "claude-sonnet-4-5",
        "--system",
        "Be brief.",
        "How long is the contract?",
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "2095\n"
    assert "route anthropic, model claude-sonnet-4-5" in result.stderr
    (request,) = server.requests
    assert request.path == "/v1/messages/count_tokens"
    body = request.json()
    assert body["system"] == "Be brief."
    assert body["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "How long is the contract?"}],
        }
    ]
    assert "max_tokens" not in body
    assert request.header("x-api-key") == KEY


def test_count_reads_the_prompt_from_stdin_and_prints_json(
    server: LoopbackServer,
) -> None:
    server.enqueue(_answer({"object": "response.input_tokens", "input_tokens": 11}))
    result = run_cli(
        "count",
        "--base-url",
        f"{server.url}/v1",
        "--wire",
        "responses",
        "--model",
        "gpt-5.2",
        "--json",
        stdin="How long is the contract?",
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "provider": "openai-responses",
        "model": "gpt-5.2",
        "inputTokens": 11,
    }
    assert server.requests[0].path == "/v1/responses/input_tokens"
    assert server.requests[0].json()["input"][0]["content"][0]["text"] == (
        "How long is the contract?"
    )


def test_a_route_that_cannot_count_exits_1_naming_the_code(
    server: LoopbackServer,
) -> None:
    result = run_cli("count", "--base-url", f"{server.url}/v1", "--model", "m", "Hello")
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith("error[UNSUPPORTED_OPTION]: ")
    assert "token-counting endpoint" in result.stderr
    assert server.requests == ()


def test_a_refused_count_exits_1_with_the_provider_code(
    server: LoopbackServer,
) -> None:
    server.enqueue(
        Reply(
            status=401,
            reason="Unauthorized",
            headers={"content-type": "application/json"},
            body=b'{"type":"error","error":{"type":"authentication_error",'
            b'"message":"invalid x-api-key"}}',
            framing="length",
        )
    )
    env = clean_env(ANTHROPIC_API_KEY=KEY, ANTHROPIC_BASE_URL=server.url)
    result = run_cli(
        "count",
        "--provider",
        "anthropic",
        "--model",
        "claude-sonnet-4-5",
        "Hi",
        env=env,
    )
    assert result.returncode == 1
    assert result.stderr.startswith("error[AUTH]: invalid x-api-key")


def test_usage_errors_exit_2() -> None:
    empty = run_cli("count", "--provider", "anthropic", "--model", "m", "  ")
    assert empty.returncode == 2
    assert "empty prompt" in empty.stderr
    wire = run_cli("count", "--wire", "responses", "Hi")
    assert wire.returncode == 2
    assert "--wire applies to --base-url" in wire.stderr
    nothing = run_cli("count", "Hi")
    assert nothing.returncode == 2
    assert "no model to talk to" in nothing.stderr
