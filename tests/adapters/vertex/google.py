"""Google credentials for the Vertex tests, made here (test helper): a service
account key file with a throwaway RSA key whose ``token_uri`` is a loopback
token endpoint that checks the signed JWT assertion (RFC 7523) and issues
tokens, and ``isolate_google``, which keeps the machine's own Google
configuration out of a test (google-auth reads the process environment)."""

from __future__ import annotations

import base64
import json
import time
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from dsh_llm.testing import RecordedRequest
from dsh_llm.testing import Reply

PROJECT = "sa-project-123"
"""The project the generated service account key names."""
EMAIL = "vertex-test@sa-project-123.iam.gserviceaccount.com"
"""The service account's email (the JWT's issuer)."""
SCOPE = "https://www.googleapis.com/auth/cloud-platform"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
GOOGLE_TOKEN_ENDPOINT = "https://oauth2.googleapis.com/token"


def _b64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class ServiceAccount:
    """A service account key (a fresh 2048-bit RSA key) and the token endpoint
    that honours it: ``handler`` answers each token request with the next token
    (``ya29.vertex-test-<n>``) valid for ``expires_in`` seconds, after checking
    the assertion's signature, issuer, audience, scope and lifetime; a bad one gets
    ``400 invalid_grant``. ``answer`` replaces the reply (a refusal, a page that
    is not JSON)."""

    def __init__(self, expires_in: int = 3600) -> None:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.pem = self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()
        self.expires_in = expires_in
        self.issued: list[str] = []
        self.claims: list[dict[str, Any]] = []
        self.answer: Reply | None = None
        self.token_uri = ""

    def info(self, token_uri: str, **fields: str | None) -> dict[str, str]:
        """The key file's content, its tokens fetched from ``token_uri``;
        ``fields`` add keys or, given ``None``, drop them (``project_id``)."""
        self.token_uri = token_uri
        info = {
            "type": "service_account",
            "project_id": PROJECT,
            "private_key_id": "0123456789abcdef",
            "private_key": self.pem,
            "client_email": EMAIL,
            "client_id": "1234567890",
            "token_uri": token_uri,
        }
        for name, value in fields.items():
            if value is None:
                info.pop(name, None)
            else:
                info[name] = value
        return info

    def write(self, path: Path, token_uri: str, **fields: str | None) -> Path:
        """Write the key file at ``path`` (``fields``: see ``info``)."""
        text = json.dumps(self.info(token_uri, **fields))
        path.write_text(text, encoding="utf-8")
        return path

    def _verify(self, assertion: str) -> dict[str, Any]:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        head, payload, signature = assertion.split(".")
        self.key.public_key().verify(
            _b64(signature),
            f"{head}.{payload}".encode(),
            padding.PKCS1v15(),
            hashes.SHA256(),
        )
        assert json.loads(_b64(head))["alg"] == "RS256"
        claims: dict[str, Any] = json.loads(_b64(payload))
        assert claims["iss"] == EMAIL
        # Google's token endpoint is the audience whatever token_uri says.
        assert claims["aud"] == GOOGLE_TOKEN_ENDPOINT
        assert SCOPE in claims["scope"].split()
        assert claims["iat"] <= time.time() + 5 < claims["exp"] + 5
        return claims

    def handler(self, request: RecordedRequest) -> Reply:
        """The token endpoint."""
        if self.answer is not None:
            return self.answer
        form = urllib.parse.parse_qs(request.body.decode())
        try:
            assert request.method == "POST"
            assert form["grant_type"] == [JWT_BEARER]
            self.claims.append(self._verify(form["assertion"][0]))
        except Exception:
            return token_error(400, "invalid_grant", "Invalid JWT Signature.")
        token = f"ya29.vertex-test-{len(self.issued) + 1}-0123456789abcdef"
        self.issued.append(token)
        return Reply(
            headers={"content-type": "application/json"},
            body=json.dumps(
                {
                    "access_token": token,
                    "expires_in": self.expires_in,
                    "token_type": "Bearer",
                }
            ).encode(),
            framing="length",
        )


def token_error(status: int, error: str, description: str) -> Reply:
    """An OAuth2 error answer of the token endpoint."""
    return Reply(
        status=status,
        headers={"content-type": "application/json"},
        body=json.dumps({"error": error, "error_description": description}).encode(),
        framing="length",
    )


GOOGLE_VARIABLES = (
    "GOOGLE_APPLICATION_CREDENTIALS",
    "GOOGLE_CLOUD_PROJECT",
    "GCLOUD_PROJECT",
    "GOOGLE_CLOUD_QUOTA_PROJECT",
    "GOOGLE_CLOUD_LOCATION",
    "CLOUD_ML_REGION",
    "ANTHROPIC_VERTEX_PROJECT_ID",
    "GOOGLE_OAUTH_ACCESS_TOKEN",
    "GOOGLE_API_USE_CLIENT_CERTIFICATE",
    "GOOGLE_API_USE_MTLS_ENDPOINT",
)


def isolate_google(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, **env: str) -> None:
    """Keep the machine's Google configuration out of the test: its variables
    unset (then ``env`` set), an empty gcloud configuration directory, and no
    metadata server probe (google-auth reads that switch when imported)."""
    from google.auth.compute_engine import _metadata

    for name in GOOGLE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    gcloud = tmp_path / "gcloud"
    gcloud.mkdir(exist_ok=True)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(gcloud))
    monkeypatch.setattr(_metadata, "_NO_GCE_CHECK", True)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
