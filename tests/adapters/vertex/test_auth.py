"""Google credentials on Vertex AI requests: Application Default Credentials
through google-auth, with a service account key made in the test and a
loopback token endpoint that checks its signed assertion (the real refresh,
offline); tokens refreshed before they expire; a caller's own token; the
missing cases as stable codes before any request; no token in a log, an
error, a repr or a cassette; the core install never importing google-auth."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh_llm.adapters import AdapterConfigError
from dsh_llm.adapters.vertex import PROVIDER_ROUTE
from dsh_llm.adapters.vertex import VertexAdapter
from dsh_llm.adapters.vertex.auth import AccessTokenAuth
from dsh_llm.adapters.vertex.auth import GoogleCredentials
from dsh_llm.credentials import Secret
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import create_user_message
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply
from dsh_llm.testing import sse_event
from dsh_llm.testing.cassette import BodyRead
from dsh_llm.testing.cassette import Cassette
from dsh_llm.testing.cassette import CassetteRequest
from dsh_llm.testing.cassette import CassetteResponse
from dsh_llm.testing.cassette import redact_exchange
from dsh_llm.validator import validate_stream

pytest.importorskip("google.auth")

from .google import PROJECT
from .google import ServiceAccount
from .google import isolate_google
from .google import token_error

ROOT = Path(__file__).resolve().parents[3]
MODEL = "gemini-3-flash-preview"
GEMINI_PATH = (
    f"/v1/projects/{PROJECT}/locations/us-central1/publishers/google/models/"
    f"{MODEL}:streamGenerateContent?alt=sse"
)
STOP = {
    "candidates": [
        {
            "content": {"parts": [{"text": "ok"}], "role": "model"},
            "finishReason": "STOP",
        }
    ],
    "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 1},
}


@pytest.fixture
def account() -> ServiceAccount:
    return ServiceAccount()


@pytest.fixture
def tokens(account: ServiceAccount) -> Iterator[LoopbackServer]:
    with LoopbackServer(handler=account.handler) as srv:
        yield srv
        assert srv.wait_until_idle(), "a token endpoint connection was left open"


@pytest.fixture
def key_file(
    account: ServiceAccount,
    tokens: LoopbackServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Path:
    """A service account key file, named by GOOGLE_APPLICATION_CREDENTIALS."""
    path = account.write(tmp_path / "key.json", f"{tokens.url}/token")
    isolate_google(monkeypatch, tmp_path, GOOGLE_APPLICATION_CREDENTIALS=str(path))
    return path


def _adapter(server: LoopbackServer, **options: Any) -> VertexAdapter:
    options.setdefault("environ", {})
    options.setdefault("location", "us-central1")
    return VertexAdapter(base_url=server.url, **options)


def _options(**fields: Any) -> GenerateOptions:
    fields.setdefault("messages", (create_user_message("hi"),))
    fields.setdefault("model", MODEL)
    return GenerateOptions(provider=PROVIDER_ROUTE, **fields)


def _stream(adapter: VertexAdapter, **fields: Any) -> list[Any]:
    return list(validate_stream(adapter.stream(_options(**fields)), strict=True))


def _reply() -> Reply:
    return Reply(body=(sse_event(STOP),))


def _failure(adapter: VertexAdapter) -> LlmError:
    with pytest.raises(LlmError) as caught:
        _stream(adapter)
    return caught.value


# --- Application Default Credentials --------------------------------------------------


def test_adc_from_a_service_account_key_signs_in_and_names_the_project(
    server: LoopbackServer,
    tokens: LoopbackServer,
    account: ServiceAccount,
    key_file: Path,
) -> None:
    server.enqueue(_reply())
    with _adapter(server) as adapter:
        chunks = _stream(adapter)
    assert chunks[-1].reason.kind == "stop"
    (grant,) = tokens.requests
    assert grant.path == "/token"
    assert len(account.claims) == 1  # the assertion verified
    (request,) = server.requests
    assert request.path == GEMINI_PATH  # the project is the key file's
    assert request.header("authorization") == f"Bearer {account.issued[0]}"
    assert request.header("x-goog-api-key") is None
    assert request.header("x-goog-user-project") is None


def test_a_fresh_token_is_reused_until_it_nears_expiry(
    server: LoopbackServer,
    tokens: LoopbackServer,
    account: ServiceAccount,
    key_file: Path,
) -> None:
    server.enqueue(_reply())
    server.enqueue(_reply())
    with _adapter(server) as adapter:
        _stream(adapter)
        _stream(adapter)
    assert len(tokens.requests) == 1
    sent = {request.header("authorization") for request in server.requests}
    assert sent == {f"Bearer {account.issued[0]}"}


def test_a_token_within_the_refresh_threshold_is_refreshed_before_the_next_request(
    server: LoopbackServer,
    tokens: LoopbackServer,
    account: ServiceAccount,
    key_file: Path,
) -> None:
    # Tokens that live 60 s are always inside google-auth's refresh threshold
    # (3 min 45 s): each request must get a new one, never the old one.
    account.expires_in = 60
    server.enqueue(_reply())
    server.enqueue(_reply())
    with _adapter(server) as adapter:
        _stream(adapter)
        _stream(adapter)
    assert len(account.issued) == 2
    assert [request.header("authorization") for request in server.requests] == [
        f"Bearer {token}" for token in account.issued
    ]


def test_concurrent_first_requests_refresh_once(
    server: LoopbackServer,
    tokens: LoopbackServer,
    account: ServiceAccount,
    key_file: Path,
) -> None:
    for _ in range(4):
        server.enqueue(_reply())
    errors: list[BaseException] = []
    with _adapter(server) as adapter:

        def run() -> None:
            try:
                _stream(adapter)
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=run) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    assert errors == []
    assert len(account.issued) == 1
    assert len(server.requests) == 4


def test_a_configured_credentials_file_is_used_without_the_environment(
    server: LoopbackServer,
    tokens: LoopbackServer,
    account: ServiceAccount,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    isolate_google(monkeypatch, tmp_path)
    path = account.write(tmp_path / "own.json", f"{tokens.url}/token")
    server.enqueue(_reply())
    with _adapter(server, credentials_file=str(path), project="mine") as adapter:
        _stream(adapter)
    (request,) = server.requests
    assert request.path.startswith("/v1/projects/mine/locations/us-central1/")
    assert request.header("authorization") == f"Bearer {account.issued[0]}"


def test_credentials_with_a_quota_project_send_it(
    server: LoopbackServer,
    tokens: LoopbackServer,
    account: ServiceAccount,
    key_file: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Vertex bills the quota project the credentials name (x-goog-user-project);
    # google-auth gives ADC the one GOOGLE_CLOUD_QUOTA_PROJECT names.
    monkeypatch.setenv("GOOGLE_CLOUD_QUOTA_PROJECT", "billing-project")
    server.enqueue(_reply())
    with _adapter(server) as adapter:
        _stream(adapter)
    (request,) = server.requests
    assert request.header("authorization") == f"Bearer {account.issued[0]}"
    assert request.header("x-goog-user-project") == "billing-project"


# --- the caller's own token -----------------------------------------------------------


def test_an_explicit_token_is_sent_and_no_credentials_are_loaded(
    server: LoopbackServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate_google(monkeypatch, tmp_path)  # no credentials anywhere
    server.enqueue(_reply())
    with _adapter(server, api_key="ya29.explicit-0123456789", project="p") as a:
        _stream(a)
    (request,) = server.requests
    assert request.header("authorization") == "Bearer ya29.explicit-0123456789"


def test_the_token_variable_wins_over_the_credentials(
    server: LoopbackServer,
    tokens: LoopbackServer,
    account: ServiceAccount,
    key_file: Path,
) -> None:
    server.enqueue(_reply())
    environ = {"GOOGLE_OAUTH_ACCESS_TOKEN": "ya29.from-env-0123456789"}
    with _adapter(server, environ=environ, project="p") as adapter:
        _stream(adapter)
    assert tokens.requests == ()
    assert server.requests[0].header("authorization") == (
        "Bearer ya29.from-env-0123456789"
    )


def test_an_explicit_token_without_a_project_is_a_config_error() -> None:
    with pytest.raises(AdapterConfigError) as caught:
        VertexAdapter("ya29.explicit-0123456789", environ={})
    assert caught.value.key == "project"
    assert "GOOGLE_CLOUD_PROJECT" in str(caught.value)
    assert "ya29" not in str(caught.value)


def test_a_token_variable_without_a_project_fails_before_any_request(
    server: LoopbackServer,
) -> None:
    environ = {"GOOGLE_OAUTH_ACCESS_TOKEN": "ya29.from-env-0123456789"}
    with _adapter(server, environ=environ) as adapter:
        error = _failure(adapter)
    assert error.code == ErrorCode.MISSING_CREDENTIAL
    assert "no Google Cloud project" in error.message
    assert server.requests == ()


# --- what is missing or refused -------------------------------------------------------


def test_no_credentials_anywhere_is_missing_credential_before_any_request(
    server: LoopbackServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate_google(monkeypatch, tmp_path)
    with _adapter(server, project="p") as adapter:
        error = _failure(adapter)
    assert error.code == ErrorCode.MISSING_CREDENTIAL
    assert error.message.startswith("llm-vertex: found no Google credentials")
    assert "gcloud auth application-default login" in error.message
    assert "GOOGLE_OAUTH_ACCESS_TOKEN" in error.message
    assert server.requests == ()


def test_a_missing_credentials_file_is_missing_credential(
    server: LoopbackServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate_google(monkeypatch, tmp_path)
    missing = str(tmp_path / "nowhere.json")
    with _adapter(server, project="p", credentials_file=missing) as adapter:
        error = _failure(adapter)
    assert error.code == ErrorCode.MISSING_CREDENTIAL
    assert "could not load the credentials file" in error.message
    assert "nowhere.json" in error.message


def test_credentials_naming_no_project_and_none_configured(
    server: LoopbackServer,
    tokens: LoopbackServer,
    account: ServiceAccount,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    isolate_google(monkeypatch, tmp_path)
    path = account.write(tmp_path / "key.json", f"{tokens.url}/token", project_id=None)
    with _adapter(server, credentials_file=str(path)) as adapter:
        error = _failure(adapter)
    assert error.code == ErrorCode.MISSING_CREDENTIAL
    assert "the Google credentials name none" in error.message
    assert "GOOGLE_CLOUD_PROJECT" in error.message
    assert server.requests == ()


def test_a_refused_refresh_is_auth_before_any_request(
    server: LoopbackServer,
    tokens: LoopbackServer,
    account: ServiceAccount,
    key_file: Path,
) -> None:
    account.answer = token_error(400, "invalid_grant", "Invalid JWT Signature.")
    with _adapter(server) as adapter:
        error = _failure(adapter)
    assert error.code == ErrorCode.AUTH
    assert "refused to refresh" in error.message
    assert "invalid_grant" in error.message
    assert server.requests == ()


def test_a_token_answer_that_is_not_json_is_malformed(
    server: LoopbackServer,
    tokens: LoopbackServer,
    account: ServiceAccount,
    key_file: Path,
) -> None:
    account.answer = Reply(
        headers={"content-type": "text/html"},
        body=b"<html>captive portal</html>",
        framing="length",
    )
    with _adapter(server) as adapter:
        error = _failure(adapter)
    assert error.code == ErrorCode.MALFORMED_RESPONSE
    assert "not a token" in error.message
    assert server.requests == ()


def test_an_unreachable_token_endpoint_is_transport(
    server: LoopbackServer,
    account: ServiceAccount,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with LoopbackServer() as gone:
        dead = f"{gone.url}/token"
    path = account.write(tmp_path / "key.json", dead)
    isolate_google(monkeypatch, tmp_path)
    with _adapter(server, credentials_file=str(path)) as adapter:
        error = _failure(adapter)
    assert error.code == ErrorCode.TRANSPORT
    assert "could not reach the Google token endpoint" in error.message
    assert server.requests == ()


# --- secrecy --------------------------------------------------------------------------


def test_no_token_reaches_a_log_a_repr_or_a_cassette(
    server: LoopbackServer,
    tokens: LoopbackServer,
    account: ServiceAccount,
    key_file: Path,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
) -> None:
    caplog.set_level(logging.DEBUG)
    server.enqueue(_reply())
    with _adapter(server) as adapter:
        _stream(adapter)
        shown = repr(adapter)
    (token,) = account.issued
    assert "urllib3" in caplog.text  # the requests were logged
    assert token not in caplog.text
    assert token not in shown
    assert account.pem.splitlines()[1] not in caplog.text
    auth = AccessTokenAuth(Secret(token), {"x-goog-user-project": "q"})
    assert token not in repr(auth)
    assert auth.secret.reveal() == token
    (request,) = server.requests
    cassette = Cassette(
        request=CassetteRequest(
            method=request.method,
            url=server.url + request.path,
            headers=request.headers,
            body=request.body,
        ),
        response=CassetteResponse(
            status=200,
            headers=(("content-type", "text/event-stream"),),
            reads=(BodyRead(at_ms=1.0, data=sse_event(STOP)),),
        ),
    )
    path = tmp_path / "vertex.jsonl"
    redact_exchange(cassette).dump(path)
    assert token not in path.read_text(encoding="utf-8")
    assert dict(Cassette.load(path).request.headers)["authorization"] == "***"


def test_an_echoed_token_is_redacted_from_an_error(
    server: LoopbackServer,
    tokens: LoopbackServer,
    account: ServiceAccount,
    key_file: Path,
) -> None:
    def echo(request: Any) -> Reply:
        sent = request.header("authorization") or ""
        return Reply(
            status=401,
            headers={"content-type": "application/json"},
            body=json.dumps(
                {
                    "error": {
                        "code": 401,
                        "status": "UNAUTHENTICATED",
                        "message": f"Request had invalid credentials: {sent}",
                    }
                }
            ).encode(),
            framing="length",
        )

    server.handler = echo
    with _adapter(server) as adapter:
        error = _failure(adapter)
    (token,) = account.issued
    assert error.code == ErrorCode.AUTH
    assert token not in error.message
    assert "***" in error.message
    assert token not in repr(error.__cause__)


def test_the_credentials_repr_names_only_the_file() -> None:
    credentials = GoogleCredentials("/k.json", package="llm-vertex", token_env="T")
    assert repr(credentials) == "GoogleCredentials(credentials_file='/k.json')"


# --- the core install -----------------------------------------------------------------

_WITHOUT_GOOGLE_AUTH = """
import sys
sys.modules["google"] = None  # an import of google.auth now fails
from dsh_llm.adapters.vertex import VertexAdapter
from dsh_llm.errors import LlmError
from dsh_llm.protocol import GenerateOptions, create_user_message
adapter = VertexAdapter(project="p", environ={})
messages = (create_user_message("hi"),)
options = GenerateOptions(model="gemini-2.5-flash", messages=messages)
try:
    list(adapter.stream(options))
except LlmError as error:
    print(error.code, error.message)
"""


def test_without_google_auth_the_credentials_name_the_extra() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _WITHOUT_GOOGLE_AUTH],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
    )
    assert result.stdout.startswith("MISSING_CREDENTIAL ")
    assert "pip install 'dsh-llm[vertex]'" in result.stdout
    assert "GOOGLE_OAUTH_ACCESS_TOKEN" in result.stdout


_CORE = """
import importlib, json, pkgutil, sys
import dsh_llm
names = [
    info.name
    for info in pkgutil.walk_packages(dsh_llm.__path__, "dsh_llm.")
    if info.name not in ("dsh_llm.observe.otel", "dsh_llm.__main__")
]
for name in names:
    importlib.import_module(name)
from dsh_llm.adapters.vertex import VertexAdapter
adapter = VertexAdapter("ya29.token-0123456789", project="p", environ={})
adapter.resolve_model("vertex", "claude-haiku-4-5@20251001")
adapter.list_models("vertex")
repr(adapter)
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "google")))
"""


def test_the_core_and_a_token_adapter_never_import_google_auth() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _CORE],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
    )
    assert json.loads(result.stdout) == []
