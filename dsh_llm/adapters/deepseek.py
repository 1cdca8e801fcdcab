"""``DeepSeekAdapter``: DeepSeek chat completions over the shared OpenAI wire
(``dsh_llm.adapters._chat.request``) and transport. User guide: ``docs/deepseek.md``.

Contracts callers may rely on:

- **Route and catalog.** One route, ``deepseek-official``, displayed as
  ``DeepSeek``. The catalog is advisory (any model id is sent as is); the default
  lists ``deepseek-v4-flash``, ``deepseek-v4-pro`` and
  ``deepseek-v4-flash-vision-exp``. ``resolve_model`` needs no I/O: context window
  (entry, else ``default_context_window``), default max tokens (entry, else
  ``max_tokens``) and the efforts ``off``/``low``/``high``/``max`` (default: the
  configured effort, else ``high``; only ``off`` when thinking is disabled).
- **Configuration** is resolved once, by ``resolve_adapter_options``: every
  default and bound is checked there and a bad value raises
  ``DeepSeekConfigError``, a ``ValueError`` reading ``llm-deepseek: <config key>
  <what is wrong>`` whose ``key`` is the camelCase config key (the
  ``llm-deepseek`` plugin reports it as a load error keyed the same way). The
  base URL is the explicit one, else ``DEEPSEEK_BASE_URL`` from the environment,
  else ``https://api.deepseek.com``; whichever it is, it is checked by the rule
  ``OpenAICompatAdapter`` shares (``dsh_llm.adapters._chat.base.api_root_url``:
  ``http://`` or ``https://`` with a host, no ``#fragment``, not already ending in
  ``/chat/completions``; a query string is kept after the appended path). A
  stream call reads its options snapshot exactly once.
- **Credentials**, per request: the explicit ``api_key``, else the environment
  variable ``api_key_env`` (``DEEPSEEK_API_KEY``). Missing or empty raises
  ``MISSING_CREDENTIAL`` naming the variable; a key no header can carry raises
  ``INVALID_CREDENTIAL``. The key is held as a ``Secret`` and never appears in a
  message or a ``repr`` (nor does a password written into the base URL).
- **Per call**, before any I/O: an image raises ``UNSUPPORTED_CONTENT``
  (before credentials; the Files API is not implemented); then the key; then the
  body, which may raise ``UNSUPPORTED_REASONING_EFFORT``, ``UNSUPPORTED_OPTION``
  or ``INVALID_REQUEST``. Then one ``POST {base_url}/chat/completions``.
- **Thinking**: ``purpose="session-title"`` sends thinking disabled;
  else the effort (request, else configured) ``off`` sends thinking disabled,
  ``low``/``high``/``max`` thinking enabled plus ``reasoning_effort``, another
  effort raises; a deployment with thinking disabled refuses any effort but
  ``off``; no effort sends only a configured ``thinking``.
- **Fields it cannot honour raise**, never silently dropped, before any I/O, with
  ``UNSUPPORTED_OPTION``: DeepSeek rejects a ``required`` or named
  ``tool_choice`` in thinking mode, and silently ignores ``temperature`` there,
  so either raises when the request explicitly
  enables thinking (a ``low``/``high``/``max`` effort in effect, or a deployment
  configured ``thinking="enabled"`` without an effort); use
  ``reasoning_effort="off"`` to force a tool or to sample with a temperature.
  With thinking disabled (effort ``off``, a ``disabled`` deployment,
  ``purpose="session-title"``) ``temperature`` is sent; with thinking left to
  the provider's default (no ``thinking`` key sent, no effort) it is sent as
  given and the provider decides whether it applies. ``session_id`` and
  ``purpose="compaction"`` are honoured as the
  ``x-deepseek-harness-session-id`` / ``x-deepseek-harness-compact: 1`` routing
  headers (never in the body); a ``session_id`` no header can carry unchanged
  (see ``dsh_llm.transport.session.is_header_value``) raises
  ``INVALID_REQUEST``. Without ``max_tokens`` the model's default cap is sent.
- **Stream**: the shared translator's strict order (``docs/protocol.md``); usage
  mapped disjointly; a blockless ``stop`` is ``EMPTY_RESPONSE`` unless
  ``empty_response_as_stop``. HTTP errors are classified by
  ``dsh_llm.transport.http_errors``, transport failures, timeouts and aborts by
  ``dsh_llm.transport.call`` (``docs/errors.md`` lists the codes).
- ``close()`` (or ``with``) closes the adapter's connection pool
  (``ChatCompletionsAdapter``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Final, Literal

import attrs

from dsh_llm.adapter import (
    LlmModelReasoningInfo,
    LlmReasoningEffortInfo,
    LlmResolvedModelInfo,
    PreparedAdapterCall,
)
from dsh_llm.adapters._chat.base import (
    AdapterConfigError,
    ChatCompletionsAdapter,
    api_root_url,
    catalog_entry,
    check_stream_timeouts,
    checked_retry_policy,
    resolved_model_info,
    stream_completion,
)
from dsh_llm.adapters._chat.request import WireProfile, build_body, request_headers
from dsh_llm.credentials import Secret
from dsh_llm.errors import ErrorCode, LlmError
from dsh_llm.protocol import GenerateOptions, StreamChunk, content_has_image
from dsh_llm.protocol.checks import MAX_SAFE_INTEGER
from dsh_llm.retry import RetryPolicy
from dsh_llm.signal import AbortSignal
from dsh_llm.transport.call import redact_url, url_repr
from dsh_llm.transport.session import (
    DEFAULT_POOL_MAXSIZE,
    is_header_value,
    stream_headers,
)

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
    "DeepSeekConnectionOptions",
    "DeepSeekModel",
    "resolve_adapter_options",
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
    enforces_schema=False,
)
"""How DeepSeek differs from the generic chat-completions wire."""


def _modalities(value: Sequence[str]) -> tuple[str, ...]:
    return tuple(value)


@attrs.frozen(kw_only=True)
class DeepSeekModel:
    """One advertised model (config key ``models[]``)."""

    id: str
    """The wire model id."""
    name: str | None = None
    """Display name (default: the id)."""
    description: str | None = None
    """What sets it apart."""
    context_window: int | None = None
    """Its context window (default: ``default_context_window``)."""
    max_tokens: int | None = None
    """Its own output cap (default: the profile's ``max_tokens``)."""
    input_modalities: tuple[str, ...] = attrs.field(
        default=("text",), converter=_modalities
    )
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


def _models(value: Sequence[DeepSeekModel] | None) -> tuple[DeepSeekModel, ...] | None:
    return None if value is None else tuple(value)


@attrs.frozen(kw_only=True)
class DeepSeekConfig:
    """The ``llm-deepseek`` configuration, as written in a composition (camelCase
    keys: ``apiKeyEnv``, ``baseURL``, ``streamIdleTimeoutMs``...). Checked by
    ``resolve_adapter_options``, never here, so direct construction and YAML
    loading are judged alike."""

    api_key_env: str = DEFAULT_API_KEY_ENV
    """Environment variable holding the key (config never holds a key)."""
    base_url: str | None = attrs.field(default=None, repr=url_repr)
    """API root; default ``DEEPSEEK_BASE_URL``, then the public URL (its
    credentials are hidden in the ``repr``)."""
    thinking: Literal["enabled", "disabled"] | None = None
    """Deployment thinking mode; ``disabled`` allows only effort ``off``."""
    reasoning_effort: Literal["off", "low", "high", "max"] | None = None
    """Default effort (unset: ``high`` is advertised as the default)."""
    max_tokens: int = DEFAULT_MAX_TOKENS
    """Default per-request output cap."""
    default_context_window: int = DEFAULT_CONTEXT_WINDOW
    """Context window of models without their own."""
    models: tuple[DeepSeekModel, ...] | None = attrs.field(
        default=None, converter=_models
    )
    """The advertised catalog (``None``: the defaults; empty: none)."""
    stream_idle_timeout_ms: float = DEFAULT_STREAM_IDLE_TIMEOUT_MS
    """Idle timeout: the longest silence while waiting for the next chunk."""
    stream_keepalive_timeout_ms: float | None = DEFAULT_KEEPALIVE_TIMEOUT_MS
    """Longest wait with keep-alive comments but no data (``None``: unbounded)."""
    total_timeout_ms: float | None = None
    """Longest whole call, think time excluded (``None``: unbounded)."""
    retry_policy: Mapping[str, Any] | None = None
    """Retry policy config (``docs/plugins.md``; ``None``: normal defaults)."""
    pool_maxsize: int = DEFAULT_POOL_MAXSIZE
    """Idle connections kept per host."""
    empty_response_as_stop: bool = False
    """Report a blockless ``stop`` as ``stop`` instead of ``EMPTY_RESPONSE``."""


@attrs.frozen(kw_only=True)
class DeepSeekConnectionOptions:
    """Validated facts for one request: what ``resolve_adapter_options`` returns."""

    base_url: str = attrs.field(repr=url_repr)
    """API root without a trailing slash (credentials hidden in the ``repr``)."""
    api_key_env: str
    """Environment variable holding the key."""
    thinking: str | None
    """``enabled``, ``disabled`` or ``None`` (provider default)."""
    reasoning_effort: str | None
    """Configured default effort, or ``None``."""
    max_tokens: int
    """Default output cap."""
    default_context_window: int
    """Context window of models without their own."""
    models: tuple[DeepSeekModel, ...]
    """The advertised catalog."""
    stream_idle_timeout_ms: float
    """Idle timeout."""
    stream_keepalive_timeout_ms: float | None
    """Keep-alive bound."""
    total_timeout_ms: float | None
    """Total bound."""
    retry_policy: RetryPolicy
    """Resolved retry policy."""
    pool_maxsize: int
    """Idle connections kept per host."""
    empty_response_as_stop: bool
    """See ``DeepSeekConfig``."""

    def model(self, model_id: str) -> DeepSeekModel | None:
        """The catalog entry for ``model_id``, if listed."""
        return catalog_entry(self.models, model_id)


class DeepSeekConfigError(AdapterConfigError):
    """A bad ``llm-deepseek`` option (a ``ValueError``): the message is
    ``llm-deepseek: <key> <detail>``, and the ``llm-deepseek`` plugin reports it
    as a load error keyed ``key``.

    Args:
        key: The config key, as in YAML (``maxTokens``,
            ``models[0].contextWindow``).
        detail: What is wrong, as the rest of a sentence after the key.
    """

    package = _PACKAGE


def _positive_int(value: object, *, safe: bool = False) -> bool:
    return type(value) is int and value > 0 and (not safe or value <= MAX_SAFE_INTEGER)


def _check_model(entry: object, where: str) -> None:
    if not isinstance(entry, DeepSeekModel):
        raise DeepSeekConfigError(
            where,
            f"must be a DeepSeekModel, got {type(entry).__name__} (models entries "
            "must be DeepSeekModel values)",
        )
    if not isinstance(entry.id, str) or entry.id == "":
        raise DeepSeekConfigError(
            f"{where}.id",
            "must be a non-empty string (catalog model ids must be non-empty)",
        )
    label = f'catalog model "{entry.id}"'
    if entry.name is not None and (not isinstance(entry.name, str) or entry.name == ""):
        raise DeepSeekConfigError(
            f"{where}.name",
            f"must be a non-empty string when given ({label} has an empty name)",
        )
    if entry.description is not None and not isinstance(entry.description, str):
        raise DeepSeekConfigError(
            f"{where}.description",
            f"must be a string ({label} description must be a string)",
        )
    if entry.context_window is not None and not _positive_int(entry.context_window):
        raise DeepSeekConfigError(
            f"{where}.contextWindow", "must be a positive integer"
        )
    if entry.max_tokens is not None and not _positive_int(entry.max_tokens, safe=True):
        raise DeepSeekConfigError(
            f"{where}.maxTokens",
            f"must be a positive integer no greater than {MAX_SAFE_INTEGER}",
        )
    modalities = entry.input_modalities
    key = f"{where}.inputModalities"
    if not modalities:
        raise DeepSeekConfigError(key, "must not be empty")
    if any(m not in ("text", "image") for m in modalities):
        raise DeepSeekConfigError(key, 'must contain only "text" and "image"')
    if len(set(modalities)) != len(modalities):
        raise DeepSeekConfigError(key, "must not contain duplicates")


def _resolve_models(
    models: tuple[DeepSeekModel, ...] | None,
) -> tuple[DeepSeekModel, ...]:
    if models is None:
        return DEFAULT_MODELS
    seen: set[str] = set()
    for index, entry in enumerate(models):
        where = f"models[{index}]"
        _check_model(entry, where)
        if entry.id in seen:
            raise DeepSeekConfigError(
                f"{where}.id",
                f'repeats an earlier entry (duplicate catalog model "{entry.id}")',
            )
        seen.add(entry.id)
    return models


def resolve_adapter_options(
    config: DeepSeekConfig | None = None, environ: Mapping[str, str] | None = None
) -> DeepSeekConnectionOptions:
    """Check ``config`` and resolve every default.

    Args:
        config: The configuration (``None``: all defaults).
        environ: Where ``DEEPSEEK_BASE_URL`` is read (default ``os.environ``).

    Raises:
        DeepSeekConfigError: a ``ValueError`` reading ``llm-deepseek: <key>
            <what is wrong>`` for any invalid value, its ``key`` the config key
            (``maxTokens``, ``models[0].contextWindow``, ``baseURL`` also when the
            bad URL came from ``DEEPSEEK_BASE_URL``).
    """
    config = DeepSeekConfig() if config is None else config
    environ = os.environ if environ is None else environ
    if not isinstance(config.api_key_env, str) or config.api_key_env == "":
        raise DeepSeekConfigError(
            "apiKeyEnv", "must be a non-empty environment variable name"
        )
    if config.thinking not in (None, "enabled", "disabled"):
        raise DeepSeekConfigError("thinking", 'must be "enabled" or "disabled"')
    if (
        config.reasoning_effort is not None
        and config.reasoning_effort not in REASONING_EFFORTS
    ):
        raise DeepSeekConfigError(
            "reasoningEffort", 'must be one of "off", "low", "high", "max"'
        )
    if config.thinking == "disabled" and config.reasoning_effort not in (None, "off"):
        raise DeepSeekConfigError(
            "reasoningEffort",
            'must be "off" or unset (only reasoningEffort "off" can be configured '
            "when thinking is disabled)",
        )
    if not _positive_int(config.default_context_window):
        raise DeepSeekConfigError("defaultContextWindow", "must be a positive integer")
    if not _positive_int(config.max_tokens, safe=True):
        raise DeepSeekConfigError(
            "maxTokens",
            f"must be a positive safe integer (at most {MAX_SAFE_INTEGER})",
        )
    check_stream_timeouts(
        config.stream_idle_timeout_ms,
        config.stream_keepalive_timeout_ms,
        config.total_timeout_ms,
        error=DeepSeekConfigError,
    )
    if not _positive_int(config.pool_maxsize):
        raise DeepSeekConfigError("poolMaxsize", "must be a positive integer")
    if not isinstance(config.empty_response_as_stop, bool):
        raise DeepSeekConfigError("emptyResponseAsStop", "must be a boolean")
    models = _resolve_models(config.models)
    if config.base_url is not None:
        base_url = api_root_url(config.base_url, error=DeepSeekConfigError)
    elif environ.get(BASE_URL_ENV):
        base_url = api_root_url(
            environ[BASE_URL_ENV], error=DeepSeekConfigError, source=BASE_URL_ENV
        )
    else:
        base_url = PUBLIC_BASE_URL
    return DeepSeekConnectionOptions(
        base_url=base_url,
        api_key_env=config.api_key_env,
        thinking=config.thinking,
        reasoning_effort=config.reasoning_effort,
        max_tokens=config.max_tokens,
        default_context_window=config.default_context_window,
        models=models,
        stream_idle_timeout_ms=config.stream_idle_timeout_ms,
        stream_keepalive_timeout_ms=config.stream_keepalive_timeout_ms,
        total_timeout_ms=config.total_timeout_ms,
        retry_policy=checked_retry_policy(
            config.retry_policy, error=DeepSeekConfigError
        ),
        pool_maxsize=config.pool_maxsize,
        empty_response_as_stop=config.empty_response_as_stop,
    )


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


def _model_info(
    snapshot: DeepSeekConnectionOptions, provider: str, model: str
) -> LlmResolvedModelInfo:
    entry = snapshot.model(model)
    if snapshot.thinking == "disabled":
        reasoning = LlmModelReasoningInfo(
            efforts=_EFFORT_INFOS[:1], default_effort="off"
        )
    else:
        reasoning = LlmModelReasoningInfo(
            efforts=_EFFORT_INFOS, default_effort=snapshot.reasoning_effort or "high"
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


OptionsProvider = Callable[[], DeepSeekConnectionOptions]
"""Returns the current options; called once per stream call."""


class DeepSeekAdapter(ChatCompletionsAdapter):
    """Streams DeepSeek chat completions (see the module docstring).

    Args:
        api_key: The key (``str`` or ``Secret``); ``None`` reads ``api_key_env``
            from the environment at each request.
        base_url: API root (default ``DEEPSEEK_BASE_URL``, then the public URL).
        api_key_env: Variable the key is read from when ``api_key`` is ``None``.
        stream_idle_timeout_ms: Idle timeout: the longest silence while waiting
            for the next chunk, default 300000.
        stream_keepalive_timeout_ms: Longest wait with keep-alive comments but no
            data (default 600000; ``None`` unbounded; see
            ``dsh_llm.transport.watchdog``).
        total_timeout_ms: Longest whole call (default ``None``).
        thinking: Deployment thinking mode, ``"enabled"``/``"disabled"``.
        reasoning_effort: Default effort, ``off``/``low``/``high``/``max``.
        max_tokens: Default output cap, default 256000.
        default_context_window: Context window of unlisted models.
        models: The advertised catalog (default ``DEFAULT_MODELS``).
        retry_policy: A retry-policy config mapping or a resolved policy.
        pool_maxsize: Idle connections kept per host.
        empty_response_as_stop: Report a blockless ``stop`` as ``stop``.
        environ: Where variables are read (default ``os.environ``, live).

    Raises:
        DeepSeekConfigError: for an invalid option (a ``ValueError`` reading
            ``llm-deepseek: <config key> ...``).
        LlmError: ``INVALID_CREDENTIAL`` for an explicit key no header can carry.
    """

    _package = _PACKAGE
    _image_input = False  # the Files API images need is not implemented

    def __init__(
        self,
        api_key: str | Secret | None = None,
        *,
        base_url: str | None = None,
        api_key_env: str = DEFAULT_API_KEY_ENV,
        stream_idle_timeout_ms: float = DEFAULT_STREAM_IDLE_TIMEOUT_MS,
        stream_keepalive_timeout_ms: float | None = DEFAULT_KEEPALIVE_TIMEOUT_MS,
        total_timeout_ms: float | None = None,
        thinking: Literal["enabled", "disabled"] | None = None,
        reasoning_effort: Literal["off", "low", "high", "max"] | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        default_context_window: int = DEFAULT_CONTEXT_WINDOW,
        models: Sequence[DeepSeekModel] | None = None,
        retry_policy: Mapping[str, Any] | RetryPolicy | None = None,
        pool_maxsize: int = DEFAULT_POOL_MAXSIZE,
        empty_response_as_stop: bool = False,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        environ = os.environ if environ is None else environ
        config = DeepSeekConfig(
            api_key_env=api_key_env,
            base_url=base_url,
            thinking=thinking,
            reasoning_effort=reasoning_effort,
            max_tokens=max_tokens,
            default_context_window=default_context_window,
            models=None if models is None else tuple(models),
            stream_idle_timeout_ms=stream_idle_timeout_ms,
            stream_keepalive_timeout_ms=stream_keepalive_timeout_ms,
            total_timeout_ms=total_timeout_ms,
            retry_policy=retry_policy if isinstance(retry_policy, Mapping) else None,
            pool_maxsize=pool_maxsize,
            empty_response_as_stop=empty_response_as_stop,
        )
        options = resolve_adapter_options(config, environ)
        if retry_policy is not None and not isinstance(retry_policy, Mapping):
            # A resolved policy (or a value of the wrong type, refused here).
            options = attrs.evolve(
                options,
                retry_policy=checked_retry_policy(
                    retry_policy, error=DeepSeekConfigError
                ),
            )
        self._setup(lambda: options, api_key=api_key, environ=environ)

    @classmethod
    def from_options(
        cls,
        options: DeepSeekConnectionOptions | OptionsProvider,
        *,
        api_key: str | Secret | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> DeepSeekAdapter:
        """An adapter over resolved options, or over a provider of them called
        once per stream call (so configuration changes reach the next request)."""
        adapter = cls.__new__(cls)
        provider = options if callable(options) else (lambda: options)
        adapter._setup(provider, api_key=api_key, environ=environ)
        return adapter

    def _setup(
        self,
        options: OptionsProvider,
        *,
        api_key: str | Secret | None,
        environ: Mapping[str, str] | None,
    ) -> None:
        self._options = options
        self._profile = DEEPSEEK_PROFILE
        self._connect(
            api_key=api_key, environ=environ, pool_maxsize=options().pool_maxsize
        )

    # -- metadata --------------------------------------------------------------------

    def _snapshot(self) -> DeepSeekConnectionOptions:
        return self._options()

    def resolve_model(
        self, provider: str, model: str, signal: AbortSignal | None = None
    ) -> LlmResolvedModelInfo:
        """Model facts without I/O (see the module docstring)."""
        return _model_info(self._options(), provider, model)

    def prepare_call(
        self, provider: str, model: str, signal: AbortSignal | None = None
    ) -> PreparedAdapterCall:
        """Model facts and dispatch from one options snapshot."""
        snapshot = self._options()
        return PreparedAdapterCall(
            model=_model_info(snapshot, provider, model),
            stream=lambda options: self._stream(options, snapshot),
        )

    # -- streaming -------------------------------------------------------------------

    def stream(self, options: GenerateOptions) -> Iterator[StreamChunk]:
        """Stream one chat completion (a generator; checks run at the first
        ``next()``).

        Raises:
            LlmError: see the module docstring and ``docs/errors.md``.
        """
        return self._stream(options, self._options())

    def _stream(
        self, options: GenerateOptions, snapshot: DeepSeekConnectionOptions
    ) -> Iterator[StreamChunk]:
        self._check_images(options, snapshot)
        key = self._request_key(snapshot.api_key_env, route=PROVIDER_ROUTE)
        extra = thinking_fields(
            options,
            thinking=snapshot.thinking,
            default_effort=snapshot.reasoning_effort,
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
            base_url=snapshot.base_url,
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
    def _check_images(
        options: GenerateOptions, snapshot: DeepSeekConnectionOptions
    ) -> None:
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
        snapshot = self._options()
        key = self._key_repr(snapshot.api_key_env)
        return f"DeepSeekAdapter(base_url={redact_url(snapshot.base_url)!r}, {key})"
