"""``OpenAICompatAdapter``: any server that speaks the OpenAI chat-completions
stream (OpenAI, vLLM, llama.cpp's ``llama-server`` and ``llama_cpp.server``,
Ollama ``/v1``, LM Studio, OpenRouter...), over the wire code it shares with
``DeepSeekAdapter`` (``dsh_llm.adapters._chat.request``) and the shared transport.

Contracts callers may rely on:

- **Endpoint.** ``base_url`` is the API root (``http://127.0.0.1:8080/v1``,
  ``https://api.openai.com/v1``); each request is one
  ``POST <base_url>/chat/completions`` (exactly one slash; a query string such as
  Azure's ``?api-version=`` stays after the path). A URL that is not ``http://``
  or ``https://`` with a host, has a ``#fragment``, or already ends in
  ``/chat/completions`` (appending would double it) is refused, by the rule
  ``DeepSeekAdapter`` shares (``dsh_llm.adapters._chat.base.api_root_url``).
- **Credentials.** None by default: local servers get no ``authorization``
  header at all. ``api_key`` (``str`` or ``Secret``, checked at construction) or
  ``api_key_env`` (read at each request; unset or empty raises
  ``MISSING_CREDENTIAL`` naming the variable and the route), never both; a key no
  header can carry raises ``INVALID_CREDENTIAL``. The key travels as
  ``authorization: Bearer``, is held as a ``Secret`` and never appears in a
  message or a ``repr``.
- **Headers** are added to every request (OpenRouter's ``HTTP-Referer`` and
  ``X-Title``, a gateway's routing or ``api-key`` header). Names the adapter
  sets (``user-agent``, which carries the attribution every request keeps,
  ``accept``, ``accept-encoding``, ``content-type``, framing headers) are refused
  rather than silently overridden; so is ``authorization`` beside a key. A value
  must be sent exactly as given: printable ASCII (0x21-0x7E) with spaces or
  tabs only between visible characters (empty is allowed); leading or trailing
  whitespace, line breaks, controls and non-ASCII are refused at construction,
  never stripped or left to fail at send time. Header values never appear in a
  message or ``repr`` (they may be credentials), and the values of secret-named
  headers (``x-api-key``, ``api-key``, any name with ``key``, ``token``,
  ``secret`` or ``auth``...) are redacted from server error text like the key.
- **Catalog** (``models``): model ids, ``OpenAICompatModel`` values or mappings
  with the config keys ``id``, ``name``, ``description``, ``contextWindow``,
  ``maxTokens``, ``inputModalities`` (``["text"]`` by default, or ``["text",
  "image"]``). Advisory: any model id is sent as is. ``resolve_model`` needs no
  I/O: the entry's context window, output cap (unknown when not configured) and
  input modalities (text only for an unlisted id), and the configured
  ``reasoning_efforts`` (none by default).
- **Configuration** is checked once, in the constructor: a bad value raises
  ``OpenAICompatConfigError`` (a ``ValueError``), whose ``key`` is the config key
  (``baseURL``, ``models[0].contextWindow``) and whose message starts with
  ``llm-openai-compatible: ``; it never echoes a header value or a key.
- **Images** go as ``image_url`` data URLs, for a model whose entry lists
  ``image``, read from ``adapter.attachments`` (an attachment store, e.g.
  ``dsh_llm.attachments.MemoryAttachmentStore``); an image the store lacks (or
  no store) raises ``MISSING_ATTACHMENT``, and one for a text-only or unlisted
  model ``UNSUPPORTED_CONTENT``, both before any I/O.
- **Per call**, before any I/O: an image is checked as above; a
  ``reasoning_effort`` not in ``reasoning_efforts`` raises
  ``UNSUPPORTED_REASONING_EFFORT`` (a listed one is sent as ``reasoning_effort``,
  which vLLM, Ollama and OpenAI read); then the key. Without
  ``GenerateOptions.max_tokens`` the model entry's ``maxTokens`` is sent, else
  no cap (the server's default), in ``max_tokens`` or the configured
  ``max_tokens_field`` (``max_completion_tokens`` for OpenAI's reasoning models).
  ``stream_options: {"include_usage": true}`` is sent unless ``include_usage`` is
  false (for servers that reject it). ``session_id`` and ``purpose`` are routing
  hints with no meaning on a generic server and are not sent (a session id is
  not leaked to third parties). Reasoning from earlier turns is sent back only
  when ``reasoning_passback_field`` names the field the server reads.
- **Stream**: the shared translator's strict order and every quirk it absorbs (see
  ``dsh_llm.adapters._chat.translate.ChatCompletionsTranslator``): tool-call
  ids and names repeated or only on the first delta, ``id: ""`` continuations,
  parallel calls reusing index 0, missing indexes, whole calls in one delta,
  parameterless calls ending ``{}``, legacy ``function_call``, reasoning in
  ``reasoning_content`` or ``reasoning``, ``delta.refusal`` (an ``error`` finish
  with code ``REFUSAL`` after the text), usage on any chunk or none (``None``
  counts), ``stop`` after tool calls corrected to ``tool-calls``, in-stream errors
  in every known shape. A blockless ``stop`` is ``EMPTY_RESPONSE`` unless
  ``empty_response_as_stop``. Failures are classified by
  ``dsh_llm.transport.http_errors`` and ``dsh_llm.transport.call``
  (``docs/errors.md`` lists the codes); a 429 that says
  "Request too large" is ``INVALID_REQUEST`` (``dsh_llm.transport.http_errors``).
- ``close()`` (or ``with``) closes the adapter's connection pool.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

import attrs

from dsh_llm.adapter import (
    LlmModelReasoningInfo,
    LlmReasoningEffortInfo,
    LlmResolvedModelInfo,
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
from dsh_llm.adapters._chat.request import (
    WireProfile,
    build_body,
    refuse_images,
    request_headers,
)
from dsh_llm.credentials import Secret
from dsh_llm.errors import ErrorCode, LlmError
from dsh_llm.protocol import GenerateOptions, StreamChunk, content_has_image
from dsh_llm.protocol import checks as c
from dsh_llm.retry import RetryPolicy
from dsh_llm.signal import AbortSignal
from dsh_llm.transport.call import redact_url
from dsh_llm.transport.session import (
    DEFAULT_POOL_MAXSIZE,
    is_header_name,
    is_header_value,
    stream_headers,
)

__all__ = [
    "DEFAULT_DISPLAY_NAME",
    "DEFAULT_KEEPALIVE_TIMEOUT_MS",
    "DEFAULT_STREAM_IDLE_TIMEOUT_MS",
    "MAX_TOKENS_FIELDS",
    "PACKAGE",
    "REASONING_PASSBACK_FIELDS",
    "RESERVED_HEADERS",
    "ModelSpec",
    "OpenAICompatAdapter",
    "OpenAICompatConfigError",
    "OpenAICompatModel",
]

PACKAGE: Final = "llm-openai-compatible"
"""The package name that prefixes configuration and credential messages."""
DEFAULT_DISPLAY_NAME: Final = "OpenAI-compatible"
"""The provider name used in messages unless ``display_name`` says otherwise."""
DEFAULT_STREAM_IDLE_TIMEOUT_MS: Final = 300_000
"""Default idle timeout: the longest silence while waiting for the next chunk."""
DEFAULT_KEEPALIVE_TIMEOUT_MS: Final = 600_000
"""Default bound on a wait with keep-alive comments but no data (OpenRouter sends
``: OPENROUTER PROCESSING`` comments while a request is queued)."""
MAX_TOKENS_FIELDS: Final = ("max_tokens", "max_completion_tokens")
"""The output-cap field spellings a server may read."""
REASONING_PASSBACK_FIELDS: Final = ("reasoning_content", "reasoning")
"""The assistant-message fields reasoning may be sent back in."""
RESERVED_HEADERS: Final = frozenset(
    {
        "user-agent",
        "accept",
        "accept-encoding",
        "content-type",
        "content-length",
        "transfer-encoding",
        "connection",
        "host",
    }
)
"""Header names the adapter sets itself; ``headers`` may not replace them."""


class OpenAICompatConfigError(AdapterConfigError):
    """A bad ``OpenAICompatAdapter`` option (a ``ValueError``).

    Args:
        key: The config key, as in YAML (``baseURL``, ``models[0].maxTokens``).
        detail: What is wrong, as the rest of a sentence after the key.
    """

    package = PACKAGE


def _modalities(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    c.tuple_of(str)(inst, attribute, value)
    assert isinstance(value, tuple)
    if value not in (("text",), ("text", "image")):
        raise c.bad_value(inst, attribute.name, 'must be ["text"] or ["text", "image"]')


@attrs.frozen(kw_only=True)
class OpenAICompatModel:
    """One advertised model (config key ``models[]``). Its fields are checked on
    construction (``TypeError``/``ValueError`` naming the field)."""

    id: str = attrs.field(validator=c.non_empty_str)
    """The wire model id."""
    name: str | None = attrs.field(default=None, validator=c.optional(c.non_empty_str))
    """Display name (default: the id)."""
    description: str | None = attrs.field(default=None, validator=c.optional(c.is_str))
    """What sets it apart."""
    context_window: int | None = attrs.field(
        default=None, validator=c.optional(c.safe_positive_int)
    )
    """Its context window in tokens, when known (at most 2**53 - 1)."""
    max_tokens: int | None = attrs.field(
        default=None, validator=c.optional(c.safe_positive_int)
    )
    """Its output cap, sent when a request names none."""

    input_modalities: tuple[str, ...] = attrs.field(
        default=("text",), converter=c.to_tuple, validator=_modalities
    )
    """Accepted inputs (config key ``inputModalities``): ``("text",)`` or
    ``("text", "image")``. With ``image``, images are sent as ``image_url`` data
    URLs read from ``adapter.attachments``; a text-only model refuses them
    (``UNSUPPORTED_CONTENT``)."""


ModelSpec = str | Mapping[str, Any] | OpenAICompatModel
"""One ``models`` entry: an id, a config mapping or a model value."""

_MODEL_KEYS: Final = {
    "id": "id",
    "name": "name",
    "description": "description",
    "contextWindow": "context_window",
    "maxTokens": "max_tokens",
    "inputModalities": "input_modalities",
}
_MODEL_FIELD_KEYS: Final = {field: key for key, field in _MODEL_KEYS.items()}


def _catalog_entry(spec: object, where: str) -> OpenAICompatModel:
    if isinstance(spec, OpenAICompatModel):
        return spec
    if isinstance(spec, str):
        if not spec:
            raise OpenAICompatConfigError(where, "must be a non-empty model id")
        return OpenAICompatModel(id=spec)
    if not isinstance(spec, Mapping):
        raise OpenAICompatConfigError(
            where, f"must be a model id or a mapping, got {type(spec).__name__}"
        )
    fields: dict[str, Any] = {}
    for key, value in spec.items():
        field = _MODEL_KEYS.get(key) if isinstance(key, str) else None
        if field is None:
            known = ", ".join(f'"{name}"' for name in _MODEL_KEYS)
            raise OpenAICompatConfigError(
                f"{where}.{key}", f"is not a known key (expected one of {known})"
            )
        fields[field] = value
    if "id" not in fields:
        raise OpenAICompatConfigError(f"{where}.id", "is required")
    try:
        return OpenAICompatModel(**fields)
    except c.FieldError as exc:
        raise OpenAICompatConfigError(
            f"{where}.{_MODEL_FIELD_KEYS[exc.field]}", exc.detail
        ) from exc


def _catalog(models: Sequence[ModelSpec] | None) -> tuple[OpenAICompatModel, ...]:
    if models is None:
        return ()
    if isinstance(models, str | Mapping) or not isinstance(models, Sequence):
        raise OpenAICompatConfigError("models", "must be a list of models")
    entries = tuple(
        _catalog_entry(spec, f"models[{index}]") for index, spec in enumerate(models)
    )
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        if entry.id in seen:
            raise OpenAICompatConfigError(
                f"models[{index}].id", f'repeats the model "{entry.id}"'
            )
        seen.add(entry.id)
    return entries


def _headers(value: object, *, has_key: bool) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise OpenAICompatConfigError(
            "headers", "must be a mapping of header names to values"
        )
    checked: dict[str, str] = {}
    for name, text in value.items():
        if not isinstance(name, str) or not is_header_name(name):
            raise OpenAICompatConfigError(
                "headers", "has a name that is not a valid HTTP header name"
            )
        where = f"headers.{name}"
        lower = name.lower()
        if lower in RESERVED_HEADERS:
            raise OpenAICompatConfigError(
                where,
                "is set by the adapter and cannot be replaced (the user-agent "
                "carries the attribution every request keeps)",
            )
        if lower == "authorization" and has_key:
            raise OpenAICompatConfigError(
                where, "conflicts with apiKey/apiKeyEnv: give the key one way"
            )
        if not isinstance(text, str):
            raise OpenAICompatConfigError(where, "must be a string")
        if not is_header_value(text):
            raise OpenAICompatConfigError(
                where,
                "must be printable ASCII without leading or trailing whitespace, "
                "line breaks or control characters",
            )
        if lower in checked:
            raise OpenAICompatConfigError(
                where, "is given twice (header names are case-insensitive)"
            )
        checked[lower] = text
    return checked


def _efforts(value: object) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, Sequence) or not value:
        raise OpenAICompatConfigError(
            "reasoningEfforts", "must be a non-empty list of effort ids"
        )
    if any(not isinstance(effort, str) or effort == "" for effort in value):
        raise OpenAICompatConfigError(
            "reasoningEfforts", "must contain only non-empty strings"
        )
    if len(set(value)) != len(value):
        raise OpenAICompatConfigError("reasoningEfforts", "must not contain duplicates")
    return tuple(value)


@attrs.frozen(kw_only=True)
class _Settings:
    """The checked configuration of one adapter (``StreamSettings`` included)."""

    base_url: str
    api_key_env: str | None
    headers: dict[str, str] = attrs.field(hash=False)
    models: tuple[OpenAICompatModel, ...]
    reasoning_efforts: tuple[str, ...] | None
    stream_idle_timeout_ms: float
    stream_keepalive_timeout_ms: float | None
    total_timeout_ms: float | None
    retry_policy: RetryPolicy
    empty_response_as_stop: bool


def _flag(key: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise OpenAICompatConfigError(key, "must be a boolean")
    return value


class OpenAICompatAdapter(ChatCompletionsAdapter):
    """Streams chat completions from an OpenAI-compatible server (see the module
    docstring).

    Args:
        base_url: The API root, e.g. ``http://127.0.0.1:8080/v1``.
        api_key: The key (``str`` or ``Secret``), or ``None``.
        api_key_env: Environment variable read for the key at each request, or
            ``None``. Not together with ``api_key``.
        headers: Extra request headers (names may not be ``RESERVED_HEADERS``).
        display_name: The provider name in messages and ``provider_info``.
        models: The advertised catalog (``ModelSpec`` entries; default: none).
        include_usage: Send ``stream_options: {"include_usage": true}``.
        max_tokens_field: ``max_tokens`` or ``max_completion_tokens``.
        reasoning_efforts: Effort ids the server takes as ``reasoning_effort``
            (``None``: a requested effort raises).
        reasoning_passback_field: ``reasoning_content`` or ``reasoning`` to send
            earlier reasoning back in assistant messages (``None``: never).
        stream_idle_timeout_ms: Idle timeout: the longest silence while waiting
            for the next chunk, default 300000.
        stream_keepalive_timeout_ms: Longest wait with keep-alive comments but no
            data (default 600000; ``None``: unbounded).
        total_timeout_ms: Longest whole call (default ``None``).
        retry_policy: A retry-policy config mapping or a resolved policy.
        pool_maxsize: Idle connections kept per host.
        empty_response_as_stop: Report a blockless ``stop`` as ``stop``.
        environ: Where ``api_key_env`` is read (default ``os.environ``, live).

    Raises:
        OpenAICompatConfigError: for an invalid option (a ``ValueError``).
        LlmError: ``INVALID_CREDENTIAL`` for an explicit key no header can carry.
    """

    _package = PACKAGE

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | Secret | None = None,
        api_key_env: str | None = None,
        headers: Mapping[str, str] | None = None,
        display_name: str = DEFAULT_DISPLAY_NAME,
        models: Sequence[ModelSpec] | None = None,
        include_usage: bool = True,
        max_tokens_field: str = "max_tokens",
        reasoning_efforts: Sequence[str] | None = None,
        reasoning_passback_field: str | None = None,
        stream_idle_timeout_ms: float = DEFAULT_STREAM_IDLE_TIMEOUT_MS,
        stream_keepalive_timeout_ms: float | None = DEFAULT_KEEPALIVE_TIMEOUT_MS,
        total_timeout_ms: float | None = None,
        retry_policy: Mapping[str, Any] | RetryPolicy | None = None,
        pool_maxsize: int = DEFAULT_POOL_MAXSIZE,
        empty_response_as_stop: bool = False,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        if not isinstance(display_name, str) or not display_name.strip():
            raise OpenAICompatConfigError("displayName", "must be a non-empty string")
        if api_key is not None and api_key_env is not None:
            raise OpenAICompatConfigError(
                "apiKey", "and apiKeyEnv cannot both be set; give the key one way"
            )
        if api_key_env is not None and (
            not isinstance(api_key_env, str) or api_key_env == ""
        ):
            raise OpenAICompatConfigError(
                "apiKeyEnv", "must be a non-empty environment variable name"
            )
        if max_tokens_field not in MAX_TOKENS_FIELDS:
            raise OpenAICompatConfigError(
                "maxTokensField", 'must be "max_tokens" or "max_completion_tokens"'
            )
        if (
            reasoning_passback_field is not None
            and reasoning_passback_field not in REASONING_PASSBACK_FIELDS
        ):
            raise OpenAICompatConfigError(
                "reasoningPassbackField",
                'must be "reasoning_content", "reasoning" or null',
            )
        if type(pool_maxsize) is not int or pool_maxsize <= 0:
            raise OpenAICompatConfigError("poolMaxsize", "must be a positive integer")
        check_stream_timeouts(
            stream_idle_timeout_ms,
            stream_keepalive_timeout_ms,
            total_timeout_ms,
            error=OpenAICompatConfigError,
        )
        self._settings = _Settings(
            base_url=api_root_url(base_url, error=OpenAICompatConfigError),
            api_key_env=api_key_env,
            headers=_headers(
                headers, has_key=api_key is not None or api_key_env is not None
            ),
            models=_catalog(models),
            reasoning_efforts=_efforts(reasoning_efforts),
            stream_idle_timeout_ms=stream_idle_timeout_ms,
            stream_keepalive_timeout_ms=stream_keepalive_timeout_ms,
            total_timeout_ms=total_timeout_ms,
            retry_policy=checked_retry_policy(
                retry_policy, error=OpenAICompatConfigError
            ),
            empty_response_as_stop=_flag("emptyResponseAsStop", empty_response_as_stop),
        )
        self._profile = WireProfile(
            provider=display_name,
            reasoning_passback_field=reasoning_passback_field,
            include_usage=_flag("includeUsage", include_usage),
            max_tokens_field=max_tokens_field,
        )
        self._request_headers = stream_headers(extra=self._settings.headers)
        self._connect(api_key=api_key, environ=environ, pool_maxsize=pool_maxsize)

    # -- metadata --------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """The API root, without a trailing slash."""
        return self._settings.base_url

    @property
    def display_name(self) -> str:
        """The provider name used in messages."""
        return self._profile.provider

    def _snapshot(self) -> _Settings:
        return self._settings

    def resolve_model(
        self, provider: str, model: str, signal: AbortSignal | None = None
    ) -> LlmResolvedModelInfo:
        """Model facts without I/O (see the module docstring)."""
        entry = catalog_entry(self._settings.models, model)
        efforts = self._settings.reasoning_efforts
        return resolved_model_info(
            provider,
            model,
            entry,
            context_window=entry.context_window if entry else None,
            default_max_tokens=entry.max_tokens if entry else None,
            reasoning=None
            if efforts is None
            else LlmModelReasoningInfo(
                efforts=tuple(
                    LlmReasoningEffortInfo(id=effort, name=effort) for effort in efforts
                )
            ),
        )

    # -- streaming -------------------------------------------------------------------

    def stream(self, options: GenerateOptions) -> Iterator[StreamChunk]:
        """Stream one chat completion (a generator; checks run at the first
        ``next()``).

        Raises:
            LlmError: see the module docstring and ``docs/errors.md``.
        """
        body = self._body(options)
        key = self._request_key(self._settings.api_key_env, route=options.provider)
        yield from stream_completion(
            self._session,
            self._settings,
            profile=self._profile,
            base_url=self._settings.base_url,
            body=body,
            headers=request_headers(
                self._request_headers,
                options,
                profile=self._profile,
                has_key=key is not None,
            ),
            key=key,
            signal=options.signal,
        )

    def _body(self, options: GenerateOptions) -> dict[str, Any]:
        self._check_images(options)  # before the effort check
        extra: dict[str, Any] = {}
        effort = options.reasoning_effort
        if effort is not None:
            efforts = self._settings.reasoning_efforts
            if efforts is None or effort not in efforts:
                raise LlmError(
                    f"{self._profile.provider} adapter does not support reasoning "
                    f'effort "{effort}" (list it in reasoning_efforts to send it)',
                    ErrorCode.UNSUPPORTED_REASONING_EFFORT,
                )
            extra["reasoning_effort"] = effort
        max_tokens = options.max_tokens
        if max_tokens is None:
            entry = catalog_entry(self._settings.models, options.model)
            max_tokens = entry.max_tokens if entry else None
        return build_body(
            options,
            profile=self._profile,
            max_tokens=max_tokens,
            extra=extra,
            attachments=self.attachments,
        )

    def _check_images(self, options: GenerateOptions) -> None:
        """Refuse images for a model whose catalog entry is text only, and
        without an attachment store."""
        if not any(content_has_image(m.content) for m in options.messages):
            return
        entry = catalog_entry(self._settings.models, options.model)
        if entry is None or "image" not in entry.input_modalities:
            refuse_images(options, profile=self._profile)
        if self.attachments is None:
            raise LlmError(
                f"{self._profile.provider} cannot send the request's images: no "
                "attachment store is set (set adapter.attachments to the store "
                "holding them)",
                ErrorCode.MISSING_ATTACHMENT,
            )

    def __repr__(self) -> str:
        settings = self._settings
        key = self._key_repr(settings.api_key_env)
        names = f", headers={tuple(settings.headers)!r}" if settings.headers else ""
        return (
            f"OpenAICompatAdapter(base_url={redact_url(settings.base_url)!r}, "
            f"{key}{names})"
        )
