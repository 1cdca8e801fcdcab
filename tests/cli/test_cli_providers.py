"""``dsh-llm providers`` and ``dsh_llm.cli.targets``: which routes the command line
sees (built-in DeepSeek, a composition file) and how it picks route and model."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from dsh_llm import LlmAdapter
from dsh_llm.cli import main
from dsh_llm.cli.targets import BUILTIN_ROUTES
from dsh_llm.cli.targets import Choice
from dsh_llm.cli.targets import UsageError
from dsh_llm.cli.targets import find_config
from dsh_llm.cli.targets import open_routes
from dsh_llm.cli.targets import open_target
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError

from ..cli_run import run_cli

# The flags open_target reads besides the choice, none given.
NO_FLAGS = argparse.Namespace(
    config=None, api_key_env=None, reasoning_effort=None, timeout=None
)

EXAMPLES = Path(__file__).parents[2] / "examples"


def test_providers_lists_every_built_in_route_and_its_catalog(tmp_path):
    result = run_cli("providers", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    first = [
        "deepseek-official  (DeepSeek, built-in)",
        "  deepseek-v4-flash             DeepSeek-V4-Flash",
        "  deepseek-v4-pro               DeepSeek-V4-Pro",
        # DeepSeek cannot send images (no Files API): not listed as image input.
        "  deepseek-v4-flash-vision-exp  DeepSeek-V4-Flash-Vision-Exp",
        "anthropic  (Anthropic, built-in)",
        "  claude-opus-5-5    Claude Opus 5.5  [text, image]",
        "  claude-fable-5-1   Claude Fable 5.1  [text, image]",
        "  claude-sonnet-5-5  Claude Sonnet 5.5  [text, image]",
        "  claude-opus-5      Claude Opus 5  [text, image]",
        "  claude-sonnet-5    Claude Sonnet 5  [text, image]",
        "  claude-haiku-4-5   Claude Haiku 4.5  [text, image]",
        "gemini  (Gemini, built-in)",
        "  gemini-3-pro-preview    Gemini 3 Pro (preview)  [text, image]",
        "  gemini-3-flash-preview  Gemini 3 Flash (preview)  [text, image]",
        "  gemini-2.5-pro          Gemini 2.5 Pro  [text, image]",
        "  gemini-2.5-flash        Gemini 2.5 Flash  [text, image]",
        "  gemini-2.5-flash-lite   Gemini 2.5 Flash-Lite  [text, image]",
        "ollama  (Ollama, built-in)",
        # Its models come from a server that need not run: not asked.
        "  (the server lists its models: pass --model to chat)",
        "groq  (Groq, built-in)",
        "  llama-3.3-70b-versatile  Llama 3.3 70B Versatile",
    ]
    assert lines[: len(first)] == first
    # Every built-in route has its heading, in the table's order (one that
    # cannot be built here last); the hosted services list their catalogs.
    headings = [line for line in lines if not line.startswith("  ")]
    missing = ("bedrock", "azure")
    built = [route for route in BUILTIN_ROUTES if route not in missing]
    assert [h.split("  ")[0] for h in headings] == [*built, *missing]
    assert "xai  (xAI, built-in)" in headings
    # No AWS region and no Azure resource in the test's environment: listed
    # last, not registered.
    assert lines[-4:] == [
        "bedrock  (Amazon Bedrock, built-in)",
        "  (not available here: llm-bedrock: region is not set: set region, or "
        "export AWS_REGION (or give the AWS profile a region))",
        "azure  (Azure OpenAI, built-in)",
        "  (not available here: llm-azure: resource is not set: set resource or "
        "baseURL, or export AZURE_OPENAI_ENDPOINT)",
    ]
    assert "dsh-llm chat --base-url URL --model NAME" in result.stderr


def test_providers_lists_the_routes_of_the_composition(tmp_path):
    (tmp_path / "my_llm_adapter.py").write_bytes(
        (EXAMPLES / "my_llm_adapter.py").read_bytes()
    )
    config = tmp_path / "dsh.yml"
    config.write_text(
        "- id: deepseek\n"
        "  name: llm-deepseek\n"
        "  config:\n"
        "    models:\n"
        "      - {id: my-finetune, name: My Finetune}\n"
        "- id: echo\n"
        "  name: ./my_llm_adapter.py\n"
        "  config: {apiKey: k, providers: [my-provider]}\n",
        encoding="utf-8",
    )

    result = run_cli("providers", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout.splitlines() == [
        f"deepseek-official  (DeepSeek, {config})",
        "  my-finetune  My Finetune",
        f"my-provider  (my-provider, {config})",
        "  (no models listed; pass --model to chat)",
    ]
    elsewhere = run_cli("providers", "--config", str(config), cwd=tmp_path.parent)
    assert elsewhere.stdout == result.stdout


class _NoCatalog(LlmAdapter):
    def stream(self, options):
        raise AssertionError("not called")

    def list_models(self, provider):
        raise LlmError("catalog service is down", ErrorCode.SERVER)


name = "broken-catalog"


def apply(ctx, config):
    ctx.llm.register_adapter(["flaky"], _NoCatalog())


def test_providers_reports_a_failing_catalog_and_exits_1(tmp_path, capsys):
    config = tmp_path / "dsh.yml"
    config.write_text(f"- name: {__name__}\n", encoding="utf-8")

    assert main(["providers", "--config", str(config)]) == 1
    captured = capsys.readouterr()
    assert captured.out == f"flaky  (flaky, {config})\n"
    assert captured.err == 'error[SERVER]: route "flaky": catalog service is down\n'


BUGGY_PLUGIN = """\
from dsh_llm import LlmAdapter

