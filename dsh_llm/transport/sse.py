"""Server-sent events: sseclient-py 1.9 behind a conformance shim.

The shim closes sseclient-py's gaps, following the WHATWG event-stream rules:

- Framing is the shim's: bytes are fed as they arrive, every line ending and a
  split CRLF normalised, one BOM removed, an event dispatched at its blank line.
- Blocks are decoded as UTF-8 (invalid bytes replaced); comments are never
  yielded (``on_comment``); an old llama.cpp ``error:`` field is kept.
- Buffering is linear, and an event above 64 MiB is ``MALFORMED_RESPONSE``.
- An unterminated final event raises ``STREAM_CLOSED`` (a complete ``data:
  [DONE]`` line without its blank line is accepted).
- Fast paths parse the common one-``data`` and ``event`` + ``data`` blocks
  directly, provably as sseclient-py would. Details: ``docs/transport.md``.
- ``decode_json`` parses one payload a provider sent (SSE data, an NDJSON
  line); one that is not JSON is an ``LlmError`` whose cause and context never
  hold the payload.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from typing import Any
from typing import Final
from typing import NamedTuple
from typing import cast

from sseclient import SSEClient

from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError

__all__ = [
    "DONE",
    "MAX_EVENT_BYTES",
    "SseDecoder",
    "SseEvent",
    "iter_sse",
    "parse_block_with_sseclient",
]

DONE: Final = "[DONE]"
"""The terminal payload OpenAI-style providers send after the last chunk."""

_BOM: Final = b"\xef\xbb\xbf"

_json_decode = json.JSONDecoder().decode

NOT_JSON: Final = "malformed SSE payload from {provider}: {start}"
"""``decode_json``'s default message: ``start`` is the payload's first 120
characters."""


def decode_json(
    text: str,
    provider: str,
    message: str = NOT_JSON,
    code: str = ErrorCode.MALFORMED_RESPONSE,
) -> Any:
    """Parse one JSON payload a provider sent.

    Args:
        text: The payload.
        provider: Display name used in the error message.
        message: The error message, formatted (only on failure) with
            ``provider`` and ``start``, the payload's first 120 characters.
        code: The error code.

    Raises:
        LlmError: ``code`` when ``text`` is not JSON. Its cause is a plain
            ``ValueError`` with the decoder's message, and it has no context: the
            decoder's own error keeps the whole payload as ``doc``, which may
            hold an echoed secret.
    """
    try:
        return _json_decode(text)
    except (ValueError, RecursionError) as exc:
        # RecursionError: nesting deeper than the decoder can follow.
        error = LlmError(
            message.format(provider=provider, start=text[:120]),
            code,
            cause=ValueError(str(exc)),
        )
    raise error  # outside the except block: the decoder's error is no context


MAX_EVENT_BYTES: Final = 64 * 1024 * 1024
"""The largest event (its bytes before the blank line) a decoder accepts by
default; a larger one, or a body that never sends a blank line, is
``MALFORMED_RESPONSE`` instead of unbounded memory."""


class SseEvent(NamedTuple):
    """One dispatched event. A plain named tuple: it is created once per event on
    the hot path."""

    data: str
    """The data buffer (several ``data`` lines joined with ``\\n``), or ``""`` for
    a block that carried only an ``error`` field."""
    event: str = "message"
    """The event type (``message`` unless an ``event`` field said otherwise)."""
    id: str | None = None
    """The last event id seen so far on this stream (kept across events)."""
    retry: int | None = None
    """The ``retry`` field of this block, when it was all ASCII digits."""
    error: str | None = None
    """The value of an ``error`` field in this block (old llama.cpp), if any."""
    raw: bytearray | None = None
    """For a decoder made with ``raw_over``, a one-``data``-line event longer
    than that: its data as the UTF-8 bytes that came (``data`` is then ``""``).
    The event's only copy of them: a consumer may clear it once read."""


def strip_bom(pending: bytes, data: bytes) -> tuple[bytes | None, bytes]:
    """Remove one UTF-8 BOM from the start of a body that may come a byte at a
    time (the SSE and NDJSON decoders' first reads).

    Args:
        pending: The bytes so far that may still be the start of a BOM (``b""``
            before the first read).
        data: The bytes just read.

    Returns:
        What to keep pending (``None`` once the body's start is settled) and the
        bytes to parse (``b""`` while the start is not settled).
    """
    head = pending + data
    if len(head) < 3 and _BOM.startswith(head):
        return head, b""
    return None, head[3:] if head.startswith(_BOM) else head


