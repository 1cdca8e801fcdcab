"""The Anthropic Messages family value: config, endpoint, request and model facts.

- ``AnthropicConfig`` is the one validated configuration (``package``
  ``llm-anthropic``); the catalog is advisory (any model id is sent as is) and
  by default lists the current Claude models (``catalog.CATALOG``).
- The base URL is the explicit one, else ``ANTHROPIC_BASE_URL``, else
  ``https://api.anthropic.com``; ``/v1/messages`` is appended to it.
- Per call, before any I/O: the image checks, the ``extra_headers`` check, the
  key (``x-api-key``, so an echo of it is redacted), then the body
  (``request.build_messages_request``) and its refusals.
- ``count_tokens``: ``POST /v1/messages/count_tokens`` with the fields of the
  stream request that endpoint takes (``COUNT_TOKENS_FIELDS``), same headers
  and key; the answer's ``input_tokens``.
- ``FAMILY`` names the parts ``WireAdapter`` streams with. User guide:
  ``docs/anthropic.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any
from typing import Final

import attrs

from dsh_llm.adapter import LlmResolvedModelInfo
from dsh_llm.adapters._wire.config import AdapterConfig
from dsh_llm.adapters._wire.config import BaseUrlRule
from dsh_llm.adapters._wire.config import CatalogLookup
from dsh_llm.adapters._wire.config import CatalogModel
from dsh_llm.adapters._wire.config import adapter_field_order
from dsh_llm.adapters._wire.config import api_key_env_field
from dsh_llm.adapters._wire.config import endpoint_url
from dsh_llm.adapters._wire.config import model_catalog
from dsh_llm.adapters._wire.config import reasoning_effort_field
from dsh_llm.adapters._wire.family import Endpoint
from dsh_llm.adapters._wire.family import TokenCountRequest
from dsh_llm.adapters._wire.family import WireCall
from dsh_llm.adapters._wire.family import WireFamily
from dsh_llm.adapters._wire.family import WireRequest
from dsh_llm.adapters._wire.family import fields_count
from dsh_llm.adapters._wire.family import resolved_model_info
from dsh_llm.adapters._wire.family import root_endpoint
from dsh_llm.adapters.anthropic import catalog
from dsh_llm.adapters.anthropic.errors import http_error
from dsh_llm.adapters.anthropic.request import ANTHROPIC_VERSION
from dsh_llm.adapters.anthropic.request import build_messages_request
from dsh_llm.adapters.anthropic.request import request_headers
from dsh_llm.adapters.anthropic.translate import WIRE_FAMILY
from dsh_llm.adapters.anthropic.translate import MessagesTranslator
from dsh_llm.config import RAW_METADATA
from dsh_llm.config import check_bool
from dsh_llm.config import check_non_empty_str
from dsh_llm.config import check_positive_int
from dsh_llm.config import check_safe_positive_int
from dsh_llm.config import field_error
from dsh_llm.transport.session import ApiKeyAuth
from dsh_llm.transport.session import NoAuth
from dsh_llm.transport.session import is_header_name
from dsh_llm.transport.session import is_header_value

PROVIDER_ROUTE: Final = "anthropic"
"""The one route this adapter serves."""
DISPLAY_NAME: Final = "Anthropic"
"""The route's display name (also the provider named in messages)."""
DEFAULT_API_KEY_ENV: Final = "ANTHROPIC_API_KEY"
"""Environment variable the key is read from by default."""
MESSAGES_PATH: Final = "/v1/messages"
"""Appended to the API root to reach the endpoint."""
COUNT_TOKENS_PATH: Final = "/v1/messages/count_tokens"
"""Appended to the API root to reach the token-counting endpoint."""
COUNT_TOKENS_FIELDS: Final = frozenset(
    {
        "model",
        "messages",
        "system",
        "tools",
        "tool_choice",
        "thinking",
        "output_config",
        "cache_control",
        "context_management",
        "mcp_servers",
    }
)
"""The body fields the token-counting endpoint takes; the stream request's
others (``max_tokens``, ``stream``, sampling, ``metadata``) do not change the
input and are left out."""
DEFAULT_MAX_TOKENS: Final = 8_192
"""``max_tokens`` sent for a model without its own (the API requires one)."""
DEFAULT_CONTEXT_WINDOW: Final = 200_000
"""Context window advertised for a model without its own."""
REASONING_EFFORTS: Final = tuple(
    dict.fromkeys((*catalog.BUDGET_EFFORTS, *catalog.ADAPTIVE_EFFORTS))
)
"""Every effort some Claude model takes (a configured default must be one; each
model accepts its own subset, ``resolve_model`` lists it)."""
PACKAGE: Final = "llm-anthropic"
"""The plugin's name, named in config errors and credential messages."""
BASE_URL_RULE: Final = BaseUrlRule(
    package=PACKAGE,
    endpoint=MESSAGES_PATH,
    public="https://api.anthropic.com",
    env="ANTHROPIC_BASE_URL",
)
"""Where the API root comes from: ``base_url``, else ``ANTHROPIC_BASE_URL``, else
the public API (a bad ``ANTHROPIC_BASE_URL`` raises ``AdapterConfigError`` keyed
``baseURL``, naming the variable, never the URL)."""


def _catalog_defaults(model_id: str) -> Mapping[str, Any]:
    """A configured Claude model takes the built-in catalog's inputs by default."""
    entry = catalog.model_entry(model_id)
    return {} if entry is None else {"inputModalities": list(entry.input_modalities)}


