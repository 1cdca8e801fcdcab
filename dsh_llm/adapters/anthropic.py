"""``AnthropicAdapter``: Claude over the Anthropic Messages wire
(``dsh_llm.adapters._anthropic``) and the shared transport. User guide, with the
option, refusal, stop-reason, usage and error tables: ``docs/anthropic.md``.

Contracts callers may rely on:

- **Route and catalog.** One route, ``anthropic``, displayed as ``Anthropic``.
  The catalog is advisory (any model id is sent as is); by default it lists the
  current Claude models (``_anthropic.catalog.CATALOG``), text and image input.
  ``resolve_model`` needs no I/O: context window and default ``max_tokens``
  (entry, else ``default_context_window`` / ``max_tokens``) and the model's
  efforts (``catalog.thinking_profile``: budget or adaptive thinking).
- **Configuration** is one ``AnthropicConfig``, checked on construction: a bad
  value raises ``AnthropicConfigError`` (``llm-anthropic: <config key> <what is
  wrong>``, ``key`` the camelCase key). The base URL is the explicit one, else
  ``ANTHROPIC_BASE_URL``, else ``https://api.anthropic.com``; ``/v1/messages``
  is appended to it. A stream call reads its options snapshot exactly once.
- **Credentials**, per request: the explicit ``api_key``, else the variable
  ``api_key_env`` (``ANTHROPIC_API_KEY``); missing raises ``MISSING_CREDENTIAL``
  naming it. The key travels in ``x-api-key`` (``ApiKeyAuth``), so an echo of it
  in an error is redacted; it never appears in a message or a ``repr``.
- **Per call**, before any I/O: the image checks (``request_extras``), the
  ``extra_headers`` check, the key, then the body (``_anthropic.request``:
  ``response_format`` as ``output_config.format``, ``extra_body`` merged last)
  and its refusals; then one ``POST {base_url}/v1/messages``.
- **Stream**: ``MessagesTranslator`` through the transport's read loop; a
  ``ping`` is a keep-alive. HTTP errors are classified by Anthropic's
  ``error.type`` (``_anthropic.errors.http_error``) with ``request-id`` and
  ``retry-after`` kept; transport failures, timeouts and aborts as everywhere.
- ``close()`` (or ``with``) closes the connection pool.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar, Final

import attrs

from dsh_llm.adapter import LlmResolvedModelInfo
from dsh_llm.adapters._anthropic import catalog
from dsh_llm.adapters._anthropic.errors import http_error
from dsh_llm.adapters._anthropic.request import (
    ANTHROPIC_VERSION,
    build_messages_request,
    request_headers,
)
from dsh_llm.adapters._anthropic.translate import MessagesTranslator
from dsh_llm.adapters.common import (
    AdapterConfig,
    AdapterConfigError,
    ConfiguredAdapter,
    adapter_field_order,
    api_root_url,
    catalog_entry,
    config_from_options,
    encode_body,
    input_modalities_field,
    model_catalog,
    resolved_model_info,
)
from dsh_llm.config import (
    check_non_empty_str,
    check_one_of,
    check_optional_str,
    check_positive_int,
    check_safe_positive_int,
    field_error,
)
from dsh_llm.credentials import Secret
from dsh_llm.protocol import GenerateOptions, StreamChunk
from dsh_llm.transport.call import StreamingCall, redact_url, url_repr
from dsh_llm.transport.read_loop import read_stream
from dsh_llm.transport.session import (
    ApiKeyAuth,
    NoAuth,
    is_header_name,
    is_header_value,
)
from dsh_llm.transport.sse import SseDecoder

__all__ = [
    "BASE_URL_ENV",
    "DEFAULT_API_KEY_ENV",
    "DEFAULT_CONTEXT_WINDOW",
    "DEFAULT_KEEPALIVE_TIMEOUT_MS",
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_MODELS",
    "DEFAULT_STREAM_IDLE_TIMEOUT_MS",
    "DISPLAY_NAME",
    "MESSAGES_PATH",
    "PROVIDER_ROUTE",
    "PUBLIC_BASE_URL",
    "REASONING_EFFORTS",
    "AnthropicAdapter",
    "AnthropicConfig",
    "AnthropicConfigError",
    "AnthropicModel",
    "messages_url",
    "resolve_base_url",
]

PROVIDER_ROUTE: Final = "anthropic"
"""The one route this adapter serves."""
DISPLAY_NAME: Final = "Anthropic"
"""The route's display name (also the provider named in messages)."""
PUBLIC_BASE_URL: Final = "https://api.anthropic.com"
"""The public API root (``/v1/messages`` is appended)."""
BASE_URL_ENV: Final = "ANTHROPIC_BASE_URL"
"""Environment variable that may name another API root."""
DEFAULT_API_KEY_ENV: Final = "ANTHROPIC_API_KEY"
"""Environment variable the key is read from by default."""
MESSAGES_PATH: Final = "/v1/messages"
"""Appended to the API root to reach the endpoint."""
DEFAULT_STREAM_IDLE_TIMEOUT_MS: Final = 300_000
"""Default idle timeout: the longest silence while waiting for the next event."""
DEFAULT_KEEPALIVE_TIMEOUT_MS: Final = 600_000
"""Default bound on a wait with ``ping`` events but no data."""
DEFAULT_MAX_TOKENS: Final = 8_192
"""``max_tokens`` sent for a model without its own (the API requires one)."""
DEFAULT_CONTEXT_WINDOW: Final = 200_000
"""Context window advertised for a model without its own."""
REASONING_EFFORTS: Final = tuple(
    dict.fromkeys((*catalog.BUDGET_EFFORTS, *catalog.ADAPTIVE_EFFORTS))
)
"""Every effort some Claude model takes (a configured default must be one; each
model accepts its own subset, ``resolve_model`` lists it)."""
_PACKAGE: Final = "llm-anthropic"


