"""The read loop: one ``StreamingCall``'s body through a decoder into a translator.

Every wire family streams the same way; only the decoder (SSE or NDJSON) and the
translator (pure: provider events in, protocol chunks out) differ. This module owns
the loop once, so no adapter copies it:

- Bytes are fed to the decoder as they arrive; each decoded event goes to the
  translator, and the chunks it returns are yielded in order. The watchdog is
  paused while the consumer holds a chunk; an event that is not a keep-alive
  (``translator.is_keepalive``) re-arms the keep-alive bound.
- Once the call's signal is aborted, the next chunk asked for raises ``ABORTED``,
  even when it was already decoded, unless the provider's last word was already
  given: the block ends, usage and finish of a finished answer still go out, and
  an answer whose finish reason came before the end marker is settled
  (``translator.settle()``) rather than aborted.
- At the end of the body the decoder's tail goes to the translator, then
  ``translator.close()``, which raises ``STREAM_CLOSED`` unless the wire may end
  there: a cut answer is never a success.
- Failures are classified by ``call.failure`` and raised outside the ``except``
  block; what the translator raises, and a provider's unsuccessful finish it
  writes (an error ``Finish``), is passed through ``call.redacted``, so a secret
  the server echoed never leaves the loop.
- A failure is raised, never yielded; right before it comes what the
  translator owes (``translator.before_failure()``: the usage the provider
  already reported), so billed tokens are never lost.
- ``on_open`` is told the response once its headers arrived (what it said
  about itself reaches the stream's metadata before the first chunk).
- The response is closed however the loop ends; after the terminal finish the rest
  of the body is drained (``call.finish()``) so the connection can be reused.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Iterator
from typing import Final
from typing import Protocol
from typing import TypeVar

import requests

from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import BlockEnd
from dsh_llm.protocol import Finish
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import UsageChunk
from dsh_llm.transport.call import StreamingCall

__all__ = ["EventDecoder", "EventTranslator", "read_stream"]

E = TypeVar("E")
E_contra = TypeVar("E_contra", contravariant=True)


class EventDecoder(Protocol[E]):
    """Bytes in, decoded events out (``SseDecoder``, ``NdjsonDecoder``)."""

    def feed(self, data: bytes) -> list[E]:
        """The events completed by ``data`` (often none)."""
        ...

    def close(self) -> list[E]:
        """The events left at the end of the body; raises ``LlmError`` for a tail
        that is not a complete event."""
        ...


class EventTranslator(Protocol[E_contra]):
    """A wire family's pure translator, as the read loop drives it."""

    @property
    def finished(self) -> bool:
        """Whether the terminal ``Finish`` was returned (later events are ignored)."""
        ...

    def before_failure(self) -> list[StreamChunk]:
        """The chunks that come right before a raised failure (the usage the
        provider already reported), once."""
        ...

    def settle(self) -> list[StreamChunk]:
        """The caller aborted before the wire's end marker: the chunks that end
        the answer when the provider's own finish already came (its last word
        arrived), else ``[]`` (the abort stands)."""
        ...

    def is_keepalive(self, event: E_contra) -> bool:
        """Whether ``event`` only keeps the connection alive (no progress)."""
        ...

    def feed(self, event: E_contra) -> list[StreamChunk]:
        """The chunks one event produces, in protocol order."""
        ...

    def close(self) -> list[StreamChunk]:
        """The body ended before the terminal event: the chunks that end the stream
        where the wire allows it; raises ``LlmError`` (``STREAM_CLOSED``) otherwise."""
        ...


def read_stream(
    call: StreamingCall,
    decoder: EventDecoder[E],
    translator: EventTranslator[E],
    on_open: Callable[[requests.Response], object] | None = None,
) -> Iterator[StreamChunk]:
    """Send ``call`` and yield the translator's chunks (see the module docstring).

    Args:
        call: The request.
        decoder: Bytes to events.
        translator: Events to chunks.
        on_open: Told the 2xx response once its headers arrived, before any
            chunk (a stream's ``ResponseInfo``); it must not raise.

    Raises:
        LlmError: from the request (status, transport, timeout, abort), the decoder
            or the translator, after the usage reported so far.
    """
    try:
        response = call.open()
        if on_open is not None:
            on_open(response)
        reader = call.chunks()
        while not translator.finished:
            error: LlmError | None = None
            out: list[StreamChunk] = []
            try:
                data = next(reader, None)
                if data is None:
                    events = decoder.close()
                else:
                    events = decoder.feed(data)
                    if not events:
                        continue
                progress = _feed_all(translator, events, out)
                # No event outlives its turn: a long one (a whole text repeated
                # at the end of a Responses answer) is dropped before the next
                # is decoded, and before the consumer gets these chunks.
                del events
                if data is None and not _finished(translator):
                    out.extend(translator.close())
                if progress:
                    call.note_data()
            except Exception as exc:
                failure = call.failure(exc)
                # An LlmError passes through unchanged: it may quote the server.
                error = call.redacted(failure) if failure is exc else failure
            if out:
                # What the events before a failure completed still goes out:
                # a failure ends the stream, it does not take back its start.
                last = out[-1]
                if type(last) is Finish and last.reason.failure is not None:
                    out[-1] = call.redacted_finish(last)
                del last
                call.pause()
                done = _finished(translator)
                for at, chunk in enumerate(out):
                    # One read may bring many events: an abort between two of
                    # them must stop the stream as surely as one during a read,
                    # unless only the ending of a finished answer is left (the
                    # provider's last word was already given).
                    if call.aborted and not (done and _only_ending(out, at)):
                        error = error or call.abort_error()
                        break
                    yield chunk
                    # Not held while the next events are read (a block-end's
                    # string may be a whole answer).
                    del chunk
                else:
                    if error is None:
                        call.resume()
            if error is not None and error.code == ErrorCode.ABORTED:
                # An abort after the provider's last word (its finish reason
                # came, only the end marker did not): the answer is whole.
                settled = translator.settle()
                if settled:
                    yield from settled
                    return
            if error is not None:
                # Raised outside the except block: the failure chose its cause
                # (cleaned of secrets), and the original is not kept as context.
                yield from translator.before_failure()
                raise error
    finally:
        if translator.finished:
            # Also when the consumer stopped at the finish (the runtime does):
            # the connection returns to the pool only once its body was read to
            # the end. The finish itself went out without waiting for it.
            call.finish()
        call.close()


def _feed_all(
    translator: EventTranslator[E], events: list[E], out: list[StreamChunk]
) -> bool:
    """Feed ``events`` to ``translator`` until it finished, its chunks onto
    ``out``; whether one of them was progress (not a keep-alive)."""
    feed = translator.feed
    keepalive = translator.is_keepalive
    progress = False
    for event in events:
        if _finished(translator):
            break
        if not progress and not keepalive(event):
            progress = True
        out.extend(feed(event))
    return progress


_ENDING: Final = (BlockEnd, UsageChunk, Finish)


def _only_ending(out: list[StreamChunk], start: int) -> bool:
    """Whether ``out[start:]`` holds no content, only block ends, usage, finish."""
    return all(type(chunk) in _ENDING for chunk in out[start:])


def _finished(translator: EventTranslator[E]) -> bool:
    # A call, not an attribute test: the type checker keeps no narrowing across it.
    return translator.finished