DEFAULT_MODELS: Final = tuple(
    entry.catalog_model(CatalogModel) for entry in catalog.CATALOG
)
"""The catalog advertised when none is configured (``catalog.CATALOG``)."""


def _models(value: object) -> tuple[CatalogModel, ...]:
    return model_catalog(
        value,
        CatalogModel,
        package=PACKAGE,
        defaults=_catalog_defaults,
        default=DEFAULT_MODELS,
    )


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
class AnthropicConfig(AdapterConfig, CatalogLookup[CatalogModel]):
    """The one ``AnthropicAdapter`` configuration (``AdapterConfig``; plugin
    ``llm-anthropic``, keys ``apiKeyEnv``, ``baseURL``, ``anthropicVersion``...)."""

    package = PACKAGE

    api_key_env: str = api_key_env_field(DEFAULT_API_KEY_ENV)
    """Environment variable holding the key."""
    base_url: str | None = BASE_URL_RULE.field()
    """API root; default ``ANTHROPIC_BASE_URL``, then the public URL."""
    anthropic_version: str = attrs.field(
        default=ANTHROPIC_VERSION, validator=_check_header_value
    )
    """The ``anthropic-version`` header."""
    beta: tuple[str, ...] = attrs.field(
        default=(), converter=_beta, validator=_check_beta
    )
    """``anthropic-beta`` features to send (none by default)."""
    reasoning_effort: str | None = reasoning_effort_field(REASONING_EFFORTS)
    """Default effort when a request names none (unset: the model's default)."""
    max_tokens: int = attrs.field(
        default=DEFAULT_MAX_TOKENS, validator=check_safe_positive_int
    )
    """``max_tokens`` sent for models without their own."""
    default_context_window: int = attrs.field(
        default=DEFAULT_CONTEXT_WINDOW, validator=check_positive_int
    )
    """Context window of models without their own."""
    models: tuple[CatalogModel, ...] = attrs.field(
        default=None, converter=_models, metadata={RAW_METADATA: True}
    )
    """The advertised catalog (``None``: ``DEFAULT_MODELS``; empty: none). An
    entry names a model's context window, ``max_tokens`` and inputs (default:
    the built-in catalog's for a known id, else text only)."""
    unmarked_cap_cut: bool = attrs.field(default=False, validator=check_bool)
    """The server ends an answer cut at ``max_tokens`` with ``end_turn``
    (LiteLLM's ``openai/`` route in front of llama-server): an answer whose
    ``output_tokens`` reached the ``max_tokens`` sent is ``max-tokens``, even
    one whose natural end fell exactly on the cap."""


def model_info(
    config: AnthropicConfig, endpoint: Endpoint[None], provider: str, model: str
) -> LlmResolvedModelInfo:
    """``resolve_model``'s answer: the entry's (else the config's) context window
    and ``max_tokens``, and the model's efforts (``catalog.thinking_profile``)."""
    entry = config.model(model)
    return resolved_model_info(
        provider,
        model,
        entry,
        context_window=config.default_context_window,
        default_max_tokens=config.max_tokens,
        reasoning=catalog.reasoning_info(
            catalog.thinking_profile(model), config.reasoning_effort
        ),
    )


def _request(call: WireCall[AnthropicConfig, None]) -> WireRequest:
    options, config = call.options, call.config
    entry = config.model(options.model)
    call.check_images(entry)
    headers = request_headers(
        options,
        anthropic_version=config.anthropic_version,
        beta=config.beta,
        provider=call.provider,
    )
    key = call.key()
    body = build_messages_request(
        options,
        model_max_tokens=(entry.max_tokens if entry else None) or config.max_tokens,
        thinking=catalog.thinking_profile(options.model),
        default_effort=config.reasoning_effort,
        attachments=call.attachments,
        provider=call.provider,
    )
    return WireRequest(
        url=endpoint_url(call.endpoint.base_url, MESSAGES_PATH),
        body=body,
        headers=headers,
        auth=NoAuth() if key is None else ApiKeyAuth(key, header="x-api-key"),
    )


def _count_tokens(call: WireCall[AnthropicConfig, None]) -> TokenCountRequest:
    return fields_count(
        _request(call),
        url=endpoint_url(call.endpoint.base_url, COUNT_TOKENS_PATH),
        fields=COUNT_TOKENS_FIELDS,
        answer_key="input_tokens",
    )


def _translator(call: WireCall[AnthropicConfig, None]) -> MessagesTranslator:
    options, config = call.options, call.config
    cap = None
    if config.unmarked_cap_cut:
        # The max_tokens the body sends (build_messages_request's rule, an
        # extra_body value winning).
        entry = config.model(options.model)
        cap = options.max_tokens or (entry.max_tokens if entry else None)
        cap = cap or config.max_tokens
        extra = options.extra_body or {}
        if "max_tokens" in extra:
            value = extra["max_tokens"]
            cap = value if type(value) is int and value > 0 else None
    return MessagesTranslator(
        provider=call.provider,
        empty_response_as_stop=config.empty_response_as_stop,
        unmarked_cap=cap,
    )


FAMILY: Final = WireFamily(
    name=WIRE_FAMILY,
    config_class=AnthropicConfig,
    endpoint=root_endpoint(BASE_URL_RULE, DISPLAY_NAME, None),
    request=_request,
    translator=_translator,
    model_info=model_info,
    classify_error=http_error,
    route=PROVIDER_ROUTE,
    count_tokens=_count_tokens,
)
"""The Anthropic Messages wire family."""
