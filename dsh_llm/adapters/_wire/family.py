"""``WireFamily``: a wire family as a value, the seam every adapter is built from.

A family names its parts; ``WireAdapter`` (``dsh_llm.adapters._wire.adapter``)
streams any family with them, so no family copies a stream loop:

- ``config_class``: its one validated config (an ``AdapterConfig``);
- ``endpoint(config, explicit_key=, environ=)``: where its calls go, fixed when
  the adapter is built (``Endpoint``: the API root, the display name, and a
  ``profile`` of whatever else the family derives once from its config);
- ``request(call)``: one call's ``WireRequest`` (URL, JSON body from the family's
  pure builder, headers, and the ``auth`` that puts the credential on the request:
  a header, a bearer token, or request signing);
- ``decoder(provider)`` and ``translator(call)``: bytes to events, events to what
  the wire said (a ``WireTranslator`` writing through a ``BlockWriter``);
- ``classify_error``, ``model_info``, ``list_models`` and ``describe``;
- ``count_tokens(call)``, where the provider has a token-counting endpoint: the
  ``TokenCountRequest`` that asks it about the conversation ``request`` would
  send (``None``: the wire has none, ``UNSUPPORTED_OPTION``).

``WireCall`` is what a request or translator hook reads: the options, the config
snapshot, the endpoint, the attachment store, and the key (read per request).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from collections.abc import Collection
from collections.abc import Iterable
from collections.abc import Mapping
from typing import Any
from typing import Generic
from typing import TypeVar

import attrs
import requests

from dsh_llm.adapter import LlmModelContext
from dsh_llm.adapter import LlmModelInfo
from dsh_llm.adapter import LlmModelReasoningInfo
from dsh_llm.adapter import LlmReasoningEffortInfo
from dsh_llm.adapter import LlmResolvedModelInfo
from dsh_llm.adapters._wire.config import AdapterConfig
from dsh_llm.adapters._wire.config import BaseUrlRule
from dsh_llm.adapters._wire.config import CatalogEntry
from dsh_llm.adapters._wire.extras import AttachmentReader
from dsh_llm.adapters._wire.extras import check_image_input
from dsh_llm.adapters._wire.values import wire_count
from dsh_llm.credentials import Secret
from dsh_llm.credentials import assert_usable_api_key
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import GenerateOptions
from dsh_llm.signal import AbortSignal
from dsh_llm.transport.http_errors import HttpErrorClassifier
from dsh_llm.transport.read_loop import EventDecoder
from dsh_llm.transport.read_loop import EventTranslator
from dsh_llm.transport.sse import SseDecoder

C = TypeVar("C", bound=AdapterConfig)
P = TypeVar("P")
Q = TypeVar("Q")


@attrs.frozen(kw_only=True)
class Endpoint(Generic[P]):
    """Where an adapter's calls go, fixed when it is built."""

    base_url: str
    """The API root in force (no trailing slash; a query string kept)."""
    display_name: str
    """The provider named in messages and ``provider_info``."""
    profile: P
    """What else the family derives once from its config (a server profile,
    fixed headers); the family's own type."""


@attrs.frozen(kw_only=True)
class WireRequest:
    """One call's HTTP request, as a family's ``request`` hook builds it."""

    url: str
    """The endpoint (the API root plus the family's path and query)."""
    body: Mapping[str, Any]
    """The JSON body, from the family's pure request builder."""
    headers: Mapping[str, str]
    """The headers (lower-case names), ``extra_headers`` included."""
    auth: requests.auth.AuthBase
    """Puts the credential on the request (header, bearer token, signature)."""
    secrets: tuple[Secret, ...] = ()
    """Secrets the transport redacts from server text besides the auth's own
    ``secret`` (a signing key beside its session token)."""


