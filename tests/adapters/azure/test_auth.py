"""Azure OpenAI auth: the API key in ``api-key`` (read per request), or a
Microsoft Entra ID token through azure-identity, reused until it nears expiry
and fetched again then; a real ``DefaultAzureCredential`` against a loopback
managed-identity endpoint; the missing cases as ``MISSING_CREDENTIAL``; no key
or token in a log, an error or a repr; the core never imports azure-identity."""

from __future__ import annotations

import base64
import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from typing import NamedTuple

import pytest

from dsh_llm.adapters import AdapterConfigError
from dsh_llm.adapters.azure import PROVIDER_ROUTE
from dsh_llm.adapters.azure import AzureOpenAIAdapter
from dsh_llm.adapters.azure.auth import DEFAULT_SCOPE
from dsh_llm.adapters.azure.auth import REFRESH_MARGIN_S
from dsh_llm.adapters.azure.auth import EntraIdTokens
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import create_user_message
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply
from dsh_llm.validator import validate_stream

from .replay import body

ROOT = Path(__file__).resolve().parents[3]
KEY = "azure-key-0123456789abcdef0123"


def _jwt(subject: str) -> str:
    """A token shaped like Entra ID's (three base64url parts), so azure-identity
    can read its claims as it does a real one."""

    def part(value: dict[str, Any]) -> str:
        raw = json.dumps(value).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    claims = {"oid": subject, "tid": "tenant", "appid": "app", "upn": "user@x"}
    return f"{part({'alg': 'none'})}.{part(claims)}.c2lnbmF0dXJlLXNlY3JldA"


TOKEN_A = _jwt("a")
TOKEN_B = _jwt("b")


class AccessToken(NamedTuple):
    """azure-core's ``AccessToken`` shape (token, expires_on)."""

    token: str
    expires_on: int


class Credential:
    """A ``TokenCredential`` double standing for Azure: hands out the tokens it
    was given, in order, recording each request's scopes."""

    def __init__(self, *tokens: tuple[str, float]) -> None:
        self.tokens = list(tokens)
        self.scopes: list[tuple[str, ...]] = []
        self.fail: BaseException | None = None

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        self.scopes.append(scopes)
        if self.fail is not None:
            raise self.fail
        token, expires_on = self.tokens.pop(0)
        return AccessToken(token, int(expires_on))


def _adapter(server: LoopbackServer, **options: Any) -> AzureOpenAIAdapter:
    options.setdefault("environ", {})
    return AzureOpenAIAdapter(base_url=server.url, **options)


def _stream(adapter: AzureOpenAIAdapter) -> list[Any]:
    options = GenerateOptions(
        provider=PROVIDER_ROUTE, model="dep", messages=(create_user_message("hi"),)
    )
    return list(validate_stream(adapter.stream(options), strict=True))


def _failure(adapter: AzureOpenAIAdapter) -> LlmError:
    with pytest.raises(LlmError) as caught:
        _stream(adapter)
    return caught.value


def _ok() -> Reply:
    return Reply(body=body("chat_prompt_filter_results_first"))


# --- the API key --------------------------------------------------------------------


def test_the_api_key_travels_in_api_key_read_at_each_request(
    server: LoopbackServer,
) -> None:
    environ = {"AZURE_OPENAI_API_KEY": KEY}
    server.enqueue(_ok())
    server.enqueue(_ok())
    with _adapter(server, environ=environ) as adapter:
        _stream(adapter)
        environ["AZURE_OPENAI_API_KEY"] = KEY + "-rotated"
        _stream(adapter)
    first, second = server.requests
    assert first.header("api-key") == KEY
    assert second.header("api-key") == KEY + "-rotated"
    assert first.header("authorization") is None


def test_auth_api_key_without_a_key_names_the_variable(server: LoopbackServer) -> None:
    with _adapter(server, auth="api-key") as adapter:
        error = _failure(adapter)
    assert error.code == ErrorCode.MISSING_CREDENTIAL
    assert "AZURE_OPENAI_API_KEY" in str(error)
    assert '"azure"' in str(error)
    assert server.requests == ()


def test_an_explicit_key_is_sent_and_hidden_from_the_repr(
    server: LoopbackServer,
) -> None:
    server.enqueue(_ok())
    with _adapter(server, api_key=KEY) as adapter:
        _stream(adapter)
        shown = repr(adapter)
    assert server.requests[0].header("api-key") == KEY
    assert KEY not in shown
    assert "api_key=***" in shown


