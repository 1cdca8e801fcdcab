"""``DeepSeekAdapter``: DeepSeek chat completions, a family on the shared
chat-completions wire (``dsh_llm.adapters.chat``) streamed by ``WireAdapter``.

- ``DeepSeekConfig`` is the one validated configuration (``package``
  ``llm-deepseek``; the constructor's keywords build it, ``from_config`` takes
  one); a bad value raises ``dsh_llm.adapters.AdapterConfigError`` keyed by its
  config key.
- One route, ``deepseek-official``; an advisory catalog; ``resolve_model`` needs
  no I/O. The base URL is the explicit one, else ``DEEPSEEK_BASE_URL``, else the
  public API (``resolve_base_url``).
- Per call, before any I/O: images, then the key, then the body (effort,
  thinking-mode refusals as ``UNSUPPORTED_OPTION``); then one
  ``POST {base_url}/chat/completions``.
- The key is read per request from ``api_key`` or ``api_key_env`` and never
  appears in a message or a ``repr``.
- ``FAMILY`` names the parts ``WireAdapter`` streams with. The full contract
  (thinking, what is refused and why, routing headers, the stream) is
  ``docs/deepseek.md``; the error codes are ``docs/errors.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from typing import Final
from typing import Literal

import attrs

from dsh_llm.adapter import LlmModelReasoningInfo
from dsh_llm.adapter import LlmResolvedModelInfo
from dsh_llm.adapters._wire.adapter import WireAdapter
from dsh_llm.adapters._wire.config import AdapterConfig
from dsh_llm.adapters._wire.config import AdapterConfigError
from dsh_llm.adapters._wire.config import BaseUrlRule
from dsh_llm.adapters._wire.config import CatalogLookup
from dsh_llm.adapters._wire.config import CatalogModel
from dsh_llm.adapters._wire.config import adapter_field_order
from dsh_llm.adapters._wire.config import api_key_env_field
from dsh_llm.adapters._wire.config import model_catalog
from dsh_llm.adapters._wire.config import reasoning_effort_field
from dsh_llm.adapters._wire.family import Endpoint
from dsh_llm.adapters._wire.family import WireCall
from dsh_llm.adapters._wire.family import WireFamily
from dsh_llm.adapters._wire.family import WireRequest
from dsh_llm.adapters._wire.family import effort_infos
from dsh_llm.adapters._wire.family import resolved_model_info
from dsh_llm.adapters._wire.family import root_endpoint
from dsh_llm.adapters.chat.request import CHAT_COMPLETIONS_PATH
from dsh_llm.adapters.chat.request import WireProfile
from dsh_llm.adapters.chat.request import build_body
from dsh_llm.adapters.chat.request import chat_request
from dsh_llm.adapters.chat.request import session_id_value
from dsh_llm.adapters.chat.translate import chat_decoder
from dsh_llm.adapters.chat.translate import chat_translator
from dsh_llm.config import check_one_of
from dsh_llm.config import check_positive_int
from dsh_llm.config import check_safe_positive_int
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import content_has_image

__all__ = [
    "BASE_URL_ENV",
    "DEFAULT_API_KEY_ENV",
    "DEFAULT_MODELS",
    "FAMILY",
    "PROVIDER_ROUTE",
    "PUBLIC_BASE_URL",
    "REASONING_EFFORTS",
    "DeepSeekAdapter",
    "DeepSeekConfig",
    "resolve_base_url",
]

PROVIDER_ROUTE: Final = "deepseek-official"
"""The one route this adapter serves."""
DISPLAY_NAME: Final = "DeepSeek"
"""The route's display name."""
PUBLIC_BASE_URL: Final = "https://api.deepseek.com"
"""The public API root (``/chat/completions`` is appended)."""
BASE_URL_ENV: Final = "DEEPSEEK_BASE_URL"
"""Environment variable that may name another API root."""
DEFAULT_API_KEY_ENV: Final = "DEEPSEEK_API_KEY"
"""Environment variable the key is read from by default."""
DEFAULT_MAX_TOKENS: Final = 256_000
"""Default per-request output cap."""
DEFAULT_CONTEXT_WINDOW: Final = 1_000_000
"""Default context window of a model without its own."""
REASONING_EFFORTS: Final = ("off", "low", "high", "max")
"""The efforts DeepSeek accepts (``off`` disables thinking)."""
PACKAGE: Final = "llm-deepseek"
"""The plugin's name, named in config errors and credential messages."""
SESSION_ID_HEADER: Final = "x-deepseek-harness-session-id"
"""The header ``GenerateOptions.session_id`` travels in."""
COMPACTION_HEADER: Final = "x-deepseek-harness-compact"
"""The header (``1``) of a request whose ``purpose`` is ``compaction``."""

PROFILE: Final = WireProfile(
    provider=DISPLAY_NAME,
    reasoning_fields=("reasoning_content",),
    reasoning_passback_field="reasoning_content",
    include_usage=True,
    response_format_style="json_object",
    prompt_cache_key=False,
)
"""How DeepSeek differs from the generic chat-completions wire."""


