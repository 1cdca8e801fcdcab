"""``MessagesTranslator``: Anthropic Messages stream events in, protocol chunks out.

A pure state machine fed one decoded ``SseEvent`` at a time by the transport's
read loop; no I/O, no redaction (the read loop redacts failure messages). The
wire is ``docs/anthropic.md``'s "Stream" section (WIRE_FORMATS section 3).

Contracts callers may rely on:

- ``feed(event)`` returns the chunks the event completes, in the strict order of
  ``docs/protocol.md``; nothing once ``finished``. Events are dispatched on the
  payload's ``type`` (the SSE event name only when the payload has none).
- ``ping`` is a keep-alive, not data: it returns ``[]`` and ``is_keepalive``
  says so (``KEEPALIVE_EVENTS``). Unknown event, block and delta types are
  passed over; a ``server_tool_use`` block never becomes a tool call.
- An ``event: error`` is one ``error`` finish (``errors.stream_failure``), after
  the usage chunk when no block is open. A stop reason other than
  ``end_turn``/``stop_sequence``/``tool_use``/``max_tokens``/
  ``model_context_window_exceeded`` is an ``error`` finish (``REFUSAL``,
  ``PAUSE_TURN``, or the upper-cased reason); so is ``message_stop`` without a
  stop reason, and a block the provider never closed unless the answer was cut
  by ``max_tokens`` (``STREAM_CLOSED``).
- ``close()`` before ``finished`` raises ``LlmError`` ``STREAM_CLOSED``.
- A payload that is not JSON, or has a known field of the wrong type, raises
  ``LlmError`` ``MALFORMED_RESPONSE``.
"""

from __future__ import annotations

import json
import re
from collections import deque
from typing import Any, Final

from dsh_llm.adapters._anthropic.errors import stream_failure
from dsh_llm.adapters.wire_values import wire_count
from dsh_llm.errors import EMPTY_RESPONSE_CODE, ErrorCode, LlmError
from dsh_llm.protocol import (
    BlockEnd,
    BlockStart,
    CallId,
    ContentBlock,
    Finish,
    FinishReason,
    LlmFailure,
    ReasoningBlock,
    ReasoningDelta,
    ReplayEnvelope,
    StreamChunk,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
    UsageChunk,
)
from dsh_llm.transport.sse import SseEvent

__all__ = [
    "EMPTY_RESPONSE_MESSAGE",
    "KEEPALIVE_EVENTS",
    "PAUSE_TURN_CODE",
    "REFUSAL_CODE",
    "WIRE_FAMILY",
    "MessagesTranslator",
    "map_usage",
]

WIRE_FAMILY: Final = "anthropic-messages"
"""The ``wire`` of this family's ``ReplayEnvelope.response``; the request builder
replays only envelopes that carry it."""
KEEPALIVE_EVENTS: Final = frozenset({"ping"})
"""Event types that only keep the connection alive (no data)."""
REFUSAL_CODE: Final = "REFUSAL"
"""The code of the ``error`` finish after ``stop_reason: "refusal"`` (the same
code the chat-completions adapters give a refusal)."""
PAUSE_TURN_CODE: Final = ErrorCode.PAUSE_TURN.value
"""The code of the ``error`` finish after ``stop_reason: "pause_turn"``."""
EMPTY_RESPONSE_MESSAGE: Final = "model returned a completed response with no content"
"""The message of the ``EMPTY_RESPONSE`` finish (the other adapters' wording)."""

_STOP_REASONS: Final = frozenset({"end_turn", "stop_sequence", "tool_use"})
_CUT_REASONS: Final = frozenset({"max_tokens", "model_context_window_exceeded"})
_IDENTIFIER: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}")

_TEXT: Final = "text"
_THINKING: Final = "thinking"
_REDACTED: Final = "redacted_thinking"
_TOOL: Final = "tool_use"
_OPAQUE: Final = "opaque"
"""A block the protocol has no place for (server tools, their results, unknown
types): tracked by wire index so its deltas are recognised, never emitted."""

_DELTA_KINDS: Final = {
    "text_delta": (_TEXT, "text"),
    "thinking_delta": (_THINKING, "thinking"),
    "input_json_delta": (_TOOL, "partial_json"),
}
"""Delta types that extend a block, with the block kind and the field they carry."""