class AnthropicConfigError(AdapterConfigError):
    """A bad ``llm-anthropic`` option (a ``ValueError``): the message is
    ``llm-anthropic: <key> <detail>``; ``key`` is the camelCase config key
    (``maxTokens``, ``models[0].contextWindow``) and ``detail`` what is wrong."""

    package = _PACKAGE


def _catalog_modalities(model: AnthropicModel) -> tuple[str, ...]:
    entry = catalog.model_entry(model.id)
    return ("text",) if entry is None else entry.input_modalities


@attrs.frozen(kw_only=True)
class AnthropicModel:
    """One advertised model (config key ``models[]``), checked on construction.
    How it thinks comes from the built-in catalog by id (budget thinking for an
    id it does not know)."""

    config_error: ClassVar[type[AdapterConfigError]] = AnthropicConfigError

    id: str = attrs.field(validator=check_non_empty_str)
    """The wire model id."""
    name: str | None = attrs.field(
        default=None, validator=attrs.validators.optional(check_non_empty_str)
    )
    """Display name (default: the id)."""
    description: str | None = attrs.field(default=None, validator=check_optional_str)
    """What sets it apart."""
    context_window: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(check_positive_int)
    )
    """Its context window (default: ``default_context_window``)."""
    max_tokens: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(check_safe_positive_int)
    )
    """``max_tokens`` sent when the request sets none (default: the config's)."""

    input_modalities: tuple[str, ...] = input_modalities_field(
        attrs.Factory(_catalog_modalities, takes_self=True)
    )
    """Accepted inputs (config key ``inputModalities``): ``("text",)`` or
    ``("text", "image")``; default the built-in catalog's for the id (text and
    image for a Claude model), else ``("text",)``. With ``image``, images are
    sent as ``image`` blocks read from ``adapter.attachments``; a text-only
    model refuses them (``UNSUPPORTED_CONTENT``)."""


DEFAULT_MODELS: Final = tuple(
    AnthropicModel(
        id=entry.id,
        name=entry.name,
        context_window=entry.context_window,
        max_tokens=entry.default_max_tokens,
        input_modalities=entry.input_modalities,
    )
    for entry in catalog.CATALOG
)
"""The catalog advertised when none is configured (``catalog.CATALOG``)."""


def _models(value: object) -> tuple[AnthropicModel, ...]:
    """The ``models`` option (``dsh_llm.adapters.common.model_catalog``);
    ``None`` is ``DEFAULT_MODELS``."""
    if value is None:
        return DEFAULT_MODELS
    return model_catalog(value, AnthropicModel, AnthropicConfigError)


def _root(value: object, source: str | None = None) -> str:
    return api_root_url(
        value, error=AnthropicConfigError, source=source, endpoint=MESSAGES_PATH
    )


