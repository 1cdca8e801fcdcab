"""``DeepSeekAdapter``: DeepSeek chat completions over the shared chat-completions
wire (``dsh_llm.adapters._chat``) and the transport's read loop.

- ``DeepSeekConfig`` is the one validated configuration (the constructor's
  keywords build it; ``from_config`` takes one); a bad value raises
  ``DeepSeekConfigError`` with ``key`` and ``detail`` as data.
- One route, ``deepseek-official``; an advisory catalog; ``resolve_model`` needs
  no I/O. The base URL is the explicit one, else ``DEEPSEEK_BASE_URL``, else the
  public API (``resolve_base_url``).
- Per call, before any I/O: images, then the key, then the body (effort,
  thinking-mode refusals as ``UNSUPPORTED_OPTION``); then one
  ``POST {base_url}/chat/completions``.
- The key is read per request from ``api_key`` or ``api_key_env`` and never
  appears in a message or a ``repr``.
- The full contract (thinking, what is refused and why, routing headers, the
  stream) is ``docs/deepseek.md``; the error codes are ``docs/errors.md``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar, Final, Literal

import attrs

from dsh_llm.adapter import (
    LlmModelReasoningInfo,
    LlmReasoningEffortInfo,
    LlmResolvedModelInfo,
)
from dsh_llm.adapters._chat.base import (
    ChatCompletionsAdapter,
    api_root_url,
    stream_completion,
)
from dsh_llm.adapters._chat.request import WireProfile, build_body, request_headers
from dsh_llm.adapters.common import (
    AdapterConfig,
    AdapterConfigError,
    adapter_field_order,
    catalog_entry,
    config_from_options,
    input_modalities_field,
    model_catalog,
    resolved_model_info,
)
from dsh_llm.config import (
    check_non_empty_str,
    check_one_of,
    check_optional_str,
    check_positive_int,
    check_safe_positive_int,
)
from dsh_llm.credentials import Secret
from dsh_llm.errors import ErrorCode, LlmError
from dsh_llm.protocol import GenerateOptions, StreamChunk, content_has_image
from dsh_llm.transport.call import redact_url, url_repr
from dsh_llm.transport.session import is_header_value, stream_headers

__all__ = [
    "BASE_URL_ENV",
    "DEEPSEEK_PROFILE",
    "DEFAULT_API_KEY_ENV",
    "DEFAULT_CONTEXT_WINDOW",
    "DEFAULT_KEEPALIVE_TIMEOUT_MS",
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_MODELS",
    "DEFAULT_STREAM_IDLE_TIMEOUT_MS",
    "DISPLAY_NAME",
    "PROVIDER_ROUTE",
    "PUBLIC_BASE_URL",
    "REASONING_EFFORTS",
    "DeepSeekAdapter",
    "DeepSeekConfig",
    "DeepSeekConfigError",
    "DeepSeekModel",
    "default_effort",
    "resolve_base_url",
    "thinking_fields",
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
DEFAULT_STREAM_IDLE_TIMEOUT_MS: Final = 300_000
"""Default idle timeout: the longest silence while waiting for the next chunk."""
DEFAULT_KEEPALIVE_TIMEOUT_MS: Final = 600_000
"""Default bound on a wait with keep-alive comments but no data: DeepSeek closes a
request that has not started inference after 10 minutes."""
DEFAULT_MAX_TOKENS: Final = 256_000
"""Default per-request output cap."""
DEFAULT_CONTEXT_WINDOW: Final = 1_000_000
"""Default context window of a model without its own."""
REASONING_EFFORTS: Final = ("off", "low", "high", "max")
"""The efforts DeepSeek accepts (``off`` disables thinking)."""
_PACKAGE: Final = "llm-deepseek"

DEEPSEEK_PROFILE: Final = WireProfile(
    provider=DISPLAY_NAME,
    reasoning_fields=("reasoning_content",),
    reasoning_passback_field="reasoning_content",
    include_usage=True,
    response_format_style="json_object",
)
"""How DeepSeek differs from the generic chat-completions wire."""


class DeepSeekConfigError(AdapterConfigError):
    """A bad ``llm-deepseek`` option (a ``ValueError``): the message is
    ``llm-deepseek: <key> <detail>``; ``key`` is the camelCase config key
    (``maxTokens``, ``models[0].contextWindow``) and ``detail`` what is wrong."""

    package = _PACKAGE


@attrs.frozen(kw_only=True)
class DeepSeekModel:
    """One advertised model (config key ``models[]``), checked on construction
    (``DeepSeekConfigError`` keyed by the field's config key)."""

    config_error: ClassVar[type[AdapterConfigError]] = DeepSeekConfigError

    id: str = attrs.field(validator=check_non_empty_str)
    """The wire model id."""
    name: str | None = attrs.field(
        default=None, validator=attrs.validators.optional(check_non_empty_str)
    )
    """Display name (default: the id)."""
    description: str | None = attrs.field(default=None, validator=check_optional_str)
    """What sets it apart."""
    context_window: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(check_positive_int)
    )
    """Its context window (default: ``default_context_window``)."""
    max_tokens: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(check_safe_positive_int)
    )
    """Its own output cap (default: the config's ``max_tokens``)."""
    input_modalities: tuple[str, ...] = input_modalities_field()
    """Accepted inputs: a non-empty subset of ``text`` and ``image``."""


