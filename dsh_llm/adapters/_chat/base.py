"""What the chat-completions adapters share around the wire.

``DeepSeekAdapter`` and ``OpenAICompatAdapter`` differ in their configuration
and in a ``WireProfile``; everything else an adapter does is here, once:

- ``ChatCompletionsAdapter``: the base class (one pooled session, ``close`` and
  ``with``, ``provider_info``, ``provider_retry_policy`` and ``list_models``
  from the options in force, the key of each request and how a ``repr`` names
  it).
- ``resolved_model_info``: what ``resolve_model`` answers for a catalog entry or
  an unlisted id; ``catalog_entry`` finds a model's entry.
- ``AdapterConfigError``: a bad option reported against its config key
  (``<package>: <key> <detail>``); each adapter subclasses it with its package
  name, and its plugin turns it into a keyed load error.
- ``api_root_url``: the one rule for a ``baseURL``, whatever its source (a
  constructor argument, a config key, an environment variable): ``http://`` or
  ``https://`` with a host and a valid port, no ``#fragment``, not already ending
  in ``/chat/completions``; the trailing slash of its path is dropped and a query
  string is kept. Messages never repeat the URL, so a password written into it
  never reaches one.
- ``check_stream_timeouts`` and ``checked_retry_policy``: the bounds of the three
  stream timeouts and the retry-policy rules, reported under their config keys.
- ``explicit_api_key`` (checked at construction) and ``api_key_from_environ``
  (read per request): the credential rules, with messages that name where a key
  came from and never the key.
- ``chat_completions_url`` and ``stream_completion``: one
  ``POST <base_url>/chat/completions`` through the shared transport and the
  translator of ``dsh_llm.adapters._chat.translate``.
- ``ChatCompletionsAdapter.attachments``: the attachment store images are read
  from (``None`` by default: images are refused); set it on the adapter
  (``adapter.attachments = MemoryAttachmentStore()``). An adapter whose
  ``_image_input`` is false (DeepSeek: its Files API is not implemented) never
  reports ``image`` in ``list_models``/``resolve_model``, whatever its catalog
  says.
- Reading the body (watchdog, abort checks, secrets kept out of errors) is the
  transport's read loop (``dsh_llm.transport.read_loop``), not this module's.
"""

from __future__ import annotations

import abc
import os
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar, Final, Protocol, Self, TypeVar

import requests

from dsh_llm.adapter import (
    LlmAdapter,
    LlmModelContext,
    LlmModelInfo,
    LlmModelReasoningInfo,
    LlmProviderInfo,
    LlmResolvedModelInfo,
)
from dsh_llm.adapters._chat.images import AttachmentReader
from dsh_llm.adapters._chat.request import WireProfile, encode_body
from dsh_llm.adapters._chat.translate import ChatCompletionsTranslator
from dsh_llm.credentials import Secret, assert_usable_api_key
from dsh_llm.errors import ErrorCode, LlmError
from dsh_llm.protocol import StreamChunk
from dsh_llm.retry import RetryPolicy, resolve_retry_policy
from dsh_llm.signal import AbortSignal
from dsh_llm.transport.call import StreamingCall
from dsh_llm.transport.read_loop import read_stream
from dsh_llm.transport.session import BearerAuth, NoAuth, create_session
from dsh_llm.transport.sse import DONE, SseDecoder
from dsh_llm.transport.watchdog import check_timeout_ms

__all__ = [
    "CHAT_COMPLETIONS_PATH",
    "AdapterConfigError",
    "AdapterSettings",
    "CatalogEntry",
    "ChatCompletionsAdapter",
    "StreamSettings",
    "api_key_from_environ",
    "api_root_url",
    "catalog_entry",
    "chat_completions_url",
    "check_stream_timeouts",
    "checked_retry_policy",
    "explicit_api_key",
    "offered_modalities",
    "resolved_model_info",
    "stream_completion",
]

CHAT_COMPLETIONS_PATH: Final = "/chat/completions"
"""Appended to an API root to reach the endpoint."""


