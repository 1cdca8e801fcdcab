"""The command line and the Responses adapter: ``dsh-llm providers`` lists a
composition's ``llm-openai-responses`` routes, ``dsh-llm chat --wire responses
--base-url`` streams through ``POST /responses``, and ``--wire`` goes with
``--base-url`` only."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh_llm.cli import main
from dsh_llm.cli.targets import RESPONSES_ROUTE
from dsh_llm.cli.targets import UsageError
from dsh_llm.cli.targets import open_routes
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply

from ...cli_run import clean_env
from ...cli_run import run_cli

FIXTURES = Path(__file__).parents[2] / "fixtures" / "openai_responses"


@pytest.fixture
def loopback() -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:
        yield srv


def test_providers_lists_the_routes_of_a_responses_composition(tmp_path):
    config = tmp_path / "dsh.yml"
    config.write_text(
        "- id: local\n"
        "  name: dsh_llm.plugins.builtin:OPENAI_RESPONSES\n"
        "  config:\n"
        "    providers: [ollama-responses]\n"
        "    baseURL: http://127.0.0.1:11434/v1\n"
        "    models:\n"
        "      - {id: 'gpt-oss:20b', name: GPT-OSS 20B}\n",
        encoding="utf-8",
    )

    result = run_cli("providers", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"ollama-responses  (Ollama (Responses API), {config})",
        "  gpt-oss:20b  GPT-OSS 20B",
    ]


def test_chat_wire_responses_streams_from_the_responses_endpoint(loopback, tmp_path):
    loopback.enqueue(
        Reply(body=(FIXTURES / "openai_reasoning_without_summary.sse").read_bytes())
    )

    result = run_cli(
        "chat",
        "--wire",
        "responses",
        "--base-url",
        f"{loopback.url}/v1",
        "--model",
        "gpt-5.2",
        "--reasoning-effort",
        "low",
        "hi",
        env=clean_env(),
        cwd=tmp_path,
    )

    assert result.returncode == 0, result.stderr
    (request,) = loopback.requests
    assert request.path == "/v1/responses"
    assert request.header("authorization") is None
    body = request.json()
    assert body["model"] == "gpt-5.2"
    assert body["reasoning"] == {"effort": "low", "summary": "auto"}
    assert body["input"] == [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "hi"}],
        }
    ]
    assert result.stdout.strip() != ""
    assert result.stderr.splitlines()[-1].startswith("finish stop; usage: ")


def test_chat_wire_responses_json_output_is_the_chunk_stream(
    loopback, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    loopback.enqueue(Reply(body=(FIXTURES / "openai_text_only.sse").read_bytes()))

    status = main(
        [
            "chat",
            "--json",
            "--wire",
            "responses",
            "--base-url",
            f"{loopback.url}/v1",
            "--model",
            "gpt-5.2",
            "hi",
        ]
    )

    out = capsys.readouterr().out
    assert status == 0
    expected = (FIXTURES / "openai_text_only.chunks.jsonl").read_text("utf-8")
    assert [json.loads(line) for line in out.splitlines()] == [
        json.loads(line) for line in expected.splitlines()
    ]


def test_the_responses_route_is_registered_under_its_own_name():
    with open_routes(base_url="http://127.0.0.1:1234/v1", wire="responses") as routes:
        (info,) = routes.runtime.list_providers()
    assert (info.id, info.name) == (RESPONSES_ROUTE, "LM Studio (Responses API)")
    with open_routes(base_url="http://127.0.0.1:1234/v1") as routes:
        (info,) = routes.runtime.list_providers()
    assert info.id == "openai-compatible"


def test_wire_without_base_url_is_a_usage_error(tmp_path):
    with (
        pytest.raises(UsageError, match="--wire applies to --base-url"),
        open_routes(config=str(tmp_path / "none.yml"), wire="responses"),
    ):
        pass
    result = run_cli(
        "chat",
        "--wire",
        "responses",
        "hi",
        env=clean_env(),
        cwd=tmp_path,
    )
    assert result.returncode == 2
    assert "--wire applies to --base-url" in result.stderr


def test_a_responses_base_url_that_ends_in_the_endpoint_is_a_usage_error(tmp_path):
    result = run_cli(
        "chat",
        "--wire",
        "responses",
        "--base-url",
        "http://127.0.0.1:8000/v1/responses",
        "--model",
        "m",
        "hi",
        env=clean_env(),
        cwd=tmp_path,
    )
    assert result.returncode == 2
    assert "llm-openai-responses: baseURL must end at the API root" in result.stderr
