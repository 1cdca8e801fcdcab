"""The Azure OpenAI family value: config, endpoint, request and model facts.

- ``AzureOpenAIConfig`` is the one validated configuration (``package``
  ``llm-azure``). The endpoint is ``resource`` (``https://<resource>.openai.
  azure.com``), else ``base_url``, else ``AZURE_OPENAI_ENDPOINT``; none is
  ``AdapterConfigError`` keyed ``resource``. ``api_version`` (or the endpoint's
  own ``?api-version=``) selects the deployment paths, else the v1 API
  (``request``).
- ``wire`` chooses chat completions (``dsh_llm.adapters.chat``: its builder,
  translator and ``[DONE]``-ended SSE) or the Responses API
  (``dsh_llm.adapters.openai_responses``: its builder and translator).
- A call's model id is the deployment name, unless its catalog entry names a
  ``deployment``.
- Auth per request (``auth``): ``auto`` sends the API key (``api_key``, else
  ``api_key_env``, default ``AZURE_OPENAI_API_KEY``) as ``api-key`` when there
  is one, else a Microsoft Entra ID token (``auth.EntraIdTokens``); ``api-key``
  and ``entra-id`` use only that one.
- Per call, before any I/O: the image checks, the effort check, the body, the
  ``extra_headers`` check, then the credential (an Entra ID token may be
  fetched). ``FAMILY`` names the parts ``WireAdapter`` streams with. User
  guide: ``docs/azure.md``.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from typing import Any
from typing import Final
from typing import Literal

import attrs
import requests

from dsh_llm.adapter import LlmModelReasoningInfo
from dsh_llm.adapter import LlmResolvedModelInfo
from dsh_llm.adapters._wire.config import AdapterConfig
from dsh_llm.adapters._wire.config import AdapterConfigError
from dsh_llm.adapters._wire.config import CatalogLookup
from dsh_llm.adapters._wire.config import CatalogModel
from dsh_llm.adapters._wire.config import adapter_field_order
from dsh_llm.adapters._wire.config import api_key_env_field
from dsh_llm.adapters._wire.config import model_catalog
from dsh_llm.adapters._wire.extras import request_headers
from dsh_llm.adapters._wire.family import Endpoint
from dsh_llm.adapters._wire.family import WireCall
from dsh_llm.adapters._wire.family import WireFamily
from dsh_llm.adapters._wire.family import WireRequest
from dsh_llm.adapters._wire.family import effort_infos
from dsh_llm.adapters._wire.family import resolved_model_info
from dsh_llm.adapters.azure.auth import DEFAULT_SCOPE
from dsh_llm.adapters.azure.auth import EntraIdTokens
from dsh_llm.adapters.azure.errors import DISPLAY_NAME
from dsh_llm.adapters.azure.errors import http_error
from dsh_llm.adapters.azure.request import WIRES
from dsh_llm.adapters.azure.request import ApiRoot
from dsh_llm.adapters.azure.request import Wire
from dsh_llm.adapters.azure.request import api_root
from dsh_llm.adapters.azure.request import request_body
from dsh_llm.adapters.azure.request import request_url
from dsh_llm.adapters.azure.request import resource_endpoint
from dsh_llm.adapters.chat.request import WireProfile
from dsh_llm.adapters.chat.translate import chat_decoder
from dsh_llm.adapters.chat.translate import chat_translator
from dsh_llm.adapters.openai_responses.profiles import OPENAI_EFFORTS
from dsh_llm.adapters.openai_responses.profiles import ResponsesProfile
from dsh_llm.adapters.openai_responses.translate import ResponsesTranslator
from dsh_llm.config import RAW_METADATA
from dsh_llm.config import check_bool
from dsh_llm.config import check_non_empty_str
from dsh_llm.config import check_one_of
from dsh_llm.config import check_optional_match
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.transport.call import url_repr
from dsh_llm.transport.read_loop import EventTranslator
from dsh_llm.transport.session import ApiKeyAuth
from dsh_llm.transport.session import stream_headers

PROVIDER_ROUTE: Final = "azure"
"""The route this adapter serves by default."""
PACKAGE: Final = "llm-azure"
"""The plugin's name, named in config errors and credential messages."""
DEFAULT_API_KEY_ENV: Final = "AZURE_OPENAI_API_KEY"
"""Environment variable the API key is read from."""
ENDPOINT_ENV: Final = "AZURE_OPENAI_ENDPOINT"
"""Environment variable the resource endpoint is read from when the config
names none."""
API_KEY_HEADER: Final = "api-key"
"""The header an API key travels in."""
AUTH_MODES: Final = ("auto", "api-key", "entra-id")
"""The ``auth`` values."""
MAX_TOKENS_FIELDS: Final = ("max_completion_tokens", "max_tokens")
"""The chat-completions output-cap spellings (reasoning models read only the
first)."""
REASONING_EFFORTS: Final = OPENAI_EFFORTS
"""The efforts sent as ``reasoning_effort`` (chat) or ``reasoning.effort``
(Responses); which a deployment's model takes is the model's business."""