# --- Entra ID tokens ----------------------------------------------------------------


def test_without_a_key_a_token_of_the_given_credential_is_sent(
    server: LoopbackServer,
) -> None:
    credential = Credential((TOKEN_A, time.time() + 3600))
    server.enqueue(_ok())
    server.enqueue(_ok())
    with _adapter(server, credential=credential) as adapter:
        _stream(adapter)
        _stream(adapter)
        shown = repr(adapter)
    first, second = server.requests
    assert first.header("authorization") == f"Bearer {TOKEN_A}"
    assert second.header("authorization") == f"Bearer {TOKEN_A}"
    assert first.header("api-key") is None
    assert credential.scopes == [(DEFAULT_SCOPE,)]
    assert TOKEN_A not in shown
    assert "auth='entra-id'" in shown


def test_a_token_near_its_expiry_is_fetched_again(server: LoopbackServer) -> None:
    soon = time.time() + REFRESH_MARGIN_S / 2
    credential = Credential((TOKEN_A, soon), (TOKEN_B, time.time() + 3600))
    server.enqueue(_ok())
    server.enqueue(_ok())
    with _adapter(server, credential=credential) as adapter:
        _stream(adapter)
        _stream(adapter)
    first, second = server.requests
    assert first.header("authorization") == f"Bearer {TOKEN_A}"
    assert second.header("authorization") == f"Bearer {TOKEN_B}"
    assert len(credential.scopes) == 2


def test_a_credential_given_wins_over_a_key_in_the_environment(
    server: LoopbackServer,
) -> None:
    credential = Credential((TOKEN_A, time.time() + 3600))
    server.enqueue(_ok())
    with _adapter(
        server, credential=credential, environ={"AZURE_OPENAI_API_KEY": KEY}
    ) as adapter:
        _stream(adapter)
    (request,) = server.requests
    assert request.header("authorization") == f"Bearer {TOKEN_A}"
    assert request.header("api-key") is None


def test_the_token_scope_is_configurable(server: LoopbackServer) -> None:
    scope = "https://cognitiveservices.azure.us/.default"
    credential = Credential((TOKEN_A, time.time() + 3600))
    server.enqueue(_ok())
    with _adapter(server, credential=credential, token_scope=scope) as adapter:
        _stream(adapter)
    assert credential.scopes == [(scope,)]


def test_a_credential_that_fails_is_missing_credential_before_any_io(
    server: LoopbackServer,
) -> None:
    credential = Credential()
    credential.fail = RuntimeError("no identity here")
    with _adapter(server, credential=credential, auth="entra-id") as adapter:
        error = _failure(adapter)
    assert error.code == ErrorCode.MISSING_CREDENTIAL
    assert "RuntimeError" in str(error)
    assert "Entra ID" in str(error)
    assert server.requests == ()


def test_a_token_the_server_echoes_is_redacted(server: LoopbackServer) -> None:
    credential = Credential((TOKEN_A, time.time() + 3600))
    server.enqueue(
        Reply(
            status=401,
            headers={"content-type": "application/json"},
            body=json.dumps(
                {"error": {"code": "401", "message": f"token {TOKEN_A} expired"}}
            ).encode(),
            framing="length",
        )
    )
    with _adapter(server, credential=credential) as adapter:
        error = _failure(adapter)
    assert error.code == ErrorCode.AUTH
    assert TOKEN_A not in str(error)
    assert TOKEN_A not in repr(error.__cause__)


@pytest.mark.parametrize(
    ("options", "key"),
    [
        ({"api_key": KEY, "credential": Credential()}, "apiKey"),
        ({"auth": "api-key", "credential": Credential()}, "auth"),
        ({"api_key": KEY, "auth": "entra-id"}, "apiKey"),
    ],
)
def test_a_credential_given_two_ways_is_refused(
    server: LoopbackServer, options: dict[str, Any], key: str
) -> None:
    with pytest.raises(AdapterConfigError) as caught:
        _adapter(server, **options)
    assert caught.value.key == key
    assert KEY not in str(caught.value)


def test_a_credential_without_get_token_is_a_type_error(
    server: LoopbackServer,
) -> None:
    with pytest.raises(TypeError, match="TokenCredential"):
        _adapter(server, credential="not a credential")


