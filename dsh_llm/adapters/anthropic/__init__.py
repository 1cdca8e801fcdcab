"""``AnthropicAdapter``: Claude over the Anthropic Messages API.

- One route, ``anthropic``, displayed as ``Anthropic``; an advisory catalog of
  the current Claude models; ``resolve_model`` needs no I/O.
- Built like every family's adapter (``dsh_llm.adapters``): the constructor's
  keywords are ``AnthropicConfig``'s fields, ``from_config`` takes one.
- The key is read per request (``api_key``, else ``ANTHROPIC_API_KEY``) and
  never appears in a message or a ``repr``.
- User guide: ``docs/anthropic.md``.
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
    """Streams Claude over the Anthropic Messages API (see the module docstring);
    ``WireAdapter``'s arguments, the keywords building an ``AnthropicConfig``."""

    family = FAMILY