AuthMode = Literal["auto", "api-key", "entra-id"]
"""How a request is authenticated (see the module docstring)."""

_RESOURCE: Final = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?")
# Never a token request an extra header could forge: both are the adapter's.
_TAKEN_HEADERS: Final = (API_KEY_HEADER, "authorization")


@attrs.frozen(kw_only=True)
class AzureModel(CatalogModel):
    """One advertised model (config key ``models[]``): ``CatalogModel``'s fields
    and the deployment it is sent to, checked on construction like them."""

    deployment: str | None = attrs.field(
        default=None, validator=attrs.validators.optional(check_non_empty_str)
    )
    """The deployment calls naming this model go to (``None``: the id itself)."""


def _models(value: object) -> tuple[AzureModel, ...]:
    return model_catalog(value, AzureModel, package=PACKAGE)


_check_resource: Final = check_optional_match(
    _RESOURCE,
    "must be an Azure resource name (letters, digits and hyphens, at most 64, as "
    "in https://<resource>.openai.azure.com)",
)


def _check_optional_str(
    inst: object, attribute: attrs.Attribute[Any], value: Any
) -> None:
    if value is not None:
        check_non_empty_str(inst, attribute, value)


def _api_version(value: Any) -> Any:
    # YAML reads an unquoted apiVersion (2024-10-21) as a date.
    if isinstance(value, datetime.date):
        return value.isoformat()
    return value


@attrs.frozen(kw_only=True, field_transformer=adapter_field_order)
class AzureOpenAIConfig(AdapterConfig, CatalogLookup[AzureModel]):
    """The one ``AzureOpenAIAdapter`` configuration (``AdapterConfig``; plugin
    ``llm-azure``, keys ``resource``, ``baseURL``, ``apiVersion``, ``wire``,
    ``auth``...); the endpoint too is checked when ``resource`` or ``baseURL``
    gives it."""

    package = PACKAGE

    resource: str | None = attrs.field(default=None, validator=_check_resource)
    """The Azure OpenAI resource's name (``https://<resource>.openai.azure.com``);
    not together with ``base_url``."""
    base_url: str | None = attrs.field(default=None, repr=url_repr)
    """The resource endpoint (any host: ``*.cognitiveservices.azure.com``, a
    gateway), or the v1 root ``.../openai/v1`` (default: ``resource``, else
    ``AZURE_OPENAI_ENDPOINT``)."""
    api_version: str | None = attrs.field(
        default=None,
        converter=_api_version,
        validator=_check_optional_str,
        metadata={RAW_METADATA: True},
    )
    """The ``api-version`` of the deployment paths (``2024-10-21``); ``None``:
    the v1 API (unless the endpoint's query names one)."""
    wire: Wire = attrs.field(default="chat", validator=check_one_of(*WIRES))
    """``chat`` (chat completions) or ``responses`` (the Responses API)."""
    auth: AuthMode = attrs.field(default="auto", validator=check_one_of(*AUTH_MODES))
    """``auto`` (the API key when there is one, else an Entra ID token),
    ``api-key`` or ``entra-id``."""
    api_key_env: str = api_key_env_field(DEFAULT_API_KEY_ENV)
    """Environment variable read for the API key at each request."""
    token_scope: str = attrs.field(default=DEFAULT_SCOPE, validator=check_non_empty_str)
    """The scope of Entra ID tokens (another cloud's:
    ``https://cognitiveservices.azure.us/.default``)."""
    max_tokens_field: Literal["max_completion_tokens", "max_tokens"] = attrs.field(
        default="max_completion_tokens", validator=check_one_of(*MAX_TOKENS_FIELDS)
    )
    """The chat-completions output-cap field (``max_tokens`` for an old
    ``api-version``)."""
    include_usage: bool = attrs.field(default=True, validator=check_bool)
    """Ask chat completions for usage (``stream_options.include_usage``)."""
    models: tuple[AzureModel, ...] = attrs.field(
        default=None, converter=_models, hash=False, metadata={RAW_METADATA: True}
    )
    """The advertised catalog (ids, i.e. deployment names, or mappings with a
    ``deployment``; default: none)."""

    def __attrs_post_init__(self) -> None:
        if self.resource is not None and self.base_url is not None:
            raise AdapterConfigError(
                "resource",
                "and baseURL cannot both be set; give the endpoint one way",
                package=PACKAGE,
            )
        endpoint = self.endpoint
        if endpoint is not None:
            api_root(endpoint, self.api_version, package=PACKAGE)

    @property
    def endpoint(self) -> str | None:
        """The endpoint the config gives (``resource``'s or ``base_url``), or
        ``None`` when it is read from ``AZURE_OPENAI_ENDPOINT``."""
        if self.resource is not None:
            return resource_endpoint(self.resource)
        return self.base_url

    def deployment(self, model_id: str) -> str:
        """The deployment a call naming ``model_id`` goes to."""
        entry = self.model(model_id)
        return entry.deployment if entry and entry.deployment else model_id


