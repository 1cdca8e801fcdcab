"""``OpenAICompatAdapter``: any server that speaks the OpenAI chat-completions stream
(OpenAI, vLLM, llama.cpp, Ollama ``/v1``, LM Studio, and the hosted services with
a named profile: Groq, Mistral, xAI, OpenRouter...), a family on the
chat-completions wire it shares with ``DeepSeekAdapter``
(``dsh_llm.adapters.chat``), streamed by ``WireAdapter``.

- ``service="groq"`` (or ``OpenAICompatAdapter.for_service("groq")``, or
  ``service: groq`` in a composition entry) fills in a hosted service's profile
  (``dsh_llm.adapters.chat.services``): API root, key variable, display name,
  catalog, request spellings, stream quirks; explicit options win
  (``docs/hosted-services.md``).

- ``OpenAICompatConfig`` is the one validated configuration (``package``
  ``llm-openai-compatible``; ``base_url`` plus the constructor's keywords build
  it, ``from_config`` takes one); a bad value raises
  ``dsh_llm.adapters.AdapterConfigError`` keyed by its config key, never echoing
  a header value or a key.
- No credentials by default; ``api_key`` or ``api_key_env`` (never both) travel
  as ``authorization: Bearer`` and never appear in a message or a ``repr``.
- Extra ``headers`` are sent as given; names the adapter sets are refused.
- Catalog entries may list ``inputModalities: [text, image]``: images then go
  as ``image_url`` data URLs read from ``adapter.attachments``.
- Per call, before any I/O: images, an unlisted reasoning effort, then the key;
  then one ``POST <base_url>/chat/completions``. ``session_id`` and ``purpose``
  travel as the headers ``x-session-id`` and ``x-dsh-llm-purpose``.
- ``FAMILY`` names the parts ``WireAdapter`` streams with. Every wire quirk the
  translator absorbs, the options and the error classification are in
  ``docs/local-servers.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any
from typing import Final
from typing import Literal
from typing import Self

import attrs

from dsh_llm.adapter import LlmModelReasoningInfo
from dsh_llm.adapter import LlmResolvedModelInfo
from dsh_llm.adapters._wire.adapter import ServerAdapter
from dsh_llm.adapters._wire.config import AdapterConfig
from dsh_llm.adapters._wire.config import AdapterConfigError
from dsh_llm.adapters._wire.config import CatalogLookup
from dsh_llm.adapters._wire.config import CatalogModel
from dsh_llm.adapters._wire.config import adapter_field_order
from dsh_llm.adapters._wire.config import api_root_url
from dsh_llm.adapters._wire.config import model_catalog
from dsh_llm.adapters._wire.extras import RESERVED_HEADER_NAMES
from dsh_llm.adapters._wire.family import Endpoint
from dsh_llm.adapters._wire.family import WireCall
from dsh_llm.adapters._wire.family import WireFamily
from dsh_llm.adapters._wire.family import WireRequest
from dsh_llm.adapters._wire.family import effort_infos
from dsh_llm.adapters._wire.family import resolved_model_info
from dsh_llm.adapters.chat.request import CHAT_COMPLETIONS_PATH
from dsh_llm.adapters.chat.request import RESPONSE_FORMAT_STYLES
from dsh_llm.adapters.chat.request import ResponseFormatStyle
from dsh_llm.adapters.chat.request import WireProfile
from dsh_llm.adapters.chat.request import build_body
from dsh_llm.adapters.chat.request import chat_request
from dsh_llm.adapters.chat.request import session_id_value
from dsh_llm.adapters.chat.services import SERVICE_NAMES
from dsh_llm.adapters.chat.services import SERVICES
from dsh_llm.adapters.chat.services import HostedService
from dsh_llm.adapters.chat.translate import chat_decoder
from dsh_llm.adapters.chat.translate import chat_translator
from dsh_llm.config import RAW_METADATA
from dsh_llm.config import check_bool
from dsh_llm.config import check_non_empty_str
from dsh_llm.config import check_one_of
from dsh_llm.config import field_error
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.transport.call import url_repr
from dsh_llm.transport.session import is_header_name
from dsh_llm.transport.session import is_header_value

__all__ = [
    "DEFAULT_DISPLAY_NAME",
    "FAMILY",
    "PURPOSE_HEADER",
    "RESERVED_HEADERS",
    "SERVICE_NAMES",
    "SESSION_ID_HEADER",
    "ModelSpec",
    "OpenAICompatAdapter",
    "OpenAICompatConfig",
]

PACKAGE: Final = "llm-openai-compatible"
"""The package name that prefixes configuration and credential messages."""
DEFAULT_DISPLAY_NAME: Final = "OpenAI-compatible"
"""The provider name used in messages unless ``display_name`` says otherwise."""
MAX_TOKENS_FIELDS: Final = ("max_tokens", "max_completion_tokens")
"""The output-cap field spellings a server may read."""
REASONING_PASSBACK_FIELDS: Final = ("reasoning_content", "reasoning")
"""The assistant-message fields reasoning may be sent back in."""
SESSION_ID_HEADER: Final = "x-session-id"
"""The header ``GenerateOptions.session_id`` travels in."""
PURPOSE_HEADER: Final = "x-dsh-llm-purpose"
"""The header ``GenerateOptions.purpose`` travels in."""
RESERVED_HEADERS: Final = RESERVED_HEADER_NAMES
"""Header names the adapter sets itself; ``headers`` may not replace them."""


ModelSpec = str | Mapping[str, Any] | CatalogModel
"""One ``models`` entry: an id, a config mapping or a model value."""


def _catalog(models: object) -> tuple[CatalogModel, ...]:
    return model_catalog(models, CatalogModel, package=PACKAGE)


def _refuse(key: str, detail: str) -> AdapterConfigError:
    return AdapterConfigError(key, detail, package=PACKAGE)


def _headers(value: object) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _refuse("headers", "must be a mapping of header names to values")
    checked: dict[str, str] = {}
    seen: set[str] = set()
    for name, text in value.items():
        if not isinstance(name, str) or not is_header_name(name):
            raise _refuse("headers", "has a name that is not a valid HTTP header name")
        where = f"headers.{name}"
        lower = name.lower()
        if lower in RESERVED_HEADERS:
            raise _refuse(
                where,
                "is set by the adapter and cannot be replaced (the user-agent "
                "carries the attribution every request keeps)",
            )
        if not isinstance(text, str):
            raise _refuse(where, "must be a string")
        if not is_header_value(text):
            raise _refuse(
                where,
                "must be printable ASCII without leading or trailing whitespace, "
                "line breaks or control characters",
            )
        if lower in seen:
            raise _refuse(where, "is given twice (header names are case-insensitive)")
        seen.add(lower)
        # Kept as written, so an error about a name (the authorization conflict
        # the endpoint hook finds) names the key the composition spells.
        checked[name] = text
    return checked


def _efforts(value: object) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, Sequence) or not value:
        raise _refuse("reasoningEfforts", "must be a non-empty list of effort ids")
    if any(not isinstance(effort, str) or effort == "" for effort in value):
        raise _refuse("reasoningEfforts", "must contain only non-empty strings")
    if len(set(value)) != len(value):
        raise _refuse("reasoningEfforts", "must not contain duplicates")
    return tuple(value)


def _check_display_name(
    inst: object, attribute: attrs.Attribute[Any], value: Any
) -> None:
    if not isinstance(value, str) or not value.strip():
        raise field_error(inst, attribute.name, "must be a non-empty string")


def _base_url(value: object) -> str:
    return api_root_url(value, package=PACKAGE, endpoint=CHAT_COMPLETIONS_PATH)


def _service(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or value not in SERVICES:
        raise _refuse(
            "service", "must name a hosted service: " + ", ".join(SERVICE_NAMES)
        )
    return value


def _service_of(config: Any) -> HostedService | None:
    """The profile ``config.service`` names, ``None`` without one (also while
    the config is being built: ``service`` is its first field, set first)."""
    name = config.service
    return None if name is None else SERVICES[name]


def _from_profile(name: str, fallback: Any) -> Any:
    """A field default: the service profile's ``name``, else ``fallback``."""

    def default(config: Any) -> Any:
        profile = _service_of(config)
        return fallback if profile is None else getattr(profile, name)

    return attrs.Factory(default, takes_self=True)