# --- the token source -----------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_a_token_is_kept_until_the_refresh_margin() -> None:
    clock = Clock()
    credential = Credential((TOKEN_A, clock.now + 1000), (TOKEN_B, clock.now + 5000))
    tokens = EntraIdTokens(credential, package="llm-azure", clock=clock)
    assert tokens.token().reveal() == TOKEN_A
    clock.now += 1000 - REFRESH_MARGIN_S - 1
    assert tokens.token().reveal() == TOKEN_A
    clock.now += 1
    assert tokens.token().reveal() == TOKEN_B
    assert len(credential.scopes) == 2


def test_a_failed_refresh_keeps_a_token_still_valid_and_fails_once_expired() -> None:
    clock = Clock()
    credential = Credential((TOKEN_A, clock.now + 400))
    tokens = EntraIdTokens(
        credential, package="llm-azure", key_hint=", or export X", clock=clock
    )
    assert tokens.token().reveal() == TOKEN_A
    credential.fail = OSError("identity endpoint down")
    clock.now += 200  # inside the margin: a refresh is tried, and fails
    assert tokens.token().reveal() == TOKEN_A
    clock.now += 200  # expired
    with pytest.raises(LlmError) as caught:
        tokens.token()
    assert caught.value.code == ErrorCode.MISSING_CREDENTIAL
    assert str(caught.value).endswith(", or export X")
    assert TOKEN_A not in str(caught.value)


@pytest.mark.parametrize(
    "answer",
    [None, AccessToken("", 10**10), ("tuple-token", 10**10), AccessToken("t", 0.0)],
    ids=["none", "empty", "tuple", "float-zero-ok"],
)
def test_what_a_credential_returns_is_checked(answer: Any) -> None:
    class Odd:
        def get_token(self, *scopes: str) -> Any:
            return answer

    tokens = EntraIdTokens(Odd(), package="llm-azure")
    if isinstance(answer, AccessToken) and answer.token:
        assert tokens.token().reveal() == answer.token
        return
    with pytest.raises(LlmError) as caught:
        tokens.token()
    assert caught.value.code == ErrorCode.MISSING_CREDENTIAL


def test_concurrent_requests_share_one_fetch() -> None:
    release = threading.Event()
    entered = threading.Event()
    calls: list[int] = []

    class Slow:
        def get_token(self, *scopes: str) -> AccessToken:
            calls.append(1)
            entered.set()
            assert release.wait(30)
            return AccessToken(TOKEN_A, int(time.time()) + 3600)

    tokens = EntraIdTokens(Slow(), package="llm-azure")
    got: list[str] = []
    threads = [
        threading.Thread(target=lambda: got.append(tokens.token().reveal()))
        for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    assert entered.wait(30)
    release.set()
    for thread in threads:
        thread.join(30)
    assert got == [TOKEN_A] * 8
    assert calls == [1]


def test_the_repr_of_a_token_source_shows_no_token() -> None:
    tokens = EntraIdTokens(
        Credential((TOKEN_A, time.time() + 3600)), package="llm-azure"
    )
    tokens.token()
    assert TOKEN_A not in repr(tokens)
    assert "Credential" in repr(tokens)


# --- azure-identity -------------------------------------------------------------------


def test_without_azure_identity_the_error_names_the_extra_and_the_key(
    server: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "azure.identity", None)
    with _adapter(server) as adapter:
        error = _failure(adapter)
    assert error.code == ErrorCode.MISSING_CREDENTIAL
    assert "pip install 'dsh-llm[azure]'" in str(error)
    assert "AZURE_OPENAI_API_KEY" in str(error)
    assert server.requests == ()


@pytest.fixture
def identity_endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopbackServer]:
    """A loopback App Service managed-identity endpoint, the only source
    ``DefaultAzureCredential`` may use (nothing of the machine's own)."""
    pytest.importorskip("azure.identity")
    for name in list(os.environ):
        if name.startswith(("AZURE_", "MSI_", "IDENTITY_")):
            monkeypatch.delenv(name)
    with LoopbackServer() as srv:
        monkeypatch.setenv("IDENTITY_ENDPOINT", f"{srv.url}/msi/token")
        monkeypatch.setenv("IDENTITY_HEADER", "identity-header-value")
        monkeypatch.setenv("AZURE_TOKEN_CREDENTIALS", "ManagedIdentityCredential")
        yield srv
        assert srv.wait_until_idle(), (
            "a connection to the identity endpoint was left open"
        )


