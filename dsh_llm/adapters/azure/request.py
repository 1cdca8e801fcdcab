"""Azure OpenAI's request side: where a call goes, and its body (pure).

- Two URL layouts. ``v1`` (no ``api-version``): ``<resource>/openai/v1`` plus
  ``/chat/completions`` or ``/responses``, the deployment named by the body's
  ``model``. ``deployments`` (an ``api-version``):
  ``<resource>/openai/deployments/<deployment>/chat/completions`` and
  ``<resource>/openai/responses`` (Azure has no deployment path for Responses:
  the body's ``model`` names it), each with ``?api-version=``.
- ``api_root(endpoint, api_version)`` checks the endpoint (a resource endpoint,
  or the v1 root ``.../openai/v1``) and gives the API root the adapter keeps:
  ``.../openai/v1``, or ``.../openai?api-version=<v>``; a query string of the
  endpoint is kept, its own ``api-version`` counts as the version.
- ``request_url(root, wire, deployment)``: the call's URL under that root (the
  deployment percent-encoded in a path).
- ``request_body``: the chat-completions body (``dsh_llm.adapters.chat``) or the
  Responses body (``dsh_llm.adapters.openai_responses``) with the deployment as
  ``model``; nothing Azure-specific is added.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping
from typing import Any
from typing import Final
from typing import Literal

import attrs

from dsh_llm.adapters._wire.config import AdapterConfigError
from dsh_llm.adapters._wire.config import api_root_url
from dsh_llm.adapters._wire.config import endpoint_url
from dsh_llm.adapters._wire.extras import AttachmentReader
from dsh_llm.adapters.chat.request import CHAT_COMPLETIONS_PATH
from dsh_llm.adapters.chat.request import WireProfile
from dsh_llm.adapters.chat.request import build_body
from dsh_llm.adapters.openai_responses.profiles import ResponsesProfile
from dsh_llm.adapters.openai_responses.request import build_responses_request
from dsh_llm.protocol import GenerateOptions

Wire = Literal["chat", "responses"]
"""The wire a call speaks: chat completions or the Responses API."""
WIRES: Final = ("chat", "responses")
"""Every ``Wire``."""

API_VERSION_PARAM: Final = "api-version"
"""The query parameter that selects a dated API version."""
OPENAI_PATH: Final = "/openai"
"""Where every Azure OpenAI path starts under a resource endpoint."""
V1_PATH: Final = "/openai/v1"
"""The v1 API's root under a resource endpoint."""
RESPONSES_PATH: Final = "/responses"
"""The Responses endpoint under either root."""

API_VERSION: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._\-]{0,63}")
"""What an ``api-version`` value looks like (``2024-10-21``,
``2025-04-01-preview``, ``preview``)."""

# A path that already names an operation: the endpoint must stop before it.
_OPERATION: Final = re.compile(
    r"/(?:chat/completions|responses|completions)$|/deployments(?:/|$)"
)


@attrs.frozen(kw_only=True)
class ApiRoot:
    """The API root an adapter keeps, and how calls are laid out under it."""

    url: str
    """``<resource>/openai/v1`` (v1), or ``<resource>/openai`` with the
    ``api-version`` query (deployments); any other query of the endpoint kept."""
    api_version: str | None
    """The ``api-version`` sent (``None``: the v1 API, which takes none)."""

    @property
    def layout(self) -> Literal["v1", "deployments"]:
        """``v1`` without an ``api-version``, else ``deployments``."""
        return "v1" if self.api_version is None else "deployments"


def resource_endpoint(resource: str) -> str:
    """The endpoint of the Azure OpenAI resource named ``resource``."""
    return f"https://{resource}.openai.azure.com"