class Buggy(LlmAdapter):
    def stream(self, options):
        raise AssertionError("not called")

    def list_models(self, provider):
        raise ValueError("boom in list_models")

name = "buggy"

def apply(ctx, config):
    ctx.llm.register_adapter(["buggy"], Buggy())
"""


def test_a_plain_exception_from_a_catalog_is_an_error_line_not_a_traceback(
    tmp_path,
):
    (tmp_path / "buggy_plugin.py").write_text(BUGGY_PLUGIN, encoding="utf-8")
    (tmp_path / "dsh.yml").write_text("- name: ./buggy_plugin.py\n", encoding="utf-8")

    for args in (["providers"], ["chat", "--provider", "buggy", "hi"]):
        result = run_cli(*args, cwd=tmp_path)
        assert result.returncode == 1, result.stderr
        assert "Traceback" not in result.stderr
        assert "error[UNKNOWN]: " in result.stderr
        assert "boom in list_models" in result.stderr


def test_find_config_prefers_the_explicit_path_then_the_local_dsh_yml(tmp_path):
    assert find_config("other.yml", tmp_path) == "other.yml"
    assert find_config(None, tmp_path) is None
    (tmp_path / "dsh.yml").write_text("[]\n", encoding="utf-8")
    assert find_config(None, tmp_path) == str(tmp_path / "dsh.yml")


def test_open_target_picks_deepseek_and_its_first_model_by_default(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    environ = {"DEEPSEEK_API_KEY": "sk-test"}
    with open_target(NO_FLAGS, Choice(provider=None, model=None), environ) as target:
        assert (target.route, target.model) == (
            "deepseek-official",
            "deepseek-v4-flash",
        )
        # Every built-in provider route is there (none does I/O before a call),
        # but Bedrock, which cannot be built without an AWS region.
        assert [p.id for p in target.runtime.list_providers()] == [
            route for route in BUILTIN_ROUTES if route not in ("bedrock", "azure")
        ]
        assert BUILTIN_ROUTES[:4] == (
            "deepseek-official",
            "anthropic",
            "gemini",
            "ollama",
        )
        assert {"bedrock", "groq", "mistral", "xai", "perplexity"} <= set(
            BUILTIN_ROUTES
        )
    # Leaving the block unregistered the route.
    assert target.runtime.list_providers() == ()


def test_open_routes_reports_an_invalid_builtin_setting_as_a_usage_error(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DEEPSEEK_BASE_URL", "not a url")
    with pytest.raises(UsageError, match="llm-deepseek: "), open_routes():
        pass


def test_a_composition_without_routes_cannot_chat(tmp_path, monkeypatch):
    (tmp_path / "dsh.yml").write_text("[]\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    with (
        pytest.raises(UsageError, match="registers no route"),
        open_target(NO_FLAGS, Choice(provider=None, model=None)),
    ):
        pass