@attrs.frozen(kw_only=True)
class AzureProfile:
    """What an Azure OpenAI adapter fixes when it is built."""

    root: ApiRoot
    """The API root and its layout."""
    wire: Wire
    """The wire spoken."""
    auth: AuthMode
    """How requests are authenticated (``entra-id`` when a credential was
    given)."""
    chat: WireProfile
    """The chat-completions profile."""
    responses: ResponsesProfile
    """The Responses profile."""
    tokens: EntraIdTokens | None = attrs.field(eq=False)
    """The Entra ID token source (``None`` with ``auth: api-key``)."""


def resolve_api_root(config: AzureOpenAIConfig, environ: Mapping[str, str]) -> ApiRoot:
    """The API root in force (see the module docstring).

    Raises:
        AdapterConfigError: keyed ``resource`` when no endpoint is found;
            ``baseURL``/``apiVersion`` for one ``AZURE_OPENAI_ENDPOINT`` gives
            that is not an endpoint.
    """
    endpoint = config.endpoint
    if endpoint is not None:
        return api_root(endpoint, config.api_version, package=PACKAGE)
    value = environ.get(ENDPOINT_ENV)
    if not value:
        raise AdapterConfigError(
            "resource",
            f"is not set: set resource or baseURL, or export {ENDPOINT_ENV}",
            package=PACKAGE,
        )
    return api_root(value, config.api_version, package=PACKAGE, source=ENDPOINT_ENV)


def _endpoint(
    config: AzureOpenAIConfig, *, explicit_key: bool, environ: Mapping[str, str]
) -> Endpoint[AzureProfile]:
    if explicit_key and config.auth == "entra-id":
        raise AdapterConfigError(
            "apiKey",
            "is given but auth is entra-id: drop the key or set auth to api-key",
            package=PACKAGE,
        )
    root = resolve_api_root(config, environ)
    hint = (
        f", or export {config.api_key_env} (an API key)"
        if config.auth == "auto"
        else ""
    )
    return Endpoint(
        base_url=root.url,
        display_name=DISPLAY_NAME,
        profile=AzureProfile(
            root=root,
            wire=config.wire,
            auth=config.auth,
            chat=WireProfile(
                provider=DISPLAY_NAME,
                reasoning_passback_field=None,
                include_usage=config.include_usage,
                max_tokens_field=config.max_tokens_field,
            ),
            responses=RESPONSES_PROFILE,
            tokens=None
            if config.auth == "api-key"
            else EntraIdTokens(
                scope=config.token_scope, package=PACKAGE, key_hint=hint
            ),
        ),
    )


