"""``dsh-llm`` and the built-in ``anthropic`` route: listed by ``providers``,
usable with ``chat --provider anthropic`` (key from ``ANTHROPIC_API_KEY`` or the
variable ``--api-key-env`` names, ``ANTHROPIC_BASE_URL`` honoured), and loaded
from a composition file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsh_llm.cli import main
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply

from ...cli_run import clean_env
from ...cli_run import run_cli
from .replay import FIXTURES

TEXT = (FIXTURES / "text.sse").read_bytes()


def test_chat_streams_claude_through_the_built_in_route(
    server: LoopbackServer, tmp_path: Path
) -> None:
    server.enqueue(Reply(body=TEXT, split=7))
    env = clean_env(ANTHROPIC_API_KEY="sk-ant-cli", ANTHROPIC_BASE_URL=server.url)

    result = run_cli("chat", "--provider", "anthropic", "hello", env=env, cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout == "Hello there! ¿Qué tal? 你好 🙂\n"
    assert result.stderr.startswith("finish stop; usage: input ")
    (request,) = server.requests
    assert request.path == "/v1/messages"
    assert request.header("x-api-key") == "sk-ant-cli"
    body = request.json()
    # The first model of the catalog, with its default output cap.
    assert (body["model"], body["max_tokens"]) == ("claude-opus-5-5", 64000)
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hello"}]}
    ]


def test_api_key_env_names_the_key_of_the_anthropic_route(
    server: LoopbackServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    server.enqueue(Reply(body=TEXT))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("MY_CLAUDE_KEY", "sk-ant-mine")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    args = ["chat", "--provider", "anthropic", "--api-key-env", "MY_CLAUDE_KEY"]

    assert main([*args, "--model", "claude-haiku-4-5", "hi"]) == 0

    assert capsys.readouterr().out == "Hello there! ¿Qué tal? 你好 🙂\n"
    (request,) = server.requests
    assert request.header("x-api-key") == "sk-ant-mine"
    assert request.json()["model"] == "claude-haiku-4-5"


def test_chat_without_a_key_names_the_variable(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)

    status = main(["chat", "--provider", "anthropic", "hi"])

    assert status != 0
    err = capsys.readouterr().err
    assert err.startswith("error[MISSING_CREDENTIAL]: ")
    assert "ANTHROPIC_API_KEY" in err


def test_providers_lists_the_anthropic_route_from_a_composition(
    tmp_path: Path,
) -> None:
    config = tmp_path / "dsh.yml"
    config.write_text(
        "- id: claude\n"
        "  name: dsh_llm.plugins.builtin:ANTHROPIC\n"
        "  config:\n"
        "    models: [{id: claude-haiku-4-5, name: Haiku},\n"
        "             {id: claude-3-haiku-20240307},\n"
        "             {id: proxy-claude, inputModalities: [text, image]}]\n",
        encoding="utf-8",
    )

    result = run_cli("providers", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"anthropic  (Anthropic, {config})",
        # A Claude id takes the catalog's inputs, an unknown id is text only
        # unless inputModalities says otherwise.
        "  claude-haiku-4-5         Haiku  [text, image]",
        "  claude-3-haiku-20240307  claude-3-haiku-20240307",
        "  proxy-claude             proxy-claude  [text, image]",
    ]


def _json_answer(*pieces: str) -> bytes:
    """The text fixture with its deltas replaced by ``pieces``."""
    head, _, rest = TEXT.partition(b"event: content_block_delta")
    tail = rest[rest.index(b"event: content_block_stop") :]
    deltas = b"".join(
        b"event: content_block_delta\ndata: "
        + json.dumps(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": piece},
            }
        ).encode()
        + b"\n\n"
        for piece in pieces
    )
    return head + deltas + tail


def test_schema_and_options_reach_claude_and_the_answer_is_checked(
    server: LoopbackServer, tmp_path: Path
) -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    (tmp_path / "city.json").write_text(json.dumps(schema), encoding="utf-8")
    server.enqueue(Reply(body=_json_answer('{"city": ', '"Paris"}'), split=5))
    env = clean_env(ANTHROPIC_API_KEY="sk-ant-cli", ANTHROPIC_BASE_URL=server.url)
    args = ["--schema", "city.json", "-o", "top_k=5", "-o", 'metadata={"a": 1}']

    result = run_cli(
        "chat", "--provider", "anthropic", *args, "a city", env=env, cwd=tmp_path
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout == '{"city": "Paris"}\n'
    body = server.requests[0].json()
    # The route's default effort and the format share one output_config.
    assert body["output_config"]["format"] == {"type": "json_schema", "schema": schema}
    assert (body["top_k"], body["metadata"]) == (5, {"a": 1})


def test_an_answer_outside_the_schema_fails_the_anthropic_chat(
    server: LoopbackServer, tmp_path: Path
) -> None:
    schema = {"type": "object", "required": ["city"]}
    (tmp_path / "city.json").write_text(json.dumps(schema), encoding="utf-8")
    server.enqueue(Reply(body=_json_answer('{"town": "Paris"}')))
    env = clean_env(ANTHROPIC_API_KEY="sk-ant-cli", ANTHROPIC_BASE_URL=server.url)

    result = run_cli(
        "chat",
        "--provider",
        "anthropic",
        "--schema",
        "city.json",
        "a city",
        env=env,
        cwd=tmp_path,
    )

    assert result.returncode == 1
    assert "error[INVALID_JSON_OUTPUT]" in result.stderr
