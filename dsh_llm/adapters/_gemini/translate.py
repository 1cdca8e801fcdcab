"""``GeminiTranslator``: ``streamGenerateContent?alt=sse`` events in, protocol
chunks out.

A pure state machine (no I/O, no redactor: the transport's read loop redacts
what it reports); the read loop feeds it one ``SseEvent`` at a time.
Contracts callers may rely on:

- ``feed(event)`` returns the chunks the event produced, in the strict order
  of ``docs/protocol.md``, and nothing once ``finished``; ``close()`` (end of
  body before the finish) raises ``LlmError`` ``STREAM_CLOSED``: Gemini has no
  end marker, its finish is a ``finishReason``, and a body without one was cut.
- A payload that is not JSON, not an object, or has a field of the wrong type
  raises ``LlmError`` ``MALFORMED_RESPONSE``.
- ``usage_so_far`` is the usage reported so far (``None`` before any).
- Codes of the ``error`` finishes: ``finish_failure`` (content filters are
  ``CONTENT_FILTER``, other reasons their own name, ``docs/gemini.md``); an
  error object in the stream is classified by
  ``dsh_llm.adapters._gemini.errors``.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Final

from dsh_llm.adapters._gemini.errors import gemini_stream_failure, parse_gemini_error
from dsh_llm.adapters._gemini.replay import REPLAY_WIRE
from dsh_llm.adapters.wire_values import (
    MAX_SAFE_INTEGER,
    unchecked_delta,
    wire_count,
)
from dsh_llm.errors import EMPTY_RESPONSE_CODE, ErrorCode, LlmError
from dsh_llm.protocol import (
    BlockEnd,
    BlockStart,
    CallId,
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
from dsh_llm.serde import compact_json
from dsh_llm.transport.sse import SseEvent

__all__ = [
    "CONTENT_FILTER_CODE",
    "CONTENT_FILTER_REASONS",
    "EMPTY_RESPONSE_MESSAGE",
    "MAX_SAFE_INTEGER",
    "GeminiTranslator",
    "finish_failure",
    "map_usage",
]

EMPTY_RESPONSE_MESSAGE: Final = "model returned a completed response with no content"
"""The message of the ``EMPTY_RESPONSE`` finish (the TypeScript harness's)."""
CONTENT_FILTER_CODE: Final = "CONTENT_FILTER"
"""The code of a finish (or a blocked prompt) stopped by one of Gemini's
filters: the same code an OpenAI ``content_filter`` finish gets."""
CONTENT_FILTER_REASONS: Final = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
    }
)
"""The ``finishReason`` values that are content filters."""

_PROVIDER: Final = "Gemini"
_IDENTIFIER: Final = re.compile(r"[A-Z0-9][A-Z0-9_]{0,63}")
_TEXT: Final = "text"
_REASONING: Final = "reasoning"
_json_decode = json.JSONDecoder().decode


def map_usage(usage: Mapping[str, Any]) -> TokenUsage:
    """Gemini ``usageMetadata`` to disjoint ``TokenUsage``.

    ``input = promptTokenCount - cachedContentTokenCount (+
    toolUsePromptTokenCount)``; ``cache_read = cachedContentTokenCount``;
    ``output = candidatesTokenCount + thoughtsTokenCount``; ``reasoning =
    thoughtsTokenCount``. Gemini omits zero counts: a missing candidates or
    thoughts count is taken as 0 only when ``totalTokenCount`` proves it, else
    the sum is ``None``. Not reported, not an int, negative or above
    ``MAX_SAFE_INTEGER`` is ``None``.
    """
    prompt = wire_count(usage.get("promptTokenCount"))
    cached = wire_count(usage.get("cachedContentTokenCount"))
    candidates = wire_count(usage.get("candidatesTokenCount"))
    thoughts = wire_count(usage.get("thoughtsTokenCount"))
    tool_prompt = wire_count(usage.get("toolUsePromptTokenCount"))
    total = wire_count(usage.get("totalTokenCount"))
    uncached = None
    if prompt is not None and (cached or 0) <= prompt:
        uncached = prompt - (cached or 0) + (tool_prompt or 0)
    proven = (
        total is not None
        and prompt is not None
        and total == prompt + (candidates or 0) + (tool_prompt or 0) + (thoughts or 0)
    )
    if proven:
        output: int | None = (candidates or 0) + (thoughts or 0)
    elif candidates is not None:
        output = candidates + (thoughts or 0)
    else:
        output = None
    if output is not None and output > MAX_SAFE_INTEGER:
        output = None
    return TokenUsage(
        input_tokens=uncached,
        output_tokens=output,
        cache_read_tokens=cached,
        reasoning_tokens=thoughts,
    )


