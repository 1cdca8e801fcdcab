"""``VertexAdapter``: Gemini and Claude models on Google Cloud Vertex AI.

- One route, ``vertex``, displayed as ``Vertex AI``; each call goes to its
  model's publisher: Gemini over ``streamGenerateContent`` (the Gemini wire),
  Claude over ``streamRawPredict`` (the Anthropic Messages wire); an advisory
  catalog of both; ``resolve_model`` and ``list_models`` need no I/O.
- Built like every family's adapter (``dsh_llm.adapters``): the constructor's
  keywords are ``VertexConfig``'s fields, ``from_config`` takes one.
- Auth per request: an OAuth2 access token (``api_key``, else
  ``GOOGLE_OAUTH_ACCESS_TOKEN``) as a bearer token, else Application Default
  Credentials through google-auth (``pip install 'dsh-llm[vertex]'``),
  refreshed before they expire. No token appears in a message or a ``repr``.
- The family's parts: ``family``, ``request`` (URLs, Claude's body on Vertex),
  ``catalog`` (publishers), ``errors``, ``auth`` (google-auth); the bodies and
  translators are the Gemini and Anthropic families'. User guide:
  ``docs/vertex.md``.
"""

from __future__ import annotations

from dsh_llm.adapters._wire.adapter import WireAdapter
from dsh_llm.adapters.vertex.catalog import DEFAULT_MODELS
from dsh_llm.adapters.vertex.catalog import VertexModel
from dsh_llm.adapters.vertex.family import DEFAULT_API_KEY_ENV
from dsh_llm.adapters.vertex.family import FAMILY
from dsh_llm.adapters.vertex.family import PROVIDER_ROUTE
from dsh_llm.adapters.vertex.family import VertexConfig

__all__ = [
    "DEFAULT_API_KEY_ENV",
    "DEFAULT_MODELS",
    "FAMILY",
    "PROVIDER_ROUTE",
    "VertexAdapter",
    "VertexConfig",
    "VertexModel",
]


class VertexAdapter(WireAdapter[VertexConfig]):
    """Streams Gemini and Claude models on Vertex AI (see the module
    docstring); ``WireAdapter``'s arguments, the keywords building a
    ``VertexConfig``.

    Args:
        api_key: An OAuth2 access token, sent as a bearer token (then
            ``project`` must be set); ``None`` reads ``api_key_env`` at each
            request, and uses the Google credentials when it is unset
            (google-auth reads the process environment itself, not
            ``environ``).

    Raises:
        AdapterConfigError: for an invalid option, or a token without a project.
    """

    family = FAMILY
