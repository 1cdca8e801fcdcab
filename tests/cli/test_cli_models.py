"""``dsh-llm models`` and ``dsh-llm aliases``: listing the catalogs and a server's
models, the default model and aliases that ``chat`` then uses, failover aliases
of a composition as routes, and the closest name suggested for a typo."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dsh_llm.cli import main
from dsh_llm.cli.models import Choice
from dsh_llm.cli.models import ModelChoice
from dsh_llm.cli.models import ModelSettings
from dsh_llm.cli.models import choose
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply

from ..cli_run import clean_env
from ..cli_run import deepseek_text_reply
from ..cli_run import run_cli


def _models_reply(*ids: str) -> Reply:
    return Reply(
        headers={"content-type": "application/json"},
        body=json.dumps({"data": [{"id": i} for i in ids]}).encode(),
        framing="length",
    )


def test_models_lists_every_catalog_and_marks_the_default_and_aliases(tmp_path):
    assert (
        run_cli("models", "default", "claude-haiku-4-5", cwd=tmp_path).returncode == 0
    )
    alias = run_cli("aliases", "set", "fast", "gemini-2.5-flash", cwd=tmp_path)
    assert alias.returncode == 0, alias.stderr

    result = run_cli("models", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert (
        lines[0] == "deepseek-official: deepseek-v4-flash             DeepSeek-V4-Flash"
    )
    assert "anthropic: claude-haiku-4-5   Claude Haiku 4.5  (default)" in lines
    assert "gemini: gemini-2.5-flash        Gemini 2.5 Flash  (aliases: fast)" in lines
    # A catalog its server lists is not asked for unless named.
    assert (
        "ollama: (its server lists the models: dsh-llm models --provider ollama)"
        in lines
    )
    assert "groq: llama-3.3-70b-versatile  Llama 3.3 70B Versatile" in lines
    only = run_cli("models", "--provider", "gemini", cwd=tmp_path).stdout.splitlines()
    assert {line.split(":")[0] for line in only} == {"gemini"}
    assert run_cli("models", "list", "--provider", "gemini", cwd=tmp_path).stdout == (
        "\n".join(only) + "\n"
    )


def test_models_lists_what_a_server_serves(server, tmp_path):
    server.enqueue(_models_reply("qwen3-8b", "llama-3.1-8b"))

    result = run_cli("models", "--base-url", server.url, cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout == "qwen3-8b\nllama-3.1-8b\n"
    assert server.requests[0].path == "/models"


def test_models_default_finds_the_route_that_lists_the_model(tmp_path, user_dir):
    result = run_cli("models", "default", "claude-haiku-4-5", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stderr == "default model: claude-haiku-4-5 (route anthropic)\n"
    assert json.loads((user_dir / "models.json").read_text(encoding="utf-8")) == {
        "default": {"provider": "anthropic", "model": "claude-haiku-4-5"},
        "aliases": {},
    }
    shown = run_cli("models", "default", cwd=tmp_path)
    assert shown.stdout == "claude-haiku-4-5 (route anthropic)\n"
    cleared = run_cli("models", "default", "--clear", cwd=tmp_path)
    assert cleared.returncode == 0
    assert run_cli("models", "default", cwd=tmp_path).stderr.startswith(
        "no default model set"
    )


def test_a_cloud_front_door_yields_to_the_providers_own_route(tmp_path, user_dir):
    # Vertex AI lists Gemini and Claude models too: the bare name stays the
    # provider's own route's, and --provider chooses the front door.
    for model, route in (
        ("gemini-2.5-flash", "gemini"),
        ("claude-haiku-4-5", "anthropic"),
    ):
        result = run_cli("models", "default", model, cwd=tmp_path)
        assert result.stderr == f"default model: {model} (route {route})\n"
    chosen = run_cli(
        "models", "default", "gemini-2.5-flash", "--provider", "vertex", cwd=tmp_path
    )
    assert chosen.returncode == 0, chosen.stderr
    assert run_cli("models", "default", cwd=tmp_path).stdout == (
        "gemini-2.5-flash (route vertex)\n"
    )


def test_a_model_no_route_lists_needs_a_provider(tmp_path):
    unknown = run_cli("models", "default", "my-finetune", cwd=tmp_path)
    assert unknown.returncode == 2
    assert unknown.stderr == (
        "error: no route lists the model 'my-finetune' (dsh-llm models shows them); "
        "pass --provider ROUTE to use it anyway\n"
    )
    given = run_cli(
        "models", "default", "my-finetune", "--provider", "ollama", cwd=tmp_path
    )
    assert given.returncode == 0, given.stderr
    assert run_cli("models", "default", cwd=tmp_path).stdout == (
        "my-finetune (route ollama)\n"
    )
    wrong = run_cli("aliases", "set", "x", "m", "--provider", "nope", cwd=tmp_path)
    assert wrong.returncode == 2
    assert wrong.stderr.startswith('error: no route "nope" in built-in routes')


def test_a_model_several_routes_list_asks_which(tmp_path):
    (tmp_path / "dsh.yml").write_text(
        "".join(
            f"- id: {route}\n"
            "  name: llm-openai-compatible\n"
            f"  config: {{providers: [{route}], baseURL: http://127.0.0.1:9/v1, "
            "models: [shared]}\n"
            for route in ("left", "right")
        ),
        encoding="utf-8",
    )
    result = run_cli("aliases", "set", "s", "shared", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == (
        "error: several routes list 'shared' (left, right); choose one with "
        "--provider ROUTE\n"
    )
    chosen = run_cli(
        "aliases", "set", "s", "shared", "--provider", "right", cwd=tmp_path
    )
    assert chosen.returncode == 0, chosen.stderr


def test_chat_uses_the_default_model_when_nothing_is_given(server, tmp_path):
    assert (
        run_cli("models", "default", "claude-haiku-4-5", cwd=tmp_path).returncode == 0
    )
    server.enqueue(_claude_text("Hi."))
    env = clean_env(ANTHROPIC_API_KEY="sk-ant", ANTHROPIC_BASE_URL=server.url)

    result = run_cli("chat", "hello", env=env, cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout == "Hi.\n"
    (request,) = server.requests
    assert request.path == "/v1/messages"
    assert request.json()["model"] == "claude-haiku-4-5"


def test_chat_model_alias_names_the_route_and_model(server, tmp_path):
    assert run_cli("aliases", "set", "fast", "claude-haiku-4-5").returncode == 0
    server.enqueue(_claude_text("Quick."))
    env = clean_env(ANTHROPIC_API_KEY="sk-ant", ANTHROPIC_BASE_URL=server.url)

    result = run_cli("chat", "--model", "fast", "hello", env=env, cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert server.requests[0].json()["model"] == "claude-haiku-4-5"


def test_a_default_on_a_route_the_composition_lacks_says_where_it_came_from(
    tmp_path,
):
    assert run_cli("models", "default", "claude-haiku-4-5").returncode == 0
    (tmp_path / "dsh.yml").write_text(
        "- id: local\n  name: llm-openai-compatible\n"
        "  config: {providers: [local], baseURL: http://127.0.0.1:9/v1, models: [m]}\n",
        encoding="utf-8",
    )
    result = run_cli("chat", "hi", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith(
        'error: no route "anthropic" (named by the default model (dsh-llm models '
        "default)) in "
    )


def test_aliases_list_set_remove_and_json(tmp_path):
    assert run_cli("aliases").stderr == "no aliases: dsh-llm aliases set NAME MODEL\n"
    assert run_cli("aliases", "set", "fast", "gemini-2.5-flash").returncode == 0
    assert run_cli("aliases", "set", "deep", "deepseek-v4-pro").returncode == 0
    # An alias may name another alias: it is stored resolved.
    assert run_cli("aliases", "set", "quick", "fast").returncode == 0
    assert run_cli("aliases", "list").stdout == (
        "deep   deepseek-v4-pro (route deepseek-official)\n"
        "fast   gemini-2.5-flash (route gemini)\n"
        "quick  gemini-2.5-flash (route gemini)\n"
    )
    assert json.loads(run_cli("aliases", "--json").stdout)["quick"] == {
        "provider": "gemini",
        "model": "gemini-2.5-flash",
    }
    assert run_cli("aliases", "remove", "fast").returncode == 0
    missing = run_cli("aliases", "remove", "fast")
    assert missing.returncode == 2
    assert missing.stderr == "error: no alias 'fast' (aliases: deep, quick)\n"
    assert run_cli("aliases", "set", "a/b", "deepseek-v4-pro").returncode == 2


def test_choose_follows_its_order():
    settings = ModelSettings(
        Path("unused.json"),
        default=ModelChoice(provider="gemini", model="gemini-2.5-flash"),
        aliases={"fast": ModelChoice(provider="anthropic", model="claude-haiku-4-5")},
    )

    def chosen(**given: str | None) -> Choice:
        fields = {"provider": None, "model": None, "base_url": None, "wire": None}
        return choose(**{**fields, **given}, settings=settings)  # type: ignore[arg-type]

    assert (chosen().provider, chosen().model) == ("gemini", "gemini-2.5-flash")
    assert chosen(model="fast").provider == "anthropic"
    # --provider naming another route: the alias is just a model id there.
    assert chosen(provider="ollama", model="fast") == Choice(
        provider="ollama", model="fast"
    )
    assert chosen(model="other") == Choice(provider=None, model="other")
    assert chosen(base_url="http://x/v1", model="fast").model == "fast"


def test_a_broken_models_file_is_reported_and_the_chat_goes_on(
    server, tmp_path, user_dir
):
    (user_dir / "models.json").write_text("[]", encoding="utf-8")
    server.enqueue(deepseek_text_reply(["ok"]))
    env = clean_env(DEEPSEEK_API_KEY="sk", DEEPSEEK_BASE_URL=server.url)

    result = run_cli("chat", "hi", env=env, cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stderr.startswith(
        "dsh-llm: warning: the default model and aliases are ignored: "
    )
    assert run_cli("aliases").returncode == 2


def _claude_text(text: str) -> Reply:
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-haiku-4-5",
                "content": [],
                "stop_reason": None,
                "usage": {"input_tokens": 3, "output_tokens": 1},
            },
        },
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "text", "text": ""},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": text},
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 2},
        },
        {"type": "message_stop"},
    ]
    return Reply(
        body=b"".join(
            f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events
        )
    )


# --- failover aliases ---------------------------------------------------------------


def _failover_composition(tmp_path: Path, primary: str, backup: str) -> Path:
    config = tmp_path / "dsh.yml"
    config.write_text(
        "- id: primary\n"
        "  name: llm-openai-compatible\n"
        f"  config: {{providers: [primary], baseURL: {primary}, models: [small]}}\n"
        "- id: backup\n"
        "  name: llm-openai-compatible\n"
        f"  config: {{providers: [backup], baseURL: {backup}, models: [big]}}\n"
        "- id: failover\n"
        "  name: llm-failover\n"
        "  config:\n"
        "    alias: chat\n"
        "    routes:\n"
        "      - {provider: primary, model: small}\n"
        "      - {provider: backup, model: big}\n",
        encoding="utf-8",
    )
    return config


def test_a_failover_alias_is_listed_and_usable_as_provider(tmp_path):
    with LoopbackServer() as primary, LoopbackServer() as backup:
        config = _failover_composition(tmp_path, primary.url, backup.url)
        primary.enqueue(
            Reply(status=503, reason="Unavailable", body=b"", framing="length")
        )
        backup.enqueue(deepseek_text_reply(["from the backup"]))

        listed = run_cli("providers", cwd=tmp_path)
        result = run_cli("chat", "--provider", "chat", "hello", cwd=tmp_path)

        assert listed.returncode == 0, listed.stderr
        assert listed.stdout.splitlines()[-1] == (
            f"chat  (failover over primary/small, backup/big; {config})"
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout == "from the backup\n"
        assert primary.requests[0].json()["model"] == "small"
        assert backup.requests[0].json()["model"] == "big"
        models = run_cli("models", cwd=tmp_path).stdout.splitlines()
        assert "chat: failover over primary (small), backup (big)" in models


def test_an_unknown_provider_lists_the_failover_aliases_too(
    tmp_path, capsys, monkeypatch
):
    _failover_composition(tmp_path, "http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1")
    monkeypatch.chdir(tmp_path)
    assert main(["chat", "--provider", "chta", "hi"]) == 2
    assert "(registered: primary, backup, chat)" in capsys.readouterr().err


# --- suggestions ---------------------------------------------------------------------


def test_a_misspelt_subcommand_suggests_the_closest(capsys):
    result = run_cli("chta", "hello")
    assert result.returncode == 2
    assert "invalid choice: 'chta'; did you mean 'chat'?" in result.stderr
    assert result.stderr.startswith("usage: dsh-llm")


def test_a_misspelt_flag_suggests_the_closest_of_its_command():
    result = run_cli("chat", "--modle", "x", "hi")
    assert result.returncode == 2
    assert result.stderr.startswith("usage: dsh-llm chat")
    assert "unrecognized arguments: --modle" in result.stderr
    assert "did you mean --model?" in result.stderr
    nested = run_cli("logs", "of")
    assert nested.returncode == 2
    assert "did you mean 'off'?" in nested.stderr
    choice = run_cli("chat", "--wire", "respones", "--base-url", "http://x", "hi")
    assert "did you mean 'responses'?" in choice.stderr
    far = run_cli("zzzzzz")
    assert far.returncode == 2
    assert "did you mean" not in far.stderr
