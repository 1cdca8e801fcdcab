"""The chat-completions family's adapter base and its one request.

``DeepSeekAdapter`` and ``OpenAICompatAdapter`` differ in their configuration and
in a ``WireProfile``; what they share beyond ``dsh_llm.adapters.common`` is here:

- ``ChatCompletionsAdapter``: ``HttpAdapter`` named by its profile.
- ``api_root_url``: the common rule, refusing a root that already ends in
  ``/chat/completions``.
- ``chat_completions_url`` and ``stream_completion``: one
  ``POST <base_url>/chat/completions`` through the transport's read loop and the
  translator of ``dsh_llm.adapters._chat.translate``.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator, Mapping
from typing import Any, Final, TypeVar

import requests

from dsh_llm.adapters import common
from dsh_llm.adapters._chat.request import WireProfile, encode_body
from dsh_llm.adapters._chat.translate import ChatCompletionsTranslator
from dsh_llm.adapters.common import (
    AdapterConfigError,
    ConfiguredAdapter,
    PooledSettings,
    StreamSettings,
)
from dsh_llm.credentials import Secret
from dsh_llm.protocol import StreamChunk
from dsh_llm.signal import AbortSignal
from dsh_llm.transport.call import StreamingCall
from dsh_llm.transport.read_loop import read_stream
from dsh_llm.transport.session import BearerAuth, NoAuth
from dsh_llm.transport.sse import DONE, SseDecoder

__all__ = [
    "CHAT_COMPLETIONS_PATH",
    "ChatCompletionsAdapter",
    "api_root_url",
    "chat_completions_url",
    "stream_completion",
]

_Config = TypeVar("_Config", bound=PooledSettings)

CHAT_COMPLETIONS_PATH: Final = "/chat/completions"
"""Appended to an API root to reach the endpoint."""


def api_root_url(
    value: object, *, error: type[AdapterConfigError], source: str | None = None
) -> str:
    """``dsh_llm.adapters.common.api_root_url`` for a chat-completions root (one
    that does not already end in ``/chat/completions``)."""
    return common.api_root_url(
        value, error=error, source=source, endpoint=CHAT_COMPLETIONS_PATH
    )


class ChatCompletionsAdapter(ConfiguredAdapter[_Config]):
    """``HttpAdapter`` whose display name is its ``WireProfile``'s provider."""

    _profile: WireProfile

    @property
    def _display_name(self) -> str:  # type: ignore[override]
        return self._profile.provider


def chat_completions_url(base_url: str) -> str:
    """The endpoint under API root ``base_url`` (as ``api_root_url`` returns it):
    ``/chat/completions`` appended to its path with exactly one slash, before any
    query string (Azure-style ``?api-version=...`` roots keep their query)."""
    parts = urllib.parse.urlsplit(base_url)
    path = parts.path.rstrip("/") + CHAT_COMPLETIONS_PATH
    return urllib.parse.urlunsplit(parts._replace(path=path))


def stream_completion(
    session: requests.Session,
    settings: StreamSettings,
    *,
    profile: WireProfile,
    base_url: str,
    body: Mapping[str, Any],
    headers: Mapping[str, str],
    key: Secret | None,
    signal: AbortSignal | None,
) -> Iterator[StreamChunk]:
    """One ``POST <base_url>/chat/completions`` streamed as protocol chunks.

    ``key`` travels as ``authorization: Bearer`` (``None``: no credentials, for
    local servers); ``headers`` come from ``stream_headers``. A generator: nothing
    is sent before the first ``next()``.

    Raises:
        LlmError: ``INVALID_REQUEST`` for a body that is not JSON, and whatever
            ``dsh_llm.transport.read_loop.read_stream`` raises.
    """
    call = StreamingCall(
        session,
        url=chat_completions_url(base_url),
        body=encode_body(body, provider=profile.provider),
        headers=headers,
        auth=NoAuth() if key is None else BearerAuth(key),
        provider=profile.provider,
        endpoint=base_url,
        signal=signal,
        idle_timeout_ms=settings.stream_idle_timeout_ms,
        keepalive_timeout_ms=settings.stream_keepalive_timeout_ms,
        total_timeout_ms=settings.total_timeout_ms,
    )
    translator = ChatCompletionsTranslator(
        profile, empty_response_as_stop=settings.empty_response_as_stop
    )
    decoder = SseDecoder(terminal_data=DONE, provider=profile.provider)
    yield from read_stream(call, decoder, translator)