@attrs.frozen(kw_only=True)
class TokenCountRequest:
    """One token count, as a family's ``count_tokens`` hook builds it."""

    request: WireRequest
    """``POST <url>`` with a JSON body holding the conversation the stream
    request would send (the family's own request builder made it)."""
    read: Callable[[Any], int | None]
    """The decoded JSON answer to its input token count (``None``: the answer
    holds none, which the adapter reports as ``MALFORMED_RESPONSE``)."""


def counting_request(
    streamed: WireRequest, *, url: str, body: Mapping[str, Any]
) -> WireRequest:
    """``streamed`` (a family's stream request) sent to ``url`` with ``body``
    instead, asking for a JSON answer; its headers and credential are kept."""
    headers = {**streamed.headers, "accept": "application/json"}
    return attrs.evolve(streamed, url=url, body=body, headers=headers)


def answer_count(answer: Any, key: str) -> int | None:
    """``answer[key]`` when ``answer`` is a JSON object and that is a token
    count (``wire_count``), else ``None``."""
    if not isinstance(answer, dict):
        return None
    return wire_count(answer.get(key))


def token_count(
    streamed: WireRequest, *, url: str, body: Mapping[str, Any], answer_key: str
) -> TokenCountRequest:
    """A count through a counting endpoint: ``streamed`` sent to ``url`` with
    ``body`` (``counting_request``), the count read at ``answer_key`` of the
    answer (``answer_count``)."""
    return TokenCountRequest(
        request=counting_request(streamed, url=url, body=body),
        read=functools.partial(answer_count, key=answer_key),
    )


def fields_count(
    streamed: WireRequest, *, url: str, fields: Collection[str], answer_key: str
) -> TokenCountRequest:
    """``token_count`` of ``streamed``'s body cut to ``fields`` (the ones the
    counting endpoint takes; the others, such as the output cap or ``stream``,
    do not change the input)."""
    body = {k: v for k, v in streamed.body.items() if k in fields}
    return token_count(streamed, url=url, body=body, answer_key=answer_key)


@attrs.frozen(kw_only=True, eq=False)
class WireCall(Generic[C, P]):
    """One call as a family's hooks see it (no I/O happens here)."""

    options: GenerateOptions
    """The call's options."""
    config: C
    """The config snapshot the call runs under."""
    endpoint: Endpoint[P]
    """Where the call goes."""
    attachments: AttachmentReader | None
    """The store images are read from (``None``: images are refused)."""
    _key: Callable[[], Secret | None] = attrs.field(repr=False)
    """Reads the key of this request (constructor argument ``key``; see
    ``key()``)."""

    @property
    def provider(self) -> str:
        """The display name used in messages."""
        return self.endpoint.display_name

    def key(self) -> Secret | None:
        """The key of this request: the adapter's explicit one, else the config's
        ``api_key_env`` read now, else none.

        Raises:
            LlmError: ``MISSING_CREDENTIAL`` naming the variable and the route
                when it is unset; ``INVALID_CREDENTIAL`` for a value no header can
                carry.
        """
        return self._key()

    def optional_key(self) -> Secret | None:
        """``key()``, but ``None`` when the configured variable is unset (a
        family that can sign instead: the key, when given, wins).

        Raises:
            LlmError: ``INVALID_CREDENTIAL`` for a value no header can carry.
        """
        try:
            return self._key()
        except LlmError as exc:
            if exc.code != ErrorCode.MISSING_CREDENTIAL:
                raise
            return None

    def check_images(self, entry: CatalogEntry | None) -> None:
        """Refuse images the model cannot take or the store cannot give, before
        any I/O (``dsh_llm.adapters.check_image_input`` against the model's catalog
        ``entry``; ``None``: unlisted, text only)."""
        check_image_input(
            self.options,
            provider=self.provider,
            modalities=None if entry is None else entry.input_modalities,
            store=self.attachments,
        )

    def with_profile(self, profile: Q) -> WireCall[C, Q]:
        """The same call seen through another profile (its endpoint's root and
        display name kept): how a family hands a call to another wire's hook."""
        endpoint = self.endpoint
        seen = Endpoint(
            base_url=endpoint.base_url,
            display_name=endpoint.display_name,
            profile=profile,
        )
        # Not attrs.evolve: it cannot change the profile's type parameter.
        return WireCall(
            options=self.options,
            config=self.config,
            endpoint=seen,
            attachments=self.attachments,
            key=self._key,
        )


