"""``ConverseStreamTranslator``: Bedrock ConverseStream frames in, what the wire
said out, to a ``BlockWriter`` (which writes the protocol's chunks).

A pure state machine fed one decoded ``EventMessage`` at a time by the
transport's read loop; no I/O, no redaction (the read loop redacts failure
messages). The wire, the stop-reason table and the citation locations:
``docs/bedrock.md``, "Stream".

Contracts callers may rely on:

- An ``event`` frame is dispatched on its ``:event-type``; its payload is a
  JSON object (else ``MALFORMED_RESPONSE``, as for a known field of the wrong
  type). Unknown event types and delta kinds, and blocks the protocol has no
  place for (server tool uses and results, images) are passed over.
- A ``citation`` delta is a citation of its text block (``converse_citation``).
- A text or reasoning block opens with its first delta (Converse sends no
  ``contentBlockStart`` for them); a tool call with its ``contentBlockStart``.
- The stream ends at ``metadata`` (the usage), which Bedrock sends after
  ``messageStop``: the finish is written once both came. A body that ends
  without them is a cut answer (``STREAM_CLOSED``), never a success.
- An ``exception`` or ``error`` frame raises its failure
  (``errors.stream_failure``), after the usage already reported.
- ``max_tokens`` and ``model_context_window_exceeded`` are ``max-tokens``;
  ``content_filtered`` is ``CONTENT_FILTER``, ``guardrail_intervened``
  ``GUARDRAIL_INTERVENED``, another unsuccessful reason its name upper-cased.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any
from typing import Final

from dsh_llm.adapters._wire.indexed import IndexedTranslator
from dsh_llm.adapters._wire.values import wire_count
from dsh_llm.adapters._wire.values import wire_text
from dsh_llm.adapters._wire.writer import REASONING
from dsh_llm.adapters._wire.writer import TEXT
from dsh_llm.adapters._wire.writer import TOOL_CALL
from dsh_llm.adapters._wire.writer import Block
from dsh_llm.adapters._wire.writer import stopped_failure
from dsh_llm.adapters.bedrock.errors import error_code
from dsh_llm.adapters.bedrock.errors import stream_failure
from dsh_llm.adapters.bedrock.request import REASONING_TEXT
from dsh_llm.adapters.bedrock.request import REDACTED_CONTENT
from dsh_llm.adapters.bedrock.request import WIRE_FAMILY
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import Citation
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import LlmFailure
from dsh_llm.protocol import ReplayEnvelope
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TokenUsage
from dsh_llm.transport.eventstream import EventMessage

CONTENT_FILTER_CODE: Final = "CONTENT_FILTER"
"""The code of the ``error`` finish after ``stopReason: "content_filtered"`` (the
code the other families give a content filter)."""
GUARDRAIL_CODE: Final = "GUARDRAIL_INTERVENED"
"""The code of the ``error`` finish after ``stopReason: "guardrail_intervened"``
(a Bedrock guardrail of the caller's blocked the answer)."""

_STOP_REASONS: Final = frozenset({"end_turn", "stop_sequence", "tool_use"})
_CUT_REASONS: Final = frozenset({"max_tokens", "model_context_window_exceeded"})
_CODES: Final = {
    "content_filtered": CONTENT_FILTER_CODE,
    "guardrail_intervened": GUARDRAIL_CODE,
}
"""The stop reasons with a code of their own (another's is upper-cased)."""
_OPAQUE: Final = object()
"""A block the protocol has no place for (server tool uses and results, images):
tracked by index so its deltas are recognised, never emitted."""

_json_decode = json.JSONDecoder().decode


def map_usage(usage: dict[str, Any]) -> TokenUsage:
    """Converse ``usage`` to disjoint ``TokenUsage``: ``inputTokens`` excludes the
    cache reads (``cacheReadInputTokens``) and writes
    (``cacheWriteInputTokens``); reasoning is not reported apart. A count not
    reported or not a non-negative int is ``None``."""
    return TokenUsage(
        input_tokens=wire_count(usage.get("inputTokens")),
        output_tokens=wire_count(usage.get("outputTokens")),
        cache_read_tokens=wire_count(usage.get("cacheReadInputTokens")),
        cache_write_tokens=wire_count(usage.get("cacheWriteInputTokens")),
    )


class ConverseStreamTranslator(IndexedTranslator[EventMessage]):
    """ConverseStream frames in, protocol chunks out, in strict order.

    The successful finish (``stop``, ``tool-calls``, ``max-tokens``) carries a
    ``ReplayEnvelope``: ``response`` is ``{"wire": WIRE_FAMILY, "model": <the
    model asked for>}`` and ``blocks`` has one entry per emitted block:
    ``{"type": "reasoningText", "signature": ...}``, ``{"type":
    "redactedContent", "data": <base64>}``, or ``None``.

    Args:
        provider: Display name used in messages.
        model: The model id the request named (kept in the replay envelope).
        empty_response_as_stop: Report a blockless ``end_turn`` as a plain
            ``stop`` instead of ``EMPTY_RESPONSE``.
    """

    end_marker = "its metadata event"
    index_field = "contentBlockIndex"
    index_name = "contentBlockIndex"
    start_event = "contentBlockStart"

    def __init__(
        self,
        *,
        provider: str = "Amazon Bedrock",
        model: str | None = None,
        empty_response_as_stop: bool = False,
    ) -> None:
        super().__init__(
            provider=provider, empty_response_as_stop=empty_response_as_stop
        )
        self._model = model
        # Redacted reasoning arrives as base64 blobs; their bytes are joined.
        self._redacted: dict[int, bytearray] = {}
        self._stop_reason: str | None = None
        self._metadata = False

    # -- input -------------------------------------------------------------------------

    def feed(self, event: EventMessage) -> list[StreamChunk]:
        """Translate one frame (see the module docstring)."""
        writer = self.writer
        if writer.finished:
            return []
        kind = event.message_type
        if kind == "event":
            name = event.event_type or ""
            handle = self._EVENTS.get(name)
            if handle is not None:
                handle(self, self._payload(event, name))
        elif kind == "exception":
            exception = event.exception_type or ""
            payload = self._payload(event, exception or "exception")
            raise LlmError.from_failure(
                stream_failure(exception, payload, provider=writer.provider)
            )
        elif kind == "error":
            raise self._error_frame(event)
        else:
            raise writer.malformed("a frame without a :message-type header")
        return writer.take()

    def _payload(self, event: EventMessage, name: str) -> Any:
        data = event.payload
        try:
            value = _json_decode(data.decode("utf-8"))
        except (ValueError, RecursionError) as exc:
            # Only the decoder's message: its error keeps the whole payload.
            reason = str(exc)
        else:
            if type(value) is dict:
                return value
            raise self.writer.malformed(f"a {name} payload that is not an object")
        raise LlmError(
            f"malformed {name} payload from {self.provider}: {data[:120]!r}",
            ErrorCode.MALFORMED_RESPONSE,
            cause=ValueError(reason),
        )

    def _error_frame(self, event: EventMessage) -> LlmError:
        code = event.headers.get(":error-code")
        message = event.headers.get(":error-message")
        name = code if type(code) is str else ""
        text = message if type(message) is str and message else ""
        text = text or f"{self.provider} stream reported an error {name}".rstrip()
        return LlmError(text, error_code(None, name, text))

    # -- events ------------------------------------------------------------------------

    def _message_start(self, payload: dict[str, Any]) -> None:
        role = payload.get("role")
        if role is not None and role != "assistant":
            raise self.writer.malformed(f"a messageStart for the role {role!r}")

    def _start(self, payload: dict[str, Any]) -> None:
        index = self.new_index(payload)
        start = payload.get("start")
        if type(start) is not dict:
            raise self.writer.malformed("a contentBlockStart without a start object")
        tool = start.get("toolUse")
        if tool is not None and type(tool) is not dict:
            raise self.writer.malformed("a toolUse start that is not an object")
        if tool is None or tool.get("type") == "server_tool_use":
            # A server-side tool, its result or an image: no place in the protocol.
            self.blocks[index] = _OPAQUE
            return
        self.blocks[index] = self.writer.open(
            TOOL_CALL,
            call_id=self.string(tool, "toolUseId"),
            name=self.string(tool, "name"),
        )

    def _delta(self, payload: dict[str, Any]) -> None:
        index, block = self.slot(payload)
        delta = payload.get("delta")
        if type(delta) is not dict:
            raise self.writer.malformed("a contentBlockDelta without a delta object")
        if block is _OPAQUE:
            return
        if "text" in delta:
            piece = self.string(delta, "text")
            self._extend(index, block, TEXT, piece)
        elif "toolUse" in delta:
            tool = delta["toolUse"]
            if type(tool) is not dict:
                raise self.writer.malformed("a toolUse delta that is not an object")
            if block is None:
                raise self.writer.malformed(
                    f"a toolUse delta for block {index}, which never started"
                )
            self._extend(index, block, TOOL_CALL, self.string(tool, "input"))
        elif "reasoningContent" in delta:
            self._reasoning(index, block, delta["reasoningContent"])
        elif "citation" in delta:
            citation = converse_citation(delta["citation"])
            if citation is not None:
                self._extend(index, block, TEXT, "")
                cited = self.blocks[index]
                assert isinstance(cited, Block)
                self.writer.cite(cited, (citation,))

    def _extend(self, index: int, block: object, kind: str, piece: str) -> None:
        writer = self.writer
        if block is None:
            if kind == TOOL_CALL:
                raise writer.malformed(f"a delta for block {index}, never started")
            self.blocks[index] = writer.open(TEXT if kind == TEXT else REASONING)
            block = self.blocks[index]
        assert isinstance(block, Block)
        if block.kind != kind or index in self._redacted:
            raise writer.malformed(
                f"a {self._label(kind)} delta on a {self._label(block.kind)} block"
            )
        if block.ended:
            raise writer.malformed(f"a delta for block {index} after its stop")
        if piece:
            writer.append(block, piece)

    @staticmethod
    def _label(kind: str) -> str:
        return {TEXT: "text", TOOL_CALL: "toolUse"}.get(kind, "reasoningContent")

    def _reasoning(self, index: int, block: object, value: object) -> None:
        if type(value) is not dict:
            raise self.writer.malformed(
                "a reasoningContent delta that is not an object"
            )
        if "redactedContent" in value:
            self._redacted_delta(index, block, value)
            return
        if "text" in value:
            self._extend(index, block, REASONING, self.string(value, "text"))
            block = self.blocks[index]
        if "signature" in value:
            if block is None:
                self._extend(index, None, REASONING, "")
                block = self.blocks[index]
            assert isinstance(block, Block)
            if block.kind != REASONING or index in self._redacted:
                raise self.writer.malformed(
                    f"a reasoning signature on a {self._label(block.kind)} block"
                )
            # The signature is whole, not a fragment: replace, never append.
            block.replay = {
                "type": REASONING_TEXT,
                "signature": self.string(value, "signature"),
            }

    def _redacted_delta(self, index: int, block: object, value: dict[str, Any]) -> None:
        data = self.string(value, "redactedContent")
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise self.writer.malformed(
                "a redactedContent that is not base64"
            ) from None
        if block is None:
            block = self.writer.open(REASONING)
            self.blocks[index] = block
            self._redacted[index] = bytearray()
        assert isinstance(block, Block)
        if index not in self._redacted or block.ended:
            raise self.writer.malformed(
                f"redacted reasoning on a {self._label(block.kind)} block"
            )
        joined = self._redacted[index]
        joined += raw
        block.replay = {
            "type": REDACTED_CONTENT,
            "data": base64.b64encode(joined).decode("ascii"),
        }

    def _stop(self, payload: dict[str, Any]) -> None:
        index, block = self.slot(payload)
        if block is None:
            # A block that never had a delta: an empty text block, nothing to end.
            self.blocks[index] = _OPAQUE
        elif block is not _OPAQUE:
            assert isinstance(block, Block)
            self.writer.end(block)

    def _message_stop(self, payload: dict[str, Any]) -> None:
        reason = payload.get("stopReason")
        if type(reason) is not str or not reason:
            raise self.writer.malformed("a messageStop without a stopReason")
        if self._stop_reason is not None:
            raise self.writer.malformed("a second messageStop")
        self._stop_reason = reason
        if self._metadata:
            self._finish()

    def _metadata_event(self, payload: dict[str, Any]) -> None:
        usage = payload.get("usage")
        if usage is not None:
            if type(usage) is not dict:
                raise self.writer.malformed("a usage that is not an object")
            self.writer.report_usage(map_usage(usage))
        self._metadata = True
        if self._stop_reason is not None:
            self._finish()

    _EVENTS: Final[
        Mapping[str, Callable[[ConverseStreamTranslator, dict[str, Any]], None]]
    ] = {
        "contentBlockDelta": _delta,
        "contentBlockStart": _start,
        "contentBlockStop": _stop,
        "messageStart": _message_start,
        "messageStop": _message_stop,
        "metadata": _metadata_event,
    }
    """The handler of each event frame by ``:event-type`` (others are passed over)."""

    # -- the end -----------------------------------------------------------------------

    def _finish(self) -> None:
        reason = self._stop_reason
        assert reason is not None
        writer = self.writer
        if reason in _CUT_REASONS:
            writer.finish(FinishReason.MAX_TOKENS, replay=self._replay_state)
        elif reason in _STOP_REASONS:
            writer.finish(FinishReason.STOP, replay=self._replay_state)
        else:
            writer.finish_unsuccessfully(self._failure(reason))

    def close(self) -> list[StreamChunk]:
        """The body ended: ``STREAM_CLOSED`` unless both ``messageStop`` and
        ``metadata`` came (the message names which is missing)."""
        if self.finished:
            return []
        if self._stop_reason is not None:
            raise self.writer.stream_closed(
                "stream ended after messageStop, before its metadata event (usage)"
            )
        return super().close()

    @staticmethod
    def _failure(reason: str) -> LlmFailure:
        return stopped_failure(reason, code=_CODES.get(reason))

    def _replay_state(self) -> ReplayEnvelope:
        return ReplayEnvelope(
            response={"wire": WIRE_FAMILY, "model": self._model},
            blocks=tuple(block.replay for block in self.writer.emitted),
        )


_LOCATIONS: Final = {
    "documentChar": "char_location",
    "documentPage": "page_location",
    "documentChunk": "content_block_location",
    "searchResultLocation": "search_result_location",
}
"""Converse's document location kinds and the citation kind of each."""


def converse_citation(delta: object) -> Citation | None:
    """The ``Citation`` of a ConverseStream ``CitationsDelta`` (see the module
    docstring), ``None`` for one whose location this does not know."""
    if type(delta) is not dict:
        return None
    location = delta.get("location")
    if type(location) is not dict or len(location) != 1:
        return None
    ((member, where),) = location.items()
    if type(where) is not dict:
        return None
    title = delta.get("title")
    pieces = delta.get("sourceContent")
    texts = (
        [p["text"] for p in pieces if type(p) is dict and type(p.get("text")) is str]
        if type(pieces) is list
        else []
    )
    common: dict[str, Any] = {
        "title": wire_text(title),
        "cited_text": "".join(texts) if texts else None,
    }
    if member == "web":
        url = where.get("url")
        return Citation(kind="url", url=wire_text(url), **common)
    kind = _LOCATIONS.get(member)
    if kind is None:
        return None
    source = where.get(
        "searchResultIndex" if member == "searchResultLocation" else "documentIndex"
    )
    url = delta.get("source") if member == "searchResultLocation" else None
    return Citation(
        kind=kind,
        url=wire_text(url),
        source_index=wire_count(source),
        start=wire_count(where.get("start")),
        end=wire_count(where.get("end")),
        **common,
    )