def finish_failure(reason: str, message: str | None) -> LlmFailure:
    """The failure of a ``finishReason`` that is not ``STOP``/``MAX_TOKENS``.

    Content filters (``CONTENT_FILTER_REASONS``) get ``CONTENT_FILTER``; another
    reason that is a short upper-case identifier is its own code
    (``MALFORMED_FUNCTION_CALL``, ``OTHER``); anything else
    ``UNKNOWN_FINISH_REASON``. The message is ``"Gemini stopped: <reason>"``,
    with the candidate's ``finishMessage`` after a colon when given (each cut
    to 120 characters).
    """
    if reason in CONTENT_FILTER_REASONS:
        code = CONTENT_FILTER_CODE
    elif _IDENTIFIER.fullmatch(reason):
        code = reason
    else:
        code = ErrorCode.UNKNOWN_FINISH_REASON.value
    text = f"{_PROVIDER} stopped: {reason[:120]}"
    if message:
        text += f": {message[:120]}"
    return LlmFailure(message=text, code=code)


def _new_call_id(response_id: str | None, ordinal: int) -> str:
    if response_id:
        return f"call_{response_id}_{ordinal}"
    return f"call_{uuid.uuid4().hex[:24]}"


class _Open:
    """The text or reasoning block being streamed."""

    __slots__ = ("index", "kind", "parts")

    def __init__(self, kind: str, index: int) -> None:
        self.kind = kind
        self.index = index
        self.parts: list[str] = []


