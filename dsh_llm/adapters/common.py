"""What every HTTP adapter shares, whatever its wire family.

A wire family adds a config class, a pure request builder and a pure translator;
everything else an adapter does is here, once:

- ``HttpAdapter``: the base class (one pooled session, ``close`` and ``with``,
  ``provider_info``, ``provider_retry_policy`` and ``list_models`` from the
  options in force, the key of each request and how a ``repr`` names it).
- ``AdapterConfig`` (the stream timeouts, retry policy, pool size and
  ``empty_response_as_stop``, defined once), ``AdapterConfigError``,
  ``config_from_options``, ``retry_policy_field``: what every adapter config
  class shares (errors keyed by config key, as data).
- ``api_root_url``: the one rule for a ``baseURL`` (``http://``/``https://`` with
  a host and a valid port, no ``#fragment``, optionally not already ending in the
  endpoint appended to it); messages never repeat the URL. ``endpoint_url``
  appends the endpoint, before any query string.
- ``explicit_api_key`` and ``api_key_from_environ``: the credential rules, with
  messages that name where a key came from and never the key.
- ``resolved_model_info`` and ``catalog_entry``: ``resolve_model`` for a catalog.
- ``extra_body``, ``extra_headers`` and image bytes: ``request_extras``.
- Reading a body is the transport's read loop (``dsh_llm.transport.read_loop``).
"""

from __future__ import annotations

import abc
import os
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar, Final, Generic, Protocol, Self, TypeVar

import attrs
import requests

from dsh_llm.adapter import (
    LlmAdapter,
    LlmModelContext,
    LlmModelInfo,
    LlmModelReasoningInfo,
    LlmProviderInfo,
    LlmResolvedModelInfo,
    PreparedAdapterCall,
)
from dsh_llm.adapters.request_extras import AttachmentReader, check_image_input
from dsh_llm.config import (
    RAW_METADATA,
    ConfigError,
    PluginConfigError,
    check_bool,
    check_optional_timeout,
    check_positive_int,
    check_timeout,
    field_error,
    join_key,
    structure_config,
)
from dsh_llm.credentials import Secret, assert_usable_api_key
from dsh_llm.errors import ErrorCode, LlmError
from dsh_llm.protocol import GenerateOptions, StreamChunk
from dsh_llm.retry import RetryPolicy, resolve_retry_policy
from dsh_llm.signal import AbortSignal
from dsh_llm.transport.session import DEFAULT_POOL_MAXSIZE, create_session

__all__ = [
    "AdapterConfig",
    "AdapterConfigError",
    "AdapterSettings",
    "CatalogEntry",
    "ConfiguredAdapter",
    "HttpAdapter",
    "StreamSettings",
    "adapter_field_order",
    "api_key_from_environ",
    "api_root_url",
    "catalog_entry",
    "config_from_options",
    "endpoint_url",
    "explicit_api_key",
    "input_modalities_field",
    "model_catalog",
    "offered_modalities",
    "resolved_model_info",
    "retry_policy_field",
]


class AdapterConfigError(PluginConfigError):
    """A bad adapter option, reported against its config key (``key``, camelCase,
    and ``detail``, as data). The message is ``<package>: <key> <detail>``;
    subclasses set ``package`` to the name of their plugin (``llm-deepseek``,
    ``llm-openai-compatible``)."""

    package: ClassVar[str | None] = "dsh_llm"
    """The package named at the start of the message."""


_Config = TypeVar("_Config")


def config_from_options(
    config_cls: type[_Config], options: Mapping[str, Any]
) -> _Config:
    """An adapter's config class built from its constructor's keyword arguments.

    Raises:
        TypeError: for a keyword that is not a field of ``config_cls`` (the
            message lists the fields).
        AdapterConfigError: from the class's own checks.
    """
    fields = [field.alias or field.name for field in attrs.fields(config_cls)]  # type: ignore[arg-type]
    unknown = sorted(set(options) - set(fields))
    if unknown:
        raise TypeError(
            f"unexpected keyword argument {unknown[0]!r} (the options are the "
            f"{config_cls.__name__} fields: {', '.join(fields)})"
        )
    return config_cls(**options)


INPUT_MODALITIES: tuple[tuple[str, ...], ...] = (("text",), ("text", "image"))
"""The values a catalog model's ``input_modalities`` may take."""


def input_modalities_field(default: Any = ("text",)) -> Any:
    """The ``input_modalities`` field of a catalog model (config key
    ``inputModalities``): ``["text"]`` or ``["text", "image"]``, as a list or a
    tuple; anything else is refused keyed by the field (the model class's
    ``config_error``). ``default`` may be an ``attrs.Factory``."""
    return attrs.field(
        default=default, converter=_modality_tuple, validator=_check_modalities
    )


