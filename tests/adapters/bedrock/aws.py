"""The AWS side of the Bedrock tests (test helper).

- ``isolate_aws(monkeypatch, tmp_path, **variables)``: the process environment
  botocore reads, cleared of every AWS variable and file of the machine, with
  the instance metadata service off (no test may reach it), then ``variables``.
- ``verify_sigv4(request, secret_key, region=...)``: checks a received request's
  Signature Version 4 from what the server saw, written from the AWS
  specification (not from botocore): the canonical request (the path encoded a
  second time, the signed headers, the body's SHA-256), the string to sign and
  the derived key. Returns the parsed ``Credential`` scope.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from dsh_llm.testing import RecordedRequest

ACCESS_KEY = "AKIDEXAMPLE0TESTKEY"
SECRET_KEY = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
SESSION_TOKEN = "IQoJb3JpZ2luX2VjEXAMPLE-session-token-0123456789abcdef"

_AUTH = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/"
    r"(?P<service>[^/]+)/aws4_request, SignedHeaders=(?P<signed>[a-z0-9;-]+), "
    r"Signature=(?P<signature>[0-9a-f]{64})"
)


def isolate_aws(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, **variables: str
) -> None:
    """Clear the machine's AWS setup from the environment botocore reads."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    for name, value in variables.items():
        monkeypatch.setenv(name, value)


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def verify_sigv4(
    request: RecordedRequest, secret_key: str, *, region: str
) -> dict[str, Any]:
    """Check ``request``'s signature (see the module docstring)."""
    authorization = request.header("authorization")
    assert authorization is not None, "no authorization header"
    match = _AUTH.fullmatch(authorization)
    assert match is not None, "not a SigV4 authorization header"
    assert match["region"] == region
    assert match["service"] == "bedrock"
    amz_date = request.header("x-amz-date")
    assert amz_date is not None
    assert amz_date.startswith(match["date"])
    signed = match["signed"].split(";")
    assert "host" in signed
    assert "x-amz-date" in signed
    canonical_headers = "".join(
        f"{name}:{' '.join((request.header(name) or '').split())}\n" for name in signed
    )
    path, _, query = request.path.partition("?")
    canonical = "\n".join(
        [
            request.method,
            urllib.parse.quote(path, safe="/~"),
            query,
            canonical_headers,
            match["signed"],
            hashlib.sha256(request.body).hexdigest(),
        ]
    )
    scope = f"{match['date']}/{region}/bedrock/aws4_request"
    to_sign = "\n".join(
        [
            "AWS4-HMAC-SHA256",
            amz_date,
            scope,
            hashlib.sha256(canonical.encode()).hexdigest(),
        ]
    )
    key = _hmac(("AWS4" + secret_key).encode(), match["date"])
    for part in (region, "bedrock", "aws4_request"):
        key = _hmac(key, part)
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    assert signature == match["signature"], "the signature does not verify"
    return {"access_key": match["key"], "signed_headers": signed}
