"""The OpenAI Responses API family value: config, endpoint, request and model facts.

- ``OpenAIResponsesConfig`` is the one validated configuration (``package``
  ``llm-openai-responses``); ``base_url`` follows ``api_root_url`` and may not
  end in ``/responses``; the catalog is advisory and empty by default.
- The server profile (``profiles``) is ``server``, else guessed from the base
  URL; it is the ``Endpoint.profile`` and names the provider in messages. A key
  given both as ``api_key`` and ``api_key_env`` is refused (``apiKey``).
- Per call, before any I/O: the image checks, the body
  (``request.build_responses_request``) and its refusals, the key (read now,
  sent as ``authorization: Bearer``), then ``extra_headers``.
- ``count_tokens`` (the ``openai`` server only; others have no such endpoint:
  ``UNSUPPORTED_OPTION``): ``POST <base_url>/responses/input_tokens`` with the
  fields of the stream request that endpoint takes (``COUNT_TOKENS_FIELDS``);
  the answer's ``input_tokens``.
- ``FAMILY`` names the parts ``WireAdapter`` streams with. User guide:
  ``docs/openai-responses.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import attrs

from dsh_llm.adapter import LlmModelReasoningInfo
from dsh_llm.adapter import LlmResolvedModelInfo
from dsh_llm.adapters._wire.config import AdapterConfig
from dsh_llm.adapters._wire.config import AdapterConfigError
from dsh_llm.adapters._wire.config import CatalogLookup
from dsh_llm.adapters._wire.config import CatalogModel
from dsh_llm.adapters._wire.config import adapter_field_order
from dsh_llm.adapters._wire.config import api_key_env_field
from dsh_llm.adapters._wire.config import api_root_url
from dsh_llm.adapters._wire.config import endpoint_url
from dsh_llm.adapters._wire.config import model_catalog
from dsh_llm.adapters._wire.extras import request_headers
from dsh_llm.adapters._wire.family import Endpoint
from dsh_llm.adapters._wire.family import TokenCountRequest
from dsh_llm.adapters._wire.family import WireCall
from dsh_llm.adapters._wire.family import WireFamily
from dsh_llm.adapters._wire.family import WireRequest
from dsh_llm.adapters._wire.family import effort_infos
from dsh_llm.adapters._wire.family import fields_count
from dsh_llm.adapters._wire.family import resolved_model_info
from dsh_llm.adapters.openai_responses.profiles import PROFILES
from dsh_llm.adapters.openai_responses.profiles import ResponsesProfile
from dsh_llm.adapters.openai_responses.profiles import guess_server
from dsh_llm.adapters.openai_responses.request import REPLAY_WIRE
from dsh_llm.adapters.openai_responses.request import build_responses_request
from dsh_llm.adapters.openai_responses.request import output_cap
from dsh_llm.adapters.openai_responses.translate import RAW_EVENT_BYTES
from dsh_llm.adapters.openai_responses.translate import ResponsesTranslator
from dsh_llm.config import RAW_METADATA
from dsh_llm.config import check_bool
from dsh_llm.config import check_one_of
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.transport.call import url_repr
from dsh_llm.transport.session import BearerAuth
from dsh_llm.transport.session import NoAuth
from dsh_llm.transport.session import stream_headers
from dsh_llm.transport.sse import SseDecoder

PACKAGE: Final = "llm-openai-responses"
"""The plugin's name, named in config errors and credential messages."""
DEFAULT_BASE_URL: Final = "https://api.openai.com/v1"
"""The API root when none is given."""
AUTHORIZATION: Final = "authorization"
"""The key's header (``Bearer``), which ``extra_headers`` may not set when a
key is sent."""
RESPONSES_PATH: Final = "/responses"
"""Appended to the API root to reach the endpoint."""
COUNT_TOKENS_PATH: Final = "/responses/input_tokens"
"""Appended to the API root to reach the token-counting endpoint."""
COUNT_TOKENS_FIELDS: Final = frozenset(
    {
        "model",
        "instructions",
        "input",
        "tools",
        "tool_choice",
        "reasoning",
        "text",
        "parallel_tool_calls",
        "truncation",
        "conversation",
        "previous_response_id",
    }
)
"""The body fields the token-counting endpoint takes; the stream request's
others (``max_output_tokens``, ``stream``, ``store``, ``include``, sampling,
``prompt_cache_key``) do not change the input and are left out."""
COUNTING_SERVERS: Final = frozenset({"openai"})
"""The server profiles known to offer ``/responses/input_tokens``."""
SERVERS: Final = tuple(PROFILES)
"""The ``server`` names: ``openai``, ``vllm``, ``ollama``, ``lmstudio``,
``openrouter``, ``llamacpp``."""


def _catalog(value: object) -> tuple[CatalogModel, ...]:
    return model_catalog(value, CatalogModel, package=PACKAGE)


def _base_url(value: object) -> str:
    return api_root_url(value, package=PACKAGE, endpoint=RESPONSES_PATH)


