"""Public testing utilities: things tests, demos and benchmarks reuse.

``dsh_llm.testing.loopback`` holds ``LoopbackServer``, a real HTTP server on
127.0.0.1 that plays scripted replies (status, headers, chunked, close-delimited or
content-length bodies, write splitting, pauses, stalls and abrupt closes) and
records what it received. It uses the standard library only. The adapter
author's kit builds on it: ``cassette`` (recorded exchanges), ``recorder``
(``record``, ``record_call``), ``replay`` (``replay_server``, ``replay_chunks``),
``conformance`` (``assert_adapter_conforms``), ``fake`` (``FakeAdapter``) and
``pytest_plugin`` (the fixtures registered under ``pytest11``). Nothing in the
library's runtime path imports this package.

The names below are imported on first use (PEP 562), so importing the package,
as the pytest plugin does in every pytest run, loads none of the kit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from typing import Final

from dsh_llm.protocol.lazy import lazy_exports

if TYPE_CHECKING:
    from dsh_llm.testing.cassette import Cassette as Cassette
    from dsh_llm.testing.conformance import (
        assert_adapter_conforms as assert_adapter_conforms,
    )
    from dsh_llm.testing.fake import FakeAdapter as FakeAdapter
    from dsh_llm.testing.loopback import Cut as Cut
    from dsh_llm.testing.loopback import LoopbackServer as LoopbackServer
    from dsh_llm.testing.loopback import Mark as Mark
    from dsh_llm.testing.loopback import Pause as Pause
    from dsh_llm.testing.loopback import RecordedRequest as RecordedRequest
    from dsh_llm.testing.loopback import Reply as Reply
    from dsh_llm.testing.loopback import Stall as Stall
    from dsh_llm.testing.loopback import sse_body as sse_body
    from dsh_llm.testing.loopback import sse_event as sse_event
    from dsh_llm.testing.loopback import sse_events as sse_events
    from dsh_llm.testing.recorder import record as record
    from dsh_llm.testing.recorder import record_call as record_call
    from dsh_llm.testing.replay import replay_chunks as replay_chunks
    from dsh_llm.testing.replay import replay_server as replay_server


_HOMES: Final = {
    "Cassette": "cassette",
    "assert_adapter_conforms": "conformance",
    "FakeAdapter": "fake",
    "Cut": "loopback",
    "LoopbackServer": "loopback",
    "Mark": "loopback",
    "Pause": "loopback",
    "RecordedRequest": "loopback",
    "Reply": "loopback",
    "Stall": "loopback",
    "sse_body": "loopback",
    "sse_event": "loopback",
    "sse_events": "loopback",
    "record": "recorder",
    "record_call": "recorder",
    "replay_chunks": "replay",
    "replay_server": "replay",
}
"""The module of ``dsh_llm.testing`` each public name lives in."""

__all__ = sorted(_HOMES)

__getattr__, __dir__ = lazy_exports(globals(), __name__, _HOMES)
