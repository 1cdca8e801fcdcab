"""The runtime layer: the route registry, call preparation and the stream waterfall.

``LlmRuntime`` is the one entry point; this package splits it along its seams:

- ``registry``: the route table and the registration handles it gives out;
- ``prepare``: checking adapter metadata and resolving a call config against it;
- ``stream``: the middleware waterfall and the adapter stage (bind, rewrite,
  police: exactly one finish, last);
- ``core``: ``LlmRuntime`` itself, which ties the three together.

docs/runtime.md lists the guarantees.
"""

from __future__ import annotations

from dsh_llm.runtime.core import LlmRuntime
from dsh_llm.runtime.core import PreparedLlmCall
from dsh_llm.runtime.prepare import AdapterDefaults
from dsh_llm.runtime.registry import AdapterRegistration
from dsh_llm.runtime.stream import StreamMiddleware
from dsh_llm.runtime.stream import StreamNext

__all__ = [
    "AdapterDefaults",
    "AdapterRegistration",
    "LlmRuntime",
    "PreparedLlmCall",
    "StreamMiddleware",
    "StreamNext",
]