_json_decode = json.JSONDecoder().decode


def map_usage(usage: dict[str, Any]) -> TokenUsage:
    """Anthropic usage (``message_start`` merged with ``message_delta``) to
    disjoint ``TokenUsage``.

    ``input_tokens`` is already uncached; ``cache_read_input_tokens`` is the cache
    read and ``cache_creation_input_tokens`` the cache write;
    ``output_tokens_details.thinking_tokens`` is the reasoning part of
    ``output_tokens``. A count not reported, not a non-negative int, or above
    ``2**53 - 1`` is ``None``.
    """
    details = usage.get("output_tokens_details")
    return TokenUsage(
        input_tokens=wire_count(usage.get("input_tokens")),
        output_tokens=wire_count(usage.get("output_tokens")),
        cache_read_tokens=wire_count(usage.get("cache_read_input_tokens")),
        cache_write_tokens=wire_count(usage.get("cache_creation_input_tokens")),
        reasoning_tokens=(
            wire_count(details.get("thinking_tokens"))
            if type(details) is dict
            else None
        ),
    )


def _merge(earlier: dict[str, Any], later: dict[str, Any]) -> None:
    """``later`` over ``earlier`` in place; ``null`` keeps the earlier value (the
    counts are cumulative: the last reported value wins)."""
    for key, value in later.items():
        if value is None:
            continue
        before = earlier.get(key)
        if type(value) is dict and type(before) is dict:
            merged = dict(before)
            _merge(merged, value)
            earlier[key] = merged
        else:
            earlier[key] = value


class _Block:
    """One wire content block, keyed by its wire ``index``."""

    __slots__ = (
        "call_id",
        "closed",
        "data",
        "index",
        "kind",
        "name",
        "parts",
        "signature",
        "started",
    )

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.parts: list[str] = []
        self.closed = False
        self.started = False
        self.index = -1
        self.signature = ""
        self.data = ""
        self.call_id = ""
        self.name = ""


