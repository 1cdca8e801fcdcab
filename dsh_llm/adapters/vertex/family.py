"""The Vertex AI family value: config, endpoint, request and model facts.

- ``VertexConfig`` is the one validated configuration (``package``
  ``llm-vertex``); the catalog is advisory (any model id is sent as is) and by
  default lists the Gemini and Claude models (``catalog.DEFAULT_MODELS``).
- Each call goes to its model's publisher (``catalog.publisher_for``): a
  ``claude*`` id (or an entry saying ``publisher: anthropic``) to
  ``publishers/anthropic/...:streamRawPredict`` with the Anthropic Messages
  body (no ``model``, ``anthropic_version: vertex-2023-10-16``) and translator;
  any other to ``publishers/google/...:streamGenerateContent?alt=sse`` with the
  Gemini body and translator.
- The location is the config's, else ``GOOGLE_CLOUD_LOCATION``, else
  ``CLOUD_ML_REGION``, else ``global``; the API root is ``base_url``, else the
  location's endpoint. The project is the config's, else
  ``GOOGLE_CLOUD_PROJECT``, else ``ANTHROPIC_VERTEX_PROJECT_ID``, else (read at
  the first call) the one the credentials name.
- Auth, per request: an access token (the explicit ``api_key``, else the
  variable ``api_key_env`` names, default ``GOOGLE_OAUTH_ACCESS_TOKEN``) as a
  bearer token; else Application Default Credentials through google-auth
  (``auth``), refreshed before they expire.
- Per call, before any I/O: the body and its refusals, the ``extra_headers``
  check, then the credential and the project. User guide: ``docs/vertex.md``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from typing import Final

import attrs

from dsh_llm.adapter import LlmResolvedModelInfo
from dsh_llm.adapters._wire.config import AdapterConfig
from dsh_llm.adapters._wire.config import AdapterConfigError
from dsh_llm.adapters._wire.config import CatalogLookup
from dsh_llm.adapters._wire.config import RootRule
from dsh_llm.adapters._wire.config import adapter_field_order
from dsh_llm.adapters._wire.config import api_key_env_field
from dsh_llm.adapters._wire.config import model_catalog
from dsh_llm.adapters._wire.config import reasoning_effort_field
from dsh_llm.adapters._wire.extras import request_headers
from dsh_llm.adapters._wire.family import Endpoint
from dsh_llm.adapters._wire.family import WireCall
from dsh_llm.adapters._wire.family import WireFamily
from dsh_llm.adapters._wire.family import WireRequest
from dsh_llm.adapters._wire.family import resolved_model_info
from dsh_llm.adapters.anthropic import catalog as claude_catalog
from dsh_llm.adapters.anthropic.family import (
    DEFAULT_CONTEXT_WINDOW as DEFAULT_CLAUDE_CONTEXT_WINDOW,
)
from dsh_llm.adapters.anthropic.family import (
    DEFAULT_MAX_TOKENS as DEFAULT_CLAUDE_MAX_TOKENS,
)
from dsh_llm.adapters.anthropic.family import REASONING_EFFORTS as CLAUDE_EFFORTS
from dsh_llm.adapters.anthropic.request import build_messages_request
from dsh_llm.adapters.anthropic.translate import MessagesTranslator
from dsh_llm.adapters.gemini.catalog import EFFORT_BUDGETS
from dsh_llm.adapters.gemini.catalog import EFFORT_LEVELS
from dsh_llm.adapters.gemini.catalog import model_for
from dsh_llm.adapters.gemini.catalog import reasoning_info
from dsh_llm.adapters.gemini.family import gemini_translator
from dsh_llm.adapters.gemini.family import generate_body
from dsh_llm.adapters.vertex.auth import GoogleCredentials
from dsh_llm.adapters.vertex.catalog import ANTHROPIC
from dsh_llm.adapters.vertex.catalog import DEFAULT_MODELS
from dsh_llm.adapters.vertex.catalog import VertexModel
from dsh_llm.adapters.vertex.catalog import claude_entry
from dsh_llm.adapters.vertex.catalog import claude_id
from dsh_llm.adapters.vertex.catalog import configured_defaults
from dsh_llm.adapters.vertex.catalog import publisher_for
from dsh_llm.adapters.vertex.errors import http_error
from dsh_llm.adapters.vertex.request import API_PATH
from dsh_llm.adapters.vertex.request import GLOBAL_LOCATION
from dsh_llm.adapters.vertex.request import model_url
from dsh_llm.adapters.vertex.request import public_base_url
from dsh_llm.adapters.vertex.request import vertex_messages_body
from dsh_llm.config import RAW_METADATA
from dsh_llm.config import check_non_empty_str
from dsh_llm.config import check_optional_match
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.transport.read_loop import EventTranslator
from dsh_llm.transport.session import BearerAuth
from dsh_llm.transport.session import stream_headers

PROVIDER_ROUTE: Final = "vertex"
"""The one route this adapter serves."""
DISPLAY_NAME: Final = "Vertex AI"
"""The route's display name (also the provider named in messages)."""
PACKAGE: Final = "llm-vertex"
"""The plugin's name, named in config errors and credential messages."""
DEFAULT_API_KEY_ENV: Final = "GOOGLE_OAUTH_ACCESS_TOKEN"
"""Environment variable an OAuth2 access token may be given in; when it is set,
the token is sent instead of Application Default Credentials."""
PROJECT_ENVS: Final = ("GOOGLE_CLOUD_PROJECT", "ANTHROPIC_VERTEX_PROJECT_ID")
"""Environment variables the project is read from, in order."""
LOCATION_ENVS: Final = ("GOOGLE_CLOUD_LOCATION", "CLOUD_ML_REGION")
"""Environment variables the location is read from, in order."""
DEFAULT_LOCATION: Final = GLOBAL_LOCATION
"""The location when none is configured (the global endpoint)."""
REASONING_EFFORTS: Final = tuple(
    dict.fromkeys((*EFFORT_LEVELS, *EFFORT_BUDGETS, *CLAUDE_EFFORTS))
)
"""Every effort some model takes (a configured default must be one; it is sent
to the models that offer it)."""

