"""SigV4 signing through botocore and the AWS credential chain: a signed request
verified on the server side from the AWS specification, temporary credentials
refreshed between requests, the missing cases as ``MISSING_CREDENTIAL``, and no
signature or token in a log, an error, a repr or a cassette. botocore's
credential chain reads the process environment: each test isolates it
(``aws.isolate_aws``), the instance metadata service off."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh_llm.adapters.bedrock import PROVIDER_ROUTE
from dsh_llm.adapters.bedrock import BedrockAdapter
from dsh_llm.adapters.bedrock.auth import CredentialChain
from dsh_llm.adapters.bedrock.auth import SigV4Auth
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import create_user_message
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Reply
from dsh_llm.testing.cassette import BodyRead
from dsh_llm.testing.cassette import Cassette
from dsh_llm.testing.cassette import CassetteRequest
from dsh_llm.testing.cassette import CassetteResponse
from dsh_llm.testing.cassette import redact_exchange
from dsh_llm.validator import validate_stream

from .aws import ACCESS_KEY
from .aws import SECRET_KEY
from .aws import SESSION_TOKEN
from .aws import isolate_aws
from .aws import verify_sigv4
from .replay import MODEL
from .replay import fixture_body

pytest.importorskip("botocore")

ROOT = Path(__file__).resolve().parents[3]
EVENT_STREAM = "application/vnd.amazon.eventstream"
REGION = "us-west-2"


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:
        yield srv
        assert srv.wait_until_idle(), "a connection was left open"


def _adapter(server: LoopbackServer, **options: Any) -> BedrockAdapter:
    options.setdefault("environ", {})
    return BedrockAdapter(base_url=server.url, region=REGION, **options)


def _options(**fields: Any) -> GenerateOptions:
    fields.setdefault("messages", (create_user_message("hi"),))
    fields.setdefault("model", MODEL)
    return GenerateOptions(provider=PROVIDER_ROUTE, **fields)


def _stream(adapter: BedrockAdapter, **fields: Any) -> list[Any]:
    return list(validate_stream(adapter.stream(_options(**fields)), strict=True))


def _reply() -> Reply:
    return Reply(headers={"content-type": EVENT_STREAM}, body=fixture_body("text"))


def test_a_signed_request_verifies_on_the_server(
    server: LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    isolate_aws(
        monkeypatch,
        tmp_path,
        AWS_ACCESS_KEY_ID=ACCESS_KEY,
        AWS_SECRET_ACCESS_KEY=SECRET_KEY,
    )
    server.enqueue(_reply())
    arn = f"arn:aws:bedrock:{REGION}:123456789012:application-inference-profile/ab1"
    with _adapter(server) as adapter:
        chunks = _stream(
            adapter, model=arn, extra_headers={"x-amzn-bedrock-trace": "ENABLED"}
        )
    assert chunks[-1].reason.kind == "stop"
    (request,) = server.requests
    scope = verify_sigv4(request, SECRET_KEY, region=REGION)
    assert scope["access_key"] == ACCESS_KEY
    assert scope["signed_headers"] == [
        "content-type",
        "host",
        "x-amz-date",
        "x-amzn-bedrock-trace",
    ]
    assert request.header("x-amz-security-token") is None
    assert "%2F" in request.path
    assert "%3A" in request.path


def test_temporary_credentials_send_and_sign_their_session_token(
    server: LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    isolate_aws(
        monkeypatch,
        tmp_path,
        AWS_ACCESS_KEY_ID=ACCESS_KEY,
        AWS_SECRET_ACCESS_KEY=SECRET_KEY,
        AWS_SESSION_TOKEN=SESSION_TOKEN,
    )
    server.enqueue(_reply())
    with _adapter(server) as adapter:
        _stream(adapter)
    (request,) = server.requests
    assert request.header("x-amz-security-token") == SESSION_TOKEN
    assert (
        "x-amz-security-token"
        in verify_sigv4(request, SECRET_KEY, region=REGION)["signed_headers"]
    )


def test_a_bedrock_api_key_wins_over_the_credential_chain(
    server: LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    isolate_aws(
        monkeypatch,
        tmp_path,
        AWS_ACCESS_KEY_ID=ACCESS_KEY,
        AWS_SECRET_ACCESS_KEY=SECRET_KEY,
    )
    server.enqueue(_reply())
    with _adapter(
        server, environ={"AWS_BEARER_TOKEN_BEDROCK": "ABSK-k-0123456789"}
    ) as a:
        _stream(a)
    (request,) = server.requests
    assert request.header("authorization") == "Bearer ABSK-k-0123456789"
    assert request.header("x-amz-date") is None


_PROCESS = """\
import json, pathlib, sys, datetime
counter = pathlib.Path(sys.argv[1])
n = int(counter.read_text()) + 1 if counter.exists() else 1
counter.write_text(str(n))
expires = datetime.datetime.now(datetime.UTC) + datetime.timedelta(minutes=5)
print(json.dumps({
    "Version": 1,
    "AccessKeyId": f"AKIDPROCESS{n:08d}",
    "SecretAccessKey": f"secret-of-call-{n}-0123456789",
    "SessionToken": f"token-of-call-{n}-0123456789",
    "Expiration": expires.isoformat(),
}))
"""


def test_credentials_about_to_expire_are_refreshed_between_requests(
    server: LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A credential_process profile: botocore refreshes credentials that expire
    # within its mandatory window (10 minutes) before handing them out again.
    script = tmp_path / "creds.py"
    script.write_text(_PROCESS)
    counter = tmp_path / "calls"
    config = tmp_path / "config"
    config.write_text(
        f"[profile refresh]\ncredential_process = {sys.executable} {script} {counter}\n"
    )
    isolate_aws(monkeypatch, tmp_path)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    server.enqueue(_reply())
    server.enqueue(_reply())
    with _adapter(server, profile="refresh") as adapter:
        _stream(adapter)
        _stream(adapter)
    keys = []
    for request in server.requests:
        authorization = request.header("authorization") or ""
        key = authorization.split("Credential=")[1].split("/")[0]
        number = int(key[-8:])
        verify_sigv4(request, f"secret-of-call-{number}-0123456789", region=REGION)
        assert request.header("x-amz-security-token") == (
            f"token-of-call-{number}-0123456789"
        )
        keys.append(key)
    assert len(set(keys)) == 2, keys


def test_no_credentials_anywhere_is_missing_credential_before_any_request(
    server: LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    isolate_aws(monkeypatch, tmp_path)
    with _adapter(server) as adapter, pytest.raises(LlmError) as caught:
        _stream(adapter)
    assert caught.value.code == ErrorCode.MISSING_CREDENTIAL
    assert "found no AWS credentials" in caught.value.message
    assert "AWS_BEARER_TOKEN_BEDROCK" in caught.value.message
    assert server.requests == ()


def test_an_unknown_profile_is_missing_credential(
    server: LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    isolate_aws(monkeypatch, tmp_path)
    with (
        _adapter(server, profile="nowhere") as adapter,
        pytest.raises(LlmError) as caught,
    ):
        _stream(adapter)
    assert caught.value.code == ErrorCode.MISSING_CREDENTIAL
    assert "'nowhere'" in caught.value.message
    assert "ProfileNotFound" in caught.value.message


_WITHOUT_BOTOCORE = """
import sys
sys.modules["botocore"] = None  # an import of it now fails as if not installed
from dsh_llm.adapters.bedrock import BedrockAdapter
from dsh_llm.errors import LlmError
from dsh_llm.protocol import GenerateOptions, create_user_message
adapter = BedrockAdapter(region="us-east-1", environ={})
options = GenerateOptions(model="m", messages=(create_user_message("hi"),))
try:
    list(adapter.stream(options))
