"""Recording an Azure OpenAI call through ``dsh_llm.testing.record``: the
``?api-version=`` (given to the adapter or in the upstream URL) reaches the
upstream on the deployment path, the cassette holds no API key, no Entra ID
token and no subscription key from the URL, and it replays to the chunks the
live call gave."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any
from typing import NamedTuple

import pytest

from dsh_llm.adapters.azure import PROVIDER_ROUTE
from dsh_llm.adapters.azure import AzureOpenAIAdapter
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import create_user_message
from dsh_llm.testing import Cassette
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply
from dsh_llm.testing import record
from dsh_llm.testing import replay_chunks
from dsh_llm.validator import validate_stream

from .replay import body

KEY = "azure-record-key-0123456789abcdef"
TOKEN = "eyJ0eXAiOiJKV1QifQ.eyJvaWQiOiJyZWNvcmQifQ.cmVjb3JkLXNpZ25hdHVyZQ"
SUBSCRIPTION = "apim-subscription-0123456789abcdef"
OPTIONS = GenerateOptions(
    provider=PROVIDER_ROUTE, model="gpt-4o-eu", messages=(create_user_message("hi"),)
)


class AccessToken(NamedTuple):
    token: str
    expires_on: int


class Credential:
    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        return AccessToken(TOKEN, int(time.time()) + 3600)


def _call(adapter: AzureOpenAIAdapter) -> list[StreamChunk]:
    with adapter:
        return list(validate_stream(adapter.stream(OPTIONS), strict=True))


def _recorded(tmp_path: Path) -> tuple[Path, str]:
    (path,) = sorted(tmp_path.glob("*.jsonl"))
    return path, path.read_text(encoding="utf-8")


@pytest.mark.parametrize("version_in", ["config", "url"])
def test_a_deployment_call_records_with_its_api_version_and_no_key(
    server: LoopbackServer, tmp_path: Path, version_in: str
) -> None:
    server.enqueue(Reply(body=body("chat_async_filter_blocked")))
    upstream = server.url
    options: dict[str, Any] = {"api_version": "2024-10-21"}
    if version_in == "url":
        upstream += "?api-version=2024-10-21"
        options = {}
    with record(upstream, tmp_path, secrets=[KEY]) as recording:
        live = _call(
            AzureOpenAIAdapter(KEY, base_url=recording.base_url, environ={}, **options)
        )
    (request,) = server.requests
    assert request.path == (
        "/openai/deployments/gpt-4o-eu/chat/completions?api-version=2024-10-21"
    )
    assert request.header("api-key") == KEY
    path, text = _recorded(tmp_path)
    assert KEY not in text
    cassette = Cassette.load(path)
    assert cassette.request.url.endswith(
        "/openai/deployments/gpt-4o-eu/chat/completions?api-version=2024-10-21"
    )
    replayed = replay_chunks(
        path,
        lambda url, **kw: AzureOpenAIAdapter(
            "replay-key-0123456789", base_url=url, api_version="2024-10-21", **kw
        ),
        options=OPTIONS,
    )
    assert replayed == live
    assert live[-1].reason.failure is not None
    assert live[-1].reason.failure.code == "CONTENT_FILTER"


def test_a_subscription_key_in_the_url_and_a_token_stay_out_of_the_cassette(
    server: LoopbackServer, tmp_path: Path
) -> None:
    server.enqueue(Reply(body=body("responses_reasoning_text")))
    upstream = f"{server.url}/gw?subscription-key={SUBSCRIPTION}"
    with record(upstream, tmp_path) as recording:
        live = _call(
            AzureOpenAIAdapter(
                base_url=recording.base_url,
                wire="responses",
                credential=Credential(),
                environ={},
            )
        )
    (request,) = server.requests
    assert request.path == f"/gw/openai/v1/responses?subscription-key={SUBSCRIPTION}"
    assert request.header("authorization") == f"Bearer {TOKEN}"
    _, text = _recorded(tmp_path)
    assert TOKEN not in text
    assert SUBSCRIPTION not in text
    assert live[-1].reason.kind == "stop"
