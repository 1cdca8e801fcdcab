"""``MessagesTranslator``: Anthropic Messages stream events in, what the wire said
out, to a ``BlockWriter`` (which writes the protocol's chunks).

A pure state machine fed one decoded ``SseEvent`` at a time by the transport's
read loop; no I/O, no redaction (the read loop redacts failure messages). The
wire, and every point below in full: ``docs/anthropic.md``, "Stream".

Contracts callers may rely on:

- ``feed(event)`` returns the chunks the event completes; nothing once
  ``finished``. Events are dispatched on the payload's ``type`` (the SSE event
  name when it has none), ``event: error`` always on its name; ``ping`` and
  unknown event, block and delta types are passed over.
- ``server_tool_use`` and ``mcp_tool_use`` are whole ``server-tool-call`` blocks
  (their input gathered, never a tool call), every ``*_tool_result`` block a
  ``server-tool-result`` (``server_tools``); ``citations_delta`` and a text
  block's own ``citations`` are citations of that block.
- An ``event: error``, a ``message_stop`` without a stop reason and a block the
  provider never closed (unless ``max_tokens`` cut it) raise: a cut answer is
  never a success. A stop reason outside the successful ones is the provider's
  unsuccessful finish (``REFUSAL``, ``PAUSE_TURN``, or the upper-cased
  reason); with ``unmarked_cap``, a stop whose ``output_tokens`` reached it is
  ``max-tokens``.
- A ``tool_use`` block that repeats the id of the call that just stopped
  continues it (LiteLLM); joined arguments that are not one JSON object, any
  other repeated id, a payload that is not JSON or a known field of the wrong
  type are ``MALFORMED_RESPONSE``.
"""

from __future__ import annotations

import json
from typing import Any
from typing import Final

from dsh_llm.adapters._wire.indexed import IndexedTranslator
from dsh_llm.adapters._wire.values import wire_count
from dsh_llm.adapters._wire.writer import REASONING
from dsh_llm.adapters._wire.writer import SERVER_TOOL_CALL
from dsh_llm.adapters._wire.writer import TEXT
from dsh_llm.adapters._wire.writer import TOOL_CALL
from dsh_llm.adapters._wire.writer import Block
from dsh_llm.adapters._wire.writer import stopped_failure
from dsh_llm.adapters.anthropic.errors import stream_failure
from dsh_llm.adapters.anthropic.server_tools import CALL_TYPES
from dsh_llm.adapters.anthropic.server_tools import call_name
from dsh_llm.adapters.anthropic.server_tools import citation_of
from dsh_llm.adapters.anthropic.server_tools import is_result_type
from dsh_llm.adapters.anthropic.server_tools import result_block
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import CallId
from dsh_llm.protocol import Citation
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import LlmFailure
from dsh_llm.protocol import ReplayEnvelope
from dsh_llm.protocol import ServerToolCallBlock
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TokenUsage
from dsh_llm.transport.sse import SseEvent

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

_STOP_REASONS: Final = frozenset({"end_turn", "stop_sequence", "tool_use"})
_CUT_REASONS: Final = frozenset({"max_tokens", "model_context_window_exceeded"})

_THINKING: Final = "thinking"
_REDACTED: Final = "redacted_thinking"
_OPAQUE: Final = object()
"""A block the protocol has no place for (unknown types, a whole result block
already written): tracked by wire index so its deltas are recognised, never
emitted."""
_STOPPED: Final = object()
"""A wire block the provider closed (``content_block_stop``): its late deltas
are passed over."""