def _check_base_url(inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None:
        _root(value)


def _check_header_value(
    inst: object, attribute: attrs.Attribute[Any], value: Any
) -> None:
    check_non_empty_str(inst, attribute, value)
    if not is_header_value(value):
        raise field_error(
            inst, attribute.name, "must be printable ASCII (it travels as a header)"
        )


def _beta(value: Sequence[str]) -> tuple[str, ...]:
    return tuple(value) if isinstance(value, list | tuple) else value  # type: ignore[return-value]


def _check_beta(inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, tuple) or not all(is_header_name(item) for item in value):
        raise field_error(
            inst,
            attribute.name,
            "must be a list of feature names (no spaces, commas or quotes)",
        )


@attrs.frozen(kw_only=True, field_transformer=adapter_field_order)
class AnthropicConfig(AdapterConfig):
    """The one ``AnthropicAdapter`` configuration: the constructor's keyword
    arguments build it, ``AnthropicAdapter.from_config`` takes it, and the
    ``llm-anthropic`` plugin structures its YAML entry into it (camelCase keys:
    ``apiKeyEnv``, ``baseURL``, ``anthropicVersion``...). Every field is checked
    on construction: a bad value raises ``AnthropicConfigError`` keyed by its
    config key. A config never holds a key: ``api_key_env`` names the variable."""

    config_error = AnthropicConfigError
    default_stream_idle_timeout_ms = DEFAULT_STREAM_IDLE_TIMEOUT_MS
    default_stream_keepalive_timeout_ms = DEFAULT_KEEPALIVE_TIMEOUT_MS

    api_key_env: str = attrs.field(
        default=DEFAULT_API_KEY_ENV, validator=check_non_empty_str
    )
    """Environment variable holding the key."""
    base_url: str | None = attrs.field(
        default=None, repr=url_repr, validator=_check_base_url
    )
    """API root; default ``ANTHROPIC_BASE_URL``, then the public URL (its
    credentials are hidden in the ``repr``)."""
    anthropic_version: str = attrs.field(
        default=ANTHROPIC_VERSION, validator=_check_header_value
    )
    """The ``anthropic-version`` header."""
    beta: tuple[str, ...] = attrs.field(
        default=(), converter=_beta, validator=_check_beta
    )
    """``anthropic-beta`` features to send (none by default)."""
    reasoning_effort: str | None = attrs.field(
        default=None,
        validator=attrs.validators.optional(check_one_of(*REASONING_EFFORTS)),
    )
    """Default effort when a request names none (unset: the model's default)."""
    max_tokens: int = attrs.field(
        default=DEFAULT_MAX_TOKENS, validator=check_safe_positive_int
    )
    """``max_tokens`` sent for models without their own."""
    default_context_window: int = attrs.field(
        default=DEFAULT_CONTEXT_WINDOW, validator=check_positive_int
    )
    """Context window of models without their own."""
    models: tuple[AnthropicModel, ...] = attrs.field(default=None, converter=_models)
    """The advertised catalog (``None``: ``DEFAULT_MODELS``; empty: none)."""

    def model(self, model_id: str) -> AnthropicModel | None:
        """The catalog entry for ``model_id``, if listed."""
        return catalog_entry(self.models, model_id)


def resolve_base_url(
    config: AnthropicConfig, environ: Mapping[str, str] | None = None
) -> str:
    """The API root in force: ``config.base_url``, else ``ANTHROPIC_BASE_URL``
    from ``environ`` (default ``os.environ``), else ``PUBLIC_BASE_URL``.

    Raises:
        AnthropicConfigError: keyed ``baseURL`` for a bad ``ANTHROPIC_BASE_URL``
            (the message names the variable, never the URL).
    """
    environ = os.environ if environ is None else environ
    if config.base_url is not None:
        return _root(config.base_url)
    if environ.get(BASE_URL_ENV):
        return _root(environ[BASE_URL_ENV], source=BASE_URL_ENV)
    return PUBLIC_BASE_URL


def messages_url(base_url: str) -> str:
    """The endpoint under API root ``base_url``: ``/v1/messages`` appended to
    its path with exactly one slash, before any query string."""
    parts = urllib.parse.urlsplit(base_url)
    return urllib.parse.urlunsplit(
        parts._replace(path=parts.path.rstrip("/") + MESSAGES_PATH)
    )


def _resolved_model(
    snapshot: AnthropicConfig, provider: str, model: str
) -> LlmResolvedModelInfo:
    entry = snapshot.model(model)
    return resolved_model_info(
        provider,
        model,
        entry,
        context_window=(entry.context_window if entry else None)
        or snapshot.default_context_window,
        default_max_tokens=(entry.max_tokens if entry else None) or snapshot.max_tokens,
        reasoning=catalog.reasoning_info(
            catalog.thinking_profile(model), snapshot.reasoning_effort
        ),
    )


class AnthropicAdapter(ConfiguredAdapter[AnthropicConfig]):
    """Streams Claude over the Anthropic Messages API (see the module docstring).

    The keyword arguments are ``AnthropicConfig``'s fields (``base_url``,
    ``api_key_env``, ``anthropic_version``, ``beta``, ``reasoning_effort``,
    ``max_tokens``, ``default_context_window``, ``models``,
    ``stream_idle_timeout_ms``, ``stream_keepalive_timeout_ms``,
    ``total_timeout_ms``, ``retry_policy``, ``pool_maxsize``,
    ``empty_response_as_stop``) and build one;
    ``AnthropicAdapter.from_config(config)`` takes one built elsewhere.

    Args:
        api_key: The key (``str`` or ``Secret``); ``None`` reads ``api_key_env``
            from the environment at each request.
        environ: Where variables are read (default ``os.environ``, live).
        **options: ``AnthropicConfig`` fields.

    Raises:
        AnthropicConfigError: for an invalid option (a ``ValueError`` reading
            ``llm-anthropic: <config key> ...``, its ``key`` the config key).
        TypeError: for a keyword that is not an ``AnthropicConfig`` field.
        LlmError: ``INVALID_CREDENTIAL`` for an explicit key no header can carry.
    """

    _package = _PACKAGE
    config_class = AnthropicConfig

    def __init__(
        self,
        api_key: str | Secret | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        **options: Any,
    ) -> None:
        self._setup(
            config_from_options(AnthropicConfig, options),
            api_key=api_key,
            environ=environ,
        )

    def _model_info(
        self, snapshot: AnthropicConfig, provider: str, model: str
    ) -> LlmResolvedModelInfo:
        return _resolved_model(snapshot, provider, model)

    def _configure(
        self,
        config: AnthropicConfig,
        *,
        api_key: str | Secret | None,
        environ: Mapping[str, str] | None,
    ) -> None:
        self._base_url = resolve_base_url(config, environ)
        self._display_name = DISPLAY_NAME

    # -- metadata --------------------------------------------------------------------

    # -- streaming -------------------------------------------------------------------

    def _stream(
        self, options: GenerateOptions, snapshot: AnthropicConfig
    ) -> Iterator[StreamChunk]:
        entry = snapshot.model(options.model)
        self._check_image_input(options, entry)
        headers = request_headers(
            options,
            anthropic_version=snapshot.anthropic_version,
            beta=snapshot.beta,
            provider=DISPLAY_NAME,
        )
        key = self._request_key(snapshot.api_key_env, route=PROVIDER_ROUTE)
        body = build_messages_request(
            options,
            model_max_tokens=(entry.max_tokens if entry else None)
            or snapshot.max_tokens,
            thinking=catalog.thinking_profile(options.model),
            default_effort=snapshot.reasoning_effort,
            attachments=self.attachments,
            provider=DISPLAY_NAME,
        )
        call = StreamingCall(
            self._session,
            url=messages_url(self._base_url),
            body=encode_body(body, provider=DISPLAY_NAME),
            headers=headers,
            auth=NoAuth() if key is None else ApiKeyAuth(key, header="x-api-key"),
            provider=DISPLAY_NAME,
            endpoint=self._base_url,
            signal=options.signal,
            idle_timeout_ms=snapshot.stream_idle_timeout_ms,
            keepalive_timeout_ms=snapshot.stream_keepalive_timeout_ms,
            total_timeout_ms=snapshot.total_timeout_ms,
            classify_error=http_error,
        )
        translator = MessagesTranslator(
            provider=DISPLAY_NAME,
            empty_response_as_stop=snapshot.empty_response_as_stop,
        )
        decoder = SseDecoder(terminal_data=None, provider=DISPLAY_NAME)
        yield from read_stream(call, decoder, translator)

    def __repr__(self) -> str:
        key = self._key_repr(self._config.api_key_env)
        return f"AnthropicAdapter(base_url={redact_url(self._base_url)!r}, {key})"
