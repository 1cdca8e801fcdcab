"""``OllamaAdapter``: Ollama's native ``POST /api/chat`` (NDJSON) through the
shared transport. User guide (options, efforts, refusals, codes): ``docs/ollama.md``.

Contracts callers may rely on:

- **Route** ``ollama``, displayed ``Ollama``; one config class, ``OllamaConfig``,
  built from the constructor's keywords or taken by ``from_config`` (the
  ``llm-ollama`` plugin structures its YAML entry into it). A bad option raises
  ``OllamaConfigError`` (``llm-ollama: <key> <detail>``).
- **No key by default** (a local server). ``api_key`` or ``api_key_env`` (read at
  each request) sends ``authorization: Bearer`` for a hosted Ollama; the call's
  redactor knows the key. No ``repr`` shows it.
- **No I/O on construction.** ``resolve_model`` needs none. ``list_models`` is
  the configured catalog when ``models`` is set, else it reads
  ``GET {base}/api/tags`` when asked (bounded by the idle timeout; a failure is
  an ``LlmError``: ``TRANSPORT``, ``TIMEOUT`` or the HTTP status's code). Only
  an entry listed with ``image`` input advertises it (server models: text).
- ``stream`` is a generator: at the first ``next()`` the body is built and
  checked (refusals before any I/O: images for a model not listed with
  ``image`` or without ``attachments``, an unknown effort, a forced tool call,
  a result for an unknown call, a bad ``keep_alive``, an ``extra_headers``
  name the adapter sets), then one ``POST {base}/api/chat`` with
  ``stream: true``, the configured ``keep_alive``, ``response_format`` as
  ``format`` and ``extra_body`` merged last.
- **Stream**: ``NdjsonDecoder`` lines into ``OllamaTranslator`` (strict order,
  whole calls, counts only on the ``done`` line, absent counts ``None``). A body
  cut before ``done: true`` is ``STREAM_CLOSED``; HTTP errors are classified by
  ``ollama_http_error`` (404: ``INVALID_REQUEST``, an unknown model).
- ``close()`` (or ``with``) closes the connection pool (``HttpAdapter``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar, Final

import attrs
import requests

from dsh_llm.adapter import (
    LlmModelInfo,
    LlmModelReasoningInfo,
    LlmReasoningEffortInfo,
    LlmResolvedModelInfo,
)
from dsh_llm.adapters._ollama.errors import ollama_http_error
from dsh_llm.adapters._ollama.request import (
    PROVIDER,
    REASONING_EFFORTS,
    KeepAlive,
    build_chat_request,
)
from dsh_llm.adapters._ollama.translate import OllamaTranslator
from dsh_llm.adapters._wire.adapter import encode_body
from dsh_llm.adapters.common import (
    AdapterConfig,
    AdapterConfigError,
    ConfiguredAdapter,
    adapter_field_order,
    api_root_url,
    catalog_entry,
    config_from_options,
    input_modalities_field,
    model_catalog,
    offered_modalities,
    resolved_model_info,
)
from dsh_llm.adapters.request_extras import request_headers
from dsh_llm.config import field_error
from dsh_llm.credentials import Secret
from dsh_llm.errors import ErrorCode, LlmError
from dsh_llm.protocol import GenerateOptions, StreamChunk
from dsh_llm.transport.call import StreamingCall, redact_url, url_repr
from dsh_llm.transport.errors_map import code_for_exception, reason_for_exception
from dsh_llm.transport.ndjson import NdjsonDecoder
from dsh_llm.transport.read_loop import read_stream
from dsh_llm.transport.redaction import Redactor, may_quote_request
from dsh_llm.transport.session import BearerAuth, NoAuth, stream_headers

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_STREAM_IDLE_TIMEOUT_MS",
    "DISPLAY_NAME",
    "NDJSON_TYPE",
    "PROVIDER_ROUTE",
    "OllamaAdapter",
    "OllamaConfig",
    "OllamaConfigError",
    "OllamaModel",
]

PROVIDER_ROUTE: Final = "ollama"
"""The one route this adapter serves."""
DISPLAY_NAME: Final = PROVIDER
"""The route's display name (``Ollama``)."""
DEFAULT_BASE_URL: Final = "http://127.0.0.1:11434"
"""Where a local Ollama listens."""
DEFAULT_STREAM_IDLE_TIMEOUT_MS: Final = 300_000
"""Default idle timeout (loading a large model may take minutes)."""
NDJSON_TYPE: Final = "application/x-ndjson"
"""The media type ``/api/chat`` streams with (sent as ``accept``)."""
_PACKAGE: Final = "llm-ollama"
_CHAT_PATH: Final = "/api/chat"
_TAGS_PATH: Final = "/api/tags"