def _token_reply(token: str, expires_in: float) -> Reply:
    answer = {
        "access_token": token,
        "expires_on": str(int(time.time() + expires_in)),
        "resource": "https://cognitiveservices.azure.com",
        "token_type": "Bearer",
    }
    return Reply(
        headers={"content-type": "application/json"},
        body=json.dumps(answer).encode(),
        framing="length",
    )


def test_default_azure_credential_gets_the_token_and_logs_none_of_it(
    server: LoopbackServer,
    identity_endpoint: LoopbackServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    identity_endpoint.enqueue(_token_reply(TOKEN_A, 3600))
    server.enqueue(_ok())
    server.enqueue(_ok())
    caplog.set_level(logging.DEBUG)
    with _adapter(server) as adapter:
        _stream(adapter)
        _stream(adapter)
        shown = repr(adapter)
    first, second = server.requests
    assert first.header("authorization") == f"Bearer {TOKEN_A}"
    assert second.header("authorization") == f"Bearer {TOKEN_A}"
    (asked,) = identity_endpoint.requests
    assert asked.path.startswith("/msi/token?")
    assert "resource=https://cognitiveservices.azure.com" in asked.path
    assert asked.header("x-identity-header") == "identity-header-value"
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "DefaultAzureCredential" in logged  # azure-identity did log, at DEBUG
    assert TOKEN_A not in logged
    assert TOKEN_A.rsplit(".", 1)[-1] not in logged
    assert TOKEN_A not in shown


def test_a_closed_adapter_makes_a_new_credential_when_used_again(
    server: LoopbackServer, identity_endpoint: LoopbackServer
) -> None:
    # The first token is due for refresh at once, so the second call needs one.
    identity_endpoint.enqueue(_token_reply(TOKEN_A, REFRESH_MARGIN_S / 2))
    identity_endpoint.enqueue(_token_reply(TOKEN_B, 3600))
    server.enqueue(_ok())
    server.enqueue(_ok())
    adapter = _adapter(server)
    _stream(adapter)
    adapter.close()
    _stream(adapter)
    adapter.close()
    first, second = server.requests
    assert first.header("authorization") == f"Bearer {TOKEN_A}"
    assert second.header("authorization") == f"Bearer {TOKEN_B}"
    assert len(identity_endpoint.requests) == 2


def test_no_managed_identity_is_missing_credential_naming_the_key(
    server: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("azure.identity")
    for name in list(os.environ):
        if name.startswith(("AZURE_", "MSI_", "IDENTITY_")):
            monkeypatch.delenv(name)
    # Only the environment's service principal may answer, and none is set.
    monkeypatch.setenv("AZURE_TOKEN_CREDENTIALS", "EnvironmentCredential")
    with _adapter(server) as adapter:
        error = _failure(adapter)
    assert error.code == ErrorCode.MISSING_CREDENTIAL
    assert "AZURE_OPENAI_API_KEY" in str(error)
    assert server.requests == ()


SCRIPT = """
import importlib, json, pkgutil, sys
import dsh_llm
for info in pkgutil.walk_packages(dsh_llm.__path__, "dsh_llm."):
    if info.name not in ("dsh_llm.observe.otel", "dsh_llm.__main__"):
        importlib.import_module(info.name)
from dsh_llm.adapters.azure import AzureOpenAIAdapter
from dsh_llm.protocol import GenerateOptions, create_user_message
from dsh_llm.testing import LoopbackServer, Reply
from tests.adapters.azure.replay import body
with LoopbackServer() as srv:
    srv.enqueue(Reply(body=body("chat_prompt_filter_results_first")))
    environ = {"AZURE_OPENAI_API_KEY": "k" * 24}
    with AzureOpenAIAdapter(base_url=srv.url, environ=environ) as a:
        a.resolve_model("azure", "dep")
        options = GenerateOptions(provider="azure", model="dep",
                                  messages=(create_user_message("hi"),))
        chunks = list(a.stream(options))
loaded = sorted(m for m in sys.modules if m.split(".")[0] == "azure")
print(json.dumps({"chunks": len(chunks), "azure": loaded}))
"""


def test_the_core_and_an_api_key_call_never_import_azure_identity() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=ROOT,
    )
    report = json.loads(result.stdout)
    assert report["chunks"] > 2
    assert report["azure"] == []
