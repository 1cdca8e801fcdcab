"""The Ollama native family value: config, endpoint, request, model facts, listing.

- ``OllamaConfig`` is the one validated configuration (``package``
  ``llm-ollama``); no key by default (a local server), ``api_key_env`` names a
  bearer key's variable for a hosted Ollama.
- Per call, before any I/O: the configured effort when the request names none,
  the image checks, the body (``request.build_chat_request``) and its refusals,
  the key (``authorization: Bearer``, so an echo of it is redacted), the
  ``extra_headers`` check; then ``POST {base}/api/chat``.
- ``list_models``: the configured catalog when ``models`` is set, else the
  server's models from ``GET {base}/api/tags`` through
  ``dsh_llm.transport.fetch`` (one deadline, ``listing_timeout_ms``, and a
  size cap), text only.
- ``FAMILY`` names the parts ``WireAdapter`` streams with. User guide:
  ``docs/ollama.md``.
"""

from __future__ import annotations

import json
import math
from typing import Any
from typing import Final

import attrs

from dsh_llm.adapter import LlmModelInfo
from dsh_llm.adapter import LlmModelReasoningInfo
from dsh_llm.adapter import LlmResolvedModelInfo
from dsh_llm.adapters._wire.adapter import catalog_model_info
from dsh_llm.adapters._wire.config import AdapterConfig
from dsh_llm.adapters._wire.config import BaseUrlRule
from dsh_llm.adapters._wire.config import CatalogLookup
from dsh_llm.adapters._wire.config import CatalogModel
from dsh_llm.adapters._wire.config import adapter_field_order
from dsh_llm.adapters._wire.config import api_key_env_field
from dsh_llm.adapters._wire.config import endpoint_url
from dsh_llm.adapters._wire.config import model_catalog
from dsh_llm.adapters._wire.config import reasoning_effort_field
from dsh_llm.adapters._wire.extras import request_headers
from dsh_llm.adapters._wire.family import Endpoint
from dsh_llm.adapters._wire.family import ServerAccess
from dsh_llm.adapters._wire.family import WireCall
from dsh_llm.adapters._wire.family import WireFamily
from dsh_llm.adapters._wire.family import WireRequest
from dsh_llm.adapters._wire.family import effort_infos
from dsh_llm.adapters._wire.family import resolved_model_info
from dsh_llm.adapters._wire.family import root_endpoint
from dsh_llm.adapters.ollama.errors import ollama_http_error
from dsh_llm.adapters.ollama.request import PROVIDER
from dsh_llm.adapters.ollama.request import REASONING_EFFORTS
from dsh_llm.adapters.ollama.request import KeepAlive
from dsh_llm.adapters.ollama.request import build_chat_request
from dsh_llm.adapters.ollama.translate import OllamaTranslator
from dsh_llm.config import RAW_METADATA
from dsh_llm.config import field_error
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.transport.call import redact_url
from dsh_llm.transport.fetch import fetch
from dsh_llm.transport.ndjson import NdjsonDecoder
from dsh_llm.transport.session import BearerAuth
from dsh_llm.transport.session import NoAuth
from dsh_llm.transport.session import stream_headers

PROVIDER_ROUTE: Final = "ollama"
"""The one route this adapter serves."""
DISPLAY_NAME: Final = PROVIDER
"""The route's display name (``Ollama``)."""
DEFAULT_BASE_URL: Final = "http://127.0.0.1:11434"
"""Where a local Ollama listens."""
LIST_MODELS_TIMEOUT_MS: Final = 30_000
"""The most the server's model listing may take, whole: one small JSON document,
so seconds at most even from a remote server on a slow link (a lower idle or
total timeout of the config bounds it further)."""
NDJSON_TYPE: Final = "application/x-ndjson"
"""The media type ``/api/chat`` streams with (sent as ``accept``)."""
PACKAGE: Final = "llm-ollama"
"""The plugin's name, named in config errors and credential messages."""
CHAT_PATH: Final = "/api/chat"
"""Appended to the base URL to stream a chat."""
TAGS_PATH: Final = "/api/tags"
"""Appended to the base URL to list the server's models."""
BASE_URL_RULE: Final = BaseUrlRule(
    package=PACKAGE, endpoint="/api", public=DEFAULT_BASE_URL
)
"""How a base URL is checked: it must not end in ``/api``."""


def _models(value: object) -> tuple[CatalogModel, ...] | None:
    """``None`` stays ``None``: the server's models are listed."""
    if value is None:
        return None
    return model_catalog(value, CatalogModel, package=PACKAGE)


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


@attrs.frozen(kw_only=True, field_transformer=adapter_field_order)
class OllamaConfig(AdapterConfig, CatalogLookup[CatalogModel]):
    """The one ``OllamaAdapter`` configuration (``AdapterConfig``; plugin
    ``llm-ollama``, keys ``baseURL``, ``apiKeyEnv``, ``keepAlive``...)."""

    package = PACKAGE
    default_stream_keepalive_timeout_ms = None

    base_url: str = BASE_URL_RULE.field(DEFAULT_BASE_URL)
    """The server's root (``/api/chat`` is appended); must not end in ``/api``."""
    api_key_env: str | None = api_key_env_field(None)
    """Variable holding a bearer key for a hosted Ollama (``None``: no key)."""
    keep_alive: KeepAlive | None = attrs.field(
        default=None, validator=_check_keep_alive
    )
    """How long the server keeps the model loaded after a call (``"5m"``, seconds;
    ``None``: the server's default)."""
    reasoning_effort: str | None = reasoning_effort_field(REASONING_EFFORTS)
    """Default effort when a request names none (``None``: the model's)."""
    models: tuple[CatalogModel, ...] | None = attrs.field(
        default=None, converter=_models, metadata={RAW_METADATA: True}
    )
    """The advertised catalog; ``None``: ``list_models`` asks the server."""


