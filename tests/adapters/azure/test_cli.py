"""The command line and the ``azure`` route: ``dsh-llm chat --provider azure``
streams from ``AZURE_OPENAI_ENDPOINT`` with ``AZURE_OPENAI_API_KEY``, and
``dsh-llm providers`` lists the route as not available without an endpoint.

Both go through the ``llm-azure`` row of ``dsh_llm.adapters.BUILTIN_FAMILIES``."""

from __future__ import annotations

from pathlib import Path

from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply

from ...cli_run import clean_env
from ...cli_run import run_cli
from .replay import body


def test_chat_provider_azure_streams_from_the_endpoint(
    server: LoopbackServer, tmp_path: Path
) -> None:
    server.enqueue(Reply(body=body("chat_async_filter_blocked")))
    result = run_cli(
        "chat",
        "--provider",
        "azure",
        "--model",
        "gpt-4o-prod",
        "hi",
        env=clean_env(
            AZURE_OPENAI_ENDPOINT=f"{server.url}?api-version=2024-10-21",
            AZURE_OPENAI_API_KEY="cli-key-0123456789",
        ),
        cwd=tmp_path,
    )
    assert result.returncode == 1, result.stderr
    assert result.stdout.startswith("Hey Jude, don't")
    assert "error[CONTENT_FILTER]: model stopped: content_filter" in result.stderr
    (request,) = server.requests
    assert request.path == (
        "/openai/deployments/gpt-4o-prod/chat/completions?api-version=2024-10-21"
    )
    assert request.header("api-key") == "cli-key-0123456789"


def test_providers_lists_azure_as_not_available_without_an_endpoint(
    tmp_path: Path,
) -> None:
    result = run_cli("providers", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    at = lines.index("azure  (Azure OpenAI, built-in)")
    assert lines[at + 1] == (
        "  (not available here: llm-azure: resource is not set: set resource or "
        "baseURL, or export AZURE_OPENAI_ENDPOINT)"
    )
