"""Putting a Google OAuth2 access token on a Vertex AI request.

google-auth is an optional extra (``pip install 'dsh-llm[vertex]'``): it is
imported here, lazily, only when credentials are loaded, never by the core
install.

- ``GoogleCredentials`` is one adapter's Application Default Credentials (or
  the credentials file it names), loaded by google-auth on first use with the
  ``cloud-platform`` scope; ``project()`` is the project they name.
- ``GoogleCredentials.auth()`` is the ``AccessTokenAuth`` of one request: the
  token is refreshed first (google-auth's ``Request`` transport, on a session
  closed afterwards) when it is missing, expired or within google-auth's
  refresh threshold of its expiry (3 min 45 s), so a token never expires on
  the way. Thread-safe: one refresh at a time.
- ``AccessTokenAuth`` sends ``authorization: Bearer <token>`` and the headers
  the credentials add (``x-goog-user-project`` for a quota project); its
  ``secret`` (the token) is what the transport redacts from server text, and
  its ``repr`` shows none.
- Failures are ``LlmError``: ``MISSING_CREDENTIAL`` (google-auth missing, no
  credentials found, a credentials file that cannot be read, no token),
  ``AUTH`` (the token endpoint refused them; ``SERVER`` when it says to retry),
  ``TRANSPORT`` (it could not be reached), ``MALFORMED_RESPONSE`` (its answer
  was not a token). Messages say what to do and never
  hold a token.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Mapping
from typing import Any
from typing import Final

import requests

from dsh_llm.credentials import Secret
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.transport.session import create_session

EXTRA_HINT: Final = "pip install 'dsh-llm[vertex]'"
"""How to install what Application Default Credentials need."""
SCOPE: Final = "https://www.googleapis.com/auth/cloud-platform"
"""The OAuth2 scope Vertex AI calls need."""
ADC_HINT: Final = (
    "run `gcloud auth application-default login`, or set "
    "GOOGLE_APPLICATION_CREDENTIALS to a credentials file"
)
"""How to give the process Application Default Credentials."""

_DETAIL_CHARS: Final = 300


def _detail(exc: BaseException) -> str:
    """The first words of a google-auth failure (its first argument), which
    names what went wrong (a missing file, ``invalid_grant``) and never a
    token."""
    first = exc.args[0] if exc.args else ""
    text = " ".join(str(first).split())
    if len(text) > _DETAIL_CHARS:
        text = text[: _DETAIL_CHARS - 3] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class AccessTokenAuth(requests.auth.AuthBase):
    """Sends an OAuth2 access token as a bearer token, with the credentials'
    other headers (see the module docstring).

    Args:
        token: The access token.
        headers: Further headers the credentials add (lower-case names).
    """

    def __init__(self, token: Secret, headers: Mapping[str, str] | None = None) -> None:
        self._token = token
        self._headers = dict(headers or {})

    @property
    def secret(self) -> Secret:
        """The token, still hidden (the transport redacts it from server text)."""
        return self._token

    @property
    def headers(self) -> Mapping[str, str]:
        """The headers sent besides ``authorization``."""
        return self._headers

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers.update(self._headers)
        request.headers["authorization"] = f"Bearer {self._token.reveal()}"
        return request

    def __repr__(self) -> str:
        return f"AccessTokenAuth(headers={sorted(self._headers)!r}, token=***)"


class GoogleCredentials:
    """The Google credentials of one adapter (see the module docstring).

    Args:
        credentials_file: A credentials file to load (``None``: Application
            Default Credentials).
        package: The plugin's name, named in messages.
        token_env: The variable an access token may be exported in, named in
            messages as the way around missing credentials.
    """

    def __init__(
        self, credentials_file: str | None, *, package: str, token_env: str
    ) -> None:
        self.credentials_file = credentials_file
        """The credentials file in force (``None``: Application Default
        Credentials)."""
        self._package = package
        self._token_hint = f", or export {token_env} (an OAuth2 access token)"
        self._lock = threading.Lock()
        self._loaded: tuple[Any, str | None] | None = None

    def _failure(
        self, what: str, code: ErrorCode, exc: BaseException | None = None
    ) -> LlmError:
        return LlmError(f"{self._package}: {what}", code, cause=exc)

    def _missing(self, what: str, exc: BaseException | None = None) -> LlmError:
        return self._failure(
            f"{what}; {ADC_HINT}{self._token_hint}", ErrorCode.MISSING_CREDENTIAL, exc
        )

    def _load(self) -> tuple[Any, str | None]:
        try:
            import google.auth
            import google.auth.exceptions
        except ImportError:
            raise self._failure(
                f"Google credentials need google-auth: {EXTRA_HINT}{self._token_hint}",
                ErrorCode.MISSING_CREDENTIAL,
            ) from None
        failure: LlmError | None = None
        try:
            if self.credentials_file is None:
                credentials, project = google.auth.default(scopes=[SCOPE])
            else:
                # The file is the user's own configuration, trusted as
                # GOOGLE_APPLICATION_CREDENTIALS is (google-auth loads that
                # one the same way, its warning silenced).
                load: Any = google.auth.load_credentials_from_file
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", DeprecationWarning)
                    credentials, project = load(self.credentials_file, scopes=[SCOPE])
        except google.auth.exceptions.GoogleAuthError as exc:
            where = (
                "found no Google credentials"
                if self.credentials_file is None
                else "could not load the credentials file"
            )
            failure = self._missing(f"{where} ({_detail(exc)})", exc)
        if failure is not None:
            raise failure
        return credentials, project if isinstance(project, str) and project else None

    def _credentials(self) -> tuple[Any, str | None]:
        # Called with the lock held.
        if self._loaded is None:
            self._loaded = self._load()
        return self._loaded

    def project(self) -> str | None:
        """The project the credentials name (``None``: they name none).

        Raises:
            LlmError: ``MISSING_CREDENTIAL`` when they cannot be loaded.
        """
        with self._lock:
            return self._credentials()[1]

    def auth(self) -> AccessTokenAuth:
        """The auth of one request, its token refreshed first when needed.

        Raises:
            LlmError: see the module docstring.
        """
        with self._lock:
            credentials, _ = self._credentials()
            if not credentials.valid:
                self._refresh(credentials)
            token = credentials.token
            if not isinstance(token, str) or not token:
                raise self._missing("the Google credentials gave no access token")
            headers: dict[str, str] = {}
            credentials.apply(headers)
        extra = {
            name.lower(): value
            for name, value in headers.items()
            if name.lower() != "authorization" and isinstance(value, str)
        }
        return AccessTokenAuth(Secret(token), extra)

    def _refresh(self, credentials: Any) -> None:
        import google.auth.exceptions
        import google.auth.transport.requests

        failure: LlmError | None = None
        # A session of its own, closed at once: a refresh comes about once an
        # hour, and an idle connection to the token endpoint must not linger.
        with create_session(pool_maxsize=1) as session:
            try:
                credentials.refresh(google.auth.transport.requests.Request(session))
            except google.auth.exceptions.TransportError as exc:
                failure = self._failure(
                    f"could not reach the Google token endpoint ({_detail(exc)})",
                    ErrorCode.TRANSPORT,
                    exc,
                )
            except google.auth.exceptions.RefreshError as exc:
                retryable = bool(getattr(exc, "retryable", False))
                failure = self._failure(
                    "the Google token endpoint refused to refresh the access "
                    f"token ({_detail(exc)})",
                    ErrorCode.SERVER if retryable else ErrorCode.AUTH,
                    exc,
                )
            except google.auth.exceptions.GoogleAuthError as exc:
                failure = self._missing(
                    f"could not refresh the Google credentials ({_detail(exc)})", exc
                )
            except (ValueError, TypeError, KeyError) as exc:
                # google-auth reading a token answer that is not the OAuth2 JSON
                # (a proxy's HTML page with a 200).
                failure = self._failure(
                    "the Google token endpoint answered something that is not a "
                    f"token ({type(exc).__name__})",
                    ErrorCode.MALFORMED_RESPONSE,
                    exc,
                )
        if failure is not None:
            raise failure

    def __repr__(self) -> str:
        return f"GoogleCredentials(credentials_file={self.credentials_file!r})"
