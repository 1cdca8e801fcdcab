"""``GeminiAdapter``: Google's Gemini API (``streamGenerateContent``) through the
shared transport. User guide (options, efforts, refusals, codes): ``docs/gemini.md``.

Contracts callers may rely on:

- **Route** ``gemini``, displayed ``Gemini``; one config class,
  ``GeminiConfig``, built from the constructor's keywords or taken by
  ``from_config`` (the ``llm-gemini`` plugin structures its YAML entry into it).
  A bad option raises ``GeminiConfigError`` (``llm-gemini: <key> <detail>``).
- **Key**: the explicit ``api_key``, else ``api_key_env`` (``GEMINI_API_KEY``)
  read at each request (``MISSING_CREDENTIAL`` naming it when unset). It travels
  in the ``x-goog-api-key`` header, never in the URL; the call's redactor knows
  it, so a key the server echoes never reaches an error. No ``repr`` shows it.
- **Catalog** advisory (``dsh_llm.adapters._gemini.catalog``); ``resolve_model``
  and ``list_models`` need no I/O. Efforts: the model's (``thinkingLevel`` or
  ``thinkingBudget``); the default is the configured ``reasoning_effort`` when
  the model offers it, else the model's.
- ``stream`` is a generator: at the first ``next()`` the request is built and
  checked (every refusal before any I/O: ``docs/gemini.md``), then the key,
  then one ``POST {base}/v1beta/models/{model}:streamGenerateContent?alt=sse``.
- **Extras**: ``response_format`` as ``generationConfig.responseMimeType`` +
  ``responseJsonSchema``, ``extra_body`` merged last, ``extra_headers`` sent,
  images as ``inlineData`` parts (also in tool results on Gemini 3).
- **Stream**: ``GeminiTranslator`` (strict order, whole calls, replay of thought
  signatures, running usage). EOF without a ``finishReason`` is
  ``STREAM_CLOSED``; HTTP errors are classified by ``gemini_http_error``
  (``RESOURCE_EXHAUSTED``'s ``retryDelay`` becomes the retry-after).
- ``close()`` (or ``with``) closes the connection pool (``HttpAdapter``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

import attrs

from dsh_llm.adapter import (
    LlmModelReasoningInfo,
    LlmReasoningEffortInfo,
    LlmResolvedModelInfo,
)
from dsh_llm.adapters._gemini.catalog import (
    DEFAULT_MODELS,
    EFFORT_BUDGETS,
    EFFORT_LEVELS,
    GeminiModel,
    model_for,
)
from dsh_llm.adapters._gemini.errors import gemini_http_error
from dsh_llm.adapters._gemini.request import (
    API_KEY_HEADER,
    PROVIDER,
    GeminiKeyAuth,
    build_generate_request,
    stream_url,
)
from dsh_llm.adapters._gemini.translate import GeminiTranslator
from dsh_llm.adapters._wire.adapter import encode_body
from dsh_llm.adapters.common import (
    AdapterConfig,
    AdapterConfigError,
    ConfiguredAdapter,
    adapter_field_order,
    api_root_url,
    catalog_entry,
    config_from_options,
    model_catalog,
    resolved_model_info,
)
from dsh_llm.adapters.request_extras import request_headers
from dsh_llm.config import check_non_empty_str, field_error
from dsh_llm.credentials import Secret
from dsh_llm.protocol import GenerateOptions, StreamChunk
from dsh_llm.transport.call import StreamingCall, redact_url, url_repr
from dsh_llm.transport.read_loop import read_stream
from dsh_llm.transport.session import stream_headers
from dsh_llm.transport.sse import SseDecoder

__all__ = [
    "API_PATH",
    "DEFAULT_API_KEY_ENV",
    "DEFAULT_MODELS",
    "DEFAULT_STREAM_IDLE_TIMEOUT_MS",
    "DISPLAY_NAME",
    "PROVIDER_ROUTE",
    "PUBLIC_BASE_URL",
    "GeminiAdapter",
    "GeminiConfig",
    "GeminiConfigError",
    "GeminiModel",
]

PROVIDER_ROUTE: Final = "gemini"
"""The one route this adapter serves."""
DISPLAY_NAME: Final = PROVIDER
"""The route's display name (``Gemini``)."""
PUBLIC_BASE_URL: Final = "https://generativelanguage.googleapis.com"
"""The public API root (``/v1beta/models/...`` is appended)."""
API_PATH: Final = "/v1beta"
"""The API version path appended to the root (a root may not already end in it)."""
DEFAULT_API_KEY_ENV: Final = "GEMINI_API_KEY"
"""Environment variable the key is read from by default."""
DEFAULT_STREAM_IDLE_TIMEOUT_MS: Final = 300_000
"""Default idle timeout (a thinking model may be silent for minutes)."""
_PACKAGE: Final = "llm-gemini"


