"""Microsoft Entra ID access tokens for Azure OpenAI, through azure-identity.

azure-identity is an optional extra (``pip install 'dsh-llm[azure]'``): it is
imported here, lazily, the first time a token is needed, never by the core.

- ``EntraIdTokens`` is one adapter's token source: the credential it is given
  (any azure-core ``TokenCredential``: ``get_token(scope)`` returning an
  ``AccessToken``), else a ``DefaultAzureCredential`` made on first use
  (environment, workload identity, managed identity, Azure CLI...).
- ``token()`` returns the cached token, fetched again once it is within
  ``REFRESH_MARGIN_S`` of expiring; a fetch that fails while the cached token
  is still valid keeps it. One fetch at a time (thread-safe).
- ``auth()`` is the ``requests`` auth of one request (``authorization: Bearer``,
  the token as its ``secret``, so the transport redacts it from server text).
- Failures are ``LlmError`` ``MISSING_CREDENTIAL`` naming what to do (install
  the extra, sign in, export the API key variable); the message never holds a
  token. No ``repr`` shows one.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Any
from typing import Final

from dsh_llm.credentials import Secret
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.transport.session import BearerAuth

EXTRA_HINT: Final = "pip install 'dsh-llm[azure]'"
"""How to install what Entra ID tokens need."""
DEFAULT_SCOPE: Final = "https://cognitiveservices.azure.com/.default"
"""The scope of an Azure OpenAI token (Azure public cloud)."""
REFRESH_MARGIN_S: Final = 300.0
"""A token this close to expiring (seconds) is fetched again before use."""


class EntraIdTokens:
    """Entra ID access tokens for one adapter (see the module docstring).

    Args:
        credential: An azure-core ``TokenCredential``; ``None`` makes a
            ``DefaultAzureCredential`` on first use (and owns it).
        scope: The token's scope.
        package: The plugin's name, named in messages.
        key_hint: How to use an API key instead, appended to messages.
        clock: The current Unix time in seconds (tests).
    """

    def __init__(
        self,
        credential: Any = None,
        *,
        scope: str = DEFAULT_SCOPE,
        package: str,
        key_hint: str = "",
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.scope = scope
        """The scope tokens are asked for."""
        self._given = credential
        self._credential: Any = credential
        self._package = package
        self._hint = key_hint
        self._clock = clock
        self._lock = threading.Lock()
        self._token: Secret | None = None
        self._expires_on = 0.0

    @property
    def owns_credential(self) -> bool:
        """Whether the credential is the one this source made (``close`` closes
        it), not one it was given."""
        return self._given is None

    def token(self) -> Secret:
        """The access token to send now (see the module docstring).

        Raises:
            LlmError: ``MISSING_CREDENTIAL`` when azure-identity is missing, no
                credential is found, or the token cannot be fetched.
        """
        with self._lock:
            now = self._clock()
            token = self._token
            if token is not None and self._expires_on - now > REFRESH_MARGIN_S:
                return token
            try:
                self._fetch()
            except LlmError:
                if token is not None and self._expires_on > now:
                    return token  # refresh failed, but the token is still good
                raise
            fresh = self._token
            assert fresh is not None
            return fresh

    def auth(self) -> BearerAuth:
        """The auth of one request: ``authorization: Bearer <token()>``."""
        return BearerAuth(self.token())

    def close(self) -> None:
        """Close a credential this source made (a later ``token()`` makes a new
        one); a given credential is the caller's to close."""
        with self._lock:
            credential = self._credential
            if self._given is None and credential is not None:
                self._credential = None
                close = getattr(credential, "close", None)
                if callable(close):
                    close()

    def _failure(self, what: str, exc: BaseException | None = None) -> LlmError:
        return LlmError(
            f"{self._package}: {what}{self._hint}",
            ErrorCode.MISSING_CREDENTIAL,
            cause=exc,
        )

    def _made_credential(self) -> Any:
        try:
            from azure.identity import DefaultAzureCredential
        except ImportError:
            raise self._failure(
                f"Microsoft Entra ID tokens need azure-identity: {EXTRA_HINT}"
            ) from None
        return DefaultAzureCredential()

    def _fetch(self) -> None:
        credential = self._credential
        if credential is None:
            credential = self._credential = self._made_credential()
        failure: LlmError | None = None
        try:
            access = credential.get_token(self.scope)
        except Exception as exc:  # the credential's own errors, any library's
            failure = self._failure(
                "could not get a Microsoft Entra ID token "
                f"({type(exc).__name__}); sign in (az login) or configure a "
                "managed identity or service principal",
                exc,
            )
        if failure is not None:
            raise failure
        value = getattr(access, "token", None)
        expires_on = getattr(access, "expires_on", None)
        if (
            not isinstance(value, str)
            or not value
            or isinstance(expires_on, bool)
            or not isinstance(expires_on, int | float)
            or not math.isfinite(expires_on)
        ):
            raise self._failure(
                "the Entra ID credential returned no usable token "
                "(expected an AccessToken with token and expires_on)"
            )
        self._token = Secret(value)
        self._expires_on = float(expires_on)

    def __repr__(self) -> str:
        kind = "default" if self._given is None else type(self._given).__name__
        return f"EntraIdTokens(credential={kind!r}, scope={self.scope!r})"
