"""Provider adapters: the built-in wire families, and the kit to write one.

- ``BUILTIN_FAMILIES`` is the one table of the built-in routes, read by the CLI
  and the built-in plugins (``dsh_llm.plugins.builtin``); each row names its
  adapter class by import path, so reading the table imports no family.
- Each family is one package of the same shape (``family``: config, endpoint,
  request hook and the ``FAMILY`` value; ``request``: pure builder;
  ``translate``: pure translator; ``errors``; ``catalog``); its adapter class is
  ``WireAdapter`` with that ``family``. ``deepseek`` and ``openai_compat`` are
  the two families on the chat-completions wire (``chat``).
- The kit, for a new family or a hand-written ``stream()``: ``BlockWriter`` (the
  one writer of the protocol's rules), ``WireTranslator``, ``WireFamily``,
  ``WireAdapter``, ``AdapterConfig``, ``CatalogModel``, and the request
  helpers every builder shares (``merge_extra_body``, ``request_headers``, the
  image and cache-control checks, the tool-history readers). See
  ``docs/writing-an-adapter.md``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING
from typing import Any
from typing import Final

import attrs

from dsh_llm.protocol.lazy import lazy_exports

if TYPE_CHECKING:
    from dsh_llm.adapters._wire.adapter import WireAdapter as WireAdapter
    from dsh_llm.adapters._wire.adapter import encode_body as encode_body
    from dsh_llm.adapters._wire.config import AdapterConfig as AdapterConfig
    from dsh_llm.adapters._wire.config import AdapterConfigError as AdapterConfigError
    from dsh_llm.adapters._wire.config import BaseUrlRule as BaseUrlRule
    from dsh_llm.adapters._wire.config import CatalogLookup as CatalogLookup
    from dsh_llm.adapters._wire.config import CatalogModel as CatalogModel
    from dsh_llm.adapters._wire.config import adapter_field_order as adapter_field_order
    from dsh_llm.adapters._wire.config import api_root_url as api_root_url
    from dsh_llm.adapters._wire.config import endpoint_url as endpoint_url
    from dsh_llm.adapters._wire.config import model_catalog as model_catalog
    from dsh_llm.adapters._wire.extras import AttachmentReader as AttachmentReader
    from dsh_llm.adapters._wire.extras import breakpoint_ttl as breakpoint_ttl
    from dsh_llm.adapters._wire.extras import check_breakpoints as check_breakpoints
    from dsh_llm.adapters._wire.extras import check_image_input as check_image_input
    from dsh_llm.adapters._wire.extras import has_images as has_images
    from dsh_llm.adapters._wire.extras import image_data as image_data
    from dsh_llm.adapters._wire.extras import merge_extra_body as merge_extra_body
    from dsh_llm.adapters._wire.extras import (
        refuse_cache_controls as refuse_cache_controls,
    )
    from dsh_llm.adapters._wire.extras import (
        refuse_misplaced_images as refuse_misplaced_images,
    )
    from dsh_llm.adapters._wire.extras import request_headers as request_headers
    from dsh_llm.adapters._wire.family import Endpoint as Endpoint
    from dsh_llm.adapters._wire.family import ServerAccess as ServerAccess
    from dsh_llm.adapters._wire.family import TokenCountRequest as TokenCountRequest
    from dsh_llm.adapters._wire.family import WireCall as WireCall
    from dsh_llm.adapters._wire.family import WireFamily as WireFamily
    from dsh_llm.adapters._wire.family import WireRequest as WireRequest
    from dsh_llm.adapters._wire.family import answer_count as answer_count
    from dsh_llm.adapters._wire.family import counting_request as counting_request
    from dsh_llm.adapters._wire.family import effort_infos as effort_infos
    from dsh_llm.adapters._wire.family import resolved_model_info as resolved_model_info
    from dsh_llm.adapters._wire.family import token_count as token_count
    from dsh_llm.adapters._wire.history import answered_call as answered_call
    from dsh_llm.adapters._wire.history import arguments_object as arguments_object
    from dsh_llm.adapters._wire.history import block_entries as block_entries
    from dsh_llm.adapters._wire.history import call_index as call_index
    from dsh_llm.adapters._wire.history import record_calls as record_calls
    from dsh_llm.adapters._wire.translator import WireTranslator as WireTranslator
    from dsh_llm.adapters._wire.writer import (
        EMPTY_RESPONSE_MESSAGE as EMPTY_RESPONSE_MESSAGE,
    )
    from dsh_llm.adapters._wire.writer import Block as Block
    from dsh_llm.adapters._wire.writer import BlockWriter as BlockWriter


@attrs.frozen(kw_only=True)
class BuiltinFamily:
    """One built-in route: what the CLI and the built-in plugins need of it."""

    route: str
    """The route it serves (``anthropic``); for a family reached with
    ``--base-url`` (``wire`` set), the route that flag registers."""
    plugin: str
    """Its plugin's entry-point name (``llm-anthropic``)."""
    adapter: str
    """Its adapter class, ``module:Class``."""
    display_name: str
    """The name ``dsh-llm providers`` shows."""
    key_env: str | None
    """The variable its key is read from by default (``None``: no key)."""
    wire: str | None = None
    """For a family any server of the wire speaks: the ``--wire`` value that
    chooses it with ``--base-url`` (``chat``, ``responses``); ``None``: a
    provider's own route."""
    server_catalog: bool = False
    """Whether its model list comes from the server (only listed on request)."""
    service: str | None = None
    """For a hosted service on a shared family: the profile its adapter is built
    with (``OpenAICompatAdapter(service=...)``); such a row has no plugin of its
    own (a composition says ``service:`` in the family's entry)."""
    front_door: bool = False
    """Whether it is a cloud front door to other providers' models (Bedrock,
    Azure, Vertex AI): a bare model name its catalog shares with a provider's
    own route goes to that route; ``--provider`` chooses the front door."""

    def adapter_class(self) -> type[WireAdapter[Any]]:
        """The adapter class (imports the family's package)."""
        module, _, name = self.adapter.partition(":")
        cls: type[WireAdapter[Any]] = getattr(importlib.import_module(module), name)
        return cls


