"""``WireAdapter``: the one adapter class; a family value says what it streams.

- A built-in adapter (``AnthropicAdapter``...) is ``WireAdapter`` with its
  ``family`` set; the keyword arguments build the family's config class, and
  ``from_config(config)`` takes one built elsewhere (a plugin's YAML entry).
- One pooled session per adapter; ``close()`` (or leaving a ``with`` block)
  closes the pool, streams already running keep their connection.
- ``stream``, ``prepare_call`` and ``resolve_model`` read one snapshot of the
  config per call; ``stream`` is a generator (checks run at the first ``next()``)
  that builds the family's request, sends it through the transport's
  ``StreamingCall`` and read loop, and yields its translator's chunks.
- The returned ``ChunkStream`` shows what the response said about itself once
  its headers arrived (``stream.response``: request id, rate limits).
- ``count_tokens`` asks the family's token-counting endpoint (``WireFamily.
  count_tokens``) about the conversation ``stream`` would send, through the
  bounded ``dsh_llm.transport.fetch``; a family without one refuses with
  ``UNSUPPORTED_OPTION``.
- The key is read per request (``api_key``, else the config's ``api_key_env``) and
  never appears in a message or a ``repr``.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Generator
from collections.abc import Mapping
from typing import Any
from typing import ClassVar
from typing import Final
from typing import Generic
from typing import Self
from typing import TypeVar

import requests

from dsh_llm.adapter import LlmAdapter
from dsh_llm.adapter import LlmModelInfo
from dsh_llm.adapter import LlmProviderInfo
from dsh_llm.adapter import LlmResolvedModelInfo
from dsh_llm.adapter import PreparedAdapterCall
from dsh_llm.adapters._wire.config import AdapterConfig
from dsh_llm.adapters._wire.config import CatalogEntry
from dsh_llm.adapters._wire.config import config_from_options
from dsh_llm.adapters._wire.extras import AttachmentReader
from dsh_llm.adapters._wire.family import Endpoint
from dsh_llm.adapters._wire.family import ServerAccess
from dsh_llm.adapters._wire.family import WireCall
from dsh_llm.adapters._wire.family import WireFamily
from dsh_llm.adapters._wire.family import api_key_from_environ
from dsh_llm.adapters._wire.family import explicit_api_key
from dsh_llm.adapters._wire.family import offered_modalities
from dsh_llm.credentials import Secret
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import ChunkStream
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import StreamMetadata
from dsh_llm.retry import RetryPolicy
from dsh_llm.serde import compact_json
from dsh_llm.signal import AbortSignal
from dsh_llm.transport.call import StreamingCall
from dsh_llm.transport.call import redact_url
from dsh_llm.transport.fetch import fetch
from dsh_llm.transport.ratelimits import response_info
from dsh_llm.transport.read_loop import read_stream
from dsh_llm.transport.session import create_session

C = TypeVar("C", bound=AdapterConfig)

COUNT_TOKENS_TIMEOUT_MS: Final = 60_000
"""The longest a token count may take (never longer than the config's idle and
total timeouts)."""


def encode_body(body: Mapping[str, Any], *, provider: str) -> bytes:
    """UTF-8 JSON for ``body``.

    Raises:
        LlmError: ``INVALID_REQUEST`` when a value (a tool schema) is not JSON
            (e.g. ``NaN`` or an object JSON cannot hold).
    """
    try:
        text = compact_json(body)
    except (TypeError, ValueError) as exc:
        raise LlmError(
            f"{provider} request body is not valid JSON: {exc}",
            ErrorCode.INVALID_REQUEST,
            cause=exc,
        ) from exc
    return text.encode("utf-8")


class WireAdapter(LlmAdapter, Generic[C]):
    """Streams one wire family (see the module docstring).

    Args:
        api_key: The key (``str`` or ``Secret``); ``None`` reads the config's
            ``api_key_env`` from the environment at each request (when it names
            one).
        environ: Where variables are read (default ``os.environ``, live).
        **options: The family's config fields.

    Raises:
        AdapterConfigError: for an invalid option (a ``ValueError`` reading
            ``<package>: <config key> ...``, its ``key`` the config key).
        TypeError: for a keyword that is not a config field.
        LlmError: ``INVALID_CREDENTIAL`` for an explicit key no header can carry.
    """

    family: ClassVar[WireFamily[Any, Any]]
    """The wire family this adapter streams."""

    attachments: AttachmentReader | None = None
    """The attachment store images are read from (any object with
    ``get(attachment_id) -> bytes | None``, such as
    ``dsh_llm.attachments.MemoryAttachmentStore``); ``None`` (the default)
    refuses images with ``MISSING_ATTACHMENT``. Set per adapter instance."""

    _config: C
    _endpoint: Endpoint[Any]
    _api_key: Secret | None
    _environ: Mapping[str, str]

    def __init__(
        self,
        api_key: str | Secret | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        **options: Any,
    ) -> None:
        self._setup(
            config_from_options(self.family.config_class, options),
            api_key=api_key,
            environ=environ,
        )

    @classmethod
    def from_config(
        cls,
        config: C,
        *,
        api_key: str | Secret | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> Self:
        """An adapter over ``config`` (built and checked beforehand, e.g. by a
        plugin from YAML).

        Raises:
            TypeError: for a ``config`` of another class.
            AdapterConfigError: for what only the adapter can check (a key given
                two ways, a base URL read from the environment).
        """
        expected = cls.family.config_class
        if not isinstance(config, expected):
            name = expected.__name__
            article = "an" if name[:1] in "AEIOU" else "a"
            raise TypeError(
                f"config must be {article} {name}, got {type(config).__name__}"
            )
        adapter = cls.__new__(cls)
        adapter._setup(config, api_key=api_key, environ=environ)
        return adapter

    def _setup(
        self,
        config: C,
        *,
        api_key: str | Secret | None,
        environ: Mapping[str, str] | None,
    ) -> None:
        self._environ = os.environ if environ is None else environ
        self._endpoint = self.family.endpoint(
            config, explicit_key=api_key is not None, environ=self._environ
        )
        self._config = config
        self._api_key = explicit_api_key(api_key, package=config.package)
        self._session = create_session(pool_maxsize=config.pool_maxsize)

    # -- what is in force --------------------------------------------------------------

    @property
    def config(self) -> C:
        """The configuration in force."""
        return self._config

    @property
    def base_url(self) -> str:
        """The API root in force, without a trailing slash."""
        return self._endpoint.base_url

    @property
    def display_name(self) -> str:
        """The provider named in messages."""
        return self._endpoint.display_name

    @property
    def endpoint(self) -> Endpoint[Any]:
        """Where calls go: the API root, display name and the family's profile."""
        return self._endpoint

    def _request_key(self, config: C, options: GenerateOptions) -> Secret | None:
        return self._route_key(config, options.provider)

    def _route_key(self, config: C, provider: str) -> Secret | None:
        if self._api_key is not None:
            return self._api_key
        name: str | None = getattr(config, "api_key_env", None)
        if name is None:
            return None
        return api_key_from_environ(
            self._environ,
            name,
            package=config.package,
            route=self.family.route or provider,
        )

    # -- metadata ----------------------------------------------------------------------

    def provider_info(self, provider: str) -> LlmProviderInfo:
        """``{id: provider, name: <the display name>}``."""
        return LlmProviderInfo(id=provider, name=self._endpoint.display_name)

    def provider_retry_policy(self, provider: str) -> RetryPolicy:
        """The configured retry policy."""
        return self._config.retry_policy

    def list_models(
        self, provider: str, signal: AbortSignal | None = None
    ) -> tuple[LlmModelInfo, ...]:
        """The advertised catalog (the family may ask its server, bounded by the
        config's timeouts and ``signal``)."""
        lister = self.family.list_models
        if lister is not None:
            config = self._config
            server: ServerAccess[C, Any] = ServerAccess(
                session=self._session,
                config=config,
                endpoint=self._endpoint,
                key=functools.partial(self._route_key, config, provider),
                signal=signal,
            )
            return lister(server, provider)
        models: tuple[CatalogEntry, ...] = getattr(self._config, "models", ()) or ()
        return tuple(
            catalog_model_info(provider, entry, image_input=self.family.image_input)
            for entry in models
        )

    def resolve_model(
        self, provider: str, model: str, signal: AbortSignal | None = None
    ) -> LlmResolvedModelInfo:
        """Model facts without I/O."""
        return self.family.model_info(self._config, self._endpoint, provider, model)

    def prepare_call(
        self, provider: str, model: str, signal: AbortSignal | None = None
    ) -> PreparedAdapterCall:
        """Model facts and dispatch from one config snapshot."""
        config = self._config
        return PreparedAdapterCall(
            model=self.family.model_info(config, self._endpoint, provider, model),
            stream=lambda options: self._chunk_stream(options, config),
        )

    # -- streaming ---------------------------------------------------------------------

    def stream(self, options: GenerateOptions) -> ChunkStream:
        """Stream one call (lazy: checks run at the first ``next()``); the
        ``ChunkStream`` carries ``options``, so ``collect`` keeps the reply's
        replay state.

        Raises:
            LlmError: see the adapter's docs page and ``docs/errors.md``.
        """
        return self._chunk_stream(options, self._config)

    def _chunk_stream(self, options: GenerateOptions, config: C) -> ChunkStream:
        metadata = StreamMetadata()
        return ChunkStream(self._stream(options, config, metadata), options, metadata)

    def _call(self, options: GenerateOptions, config: C) -> WireCall[C, Any]:
        return WireCall(
            options=options,
            config=config,
            endpoint=self._endpoint,
            attachments=self.attachments,
            key=functools.partial(self._request_key, config, options),
        )

    def _stream(
        self,
        options: GenerateOptions,
        config: C,
        metadata: StreamMetadata | None = None,
    ) -> Generator[StreamChunk, None, None]:
        family = self.family
        endpoint = self._endpoint
        call = self._call(options, config)
        request = family.request(call)
        provider = endpoint.display_name
        streaming = StreamingCall(
            self._session,
            url=request.url,
            body=encode_body(request.body, provider=provider),
            headers=request.headers,
            auth=request.auth,
            provider=provider,
            endpoint=endpoint.base_url,
            signal=options.signal,
            idle_timeout_ms=config.stream_idle_timeout_ms,
            keepalive_timeout_ms=config.stream_keepalive_timeout_ms,
            total_timeout_ms=config.total_timeout_ms,
            expected=family.expected,
            classify_error=family.classify_error,
            secrets=request.secrets,
        )
        yield from read_stream(
            streaming,
            family.decoder(provider),
            family.translator(call),
            None
            if metadata is None
            else functools.partial(_received, metadata, streaming),
        )

    # -- token counting ----------------------------------------------------------------

    def count_tokens(self, options: GenerateOptions) -> int:
        """The input tokens of the request ``stream(options)`` would send, counted
        by the provider's own endpoint (no generation, no output tokens); one
        bounded request (``COUNT_TOKENS_TIMEOUT_MS``, ``options.signal``).

        Raises:
            LlmError: ``UNSUPPORTED_OPTION`` when the wire has no such endpoint;
                the refusals ``stream`` would make before any I/O; the HTTP codes
                of the answer; ``MALFORMED_RESPONSE`` for an answer without a
                count.
        """
        family = self.family
        provider = self._endpoint.display_name
        if family.count_tokens is None:
            raise LlmError(
                f"{provider} has no token-counting endpoint (the "
                f"{family.name} wire offers none)",
                ErrorCode.UNSUPPORTED_OPTION,
            )
        config = self._config
        counting = family.count_tokens(self._call(options, config))
        request = counting.request
        bounds = [COUNT_TOKENS_TIMEOUT_MS, config.stream_idle_timeout_ms]
        if config.total_timeout_ms is not None:
            bounds.append(config.total_timeout_ms)
        fetched = fetch(
            self._session,
            request.url,
            provider=provider,
            endpoint=self._endpoint.base_url,
            timeout_ms=min(bounds),
            method="POST",
            headers=request.headers,
            auth=request.auth,
            signal=options.signal,
            classify_error=family.classify_error,
            body=encode_body(request.body, provider=provider),
            secrets=request.secrets,
        )
        try:
            answer = json.loads(fetched.body)
        except (ValueError, RecursionError) as exc:
            raise LlmError(
                f"{provider} token count answer is not JSON",
                ErrorCode.MALFORMED_RESPONSE,
            ) from exc
        count = counting.read(answer)
        if count is None:
            raise LlmError(
                f"{provider} token count answer holds no input token count",
                ErrorCode.MALFORMED_RESPONSE,
            )
        return count

    # -- lifetime ----------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection pool. Streams already running keep their
        connection until they end. The adapter stays usable: a later stream
        opens a new connection, released by the next ``close()``."""
        self._session.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        config = self._config
        if self._api_key is not None:
            key = "api_key=***"
        else:
            name = getattr(config, "api_key_env", None)
            key = "no key" if name is None else f"api_key_env={name!r}"
        extra = self.family.describe(config, self._endpoint)
        return (
            f"{type(self).__name__}(base_url={redact_url(self.base_url)!r}"
            f"{extra}, {key})"
        )


class ServerAdapter(WireAdapter[C]):
    """A ``WireAdapter`` for a family any server of its wire speaks (Ollama, the
    Responses API, chat completions): the server's root comes first.

    Args:
        base_url: The server's API root (``None``: the config's default).
        api_key: The key (``str`` or ``Secret``); ``None`` reads the config's
            ``api_key_env`` from the environment at each request (when it names
            one).
        environ: Where variables are read (default ``os.environ``, live).
        **options: The family's further config fields.

    Raises:
        AdapterConfigError: for an invalid option (a ``ValueError``).
        TypeError: for a keyword that is not a config field.
        LlmError: ``INVALID_CREDENTIAL`` for an explicit key no header can carry.
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        api_key: str | Secret | None = None,
        environ: Mapping[str, str] | None = None,
        **options: Any,
    ) -> None:
        if base_url is not None:
            options = {"base_url": base_url, **options}
        super().__init__(api_key, environ=environ, **options)


def _received(
    metadata: StreamMetadata, call: StreamingCall, response: requests.Response
) -> None:
    """The stream's response arrived: what its headers say goes to the
    stream's metadata."""
    metadata.received(response_info(response.headers, redact=call.redact))


def catalog_model_info(
    provider: str, entry: CatalogEntry, *, image_input: bool = True
) -> LlmModelInfo:
    """``list_models``' row for one catalog ``entry``."""
    return LlmModelInfo(
        provider=provider,
        id=entry.id,
        name=entry.name or entry.id,
        description=entry.description,
        input_modalities=offered_modalities(entry, image_input=image_input),
    )