class MessagesTranslator:
    """Anthropic Messages SSE events in, protocol chunks out, in strict order.

    Order ("free inside, strict at the exit"): blocks are emitted in the order the
    provider opened them, one at a time. The first open block streams live; a
    block the provider opens before the live one is closed is buffered and
    flushed (one delta with what it holds) once every block before it has ended.
    A text block is emitted only once it has text (an empty one is dropped); a
    thinking block always is (its signature is replay state even without text);
    ``redacted_thinking`` is an empty reasoning block whose data is replay state;
    a tool call that streamed no input ends with ``"{}"``. Blocks still open at
    ``message_delta``/``message_stop`` are closed there.

    The successful finish (``stop``, ``tool-calls``, ``max-tokens``) carries a
    ``ReplayEnvelope``: ``response`` is ``{"wire": WIRE_FAMILY, "id", "model"}``
    and ``blocks`` has one entry per emitted block: ``{"type": "thinking",
    "signature": ...}``, ``{"type": "redacted_thinking", "data": ...}``, or
    ``None`` (text, tool calls, a thinking block without signature).

    Args:
        provider: Display name used in messages.
        empty_response_as_stop: Report a blockless ``end_turn`` (or
            ``stop_sequence``, ``tool_use``) as a plain ``stop`` instead of
            ``EMPTY_RESPONSE``.
    """

    def __init__(
        self, *, provider: str = "Anthropic", empty_response_as_stop: bool = False
    ) -> None:
        self._provider = provider
        self._empty_as_stop = empty_response_as_stop
        self._blocks: dict[int, _Block] = {}
        # Surfaced blocks not yet ended, in opening order; the head is the one
        # emitted live (once started).
        self._queue: deque[_Block] = deque()
        self._emitted: list[_Block] = []
        self._tool_blocks = 0
        self._usage: dict[str, Any] | None = None
        self._stop_reason: str | None = None
        self._stop_details: Any = None
        self._unclosed = False
        self._message_id: str | None = None
        self._model: str | None = None
        self.finished = False
        """Whether the terminal ``Finish`` has been produced."""

    @property
    def usage_so_far(self) -> TokenUsage | None:
        """The usage reported so far, or ``None`` before any."""
        return None if self._usage is None else map_usage(self._usage)

    @staticmethod
    def is_keepalive(event: SseEvent) -> bool:
        """Whether ``event`` only keeps the connection alive (``ping``): the read
        loop counts it toward the idle watchdog's keep-alive bound, not as data."""
        return event.event in KEEPALIVE_EVENTS

    # -- input -------------------------------------------------------------------------

    def feed(self, event: SseEvent) -> list[StreamChunk]:
        """Translate one event (see the class docstring)."""
        out: list[StreamChunk] = []
        if self.finished or not event.data:
            return out
        payload = self._decoded(event.data)
        if type(payload) is not dict:
            raise self._malformed(f"a {event.event} payload that is not an object")
        kind = payload.get("type", event.event)
        if kind == "content_block_delta":
            self._delta(payload, out)
        elif kind == "content_block_start":
            self._start(payload, out)
        elif kind == "content_block_stop":
            self._stop(payload, out)
        elif kind == "message_start":
            self._message_start(payload)
        elif kind == "message_delta":
            self._message_delta(payload, out)
        elif kind == "message_stop":
            self._message_stop(out)
        elif kind == "error":
            self._fail(stream_failure(payload, provider=self._provider), out)
        return out

    def close(self) -> list[StreamChunk]:
        """The body ended; nothing to add when ``finished``.

        Raises:
            LlmError: ``STREAM_CLOSED`` when ``message_stop`` never came.
        """
        if self.finished:
            return []
        raise LlmError(
            f"{self._provider} stream ended before message_stop",
            ErrorCode.STREAM_CLOSED,
        )

    def _decoded(self, data: str) -> Any:
        try:
            return _json_decode(data)
        except (ValueError, RecursionError) as exc:
            # RecursionError: nesting deeper than the decoder can follow. The
            # decoder's error holds the whole payload: only its text is kept,
            # and the raise is outside this block so it is not the context.
            reason = str(exc)
        raise LlmError(
            f"malformed SSE payload from {self._provider}: {data[:120]}",
            ErrorCode.MALFORMED_RESPONSE,
            cause=ValueError(reason),
        )

    # -- events ------------------------------------------------------------------------

    def _index(self, payload: dict[str, Any]) -> int:
        index = payload.get("index")
        if type(index) is not int or index < 0:
            raise self._malformed("a content block index that is not an integer >= 0")
        return index

    def _message_start(self, payload: dict[str, Any]) -> None:
        message = payload.get("message")
        if type(message) is not dict:
            raise self._malformed("a message_start without a message object")
        message_id = message.get("id")
        model = message.get("model")
        self._message_id = message_id if type(message_id) is str else None
        self._model = model if type(model) is str else None
        self._merge_usage(message.get("usage"))

    def _merge_usage(self, usage: object) -> None:
        if usage is None:
            return
        if type(usage) is not dict:
            raise self._malformed("a usage that is not an object")
        if self._usage is None:
            self._usage = {}
        _merge(self._usage, usage)

    def _start(self, payload: dict[str, Any], out: list[StreamChunk]) -> None:
        index = self._index(payload)
        if index in self._blocks:
            raise self._malformed(f"a second content_block_start for block {index}")
        content = payload.get("content_block")
        if type(content) is not dict:
            raise self._malformed("a content_block_start without a content block")
        wire_type = content.get("type")
        if wire_type == _TEXT:
            block = _Block(_TEXT)
            block.parts.append(self._string(content, "text"))
        elif wire_type == _THINKING:
            block = _Block(_THINKING)
            block.parts.append(self._string(content, "thinking"))
            block.signature = self._string(content, "signature")
        elif wire_type == _REDACTED:
            block = _Block(_REDACTED)
            block.data = self._string(content, "data")
        elif wire_type == _TOOL:
            block = _Block(_TOOL)
            block.call_id = self._string(content, "id")
            block.name = self._string(content, "name")
            # ``input`` is a placeholder (``{}``) when the input streams; a
            # non-empty one is a whole input sent at once.
            initial = content.get("input")
            if type(initial) is dict and initial:
                block.parts.append(json.dumps(initial, ensure_ascii=False))
        else:
            self._blocks[index] = _Block(_OPAQUE)
            return
        self._blocks[index] = block
        self._queue.append(block)
        self._pump(out)

    def _delta(self, payload: dict[str, Any], out: list[StreamChunk]) -> None:
        index = self._index(payload)
        block = self._blocks.get(index)
        if block is None:
            raise self._malformed(f"a delta for block {index}, which never started")
        if block.kind is _OPAQUE or block.closed:
            return
        delta = payload.get("delta")
        if type(delta) is not dict:
            raise self._malformed("a content_block_delta without a delta object")
        delta_type = delta.get("type")
        if delta_type == "signature_delta":
            if block.kind is not _THINKING:
                raise self._malformed(f"a signature_delta on a {block.kind} block")
            # The signature is whole, not a fragment: replace, never append.
            block.signature = self._string(delta, "signature")
            return
        expected = _DELTA_KINDS.get(delta_type) if type(delta_type) is str else None
        if expected is None:
            return  # citations_delta and unknown deltas: metadata, not content
        kind, field = expected
        if block.kind is not kind:
            raise self._malformed(f"a {delta_type} on a {block.kind} block")
        piece = self._string(delta, field)
        if not piece:
            return
        block.parts.append(piece)
        if block.started:
            out.append(self._delta_chunk(block, piece))
        elif block is self._queue[0]:
            self._pump(out)

    def _stop(self, payload: dict[str, Any], out: list[StreamChunk]) -> None:
        index = self._index(payload)
        block = self._blocks.get(index)
        if block is None:
            raise self._malformed(
                f"a content_block_stop for block {index}, never started"
            )
        if block.closed:
            return
        block.closed = True
        if block.kind is not _OPAQUE:
            self._pump(out)

    def _message_delta(self, payload: dict[str, Any], out: list[StreamChunk]) -> None:
        delta = payload.get("delta")
        if delta is not None:
            if type(delta) is not dict:
                raise self._malformed("a message_delta whose delta is not an object")
            reason = delta.get("stop_reason")
            if reason is not None:
                if type(reason) is not str:
                    raise self._malformed("a stop_reason that is not a string")
                if reason:
                    self._stop_reason = reason
            if delta.get("stop_details") is not None:
                self._stop_details = delta.get("stop_details")
        self._merge_usage(payload.get("usage"))
        self._close_all(out)

    def _message_stop(self, out: list[StreamChunk]) -> None:
        reason = self._stop_reason
        if reason is None:
            self._fail(
                LlmFailure(
                    message=f"{self._provider} stream reached message_stop without "
                    "a stop_reason",
                    code=ErrorCode.STREAM_CLOSED.value,
                ),
                out,
            )
            return
        self._close_all(out)
        finish = self._finish_reason(reason)
        out.append(UsageChunk(usage=self.usage_so_far or TokenUsage.unknown()))
        replay = None if finish.is_failure else self._replay_state()
        out.append(Finish(reason=finish, replay_state=replay))
        self.finished = True

    # -- blocks ------------------------------------------------------------------------

    def _close_all(self, out: list[StreamChunk]) -> None:
        """Close every block the provider left open (a cut answer)."""
        for block in self._blocks.values():
            if not block.closed:
                block.closed = True
                self._unclosed = True
        self._pump(out)

    def _pump(self, out: list[StreamChunk]) -> None:
        """Emit what the head of the queue allows: start it once it may be shown,
        end it once the provider closed it, then move on to the next block."""
        queue = self._queue
        while queue:
            block = queue[0]
            if not block.started:
                if block.kind is _TEXT and not any(block.parts):
                    if not block.closed:
                        return  # an empty text block may still get text
                    queue.popleft()
                    continue
                self._open(block, out)
            if not block.closed:
                return
            self._end(block, out)
            queue.popleft()

    def _open(self, block: _Block, out: list[StreamChunk]) -> None:
        block.index = len(self._emitted)
        block.started = True
        self._emitted.append(block)
        text = "".join(block.parts)
        block.parts = [text] if text else []
        index = block.index
        if block.kind is _TOOL:
            self._tool_blocks += 1
            out.append(BlockStart(index=index, block_type=ToolCallBlock.TAG))
            out.append(
                ToolCallDelta(
                    index=index,
                    id=CallId(block.call_id),
                    name=block.name,
                    arguments_delta=text,
                )
            )
        elif block.kind is _TEXT:
            out.append(BlockStart(index=index, block_type=TextBlock.TAG))
            out.append(TextDelta(index=index, text=text))
        else:
            out.append(BlockStart(index=index, block_type=ReasoningBlock.TAG))
            if text:
                out.append(ReasoningDelta(index=index, text=text))

    def _delta_chunk(self, block: _Block, piece: str) -> StreamChunk:
        if block.kind is _TOOL:
            return ToolCallDelta(
                index=block.index,
                id=CallId(block.call_id),
                name=block.name,
                arguments_delta=piece,
            )
        if block.kind is _TEXT:
            return TextDelta(index=block.index, text=piece)
        return ReasoningDelta(index=block.index, text=piece)

    def _end(self, block: _Block, out: list[StreamChunk]) -> None:
        text = "".join(block.parts)
        ended: ContentBlock
        if block.kind is _TOOL:
            if text == "":
                text = "{}"
                out.append(self._delta_chunk(block, text))
            ended = ToolCallBlock(
                id=CallId(block.call_id), name=block.name, arguments=text
            )
        elif block.kind is _TEXT:
            ended = TextBlock(text=text)
        else:
            ended = ReasoningBlock(text=text)
        out.append(BlockEnd(index=block.index, block=ended))

    # -- the end -----------------------------------------------------------------------

    def _finish_reason(self, reason: str) -> FinishReason:
        if reason in _CUT_REASONS:
            return FinishReason.MAX_TOKENS
        if reason == "refusal":
            return FinishReason.error(
                LlmFailure(message=self._refusal_message(), code=REFUSAL_CODE)
            )
        if reason == "pause_turn":
            return FinishReason.error(
                LlmFailure(
                    message="model paused its turn (pause_turn); send the assistant "
                    "turn back unchanged to continue it",
                    code=PAUSE_TURN_CODE,
                )
            )
        if self._unclosed:
            return FinishReason.error(
                LlmFailure(
                    message=f"{self._provider} stream ended with a content block "
                    f"never closed (stop_reason {reason[:64]})",
                    code=ErrorCode.STREAM_CLOSED.value,
                )
            )
        if reason in _STOP_REASONS:
            if self._tool_blocks:
                return FinishReason.TOOL_CALLS
            if not self._emitted and not self._empty_as_stop:
                return FinishReason.error(
                    LlmFailure(message=EMPTY_RESPONSE_MESSAGE, code=EMPTY_RESPONSE_CODE)
                )
            return FinishReason.STOP
        code = (
            reason.upper()
            if _IDENTIFIER.fullmatch(reason)
            else ErrorCode.UNKNOWN_FINISH_REASON.value
        )
        return FinishReason.error(
            LlmFailure(message=f"model stopped: {reason[:120]}", code=code)
        )

    def _refusal_message(self) -> str:
        details = self._stop_details
        category = details.get("category") if type(details) is dict else None
        if type(category) is str and category:
            return f"model stopped: refusal ({category[:64]})"
        return "model stopped: refusal"

    def _replay_state(self) -> ReplayEnvelope:
        entries: list[dict[str, str] | None] = []
        for block in self._emitted:
            if block.kind is _THINKING and block.signature:
                entries.append({"type": _THINKING, "signature": block.signature})
            elif block.kind is _REDACTED:
                entries.append({"type": _REDACTED, "data": block.data})
            else:
                entries.append(None)
        return ReplayEnvelope(
            response={
                "wire": WIRE_FAMILY,
                "id": self._message_id,
                "model": self._model,
            },
            blocks=tuple(entries),
        )

    def _fail(self, failure: LlmFailure, out: list[StreamChunk]) -> None:
        queue = self._queue
        live = bool(queue) and queue[0].started
        if self._usage is not None and not live:
            out.append(UsageChunk(usage=map_usage(self._usage)))
        out.append(Finish(reason=FinishReason.error(failure)))
        self.finished = True

    # -- checks ------------------------------------------------------------------------

    def _string(self, payload: dict[str, Any], field: str) -> str:
        value = payload.get(field)
        if value is None:
            return ""
        if type(value) is not str:
            raise self._malformed(f"a {field} that is not a string")
        return value

    def _malformed(self, what: str) -> LlmError:
        return LlmError(
            f"{self._provider} sent {what} in its stream", ErrorCode.MALFORMED_RESPONSE
        )
