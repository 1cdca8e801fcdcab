"""The Amazon Bedrock ConverseStream family value: config, endpoint, request and
model facts.

- ``BedrockConfig`` is the one validated configuration (``package``
  ``llm-bedrock``); the catalog is advisory (any model id or inference profile
  ARN is sent as is, percent-encoded in the path) and empty by default.
- The region is the config's, else ``AWS_REGION``, else ``AWS_DEFAULT_REGION``,
  else botocore's (the profile's ``region``); none is ``AdapterConfigError``
  keyed ``region``. The API root is ``base_url`` (tests, VPC endpoints), else
  ``https://bedrock-runtime.{region}.amazonaws.com``.
- Auth, per request: a Bedrock API key (the explicit ``api_key``, else
  ``AWS_BEARER_TOKEN_BEDROCK`` when set) as a bearer token; else SigV4 with the
  AWS credential chain through botocore (``auth``). The key wins when both
  are there.
- Per call, before any I/O: the image checks, the ``extra_headers`` check, the
  credential, then the body (``request.build_converse_request``).
- ``count_tokens``: ``POST /model/{modelId}/count-tokens`` with the stream
  body's conversation as ``{"input": {"converse": ...}}`` (``COUNT_TOKENS_FIELDS``),
  signed or keyed like a stream; the answer's ``inputTokens``.
- ``FAMILY`` names the parts ``WireAdapter`` streams with. User guide:
  ``docs/bedrock.md``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from typing import Final

import attrs

from dsh_llm.adapter import LlmResolvedModelInfo
from dsh_llm.adapters._wire.config import AdapterConfig
from dsh_llm.adapters._wire.config import AdapterConfigError
from dsh_llm.adapters._wire.config import CatalogModel
from dsh_llm.adapters._wire.config import RootRule
from dsh_llm.adapters._wire.config import adapter_field_order
from dsh_llm.adapters._wire.config import api_key_env_field
from dsh_llm.adapters._wire.config import catalog_entry
from dsh_llm.adapters._wire.config import endpoint_url
from dsh_llm.adapters._wire.config import model_catalog
from dsh_llm.adapters._wire.config import reasoning_effort_field
from dsh_llm.adapters._wire.family import Endpoint
from dsh_llm.adapters._wire.family import TokenCountRequest
from dsh_llm.adapters._wire.family import WireCall
from dsh_llm.adapters._wire.family import WireFamily
from dsh_llm.adapters._wire.family import WireRequest
from dsh_llm.adapters._wire.family import resolved_model_info
from dsh_llm.adapters._wire.family import token_count
from dsh_llm.adapters.anthropic.catalog import ADAPTIVE_EFFORTS
from dsh_llm.adapters.anthropic.catalog import BUDGET_EFFORTS
from dsh_llm.adapters.anthropic.catalog import reasoning_info
from dsh_llm.adapters.bedrock import catalog
from dsh_llm.adapters.bedrock.auth import CredentialChain
from dsh_llm.adapters.bedrock.auth import SigV4Auth
from dsh_llm.adapters.bedrock.auth import botocore_region
from dsh_llm.adapters.bedrock.errors import http_error
from dsh_llm.adapters.bedrock.request import WIRE_FAMILY
from dsh_llm.adapters.bedrock.request import build_converse_request
from dsh_llm.adapters.bedrock.request import converse_path
from dsh_llm.adapters.bedrock.request import count_tokens_path
from dsh_llm.adapters.bedrock.request import request_headers
from dsh_llm.adapters.bedrock.translate import ConverseStreamTranslator
from dsh_llm.config import RAW_METADATA
from dsh_llm.config import check_non_empty_str
from dsh_llm.config import check_optional_match
from dsh_llm.config import check_positive_int
from dsh_llm.config import check_safe_positive_int
from dsh_llm.transport.eventstream import EventStreamDecoder
from dsh_llm.transport.session import BearerAuth

PROVIDER_ROUTE: Final = "bedrock"
"""The one route this adapter serves."""
DISPLAY_NAME: Final = "Amazon Bedrock"
"""The route's display name (also the provider named in messages)."""
PACKAGE: Final = "llm-bedrock"
"""The plugin's name, named in config errors and credential messages."""
DEFAULT_API_KEY_ENV: Final = "AWS_BEARER_TOKEN_BEDROCK"
"""Environment variable a Bedrock API key (a bearer token) is read from."""
REGION_ENVS: Final = ("AWS_REGION", "AWS_DEFAULT_REGION")
"""Environment variables the region is read from, in order."""
DEFAULT_CLAUDE_MAX_TOKENS: Final = 8_192
"""``maxTokens`` sent to a Claude model the catalogs give no cap (thinking
budgets are cut below it)."""

