"""The Gemini API family value: config, endpoint, request and model facts.

- ``GeminiConfig`` is the one validated configuration (``package``
  ``llm-gemini``); the catalog is advisory (any model id is sent as is) and by
  default lists ``catalog.DEFAULT_MODELS``.
- The base URL is the explicit one, else ``https://generativelanguage.googleapis.com``;
  each call is ``POST {base}/v1beta/models/{model}:streamGenerateContent?alt=sse``.
- Per call, before any I/O: the body (``request.build_generate_request``, with
  the configured default effort when the request names none) and its refusals,
  the ``extra_headers`` check, then the key, sent as ``x-goog-api-key`` (never in
  the URL; the call's redactor knows it). Only this hook knows the URL and the
  credential: the builder and the translator serve any front door to the API.
- ``count_tokens``: ``POST {base}/v1beta/models/{model}:countTokens`` with the
  stream body as ``generateContentRequest`` (its ``model`` ``models/{model}``),
  same headers and key; the answer's ``totalTokens``.
- ``FAMILY`` names the parts ``WireAdapter`` streams with. User guide:
  ``docs/gemini.md``.
"""

from __future__ import annotations

import urllib.parse
from typing import Any
from typing import Final
from typing import Protocol

import attrs

from dsh_llm.adapter import LlmResolvedModelInfo
from dsh_llm.adapters._wire.config import AdapterConfig
from dsh_llm.adapters._wire.config import BaseUrlRule
from dsh_llm.adapters._wire.config import CatalogLookup
from dsh_llm.adapters._wire.config import adapter_field_order
from dsh_llm.adapters._wire.config import api_key_env_field
from dsh_llm.adapters._wire.config import endpoint_url
from dsh_llm.adapters._wire.config import model_catalog
from dsh_llm.adapters._wire.extras import request_headers
from dsh_llm.adapters._wire.family import Endpoint
from dsh_llm.adapters._wire.family import TokenCountRequest
from dsh_llm.adapters._wire.family import WireCall
from dsh_llm.adapters._wire.family import WireFamily
from dsh_llm.adapters._wire.family import WireRequest
from dsh_llm.adapters._wire.family import resolved_model_info
from dsh_llm.adapters._wire.family import root_endpoint
from dsh_llm.adapters._wire.family import token_count
from dsh_llm.adapters.gemini.catalog import DEFAULT_MODELS
from dsh_llm.adapters.gemini.catalog import EFFORT_BUDGETS
from dsh_llm.adapters.gemini.catalog import EFFORT_LEVELS
from dsh_llm.adapters.gemini.catalog import GeminiModel
from dsh_llm.adapters.gemini.catalog import effort_in_force
from dsh_llm.adapters.gemini.catalog import model_for
from dsh_llm.adapters.gemini.catalog import reasoning_info
from dsh_llm.adapters.gemini.errors import gemini_http_error
from dsh_llm.adapters.gemini.request import PROVIDER
from dsh_llm.adapters.gemini.request import build_generate_request
from dsh_llm.adapters.gemini.translate import GeminiTranslator
from dsh_llm.attachments import AttachmentStore
from dsh_llm.config import RAW_METADATA
from dsh_llm.config import field_error
from dsh_llm.transport.session import ApiKeyAuth
from dsh_llm.transport.session import NoAuth
from dsh_llm.transport.session import stream_headers

PROVIDER_ROUTE: Final = "gemini"
"""The one route this adapter serves."""
DISPLAY_NAME: Final = PROVIDER
"""The route's display name (``Gemini``, also the provider named in messages)."""
PUBLIC_BASE_URL: Final = "https://generativelanguage.googleapis.com"
"""The public API root (``/v1beta/models/...`` is appended)."""
API_PATH: Final = "/v1beta"
"""The API version path appended to the root (a root may not already end in it)."""
API_KEY_HEADER: Final = "x-goog-api-key"
"""The header that carries the key (what Google's SDK sends)."""
DEFAULT_API_KEY_ENV: Final = "GEMINI_API_KEY"
"""Environment variable the key is read from by default."""
PACKAGE: Final = "llm-gemini"
"""The plugin's name, named in config errors and credential messages."""
BASE_URL_RULE: Final = BaseUrlRule(
    package=PACKAGE, endpoint=API_PATH, public=PUBLIC_BASE_URL
)
"""Where the API root comes from: ``base_url``, else ``PUBLIC_BASE_URL``."""


def _models(value: object) -> tuple[GeminiModel, ...]:
    """The ``models`` option (``model_catalog``); ``None`` is ``DEFAULT_MODELS``."""
    return model_catalog(value, GeminiModel, package=PACKAGE, default=DEFAULT_MODELS)


