"""``WireTranslator``: the part of every family's translator that is not the wire.

A family's translator is a pure state machine fed one decoded event at a time by
the transport's read loop (``dsh_llm.transport.read_loop.EventTranslator``). It
says what the wire said to its ``writer`` (a ``BlockWriter``), which owns every
rule of the protocol; this base gives it the rest of the read loop's interface:

- ``finished``, ``usage_so_far`` and ``before_failure()`` are the writer's;
- ``is_keepalive(event)`` is ``False`` unless the family says otherwise;
- ``objects(value, field, item)`` reads a list of JSON objects or fails as
  malformed, naming the list or the entry;
- ``close()`` (the body ended before the wire's terminal event) raises the
  writer's ``STREAM_CLOSED`` error naming ``end_marker``: a cut answer is never
  a success.

A subclass implements ``feed(event)``: translate, then ``return
self.writer.take()``.
"""

from __future__ import annotations

import abc
from typing import Any
from typing import ClassVar
from typing import Generic
from typing import TypeVar

from dsh_llm.adapters._wire.writer import BlockWriter
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TokenUsage

E = TypeVar("E")


class WireTranslator(abc.ABC, Generic[E]):
    """Base of a wire family's translator (see the module docstring).

    Args:
        provider: Display name used in messages.
        empty_response_as_stop: Report a blockless successful finish as a plain
            ``stop`` instead of ``EMPTY_RESPONSE``.
    """

    end_marker: ClassVar[str] = "its final event"
    """What the wire ends with, named when the body ends before it."""

    def __init__(self, *, provider: str, empty_response_as_stop: bool = False) -> None:
        self.writer = BlockWriter(
            provider=provider, empty_response_as_stop=empty_response_as_stop
        )
        """The writer this translator tells what the wire said."""

    @property
    def provider(self) -> str:
        """The display name used in messages."""
        return self.writer.provider

    @property
    def finished(self) -> bool:
        """Whether the terminal ``Finish`` was written (later events are ignored)."""
        return self.writer.finished

    @property
    def usage_so_far(self) -> TokenUsage | None:
        """The usage the provider reported so far, ``None`` when none was."""
        return self.writer.usage_so_far

    def before_failure(self) -> list[StreamChunk]:
        """Right before a raised failure: what the failing event completed before
        it failed, then the usage already reported (once)."""
        return self.writer.before_failure()

    def objects(self, value: object, field: str, item: str) -> list[dict[str, Any]]:
        """``value`` as a list of JSON objects (``field`` names the list and
        ``item`` one entry in the error: ``"a tool_calls field"``, ``"a tool
        call"``). The walks every event takes (``choices``, ``candidates``,
        ``parts``) stay inline, for speed.

        Raises:
            LlmError: ``MALFORMED_RESPONSE`` when ``value`` is not a list or an
                entry is not an object.
        """
        if type(value) is not list:
            raise self.writer.malformed(f"{field} that is not a list")
        for entry in value:
            if type(entry) is not dict:
                raise self.writer.malformed(f"{item} that is not an object")
        return value

    def settle(self) -> list[StreamChunk]:
        """The caller aborted before the wire's end marker: the chunks that end a
        whole answer (the provider's finish reason already came), else ``[]``.
        A family whose finish can come before its end marker overrides it."""
        return []

    def is_keepalive(self, event: E) -> bool:
        """Whether ``event`` only keeps the connection alive (no progress)."""
        return False

    @abc.abstractmethod
    def feed(self, event: E) -> list[StreamChunk]:
        """The chunks one event produces, in protocol order (nothing once
        ``finished``)."""

    def close(self) -> list[StreamChunk]:
        """The body ended: nothing to add when ``finished``.

        Raises:
            LlmError: ``STREAM_CLOSED`` when the wire's terminal event never came.
        """
        if self.finished:
            return []
        raise self.writer.stream_closed(f"stream ended before {self.end_marker}")
