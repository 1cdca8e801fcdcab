"""Putting AWS credentials on a Bedrock request: SigV4 signing through botocore.

botocore is an optional extra (``pip install 'dsh-llm[bedrock]'``): it is
imported here, lazily, only when a request is signed or a region is looked up,
never by the core install.

- ``CredentialChain(profile)`` is one adapter's view of the standard AWS
  credential chain (environment, shared config and credentials files, the
  profile, SSO, container and instance roles), resolved by botocore on first
  use; ``frozen()`` is a consistent snapshot for one request, which botocore
  refreshes first when temporary credentials are about to expire.
- ``SigV4Auth`` (a ``requests`` auth) signs the final prepared request (method,
  URL, ``host``, ``content-type``, every ``x-amz*`` header, the body hash):
  ``authorization``, ``x-amz-date`` and, for temporary credentials,
  ``x-amz-security-token``. Its ``secret`` (the session token, else the secret
  key) is what the transport redacts from server text; its ``repr`` shows no
  credential.
- botocore's own DEBUG lines of the signing (the canonical request with the
  session token, the signature) are dropped while we sign, so a signature never
  reaches a log.
- ``botocore_region(profile)`` is the region botocore resolves (the profile's
  ``region``), or ``None``.
- Failures are ``LlmError`` ``MISSING_CREDENTIAL`` naming what to do (install
  the extra, export ``AWS_BEARER_TOKEN_BEDROCK``, configure credentials); the
  message never holds a credential.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections.abc import Callable
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from typing import Final

import requests

from dsh_llm.credentials import Secret
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError

EXTRA_HINT: Final = "pip install 'dsh-llm[bedrock]'"
"""How to install what SigV4 signing needs."""
SERVICE: Final = "bedrock"
"""The SigV4 signing name of Bedrock Runtime."""

_SIGNING: Final = contextvars.ContextVar("dsh_llm_bedrock_signing", default=False)


class _HideSigning(logging.Filter):
    """Drops botocore's signing records while this module signs (they hold the
    canonical request, with the session token, and the signature)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not _SIGNING.get()


logging.getLogger("botocore.auth").addFilter(_HideSigning())


@contextmanager
def _signing() -> Iterator[None]:
    token = _SIGNING.set(True)
    try:
        yield
    finally:
        _SIGNING.reset(token)


def _botocore_session(profile: str | None, *, package: str, hint: str) -> Any:
    try:
        import botocore.session
    except ImportError:
        raise LlmError(
            f"{package}: signing requests with AWS credentials needs botocore: "
            f"{EXTRA_HINT}{hint}",
            ErrorCode.MISSING_CREDENTIAL,
        ) from None
    return botocore.session.Session(profile=profile)


def botocore_region(profile: str | None) -> str | None:
    """The region botocore resolves for ``profile`` (``None``: the default
    profile), or ``None`` when botocore is not installed or knows none."""
    try:
        import botocore.exceptions
        import botocore.session
    except ImportError:
        return None
    try:
        region = botocore.session.Session(profile=profile).get_config_variable("region")
    except botocore.exceptions.BotoCoreError:
        return None
    return region if isinstance(region, str) and region else None


class CredentialChain:
    """The AWS credential chain of one adapter (see the module docstring).

    Args:
        profile: The AWS profile (``None``: ``AWS_PROFILE``, else the default).
        package: The plugin's name, named in messages.
        bearer_env: The variable a Bedrock API key may be exported in, named in
            messages as the way around a missing chain.
    """

    def __init__(self, profile: str | None, *, package: str, bearer_env: str) -> None:
        self.profile = profile
        """The AWS profile in force (``None``: the default)."""
        self._package = package
        self._hint = f", or export {bearer_env} (a Bedrock API key)"
        self._lock = threading.Lock()
        self._credentials: Any = None

    def frozen(self) -> Any:
        """A snapshot of the credentials for one request (``access_key``,
        ``secret_key``, ``token``), refreshed by botocore when they expire.

        Raises:
            LlmError: ``MISSING_CREDENTIAL`` when botocore is missing, finds no
                credentials, or cannot load or refresh them.
        """
        with self._lock:
            credentials = self._credentials
            if credentials is None:
                credentials = self._load()
                self._credentials = credentials
        return self._snapshot(credentials)

    def _failure(self, what: str, exc: BaseException | None = None) -> LlmError:
        profile = "" if self.profile is None else f" (profile {self.profile!r})"
        return LlmError(
            f"{self._package}: {what}{profile}; configure AWS credentials{self._hint}",
            ErrorCode.MISSING_CREDENTIAL,
            cause=exc,
        )

    def _load(self) -> Any:
        session = _botocore_session(
            self.profile, package=self._package, hint=self._hint
        )
        credentials = self._botocore("load", session.get_credentials)
        if credentials is None:
            raise self._failure("found no AWS credentials")
        return credentials

    def _snapshot(self, credentials: Any) -> Any:
        frozen = self._botocore("refresh", credentials.get_frozen_credentials)
        if not frozen.access_key or not frozen.secret_key:
            raise self._failure("found incomplete AWS credentials")
        return frozen

    def _botocore(self, action: str, call: Callable[[], Any]) -> Any:
        """``call()``; a botocore error is ``MISSING_CREDENTIAL``: "could not
        <action> AWS credentials", raised outside the handler (its cause kept,
        no context)."""
        import botocore.exceptions

        try:
            return call()
        except botocore.exceptions.BotoCoreError as exc:
            failure = self._failure(
                f"could not {action} AWS credentials ({type(exc).__name__})", exc
            )
        raise failure

    def __repr__(self) -> str:
        return f"CredentialChain(profile={self.profile!r})"


class SigV4Auth(requests.auth.AuthBase):
    """Signs a prepared request with AWS Signature Version 4 (see the module
    docstring).

    Args:
        credentials: A frozen botocore credentials snapshot
            (``CredentialChain.frozen()``).
        region: The region signed for.
        service: The signing name (``bedrock``).
    """

    def __init__(self, credentials: Any, *, region: str, service: str = SERVICE):
        self._credentials = credentials
        self.region = region
        """The region signed for."""
        self.service = service
        """The signing name."""

    @property
    def secret(self) -> Secret:
        """What the transport redacts from server text: the session token that
        travels with the request, else the secret key."""
        credentials = self._credentials
        return Secret(credentials.token or credentials.secret_key)

    @property
    def secrets(self) -> tuple[Secret, ...]:
        """Every secret of the credentials (the secret key and the session
        token), for the transport to redact from server text."""
        credentials = self._credentials
        return tuple(
            Secret(value)
            for value in (credentials.secret_key, credentials.token)
            if value
        )

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        from botocore.auth import SigV4Auth as BotocoreSigner
        from botocore.awsrequest import AWSRequest

        signed = {
            name: value
            for name, value in request.headers.items()
            if name.lower() == "content-type" or name.lower().startswith("x-amz")
        }
        aws = AWSRequest(
            method=request.method, url=request.url, data=request.body, headers=signed
        )
        with _signing():
            BotocoreSigner(self._credentials, self.service, self.region).add_auth(aws)
        for name in ("Authorization", "X-Amz-Date", "X-Amz-Security-Token"):
            value = aws.headers.get(name)
            if value is not None:
                request.headers[name.lower()] = value
        return request

    def __repr__(self) -> str:
        return f"SigV4Auth(region={self.region!r}, service={self.service!r})"
