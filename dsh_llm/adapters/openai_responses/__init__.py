"""``OpenAIResponsesAdapter``: ``POST <base_url>/responses`` streamed, for the
servers that speak the Responses API (OpenAI, vLLM, Ollama, LM Studio,
OpenRouter, llama.cpp's llama-server).

- ``OpenAIResponsesConfig`` is its one validated configuration (the
  constructor's ``base_url`` and keywords build it; ``from_config`` takes one);
  a bad value raises ``dsh_llm.adapters.AdapterConfigError`` keyed by its
  config key, its message starting ``llm-openai-responses: ``.
- ``server`` names the server profile (``openai``, ``vllm``, ``ollama``,
  ``lmstudio``, ``openrouter``, ``llamacpp``); unset, it is guessed from the
  base URL, else ``openai``. ``adapter.profile`` is the profile in force.
- No key by default; ``api_key`` or ``api_key_env`` (read at each request),
  never both, sent as ``authorization: Bearer``; never in a message or ``repr``.
- The family's parts: ``family`` (config, endpoint, request hook, ``FAMILY``),
  ``profiles``, ``request`` (pure builder), ``translate`` (pure translator),
  ``finish``, ``errors``. User guide: ``docs/openai-responses.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dsh_llm.adapters._wire.adapter import WireAdapter
from dsh_llm.adapters._wire.config import config_from_options
from dsh_llm.adapters.openai_responses.family import DEFAULT_BASE_URL
from dsh_llm.adapters.openai_responses.family import FAMILY
from dsh_llm.adapters.openai_responses.family import SERVERS
from dsh_llm.adapters.openai_responses.family import OpenAIResponsesConfig
from dsh_llm.adapters.openai_responses.profiles import ResponsesProfile
from dsh_llm.credentials import Secret

__all__ = [
    "DEFAULT_BASE_URL",
    "FAMILY",
    "SERVERS",
    "OpenAIResponsesAdapter",
    "OpenAIResponsesConfig",
    "ResponsesProfile",
]


class OpenAIResponsesAdapter(WireAdapter[OpenAIResponsesConfig]):
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
        AdapterConfigError: for an invalid option (a ``ValueError``), or a key
            given both ways (keyed ``apiKey``).
        TypeError: for a keyword that is not an ``OpenAIResponsesConfig`` field.
        LlmError: ``INVALID_CREDENTIAL`` for an explicit key no header can carry.
    """

    family = FAMILY

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

    @property
    def profile(self) -> ResponsesProfile:
        """The server profile in force (the endpoint's)."""
        profile: ResponsesProfile = self.endpoint.profile
        return profile
