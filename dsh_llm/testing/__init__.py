"""Public testing utilities: things tests, demos and benchmarks reuse.

``dsh_llm.testing.loopback`` holds ``LoopbackServer``, a real HTTP server on
127.0.0.1 that plays scripted replies (status, headers, chunked, close-delimited or
content-length bodies, write splitting, pauses, stalls and abrupt closes) and
records what it received. It uses the standard library only, so importing it
adds no dependency; nothing in the library's runtime path imports this package.
"""

from __future__ import annotations

from dsh_llm.testing.loopback import (
    Cut,
    LoopbackServer,
    Mark,
    Pause,
    RecordedRequest,
    Reply,
    Stall,
    sse_body,
    sse_event,
    sse_events,
)

__all__ = [
    "Cut",
    "LoopbackServer",
    "Mark",
    "Pause",
    "RecordedRequest",
    "Reply",
    "Stall",
    "sse_body",
    "sse_event",
    "sse_events",
]