_DELTA_KINDS: Final = {
    "text_delta": (TEXT, "text"),
    "thinking_delta": (REASONING, "thinking"),
    "input_json_delta": (TOOL_CALL, "partial_json"),
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


class MessagesTranslator(IndexedTranslator[SseEvent]):
    """Anthropic Messages SSE events in, protocol chunks out, in strict order.

    Each wire content block is one item of the writer, opened in the provider's
    order: a thinking block always shows (its signature is replay state even
    without text); ``redacted_thinking`` is an empty reasoning block whose data
    is replay state; a tool call's whole ``input`` sent at once is its argument
    text. The writer's order rules ("free inside, strict at the exit") do the
    rest.

    The successful finish (``stop``, ``tool-calls``, ``max-tokens``) carries a
    ``ReplayEnvelope``: ``response`` is ``{"wire": WIRE_FAMILY, "id", "model"}``
    and ``blocks`` has one entry per emitted block: ``{"type": "thinking",
    "signature": ...}``, ``{"type": "redacted_thinking", "data": ...}``, or
    ``None`` (text, tool calls, a thinking block without signature).

    With ``unmarked_cap``, an ``end_turn``/``stop_sequence``/``tool_use``
    answer whose ``output_tokens`` reached that cap is ``max-tokens`` (a proxy
    that ends a cap cut as ``end_turn``: LiteLLM's ``openai/`` route in front of
    llama-server).

    Args:
        provider: Display name used in messages.
        empty_response_as_stop: Report a blockless ``end_turn`` (or
            ``stop_sequence``, ``tool_use``) as a plain ``stop`` instead of
            ``EMPTY_RESPONSE``.
        unmarked_cap: The ``max_tokens`` the request sent, when the server is
            known not to mark a cut at it (``None``: the stop reason alone
            decides).
    """

    end_marker = "message_stop"
    index_field = "index"
    index_name = "content block index"
    start_event = "content_block_start"

    def __init__(
        self,
        *,
        provider: str = "Anthropic",
        empty_response_as_stop: bool = False,
        unmarked_cap: int | None = None,
    ) -> None:
        super().__init__(
            provider=provider, empty_response_as_stop=empty_response_as_stop
        )
        self._unmarked_cap = unmarked_cap
        # A tool call whose wire block stopped: it ends at the next event unless
        # that event starts a block repeating its id, which continues it.
        self._held: Block | None = None
        self._joined: set[Block] = set()  # calls joined from several wire blocks
        self._call_ids: set[str] = set()
        self._usage: dict[str, Any] | None = None
        self._stop_reason: str | None = None
        self._stop_details: Any = None
        self._message_id: str | None = None
        self._model: str | None = None
        # Server tool calls whose input still streams, by their writer item:
        # the wire block and the input pieces so far.
        self._server_calls: dict[Block, tuple[dict[str, Any], list[str]]] = {}
        self._server_names: dict[str, str] = {}  # call id -> protocol name

    def _mapped_usage(self) -> TokenUsage | None:
        return None if self._usage is None else map_usage(self._usage)

    @staticmethod
    def is_keepalive(event: SseEvent) -> bool:
        """Whether ``event`` only keeps the connection alive (``ping``): the read
        loop counts it toward the idle watchdog's keep-alive bound, not as data."""
        return event.event in KEEPALIVE_EVENTS

    # -- input ---------------------------------------------------------------------

    def feed(self, event: SseEvent) -> list[StreamChunk]:
        """Translate one event (see the class docstring)."""
        writer = self.writer
        if writer.finished or not event.data:
            return []
        if event.event == "error":
            # An error frame is an error whatever its payload says (llama-server
            # sends an OpenAI-style one whose type is "server_error").
            raise LlmError.from_failure(
                stream_failure(self._error_payload(event.data), provider=self.provider)
            )
        payload = self._decoded(event.data)
        if type(payload) is not dict:
            raise writer.malformed(f"a {event.event} payload that is not an object")
        kind = payload.get("type", event.event)
        if type(kind) is not str:
            raise writer.malformed(
                f"a {event.event} payload whose type is not a string"
            )
        if kind == "content_block_delta":
            self._delta(payload)
        elif kind == "content_block_start":
            self._start(payload)
        elif kind == "content_block_stop":
            self._stop(payload)
        elif kind == "message_start":
            self._message_start(payload)
        elif kind == "message_delta":
            self._message_delta(payload)
        elif kind == "message_stop":
            self._message_stop()
        elif kind == "error":
            raise LlmError.from_failure(
                stream_failure(payload, provider=writer.provider)
            )
        return writer.take()

    @staticmethod
    def _error_payload(data: str) -> Any:
        """An error frame's payload: its JSON, else its text (the message)."""
        try:
            return _json_decode(data)
        except (ValueError, RecursionError):
            return data

    def _decoded(self, data: str) -> Any:
        try:
            return _json_decode(data)
        except (ValueError, RecursionError) as exc:
            # RecursionError: nesting deeper than the decoder can follow. The
            # decoder's error holds the whole payload: only its text is kept,
            # and the raise is outside this block so it is not the context.
            reason = str(exc)
        raise LlmError(
            f"malformed SSE payload from {self.provider}: {data[:120]}",
            ErrorCode.MALFORMED_RESPONSE,
            cause=ValueError(reason),
        )

    # -- events ------------------------------------------------------------------------

    def _message_start(self, payload: dict[str, Any]) -> None:
        message = payload.get("message")
        if type(message) is not dict:
            raise self.writer.malformed("a message_start without a message object")
        message_id = message.get("id")
        model = message.get("model")
        self._message_id = message_id if type(message_id) is str else None
        self._model = model if type(model) is str else None
        self._merge_usage(message.get("usage"))
        # Programmatic tool calling: the message may start with its content
        # whole (a tool_use block) and its stop reason, then message_stop.
        content = message.get("content")
        if content:
            if type(content) is not list:
                raise self.writer.malformed(
                    "a message_start content that is not a list"
                )
            for index, block in enumerate(content):
                self._start({"index": index, "content_block": block})
                self._stop({"index": index})
        self._keep_stop_reason(message)

    def _keep_stop_reason(self, holder: dict[str, Any]) -> None:
        """Keep ``holder``'s ``stop_reason`` (``null`` or empty keeps the one
        before)."""
        reason = holder.get("stop_reason")
        if reason is not None:
            if type(reason) is not str:
                raise self.writer.malformed("a stop_reason that is not a string")
            if reason:
                self._stop_reason = reason

    def _merge_usage(self, usage: object) -> None:
        if usage is None:
            return
        if type(usage) is not dict:
            raise self.writer.malformed("a usage that is not an object")
        if self._usage is None:
            self._usage = {}
            self.writer.report_usage(self._mapped_usage)
        _merge(self._usage, usage)

    def _start(self, payload: dict[str, Any]) -> None:
        index = self.new_index(payload)
        content = payload.get("content_block")
        if type(content) is not dict:
            raise self.writer.malformed("a content_block_start without a content block")
        writer = self.writer
        wire_type = content.get("type")
        if wire_type != "tool_use":
            self._release()
        block: Block
        if wire_type == TEXT:
            block = writer.open(TEXT, text=self.string(content, "text"))
            given = content.get("citations")
            if type(given) is list and given:
                writer.cite(block, self._citations(given))
        elif wire_type == _THINKING:
            thinking = self.string(content, "thinking")
            signature = self.string(content, "signature")
            block = writer.open(REASONING, text=thinking)
            block.replay = signature
        elif wire_type == _REDACTED:
            data = self.string(content, "data")
            block = writer.open(REASONING)
            block.replay = {"type": _REDACTED, "data": data}
        elif wire_type == "tool_use":
            call_id = self.string(content, "id")
            name = self.string(content, "name")
            # ``input`` is a placeholder (``{}``) when the input streams; a
            # non-empty one is a whole input sent at once.
            whole = self._whole_input(content.get("input"))
            held = self._held
            if held is not None and call_id and call_id == held.call_id:
                self._continue(index, held, name, whole)
                return
            self._release()
            if call_id in self._call_ids:
                raise writer.malformed(
                    "a tool_use block repeating the id of an earlier call"
                )
            if call_id:
                self._call_ids.add(call_id)
            block = writer.open(TOOL_CALL, call_id=call_id, name=name, text=whole)
        elif wire_type in CALL_TYPES:
            block = writer.reserve(SERVER_TOOL_CALL)
            self._server_calls[block] = (content, [])
        elif is_result_type(wire_type):
            self._result(content)
            self.blocks[index] = _OPAQUE
            return
        else:
            self.blocks[index] = _OPAQUE
            return
        self.blocks[index] = block

    def _citations(self, given: list[Any]) -> list[Citation]:
        citations = [citation_of(wire) for wire in given]
        return [citation for citation in citations if citation is not None]

    def _result(self, content: dict[str, Any]) -> None:
        """A server tool's result, whole in its ``content_block_start``."""
        call_id = self.string(content, "tool_use_id")
        wire_type = str(content.get("type"))
        name = self._server_names.get(call_id) or wire_type.removesuffix("_tool_result")
        self.writer.open_whole(result_block(content, name))

    def _server_call_end(self, block: Block) -> None:
        """A server tool call's block stopped: it goes out whole."""
        content, pieces = self._server_calls.pop(block)
        text = "".join(pieces)
        if text:
            try:
                given = _json_decode(text)
            except (ValueError, RecursionError):
                raise self.writer.malformed(
                    "a server tool input that is not JSON"
                ) from None
        else:
            given = content.get("input")
            text = self._whole_input(given) or "{}"
        call_id = self.string(content, "id")
        name = call_name(content)
        self._server_names[call_id] = name
        data = {**content, "input": given if given is not None else {}}
        self.writer.complete(
            block,
            ServerToolCallBlock(id=CallId(call_id), name=name, input=text, data=data),
        )

    def _continue(self, index: int, call: Block, name: str, whole: str) -> None:
        """A ``tool_use`` block right after the one that stopped, with its id:
        the same call continues (LiteLLM sends a block per argument fragment)."""
        if name and name != call.name:
            raise self.writer.malformed(
                "a tool_use block repeating a call's id with another name"
            )
        self._held = None
        self._joined.add(call)
        if whole:
            self.writer.append(call, whole)
        self.blocks[index] = call

    def _release(self) -> None:
        """End the held tool call: no block continues it.

        Raises:
            LlmError: ``MALFORMED_RESPONSE`` when the call was joined from several
                wire blocks and its arguments are not one JSON object (unless the
                output cap cut the answer).
        """
        call = self._held
        if call is None:
            return
        self._held = None
        if call in self._joined and not self._cut():
            try:
                whole = _json_decode(call.buffer.value())
            except (ValueError, RecursionError):
                whole = None
            if type(whole) is not dict:
                raise self.writer.malformed(
                    "tool_use blocks with one id whose joined input is not a "
                    "JSON object"
                )
        self.writer.end(call)

    def _delta(self, payload: dict[str, Any]) -> None:
        _, block = self.slot(payload, "delta")
        if block is _OPAQUE or block is _STOPPED:
            return
        if self._held is not None:
            self._release()
        assert isinstance(block, Block)
        delta = payload.get("delta")
        if type(delta) is not dict:
            raise self.writer.malformed("a content_block_delta without a delta object")
        delta_type = delta.get("type")
        if delta_type == "signature_delta":
            if block.kind is not REASONING or type(block.replay) is dict:
                raise self.writer.malformed(
                    f"a signature_delta on a {self._wire_kind(block)} block"
                )
            # The signature is whole, not a fragment: replace, never append.
            block.replay = self.string(delta, "signature")
            return
        expected = _DELTA_KINDS.get(delta_type) if type(delta_type) is str else None
        if expected is None:
            if delta_type == "citations_delta":
                self._citation(block, delta)
            return  # unknown deltas: metadata, not content
        kind, field = expected
        if block.kind is not kind or type(block.replay) is dict:
            if block.kind is SERVER_TOOL_CALL:
                # Its input is gathered, not streamed: the block goes out
                # whole at its stop.
                if delta_type == "input_json_delta":
                    pieces = self._server_calls[block][1]
                    pieces.append(self.string(delta, field))
                return
            raise self.writer.malformed(
                f"a {delta_type} on a {self._wire_kind(block)} block"
            )
        piece = self.string(delta, field)
        if piece:
            self.writer.append(block, piece)

    def _citation(self, block: Block, delta: dict[str, Any]) -> None:
        if block.kind is not TEXT:
            raise self.writer.malformed(
                f"a citations_delta on a {self._wire_kind(block)} block"
            )
        citation = citation_of(delta.get("citation"))
        if citation is not None:
            self.writer.cite(block, (citation,))

    def _whole_input(self, initial: object) -> str:
        if type(initial) is not dict or not initial:
            return ""
        try:
            return json.dumps(initial, ensure_ascii=False, allow_nan=False)
        except ValueError:
            # Arguments are JSON: NaN and Infinity are not (the other wires
            # refuse them too).
            raise self.writer.malformed(
                "a tool input with NaN or Infinity, which JSON cannot hold"
            ) from None

    @staticmethod
    def _wire_kind(block: Block) -> str:
        if block.kind is REASONING:
            return _REDACTED if type(block.replay) is dict else _THINKING
        return "tool_use" if block.kind is TOOL_CALL else TEXT

    def _stop(self, payload: dict[str, Any]) -> None:
        index, block = self.slot(payload, "content_block_stop")
        if block is _OPAQUE or block is _STOPPED:
            return
        assert isinstance(block, Block)
        self.blocks[index] = _STOPPED
        self._release()
        if block.kind is TOOL_CALL:
            self._held = block
        elif block.kind is SERVER_TOOL_CALL:
            self._server_call_end(block)
        else:
            self.writer.end(block)

    def _message_delta(self, payload: dict[str, Any]) -> None:
        delta = payload.get("delta")
        if delta is not None:
            if type(delta) is not dict:
                raise self.writer.malformed(
                    "a message_delta whose delta is not an object"
                )
            self._keep_stop_reason(delta)
            if delta.get("stop_details") is not None:
                self._stop_details = delta.get("stop_details")
        self._merge_usage(payload.get("usage"))
        self._release()

    def _message_stop(self) -> None:
        self._release()
        reason = self._stop_reason
        writer = self.writer
        if reason is None:
            raise writer.stream_closed(
                "stream reached message_stop without a stop_reason"
            )
        if self._cut():
            writer.finish(FinishReason.MAX_TOKENS, replay=self._replay_state)
        elif reason in _STOP_REASONS:
            writer.finish(FinishReason.STOP, replay=self._replay_state)
        else:
            writer.finish_unsuccessfully(self._failure(reason))

    # -- the end -----------------------------------------------------------------------

    def _cut(self) -> bool:
        """Whether the output cap cut the answer: the stop reason says so, or
        (with ``unmarked_cap``) the usage reached the cap under a stop reason
        that would otherwise be a success."""
        reason = self._stop_reason
        if reason in _CUT_REASONS:
            return True
        cap = self._unmarked_cap
        if cap is None or reason not in _STOP_REASONS:
            return False
        usage = self._mapped_usage()
        output = None if usage is None else usage.output_tokens
        return output is not None and output >= cap

    def _failure(self, reason: str) -> LlmFailure:
        if reason == "refusal":
            return LlmFailure(message=self._refusal_message(), code=REFUSAL_CODE)
        if reason == "pause_turn":
            return LlmFailure(
                message="model paused its turn (pause_turn); send the assistant "
                "turn back unchanged to continue it",
                code=PAUSE_TURN_CODE,
            )
        return stopped_failure(reason)

    def _refusal_message(self) -> str:
        details = self._stop_details
        category = details.get("category") if type(details) is dict else None
        if type(category) is str and category:
            return f"model stopped: refusal ({category[:64]})"
        return "model stopped: refusal"

    def _replay_state(self) -> ReplayEnvelope:
        entries: list[dict[str, str] | None] = []
        for block in self.writer.emitted:
            replay = block.replay
            if type(replay) is dict:
                entries.append(replay)
            elif replay:
                entries.append({"type": _THINKING, "signature": str(replay)})
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