COUNT_TOKENS_FIELDS: Final = (
    "messages",
    "system",
    "toolConfig",
    "additionalModelRequestFields",
)
"""The stream body's fields the token-counting endpoint takes (in its
``input.converse``); the others do not change the input."""

REASONING_EFFORTS: Final = tuple(dict.fromkeys((*BUDGET_EFFORTS, *ADAPTIVE_EFFORTS)))
"""Every effort some Claude model takes (a configured default must be one)."""

ROOT_RULE: Final = RootRule(package=PACKAGE, endpoint="/model")
"""How a configured API root is checked: it must not end in ``/model``."""

_REGION: Final = re.compile(r"[a-z]{2}(?:-[a-z0-9]+)+-[0-9]+")


def public_base_url(region: str) -> str:
    """The Bedrock Runtime API root of ``region``."""
    return f"https://bedrock-runtime.{region}.amazonaws.com"


def _models(value: object) -> tuple[CatalogModel, ...]:
    if value is None:
        return ()
    return model_catalog(value, CatalogModel, package=PACKAGE, defaults=_defaults)


def _defaults(model_id: str) -> Mapping[str, Any]:
    """A configured Claude model reads images by default (every Claude does)."""
    return (
        {"inputModalities": ["text", "image"]} if catalog.claude_model(model_id) else {}
    )


_check_region: Final = check_optional_match(
    _REGION, "must be an AWS region (us-east-1)"
)


@attrs.frozen(kw_only=True, field_transformer=adapter_field_order)
class BedrockConfig(AdapterConfig):
    """The one ``BedrockAdapter`` configuration (``AdapterConfig``; plugin
    ``llm-bedrock``, keys ``region``, ``profile``, ``apiKeyEnv``, ``baseURL``...)."""

    package = PACKAGE
    default_stream_keepalive_timeout_ms = None

    region: str | None = attrs.field(default=None, validator=_check_region)
    """The AWS region (default: ``AWS_REGION``, ``AWS_DEFAULT_REGION``, then
    botocore's resolution)."""
    profile: str | None = attrs.field(
        default=None, validator=attrs.validators.optional(check_non_empty_str)
    )
    """The AWS profile of the credential chain (default: ``AWS_PROFILE``, else
    the default profile)."""
    api_key_env: str = api_key_env_field(DEFAULT_API_KEY_ENV)
    """Environment variable holding a Bedrock API key; when it is set, the key
    is sent as a bearer token instead of signing."""
    base_url: str | None = ROOT_RULE.field()
    """API root (default: the region's Bedrock Runtime endpoint)."""
    reasoning_effort: str | None = reasoning_effort_field(REASONING_EFFORTS)
    """Default effort of Claude models when a request names none."""
    max_tokens: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(check_safe_positive_int)
    )
    """``maxTokens`` sent when neither the request nor the catalog sets one
    (unset: the model's default; a Claude model gets its own or 8192)."""
    default_context_window: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(check_positive_int)
    )
    """Context window of models without their own (unset: unknown)."""
    models: tuple[CatalogModel, ...] = attrs.field(
        default=None, converter=_models, metadata={RAW_METADATA: True}
    )
    """The advertised catalog (none by default). A Claude id reads images by
    default."""

    def model(self, model_id: str) -> CatalogModel | None:
        """The catalog entry for ``model_id``, if listed."""
        return catalog_entry(self.models, model_id)


@attrs.frozen(kw_only=True)
class BedrockProfile:
    """What a Bedrock adapter fixes when it is built."""

    region: str
    """The region requests are signed for."""
    credentials: CredentialChain
    """The AWS credential chain (used when no API key is set)."""


def resolve_region(config: BedrockConfig, environ: Mapping[str, str]) -> str:
    """The region in force (see the module docstring).

    Raises:
        AdapterConfigError: keyed ``region`` when none is found or the
            environment's is not a region.
    """
    if config.region is not None:
        return config.region
    for name in REGION_ENVS:
        value = environ.get(name)
        if value:
            if not _REGION.fullmatch(value):
                raise AdapterConfigError(
                    "region",
                    f"must be an AWS region (us-east-1) (read from {name})",
                    package=PACKAGE,
                )
            return value
    region = botocore_region(config.profile)
    if region is None or not _REGION.fullmatch(region):
        raise AdapterConfigError(
            "region",
            "is not set: set region, or export AWS_REGION (or give the AWS "
            "profile a region)",
            package=PACKAGE,
        )
    return region