@attrs.frozen(kw_only=True, field_transformer=adapter_field_order)
class OpenAIResponsesConfig(AdapterConfig, CatalogLookup[CatalogModel]):
    """The one ``OpenAIResponsesAdapter`` configuration (``AdapterConfig``;
    plugin ``llm-openai-responses``, keys ``baseURL``, ``apiKeyEnv``,
    ``server``...): the base URL is normalised, models made ``CatalogModel``
    values."""

    package = PACKAGE

    base_url: str = attrs.field(
        default=DEFAULT_BASE_URL, converter=_base_url, repr=url_repr
    )
    """The API root, e.g. ``http://127.0.0.1:11434/v1`` (credentials hidden in
    the ``repr``)."""
    api_key_env: str | None = api_key_env_field(None)
    """Environment variable read for the key at each request, or ``None``."""
    server: str | None = attrs.field(
        default=None, validator=attrs.validators.optional(check_one_of(*SERVERS))
    )
    """The server profile (``None``: guessed from ``base_url``, else ``openai``)."""
    models: tuple[CatalogModel, ...] = attrs.field(
        default=None, converter=_catalog, hash=False, metadata={RAW_METADATA: True}
    )
    """The advertised catalog (ids or mappings; default: none). An entry's
    ``max_tokens`` is sent as ``max_output_tokens`` when a request names no cap;
    with ``image`` in its inputs, images go as ``input_image`` data URLs."""
    unmarked_cap_cut: bool | None = attrs.field(
        default=None, validator=attrs.validators.optional(check_bool)
    )
    """Whether the server ends an answer cut at ``max_output_tokens`` as
    ``completed``, so that a ``completed`` answer whose ``output_tokens``
    reached the cap sent is ``max-tokens`` (even one whose natural end fell
    exactly on it). ``None``: the profile's (on for ``llamacpp`` only); on for
    a proxy in front of llama-server (LiteLLM's ``openai/`` route)."""

    @property
    def profile(self) -> ResponsesProfile:
        """The server profile in force (``server``, else the guess)."""
        return PROFILES[self.server or guess_server(self.base_url)]


def _endpoint(
    config: OpenAIResponsesConfig, *, explicit_key: bool, environ: Mapping[str, str]
) -> Endpoint[ResponsesProfile]:
    if explicit_key and config.api_key_env is not None:
        raise AdapterConfigError(
            "apiKey",
            "and apiKeyEnv cannot both be set; give the key one way",
            package=PACKAGE,
        )
    profile = config.profile
    return Endpoint(
        base_url=config.base_url, display_name=profile.provider, profile=profile
    )


def model_info(
    config: OpenAIResponsesConfig,
    endpoint: Endpoint[ResponsesProfile],
    provider: str,
    model: str,
) -> LlmResolvedModelInfo:
    """``resolve_model``'s answer: the catalog entry's context window, cap and
    inputs (unknown, text only, for an unlisted id), the profile's efforts."""
    return resolved_model_info(
        provider,
        model,
        config.model(model),
        reasoning=LlmModelReasoningInfo(
            efforts=effort_infos(endpoint.profile.reasoning_efforts)
        ),
    )


def _request(call: WireCall[OpenAIResponsesConfig, ResponsesProfile]) -> WireRequest:
    options, config, profile = call.options, call.config, call.endpoint.profile
    entry = config.model(options.model)
    call.check_images(entry)
    body = build_responses_request(
        options,
        profile=profile,
        max_output_tokens=entry.max_tokens if entry else None,
        attachments=call.attachments,
    )
    key = call.key()
    headers = request_headers(
        stream_headers(),
        options,
        provider=call.provider,
        taken=() if key is None else (AUTHORIZATION,),
    )
    return WireRequest(
        url=endpoint_url(call.endpoint.base_url, RESPONSES_PATH),
        body=body,
        headers=headers,
        auth=NoAuth() if key is None else BearerAuth(key),
    )


def _count_tokens(
    call: WireCall[OpenAIResponsesConfig, ResponsesProfile],
) -> TokenCountRequest:
    profile = call.endpoint.profile
    if profile.server not in COUNTING_SERVERS:
        raise LlmError(
            f"{profile.provider} has no token-counting endpoint (only OpenAI's "
            "Responses API offers /responses/input_tokens)",
            ErrorCode.UNSUPPORTED_OPTION,
        )
    return fields_count(
        _request(call),
        url=endpoint_url(call.endpoint.base_url, COUNT_TOKENS_PATH),
        fields=COUNT_TOKENS_FIELDS,
        answer_key="input_tokens",
    )


def _translator(
    call: WireCall[OpenAIResponsesConfig, ResponsesProfile],
) -> ResponsesTranslator:
    profile, config = call.endpoint.profile, call.config
    unmarked = config.unmarked_cap_cut
    cap = None
    if profile.unmarked_cap_cut if unmarked is None else unmarked:
        entry = config.model(call.options.model)
        cap = output_cap(call.options, entry.max_tokens if entry else None)
    return ResponsesTranslator(
        profile,
        empty_response_as_stop=config.empty_response_as_stop,
        unmarked_cap=cap,
    )


def _describe(
    config: OpenAIResponsesConfig, endpoint: Endpoint[ResponsesProfile]
) -> str:
    return f", server={endpoint.profile.server!r}"


def _decoder(provider: str) -> SseDecoder:
    """The SSE decoder: a long event stays bytes for the translator (see
    ``ResponsesTranslator._long_payload``)."""
    return SseDecoder(terminal_data=None, provider=provider, raw_over=RAW_EVENT_BYTES)


FAMILY: Final = WireFamily(
    name=REPLAY_WIRE,
    config_class=OpenAIResponsesConfig,
    endpoint=_endpoint,
    request=_request,
    translator=_translator,
    model_info=model_info,
    decoder=_decoder,
    describe=_describe,
    count_tokens=_count_tokens,
)
"""The OpenAI Responses API wire family (a ``[DONE]`` after the terminal event
reaches the translator, which has finished and ignores it)."""