def api_root(
    endpoint: str,
    api_version: str | None,
    *,
    package: str,
    source: str | None = None,
) -> ApiRoot:
    """The API root for ``endpoint`` and ``api_version`` (module docstring).

    Args:
        endpoint: A resource endpoint (``https://<resource>.openai.azure.com``,
            a gateway's URL), or the v1 root (``.../openai/v1``).
        api_version: The configured ``api-version`` (``None``: the endpoint's
            own ``api-version`` parameter, else the v1 API).
        package: Named in errors.
        source: Where ``endpoint`` was read when not from ``baseURL`` (an
            environment variable), named in errors.

    Raises:
        AdapterConfigError: keyed ``baseURL`` for a URL that is not an
            endpoint (never echoing it), keyed ``apiVersion`` for a version
            given twice, malformed, or given with the v1 root.
    """
    checked = api_root_url(endpoint, package=package, source=source)
    parts = urllib.parse.urlsplit(checked)
    where = "" if source is None else f" (read from {source})"
    pairs = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    in_url = [value for name, value in pairs if name == API_VERSION_PARAM]
    kept = [(name, value) for name, value in pairs if name != API_VERSION_PARAM]
    if in_url and api_version is not None:
        raise AdapterConfigError(
            "apiVersion",
            f"is also given in the endpoint's query{where}; give it once",
            package=package,
        )
    if len(in_url) > 1:
        raise AdapterConfigError(
            "baseURL", f"names api-version twice{where}", package=package
        )
    version = api_version if api_version is not None else next(iter(in_url), None)
    if version is not None and not API_VERSION.fullmatch(version):
        raise AdapterConfigError(
            "apiVersion",
            "must be an API version such as 2024-10-21 or 2025-04-01-preview"
            + ("" if api_version is not None else where),
            package=package,
        )
    path = parts.path
    if _OPERATION.search(path):
        raise AdapterConfigError(
            "baseURL",
            "must be the resource endpoint (https://<resource>.openai.azure.com) "
            f"or the v1 root (.../openai/v1), not an operation's URL{where}",
            package=package,
        )
    if path.endswith(V1_PATH):
        if version is not None:
            raise AdapterConfigError(
                "apiVersion",
                "does not apply to the v1 API (an endpoint ending in /openai/v1); "
                "drop it, or give the resource endpoint for the deployment paths",
                package=package,
            )
        root = path
    else:
        base = path.removesuffix(OPENAI_PATH)
        root = base + (V1_PATH if version is None else OPENAI_PATH)
    if version is not None:
        kept.append((API_VERSION_PARAM, version))
    query = urllib.parse.urlencode(kept, quote_via=urllib.parse.quote)
    url = urllib.parse.urlunsplit(parts._replace(path=root, query=query))
    return ApiRoot(url=url, api_version=version)


def request_url(root: ApiRoot, wire: Wire, deployment: str) -> str:
    """The URL of one call: see the module docstring."""
    if wire == "responses":
        return endpoint_url(root.url, RESPONSES_PATH)
    if root.api_version is None:
        return endpoint_url(root.url, CHAT_COMPLETIONS_PATH)
    named = urllib.parse.quote(deployment, safe="")
    return endpoint_url(root.url, f"/deployments/{named}{CHAT_COMPLETIONS_PATH}")


def request_body(
    options: GenerateOptions,
    *,
    wire: Wire,
    deployment: str,
    chat: WireProfile,
    responses: ResponsesProfile,
    max_tokens: int | None,
    extra: Mapping[str, Any] | None = None,
    attachments: AttachmentReader | None = None,
) -> dict[str, Any]:
    """The body of one call on ``wire``, with ``deployment`` as its ``model``.

    Args:
        options: The request (its ``model`` is the caller's id).
        wire: The wire spoken.
        deployment: The deployment the call goes to.
        chat: The chat-completions profile.
        responses: The Responses profile.
        max_tokens: The cap sent when ``options.max_tokens`` is unset (a catalog
            default), or ``None``.
        extra: Chat-completions keys placed after ``stream_options``
            (``reasoning_effort``).
        attachments: Where image bytes are read.

    Raises:
        LlmError: what the wire's builder refuses (``UNSUPPORTED_OPTION``,
            ``UNSUPPORTED_REASONING_EFFORT``, ``UNSUPPORTED_CONTENT``,
            ``MISSING_ATTACHMENT``).
    """
    sent = (
        options
        if deployment == options.model
        else attrs.evolve(options, model=deployment)
    )
    if wire == "responses":
        return build_responses_request(
            sent,
            profile=responses,
            max_output_tokens=max_tokens,
            attachments=attachments,
        )
    cap = options.max_tokens if options.max_tokens is not None else max_tokens
    return build_body(
        sent, profile=chat, max_tokens=cap, extra=extra, attachments=attachments
    )