DEFAULT_MODELS: Final = (
    DeepSeekModel(
        id="deepseek-v4-flash",
        name="DeepSeek-V4-Flash",
        context_window=DEFAULT_CONTEXT_WINDOW,
    ),
    DeepSeekModel(
        id="deepseek-v4-pro",
        name="DeepSeek-V4-Pro",
        context_window=DEFAULT_CONTEXT_WINDOW,
    ),
    DeepSeekModel(
        id="deepseek-v4-flash-vision-exp",
        name="DeepSeek-V4-Flash-Vision-Exp",
        context_window=DEFAULT_CONTEXT_WINDOW,
        input_modalities=("text", "image"),
    ),
)
"""The catalog advertised when none is configured."""


def _models(value: object) -> tuple[DeepSeekModel, ...]:
    """The ``models`` option (``dsh_llm.adapters.common.model_catalog``);
    ``None`` is ``DEFAULT_MODELS``."""
    if value is None:
        return DEFAULT_MODELS
    return model_catalog(value, DeepSeekModel, DeepSeekConfigError)


def _check_base_url(inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None:
        api_root_url(value, error=DeepSeekConfigError)


@attrs.frozen(kw_only=True, field_transformer=adapter_field_order)
class DeepSeekConfig(AdapterConfig):
    """The one ``DeepSeekAdapter`` configuration: the constructor's keyword
    arguments build it, ``DeepSeekAdapter.from_config`` takes it, and the
    ``llm-deepseek`` plugin structures its YAML entry into it (camelCase keys:
    ``apiKeyEnv``, ``baseURL``, ``streamIdleTimeoutMs``...). Every field is
    checked on construction: a bad value raises ``DeepSeekConfigError`` keyed by
    its config key. A config never holds a key: ``api_key_env`` names the
    variable."""

    config_error = DeepSeekConfigError
    default_stream_idle_timeout_ms = DEFAULT_STREAM_IDLE_TIMEOUT_MS
    default_stream_keepalive_timeout_ms = DEFAULT_KEEPALIVE_TIMEOUT_MS

    api_key_env: str = attrs.field(
        default=DEFAULT_API_KEY_ENV, validator=check_non_empty_str
    )
    """Environment variable holding the key."""
    base_url: str | None = attrs.field(
        default=None, repr=url_repr, validator=_check_base_url
    )
    """API root; default ``DEEPSEEK_BASE_URL``, then the public URL (its
    credentials are hidden in the ``repr``)."""
    thinking: Literal["enabled", "disabled"] | None = attrs.field(
        default=None,
        validator=attrs.validators.optional(check_one_of("enabled", "disabled")),
    )
    """Deployment thinking mode; ``disabled`` allows only effort ``off``."""
    reasoning_effort: Literal["off", "low", "high", "max"] | None = attrs.field(
        default=None,
        validator=attrs.validators.optional(check_one_of(*REASONING_EFFORTS)),
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
    models: tuple[DeepSeekModel, ...] = attrs.field(default=None, converter=_models)
    """The advertised catalog (``None``: ``DEFAULT_MODELS``; empty: none)."""

    def __attrs_post_init__(self) -> None:
        if self.thinking == "disabled" and self.reasoning_effort not in (None, "off"):
            raise DeepSeekConfigError(
                "reasoningEffort",
                'must be "off" or unset (only reasoningEffort "off" can be '
                "configured when thinking is disabled)",
            )

    def model(self, model_id: str) -> DeepSeekModel | None:
        """The catalog entry for ``model_id``, if listed."""
        return catalog_entry(self.models, model_id)


def resolve_base_url(
    config: DeepSeekConfig, environ: Mapping[str, str] | None = None
) -> str:
    """The API root in force: ``config.base_url``, else ``DEEPSEEK_BASE_URL``
    from ``environ`` (default ``os.environ``), else ``PUBLIC_BASE_URL``.

    Raises:
        DeepSeekConfigError: keyed ``baseURL`` for a bad ``DEEPSEEK_BASE_URL``
            (the message names the variable, never the URL).
    """
    environ = os.environ if environ is None else environ
    if config.base_url is not None:
        return api_root_url(config.base_url, error=DeepSeekConfigError)
    if environ.get(BASE_URL_ENV):
        return api_root_url(
            environ[BASE_URL_ENV], error=DeepSeekConfigError, source=BASE_URL_ENV
        )
    return PUBLIC_BASE_URL


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


_EFFORT_INFOS: Final = tuple(
    LlmReasoningEffortInfo(id=effort, name=effort.capitalize())
    for effort in REASONING_EFFORTS
)


def default_effort(snapshot: DeepSeekConfig) -> str:
    """The effort of a request that names none: ``off`` on a deployment with
    thinking disabled, else the configured effort, else ``high``.

    The one place the default is decided: ``resolve_model`` advertises it (so
    ``LlmRuntime`` fills it in) and ``stream`` applies it, so the same
    ``GenerateOptions`` send the same body through either path."""
    if snapshot.thinking == "disabled":
        return "off"
    return snapshot.reasoning_effort or "high"


def _resolved_model(
    snapshot: DeepSeekConfig, provider: str, model: str
) -> LlmResolvedModelInfo:
    entry = snapshot.model(model)
    efforts = _EFFORT_INFOS[:1] if snapshot.thinking == "disabled" else _EFFORT_INFOS
    reasoning = LlmModelReasoningInfo(
        efforts=efforts, default_effort=default_effort(snapshot)
    )
    return resolved_model_info(
        provider,
        model,
        entry,
        context_window=(entry.context_window if entry else None)
        or snapshot.default_context_window,
        default_max_tokens=(entry.max_tokens if entry else None) or snapshot.max_tokens,
        reasoning=reasoning,
        image_input=False,
    )


class DeepSeekAdapter(ChatCompletionsAdapter[DeepSeekConfig]):
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

    Raises:
        DeepSeekConfigError: for an invalid option (a ``ValueError`` reading
            ``llm-deepseek: <config key> ...``, its ``key`` the config key).
        TypeError: for a keyword that is not a ``DeepSeekConfig`` field.
        LlmError: ``INVALID_CREDENTIAL`` for an explicit key no header can carry.
    """

    _package = _PACKAGE
    config_class = DeepSeekConfig
    _image_input = False  # the Files API images need is not implemented

    def __init__(
        self,
        api_key: str | Secret | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        **options: Any,
    ) -> None:
        self._setup(
            config_from_options(DeepSeekConfig, options),
            api_key=api_key,
            environ=environ,
        )

    # -- metadata --------------------------------------------------------------------

    # -- streaming -------------------------------------------------------------------

    def _configure(
        self,
        config: DeepSeekConfig,
        *,
        api_key: str | Secret | None,
        environ: Mapping[str, str] | None,
    ) -> None:
        self._base_url = resolve_base_url(config, environ)
        self._profile = DEEPSEEK_PROFILE

    def _model_info(
        self, snapshot: DeepSeekConfig, provider: str, model: str
    ) -> LlmResolvedModelInfo:
        return _resolved_model(snapshot, provider, model)

    def _stream(
        self, options: GenerateOptions, snapshot: DeepSeekConfig
    ) -> Iterator[StreamChunk]:
        self._check_images(options, snapshot)
        key = self._request_key(snapshot.api_key_env, route=PROVIDER_ROUTE)
        extra = thinking_fields(
            options,
            thinking=snapshot.thinking,
            default_effort=default_effort(snapshot),
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
        entry = snapshot.model(options.model)
        max_tokens = options.max_tokens
        if max_tokens is None:
            max_tokens = (entry.max_tokens if entry else None) or snapshot.max_tokens
        body = build_body(
            options, profile=DEEPSEEK_PROFILE, max_tokens=max_tokens, extra=extra
        )
        routing: dict[str, str] = {}
        if options.session_id is not None:
            if not is_header_value(options.session_id):
                raise LlmError(
                    "DeepSeek session_id must be printable ASCII without leading or "
                    "trailing whitespace: it travels as a header",
                    ErrorCode.INVALID_REQUEST,
                )
            routing["x-deepseek-harness-session-id"] = options.session_id
        if options.purpose == "compaction":
            routing["x-deepseek-harness-compact"] = "1"
        yield from stream_completion(
            self._session,
            snapshot,
            profile=DEEPSEEK_PROFILE,
            base_url=self._base_url,
            body=body,
            headers=request_headers(
                stream_headers(extra=routing),
                options,
                profile=DEEPSEEK_PROFILE,
                has_key=key is not None,
            ),
            key=key,
            signal=options.signal,
        )

    @staticmethod
    def _check_images(options: GenerateOptions, snapshot: DeepSeekConfig) -> None:
        if not any(content_has_image(message.content) for message in options.messages):
            return
        entry = snapshot.model(options.model)
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

    def __repr__(self) -> str:
        key = self._key_repr(self._config.api_key_env)
        return f"DeepSeekAdapter(base_url={redact_url(self._base_url)!r}, {key})"