_new_event = tuple.__new__
"""Builds an ``SseEvent`` from a full 5-tuple (the hot path skips the
named-tuple constructor's argument handling)."""

CommentCallback = Callable[[str], object]
"""Receives each comment's text."""


def parse_block_with_sseclient(
    block: bytes | bytearray,
) -> tuple[str, str, str | None, str | None] | None:
    """Parse one complete, LF-normalised event block (without its blank line) with
    sseclient-py; return ``(data, event, id, retry)`` or ``None`` when the block
    dispatches nothing (no ``data`` field)."""
    payload = block.decode("utf-8", "replace").encode("utf-8") + b"\n\n"
    for event in SSEClient(iter((payload,))).events():
        return (event.data, event.event, event.id, event.retry)
    return None


def _named_event(block: bytes | bytearray, last_id: str | None) -> SseEvent | None:
    """A block that is exactly ``event:<name>`` then ``data:<value>``, parsed as
    sseclient-py parses it; ``None`` for any other block."""
    if block[:6] != b"event:":
        return None
    name, _, value = block.partition(b"\n")
    if value[:5] != b"data:" or b"\n" in value:
        return None
    name = name[6:]
    if name[:1] == b" ":
        name = name[1:]
    value = value[5:]
    if value[:1] == b" ":
        value = value[1:]
    return _new_event(
        SseEvent,
        (
            value.decode("utf-8", "replace"),
            name.decode("utf-8", "replace") or "message",
            last_id,
            None,
            None,
            None,
        ),
    )


def _raw_event(block: bytes | bytearray, last_id: str | None) -> SseEvent | None:
    """A block that is one ``data`` line, after one ``event`` line or not, as
    an event whose data stays bytes (``SseEvent.raw``); ``None`` for any other
    block. The fields are read as the fast paths read them. A ``bytearray``
    block (the decoder's own) becomes the data itself, else it is copied."""
    start = 0
    while block[start : start + 1] == b"\n":
        start += 1
    name: bytes | bytearray = b""
    if block[start : start + 6] == b"event:":
        end = block.find(b"\n", start)
        name = block[start + 6 : end]
        if name[:1] == b" ":
            name = name[1:]
        start = end + 1
    if block[start : start + 5] != b"data:" or block.find(b"\n", start) >= 0:
        return None
    start += 6 if block[start + 5 : start + 6] == b" " else 5
    if type(block) is bytearray:
        del block[:start]  # at the front: nothing is copied
        data = block
    else:
        with memoryview(block) as view:
            data = bytearray(view[start:])
    return SseEvent(
        "", name.decode("utf-8", "replace") or "message", last_id, None, None, data
    )