class AdapterConfigError(ValueError):
    """A bad adapter option, reported against its config key.

    The message is ``<package>: <key> <detail>``; subclasses set ``package`` to
    the name of their plugin (``llm-deepseek``, ``llm-openai-compatible``).

    Args:
        key: The config key, as in YAML (``baseURL``, ``models[0].maxTokens``).
        detail: What is wrong, as the rest of a sentence after the key.
    """

    package: ClassVar[str] = "dsh_llm"
    """The package named at the start of the message."""

    def __init__(self, key: str, detail: str) -> None:
        super().__init__(f"{self.package}: {key} {detail}")
        self.key = key
        """The config key concerned."""
        self.detail = detail
        """What is wrong with it."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.key, self.detail))


def api_root_url(
    value: object, *, error: type[AdapterConfigError], source: str | None = None
) -> str:
    """Check an API root (config key ``baseURL``) and normalise it.

    The root must be an ``http://`` or ``https://`` URL with a host (and, when
    given, a valid port), without a ``#fragment``, and must not already end in
    ``/chat/completions``, which is appended to it. The trailing slash of its path
    is dropped; a query string (Azure-style ``?api-version=...``) is kept and
    stays after the appended path (``chat_completions_url``).

    Args:
        value: The URL as given.
        error: The adapter's ``AdapterConfigError`` subclass.
        source: Where the value came from when not from ``baseURL`` itself
            (an environment variable's name), named in the message.

    Raises:
        AdapterConfigError: ``error`` keyed ``baseURL``; the message never
            contains the URL (it may carry a password).
    """

    def refuse(detail: str) -> AdapterConfigError:
        where = "" if source is None else f" (read from {source})"
        return error("baseURL", detail + where)

    if not isinstance(value, str):
        raise refuse("must be a string")
    try:
        parts = urllib.parse.urlsplit(value)
        # Reading the port checks it: a non-numeric or out-of-range port raises.
        valid = (
            parts.scheme in ("http", "https")
            and bool(parts.hostname)
            and (parts.port is None or parts.port > 0)
        )
    except ValueError:
        valid = False
    if not valid:
        raise refuse("must be an http:// or https:// URL")
    if parts.fragment:
        raise refuse("must not have a #fragment")
    path = parts.path.rstrip("/")
    if path.endswith(CHAT_COMPLETIONS_PATH):
        raise refuse(
            "must end at the API root (e.g. http://127.0.0.1:8080/v1); "
            f"{CHAT_COMPLETIONS_PATH} is appended to it"
        )
    return urllib.parse.urlunsplit(parts._replace(path=path, fragment=""))


def chat_completions_url(base_url: str) -> str:
    """The endpoint under API root ``base_url`` (as ``api_root_url`` returns it):
    ``/chat/completions`` appended to its path with exactly one slash, before any
    query string (Azure-style ``?api-version=...`` roots keep their query)."""
    parts = urllib.parse.urlsplit(base_url)
    path = parts.path.rstrip("/") + CHAT_COMPLETIONS_PATH
    return urllib.parse.urlunsplit(parts._replace(path=path))


def explicit_api_key(api_key: str | Secret | None, *, package: str) -> Secret | None:
    """The checked key an adapter was constructed with (``None`` stays ``None``).

    Raises:
        TypeError: for a key that is neither ``str`` nor ``Secret``.
        LlmError: ``INVALID_CREDENTIAL`` for a key no header can carry (the
            message names ``package`` and ``api_key``, never the key).
    """
    if api_key is None:
        return None
    raw = api_key.reveal() if isinstance(api_key, Secret) else api_key
    if not isinstance(raw, str):
        raise TypeError(
            f"api_key must be a str or Secret, got {type(api_key).__name__}"
        )
    return Secret(assert_usable_api_key(raw, package, "api_key"))


def api_key_from_environ(
    environ: Mapping[str, str], name: str, *, package: str, route: str
) -> Secret:
    """The key in environment variable ``name``, read now (per request).

    Raises:
        LlmError: ``MISSING_CREDENTIAL`` naming ``name`` and ``route`` when the
            variable is unset or empty; ``INVALID_CREDENTIAL`` for a value no
            header can carry.
    """
    raw = environ.get(name)
    if not raw:
        raise LlmError(
            f'{package}: no API key for provider route "{route}"; pass api_key or '
            f"export {name} in the launching environment",
            ErrorCode.MISSING_CREDENTIAL,
        )
    return Secret(assert_usable_api_key(raw, package, name))


def check_stream_timeouts(
    idle_ms: float,
    keepalive_ms: float | None,
    total_ms: float | None,
    *,
    error: type[AdapterConfigError],
) -> None:
    """Check the stream timeouts an adapter is configured with.

    Raises:
        AdapterConfigError: ``error`` keyed ``streamIdleTimeoutMs``,
            ``streamKeepaliveTimeoutMs`` or ``totalTimeoutMs`` (the last two may
            be ``None``) for the first value that is not a positive finite number
            no greater than 2147483647.
    """
    for key, value, optional in (
        ("streamIdleTimeoutMs", idle_ms, False),
        ("streamKeepaliveTimeoutMs", keepalive_ms, True),
        ("totalTimeoutMs", total_ms, True),
    ):
        try:
            check_timeout_ms(key, value, optional=optional)
        except ValueError as exc:
            raise error(key, str(exc).removeprefix(f"{key} ")) from exc


def checked_retry_policy(
    value: Mapping[str, Any] | RetryPolicy | None, *, error: type[AdapterConfigError]
) -> RetryPolicy:
    """Resolve a retry-policy option (config key ``retryPolicy``).

    Raises:
        AdapterConfigError: ``error`` keyed by the offending key path
            (``retryPolicy``, ``retryPolicy.mode``,
            ``retryPolicy.backoff.maxDelayMs``...).
    """
    try:
        return resolve_retry_policy(value, "retryPolicy")
    except ValueError as exc:
        # resolve_retry_policy's messages are "<key path> <what is wrong>".
        key, _, detail = str(exc).partition(" ")
        raise error(key, detail) from exc


class StreamSettings(Protocol):
    """The per-call limits an adapter's resolved options carry."""

    @property
    def stream_idle_timeout_ms(self) -> float:
        """Idle timeout: the longest silence while waiting for the next chunk."""
        ...

    @property
    def stream_keepalive_timeout_ms(self) -> float | None:
        """Longest wait with keep-alive comments but no data."""
        ...

    @property
    def total_timeout_ms(self) -> float | None:
        """Longest whole call."""
        ...

    @property
    def empty_response_as_stop(self) -> bool:
        """Report a blockless ``stop`` as ``stop``."""
        ...


def stream_completion(
    session: requests.Session,
    settings: StreamSettings,
    *,
    profile: WireProfile,
    base_url: str,
    body: Mapping[str, Any],
    headers: Mapping[str, str],
    key: Secret | None,
    signal: AbortSignal | None,
) -> Iterator[StreamChunk]:
    """One ``POST <base_url>/chat/completions`` streamed as protocol chunks.

    ``key`` travels as ``authorization: Bearer`` (``None``: no credentials, for
    local servers); ``headers`` come from ``stream_headers``. A generator: nothing
    is sent before the first ``next()``.

    Raises:
        LlmError: ``INVALID_REQUEST`` for a body that is not JSON, and whatever
            ``dsh_llm.transport.read_loop.read_stream`` raises.
    """
    call = StreamingCall(
        session,
        url=chat_completions_url(base_url),
        body=encode_body(body, provider=profile.provider),
        headers=headers,
        auth=NoAuth() if key is None else BearerAuth(key),
        provider=profile.provider,
        endpoint=base_url,
        signal=signal,
        idle_timeout_ms=settings.stream_idle_timeout_ms,
        keepalive_timeout_ms=settings.stream_keepalive_timeout_ms,
        total_timeout_ms=settings.total_timeout_ms,
    )
    translator = ChatCompletionsTranslator(
        profile, empty_response_as_stop=settings.empty_response_as_stop
    )
    decoder = SseDecoder(terminal_data=DONE, provider=profile.provider)
    yield from read_stream(call, decoder, translator)


class CatalogEntry(Protocol):
    """One advertised model, as ``list_models`` needs it."""

    @property
    def id(self) -> str:
        """The wire model id."""
        ...

    @property
    def name(self) -> str | None:
        """Display name (``None``: the id)."""
        ...

    @property
    def description(self) -> str | None:
        """What sets it apart."""
        ...

    @property
    def input_modalities(self) -> tuple[str, ...]:
        """Accepted inputs."""
        ...


_Entry = TypeVar("_Entry", bound=CatalogEntry)


def catalog_entry(models: Sequence[_Entry], model_id: str) -> _Entry | None:
    """The entry of ``models`` whose id is ``model_id``, if listed."""
    return next((entry for entry in models if entry.id == model_id), None)


class AdapterSettings(StreamSettings, Protocol):
    """An adapter's resolved options, as the shared metadata methods read them."""

    @property
    def models(self) -> Sequence[CatalogEntry]:
        """The advertised catalog."""
        ...

    @property
    def retry_policy(self) -> RetryPolicy:
        """The resolved retry policy."""
        ...


def offered_modalities(
    entry: CatalogEntry | None, *, image_input: bool
) -> tuple[str, ...]:
    """The inputs an adapter can send for ``entry``: its catalog's, without
    ``image`` when ``image_input`` is false; ``("text",)`` for an unlisted id."""
    if entry is None:
        return ("text",)
    if image_input:
        return entry.input_modalities
    return tuple(m for m in entry.input_modalities if m != "image") or ("text",)


def resolved_model_info(
    provider: str,
    model: str,
    entry: CatalogEntry | None,
    *,
    context_window: int | None,
    default_max_tokens: int | None,
    reasoning: LlmModelReasoningInfo | None,
    image_input: bool = True,
) -> LlmResolvedModelInfo:
    """What ``resolve_model`` answers for ``model`` (``entry``: its catalog entry,
    ``None`` when unlisted): the entry's name (else the id), description and input
    modalities (without ``image`` when ``image_input`` is false: the adapter
    cannot send one), and the given context window, output cap and efforts."""
    return LlmResolvedModelInfo(
        provider=provider,
        id=model,
        name=(entry.name or entry.id) if entry else model,
        description=entry.description if entry else None,
        # An unlisted id is treated as text-only: claiming image input without
        # knowing would let a host store input the endpoint rejects.
        input_modalities=offered_modalities(entry, image_input=image_input),
        context=None
        if context_window is None
        else LlmModelContext(context_window=context_window),
        default_max_tokens=default_max_tokens,
        reasoning=reasoning,
    )


class ChatCompletionsAdapter(LlmAdapter):
    """Base of the chat-completions adapters: one pooled session per adapter,
    and the metadata every one of them answers alike.

    Subclasses set ``_package`` (named in credential messages) and ``_profile``,
    call ``_connect`` from their constructor, and implement ``_snapshot`` (the
    options in force now, read once per call so a configuration change never
    mixes two generations) and ``stream``. ``close()`` (or leaving a ``with``
    block) closes the pool; streams already running keep their connection until
    they end.
    """

    _package: ClassVar[str]
    _image_input: ClassVar[bool] = True
    """Whether the adapter can send images at all (``list_models`` drops
    ``image`` from the catalog's modalities when not)."""
    attachments: AttachmentReader | None = None
    """The attachment store images are read from; ``None`` refuses images
    (``UNSUPPORTED_CONTENT``). Set per adapter instance."""
    _session: requests.Session
    _profile: WireProfile
    _api_key: Secret | None
    _environ: Mapping[str, str]

    def _connect(
        self,
        *,
        api_key: str | Secret | None,
        environ: Mapping[str, str] | None,
        pool_maxsize: int,
    ) -> None:
        """Check the explicit key and open the connection pool.

        Raises:
            TypeError, LlmError: as ``explicit_api_key``.
        """
        self._environ = os.environ if environ is None else environ
        self._api_key = explicit_api_key(api_key, package=self._package)
        self._session = create_session(pool_maxsize=pool_maxsize)

    def _request_key(self, api_key_env: str | None, *, route: str) -> Secret | None:
        """The key of one request: the explicit one, else the variable
        ``api_key_env`` read now (``api_key_from_environ``), else none."""
        if self._api_key is not None:
            return self._api_key
        if api_key_env is None:
            return None
        return api_key_from_environ(
            self._environ, api_key_env, package=self._package, route=route
        )

    def _key_repr(self, api_key_env: str | None) -> str:
        """How a ``repr`` names the key: never the key itself."""
        if self._api_key is not None:
            return "api_key=***"
        if api_key_env is not None:
            return f"api_key_env={api_key_env!r}"
        return "no key"

    @abc.abstractmethod
    def _snapshot(self) -> AdapterSettings:
        """The adapter's options in force now."""
        ...

    def provider_info(self, provider: str) -> LlmProviderInfo:
        """``{id: provider, name: <the profile's display name>}``."""
        return LlmProviderInfo(id=provider, name=self._profile.provider)

    def provider_retry_policy(self, provider: str) -> RetryPolicy:
        """The configured retry policy."""
        return self._snapshot().retry_policy

    def list_models(self, provider: str) -> tuple[LlmModelInfo, ...]:
        """The advertised catalog."""
        return tuple(
            LlmModelInfo(
                provider=provider,
                id=entry.id,
                name=entry.name or entry.id,
                description=entry.description,
                input_modalities=offered_modalities(
                    entry, image_input=self._image_input
                ),
            )
            for entry in self._snapshot().models
        )

    def close(self) -> None:
        """Close the connection pool. Streams already running keep their
        connection until they end. The adapter stays usable: a later stream
        opens a new connection, released by the next ``close()``."""
        self._session.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