ROOT_RULE: Final = RootRule(package=PACKAGE, endpoint=API_PATH)
"""How a configured API root is checked: it must not end in ``/v1``."""

_LOCATION: Final = re.compile(r"[a-z]+(?:-[a-z0-9]+)*")
_PROJECT: Final = re.compile(r"[^\s/]+")
_LOCATION_DETAIL: Final = "must be a Vertex AI location (us-central1, global)"


def _models(value: object) -> tuple[VertexModel, ...]:
    return model_catalog(
        value,
        VertexModel,
        package=PACKAGE,
        defaults=configured_defaults,
        default=DEFAULT_MODELS,
    )


_check_location: Final = check_optional_match(_LOCATION, _LOCATION_DETAIL)
_check_project: Final = check_optional_match(
    _PROJECT, "must be a Google Cloud project id (no spaces or /)"
)


@attrs.frozen(kw_only=True, field_transformer=adapter_field_order)
class VertexConfig(AdapterConfig, CatalogLookup[VertexModel]):
    """The one ``VertexAdapter`` configuration (``AdapterConfig``; plugin
    ``llm-vertex``, keys ``project``, ``location``, ``credentialsFile``...)."""

    package = PACKAGE

    project: str | None = attrs.field(default=None, validator=_check_project)
    """The Google Cloud project (default: ``GOOGLE_CLOUD_PROJECT``,
    ``ANTHROPIC_VERTEX_PROJECT_ID``, then the credentials')."""
    location: str | None = attrs.field(default=None, validator=_check_location)
    """The location (default: ``GOOGLE_CLOUD_LOCATION``, ``CLOUD_ML_REGION``,
    then ``global``)."""
    credentials_file: str | None = attrs.field(
        default=None, validator=attrs.validators.optional(check_non_empty_str)
    )
    """A Google credentials file (a service account key, ``gcloud``'s
    application default credentials...) to use instead of Application Default
    Credentials."""
    api_key_env: str = api_key_env_field(DEFAULT_API_KEY_ENV)
    """Environment variable holding an OAuth2 access token; when it is set, the
    token is sent instead of the Google credentials'."""
    base_url: str | None = ROOT_RULE.field()
    """API root (default: the location's endpoint); must not end in ``/v1``."""
    reasoning_effort: str | None = reasoning_effort_field(REASONING_EFFORTS)
    """Default effort when a request names none, sent to the models that offer
    it (the others use their own default)."""
    models: tuple[VertexModel, ...] = attrs.field(
        default=None, converter=_models, metadata={RAW_METADATA: True}
    )
    """The advertised catalog (``None``: ``DEFAULT_MODELS``; empty: none). An
    entry is a ``VertexModel``, a model id or its config mapping
    (``publisher`` and, for Gemini, ``thinking``, ``efforts``, ``defaultEffort``
    beside the ``CatalogModel`` keys); a configured Claude entry reads images by
    default, a Gemini one is text only unless it says."""


