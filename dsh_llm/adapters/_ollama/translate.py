"""``OllamaTranslator``: ``/api/chat`` NDJSON objects in, protocol chunks out.

A pure state machine; the transport's read loop decodes the body with
``dsh_llm.transport.ndjson.NdjsonDecoder`` and feeds one JSON value per line.
Contracts callers may rely on:

- ``feed(value)`` returns the chunks the line produced, in the strict order of
  ``docs/protocol.md``, and nothing once ``finished``; ``close()`` (end of body
  before the ``done: true`` line) raises ``LlmError`` ``STREAM_CLOSED``.
- A value that is not an object, or a field of the wrong type, raises
  ``LlmError`` ``MALFORMED_RESPONSE``.
- ``usage_so_far`` is ``None`` until the ``done: true`` line (Ollama reports
  its counts there only).
- Codes of the ``error`` finishes: ``EMPTY_RESPONSE`` (a blockless ``stop``, a
  ``load``/``unload`` answer), ``STREAM_CLOSED`` (``done: true`` without a
  ``done_reason``), another reason upper-cased; an ``error`` line is
  classified by ``dsh_llm.adapters._ollama.errors``.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from typing import Any, Final

from dsh_llm.adapters._ollama.errors import ollama_stream_failure
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
    StreamChunk,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
    UsageChunk,
)
from dsh_llm.serde import compact_json

__all__ = [
    "EMPTY_RESPONSE_MESSAGE",
    "MAX_SAFE_INTEGER",
    "NOT_AN_ANSWER_MESSAGE",
    "NO_DONE_REASON_MESSAGE",
    "OllamaTranslator",
    "map_usage",
]

EMPTY_RESPONSE_MESSAGE: Final = "model returned a completed response with no content"
"""The message of the ``EMPTY_RESPONSE`` finish (the TypeScript harness's)."""
NOT_AN_ANSWER_MESSAGE: Final = "Ollama answered with done_reason {reason!r}, not a chat"
"""The ``EMPTY_RESPONSE`` message for a ``load``/``unload`` answer."""
NO_DONE_REASON_MESSAGE: Final = (
    "Ollama ended the answer without a done_reason (the runner's connection closed)"
)
"""The ``STREAM_CLOSED`` message for a ``done: true`` line without a reason."""

_PROVIDER: Final = "Ollama"
_IDENTIFIER: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}")
_TEXT: Final = "text"
_REASONING: Final = "reasoning"


def map_usage(line: dict[str, Any]) -> TokenUsage:
    """The counts of a ``done: true`` line: ``prompt_eval_count`` is input,
    ``eval_count`` output. Ollama omits a zero, so an absent count is ``None``;
    so is one that is not an int, negative or above ``MAX_SAFE_INTEGER``.
    Ollama reports no cache or reasoning split."""
    return TokenUsage(
        input_tokens=wire_count(line.get("prompt_eval_count")),
        output_tokens=wire_count(line.get("eval_count")),
    )


def _new_call_id(ordinal: int) -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


class _Open:
    __slots__ = ("index", "kind", "parts")

    def __init__(self, kind: str, index: int) -> None:
        self.kind = kind
        self.index = index
        self.parts: list[str] = []


