"""Which model an OpenAI-compatible server serves: ``GET <base_url>/models``.

This module owns ``server_model``, used when ``dsh-llm chat --base-url URL``
is given without ``--model``, and ``server_models`` (``dsh-llm models
--base-url URL``). Contracts callers may rely on:

- One request, ``GET <base_url>/models`` (the OpenAI list shape ``{"data":
  [{"id": ...}, ...]}``), with the attribution ``user-agent`` and the key
  ``api_key_env`` names, if any, as ``authorization: Bearer``, through
  ``dsh_llm.transport.fetch``: 10 s at most as a whole, the body capped
  (``MAX_BODY_BYTES``).
- Exactly one model: its id. Several: ``DiscoveryError`` listing them (so the
  user picks one with ``--model``). None, an error status, a body of another
  shape, or no answer: ``DiscoveryError`` saying to pass ``--model``
  (``dsh_llm.cli.targets`` reports it as a usage error, exit 2).
- Messages never show the key, and show the URL without its credentials.
- ``server_models`` is the same request and checks, and returns every id
  listed (``dsh-llm models --base-url URL``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from typing import Final

MODELS_TIMEOUT_S: Final = 10.0
"""How long the model list may take, from the request to its last byte."""


class DiscoveryError(Exception):
    """The server's model cannot be chosen; the message says what to pass."""


def _model_ids(payload: Any) -> list[str] | None:
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list):
        return None
    ids = [item.get("id") for item in data if isinstance(item, dict)]
    return [i for i in ids if isinstance(i, str) and i]


def server_models(
    base_url: str, *, api_key_env: str | None, environ: Mapping[str, str]
) -> list[str]:
    """The ids of the models the server at ``base_url`` lists (at least one).

    Raises:
        DiscoveryError: see the module docstring.
    """
    from dsh_llm.credentials import Secret
    from dsh_llm.errors import LlmError
    from dsh_llm.transport.call import redact_url
    from dsh_llm.transport.fetch import fetch
    from dsh_llm.transport.session import BearerAuth
    from dsh_llm.transport.session import create_session

    url = base_url.rstrip("/") + "/models"
    shown = redact_url(url)
    key = environ.get(api_key_env) if api_key_env else None
    failure: LlmError | None = None
    with create_session() as session:
        try:
            fetched = fetch(
                session,
                url,
                provider="Server",
                endpoint=url,
                timeout_ms=MODELS_TIMEOUT_S * 1000,
                auth=BearerAuth(Secret(key)) if key else None,
            )
        except LlmError as exc:
            failure = exc
    if failure is not None and failure.status is not None:
        raise DiscoveryError(
            f"{shown} answered HTTP {failure.status}; pass --model NAME"
        )
    if failure is not None:
        raise DiscoveryError(
            f"cannot list the server's models ({failure.message}); pass --model NAME"
        )
    try:
        payload = json.loads(fetched.body)
    except (ValueError, RecursionError):
        payload = None
    ids = _model_ids(payload)
    if ids is None:
        raise DiscoveryError(f"{shown} did not answer a model list; pass --model NAME")
    if not ids:
        raise DiscoveryError(f"{shown} lists no models; pass --model NAME")
    return ids


def server_model(
    base_url: str, *, api_key_env: str | None, environ: Mapping[str, str]
) -> str:
    """The id of the one model the server at ``base_url`` lists.

    Raises:
        DiscoveryError: see the module docstring.
    """
    ids = server_models(base_url, api_key_env=api_key_env, environ=environ)
    if len(ids) > 1:
        listed = "\n".join(f"  {model}" for model in ids)
        raise DiscoveryError(
            f"the server serves several models; choose one with --model NAME:\n{listed}"
        )
    return ids[0]