def _default_base_url(config: Any) -> str:
    profile = _service_of(config)
    if profile is None:
        raise _refuse("baseURL", "is required (or name a hosted service in service)")
    return profile.base_url


def _raw() -> dict[str, Any]:
    return {RAW_METADATA: True}


@attrs.frozen(kw_only=True, field_transformer=adapter_field_order)
class OpenAICompatConfig(AdapterConfig, CatalogLookup[CatalogModel]):
    """The one ``OpenAICompatAdapter`` configuration (``AdapterConfig``; plugin
    ``llm-openai-compatible``, keys ``baseURL``, ``apiKeyEnv``,
    ``maxTokensField``...). Values are normalised too (the base URL loses its
    trailing slash, models become ``CatalogModel`` values; header names stay as
    written and are sent lower-cased), and an error never echoes a header
    value."""

    package = PACKAGE

    service: str | None = attrs.field(default=None, converter=_service)
    """A hosted service's profile (``SERVICE_NAMES``: ``groq``, ``mistral``,
    ``xai``...): the defaults of the fields below (API root, key variable,
    display name, catalog, request spellings) and the stream's quirks; ``None``:
    a generic server. A field given explicitly wins over the profile."""
    base_url: str = attrs.field(
        default=attrs.Factory(_default_base_url, takes_self=True),
        converter=_base_url,
        repr=url_repr,
    )
    """The API root, e.g. ``http://127.0.0.1:8080/v1`` (credentials hidden in the
    ``repr``); required unless ``service`` gives it."""
    api_key_env: str | None = attrs.field(
        default=_from_profile("api_key_env", None),
        validator=attrs.validators.optional(check_non_empty_str),
    )
    """Environment variable read for the key at each request, or ``None``
    (default: the service's, else none)."""
    headers: Mapping[str, str] = attrs.field(
        default=None,
        converter=_headers,
        hash=False,
        repr=lambda value: "<headers: " + ", ".join(sorted(value)) + ">",
        metadata=_raw(),
    )
    """Extra request headers (names may not be ``RESERVED_HEADERS``; the repr
    shows only the names: values may be credentials)."""
    display_name: str = attrs.field(
        default=_from_profile("display_name", DEFAULT_DISPLAY_NAME),
        validator=_check_display_name,
    )
    """The provider name in messages and ``provider_info`` (default: the
    service's, else ``DEFAULT_DISPLAY_NAME``)."""
    models: tuple[CatalogModel, ...] = attrs.field(
        default=_from_profile("models", None),
        converter=_catalog,
        hash=False,
        metadata=_raw(),
    )
    """The advertised catalog (``ModelSpec`` entries; default: the service's,
    else none)."""
    include_usage: bool = attrs.field(
        default=_from_profile("include_usage", True), validator=check_bool
    )
    """Send ``stream_options: {"include_usage": true}`` (default: the
    service's, else ``True``)."""
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = attrs.field(
        default=_from_profile("max_tokens_field", "max_tokens"),
        validator=check_one_of(*MAX_TOKENS_FIELDS),
    )
    """The output-cap field the server reads (default: the service's, else
    ``max_tokens``)."""
    response_format_style: ResponseFormatStyle = attrs.field(
        default=_from_profile("response_format_style", "json_schema"),
        validator=check_one_of(*RESPONSE_FORMAT_STYLES),
    )
    """How ``response_format`` is sent (config key ``responseFormatStyle``):
    ``json_schema`` (the OpenAI spelling), ``json_object_schema``
    (``{type: json_object, schema}``, llama-cpp-python's server) or
    ``json_object`` (JSON mode only: the schema is not sent, a strict format is
    refused)."""
    reasoning_efforts: tuple[str, ...] | None = attrs.field(
        default=None, converter=_efforts, metadata=_raw()
    )
    """Effort ids the server takes as ``reasoning_effort``, for every model
    (``None``: a service's efforts for the models its catalog lists them for;
    any other requested effort raises)."""
    reasoning_passback_field: Literal["reasoning_content", "reasoning"] | None = (
        attrs.field(
            default=_from_profile("reasoning_passback_field", None),
            validator=attrs.validators.optional(
                check_one_of(*REASONING_PASSBACK_FIELDS)
            ),
        )
    )
    """Field that sends earlier reasoning back in assistant messages (``None``:
    never; default: the service's, else ``None``)."""


