"""What every adapter's configuration shares, whatever its wire family.

- ``AdapterConfig``: the options every adapter config class has (the stream
  timeouts, retry policy, pool size, ``empty_response_as_stop``), defined once; a
  family's config class extends it and names its ``package``.
- ``AdapterConfigError``: the one error of a bad adapter option, keyed by config
  key (``key``, ``detail``, as data) and naming the config's package.
- ``CatalogModel``: the one validated catalog entry (``models[]``), which a family
  extends only where it adds fields; ``model_catalog`` reads a ``models`` option
  into entries (ids, mappings or values) through the one config mechanism.
- ``api_root_url``: the one rule for a ``baseURL``; messages never repeat the URL.
  ``RootRule`` applies it for a family (the check of its config's ``base_url``,
  ``field``), ``BaseUrlRule`` also finds the root in force (the config's, else
  an environment variable's, else the public one).
- ``api_key_env_field``: the ``api_key_env`` field every keyed config declares;
  ``reasoning_effort_field``: the optional default effort of a fixed set.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any
from typing import ClassVar
from typing import Final
from typing import Generic
from typing import Protocol
from typing import TypeVar

import attrs

from dsh_llm.config import RAW_METADATA
from dsh_llm.config import ConfigError
from dsh_llm.config import PluginConfigError
from dsh_llm.config import check_bool
from dsh_llm.config import check_non_empty_str
from dsh_llm.config import check_one_of
from dsh_llm.config import check_optional_str
from dsh_llm.config import check_optional_timeout
from dsh_llm.config import check_positive_int
from dsh_llm.config import check_safe_positive_int
from dsh_llm.config import check_timeout
from dsh_llm.config import field_error
from dsh_llm.config import join_key
from dsh_llm.config import structure_config
from dsh_llm.retry import RetryPolicy
from dsh_llm.retry import resolve_retry_policy
from dsh_llm.transport.call import url_repr
from dsh_llm.transport.session import DEFAULT_POOL_MAXSIZE


class AdapterConfigError(PluginConfigError):
    """A bad adapter option (a ``ValueError``), reported against its config key:
    ``key`` (camelCase, e.g. ``maxTokens`` or ``models[1].contextWindow``) and
    ``detail`` are data; the message is ``<package>: <key> <detail>``, where the
    package is the config's (``llm-anthropic``)."""


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


INPUT_MODALITIES: Final[tuple[tuple[str, ...], ...]] = (("text",), ("text", "image"))
"""The values a catalog model's ``input_modalities`` may take."""


def _modality_tuple(value: Any) -> Any:
    return tuple(value) if isinstance(value, list | tuple) else value


def _check_modalities(
    inst: object, attribute: attrs.Attribute[Any], value: Any
) -> None:
    if value not in INPUT_MODALITIES:
        raise field_error(inst, attribute.name, 'must be ["text"] or ["text", "image"]')


def _retry_policy(
    value: Mapping[str, Any] | RetryPolicy | None, config: attrs.AttrsInstance
) -> RetryPolicy:
    try:
        return resolve_retry_policy(value, "retryPolicy")
    except ConfigError as exc:
        raise field_error(config, exc.key or "retryPolicy", exc.detail) from None


def _retry_policy_field() -> Any:
    # A function, not a field written in the class: mypy's attrs plugin does
    # not follow a converter that takes the instance.
    return attrs.field(
        default=None,
        converter=attrs.Converter(_retry_policy, takes_self=True),
        metadata={RAW_METADATA: True},
        hash=False,
    )