except LlmError as error:
    print(error.code, error.message)
"""


def test_without_botocore_signing_names_the_extra() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _WITHOUT_BOTOCORE],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
    )
    assert result.stdout.startswith("MISSING_CREDENTIAL ")
    assert "pip install 'dsh-llm[bedrock]'" in result.stdout
    assert "AWS_BEARER_TOKEN_BEDROCK" in result.stdout


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
from dsh_llm.adapters.bedrock import BedrockAdapter
adapter = BedrockAdapter("ABSK-key-0123456789", region="us-east-1")
adapter.resolve_model("bedrock", "us.anthropic.claude-haiku-4-5-20251001-v1:0")
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "botocore")))
"""


def test_the_core_and_a_bearer_adapter_never_import_botocore() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _CORE],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
    )
    assert json.loads(result.stdout) == []


# --- the signature stays secret ----------------------------------------------------


def test_no_signature_or_token_reaches_a_log_or_a_repr(
    server: LoopbackServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    isolate_aws(
        monkeypatch,
        tmp_path,
        AWS_ACCESS_KEY_ID=ACCESS_KEY,
        AWS_SECRET_ACCESS_KEY=SECRET_KEY,
        AWS_SESSION_TOKEN=SESSION_TOKEN,
    )
    server.enqueue(_reply())
    caplog.set_level(logging.DEBUG)
    with _adapter(server) as adapter:
        _stream(adapter)
        shown = repr(adapter)
    (request,) = server.requests
    signature = (request.header("authorization") or "").rpartition("Signature=")[2]
    assert len(signature) == 64
    logged = caplog.text
    assert "botocore" in logged  # botocore did log (its credential lookup)
    for secret in (signature, SESSION_TOKEN, SECRET_KEY):
        assert secret not in logged
        assert secret not in shown
    chain = CredentialChain(None, package="llm-bedrock", bearer_env="X")
    auth = SigV4Auth(chain.frozen(), region=REGION)
    assert repr(auth) == "SigV4Auth(region='us-west-2', service='bedrock')"
    assert SESSION_TOKEN not in repr(auth)
    assert ACCESS_KEY not in repr(auth)
    assert auth.secret.reveal() == SESSION_TOKEN


@pytest.mark.parametrize("echoed", [SESSION_TOKEN, SECRET_KEY], ids=["token", "key"])
def test_an_echoed_session_token_or_secret_key_is_redacted_from_an_error(
    server: LoopbackServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    echoed: str,
) -> None:
    isolate_aws(
        monkeypatch,
        tmp_path,
        AWS_ACCESS_KEY_ID=ACCESS_KEY,
        AWS_SECRET_ACCESS_KEY=SECRET_KEY,
        AWS_SESSION_TOKEN=SESSION_TOKEN,
    )
    server.enqueue(
        Reply(
            status=403,
            headers={
                "content-type": "application/json",
                "x-amzn-errortype": "UnrecognizedClientException",
            },
            body=json.dumps({"message": f"bad credential {echoed}"}).encode(),
            framing="length",
        )
    )
    with _adapter(server) as adapter, pytest.raises(LlmError) as caught:
        _stream(adapter)
    assert caught.value.code == ErrorCode.AUTH
    assert echoed not in caught.value.message
    assert "***" in caught.value.message
    assert echoed not in repr(caught.value.__cause__)


def test_a_signed_exchange_is_redacted_before_it_is_a_cassette(
    server: LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    isolate_aws(
        monkeypatch,
        tmp_path,
        AWS_ACCESS_KEY_ID=ACCESS_KEY,
        AWS_SECRET_ACCESS_KEY=SECRET_KEY,
        AWS_SESSION_TOKEN=SESSION_TOKEN,
    )
    server.enqueue(_reply())
    with _adapter(server) as adapter:
        _stream(adapter)
    (request,) = server.requests
    authorization = request.header("authorization") or ""
    signature = authorization.rpartition("Signature=")[2]
    cassette = Cassette(
        request=CassetteRequest(
            method=request.method,
            url=server.url + request.path,
            headers=request.headers,
            body=request.body,
        ),
        response=CassetteResponse(
            status=200,
            headers=(("content-type", EVENT_STREAM),),
            reads=(BodyRead(at_ms=1.0, data=fixture_body("text")),),
        ),
    )
    path = tmp_path / "signed.jsonl"
    redact_exchange(cassette).dump(path)
    written = path.read_text(encoding="utf-8")
    for secret in (signature, SESSION_TOKEN, authorization):
        assert secret not in written
    saved = Cassette.load(path).request
    assert dict(saved.headers)["authorization"] == "***"
    assert dict(saved.headers)["x-amz-security-token"] == "***"


def test_the_adapter_built_from_config_signs_the_same(
    server: LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from dsh_llm.adapters.bedrock import BedrockConfig
    from dsh_llm.config import structure_config

    isolate_aws(
        monkeypatch,
        tmp_path,
        AWS_ACCESS_KEY_ID=ACCESS_KEY,
        AWS_SECRET_ACCESS_KEY=SECRET_KEY,
    )
    config = structure_config(BedrockConfig, {"region": REGION, "baseURL": server.url})
    server.enqueue(_reply())
    with BedrockAdapter.from_config(config, environ={}) as adapter:
        _stream(adapter)
    verify_sigv4(server.requests[0], SECRET_KEY, region=REGION)