DEFAULT_MODELS: Final = (
    CatalogModel(
        id="deepseek-v4-flash",
        name="DeepSeek-V4-Flash",
        context_window=DEFAULT_CONTEXT_WINDOW,
    ),
    CatalogModel(
        id="deepseek-v4-pro",
        name="DeepSeek-V4-Pro",
        context_window=DEFAULT_CONTEXT_WINDOW,
    ),
    CatalogModel(
        id="deepseek-v4-flash-vision-exp",
        name="DeepSeek-V4-Flash-Vision-Exp",
        context_window=DEFAULT_CONTEXT_WINDOW,
        input_modalities=("text", "image"),
    ),
)
"""The catalog advertised when none is configured."""


def _models(value: object) -> tuple[CatalogModel, ...]:
    """The ``models`` option (``model_catalog``); ``None`` is ``DEFAULT_MODELS``."""
    return model_catalog(value, CatalogModel, package=PACKAGE, default=DEFAULT_MODELS)


BASE_URL_RULE: Final = BaseUrlRule(
    package=PACKAGE,
    endpoint=CHAT_COMPLETIONS_PATH,
    public=PUBLIC_BASE_URL,
    env=BASE_URL_ENV,
)
"""Where the API root comes from (``resolve_base_url``)."""


@attrs.frozen(kw_only=True, field_transformer=adapter_field_order)
class DeepSeekConfig(AdapterConfig, CatalogLookup[CatalogModel]):
    """The one ``DeepSeekAdapter`` configuration (``AdapterConfig``; plugin
    ``llm-deepseek``, keys ``apiKeyEnv``, ``baseURL``, ``thinking``...)."""

    package = PACKAGE

    api_key_env: str = api_key_env_field(DEFAULT_API_KEY_ENV)
    """Environment variable holding the key."""
    base_url: str | None = BASE_URL_RULE.field()
    """API root; default ``DEEPSEEK_BASE_URL``, then the public URL."""
    thinking: Literal["enabled", "disabled"] | None = attrs.field(
        default=None,
        validator=attrs.validators.optional(check_one_of("enabled", "disabled")),
    )
    """Deployment thinking mode; ``disabled`` allows only effort ``off``."""
    reasoning_effort: Literal["off", "low", "high", "max"] | None = (
        reasoning_effort_field(REASONING_EFFORTS)
    )
    """Default effort (unset: ``high`` is advertised as the default)."""
    max_tokens: int = attrs.field(
        default=DEFAULT_MAX_TOKENS, validator=check_safe_positive_int
    )
    """Default per-request output cap."""
    default_context_window: int = attrs.field(
        default=DEFAULT_CONTEXT_WINDOW, validator=check_positive_int
    )
    """Context window of models without their own."""
    models: tuple[CatalogModel, ...] = attrs.field(default=None, converter=_models)
    """The advertised catalog (``None``: ``DEFAULT_MODELS``; empty: none)."""

    def __attrs_post_init__(self) -> None:
        if self.thinking == "disabled" and self.reasoning_effort not in (None, "off"):
            raise AdapterConfigError(
                "reasoningEffort",
                'must be "off" or unset (only reasoningEffort "off" can be '
                "configured when thinking is disabled)",
                package=PACKAGE,
            )


def resolve_base_url(
    config: DeepSeekConfig, environ: Mapping[str, str] | None = None
) -> str:
    """The API root in force: ``config.base_url``, else ``DEEPSEEK_BASE_URL``
    from ``environ`` (default ``os.environ``), else ``PUBLIC_BASE_URL``.

    Raises:
        AdapterConfigError: keyed ``baseURL`` for a bad ``DEEPSEEK_BASE_URL``
            (the message names the variable, never the URL).
    """
    return BASE_URL_RULE.resolve(config.base_url, environ)


def thinking_fields(
    options: GenerateOptions, *, thinking: str | None, default_effort: str | None
) -> dict[str, Any]:
    """The ``thinking``/``reasoning_effort`` body keys for ``options`` (see the
    module docstring).

    Raises:
        LlmError: ``UNSUPPORTED_REASONING_EFFORT`` for an effort DeepSeek or the
            deployment does not support.
    """
    if options.purpose == "session-title":
        return {"thinking": {"type": "disabled"}}
    effort = options.reasoning_effort
    if effort is not None and effort not in REASONING_EFFORTS:
        raise LlmError(
            f'DeepSeek does not support reasoning effort "{effort}"',
            ErrorCode.UNSUPPORTED_REASONING_EFFORT,
        )
    if effort is None:
        effort = default_effort
    if thinking == "disabled" and effort not in (None, "off"):
        raise LlmError(
            f'DeepSeek deployment does not support reasoning effort "{effort}"',
            ErrorCode.UNSUPPORTED_REASONING_EFFORT,
        )
    if effort == "off":
        return {"thinking": {"type": "disabled"}}
    if effort is not None:
        return {"thinking": {"type": "enabled"}, "reasoning_effort": effort}
    return {} if thinking is None else {"thinking": {"type": thinking}}