class GeminiConfigError(AdapterConfigError):
    """A bad ``llm-gemini`` option (a ``ValueError``): ``llm-gemini: <key>
    <detail>``; ``key`` is the camelCase config key (``models[0].efforts``)."""

    package = _PACKAGE


def _models(value: object) -> tuple[GeminiModel, ...]:
    """The ``models`` option (``dsh_llm.adapters.common.model_catalog``);
    ``None`` is ``DEFAULT_MODELS``."""
    if value is None:
        return DEFAULT_MODELS
    return model_catalog(value, GeminiModel, GeminiConfigError)


def _check_models(inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    """What a Gemini entry must hold beyond its type (efforts that fit its
    thinking style, positive limits, the modalities it can send)."""
    for index, entry in enumerate(value):
        where = f"models[{index}]"
        table = EFFORT_LEVELS if entry.thinking == "level" else EFFORT_BUDGETS
        unknown = [effort for effort in entry.efforts if effort not in table]
        if unknown:
            raise GeminiConfigError(
                f"{where}.efforts",
                f'must contain only {", ".join(table)} for thinking "{entry.thinking}"',
            )
        if entry.default_effort is not None and entry.default_effort not in (
            entry.efforts
        ):
            raise GeminiConfigError(
                f"{where}.defaultEffort", "must be one of the model's efforts"
            )
        for name in ("context_window", "max_tokens"):
            number = getattr(entry, name)
            if number is not None and (type(number) is not int or number <= 0):
                key = "contextWindow" if name == "context_window" else "maxTokens"
                raise GeminiConfigError(f"{where}.{key}", "must be a positive integer")
        if entry.input_modalities not in (("text",), ("text", "image")):
            raise GeminiConfigError(
                f"{where}.inputModalities", 'must be ["text"] or ["text", "image"]'
            )


def _check_base_url(inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None:
        api_root_url(value, error=GeminiConfigError, endpoint=API_PATH)


def _check_effort(inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    known = (*EFFORT_LEVELS, *EFFORT_BUDGETS)
    if value is not None and value not in known:
        raise field_error(
            inst, attribute.name, f"must be one of {', '.join(dict.fromkeys(known))}"
        )


@attrs.frozen(kw_only=True, field_transformer=adapter_field_order)
class GeminiConfig(AdapterConfig):
    """The one ``GeminiAdapter`` configuration (camelCase keys in YAML:
    ``apiKeyEnv``, ``baseURL``, ``reasoningEffort``...). Every field is checked
    on construction (``GeminiConfigError`` keyed by its config key). A config
    never holds a key: ``api_key_env`` names the variable."""

    config_error = GeminiConfigError
    default_stream_idle_timeout_ms = DEFAULT_STREAM_IDLE_TIMEOUT_MS
    default_stream_keepalive_timeout_ms = None

    api_key_env: str = attrs.field(
        default=DEFAULT_API_KEY_ENV, validator=check_non_empty_str
    )
    """Environment variable holding the key."""
    base_url: str | None = attrs.field(
        default=None, repr=url_repr, validator=_check_base_url
    )
    """API root (``None``: ``PUBLIC_BASE_URL``); must not end in ``/v1beta``."""
    reasoning_effort: str | None = attrs.field(default=None, validator=_check_effort)
    """Default effort, used when a request names none and the model offers it."""
    models: tuple[GeminiModel, ...] = attrs.field(
        default=None, converter=_models, validator=_check_models
    )
    """The advertised catalog (``None``: ``DEFAULT_MODELS``; empty: none)."""

    def model(self, model_id: str) -> GeminiModel | None:
        """The catalog entry for ``model_id``, if listed."""
        return catalog_entry(self.models, model_id)


def _effort_name(effort: str) -> str:
    return "Auto" if effort == "auto" else effort.capitalize()


def _default_effort(config: GeminiConfig, model: GeminiModel) -> str | None:
    if config.reasoning_effort in model.efforts:
        return config.reasoning_effort
    return model.default_effort


def _resolved_model(
    config: GeminiConfig, provider: str, model_id: str
) -> LlmResolvedModelInfo:
    entry = config.model(model_id)
    model = model_for(model_id, config.models)
    reasoning = LlmModelReasoningInfo(
        efforts=tuple(
            LlmReasoningEffortInfo(id=effort, name=_effort_name(effort))
            for effort in model.efforts
        ),
        default_effort=_default_effort(config, model),
    )
    return resolved_model_info(
        provider,
        model_id,
        entry,
        context_window=model.context_window,
        default_max_tokens=model.max_tokens,
        reasoning=reasoning,
    )


class GeminiAdapter(ConfiguredAdapter[GeminiConfig]):
    """Streams Gemini ``streamGenerateContent`` (see the module docstring).

    Args:
        api_key: The key (``str`` or ``Secret``); ``None`` reads ``api_key_env``
            from the environment at each request.
        base_url: The API root (``None``: ``PUBLIC_BASE_URL``).
        api_key_env: The variable holding the key (``GEMINI_API_KEY``).
        environ: Where variables are read (default ``os.environ``, live).
        **options: Further ``GeminiConfig`` fields.

    Raises:
        GeminiConfigError: for an invalid option.
        TypeError: for a keyword that is not a ``GeminiConfig`` field.
        LlmError: ``INVALID_CREDENTIAL`` for an explicit key no header can carry.
    """

    _package = _PACKAGE
    config_class = GeminiConfig
    _display_name = DISPLAY_NAME

    def __init__(
        self,
        api_key: str | Secret | None = None,
        *,
        base_url: str | None = None,
        api_key_env: str = DEFAULT_API_KEY_ENV,
        environ: Mapping[str, str] | None = None,
        **options: Any,
    ) -> None:
        options.update(base_url=base_url, api_key_env=api_key_env)
        self._setup(
            config_from_options(GeminiConfig, options),
            api_key=api_key,
            environ=environ,
        )

    def _model_info(
        self, snapshot: GeminiConfig, provider: str, model: str
    ) -> LlmResolvedModelInfo:
        return _resolved_model(snapshot, provider, model)

    def _configure(
        self,
        config: GeminiConfig,
        *,
        api_key: str | Secret | None,
        environ: Mapping[str, str] | None,
    ) -> None:
        self._base_url = (
            PUBLIC_BASE_URL
            if config.base_url is None
            else api_root_url(
                config.base_url, error=GeminiConfigError, endpoint=API_PATH
            )
        )

    def _stream(
        self, options: GenerateOptions, snapshot: GeminiConfig
    ) -> Iterator[StreamChunk]:
        model = model_for(options.model, snapshot.models)
        if options.reasoning_effort is None:
            effort = _default_effort(snapshot, model)
            if effort is not None:
                options = attrs.evolve(options, reasoning_effort=effort)
        body = build_generate_request(
            options,
            models=snapshot.models,
            max_output_tokens=model.max_tokens,
            attachments=self.attachments,
        )
        headers = request_headers(
            stream_headers(), options, provider=PROVIDER, taken=(API_KEY_HEADER,)
        )
        key = self._request_key(snapshot.api_key_env, route=PROVIDER_ROUTE)
        assert key is not None  # an api_key_env is always configured
        call = StreamingCall(
            self._session,
            url=stream_url(self._base_url, options.model),
            body=encode_body(body, provider=PROVIDER),
            headers=headers,
            auth=GeminiKeyAuth(key),
            provider=PROVIDER,
            endpoint=self._base_url,
            signal=options.signal,
            idle_timeout_ms=snapshot.stream_idle_timeout_ms,
            keepalive_timeout_ms=snapshot.stream_keepalive_timeout_ms,
            total_timeout_ms=snapshot.total_timeout_ms,
            classify_error=gemini_http_error,
        )
        translator = GeminiTranslator(
            empty_response_as_stop=snapshot.empty_response_as_stop
        )
        decoder = SseDecoder(terminal_data=None, provider=PROVIDER)
        yield from read_stream(call, decoder, translator)

    def __repr__(self) -> str:
        key = self._key_repr(self._config.api_key_env)
        return f"GeminiAdapter(base_url={redact_url(self._base_url)!r}, {key})"