def _check_effort(inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    known = (*EFFORT_LEVELS, *EFFORT_BUDGETS)
    if value is not None and value not in known:
        raise field_error(
            inst, attribute.name, f"must be one of {', '.join(dict.fromkeys(known))}"
        )


@attrs.frozen(kw_only=True, field_transformer=adapter_field_order)
class GeminiConfig(AdapterConfig, CatalogLookup[GeminiModel]):
    """The one ``GeminiAdapter`` configuration (``AdapterConfig``; plugin
    ``llm-gemini``, keys ``apiKeyEnv``, ``baseURL``, ``reasoningEffort``...)."""

    package = PACKAGE
    default_stream_keepalive_timeout_ms = None

    api_key_env: str = api_key_env_field(DEFAULT_API_KEY_ENV)
    """Environment variable holding the key."""
    base_url: str | None = BASE_URL_RULE.field()
    """API root (``None``: ``PUBLIC_BASE_URL``); must not end in ``/v1beta``."""
    reasoning_effort: str | None = attrs.field(default=None, validator=_check_effort)
    """Default effort, used when a request names none and the model offers it."""
    models: tuple[GeminiModel, ...] = attrs.field(
        default=None, converter=_models, metadata={RAW_METADATA: True}
    )
    """The advertised catalog (``None``: ``DEFAULT_MODELS``; empty: none). An
    entry is a ``GeminiModel``, a model id or its config mapping (``thinking``,
    ``efforts``, ``defaultEffort`` beside the ``CatalogModel`` keys); a
    configured entry without ``inputModalities`` is text only."""


def model_url(base_url: str, model: str, method: str) -> str:
    """``{base}/v1beta/models/{model}:{method}``, the model id percent-quoted
    (a ``/``, ``?`` or ``#`` in it cannot change the path)."""
    quoted = urllib.parse.quote(model, safe="")
    return endpoint_url(base_url, f"{API_PATH}/models/{quoted}:{method}")


def stream_url(base_url: str, model: str) -> str:
    """The streaming endpoint for ``model`` under the API root ``base_url``:
    ``{base}/v1beta/models/{model}:streamGenerateContent?alt=sse``, the model id
    percent-quoted (a ``/``, ``?`` or ``#`` in it cannot change the path). The
    key never goes in the URL."""
    quoted = urllib.parse.quote(model, safe="")
    url = endpoint_url(base_url, f"{API_PATH}/models/{quoted}:streamGenerateContent")
    return url + ("&" if urllib.parse.urlsplit(url).query else "?") + "alt=sse"


class GenerateConfig(Protocol):
    """What ``generate_body`` reads of a config (``GeminiConfig``, Vertex AI's)."""

    @property
    def models(self) -> tuple[GeminiModel, ...]:
        """The advertised catalog."""
        ...

    @property
    def reasoning_effort(self) -> str | None:
        """The default effort."""
        ...


def generate_body(call: WireCall[Any, Any]) -> dict[str, Any]:
    """``call``'s ``streamGenerateContent`` body (``build_generate_request``):
    the model's facts from the config's ``models`` (``catalog.model_for``) and,
    when the request names no effort, the configured ``reasoning_effort`` if
    the model offers it, else the model's default (``catalog.effort_in_force``).
    Vertex AI's Google publisher takes the same body; the config is a
    ``GenerateConfig``."""
    options = call.options
    config: GenerateConfig = call.config
    model = model_for(options.model, config.models)
    if options.reasoning_effort is None:
        effort = effort_in_force(model, config.reasoning_effort)
        if effort is not None:
            options = attrs.evolve(options, reasoning_effort=effort)
    return build_generate_request(
        options,
        models=config.models,
        max_output_tokens=model.max_tokens,
        attachments=call.attachments,
        provider=call.provider,
    )


def model_info(
    config: GeminiConfig, endpoint: Endpoint[None], provider: str, model: str
) -> LlmResolvedModelInfo:
    """``resolve_model``'s answer: the entry's context window and output cap, the
    model's efforts (``catalog.model_for``) and the effort in force by default."""
    entry = config.model(model)
    facts = model_for(model, config.models)
    return resolved_model_info(
        provider,
        model,
        entry,
        context_window=facts.context_window,
        default_max_tokens=facts.max_tokens,
        reasoning=reasoning_info(facts, config.reasoning_effort),
    )


def _request(call: WireCall[GeminiConfig, None]) -> WireRequest:
    options = call.options
    body = generate_body(call)
    headers = request_headers(
        stream_headers(), options, provider=call.provider, taken=(API_KEY_HEADER,)
    )
    key = call.key()
    return WireRequest(
        url=stream_url(call.endpoint.base_url, options.model),
        body=body,
        headers=headers,
        auth=NoAuth() if key is None else ApiKeyAuth(key, header=API_KEY_HEADER),
    )


def _count_tokens(call: WireCall[GeminiConfig, None]) -> TokenCountRequest:
    streamed = _request(call)
    model = call.options.model
    return token_count(
        streamed,
        url=model_url(call.endpoint.base_url, model, "countTokens"),
        body={"generateContentRequest": {"model": f"models/{model}", **streamed.body}},
        answer_key="totalTokens",
    )


def gemini_translator(call: WireCall[Any, Any]) -> GeminiTranslator:
    """``call``'s translator: the images a model returns go to the adapter's
    store when it can keep them (a reader without ``put`` only serves the
    images sent), and a call id it makes never repeats one the conversation
    holds. Vertex AI's Google publisher streams the same events."""
    store = call.attachments
    return GeminiTranslator(
        provider=call.provider,
        attachments=store if isinstance(store, AttachmentStore) else None,
        empty_response_as_stop=call.config.empty_response_as_stop,
        history=call.options.messages,
    )


FAMILY: Final = WireFamily(
    name="gemini-generate-content",
    config_class=GeminiConfig,
    endpoint=root_endpoint(BASE_URL_RULE, DISPLAY_NAME, None),
    request=_request,
    translator=gemini_translator,
    model_info=model_info,
    classify_error=gemini_http_error,
    route=PROVIDER_ROUTE,
    count_tokens=_count_tokens,
)
"""The Gemini API (``streamGenerateContent``) wire family."""