def _endpoint(
    config: BedrockConfig, *, explicit_key: bool, environ: Mapping[str, str]
) -> Endpoint[BedrockProfile]:
    region = resolve_region(config, environ)
    base = (
        public_base_url(region)
        if config.base_url is None
        else ROOT_RULE.root(config.base_url)
    )
    return Endpoint(
        base_url=base,
        display_name=DISPLAY_NAME,
        profile=BedrockProfile(
            region=region,
            credentials=CredentialChain(
                config.profile, package=PACKAGE, bearer_env=config.api_key_env
            ),
        ),
    )


def model_entry(config: BedrockConfig, model: str) -> CatalogModel | None:
    """The configured entry for ``model``, else one made from the Anthropic
    catalog for a Claude id (text and images, its window and cap)."""
    entry = config.model(model)
    if entry is not None or catalog.claude_model(model) is None:
        return entry
    claude = catalog.claude_entry(model)
    if claude is None:
        return CatalogModel(id=model, input_modalities=("text", "image"))
    return claude.catalog_model(CatalogModel, model)


def _max_tokens(config: BedrockConfig, model: str) -> int | None:
    entry = model_entry(config, model)
    cap = (entry.max_tokens if entry else None) or config.max_tokens
    if cap is None and catalog.claude_model(model) is not None:
        return DEFAULT_CLAUDE_MAX_TOKENS
    return cap


def model_info(
    config: BedrockConfig,
    endpoint: Endpoint[BedrockProfile],
    provider: str,
    model: str,
) -> LlmResolvedModelInfo:
    """``resolve_model``'s answer: the entry's (else the config's) context window
    and ``max_tokens``, and a Claude model's efforts."""
    entry = model_entry(config, model)
    profile = catalog.thinking_profile(model)
    return resolved_model_info(
        provider,
        model,
        entry,
        context_window=(entry.context_window if entry else None)
        or config.default_context_window,
        default_max_tokens=_max_tokens(config, model),
        reasoning=None
        if profile is None
        else reasoning_info(profile, config.reasoning_effort),
    )


def _request(call: WireCall[BedrockConfig, BedrockProfile]) -> WireRequest:
    options, config = call.options, call.config
    profile = call.endpoint.profile
    call.check_images(model_entry(config, options.model))
    headers = request_headers(options, provider=call.provider)
    key = call.optional_key()
    auth = (
        BearerAuth(key)
        if key is not None
        else SigV4Auth(profile.credentials.frozen(), region=profile.region)
    )
    body = build_converse_request(
        options,
        max_tokens=_max_tokens(config, options.model),
        thinking=catalog.thinking_profile(options.model),
        default_effort=config.reasoning_effort,
        attachments=call.attachments,
        provider=call.provider,
    )
    return WireRequest(
        url=endpoint_url(call.endpoint.base_url, converse_path(options.model)),
        body=body,
        headers=headers,
        auth=auth,
        secrets=auth.secrets if isinstance(auth, SigV4Auth) else (),
    )


def _count_tokens(call: WireCall[BedrockConfig, BedrockProfile]) -> TokenCountRequest:
    streamed = _request(call)
    converse = {k: streamed.body[k] for k in COUNT_TOKENS_FIELDS if k in streamed.body}
    url = endpoint_url(call.endpoint.base_url, count_tokens_path(call.options.model))
    return token_count(
        streamed,
        url=url,
        body={"input": {"converse": converse}},
        answer_key="inputTokens",
    )


def _translator(
    call: WireCall[BedrockConfig, BedrockProfile],
) -> ConverseStreamTranslator:
    return ConverseStreamTranslator(
        provider=call.provider,
        model=call.options.model,
        empty_response_as_stop=call.config.empty_response_as_stop,
    )


def _decoder(provider: str) -> EventStreamDecoder:
    return EventStreamDecoder(provider=provider)


def _describe(config: BedrockConfig, endpoint: Endpoint[BedrockProfile]) -> str:
    profile = "" if config.profile is None else f", profile={config.profile!r}"
    return f", region={endpoint.profile.region!r}{profile}"


FAMILY: Final = WireFamily(
    name=WIRE_FAMILY,
    config_class=BedrockConfig,
    endpoint=_endpoint,
    request=_request,
    translator=_translator,
    model_info=model_info,
    decoder=_decoder,
    classify_error=http_error,
    expected="an AWS event stream",
    describe=_describe,
    route=PROVIDER_ROUTE,
    count_tokens=_count_tokens,
)
"""The Amazon Bedrock ConverseStream wire family."""