def _endpoint(
    config: OpenAICompatConfig, *, explicit_key: bool, environ: Mapping[str, str]
) -> Endpoint[WireProfile]:
    """The config's root and display name, and its ``WireProfile`` (with the
    configured ``headers``).

    Raises:
        AdapterConfigError: keyed ``apiKey`` for a key given both ways, keyed
            ``headers.<name>`` for an ``authorization`` header beside a key.
    """
    service = _service_of(config)
    profile_key_env = None if service is None else service.api_key_env
    # An explicit key replaces the service's own variable (not one set apart).
    if (
        explicit_key
        and config.api_key_env is not None
        and config.api_key_env != profile_key_env
    ):
        raise _refuse(
            "apiKey", "and apiKeyEnv cannot both be set; give the key one way"
        )
    authorization = next(
        (name for name in config.headers if name.lower() == "authorization"), None
    )
    if authorization is not None and (explicit_key or config.api_key_env is not None):
        raise _refuse(
            f"headers.{authorization}",
            "conflicts with apiKey/apiKeyEnv: give the key one way",
        )
    return Endpoint(
        base_url=config.base_url,
        display_name=config.display_name,
        profile=WireProfile(
            provider=config.display_name,
            reasoning_passback_field=config.reasoning_passback_field,
            include_usage=config.include_usage,
            max_tokens_field=config.max_tokens_field,
            response_format_style=config.response_format_style,
            headers=config.headers,
            **({} if service is None else service.wire_quirks()),
        ),
    )


