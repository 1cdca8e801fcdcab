"""``AnthropicAdapter``: Claude over the Anthropic Messages API.

- One route, ``anthropic``, displayed as ``Anthropic``; an advisory catalog of
  the current Claude models; ``resolve_model`` needs no I/O.
- ``AnthropicConfig`` is its one validated configuration (the constructor's
  keywords build it; ``from_config`` takes one); a bad value raises
  ``dsh_llm.adapters.AdapterConfigError`` keyed by its config key.
- The key is read per request (``api_key``, else ``ANTHROPIC_API_KEY``) and
  never appears in a message or a ``repr``.
- The family's parts: ``family`` (config, endpoint, request hook, ``FAMILY``),
  ``request`` (pure builder), ``translate`` (pure translator), ``errors``,
  ``catalog``. User guide: ``docs/anthropic.md``.
"""

from __future__ import annotations

from dsh_llm.adapters._wire.adapter import WireAdapter
from dsh_llm.adapters.anthropic.family import DEFAULT_MODELS
from dsh_llm.adapters.anthropic.family import FAMILY
from dsh_llm.adapters.anthropic.family import PROVIDER_ROUTE
from dsh_llm.adapters.anthropic.family import AnthropicConfig

__all__ = [
    "DEFAULT_MODELS",
    "FAMILY",
    "PROVIDER_ROUTE",
    "AnthropicAdapter",
    "AnthropicConfig",
]


class AnthropicAdapter(WireAdapter[AnthropicConfig]):
    """Streams Claude over the Anthropic Messages API (see the module docstring).

    The keyword arguments are ``AnthropicConfig``'s fields (``base_url``,
    ``api_key_env``, ``anthropic_version``, ``beta``, ``reasoning_effort``,
    ``max_tokens``, ``default_context_window``, ``models``, the three stream
    timeouts, ``retry_policy``, ``pool_maxsize``, ``empty_response_as_stop``)
    and build one; ``AnthropicAdapter.from_config(config)`` takes one built
    elsewhere.

    Args:
        api_key: The key (``str`` or ``Secret``); ``None`` reads ``api_key_env``
            from the environment at each request.
        environ: Where variables are read (default ``os.environ``, live).
        **options: ``AnthropicConfig`` fields.
    """

    family = FAMILY