DEFAULT_STREAM_IDLE_TIMEOUT_MS: Final = 300_000
"""The idle timeout of a config class that names none: a thinking model may be
silent for minutes, and a local server may take as long to load a model."""
DEFAULT_KEEPALIVE_TIMEOUT_MS: Final = 600_000
"""The keep-alive bound of a config class that names none: DeepSeek closes a
request that has not started inference after 10 minutes, and OpenRouter sends
``: OPENROUTER PROCESSING`` comments while a request is queued."""


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

    A subclass is its adapter's one configuration: the adapter's keyword
    arguments build it, ``from_config`` takes it, and its plugin structures a
    YAML entry into it (camelCase config keys). It is a frozen ``kw_only`` attrs
    class that sets ``package`` (its plugin's name, named in its errors) and,
    where they differ, the two timeout defaults, and passes
    ``field_transformer=adapter_field_order`` (so does a subclass of it, such as
    a plugin's config) so the adapter's own fields come before the shared ones
    in the ``repr``, ``attrs.fields`` and messages. Every field is checked on
    construction: a bad value raises ``AdapterConfigError`` keyed by its config
    key. A config never holds a credential: ``api_key_env``
    (``api_key_env_field``) names the variable a key is read from.
    """

    config_error: ClassVar[type[PluginConfigError]] = AdapterConfigError
    """What a bad value raises (``dsh_llm.config.field_error`` reads it)."""
    package: ClassVar[str] = "dsh_llm"
    """The package named in the config's errors (``llm-anthropic``)."""
    default_stream_idle_timeout_ms: ClassVar[float] = DEFAULT_STREAM_IDLE_TIMEOUT_MS
    """The class's default ``stream_idle_timeout_ms``."""
    default_stream_keepalive_timeout_ms: ClassVar[float | None] = (
        DEFAULT_KEEPALIVE_TIMEOUT_MS
    )
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
    retry_policy: RetryPolicy = _retry_policy_field()  # noqa: RUF009
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


def api_key_env_field(default: str | None) -> Any:
    """A config's ``api_key_env`` field (config key ``apiKeyEnv``): the name of
    the environment variable a key is read from at each request, ``default``
    unless configured; with a ``None`` default it may be ``None`` (no key).
    """
    if default is None:
        return attrs.field(
            default=None, validator=attrs.validators.optional(check_non_empty_str)
        )
    return attrs.field(default=default, validator=check_non_empty_str)


def reasoning_effort_field(efforts: Sequence[str]) -> Any:
    """A config's ``reasoning_effort`` field (config key ``reasoningEffort``):
    the default effort of a request that names none, one of ``efforts``, or
    ``None`` (unset)."""
    return attrs.field(
        default=None, validator=attrs.validators.optional(check_one_of(*efforts))
    )


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


# --- the catalog ------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class CatalogModel:
    """One advertised model (config key ``models[]``), checked on construction: a
    bad value raises ``AdapterConfigError`` keyed by its config key. A family
    extends it only where it adds fields.
    """

    config_error: ClassVar[type[PluginConfigError]] = AdapterConfigError
    """What a bad value raises."""

    id: str = attrs.field(validator=check_non_empty_str)
    """The wire model id."""
    name: str | None = attrs.field(
        default=None, validator=attrs.validators.optional(check_non_empty_str)
    )
    """Display name (default: the id)."""
    description: str | None = attrs.field(default=None, validator=check_optional_str)
    """What sets it apart."""
    context_window: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(check_safe_positive_int)
    )
    """Its context window in tokens, when known (default: the config's, if any)."""
    max_tokens: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(check_safe_positive_int)
    )
    """Its output cap, sent when a request names none (default: the config's, if
    any, else the server's)."""
    input_modalities: tuple[str, ...] = attrs.field(
        default=("text",), converter=_modality_tuple, validator=_check_modalities
    )
    """Accepted inputs (config key ``inputModalities``): ``("text",)`` or
    ``("text", "image")``. With ``image``, images are sent as the wire carries
    them, read from the adapter's ``attachments``; a text-only model refuses them
    (``UNSUPPORTED_CONTENT``)."""


class CatalogEntry(Protocol):
    """One advertised model, as the shared metadata needs it."""

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

    @property
    def context_window(self) -> int | None:
        """Its context window in tokens, when known."""
        ...

    @property
    def max_tokens(self) -> int | None:
        """Its output cap, when known."""
        ...


_Entry = TypeVar("_Entry", bound=CatalogEntry)


def catalog_entry(models: Sequence[_Entry] | None, model_id: str) -> _Entry | None:
    """The entry of ``models`` whose id is ``model_id``, if listed."""
    if models is None:
        return None
    return next((entry for entry in models if entry.id == model_id), None)


class CatalogLookup(Generic[_Entry]):
    """What a config with a ``models`` field (entries of ``_Entry``) gets: its
    ``model`` lookup. A family's config class lists it after ``AdapterConfig``
    (``class GeminiConfig(AdapterConfig, CatalogLookup[GeminiModel])``)."""

    __slots__ = ()

    models: Sequence[_Entry] | None
    """The advertised catalog: the config's own ``models`` field."""

    def model(self, model_id: str) -> _Entry | None:
        """The catalog entry for ``model_id``, if listed."""
        return catalog_entry(self.models, model_id)


def model_catalog(
    specs: object,
    model_cls: type[_Entry],
    *,
    package: str,
    defaults: Callable[[str], Mapping[str, Any]] | None = None,
    default: tuple[_Entry, ...] = (),
) -> tuple[_Entry, ...]:
    """A ``models`` option read into ``model_cls`` values: each entry a value, a
    model id or a config mapping (structured by the one config mechanism);
    ``None`` is ``default`` (a family's built-in catalog; none by default).
    ``defaults(id)`` gives per-id field values for what an
    id or a mapping leaves out (a family's built-in catalog).

    Raises:
        AdapterConfigError: naming ``package``, keyed ``models``, ``models[i]`` or
            ``models[i].<key>`` for a bad entry or a repeated id.
    """
    if specs is None:
        return default
    if isinstance(specs, str | Mapping) or not isinstance(specs, Sequence):
        raise AdapterConfigError("models", "must be a list of models", package=package)
    entries: list[_Entry] = []
    seen: set[str] = set()
    for index, spec in enumerate(specs):
        where = f"models[{index}]"
        entry = _model_entry(spec, where, model_cls, package, defaults)
        if entry.id in seen:
            raise AdapterConfigError(
                f"{where}.id", f'repeats the model "{entry.id}"', package=package
            )
        seen.add(entry.id)
        entries.append(entry)
    return tuple(entries)


