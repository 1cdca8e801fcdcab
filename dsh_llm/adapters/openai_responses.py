"""``OpenAIResponsesAdapter``: ``POST <base_url>/responses`` streamed, for the five
servers that speak the Responses API (OpenAI, vLLM, Ollama, LM Studio,
OpenRouter), over the pure parts of ``dsh_llm.adapters._responses`` and the
shared transport. User guide (tables, servers, codes): ``docs/openai-responses.md``.

Contracts callers may rely on:

- **Configuration** is one validated value, ``OpenAIResponsesConfig`` (the
  constructor's keyword arguments, ``from_config``, the ``llm-openai-responses``
  plugin's YAML entry). A bad value raises ``OpenAIResponsesConfigError`` (a
  ``ValueError`` keyed by its camelCase config key, message starting
  ``llm-openai-responses: ``). ``base_url`` follows the common rule
  (``dsh_llm.adapters.common.api_root_url``) and may not end in ``/responses``.
- **Server profile**: ``server`` names one of ``openai``, ``vllm``, ``ollama``,
  ``lmstudio``, ``openrouter``; unset, it is guessed from the base URL
  (``_responses.profiles.guess_server``: OpenRouter's and OpenAI's hosts, then
  the ports 11434, 1234, 8000), else ``openai``.
- **Credentials**: none by default; ``api_key`` or ``api_key_env`` (read at
  each request), never both, sent as ``authorization: Bearer``; never in a
  message or ``repr``.
- **Per call, before any I/O**: images (only for a catalog entry listing
  ``image``, read from ``adapter.attachments``), the request builder's
  refusals, the key, then ``extra_headers`` (one the adapter sets is
  ``UNSUPPORTED_OPTION``). ``response_format`` is ``text.format``,
  ``extra_body`` is merged last; the body is stateless (``store: false``) and
  reasoning comes back through the finish's ``ReplayEnvelope``.
- **Stream**: ``ResponsesTranslator`` (strict order, keyed by ``item_id``);
  EOF before a terminal event is ``STREAM_CLOSED``; a ``[DONE]`` after it is
  accepted. HTTP failures are classified by ``dsh_llm.transport.http_errors``.
- ``close()`` (or ``with``) closes the connection pool.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, ClassVar, Final

import attrs

from dsh_llm.adapter import (
    LlmModelReasoningInfo,
    LlmReasoningEffortInfo,
    LlmResolvedModelInfo,
)
from dsh_llm.adapters._responses.profiles import (
    PROFILES,
    ResponsesProfile,
    guess_server,
)
from dsh_llm.adapters._responses.request import build_responses_request
from dsh_llm.adapters._responses.translate import ResponsesTranslator
from dsh_llm.adapters._wire.adapter import encode_body
from dsh_llm.adapters.common import (
    AdapterConfig,
    AdapterConfigError,
    ConfiguredAdapter,
    adapter_field_order,
    api_root_url,
    catalog_entry,
    config_from_options,
    endpoint_url,
    input_modalities_field,
    model_catalog,
    resolved_model_info,
)
from dsh_llm.adapters.request_extras import request_headers
from dsh_llm.config import (
    RAW_METADATA,
    check_non_empty_str,
    check_one_of,
    check_optional_str,
    check_safe_positive_int,
)
from dsh_llm.credentials import Secret
from dsh_llm.protocol import GenerateOptions, StreamChunk
from dsh_llm.transport.call import StreamingCall, redact_url, url_repr
from dsh_llm.transport.read_loop import read_stream
from dsh_llm.transport.session import BearerAuth, NoAuth, stream_headers
from dsh_llm.transport.sse import SseDecoder

__all__ = [
    "AUTHORIZATION",
    "DEFAULT_BASE_URL",
    "DEFAULT_KEEPALIVE_TIMEOUT_MS",
    "DEFAULT_STREAM_IDLE_TIMEOUT_MS",
    "PACKAGE",
    "RESPONSES_PATH",
    "SERVERS",
    "OpenAIResponsesAdapter",
    "OpenAIResponsesConfig",
    "OpenAIResponsesConfigError",
    "OpenAIResponsesModel",
]

PACKAGE: Final = "llm-openai-responses"
"""The package name that prefixes configuration and credential messages."""
DEFAULT_BASE_URL: Final = "https://api.openai.com/v1"
"""The API root when none is given."""
AUTHORIZATION: Final = "authorization"
"""The key's header (``Bearer``), which ``extra_headers`` may not set when a
key is sent."""
RESPONSES_PATH: Final = "/responses"
"""Appended to the API root to reach the endpoint."""
SERVERS: Final = tuple(PROFILES)
"""The ``server`` names: ``openai``, ``vllm``, ``ollama``, ``lmstudio``,
``openrouter``."""
DEFAULT_STREAM_IDLE_TIMEOUT_MS: Final = 300_000
"""Default idle timeout: the longest silence while waiting for the next event
(a reasoning model may think for minutes before its first summary)."""
DEFAULT_KEEPALIVE_TIMEOUT_MS: Final = 600_000
"""Default bound on a wait with keep-alive comments but no data (OpenRouter
sends ``: OPENROUTER PROCESSING`` while a request is queued)."""


class OpenAIResponsesConfigError(AdapterConfigError):
    """A bad ``OpenAIResponsesAdapter`` option (a ``ValueError``).

    Args:
        key: The config key, as in YAML (``baseURL``, ``models[0].maxTokens``).
        detail: What is wrong, as the rest of a sentence after the key.
    """

    package = PACKAGE


@attrs.frozen(kw_only=True)
class OpenAIResponsesModel:
    """One advertised model (config key ``models[]``), checked on construction."""

    config_error: ClassVar[type[AdapterConfigError]] = OpenAIResponsesConfigError

    id: str = attrs.field(validator=check_non_empty_str)
    """The wire model id."""
    name: str | None = attrs.field(
        default=None, validator=attrs.validators.optional(check_non_empty_str)
    )
    """Display name (default: the id)."""
    description: str | None = attrs.field(default=None, validator=check_optional_str)
    """What sets it apart."""
    context_window: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(check_safe_positive_int)
    )
    """Its context window in tokens, when known."""
    max_tokens: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(check_safe_positive_int)
    )
    """Its output cap, sent as ``max_output_tokens`` when a request names none."""
    input_modalities: tuple[str, ...] = input_modalities_field()
    """Accepted inputs (config key ``inputModalities``): ``("text",)`` or
    ``("text", "image")``. With ``image``, images are sent as ``input_image``
    data URLs read from ``adapter.attachments``; a text-only model refuses them
    (``UNSUPPORTED_CONTENT``)."""


def _catalog(models: object) -> tuple[OpenAIResponsesModel, ...]:
    return model_catalog(models, OpenAIResponsesModel, OpenAIResponsesConfigError)


def _base_url(value: object) -> str:
    return api_root_url(
        value, error=OpenAIResponsesConfigError, endpoint=RESPONSES_PATH
    )


@attrs.frozen(kw_only=True, field_transformer=adapter_field_order)
class OpenAIResponsesConfig(AdapterConfig):
    """The one ``OpenAIResponsesAdapter`` configuration (camelCase config keys:
    ``baseURL``, ``apiKeyEnv``, ``server``...). Every field is checked (the base
    URL normalised, models made ``OpenAIResponsesModel`` values) on
    construction; a bad value raises ``OpenAIResponsesConfigError`` keyed by
    its config key. A config never holds a key."""

    config_error = OpenAIResponsesConfigError
    default_stream_idle_timeout_ms = DEFAULT_STREAM_IDLE_TIMEOUT_MS
    default_stream_keepalive_timeout_ms = DEFAULT_KEEPALIVE_TIMEOUT_MS

    base_url: str = attrs.field(
        default=DEFAULT_BASE_URL, converter=_base_url, repr=url_repr
    )
    """The API root, e.g. ``http://127.0.0.1:11434/v1`` (credentials hidden in
    the ``repr``)."""
    api_key_env: str | None = attrs.field(
        default=None, validator=attrs.validators.optional(check_non_empty_str)
    )
    """Environment variable read for the key at each request, or ``None``."""
    server: str | None = attrs.field(
        default=None, validator=attrs.validators.optional(check_one_of(*SERVERS))
    )
    """The server profile (``None``: guessed from ``base_url``, else ``openai``)."""
    models: tuple[OpenAIResponsesModel, ...] = attrs.field(
        default=None, converter=_catalog, hash=False, metadata={RAW_METADATA: True}
    )
    """The advertised catalog (ids or mappings; default: none)."""

    @property
    def profile(self) -> ResponsesProfile:
        """The server profile in force (``server``, else the guess)."""
        return PROFILES[self.server or guess_server(self.base_url)]


class OpenAIResponsesAdapter(ConfiguredAdapter[OpenAIResponsesConfig]):
    """Streams ``POST <base_url>/responses`` (see the module docstring).

    The keyword arguments besides ``api_key`` and ``environ`` are
    ``OpenAIResponsesConfig``'s fields (``api_key_env``, ``server``, ``models``,
    the three stream timeouts, ``retry_policy``, ``pool_maxsize``,
    ``empty_response_as_stop``) and build one with ``base_url``;
    ``OpenAIResponsesAdapter.from_config(config)`` takes one built elsewhere.

    Args:
        base_url: The API root (default ``https://api.openai.com/v1``).
        api_key: The key (``str`` or ``Secret``), or ``None``. Not together with
            ``api_key_env``.
        environ: Where ``api_key_env`` is read (default ``os.environ``, live).
        **options: ``OpenAIResponsesConfig`` fields.

    Raises:
        OpenAIResponsesConfigError: for an invalid option (a ``ValueError``).
        TypeError: for a keyword that is not an ``OpenAIResponsesConfig`` field.
        LlmError: ``INVALID_CREDENTIAL`` for an explicit key no header can carry.
    """

    _package = PACKAGE
    config_class = OpenAIResponsesConfig

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        *,
        api_key: str | Secret | None = None,
        environ: Mapping[str, str] | None = None,
        **options: Any,
    ) -> None:
        config = config_from_options(
            OpenAIResponsesConfig, {"base_url": base_url, **options}
        )
        self._setup(config, api_key=api_key, environ=environ)

    def _configure(
        self,
        config: OpenAIResponsesConfig,
        *,
        api_key: str | Secret | None,
        environ: Mapping[str, str] | None,
    ) -> None:
        if api_key is not None and config.api_key_env is not None:
            raise OpenAIResponsesConfigError(
                "apiKey", "and apiKeyEnv cannot both be set; give the key one way"
            )
        self._base_url = config.base_url
        self._profile = config.profile
        self._display_name = self._profile.provider
        self._url = endpoint_url(config.base_url, RESPONSES_PATH)
        self._headers = stream_headers()

    @property
    def profile(self) -> ResponsesProfile:
        """The server profile in force."""
        return self._profile

    # -- metadata --------------------------------------------------------------------

    def _model_info(
        self, snapshot: OpenAIResponsesConfig, provider: str, model: str
    ) -> LlmResolvedModelInfo:
        # The catalog entry's context window, cap and inputs (unknown, text
        # only when not configured), the profile's efforts.
        entry = catalog_entry(snapshot.models, model)
        return resolved_model_info(
            provider,
            model,
            entry,
            context_window=entry.context_window if entry else None,
            default_max_tokens=entry.max_tokens if entry else None,
            reasoning=LlmModelReasoningInfo(
                efforts=tuple(
                    LlmReasoningEffortInfo(id=effort, name=effort)
                    for effort in self._profile.reasoning_efforts
                )
            ),
        )

    # -- streaming -------------------------------------------------------------------

    def _stream(
        self, options: GenerateOptions, snapshot: OpenAIResponsesConfig
    ) -> Iterator[StreamChunk]:
        config = snapshot
        profile = self._profile
        entry = catalog_entry(config.models, options.model)
        self._check_image_input(options, entry)
        body = build_responses_request(
            options,
            profile=profile,
            max_output_tokens=entry.max_tokens if entry else None,
            attachments=self.attachments,
        )
        key = self._request_key(config.api_key_env, route=options.provider)
        headers = request_headers(
            self._headers,
            options,
            provider=profile.provider,
            taken=() if key is None else (AUTHORIZATION,),
        )
        call = StreamingCall(
            self._session,
            url=self._url,
            body=encode_body(body, provider=profile.provider),
            headers=headers,
            auth=NoAuth() if key is None else BearerAuth(key),
            provider=profile.provider,
            endpoint=config.base_url,
            signal=options.signal,
            idle_timeout_ms=config.stream_idle_timeout_ms,
            keepalive_timeout_ms=config.stream_keepalive_timeout_ms,
            total_timeout_ms=config.total_timeout_ms,
        )
        translator = ResponsesTranslator(
            profile, empty_response_as_stop=config.empty_response_as_stop
        )
        # The wire has no required end marker: a [DONE] after the terminal
        # event reaches the translator, which has finished and ignores it.
        decoder = SseDecoder(terminal_data=None, provider=profile.provider)
        yield from read_stream(call, decoder, translator)

    def __repr__(self) -> str:
        config = self._config
        key = self._key_repr(config.api_key_env)
        return (
            f"OpenAIResponsesAdapter(base_url={redact_url(config.base_url)!r}, "
            f"server={self._profile.server!r}, {key})"
        )
