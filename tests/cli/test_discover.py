"""``server_model`` (dsh_llm.cli.discover): the CLI's ``GET <base_url>/models``
is bounded as a whole (a dripping server), capped in size, sends the key as a
bearer token and never shows it. In process, against loopback servers; the
whole-command paths are in test_cli_session.py and test_cli_errors.py."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from dsh_llm.cli import discover
from dsh_llm.cli.discover import DiscoveryError
from dsh_llm.cli.discover import server_model
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply
from dsh_llm.transport.fetch import MAX_BODY_BYTES

KEY = "sk-discover-0123456789abcdef"


def _json(body: bytes | tuple[bytes, ...], **fields: Any) -> Reply:
    return Reply(headers={"content-type": "application/json"}, body=body, **fields)


def _discovered(server: LoopbackServer, **environ: str) -> str:
    return server_model(
        f"{server.url}/v1",
        api_key_env="MY_KEY" if environ else None,
        environ=environ,
    )


def test_the_one_model_is_chosen_and_the_key_sent_as_bearer(server):
    server.enqueue(_json(b'{"data": [{"id": "qwen3-8b"}]}'))
    assert _discovered(server, MY_KEY=KEY) == "qwen3-8b"
    (request,) = server.requests
    assert (request.method, request.path) == ("GET", "/v1/models")
    assert request.header("authorization") == f"Bearer {KEY}"


def test_a_dripping_model_list_ends_at_the_deadline(server, monkeypatch):
    monkeypatch.setattr(discover, "MODELS_TIMEOUT_S", 1.0)
    # 400 bytes at one every 50 ms: 20 s, each read well inside any read bound.
    server.enqueue(_json(b" " * 400, split=1, write_delay=0.05, framing="length"))
    started = time.monotonic()
    with pytest.raises(DiscoveryError) as caught:
        _discovered(server)
    elapsed = time.monotonic() - started
    assert str(caught.value) == (
        f"cannot list the server's models (Server API request to {server.url}"
        "/v1/models timed out after 1000ms); pass --model NAME"
    )
    assert 1.0 <= elapsed < 4.0


def test_a_model_list_over_the_size_cap_is_refused(server):
    piece = b" " * 65536
    server.enqueue(_json((b'{"data": [', *(piece,) * (MAX_BODY_BYTES // 65536 + 16))))
    with pytest.raises(DiscoveryError) as caught:
        _discovered(server)
    assert str(caught.value) == (
        f"cannot list the server's models (Server API answer from {server.url}"
        f"/v1/models is larger than the {MAX_BODY_BYTES}-byte cap); "
        "pass --model NAME"
    )


def test_an_http_error_names_the_status_never_the_key(server):
    body = json.dumps({"error": {"message": f"bad key {KEY}"}}).encode()
    server.enqueue(_json(body, status=401, reason="Unauthorized"))
    with pytest.raises(DiscoveryError) as caught:
        _discovered(server, MY_KEY=KEY)
    assert str(caught.value) == (
        f"{server.url}/v1/models answered HTTP 401; pass --model NAME"
    )


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b"not json", "did not answer a model list"),
        (b"[" * 100_000, "did not answer a model list"),
        (b'{"data": []}', "lists no models"),
    ],
)
def test_an_answer_without_one_model_says_to_pass_model(server, body, said):
    server.enqueue(_json(body))
    with pytest.raises(DiscoveryError) as caught:
        _discovered(server)
    assert str(caught.value) == f"{server.url}/v1/models {said}; pass --model NAME"


def test_url_credentials_are_not_shown(server):
    server.enqueue(_json(b"[]"))
    host = server.url.removeprefix("http://")
    with pytest.raises(DiscoveryError) as caught:
        server_model(f"http://me:hunter2secret@{host}/v1", api_key_env=None, environ={})
    assert "hunter2secret" not in str(caught.value)
    assert f"http://***@{host}/v1/models" in str(caught.value)