_EFFORT_INFOS: Final = effort_infos(REASONING_EFFORTS, capitalize=True)


def default_effort(snapshot: DeepSeekConfig) -> str:
    """The effort of a request that names none: ``off`` on a deployment with
    thinking disabled, else the configured effort, else ``high``.

    The one place the default is decided: ``resolve_model`` advertises it (so
    ``LlmRuntime`` fills it in) and ``stream`` applies it, so the same
    ``GenerateOptions`` send the same body through either path."""
    if snapshot.thinking == "disabled":
        return "off"
    return snapshot.reasoning_effort or "high"


def model_info(
    config: DeepSeekConfig, endpoint: Endpoint[WireProfile], provider: str, model: str
) -> LlmResolvedModelInfo:
    """``resolve_model``'s answer: the entry's (else the config's) context window
    and output cap, and the efforts with ``default_effort`` as the default (only
    ``off`` when thinking is disabled); never image input (see ``FAMILY``)."""
    entry = config.model(model)
    efforts = _EFFORT_INFOS[:1] if config.thinking == "disabled" else _EFFORT_INFOS
    reasoning = LlmModelReasoningInfo(
        efforts=efforts, default_effort=default_effort(config)
    )
    return resolved_model_info(
        provider,
        model,
        entry,
        context_window=config.default_context_window,
        default_max_tokens=config.max_tokens,
        reasoning=reasoning,
        image_input=False,
    )


def _check_images(options: GenerateOptions, config: DeepSeekConfig) -> None:
    if not any(content_has_image(message.content) for message in options.messages):
        return
    entry = config.model(options.model)
    if entry is None or "image" not in entry.input_modalities:
        raise LlmError(
            f'DeepSeek model "{options.model}" does not accept image input.',
            ErrorCode.UNSUPPORTED_CONTENT,
        )
    raise LlmError(
        "DeepSeek image input needs the Files API, which this adapter does not "
        "implement; send text only.",
        ErrorCode.UNSUPPORTED_CONTENT,
    )


def _request(call: WireCall[DeepSeekConfig, WireProfile]) -> WireRequest:
    options, config = call.options, call.config
    _check_images(options, config)
    key = call.key()
    extra = thinking_fields(
        options, thinking=config.thinking, default_effort=default_effort(config)
    )
    thinking_enabled = extra.get("thinking") == {"type": "enabled"}
    choice = options.tool_choice
    if options.tools and choice not in (None, "auto", "none") and thinking_enabled:
        raise LlmError(
            f'DeepSeek rejects tool_choice "{choice}" in thinking mode; use '
            'reasoning effort "off" to force a tool call',
            ErrorCode.UNSUPPORTED_OPTION,
        )
    if options.temperature is not None and thinking_enabled:
        raise LlmError(
            "DeepSeek ignores temperature in thinking mode; use "
            'reasoning_effort="off" to sample with a temperature, or leave '
            "temperature unset",
            ErrorCode.UNSUPPORTED_OPTION,
        )
    entry = config.model(options.model)
    max_tokens = options.max_tokens
    if max_tokens is None:
        max_tokens = (entry.max_tokens if entry else None) or config.max_tokens
    body = build_body(options, profile=PROFILE, max_tokens=max_tokens, extra=extra)
    routing: dict[str, str] = {}
    if options.session_id is not None:
        routing[SESSION_ID_HEADER] = session_id_value(options, profile=PROFILE)
    if options.purpose == "compaction":
        routing[COMPACTION_HEADER] = "1"
    return chat_request(call, body, routing=routing, key=key)


FAMILY: Final = WireFamily(
    name="deepseek",
    config_class=DeepSeekConfig,
    endpoint=root_endpoint(BASE_URL_RULE, DISPLAY_NAME, PROFILE),
    request=_request,
    translator=chat_translator,
    model_info=model_info,
    decoder=chat_decoder,
    route=PROVIDER_ROUTE,
    # The Files API DeepSeek's image input needs is not implemented.
    image_input=False,
)
"""DeepSeek chat completions, as a wire family."""


class DeepSeekAdapter(WireAdapter[DeepSeekConfig]):
    """Streams DeepSeek chat completions (see the module docstring).

    The keyword arguments are ``DeepSeekConfig``'s fields (``base_url``,
    ``api_key_env``, ``thinking``, ``reasoning_effort``, ``max_tokens``,
    ``default_context_window``, ``models``, ``stream_idle_timeout_ms``,
    ``stream_keepalive_timeout_ms``, ``total_timeout_ms``, ``retry_policy``,
    ``pool_maxsize``, ``empty_response_as_stop``) and build one;
    ``DeepSeekAdapter.from_config(config)`` takes one built elsewhere (a plugin's
    YAML entry).

    Args:
        api_key: The key (``str`` or ``Secret``); ``None`` reads ``api_key_env``
            from the environment at each request.
        environ: Where variables are read (default ``os.environ``, live).
        **options: ``DeepSeekConfig`` fields.
    """

    family = FAMILY