@attrs.frozen(kw_only=True)
class VertexProfile:
    """What a Vertex AI adapter fixes when it is built."""

    project: str | None
    """The project from the config or the environment (``None``: the
    credentials', read at the first call)."""
    location: str
    """The location in force."""
    credentials: GoogleCredentials
    """The Google credentials (used when no access token is given)."""


def _from_environ(
    environ: Mapping[str, str], names: tuple[str, ...], pattern: re.Pattern[str]
) -> str | None:
    for name in names:
        value = environ.get(name)
        if value:
            if not pattern.fullmatch(value):
                key = "location" if names is LOCATION_ENVS else "project"
                detail = (
                    _LOCATION_DETAIL
                    if names is LOCATION_ENVS
                    else "must be a Google Cloud project id"
                )
                raise AdapterConfigError(
                    key, f"{detail} (read from {name})", package=PACKAGE
                )
            return value
    return None


def resolve_location(config: VertexConfig, environ: Mapping[str, str]) -> str:
    """The location in force (see the module docstring).

    Raises:
        AdapterConfigError: keyed ``location`` for an environment value that is
            not a location.
    """
    if config.location is not None:
        return config.location
    return _from_environ(environ, LOCATION_ENVS, _LOCATION) or DEFAULT_LOCATION


def resolve_project(config: VertexConfig, environ: Mapping[str, str]) -> str | None:
    """The project the config or the environment names (``None``: neither).

    Raises:
        AdapterConfigError: keyed ``project`` for an environment value that is
            not a project id.
    """
    if config.project is not None:
        return config.project
    return _from_environ(environ, PROJECT_ENVS, _PROJECT)


def _endpoint(
    config: VertexConfig, *, explicit_key: bool, environ: Mapping[str, str]
) -> Endpoint[VertexProfile]:
    location = resolve_location(config, environ)
    project = resolve_project(config, environ)
    if project is None and explicit_key:
        raise AdapterConfigError(
            "project",
            "is not set: set project, or export GOOGLE_CLOUD_PROJECT (an access "
            "token names no project)",
            package=PACKAGE,
        )
    base = (
        public_base_url(location)
        if config.base_url is None
        else ROOT_RULE.root(config.base_url)
    )
    credentials = GoogleCredentials(
        config.credentials_file, package=PACKAGE, token_env=config.api_key_env
    )
    return Endpoint(
        base_url=base,
        display_name=DISPLAY_NAME,
        profile=VertexProfile(
            project=project, location=location, credentials=credentials
        ),
    )


# --- model facts ------------------------------------------------------------------


def _claude_default_effort(config: VertexConfig, model: str) -> str | None:
    profile = claude_catalog.thinking_profile(claude_id(model))
    effort = config.reasoning_effort
    return effort if effort in profile.efforts else None


def _claude_max_tokens(entry: VertexModel | None) -> int:
    return (entry.max_tokens if entry else None) or DEFAULT_CLAUDE_MAX_TOKENS