_EFFORT_INFOS: Final = effort_infos(REASONING_EFFORTS, capitalize=True)


def model_info(
    config: OllamaConfig, endpoint: Endpoint[None], provider: str, model: str
) -> LlmResolvedModelInfo:
    """``resolve_model``'s answer: the entry's context window and ``max_tokens``
    (``None`` when unlisted: the model's own), and the efforts of ``think``."""
    return resolved_model_info(
        provider,
        model,
        config.model(model),
        reasoning=LlmModelReasoningInfo(
            efforts=_EFFORT_INFOS, default_effort=config.reasoning_effort
        ),
    )


def _request(call: WireCall[OllamaConfig, None]) -> WireRequest:
    options, config = call.options, call.config
    if options.reasoning_effort is None and config.reasoning_effort is not None:
        options = attrs.evolve(options, reasoning_effort=config.reasoning_effort)
    entry = config.model(options.model)
    call.check_images(entry)
    body = build_chat_request(
        options,
        keep_alive=config.keep_alive,
        max_tokens=entry.max_tokens if entry else None,
        attachments=call.attachments,
    )
    key = call.key()
    headers = request_headers(
        stream_headers(accept=NDJSON_TYPE),
        options,
        provider=call.provider,
        taken=() if key is None else ("authorization",),
    )
    return WireRequest(
        url=endpoint_url(call.endpoint.base_url, CHAT_PATH),
        body=body,
        headers=headers,
        auth=NoAuth() if key is None else BearerAuth(key),
    )


def _translator(call: WireCall[OllamaConfig, None]) -> OllamaTranslator:
    return OllamaTranslator(empty_response_as_stop=call.config.empty_response_as_stop)


def _decoder(provider: str) -> NdjsonDecoder:
    return NdjsonDecoder(provider=provider)


def listing_timeout_ms(config: OllamaConfig) -> float:
    """The deadline of the server's model listing, from the request to its last
    byte: the smallest of ``LIST_MODELS_TIMEOUT_MS`` and the config's idle and
    total timeouts (a listing never outlasts what a call may wait)."""
    bounds = [LIST_MODELS_TIMEOUT_MS, config.stream_idle_timeout_ms]
    if config.total_timeout_ms is not None:
        bounds.append(config.total_timeout_ms)
    return min(bounds)


def _server_models(server: ServerAccess[OllamaConfig, None]) -> list[str]:
    """The model names ``GET {base}/api/tags`` lists."""
    base_url = server.endpoint.base_url
    key = server.key()
    fetched = fetch(
        server.session,
        endpoint_url(base_url, TAGS_PATH),
        provider=server.endpoint.display_name,
        endpoint=base_url,
        timeout_ms=listing_timeout_ms(server.config),
        signal=server.signal,
        auth=None if key is None else BearerAuth(key),
        classify_error=ollama_http_error,
    )
    try:
        listed = json.loads(fetched.body)["models"]
        names = [item.get("model") or item["name"] for item in listed]
    except (ValueError, RecursionError, KeyError, TypeError, AttributeError):
        names = None
    if names is None or not all(isinstance(n, str) and n for n in names):
        raise LlmError(
            f"{server.endpoint.display_name} API at {redact_url(base_url)} answered "
            f"{TAGS_PATH} without a list of models",
            ErrorCode.MALFORMED_RESPONSE,
        )
    return names


def list_models(
    server: ServerAccess[OllamaConfig, None], provider: str
) -> tuple[LlmModelInfo, ...]:
    """The configured catalog, else the server's models from ``GET
    {base}/api/tags`` (I/O, only when called), text only: images go only to a
    model the catalog lists with ``image`` input.

    Raises:
        LlmError: ``TRANSPORT`` when the server cannot be reached, ``TIMEOUT``
            past ``listing_timeout_ms``, the status's code for an HTTP error,
            ``MALFORMED_RESPONSE`` for an answer over the size cap or one that
            lists no models.
    """
    models = server.config.models
    if models is not None:
        return tuple(catalog_model_info(provider, entry) for entry in models)
    return tuple(
        LlmModelInfo(provider=provider, id=name, name=name, input_modalities=("text",))
        for name in _server_models(server)
    )


FAMILY: Final = WireFamily(
    name="ollama-chat",
    config_class=OllamaConfig,
    endpoint=root_endpoint(BASE_URL_RULE, DISPLAY_NAME, None),
    request=_request,
    translator=_translator,
    model_info=model_info,
    decoder=_decoder,
    classify_error=ollama_http_error,
    expected="an NDJSON stream",
    route=PROVIDER_ROUTE,
    list_models=list_models,
)
"""The Ollama native ``/api/chat`` wire family."""