def model_efforts(config: OpenAICompatConfig, model: str) -> tuple[str, ...] | None:
    """The efforts ``model`` takes: ``reasoning_efforts`` when configured, else
    the service's for that model, else none."""
    if config.reasoning_efforts is not None:
        return config.reasoning_efforts
    service = _service_of(config)
    return None if service is None else service.model_efforts.get(model)


def model_info(
    config: OpenAICompatConfig,
    endpoint: Endpoint[WireProfile],
    provider: str,
    model: str,
) -> LlmResolvedModelInfo:
    """``resolve_model``'s answer: the entry's context window and output cap (none
    for an unlisted id) and the model's efforts (``model_efforts``)."""
    entry = config.model(model)
    efforts = model_efforts(config, model)
    return resolved_model_info(
        provider,
        model,
        entry,
        reasoning=None
        if efforts is None
        else LlmModelReasoningInfo(efforts=effort_infos(efforts)),
    )


def _request(call: WireCall[OpenAICompatConfig, WireProfile]) -> WireRequest:
    options, config = call.options, call.config
    profile = call.endpoint.profile
    entry = config.model(options.model)
    call.check_images(entry)  # before the effort check
    extra: dict[str, Any] = {}
    effort = options.reasoning_effort
    if effort is not None:
        efforts = model_efforts(config, options.model)
        if efforts is None or effort not in efforts:
            raise LlmError(
                f"{profile.provider} adapter does not support reasoning "
                f'effort "{effort}" (list it in reasoning_efforts to send it)',
                ErrorCode.UNSUPPORTED_REASONING_EFFORT,
            )
        extra["reasoning_effort"] = effort
    max_tokens = options.max_tokens
    if max_tokens is None:
        max_tokens = entry.max_tokens if entry else None
    body = build_body(
        options,
        profile=profile,
        max_tokens=max_tokens,
        extra=extra,
        attachments=call.attachments,
    )
    routing: dict[str, str] = {}
    if options.session_id is not None:
        routing[SESSION_ID_HEADER] = session_id_value(options, profile=profile)
    if options.purpose is not None:
        routing[PURPOSE_HEADER] = options.purpose
    return chat_request(call, body, routing=routing, key=call.key())


def _describe(config: OpenAICompatConfig, endpoint: Endpoint[WireProfile]) -> str:
    names = tuple(name.lower() for name in config.headers)
    service = "" if config.service is None else f", service={config.service!r}"
    return service + (f", headers={names!r}" if names else "")


FAMILY: Final = WireFamily(
    name="openai-compatible",
    config_class=OpenAICompatConfig,
    endpoint=_endpoint,
    request=_request,
    translator=chat_translator,
    model_info=model_info,
    decoder=chat_decoder,
    describe=_describe,
)
"""Any OpenAI-compatible chat-completions server, as a wire family."""


class OpenAICompatAdapter(ServerAdapter[OpenAICompatConfig]):
    """Streams chat completions from an OpenAI-compatible server (see the module
    docstring).

    The keyword arguments besides ``api_key`` and ``environ`` are
    ``OpenAICompatConfig``'s fields (``service``, ``api_key_env``, ``headers``,
    ``display_name``, ``models``, ``include_usage``, ``max_tokens_field``,
    ``response_format_style``, ``reasoning_efforts``,
    ``reasoning_passback_field``, the three stream timeouts, ``retry_policy``,
    ``pool_maxsize``, ``empty_response_as_stop``) and build one with
    ``base_url``; ``OpenAICompatAdapter.from_config(config)`` takes one built
    elsewhere, ``OpenAICompatAdapter.for_service(name)`` names a hosted service.

    Args:
        base_url: The API root, e.g. ``http://127.0.0.1:8080/v1`` (default: the
            ``service``'s; one of the two is required).
        api_key: The key (``str`` or ``Secret``), or ``None``. Not together with
            an ``api_key_env`` of one's own (it replaces a service's variable).
        environ: Where ``api_key_env`` is read (default ``os.environ``, live).
        **options: ``OpenAICompatConfig`` fields.

    Raises:
        AdapterConfigError: for an invalid option (a ``ValueError``).
        TypeError: for a keyword that is not an ``OpenAICompatConfig`` field.
        LlmError: ``INVALID_CREDENTIAL`` for an explicit key no header can carry.
    """

    family = FAMILY

    @classmethod
    def for_service(cls, service: str, **options: Any) -> Self:
        """An adapter for the hosted service ``service`` (``SERVICE_NAMES``):
        ``OpenAICompatAdapter(service=service, **options)``; the keyword
        arguments are the constructor's (``api_key``, ``environ``, and the
        config fields, which override the profile's: ``base_url`` for a proxy,
        ``api_key_env``, ``models``...).

        Raises:
            AdapterConfigError: keyed ``service`` for an unknown name, or for an
                invalid option.
        """
        return cls(service=service, **options)