RESPONSES_PROFILE: Final = ResponsesProfile(
    server="azure",
    provider=DISPLAY_NAME,
    reasoning_efforts=REASONING_EFFORTS,
    # Not known to read image parts in a function_call_output: refused, not
    # sent and rejected.
    tool_result_images=False,
)
"""What the Responses wire knows of Azure."""


def model_info(
    config: AzureOpenAIConfig,
    endpoint: Endpoint[AzureProfile],
    provider: str,
    model: str,
) -> LlmResolvedModelInfo:
    """``resolve_model``'s answer: the catalog entry's context window, cap and
    inputs (unknown, text only, for an unlisted id) and ``REASONING_EFFORTS``."""
    entry = config.model(model)
    return resolved_model_info(
        provider,
        model,
        entry,
        reasoning=LlmModelReasoningInfo(efforts=effort_infos(REASONING_EFFORTS)),
    )


def _auth(call: WireCall[AzureOpenAIConfig, AzureProfile]) -> requests.auth.AuthBase:
    """The credential of one request (see the module docstring)."""
    profile = call.endpoint.profile
    if profile.auth != "entra-id":
        key = call.key() if profile.auth == "api-key" else call.optional_key()
        if key is not None:
            return ApiKeyAuth(key, header=API_KEY_HEADER)
    tokens = profile.tokens
    assert tokens is not None  # only auth: api-key has none, and returned above
    return tokens.auth()


def _request(call: WireCall[AzureOpenAIConfig, AzureProfile]) -> WireRequest:
    options, config, profile = call.options, call.config, call.endpoint.profile
    entry = config.model(options.model)
    call.check_images(entry)
    extra: dict[str, Any] = {}
    effort = options.reasoning_effort
    if profile.wire == "chat" and effort is not None:
        if effort not in REASONING_EFFORTS:
            listed = ", ".join(REASONING_EFFORTS)
            raise LlmError(
                f'{DISPLAY_NAME} does not accept reasoning effort "{effort}" '
                f"(it accepts {listed})",
                ErrorCode.UNSUPPORTED_REASONING_EFFORT,
            )
        extra["reasoning_effort"] = effort
    deployment = config.deployment(options.model)
    body = request_body(
        options,
        wire=profile.wire,
        deployment=deployment,
        chat=profile.chat,
        responses=profile.responses,
        max_tokens=entry.max_tokens if entry else None,
        extra=extra,
        attachments=call.attachments,
    )
    headers = request_headers(
        stream_headers(), options, provider=call.provider, taken=_TAKEN_HEADERS
    )
    return WireRequest(
        url=request_url(profile.root, profile.wire, deployment),
        body=body,
        headers=headers,
        auth=_auth(call),
    )


def _translator(
    call: WireCall[AzureOpenAIConfig, AzureProfile],
) -> EventTranslator[Any]:
    profile = call.endpoint.profile
    if profile.wire == "responses":
        return ResponsesTranslator(
            profile.responses,
            empty_response_as_stop=call.config.empty_response_as_stop,
        )
    # The chat wire's own hook, on the same call seen with its chat profile.
    return chat_translator(call.with_profile(profile.chat))


def _describe(config: AzureOpenAIConfig, endpoint: Endpoint[AzureProfile]) -> str:
    profile = endpoint.profile
    auth = "" if profile.auth == "auto" else f", auth={profile.auth!r}"
    return f", wire={profile.wire!r}{auth}"


FAMILY: Final = WireFamily(
    name="azure-openai",
    config_class=AzureOpenAIConfig,
    endpoint=_endpoint,
    request=_request,
    translator=_translator,
    model_info=model_info,
    # One decoder for both wires (the hook cannot see the config): the chat
    # wire's ends at data: [DONE]; a Responses stream has none, and a [DONE]
    # there reaches its translator as it would with the Responses decoder.
    decoder=chat_decoder,
    classify_error=http_error,
    describe=_describe,
    route=PROVIDER_ROUTE,
)
"""The Azure OpenAI family: chat completions or the Responses API."""