def _model_entry(
    spec: object,
    where: str,
    model_cls: type[_Entry],
    package: str,
    defaults: Callable[[str], Mapping[str, Any]] | None,
) -> _Entry:
    if isinstance(spec, model_cls):
        return spec
    if isinstance(spec, str):
        if not spec:
            raise AdapterConfigError(
                where, "must be a non-empty model id", package=package
            )
        spec = {"id": spec}
    if not isinstance(spec, Mapping):
        raise AdapterConfigError(
            where,
            f"must be a model id or a mapping, got {type(spec).__name__}",
            package=package,
        )
    model_id = spec.get("id")
    if defaults is not None and isinstance(model_id, str) and model_id:
        spec = {**defaults(model_id), **spec}
    try:
        entry: _Entry = structure_config(model_cls, spec)
    except ConfigError as exc:
        raise AdapterConfigError(
            join_key(where, exc.key or ""), exc.detail, package=package
        ) from None
    return entry


# --- the API root -----------------------------------------------------------------


def api_root_url(
    value: object,
    *,
    package: str,
    source: str | None = None,
    endpoint: str | None = None,
) -> str:
    """Check an API root (config key ``baseURL``) and normalise it.

    The root must be an ``http://`` or ``https://`` URL with a host (and, when
    given, a valid port), without a ``#fragment``, and must not already end in
    ``endpoint`` (which is appended to it). The trailing slash of its path is
    dropped; a query string (Azure-style ``?api-version=...``) is kept.

    Args:
        value: The URL as given.
        package: The config's package, named in the error.
        source: Where the value came from when not from ``baseURL`` itself
            (an environment variable's name), named in the message.
        endpoint: The path appended to the root (``/chat/completions``).

    Raises:
        AdapterConfigError: keyed ``baseURL``; the message never contains the URL
            (it may carry a password).
    """

    def refuse(detail: str) -> AdapterConfigError:
        where = "" if source is None else f" (read from {source})"
        return AdapterConfigError("baseURL", detail + where, package=package)

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


@attrs.frozen(kw_only=True)
class RootRule:
    """How a family checks an API root: ``api_root_url`` against ``endpoint``,
    naming ``package``."""

    package: str
    """The config's package, named in the errors."""
    endpoint: str
    """The path appended to the root (a root may not already end in it)."""

    def check(self, inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
        """The attrs validator of a config's optional ``base_url`` (``None``
        passes).

        Raises:
            AdapterConfigError: keyed ``baseURL`` (``api_root_url``).
        """
        if value is not None:
            self.root(value)

    def check_given(
        self, inst: object, attribute: attrs.Attribute[Any], value: Any
    ) -> None:
        """The attrs validator of a config's ``base_url`` with a default
        (``None`` is refused).

        Raises:
            AdapterConfigError: keyed ``baseURL`` (``api_root_url``).
        """
        self.root(value)

    def field(self, default: str | None = None) -> Any:
        """A config's ``base_url`` field (config key ``baseURL``) checked by this
        rule, its credentials hidden in the ``repr``: ``default`` unless
        configured; with a ``None`` default it may be ``None`` (the family finds
        the root elsewhere)."""
        check = self.check if default is None else self.check_given
        return attrs.field(default=default, repr=url_repr, validator=check)

    def root(self, value: object, source: str | None = None) -> str:
        """``value`` checked and normalised as this family's API root
        (``api_root_url``; ``source`` names where it was read, if not from
        ``baseURL``).

        Raises:
            AdapterConfigError: keyed ``baseURL``.
        """
        return api_root_url(
            value, package=self.package, source=source, endpoint=self.endpoint
        )


@attrs.frozen(kw_only=True)
class BaseUrlRule(RootRule):
    """Where a family's API root comes from: the configured ``base_url``, else
    the variable ``env`` (when set and not empty), else ``public``; each checked
    and normalised by ``api_root_url`` against ``endpoint``, naming ``package``.
    """

    public: str
    """The root when neither the config nor the environment names one."""
    env: str | None = None
    """The environment variable that may name another root (``None``: none)."""

    def resolve(
        self, base_url: str | None, environ: Mapping[str, str] | None = None
    ) -> str:
        """The API root in force for a config's ``base_url``, reading ``env``
        from ``environ`` (default ``os.environ``).

        Raises:
            AdapterConfigError: keyed ``baseURL`` for a bad value of ``env``
                (the message names the variable, never the URL).
        """
        environ = os.environ if environ is None else environ
        if base_url is not None:
            return self.root(base_url)
        if self.env is not None and environ.get(self.env):
            return self.root(environ[self.env], source=self.env)
        return self.public