class OllamaTranslator:
    """Ollama ``/api/chat`` lines in, protocol chunks out, in strict order.

    - Per line, ``message.thinking`` streams as reasoning, then
      ``message.content`` as text, then each of ``message.tool_calls``; a
      change of kind ends the open block and starts a new one (never
      reopened). Empty text opens nothing; ``<think>`` tags left in
      ``content`` stay text.
    - A tool call arrives whole: one block, started, given one delta with the
      arguments re-serialised once as compact JSON (key order kept; ``{}``
      when absent or empty; a string is taken as the JSON text it is) and
      ended at once. Its id is Ollama's, else one made by ``new_call_id``
      (``call_<random hex>`` by default).
    - ``done: true`` ends the response: blocks end, one ``usage``
      (``map_usage``), then the finish: ``stop`` is ``tool-calls`` when a call
      was emitted, else ``stop``, or the ``EMPTY_RESPONSE`` error without any
      block (unless ``empty_response_as_stop``); ``length`` is ``max-tokens``;
      ``load``/``unload`` are ``EMPTY_RESPONSE`` errors; a missing
      ``done_reason`` is the ``STREAM_CLOSED`` error (never a success);
      another reason an error coded as the upper-cased reason
      (``UNKNOWN_FINISH_REASON`` when it is not a short identifier).
    - An ``{"error": ...}`` line is data: one ``error`` finish, blocks left
      open (Ollama reports no usage before ``done``).
    - Other fields (``model``, ``created_at``, ``remote_model``,
      ``remote_host``, ``logprobs``, durations) are ignored.

    Args:
        empty_response_as_stop: Report a blockless ``stop`` as a plain ``stop``.
        new_call_id: Makes the id of a call Ollama gave none, from the call's
            0-based ordinal.
    """

    def __init__(
        self,
        *,
        empty_response_as_stop: bool = False,
        new_call_id: Callable[[int], str] = _new_call_id,
    ) -> None:
        self._empty_as_stop = empty_response_as_stop
        self._new_call_id = new_call_id
        self._next_index = 0
        self._open: _Open | None = None
        self._calls = 0
        self._usage: TokenUsage | None = None
        self.finished = False
        """Whether the terminal ``Finish`` has been produced."""

    def before_failure(self) -> list[StreamChunk]:
        """The usage already reported, right before a raised failure."""
        usage = self.usage_so_far
        return [] if usage is None or self.finished else [UsageChunk(usage=usage)]

    @property
    def usage_so_far(self) -> TokenUsage | None:
        """The usage reported so far, or ``None`` before the ``done`` line."""
        return self._usage

    def is_keepalive(self, value: Any) -> bool:
        """Never: Ollama sends no keep-alive lines, every line is progress."""
        return False

    def feed(self, value: Any) -> list[StreamChunk]:
        """Translate one decoded NDJSON line (see the class docstring).

        Raises:
            LlmError: ``MALFORMED_RESPONSE`` for a line of the wrong shape.
        """
        out: list[StreamChunk] = []
        if self.finished:
            return out
        if type(value) is not dict:
            raise self._malformed("a line that is not a JSON object")
        error = value.get("error")
        if error is not None and error != "":
            self._fail(ollama_stream_failure(error), out)
            return out
        message = value.get("message")
        if message is not None:
            if type(message) is not dict:
                raise self._malformed("a message that is not an object")
            self._message(message, out)
        done = value.get("done", False)
        if type(done) is not bool:
            raise self._malformed("a done flag that is not a boolean")
        if done:
            self._done(value, out)
        return out

    def close(self) -> list[StreamChunk]:
        """The body ended.

        Raises:
            LlmError: ``STREAM_CLOSED`` unless the ``done: true`` line came.
        """
        if self.finished:
            return []
        raise LlmError(
            f"{_PROVIDER} stream ended before its done line (the answer was cut short)",
            ErrorCode.STREAM_CLOSED,
        )

    # -- lines -------------------------------------------------------------------------

    def _message(self, message: dict[str, Any], out: list[StreamChunk]) -> None:
        for field, kind in (("thinking", _REASONING), ("content", _TEXT)):
            text = message.get(field)
            if text is None:
                continue
            if type(text) is not str:
                raise self._malformed(f"a message {field} that is not a string")
            if text:
                self._text(kind, text, out)
        calls = message.get("tool_calls")
        if calls is None:
            return
        if type(calls) is not list:
            raise self._malformed("tool_calls that are not a list")
        for call in calls:
            if type(call) is not dict:
                raise self._malformed("a tool call that is not an object")
            self._call(call, out)

    def _text(self, kind: str, text: str, out: list[StreamChunk]) -> None:
        segment = self._open
        if segment is None or segment.kind != kind:
            self._close_open(out)
            segment = self._open = _Open(kind, self._next_index)
            self._next_index += 1
            out.append(BlockStart(index=segment.index, block_type=kind))
        segment.parts.append(text)
        out.append(
            unchecked_delta(
                ReasoningDelta if kind is _REASONING else TextDelta, segment.index, text
            )
        )

    def _call(self, call: dict[str, Any], out: list[StreamChunk]) -> None:
        function = call.get("function")
        if type(function) is not dict:
            raise self._malformed("a tool call without a function object")
        name = function.get("name")
        if type(name) is not str or not name:
            raise self._malformed("a tool call without a name")
        arguments = function.get("arguments")
        if arguments is None or arguments == {}:
            text = "{}"
        elif type(arguments) is dict:
            try:
                text = compact_json(arguments)
            except ValueError:
                raise self._malformed(
                    "tool call arguments with NaN or Infinity"
                ) from None
        elif type(arguments) is str:
            text = arguments if arguments.strip() else "{}"
        else:
            raise self._malformed("tool call arguments that are not an object")
        wire_id = call.get("id")
        if wire_id is not None and type(wire_id) is not str:
            raise self._malformed("a tool call id that is not a string")
        call_id = CallId(wire_id or self._new_call_id(self._calls))
        self._calls += 1
        self._close_open(out)
        index = self._next_index
        self._next_index += 1
        out.append(BlockStart(index=index, block_type="tool-call"))
        out.append(
            ToolCallDelta(index=index, id=call_id, name=name, arguments_delta=text)
        )
        out.append(
            BlockEnd(
                index=index, block=ToolCallBlock(id=call_id, name=name, arguments=text)
            )
        )

    def _done(self, line: dict[str, Any], out: list[StreamChunk]) -> None:
        reason = line.get("done_reason")
        if reason is not None and type(reason) is not str:
            raise self._malformed("a done_reason that is not a string")
        self._close_open(out)
        self._usage = map_usage(line)
        out.append(UsageChunk(usage=self._usage))
        out.append(Finish(reason=self._finish_reason(reason or None)))
        self.finished = True

    def _finish_reason(self, reason: str | None) -> FinishReason:
        if reason is None:
            return FinishReason.error(
                LlmFailure(
                    message=NO_DONE_REASON_MESSAGE, code=ErrorCode.STREAM_CLOSED.value
                )
            )
        if reason == "stop":
            if self._calls:
                return FinishReason.TOOL_CALLS
            if self._next_index == 0 and not self._empty_as_stop:
                return FinishReason.error(
                    LlmFailure(message=EMPTY_RESPONSE_MESSAGE, code=EMPTY_RESPONSE_CODE)
                )
            return FinishReason.STOP
        if reason == "length":
            return FinishReason.MAX_TOKENS
        if reason in ("load", "unload"):
            return FinishReason.error(
                LlmFailure(
                    message=NOT_AN_ANSWER_MESSAGE.format(reason=reason),
                    code=EMPTY_RESPONSE_CODE,
                )
            )
        code = (
            reason.upper()
            if _IDENTIFIER.fullmatch(reason)
            else ErrorCode.UNKNOWN_FINISH_REASON.value
        )
        return FinishReason.error(
            LlmFailure(message=f"{_PROVIDER} stopped: {reason[:120]}", code=code)
        )

    # -- blocks ------------------------------------------------------------------------

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

    def _fail(self, failure: LlmFailure, out: list[StreamChunk]) -> None:
        out.append(Finish(reason=FinishReason.error(failure)))
        self.finished = True

    def _malformed(self, what: str) -> LlmError:
        return LlmError(
            f"{_PROVIDER} sent {what} in its stream", ErrorCode.MALFORMED_RESPONSE
        )
