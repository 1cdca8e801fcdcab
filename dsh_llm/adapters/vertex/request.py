"""Vertex AI requests: the endpoint of a model, and Claude's body on Vertex.

Pure functions; the bodies themselves come from the Gemini and Anthropic
builders (``dsh_llm.adapters.gemini.request``, ``dsh_llm.adapters.anthropic.request``).

- ``public_base_url(location)``: ``https://{location}-aiplatform.googleapis.com``,
  and ``https://aiplatform.googleapis.com`` for the ``global`` location.
- ``model_url(base, project=, location=, publisher=, model=)``:
  ``{base}/v1/projects/{project}/locations/{location}/publishers/{publisher}/models/{model}``
  then ``:streamGenerateContent?alt=sse`` (``google``) or ``:streamRawPredict``
  (``anthropic``); the project and model percent-quoted (a ``/``, ``?`` or ``#``
  cannot change the path; a model's ``@version`` stays as it is).
- ``vertex_messages_body(body)``: a Messages body as Vertex takes it: without
  ``model`` (the URL names it) and with ``anthropic_version:
  "vertex-2023-10-16"`` first (an ``extra_body`` that sets it wins).
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from typing import Any
from typing import Final

from dsh_llm.adapters._wire.config import endpoint_url
from dsh_llm.adapters.vertex.catalog import ANTHROPIC
from dsh_llm.adapters.vertex.catalog import Publisher

API_PATH: Final = "/v1"
"""The API version path appended to the root (a root may not already end in it)."""
GLOBAL_LOCATION: Final = "global"
"""The location served by the global endpoint."""
VERTEX_ANTHROPIC_VERSION: Final = "vertex-2023-10-16"
"""The ``anthropic_version`` a Claude body on Vertex AI carries."""
GEMINI_METHOD: Final = "streamGenerateContent"
"""The streaming method of a Gemini model."""
CLAUDE_METHOD: Final = "streamRawPredict"
"""The streaming method of a Claude model."""


def public_base_url(location: str) -> str:
    """The Vertex AI API root of ``location``."""
    if location == GLOBAL_LOCATION:
        return "https://aiplatform.googleapis.com"
    return f"https://{location}-aiplatform.googleapis.com"


def model_url(
    base_url: str, *, project: str, location: str, publisher: Publisher, model: str
) -> str:
    """The streaming endpoint of ``model`` (see the module docstring)."""
    path = (
        f"{API_PATH}/projects/{urllib.parse.quote(project, safe='')}"
        f"/locations/{urllib.parse.quote(location, safe='')}"
        f"/publishers/{publisher}/models/{urllib.parse.quote(model, safe='@')}"
    )
    if publisher == ANTHROPIC:
        return endpoint_url(base_url, f"{path}:{CLAUDE_METHOD}")
    url = endpoint_url(base_url, f"{path}:{GEMINI_METHOD}")
    return url + ("&" if urllib.parse.urlsplit(url).query else "?") + "alt=sse"


def vertex_messages_body(body: Mapping[str, Any]) -> dict[str, Any]:
    """``body`` (from ``build_messages_request``) as Vertex AI takes it."""
    out: dict[str, Any] = {"anthropic_version": VERTEX_ANTHROPIC_VERSION}
    out.update((key, value) for key, value in body.items() if key != "model")
    return out
