"""``OpenAIResponsesAdapter``: ``POST <base_url>/responses`` streamed, for the
servers that speak the Responses API (OpenAI, vLLM, Ollama, LM Studio,
OpenRouter, llama.cpp's llama-server).

- Built like every family's adapter (``dsh_llm.adapters``): the constructor's
  ``base_url`` and keywords build an ``OpenAIResponsesConfig``, ``from_config``
  takes one; a bad value's message starts ``llm-openai-responses: ``.
- ``server`` names the server profile (``openai``, ``vllm``, ``ollama``,
  ``lmstudio``, ``openrouter``, ``llamacpp``); unset, it is guessed from the
  base URL, else ``openai``. ``adapter.profile`` is the profile in force.
- No key by default; ``api_key`` or ``api_key_env`` (read at each request),
  never both, sent as ``authorization: Bearer``; never in a message or ``repr``.
- Beyond every family's parts: ``profiles``, ``finish``, ``hosted`` (hosted
  tools); no ``catalog``. User guide: ``docs/openai-responses.md``.
"""

from __future__ import annotations

from dsh_llm.adapters._wire.adapter import ServerAdapter
from dsh_llm.adapters.openai_responses.family import DEFAULT_BASE_URL
from dsh_llm.adapters.openai_responses.family import FAMILY
from dsh_llm.adapters.openai_responses.family import SERVERS
from dsh_llm.adapters.openai_responses.family import OpenAIResponsesConfig
from dsh_llm.adapters.openai_responses.profiles import ResponsesProfile

__all__ = [
    "DEFAULT_BASE_URL",
    "FAMILY",
    "SERVERS",
    "OpenAIResponsesAdapter",
    "OpenAIResponsesConfig",
    "ResponsesProfile",
]


class OpenAIResponsesAdapter(ServerAdapter[OpenAIResponsesConfig]):
    """Streams ``POST <base_url>/responses`` (see the module docstring);
    ``ServerAdapter``'s arguments, the keywords building an
    ``OpenAIResponsesConfig`` (``base_url`` by default ``DEFAULT_BASE_URL``,
    ``https://api.openai.com/v1``).

    Raises:
        AdapterConfigError: also for a key given both ways (keyed ``apiKey``).
    """

    family = FAMILY

    @property
    def profile(self) -> ResponsesProfile:
        """The server profile in force (the endpoint's)."""
        profile: ResponsesProfile = self.endpoint.profile
        return profile