class GeminiTranslator:
    """Gemini stream events in, protocol chunks out, in strict order.

    - Text parts stream as a text block and ``thought: true`` parts as a
      reasoning block; a change of kind ends the open block and starts a new
      one (never reopened). Empty text opens nothing.
    - Each ``functionCall`` part is one tool-call block, started, given one
      delta with the whole arguments as compact JSON text (``{}`` when absent;
      key order kept) and ended at once; its id is Gemini's, else
      ``call_<responseId>_<n>`` (``call_<random hex>`` without a response id).
    - ``thoughtSignature`` on any part is kept for replay
      (``dsh_llm.adapters._gemini.replay``): on the part's own block; a
      signature on a part that opens no block (an empty text part, often in a
      later chunk) goes to the open text or reasoning block, else to the first
      call of the trailing run of calls when that one has none (a parallel
      step signs only its first call), else to the last block, or to the next
      block when none came yet. A block that already has one keeps it, and
      the signature-only part is kept verbatim after it. Server-side parts
      (``toolCall``, ``toolResponse``, ``executableCode``,
      ``codeExecutionResult``, ``inlineData``...) open no block: they end the
      open one and are kept verbatim for replay after the block they follow
      (text that resumes after them is a new block).
    - ``usageMetadata`` is a running total: each report is merged over the
      last, field by field (a chunk without it, or without a field, keeps
      the saved values).
    - Only candidate 0 is read. Its ``finishReason`` ends the response: every
      block is ended, then one ``usage`` (``TokenUsage.unknown()`` when none
      was reported), then the finish: ``STOP`` is ``tool-calls`` when a call
      was emitted, else ``stop``, or the ``EMPTY_RESPONSE`` error without any
      block (unless ``empty_response_as_stop``); ``MAX_TOKENS`` is
      ``max-tokens``; other reasons are ``error`` finishes
      (``finish_failure``). A successful finish carries the replay envelope
      when anything needs replaying.
    - ``promptFeedback.blockReason`` ends the response the same way, with the
      ``CONTENT_FILTER`` error (``"Gemini blocked the prompt: <reason>"``).
    - An error object in the stream (``{"error": {...}}``, or an SSE ``error``
      field) is data: it ends the response with one ``error`` finish, after
      the usage when one was reported and no block is open; open blocks stay
      open (their content must be discarded).

    Args:
        empty_response_as_stop: Report a blockless ``STOP`` as a plain ``stop``.
        new_call_id: Makes the id of a call Gemini gave none, from the
            response id (or ``None``) and the call's 0-based ordinal.
    """

    def __init__(
        self,
        *,
        empty_response_as_stop: bool = False,
        new_call_id: Callable[[str | None, int], str] = _new_call_id,
    ) -> None:
        self._empty_as_stop = empty_response_as_stop
        self._new_call_id = new_call_id
        self._next_index = 0
        self._open: _Open | None = None
        self._entries: list[dict[str, Any] | None] = []
        self._kinds: list[str] = []
        self._before: list[dict[str, Any]] = []
        self._pending_signature: str | None = None
        self._calls = 0
        self._response_id: str | None = None
        self._usage: dict[str, Any] | None = None
        self.finished = False
        """Whether the terminal ``Finish`` has been produced."""

    def before_failure(self) -> list[StreamChunk]:
        """The usage already reported, right before a raised failure."""
        usage = self.usage_so_far
        return [] if usage is None or self.finished else [UsageChunk(usage=usage)]

    @property
    def usage_so_far(self) -> TokenUsage | None:
        """The usage reported so far, or ``None`` when none was."""
        return None if self._usage is None else map_usage(self._usage)

    # -- input -------------------------------------------------------------------------

    def is_keepalive(self, event: SseEvent) -> bool:
        """An event with empty data carries nothing: it only keeps the
        connection alive."""
        return event.error is None and not event.data.strip()

    def feed(self, event: SseEvent) -> list[StreamChunk]:
        """Translate one SSE event (see the class docstring).

        Raises:
            LlmError: ``MALFORMED_RESPONSE`` for a payload of the wrong shape.
        """
        out: list[StreamChunk] = []
        if self.finished:
            return out
        if event.error is not None:
            report = parse_gemini_error({"error": event.error}) or {}
            self._fail(gemini_stream_failure(report), out)
            return out
        data = event.data
        if not data or data.isspace():
            return out
        error: LlmError | None = None
        try:
            payload = _json_decode(data)
        except (ValueError, RecursionError) as exc:
            # The decoder's own error keeps the whole payload (which may hold
            # an echoed secret) as ``doc``: only its message is kept, and the
            # error is raised outside this block so the original is no context.
            error = LlmError(
                f"malformed SSE payload from {_PROVIDER}: {data[:120]}",
                ErrorCode.MALFORMED_RESPONSE,
                cause=ValueError(str(exc)),
            )
        if error is not None:
            raise error
        if type(payload) is list:
            # Vertex and Code Assist wrap responses (and errors) in an array.
            for item in payload:
                self._payload(item, out)
        else:
            self._payload(payload, out)
        return out

    def close(self) -> list[StreamChunk]:
        """The body ended.

        Raises:
            LlmError: ``STREAM_CLOSED`` unless the response had finished.
        """
        if self.finished:
            return []
        raise LlmError(
            f"{_PROVIDER} stream ended without a finishReason (the answer was cut "
            "short)",
            ErrorCode.STREAM_CLOSED,
        )

    def _payload(self, payload: Any, out: list[StreamChunk]) -> None:
        if self.finished:
            return
        if type(payload) is not dict:
            raise self._malformed("a payload that is not a JSON object")
        if "error" in payload:
            report = parse_gemini_error(payload)
            if report is not None:
                self._fail(gemini_stream_failure(report), out)
                return
        response_id = payload.get("responseId")
        if type(response_id) is str and response_id and self._response_id is None:
            self._response_id = response_id
        usage = payload.get("usageMetadata")
        if usage is not None:
            if type(usage) is not dict:
                raise self._malformed("a usageMetadata that is not an object")
            if None in usage.values():
                usage = {k: v for k, v in usage.items() if v is not None}
            saved = self._usage
            # Running totals usually repeat every earlier field: keep the new
            # report as is, and merge only when it lacks one.
            if saved is None or saved.keys() <= usage.keys():
                self._usage = usage
            else:
                self._usage = {**saved, **usage}
        candidates = payload.get("candidates")
        if candidates is not None and type(candidates) is not list:
            raise self._malformed("a candidates field that is not a list")
        for candidate in candidates or ():
            if type(candidate) is not dict:
                raise self._malformed("a candidate that is not an object")
            index = candidate.get("index", 0)
            if type(index) is not int:
                raise self._malformed("a candidate index that is not an integer")
            if index == 0:
                self._candidate(candidate, out)
                return
        feedback = payload.get("promptFeedback")
        if feedback is not None:
            if type(feedback) is not dict:
                raise self._malformed("a promptFeedback that is not an object")
            reason = feedback.get("blockReason")
            if reason is not None:
                if type(reason) is not str:
                    raise self._malformed("a blockReason that is not a string")
                if not reason:
                    return
                failure = LlmFailure(
                    message=f"{_PROVIDER} blocked the prompt: {reason[:120]}",
                    code=CONTENT_FILTER_CODE,
                )
                self._end(FinishReason.error(failure), out)

    def _candidate(self, candidate: dict[str, Any], out: list[StreamChunk]) -> None:
        content = candidate.get("content")
        if content is not None:
            if type(content) is not dict:
                raise self._malformed("a candidate content that is not an object")
            parts = content.get("parts")
            if parts is not None:
                if type(parts) is not list:
                    raise self._malformed("content parts that are not a list")
                for part in parts:
                    if type(part) is not dict:
                        raise self._malformed("a part that is not an object")
                    self._part(part, out)
        reason = candidate.get("finishReason")
        if reason is None:
            return
        if type(reason) is not str:
            raise self._malformed("a finishReason that is not a string")
        if not reason:
            return
        message = candidate.get("finishMessage")
        if message is not None and type(message) is not str:
            raise self._malformed("a finishMessage that is not a string")
        self._end(self._finish_reason(reason, message), out)

    def _finish_reason(self, reason: str, message: str | None) -> FinishReason:
        if reason == "STOP":
            if self._calls:
                return FinishReason.TOOL_CALLS
            if self._next_index == 0 and not self._empty_as_stop:
                return FinishReason.error(
                    LlmFailure(message=EMPTY_RESPONSE_MESSAGE, code=EMPTY_RESPONSE_CODE)
                )
            return FinishReason.STOP
        if reason == "MAX_TOKENS":
            return FinishReason.MAX_TOKENS
        return FinishReason.error(finish_failure(reason, message))

    # -- parts -------------------------------------------------------------------------

    def _part(self, part: dict[str, Any], out: list[StreamChunk]) -> None:
        signature = part.get("thoughtSignature")
        if signature is not None and type(signature) is not str:
            raise self._malformed("a thoughtSignature that is not a string")
        call = part.get("functionCall")
        if call is not None:
            self._call(call, signature, out)
            return
        text = part.get("text")
        if text is None:
            # A server-side part (toolCall, executableCode...): replay state,
            # kept after the block before it, so that block ends here.
            self._close_open(out)
            self._keep(part)
            return
        if type(text) is not str:
            raise self._malformed("a text part that is not a string")
        thought = part.get("thought", False)
        if type(thought) is not bool:
            raise self._malformed("a thought flag that is not a boolean")
        if not text:
            if signature:
                self._loose_signature(part, signature)
            return
        kind = _REASONING if thought else _TEXT
        segment = self._open
        if segment is None or segment.kind != kind:
            self._close_open(out)
            segment = self._start(kind, out)
        segment.parts.append(text)
        out.append(
            unchecked_delta(
                ReasoningDelta if kind is _REASONING else TextDelta, segment.index, text
            )
        )
        if signature:
            self._sign(segment.index, part, signature)

    def _call(
        self, call: object, signature: str | None, out: list[StreamChunk]
    ) -> None:
        if type(call) is not dict:
            raise self._malformed("a functionCall that is not an object")
        name = call.get("name")
        if type(name) is not str or not name:
            raise self._malformed("a functionCall without a name")
        args = call.get("args")
        if args is not None and type(args) is not dict:
            raise self._malformed("functionCall args that are not an object")
        wire_id = call.get("id")
        if wire_id is not None and type(wire_id) is not str:
            raise self._malformed("a functionCall id that is not a string")
        try:
            arguments = "{}" if not args else compact_json(args)
        except ValueError:
            raise self._malformed("functionCall args with NaN or Infinity") from None
        self._close_open(out)
        call_id = wire_id or self._new_call_id(self._response_id, self._calls)
        self._calls += 1
        index = self._new_block("tool-call")
        entry: dict[str, Any] = {"callId": call_id}
        if wire_id:
            entry["id"] = wire_id
        self._entries[index] = entry
        self._adopt_pending(index)
        out.append(BlockStart(index=index, block_type="tool-call"))
        out.append(
            ToolCallDelta(
                index=index, id=CallId(call_id), name=name, arguments_delta=arguments
            )
        )
        out.append(
            BlockEnd(
                index=index,
                block=ToolCallBlock(id=CallId(call_id), name=name, arguments=arguments),
            )
        )
        if signature:
            self._sign(
                index, {"functionCall": call, "thoughtSignature": signature}, signature
            )

    # -- replay state ---------------------------------------------------------------

    def _entry(self, index: int) -> dict[str, Any]:
        entry = self._entries[index]
        if entry is None:
            entry = self._entries[index] = {}
        return entry

    def _sign(self, index: int, part: dict[str, Any], signature: str) -> None:
        entry = self._entry(index)
        if "thoughtSignature" in entry:
            entry.setdefault("after", []).append(part)
        else:
            entry["thoughtSignature"] = signature

    def _loose_signature(self, part: dict[str, Any], signature: str) -> None:
        """A signature on a part that opens no block (see the class docstring)."""
        if self._open is not None:
            self._sign(self._open.index, part, signature)
            return
        if not self._kinds:
            if self._pending_signature is None:
                self._pending_signature = signature
            else:
                self._before.append(part)
            return
        first = len(self._kinds)
        while first > 0 and self._kinds[first - 1] == "tool-call":
            first -= 1
        if first < len(self._kinds):
            entry = self._entry(first)
            if "thoughtSignature" not in entry:
                entry["thoughtSignature"] = signature
                return
        self._sign(len(self._kinds) - 1, part, signature)

    def _keep(self, part: dict[str, Any]) -> None:
        if self._kinds:
            self._entry(len(self._kinds) - 1).setdefault("after", []).append(part)
        else:
            self._before.append(part)

    def _adopt_pending(self, index: int) -> None:
        if self._pending_signature is not None:
            self._entry(index)["thoughtSignature"] = self._pending_signature
            self._pending_signature = None

    def _replay(self) -> ReplayEnvelope | None:
        entries = [
            entry if entry and set(entry) != {"callId"} else None
            for entry in self._entries
        ]
        if not self._before and all(entry is None for entry in entries):
            return None
        response: dict[str, Any] = {"wire": REPLAY_WIRE}
        if self._before:
            response["before"] = self._before
        return ReplayEnvelope(response=response, blocks=entries)

    # -- blocks -----------------------------------------------------------------------

    def _new_block(self, kind: str) -> int:
        index = self._next_index
        self._next_index += 1
        self._entries.append(None)
        self._kinds.append(kind)
        return index

    def _start(self, kind: str, out: list[StreamChunk]) -> _Open:
        segment = _Open(kind, self._new_block(kind))
        self._open = segment
        self._adopt_pending(segment.index)
        out.append(BlockStart(index=segment.index, block_type=kind))
        return segment

    def _close_open(self, out: list[StreamChunk]) -> None:
        segment = self._open
        if segment is None:
            return
        self._open = None
        text = "".join(segment.parts)
        block = (
            ReasoningBlock(text=text)
            if segment.kind is _REASONING
            else TextBlock(text=text)
        )
        out.append(BlockEnd(index=segment.index, block=block))

    def _end(self, reason: FinishReason, out: list[StreamChunk]) -> None:
        self._close_open(out)
        usage = TokenUsage.unknown() if self._usage is None else map_usage(self._usage)
        out.append(UsageChunk(usage=usage))
        replay = None if reason.is_failure else self._replay()
        out.append(Finish(reason=reason, replay_state=replay))
        self.finished = True

    def _fail(self, failure: LlmFailure, out: list[StreamChunk]) -> None:
        if self._usage is not None and self._open is None:
            out.append(UsageChunk(usage=map_usage(self._usage)))
        out.append(Finish(reason=FinishReason.error(failure)))
        self.finished = True

    def _malformed(self, what: str) -> LlmError:
        return LlmError(
            f"{_PROVIDER} sent {what} in its stream", ErrorCode.MALFORMED_RESPONSE
        )