@attrs.frozen(kw_only=True, eq=False)
class ServerAccess(Generic[C, P]):
    """What a family's ``list_models`` hook may use to ask its server (the
    adapter's pooled session, config, endpoint and key); no I/O happens here."""

    session: requests.Session
    """The adapter's pooled session."""
    config: C
    """The config in force."""
    endpoint: Endpoint[P]
    """Where the adapter's calls go."""
    _key: Callable[[], Secret | None] = attrs.field(repr=False)
    """Reads the key (constructor argument ``key``; see ``WireCall.key``)."""
    signal: AbortSignal | None = None
    """The caller's abort signal (``None``: none)."""

    def key(self) -> Secret | None:
        """The key, as ``WireCall.key`` reads it."""
        return self._key()


def root_endpoint(
    rule: BaseUrlRule, display_name: str, profile: P
) -> Callable[..., Endpoint[P]]:
    """The ``endpoint`` hook of a family whose calls all go to one API root: the
    config's ``base_url`` resolved by ``rule`` (``BaseUrlRule.resolve``, the
    environment read from ``environ``), named ``display_name``, with a fixed
    ``profile``."""

    def endpoint(
        config: Any, *, explicit_key: bool, environ: Mapping[str, str]
    ) -> Endpoint[P]:
        return Endpoint(
            base_url=rule.resolve(config.base_url, environ),
            display_name=display_name,
            profile=profile,
        )

    return endpoint


def sse_decoder(provider: str) -> EventDecoder[Any]:
    """An SSE decoder for a wire without a ``data: [DONE]`` end marker."""
    return SseDecoder(terminal_data=None, provider=provider)


def _no_description(config: Any, endpoint: Endpoint[Any]) -> str:
    return ""


@attrs.frozen(kw_only=True)
class WireFamily(Generic[C, P]):
    """A wire family's parts (see the module docstring). Hooks are plain
    functions of the family's modules; only ``request`` may read the key."""

    name: str
    """The family's name (``anthropic-messages``, ``chat-completions``)."""
    config_class: type[C]
    """The one validated config class."""
    endpoint: Callable[..., Endpoint[P]]
    """``endpoint(config, *, explicit_key: bool, environ) -> Endpoint``: the API
    root and display name (and the family's profile); raises
    ``AdapterConfigError`` for what only the adapter can check."""
    request: Callable[[WireCall[C, P]], WireRequest]
    """One call's request; raises ``LlmError`` for what cannot be sent."""
    translator: Callable[[WireCall[C, P]], EventTranslator[Any]]
    """A fresh translator for one call."""
    model_info: Callable[[C, Endpoint[P], str, str], LlmResolvedModelInfo]
    """``model_info(config, endpoint, provider, model)``: ``resolve_model``'s
    answer, without I/O."""
    decoder: Callable[[str], EventDecoder[Any]] = sse_decoder
    """``decoder(provider)``: a fresh decoder for one body."""
    classify_error: HttpErrorClassifier | None = None
    """Turns a non-2xx answer into its ``LlmError`` (``None``: the shared rules)."""
    expected: str = "an event stream"
    """What a 2xx body must be, named when it is not."""
    route: str | None = None
    """The route named when its key is missing (``None``: the call's route)."""
    image_input: bool = True
    """Whether the family can send images at all."""
    list_models: (
        Callable[[ServerAccess[C, P], str], tuple[LlmModelInfo, ...]] | None
    ) = None
    """``list_models(server, provider)`` when the catalog is not always the
    config's ``models`` (a server's own list); ``None``: the config's catalog."""
    describe: Callable[[C, Endpoint[P]], str] = _no_description
    """Extra ``repr`` fields (``", server='vllm'"``); never a key."""
    count_tokens: Callable[[WireCall[C, P]], TokenCountRequest] | None = None
    """``count_tokens(call)``: the request that counts the input tokens of the
    conversation ``request`` would send, through the provider's own endpoint;
    ``None``: the wire has none (``WireAdapter.count_tokens`` refuses with
    ``UNSUPPORTED_OPTION``)."""