def _row(
    route: str,
    adapter: str,
    display_name: str,
    key_env: str | None,
    *,
    plugin: str | None = None,
    wire: str | None = None,
    server_catalog: bool = False,
    service: str | None = None,
    front_door: bool = False,
) -> BuiltinFamily:
    """One row of ``BUILTIN_FAMILIES``, stating only what differs: ``adapter`` is
    ``module:Class`` relative to this package (``"gemini:GeminiAdapter"``), and
    the plugin is ``llm-<route>`` unless ``plugin`` names another."""
    return BuiltinFamily(
        route=route,
        plugin=f"llm-{route}" if plugin is None else plugin,
        adapter=f"dsh_llm.adapters.{adapter}",
        display_name=display_name,
        key_env=key_env,
        wire=wire,
        server_catalog=server_catalog,
        service=service,
        front_door=front_door,
    )


BUILTIN_FAMILIES: Final = (
    _row(
        "deepseek-official",
        "deepseek:DeepSeekAdapter",
        "DeepSeek",
        "DEEPSEEK_API_KEY",
        plugin="llm-deepseek",
    ),
    _row("anthropic", "anthropic:AnthropicAdapter", "Anthropic", "ANTHROPIC_API_KEY"),
    _row("gemini", "gemini:GeminiAdapter", "Gemini", "GEMINI_API_KEY"),
    _row("ollama", "ollama:OllamaAdapter", "Ollama", None, server_catalog=True),
    *(
        _row(
            name,
            "openai_compat:OpenAICompatAdapter",
            display,
            key_env,
            plugin="llm-openai-compatible",
            service=name,
        )
        for name, display, key_env in (
            ("groq", "Groq", "GROQ_API_KEY"),
            ("mistral", "Mistral", "MISTRAL_API_KEY"),
            ("xai", "xAI", "XAI_API_KEY"),
            ("openrouter", "OpenRouter", "OPENROUTER_API_KEY"),
            ("together", "Together AI", "TOGETHER_API_KEY"),
            ("fireworks", "Fireworks AI", "FIREWORKS_API_KEY"),
            ("cerebras", "Cerebras", "CEREBRAS_API_KEY"),
            ("deepinfra", "DeepInfra", "DEEPINFRA_TOKEN"),
            ("perplexity", "Perplexity", "PERPLEXITY_API_KEY"),
        )
    ),
    *(
        _row(route, f"{route}:{adapter}", display, key_env, front_door=True)
        for route, adapter, display, key_env in (
            ("bedrock", "BedrockAdapter", "Amazon Bedrock", "AWS_BEARER_TOKEN_BEDROCK"),
            ("azure", "AzureOpenAIAdapter", "Azure OpenAI", "AZURE_OPENAI_API_KEY"),
            ("vertex", "VertexAdapter", "Vertex AI", "GOOGLE_OAUTH_ACCESS_TOKEN"),
        )
    ),
    _row(
        "openai-compatible",
        "openai_compat:OpenAICompatAdapter",
        "OpenAI-compatible",
        None,
        wire="chat",
    ),
    _row(
        "openai-responses",
        "openai_responses:OpenAIResponsesAdapter",
        "OpenAI Responses",
        None,
        wire="responses",
    ),
)
"""Every built-in route, in the order the CLI lists them: the providers' own
routes, the hosted services, the cloud front doors, the families any server
speaks."""


_KIT: Final = {
    "AdapterConfig": "config",
    "AdapterConfigError": "config",
    "BaseUrlRule": "config",
    "CatalogLookup": "config",
    "Block": "writer",
    "BlockWriter": "writer",
    "CatalogModel": "config",
    "EMPTY_RESPONSE_MESSAGE": "writer",
    "Endpoint": "family",
    "ServerAccess": "family",
    "TokenCountRequest": "family",
    "WireAdapter": "adapter",
    "WireCall": "family",
    "WireFamily": "family",
    "WireRequest": "family",
    "WireTranslator": "translator",
    "adapter_field_order": "config",
    "answer_count": "family",
    "api_root_url": "config",
    "counting_request": "family",
    "effort_infos": "family",
    "encode_body": "adapter",
    "endpoint_url": "config",
    "model_catalog": "config",
    "resolved_model_info": "family",
    "token_count": "family",
    "AttachmentReader": "extras",
    "breakpoint_ttl": "extras",
    "check_breakpoints": "extras",
    "check_image_input": "extras",
    "has_images": "extras",
    "image_data": "extras",
    "merge_extra_body": "extras",
    "refuse_cache_controls": "extras",
    "refuse_misplaced_images": "extras",
    "request_headers": "extras",
    "answered_call": "history",
    "arguments_object": "history",
    "block_entries": "history",
    "call_index": "history",
    "record_calls": "history",
}
"""Where each name of the kit lives: imported on first use, so reading the
table (the CLI's start) imports neither the kit nor ``requests``."""

__all__ = sorted({"BUILTIN_FAMILIES", "BuiltinFamily", "builtin_family", *_KIT})

__getattr__, __dir__ = lazy_exports(globals(), f"{__name__}._wire", _KIT)


def builtin_family(route: str) -> BuiltinFamily | None:
    """The table's row for ``route``, if it is a built-in one."""
    return next((row for row in BUILTIN_FAMILIES if row.route == route), None)
