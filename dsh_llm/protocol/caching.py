"""Prompt caching: where a request's reusable prefix ends.

- ``CacheBreakpoint`` on a message (``Message.cache``) ends a prefix the provider
  may cache: everything the request sends up to and including that message (the
  tools, the system prompt, the earlier messages) is the cached prefix.
- ``ttl`` asks for a lifetime (``"5m"``, ``"1h"`` where the provider offers them);
  ``None`` is the provider's default. The adapter checks the value, not this class.
- A wire without breakpoints refuses a request holding one (``UNSUPPORTED_OPTION``);
  ``GenerateOptions.cache_key`` and ``GenerateOptions.cached_content`` are the
  other two caching controls. Which wire takes what: ``docs/caching.md``.
"""

from __future__ import annotations

import attrs

from dsh_llm.protocol import checks as c

__all__ = ["CacheBreakpoint"]


@attrs.frozen(kw_only=True)
class CacheBreakpoint:
    """The end of a cacheable prefix (see the module docstring)."""

    ttl: str | None = attrs.field(default=None, validator=c.optional(c.non_empty_str))
    """The lifetime asked for (``"5m"``, ``"1h"``), or ``None`` for the
    provider's default."""