def explicit_api_key(api_key: str | Secret | None, *, package: str) -> Secret | None:
    """The checked key an adapter was constructed with (``None`` stays ``None``).

    Raises:
        TypeError: for a key that is neither ``str`` nor ``Secret``.
        LlmError: ``INVALID_CREDENTIAL`` for a key no header can carry (the
            message names ``package`` and ``api_key``, never the key).
    """
    if api_key is None:
        return None
    raw = api_key.reveal() if isinstance(api_key, Secret) else api_key
    if not isinstance(raw, str):
        raise TypeError(
            f"api_key must be a str or Secret, got {type(api_key).__name__}"
        )
    return Secret(assert_usable_api_key(raw, package, "api_key"))


def api_key_from_environ(
    environ: Mapping[str, str], name: str, *, package: str, route: str
) -> Secret:
    """The key in environment variable ``name``, read now (per request).

    Raises:
        LlmError: ``MISSING_CREDENTIAL`` naming ``name`` and ``route`` when the
            variable is unset or empty; ``INVALID_CREDENTIAL`` for a value no
            header can carry.
    """
    raw = environ.get(name)
    if not raw:
        raise LlmError(
            f'{package}: no API key for provider route "{route}"; pass api_key or '
            f"export {name} in the launching environment",
            ErrorCode.MISSING_CREDENTIAL,
        )
    return Secret(assert_usable_api_key(raw, package, name))


def offered_modalities(
    entry: CatalogEntry | None, *, image_input: bool
) -> tuple[str, ...]:
    """The inputs an adapter can send for ``entry``: its catalog's, without
    ``image`` when ``image_input`` is false; ``("text",)`` for an unlisted id."""
    if entry is None:
        return ("text",)
    if image_input:
        return entry.input_modalities
    return tuple(m for m in entry.input_modalities if m != "image") or ("text",)


def effort_infos(
    efforts: Iterable[str], *, capitalize: bool = False
) -> tuple[LlmReasoningEffortInfo, ...]:
    """``efforts`` (wire values, in display order) as the ``efforts`` of an
    ``LlmModelReasoningInfo``, each named by its value (``capitalize``: with a
    capital first letter)."""
    return tuple(
        LlmReasoningEffortInfo(
            id=effort, name=effort.capitalize() if capitalize else effort
        )
        for effort in efforts
    )


def resolved_model_info(
    provider: str,
    model: str,
    entry: CatalogEntry | None,
    *,
    reasoning: LlmModelReasoningInfo | None,
    context_window: int | None = None,
    default_max_tokens: int | None = None,
    image_input: bool = True,
) -> LlmResolvedModelInfo:
    """What ``resolve_model`` answers for ``model`` (``entry``: its catalog entry,
    ``None`` when unlisted): the entry's name (else the id), description, input
    modalities, context window and output cap (else ``context_window`` and
    ``default_max_tokens``, the family's defaults), and the given efforts."""
    if entry is not None:
        context_window = entry.context_window or context_window
        default_max_tokens = entry.max_tokens or default_max_tokens
    return LlmResolvedModelInfo(
        provider=provider,
        id=model,
        name=(entry.name or entry.id) if entry else model,
        description=entry.description if entry else None,
        # An unlisted id is treated as text-only: claiming image input without
        # knowing would let a host store input the endpoint rejects.
        input_modalities=offered_modalities(entry, image_input=image_input),
        context=None
        if context_window is None
        else LlmModelContext(context_window=context_window),
        default_max_tokens=default_max_tokens,
        reasoning=reasoning,
    )