class SseDecoder:
    """Incremental SSE decoder: bytes in (``feed``), events out.

    Args:
        on_comment: Called with each comment's text (optional).
        terminal_data: The payload that ends the stream (default ``[DONE]``), or
            ``None`` when the provider has no end marker.
        provider: Display name used in error messages.
        max_event_bytes: The largest event accepted (``MAX_EVENT_BYTES``); a
            larger one raises ``LlmError`` ``MALFORMED_RESPONSE``.
        raw_over: Events (their block's bytes) longer than this that are one
            ``data`` line, after an ``event`` line or not, keep their data
            undecoded in ``SseEvent.raw`` (``None``: never). A whole answer
            repeated in one event then costs its UTF-8, not a ``str`` that one
            emoji makes 4 bytes a character.
    """

    __slots__ = (
        "_bom_pending",
        "_buf",
        "_last_id",
        "_max_event_bytes",
        "_on_comment",
        "_oversize",
        "_pending",
        "_provider",
        "_raw_over",
        "_skip_lf",
        "_terminal",
        "terminated",
    )

    def __init__(
        self,
        *,
        on_comment: CommentCallback | None = None,
        terminal_data: str | None = DONE,
        provider: str = "SSE",
        max_event_bytes: int = MAX_EVENT_BYTES,
        raw_over: int | None = None,
    ) -> None:
        self._on_comment = on_comment
        self._raw_over = max_event_bytes if raw_over is None else raw_over
        self._terminal = terminal_data
        self._provider = provider
        self._max_event_bytes = max_event_bytes
        self._buf = b""
        # An event that came in several reads, the first with ``_buf``'s
        # bytes, then the reads that completed no event: appended in place, so
        # a long event costs linear time however many reads bring it, and no
        # copy of it is made when its blank line arrives.
        self._pending = bytearray()
        # An event over the size cap, raised once the events before it are out.
        self._oversize: LlmError | None = None
        self._bom_pending: bytes | None = b""
        self._skip_lf = False
        self._last_id: str | None = None
        self.terminated = False
        """Whether the terminal event has been dispatched."""

    def feed(self, data: bytes) -> list[SseEvent]:
        """Feed the next bytes as they arrived; return the events they complete.

        After the terminal event, nothing more is parsed (later bytes are ignored).
        """
        if self._oversize is not None:
            raise self._oversize
        if self.terminated or not data:
            return []
        if self._bom_pending is not None:
            self._bom_pending, data = strip_bom(self._bom_pending, data)
            if not data:
                return []
        if self._skip_lf:
            self._skip_lf = False
            if data[:1] == b"\n":
                data = data[1:]
                if not data:
                    return []
        if b"\r" in data:
            # A CR that ends this read may be the first half of a CRLF.
            self._skip_lf = data[-1:] == b"\r"
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        buf = self._buf
        pending = self._pending
        last = pending[-1:] if pending else buf[-1:]
        # A blank line may straddle the old buffer's end and the new data.
        if b"\n\n" not in data and not (last == b"\n" and data[:1] == b"\n"):
            if not pending:
                pending += buf
                self._buf = b""
            pending += data
            if len(pending) > self._max_event_bytes:
                raise self._too_large()
            return []
        blocks: list[bytes | bytearray]
        if pending:
            # The event the pending bytes began ends in this read: it is split
            # off where it is, never copied (``split`` would copy a whole
            # answer repeated in one event).
            start = len(pending) - 1
            pending += data
            cut = pending.find(b"\n\n", start)
            rest = bytes(pending[cut + 2 :])
            del pending[cut:]
            self._pending = bytearray()
            parts = rest.split(b"\n\n")
            self._buf = parts.pop()
            blocks = [pending, *parts]
            del pending, rest
        else:
            parts = (buf + data).split(b"\n\n")
            self._buf = parts.pop()
            blocks = cast("list[bytes | bytearray]", parts)
        del buf, data, parts
        events = self._dispatch(blocks)
        if not self.terminated and len(self._buf) > self._max_event_bytes:
            self._oversize = self._oversize or self._too_large()
        if self._oversize is not None and not events:
            raise self._oversize
        # Events before an oversize one are returned first; the next call
        # raises.
        return events

    def _too_large(self) -> LlmError:
        return LlmError(
            f"{self._provider} SSE stream has an event larger than "
            f"{self._max_event_bytes} bytes",
            ErrorCode.MALFORMED_RESPONSE,
        )

    def _dispatch(self, parts: list[bytes | bytearray]) -> list[SseEvent]:
        events: list[SseEvent] = []
        terminal = self._terminal
        limit = self._max_event_bytes
        raw_over = self._raw_over
        for block in parts:
            if len(block) > raw_over:
                if len(block) > limit:
                    self._oversize = self._too_large()
                    break
                raw = _raw_event(block, self._last_id)
                if raw is not None:
                    events.append(raw)
                    continue
            if block[:1] == b"\n":
                block = block.lstrip(b"\n")
            if not block:
                continue
            kind: str | None = None
            if block[:5] == b"data:" and b"\n" not in block:
                kind = "message"
                value = block[5:]
            elif (
                block[:6] == b"event:"
                and block.count(b"\n") == 1
                and b"\ndata:" in block
            ):
                # ``event: <type>`` then one ``data:`` line (the Responses API,
                # Anthropic): the second fast path.
                name, _, value = block.partition(b"\ndata:")
                name = name[6:]
                if name[:1] == b" ":
                    name = name[1:]
                kind = name.decode("utf-8", "replace") or "message"
            if kind is not None:
                if value[:1] == b" ":
                    value = value[1:]
                event = _new_event(
                    SseEvent,
                    (
                        value.decode("utf-8", "replace"),
                        kind,
                        self._last_id,
                        None,
                        None,
                        None,
                    ),
                )
            else:
                named = _named_event(block, self._last_id)
                if named is None:
                    named = self._parse(block)
                    if named is None:
                        continue
                event = named
            events.append(event)
            if (
                terminal is not None
                and len(event.data) < 64
                and event.data.strip() == terminal
            ):
                self.terminated = True
                break
        return events

    def _parse(self, block: bytes | bytearray) -> SseEvent | None:
        error: str | None = None
        has_data = False
        for line in block.split(b"\n"):
            if line[:1] == b":":
                if self._on_comment is not None:
                    text = line[1:].decode("utf-8", "replace")
                    self._on_comment(text[1:] if text[:1] == " " else text)
            elif line == b"error" or line[:6] == b"error:":
                value = line[6:]
                error = (value[1:] if value[:1] == b" " else value).decode(
                    "utf-8", "replace"
                )
            elif line == b"data" or line[:5] == b"data:":
                has_data = True
        parsed = parse_block_with_sseclient(block) if has_data else None
        if parsed is not None:
            data, kind, event_id, retry_text = parsed
            if event_id is not None and "\x00" not in event_id:
                self._last_id = event_id
            retry = (
                int(retry_text)
                if retry_text and retry_text.isascii() and retry_text.isdigit()
                else None
            )
            return SseEvent(data, kind or "message", self._last_id, retry, error)
        if error is not None:
            return SseEvent("", "error", self._last_id, None, error)
        return None

    def close(self) -> list[SseEvent]:
        """Signal the end of the body; return a final event or raise.

        Returns the terminal event when the body ended with a complete
        ``data: <terminal>`` line but no blank line; otherwise nothing.

        Raises:
            LlmError: ``STREAM_CLOSED`` when an unterminated event remains.
        """
        if self._oversize is not None:
            raise self._oversize
        if self.terminated:
            return []
        tail = self._buf + bytes(self._pending)
        self._buf = b""
        self._pending = bytearray()
        if self._bom_pending:
            tail = self._bom_pending + tail
            self._bom_pending = None
        tail = tail.lstrip(b"\n")
        if not tail:
            return []
        complete, _, partial = tail.rpartition(b"\n")
        lines = complete.split(b"\n") if complete else []
        if partial and not partial.startswith(b":"):
            raise self._truncated()
        if all(line[:1] == b":" for line in lines):
            return []
        if self._terminal is not None and not partial:
            parsed = parse_block_with_sseclient(complete)
            if parsed is not None and parsed[0].strip() == self._terminal:
                self.terminated = True
                return [SseEvent(parsed[0], parsed[1] or "message", self._last_id)]
        raise self._truncated()

    def _truncated(self) -> LlmError:
        if self._terminal is None:
            message = f"{self._provider} SSE stream ended inside an unterminated event"
        else:
            message = (
                f"{self._provider} SSE stream ended without {self._terminal} "
                "(inside an unterminated event)"
            )
        return LlmError(message, ErrorCode.STREAM_CLOSED)


def iter_sse(
    chunks: Iterable[bytes],
    *,
    on_comment: CommentCallback | None = None,
    terminal_data: str | None = DONE,
    provider: str = "SSE",
) -> Iterator[SseEvent]:
    """Yield the events of an SSE body given as byte chunks (reads as they came).

    Stops after yielding the event whose data is ``terminal_data``.

    Raises:
        LlmError: ``STREAM_CLOSED`` when the bytes end inside an event, or end
            without the terminal event when ``terminal_data`` is set.
    """
    decoder = SseDecoder(
        on_comment=on_comment, terminal_data=terminal_data, provider=provider
    )
    for data in chunks:
        events = decoder.feed(data)
        if events:
            yield from events
            if decoder.terminated:
                return
    yield from decoder.close()
    if terminal_data is not None and not decoder.terminated:
        raise LlmError(
            f"{provider} SSE stream ended without {terminal_data}",
            ErrorCode.STREAM_CLOSED,
        )