class OllamaConfigError(AdapterConfigError):
    """A bad ``llm-ollama`` option (a ``ValueError``): ``llm-ollama: <key>
    <detail>``; ``key`` is the camelCase config key (``keepAlive``)."""

    package = _PACKAGE


def _optional_str(inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and (not isinstance(value, str) or not value):
        raise field_error(inst, attribute.name, "must be a non-empty string")


def _optional_positive_int(
    inst: object, attribute: attrs.Attribute[Any], value: Any
) -> None:
    if value is not None and (type(value) is not int or value <= 0):
        raise field_error(inst, attribute.name, "must be a positive integer")


@attrs.frozen(kw_only=True)
class OllamaModel:
    """One advertised model (config key ``models[]``)."""

    config_error: ClassVar[type[AdapterConfigError]] = OllamaConfigError

    id: str = attrs.field(validator=_optional_str)
    """The model name Ollama knows (``llama3.2``, ``qwen3:8b``)."""
    name: str | None = attrs.field(default=None, validator=_optional_str)
    """Display name (default: the id)."""
    description: str | None = attrs.field(default=None, validator=_optional_str)
    """What sets it apart."""
    context_window: int | None = attrs.field(
        default=None, validator=_optional_positive_int
    )
    """The context window, when known."""
    max_tokens: int | None = attrs.field(default=None, validator=_optional_positive_int)
    """Sent as ``num_predict`` when a request has no cap (``None``: the model's)."""
    input_modalities: tuple[str, ...] = input_modalities_field()
    """Accepted inputs (config key ``inputModalities``): ``("text",)`` or
    ``("text", "image")``. With ``image``, images are sent as ``images``
    read from ``adapter.attachments``; a text-only model refuses them
    (``UNSUPPORTED_CONTENT``)."""


def _models(value: object) -> tuple[OllamaModel, ...] | None:
    """The ``models`` option (``dsh_llm.adapters.common.model_catalog``);
    ``None`` stays ``None`` (the server's models are listed)."""
    if value is None:
        return None
    return model_catalog(value, OllamaModel, OllamaConfigError)


def _check_base_url(inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    api_root_url(value, error=OllamaConfigError, endpoint="/api")


def _check_keep_alive(
    inst: object, attribute: attrs.Attribute[Any], value: Any
) -> None:
    if value is None or (isinstance(value, str) and value.strip()):
        return
    if type(value) is int or (type(value) is float and math.isfinite(value)):
        return
    raise field_error(
        inst,
        attribute.name,
        'must be a duration string (such as "5m") or a number of seconds',
    )


def _check_effort(inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and value not in REASONING_EFFORTS:
        raise field_error(
            inst, attribute.name, f"must be one of {', '.join(REASONING_EFFORTS)}"
        )


@attrs.frozen(kw_only=True, field_transformer=adapter_field_order)
class OllamaConfig(AdapterConfig):
    """The one ``OllamaAdapter`` configuration (camelCase keys in YAML:
    ``baseURL``, ``apiKeyEnv``, ``keepAlive``...). Every field is checked on
    construction (``OllamaConfigError`` keyed by its config key). A config never
    holds a key: ``api_key_env`` names the variable."""

    config_error = OllamaConfigError
    default_stream_idle_timeout_ms = DEFAULT_STREAM_IDLE_TIMEOUT_MS
    default_stream_keepalive_timeout_ms = None

    base_url: str = attrs.field(
        default=DEFAULT_BASE_URL, repr=url_repr, validator=_check_base_url
    )
    """The server's root (``/api/chat`` is appended); must not end in ``/api``."""
    api_key_env: str | None = attrs.field(default=None, validator=_optional_str)
    """Variable holding a bearer key for a hosted Ollama (``None``: no key)."""
    keep_alive: KeepAlive | None = attrs.field(
        default=None, validator=_check_keep_alive
    )
    """How long the server keeps the model loaded after a call (``"5m"``, seconds;
    ``None``: the server's default)."""
    reasoning_effort: str | None = attrs.field(default=None, validator=_check_effort)
    """Default effort when a request names none (``None``: the model's)."""
    models: tuple[OllamaModel, ...] | None = attrs.field(
        default=None, converter=_models
    )
    """The advertised catalog; ``None``: ``list_models`` asks the server."""

    def model(self, model_id: str) -> OllamaModel | None:
        """The catalog entry for ``model_id``, if listed."""
        return None if self.models is None else catalog_entry(self.models, model_id)


_EFFORT_INFOS: Final = tuple(
    LlmReasoningEffortInfo(id=effort, name=effort.capitalize())
    for effort in REASONING_EFFORTS
)


def _resolved_model(
    config: OllamaConfig, provider: str, model_id: str
) -> LlmResolvedModelInfo:
    entry = config.model(model_id)
    return resolved_model_info(
        provider,
        model_id,
        entry,
        context_window=entry.context_window if entry else None,
        default_max_tokens=entry.max_tokens if entry else None,
        reasoning=LlmModelReasoningInfo(
            efforts=_EFFORT_INFOS, default_effort=config.reasoning_effort
        ),
    )


class OllamaAdapter(ConfiguredAdapter[OllamaConfig]):
    """Streams Ollama ``/api/chat`` (see the module docstring).

    Args:
        base_url: The server's root (default ``http://127.0.0.1:11434``).
        api_key: A bearer key for a hosted Ollama (``str`` or ``Secret``).
        environ: Where ``api_key_env`` is read (default ``os.environ``, live).
        **options: Further ``OllamaConfig`` fields (``keep_alive``,
            ``api_key_env``, ``models``...).

    Raises:
        OllamaConfigError: for an invalid option.
        TypeError: for a keyword that is not an ``OllamaConfig`` field.
        LlmError: ``INVALID_CREDENTIAL`` for an explicit key no header can carry.
    """

    _package = _PACKAGE
    config_class = OllamaConfig
    _display_name = DISPLAY_NAME

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        *,
        api_key: str | Secret | None = None,
        environ: Mapping[str, str] | None = None,
        **options: Any,
    ) -> None:
        options["base_url"] = base_url
        self._setup(
            config_from_options(OllamaConfig, options),
            api_key=api_key,
            environ=environ,
        )

    def _model_info(
        self, snapshot: OllamaConfig, provider: str, model: str
    ) -> LlmResolvedModelInfo:
        return _resolved_model(snapshot, provider, model)

    def _configure(
        self,
        config: OllamaConfig,
        *,
        api_key: str | Secret | None,
        environ: Mapping[str, str] | None,
    ) -> None:
        self._base_url = api_root_url(
            config.base_url, error=OllamaConfigError, endpoint="/api"
        )

    def _auth(self, snapshot: OllamaConfig) -> requests.auth.AuthBase:
        key = self._request_key(snapshot.api_key_env, route=PROVIDER_ROUTE)
        return NoAuth() if key is None else BearerAuth(key)

    # -- metadata --------------------------------------------------------------------

    def list_models(self, provider: str) -> tuple[LlmModelInfo, ...]:
        """The configured catalog, else the server's models from
        ``GET {base}/api/tags`` (I/O, only when called; see the module docstring).

        Raises:
            LlmError: ``TRANSPORT``/``TIMEOUT`` when the server cannot be
                reached, the status's code for an HTTP error, or
                ``MALFORMED_RESPONSE`` for an answer that lists no models.
        """
        snapshot = self._config
        if snapshot.models is not None:
            return tuple(
                LlmModelInfo(
                    provider=provider,
                    id=entry.id,
                    name=entry.name or entry.id,
                    description=entry.description,
                    input_modalities=offered_modalities(entry, image_input=True),
                )
                for entry in snapshot.models
            )
        names = self._server_models(snapshot)
        # Text only: the adapter refuses images for a model not in the catalog.
        return tuple(
            LlmModelInfo(
                provider=provider, id=name, name=name, input_modalities=("text",)
            )
            for name in names
        )

    def _server_models(self, snapshot: OllamaConfig) -> list[str]:
        auth = self._auth(snapshot)
        url = self._base_url + _TAGS_PATH
        redact = Redactor.for_request(
            url=url, headers={}, secrets=[getattr(auth, "secret", "")]
        )
        endpoint = redact_url(self._base_url)
        failure: LlmError | None = None
        try:
            response = self._session.get(
                url,
                headers={"accept": "application/json"},
                auth=auth,
                timeout=snapshot.stream_idle_timeout_ms / 1000,
                allow_redirects=False,
            )
            status, body = response.status_code, response.content
        except Exception as exc:
            code = code_for_exception(exc)
            reason = reason_for_exception(exc)
            failure = LlmError(
                f"{PROVIDER} API request to {endpoint} failed"
                + ("" if reason is None else f": {reason}"),
                code if code == ErrorCode.TIMEOUT else ErrorCode.TRANSPORT,
                cause=redact.cause(exc, withhold=may_quote_request(exc)),
            )
        if failure is not None:
            raise failure
        if not 200 <= status < 300:
            raise ollama_http_error(status, response.headers, body, redact=redact)
        try:
            listed = json.loads(body)["models"]
            names = [item.get("model") or item["name"] for item in listed]
        except (ValueError, RecursionError, KeyError, TypeError, AttributeError):
            names = None
        if names is None or not all(isinstance(n, str) and n for n in names):
            raise LlmError(
                f"{PROVIDER} API at {endpoint} answered /api/tags without a list "
                "of models",
                ErrorCode.MALFORMED_RESPONSE,
            )
        return names

    # -- streaming -------------------------------------------------------------------

    def _stream(
        self, options: GenerateOptions, snapshot: OllamaConfig
    ) -> Iterator[StreamChunk]:
        if options.reasoning_effort is None and snapshot.reasoning_effort is not None:
            options = attrs.evolve(options, reasoning_effort=snapshot.reasoning_effort)
        entry = snapshot.model(options.model)
        self._check_image_input(options, entry)
        body = build_chat_request(
            options,
            keep_alive=snapshot.keep_alive,
            max_tokens=entry.max_tokens if entry else None,
            attachments=self.attachments,
        )
        auth = self._auth(snapshot)
        headers = request_headers(
            stream_headers(accept=NDJSON_TYPE),
            options,
            provider=PROVIDER,
            taken=("authorization",) if isinstance(auth, BearerAuth) else (),
        )
        call = StreamingCall(
            self._session,
            url=self._base_url + _CHAT_PATH,
            body=encode_body(body, provider=PROVIDER),
            headers=headers,
            auth=auth,
            provider=PROVIDER,
            endpoint=self._base_url,
            signal=options.signal,
            idle_timeout_ms=snapshot.stream_idle_timeout_ms,
            keepalive_timeout_ms=snapshot.stream_keepalive_timeout_ms,
            total_timeout_ms=snapshot.total_timeout_ms,
            expected="an NDJSON stream",
            classify_error=ollama_http_error,
        )
        translator = OllamaTranslator(
            empty_response_as_stop=snapshot.empty_response_as_stop
        )
        yield from read_stream(call, NdjsonDecoder(provider=PROVIDER), translator)

    def __repr__(self) -> str:
        key = self._key_repr(self._config.api_key_env)
        return f"OllamaAdapter(base_url={redact_url(self._base_url)!r}, {key})"