def _modality_tuple(value: Any) -> Any:
    return tuple(value) if isinstance(value, list | tuple) else value


def _check_modalities(
    inst: object, attribute: attrs.Attribute[Any], value: Any
) -> None:
    if value not in INPUT_MODALITIES:
        raise field_error(inst, attribute.name, 'must be ["text"] or ["text", "image"]')


def retry_policy_field() -> Any:
    """The ``retry_policy`` field of an adapter config: a resolved policy, its
    config mapping (structured by ``dsh_llm.retry.resolve_retry_policy``) or
    ``None`` for the normal defaults; a bad mapping raises the class's
    ``config_error`` keyed by its key path (``retryPolicy.backoff.maxDelayMs``)."""
    return attrs.field(
        default=None,
        converter=attrs.Converter(_retry_policy, takes_self=True),
        metadata={RAW_METADATA: True},
        hash=False,
    )


def _retry_policy(
    value: Mapping[str, Any] | RetryPolicy | None, config: attrs.AttrsInstance
) -> RetryPolicy:
    try:
        return resolve_retry_policy(value, "retryPolicy")
    except ConfigError as exc:
        raise field_error(config, exc.key or "retryPolicy", exc.detail) from None


def _default_idle_timeout(config: AdapterConfig) -> float:
    return config.default_stream_idle_timeout_ms


def _default_keepalive_timeout(config: AdapterConfig) -> float | None:
    return config.default_stream_keepalive_timeout_ms


@attrs.frozen(kw_only=True)
class AdapterConfig:
    """The options every adapter config class shares: the stream timeouts, the
    retry policy, the pool size and ``empty_response_as_stop`` (config keys
    ``streamIdleTimeoutMs``, ``streamKeepaliveTimeoutMs``, ``totalTimeoutMs``,
    ``retryPolicy``, ``poolMaxsize``, ``emptyResponseAsStop``).

    A subclass is a frozen ``kw_only`` attrs class that sets ``config_error``
    (its bad values raise it, keyed by config key) and the two timeout
    defaults, and passes ``field_transformer=adapter_field_order`` (so does a
    subclass of it, such as a plugin's config) so the adapter's own fields come
    before the shared ones in the ``repr``, ``attrs.fields`` and messages.
    """

    config_error: ClassVar[type[AdapterConfigError]] = AdapterConfigError
    """What a bad value raises (``field_error`` reads it)."""
    default_stream_idle_timeout_ms: ClassVar[float]
    """The class's default ``stream_idle_timeout_ms``."""
    default_stream_keepalive_timeout_ms: ClassVar[float | None]
    """The class's default ``stream_keepalive_timeout_ms`` (``None``:
    unbounded)."""

    stream_idle_timeout_ms: float = attrs.field(
        default=attrs.Factory(_default_idle_timeout, takes_self=True),
        validator=check_timeout,
    )
    """Idle timeout: the longest silence while waiting for the next event, chunk
    or line (default ``default_stream_idle_timeout_ms``)."""
    stream_keepalive_timeout_ms: float | None = attrs.field(
        default=attrs.Factory(_default_keepalive_timeout, takes_self=True),
        validator=check_optional_timeout,
    )
    """Longest wait with keep-alives (comments, ``ping`` events) but no data
    (``None``: unbounded; default ``default_stream_keepalive_timeout_ms``)."""
    total_timeout_ms: float | None = attrs.field(
        default=None, validator=check_optional_timeout
    )
    """Longest whole call, think time excluded (``None``: unbounded)."""
    retry_policy: RetryPolicy = retry_policy_field()  # noqa: RUF009
    """The retry policy: a resolved policy, or its config mapping
    (``docs/plugins.md``); ``None``: the normal defaults."""
    pool_maxsize: int = attrs.field(
        default=DEFAULT_POOL_MAXSIZE, validator=check_positive_int
    )
    """Idle connections kept per host."""
    empty_response_as_stop: bool = attrs.field(default=False, validator=check_bool)
    """Report a blockless successful finish (``stop``, ``end_turn``, ``STOP``,
    ``completed``) as ``stop`` instead of ``EMPTY_RESPONSE``."""


_SHARED_FIELDS: Final = tuple(field.name for field in attrs.fields(AdapterConfig))