def model_info(
    config: VertexConfig,
    endpoint: Endpoint[VertexProfile],
    provider: str,
    model: str,
) -> LlmResolvedModelInfo:
    """``resolve_model``'s answer, by publisher: a Gemini model's window, cap
    and efforts (``gemini.catalog.model_for``; none listed: no reasoning info);
    a Claude model's (its entry,
    else the Anthropic catalog's, else 200,000 and 8,192) and its efforts
    (``anthropic.catalog.thinking_profile``)."""
    if publisher_for(model, config.models) == ANTHROPIC:
        entry = claude_entry(model, config.models)
        return resolved_model_info(
            provider,
            model,
            entry,
            context_window=DEFAULT_CLAUDE_CONTEXT_WINDOW,
            default_max_tokens=DEFAULT_CLAUDE_MAX_TOKENS,
            reasoning=claude_catalog.reasoning_info(
                claude_catalog.thinking_profile(claude_id(model)),
                config.reasoning_effort,
            ),
        )
    facts = model_for(model, config.models)
    reasoning = (
        reasoning_info(facts, config.reasoning_effort) if facts.efforts else None
    )
    return resolved_model_info(
        provider,
        model,
        config.model(model),
        context_window=facts.context_window,
        default_max_tokens=facts.max_tokens,
        reasoning=reasoning,
    )


# --- one call ---------------------------------------------------------------------


def _claude_body(call: WireCall[VertexConfig, VertexProfile]) -> dict[str, Any]:
    options, config = call.options, call.config
    entry = claude_entry(options.model, config.models)
    call.check_images(entry)
    body = build_messages_request(
        options,
        model_max_tokens=_claude_max_tokens(entry),
        thinking=claude_catalog.thinking_profile(claude_id(options.model)),
        default_effort=_claude_default_effort(config, options.model),
        attachments=call.attachments,
        provider=call.provider,
    )
    return vertex_messages_body(body)


def _project(profile: VertexProfile, *, from_credentials: bool) -> str:
    project = profile.project
    if project is None and from_credentials:
        project = profile.credentials.project()
    if project is None:
        where = "the Google credentials name none"
        if not from_credentials:
            where = "an access token names none"
        raise LlmError(
            f"{PACKAGE}: no Google Cloud project ({where}); set project, or "
            "export GOOGLE_CLOUD_PROJECT",
            ErrorCode.MISSING_CREDENTIAL,
        )
    return project


def _request(call: WireCall[VertexConfig, VertexProfile]) -> WireRequest:
    options, config = call.options, call.config
    profile = call.endpoint.profile
    publisher = publisher_for(options.model, config.models)
    body = _claude_body(call) if publisher == ANTHROPIC else generate_body(call)
    headers = request_headers(
        stream_headers(), options, provider=call.provider, taken=("authorization",)
    )
    key = call.optional_key()
    auth = BearerAuth(key) if key is not None else profile.credentials.auth()
    project = _project(profile, from_credentials=key is None)
    return WireRequest(
        url=model_url(
            call.endpoint.base_url,
            project=project,
            location=profile.location,
            publisher=publisher,
            model=options.model,
        ),
        body=body,
        headers=headers,
        auth=auth,
    )


def _translator(call: WireCall[VertexConfig, VertexProfile]) -> EventTranslator[Any]:
    if publisher_for(call.options.model, call.config.models) == ANTHROPIC:
        return MessagesTranslator(
            provider=call.provider,
            empty_response_as_stop=call.config.empty_response_as_stop,
        )
    return gemini_translator(call)


def _describe(config: VertexConfig, endpoint: Endpoint[VertexProfile]) -> str:
    profile = endpoint.profile
    project = "" if profile.project is None else f", project={profile.project!r}"
    return f"{project}, location={profile.location!r}"


FAMILY: Final = WireFamily(
    name="vertex-ai",
    config_class=VertexConfig,
    endpoint=_endpoint,
    request=_request,
    translator=_translator,
    model_info=model_info,
    classify_error=http_error,
    describe=_describe,
    route=PROVIDER_ROUTE,
)
"""The Vertex AI wire family (Gemini and Claude publishers)."""