def adapter_field_order(
    cls: type, fields: list[attrs.Attribute[Any]]
) -> list[attrs.Attribute[Any]]:
    """The attrs ``field_transformer`` of every ``AdapterConfig`` subclass: a
    direct subclass lists its own fields first, then the shared ones; a subclass
    of such a class (a plugin's config) keeps that order and adds its own
    fields after it. The order is what a ``repr``, ``attrs.fields`` and the
    checks of several bad values go by."""
    parent = next(base for base in cls.__mro__[1:] if attrs.has(base))
    if parent is AdapterConfig:
        order = [f.name for f in fields if f.name not in _SHARED_FIELDS]
        order += _SHARED_FIELDS
    else:
        order = [f.name for f in attrs.fields(parent)]
    rank = {name: index for index, name in enumerate(order)}
    return sorted(fields, key=lambda field: rank.get(field.name, len(rank)))


def api_root_url(
    value: object,
    *,
    error: type[AdapterConfigError],
    source: str | None = None,
    endpoint: str | None = None,
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
    if endpoint is not None and path.endswith(endpoint):
        raise refuse(
            "must end at the API root (e.g. http://127.0.0.1:8080/v1); "
            f"{endpoint} is appended to it"
        )
    return urllib.parse.urlunsplit(parts._replace(path=path, fragment=""))


def endpoint_url(base_url: str, endpoint: str) -> str:
    """The endpoint under API root ``base_url`` (as ``api_root_url`` returns it):
    ``endpoint`` (``/responses``) appended to its path with exactly one slash,
    before any query string (an Azure-style ``?api-version=...`` is kept)."""
    parts = urllib.parse.urlsplit(base_url)
    path = parts.path.rstrip("/") + "/" + endpoint.lstrip("/")
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


_Model = TypeVar("_Model", bound=CatalogEntry)


def model_catalog(
    specs: object, model_cls: type[_Model], error: type[AdapterConfigError]
) -> tuple[_Model, ...]:
    """A ``models`` option read into ``model_cls`` values: each entry a value, a
    model id or a config mapping (structured by the one config mechanism);
    ``None`` is no catalog.

    Raises:
        AdapterConfigError: ``error`` keyed ``models``, ``models[i]`` or
            ``models[i].<key>`` for a bad entry or a repeated id.
    """
    if specs is None:
        return ()
    if isinstance(specs, str | Mapping) or not isinstance(specs, Sequence):
        raise error("models", "must be a list of models")
    entries: list[_Model] = []
    seen: set[str] = set()
    for index, spec in enumerate(specs):
        where = f"models[{index}]"
        entry = _model_entry(spec, where, model_cls, error)
        if entry.id in seen:
            raise error(f"{where}.id", f'repeats the model "{entry.id}"')
        seen.add(entry.id)
        entries.append(entry)
    return tuple(entries)


def _model_entry(
    spec: object, where: str, model_cls: type[_Model], error: type[AdapterConfigError]
) -> _Model:
    if isinstance(spec, model_cls):
        return spec
    if isinstance(spec, str):
        if not spec:
            raise error(where, "must be a non-empty model id")
        return model_cls(id=spec)  # type: ignore[call-arg]
    if not isinstance(spec, Mapping):
        raise error(
            where, f"must be a model id or a mapping, got {type(spec).__name__}"
        )
    try:
        entry: _Model = structure_config(model_cls, spec)
    except ConfigError as exc:
        raise error(join_key(where, exc.key or ""), exc.detail) from None
    return entry


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
    modalities, and the given context window, output cap and efforts."""
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


class HttpAdapter(LlmAdapter):
    """Base of every HTTP adapter: one pooled session per adapter, and the
    metadata every one of them answers alike.

    Subclasses set ``_package`` (named in credential messages) and
    ``_display_name`` (the chat-completions ones through their profile), call
    ``_connect`` from their constructor, and implement ``_snapshot`` (the
    options in force now, read once per call so a configuration change never
    mixes two generations) and ``stream``. ``close()`` (or leaving a ``with``
    block) closes the pool; streams already running keep their connection until
    they end.
    """

    attachments: AttachmentReader | None = None
    """The attachment store images are read from (any object with
    ``get(attachment_id) -> bytes | None``, such as
    ``dsh_llm.attachments.MemoryAttachmentStore``); ``None`` (the default)
    refuses images with ``MISSING_ATTACHMENT``. Set per adapter instance."""

    _package: ClassVar[str]
    _image_input: ClassVar[bool] = True
    """Whether the adapter can send images at all (``list_models`` drops
    ``image`` from the catalog's modalities when not)."""
    _session: requests.Session
    _display_name: str
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

    def _check_image_input(
        self, options: GenerateOptions, entry: CatalogEntry | None
    ) -> None:
        """``request_extras.check_image_input`` for ``options`` against the
        model's catalog ``entry`` (``None``: unlisted, text only) and this
        adapter's ``attachments``, before any I/O."""
        check_image_input(
            options,
            provider=self._display_name,
            modalities=None if entry is None else entry.input_modalities,
            store=self.attachments,
        )

    def provider_info(self, provider: str) -> LlmProviderInfo:
        """``{id: provider, name: <the profile's display name>}``."""
        return LlmProviderInfo(id=provider, name=self._display_name)

    def provider_retry_policy(self, provider: str) -> RetryPolicy:
        """The configured retry policy."""
        return self._snapshot().retry_policy

    def list_models(
        self, provider: str, signal: AbortSignal | None = None
    ) -> tuple[LlmModelInfo, ...]:
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


class PooledSettings(Protocol):
    """What ``ConfiguredAdapter`` reads from any adapter config class."""

    @property
    def pool_maxsize(self) -> int:
        """Idle connections kept per host."""
        ...


_C = TypeVar("_C", bound=PooledSettings)


class ConfiguredAdapter(HttpAdapter, Generic[_C]):
    """An ``HttpAdapter`` over one validated config value: the part of every
    adapter that is the same whatever its wire.

    - ``from_config(config, *, api_key=None, environ=None)`` builds one from a
      config of ``config_class`` (a ``TypeError`` for anything else); a
      constructor builds its config (``config_from_options``) and calls
      ``_setup``.
    - ``config`` and ``base_url`` are what is in force; ``resolve_model``,
      ``prepare_call`` and ``stream`` read one snapshot of the config per call.

    Subclasses set ``config_class`` and implement ``_configure`` (what a call
    needs beyond the config: the base URL, a profile, headers), ``_model_info``
    and ``_stream``.
    """

    config_class: ClassVar[type[Any]]
    _config: _C
    _base_url: str

    @classmethod
    def from_config(
        cls,
        config: _C,
        *,
        api_key: str | Secret | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> Self:
        """An adapter over ``config`` (built and checked beforehand, e.g. by a
        plugin from YAML).

        Raises:
            TypeError: for a ``config`` that is not a ``config_class``.
            AdapterConfigError: for what only the adapter can check (a key given
                two ways, a base URL read from the environment).
        """
        if not isinstance(config, cls.config_class):
            name = cls.config_class.__name__
            article = "an" if name[:1] in "AEIOU" else "a"
            raise TypeError(
                f"config must be {article} {name}, got {type(config).__name__}"
            )
        adapter = cls.__new__(cls)
        adapter._setup(config, api_key=api_key, environ=environ)
        return adapter

    def _setup(
        self,
        config: _C,
        *,
        api_key: str | Secret | None,
        environ: Mapping[str, str] | None,
    ) -> None:
        self._config = config
        self._configure(config, api_key=api_key, environ=environ)
        self._connect(
            api_key=api_key, environ=environ, pool_maxsize=config.pool_maxsize
        )

    @abc.abstractmethod
    def _configure(
        self,
        config: _C,
        *,
        api_key: str | Secret | None,
        environ: Mapping[str, str] | None,
    ) -> None:
        """Derive what calls need from ``config`` (``_base_url`` at least)."""
        ...

    @property
    def config(self) -> _C:
        """The configuration in force."""
        return self._config

    @property
    def base_url(self) -> str:
        """The API root in force, without a trailing slash."""
        return self._base_url

    def _snapshot(self) -> Any:
        return self._config

    @abc.abstractmethod
    def _model_info(
        self, snapshot: _C, provider: str, model: str
    ) -> LlmResolvedModelInfo:
        """What ``resolve_model`` answers under ``snapshot`` (no I/O)."""
        ...

    @abc.abstractmethod
    def _stream(self, options: GenerateOptions, snapshot: _C) -> Iterator[StreamChunk]:
        """One call under ``snapshot`` (a generator: checks run at the first
        ``next()``)."""
        ...

    def resolve_model(
        self, provider: str, model: str, signal: AbortSignal | None = None
    ) -> LlmResolvedModelInfo:
        """Model facts without I/O."""
        return self._model_info(self._config, provider, model)

    def prepare_call(
        self, provider: str, model: str, signal: AbortSignal | None = None
    ) -> PreparedAdapterCall:
        """Model facts and dispatch from one config snapshot."""
        snapshot = self._config
        return PreparedAdapterCall(
            model=self._model_info(snapshot, provider, model),
            stream=lambda options: self._stream(options, snapshot),
        )

    def stream(self, options: GenerateOptions) -> Iterator[StreamChunk]:
        """Stream one call (a generator; checks run at the first ``next()``).

        Raises:
            LlmError: see the adapter's docs page and ``docs/errors.md``.
        """
        return self._stream(options, self._config)
