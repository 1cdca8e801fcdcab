"""``OllamaTranslator``: ``/api/chat`` NDJSON objects in, what the wire said out,
to a ``BlockWriter`` (which writes the protocol's chunks).

A pure state machine; the transport's read loop decodes the body with
``dsh_llm.transport.ndjson.NdjsonDecoder`` and feeds one JSON value per line.
Contracts callers may rely on:

- ``feed(value)`` returns the chunks the line completes, in the strict order of
  ``docs/protocol.md``, and nothing once ``finished``.
- Failures are raised: an ``error`` line (classified by
  ``dsh_llm.adapters.ollama.errors``), a ``done: true`` line without a
  ``done_reason`` (``STREAM_CLOSED``, after its usage), and ``close()`` before
  the ``done: true`` line (``STREAM_CLOSED``): a cut answer is never a success.
- A value that is not an object, or a field of the wrong type, raises
  ``LlmError`` ``MALFORMED_RESPONSE``.
- ``usage_so_far`` is ``None`` until the ``done: true`` line (Ollama reports
  its counts there only).
- Codes of the ``error`` finishes Ollama's own reasons give: ``EMPTY_RESPONSE``
  (a blockless ``stop``, a ``load``/``unload`` answer), another reason
  upper-cased.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any
from typing import Final

from dsh_llm.adapters._wire.translator import WireTranslator
from dsh_llm.adapters._wire.values import wire_count
from dsh_llm.adapters._wire.writer import REASONING
from dsh_llm.adapters._wire.writer import TEXT
from dsh_llm.adapters._wire.writer import TOOL_CALL
from dsh_llm.adapters._wire.writer import Block
from dsh_llm.adapters._wire.writer import BlockKind
from dsh_llm.adapters._wire.writer import stopped_failure
from dsh_llm.adapters.ollama.errors import ollama_stream_failure
from dsh_llm.errors import EMPTY_RESPONSE_CODE
from dsh_llm.errors import LlmError
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import LlmFailure
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TokenUsage
from dsh_llm.serde import compact_json

NOT_AN_ANSWER_MESSAGE: Final = "Ollama answered with done_reason {reason!r}, not a chat"
"""The ``EMPTY_RESPONSE`` message for a ``load``/``unload`` answer."""
# The STREAM_CLOSED message of a done line without a reason, after "Ollama ".
_NO_DONE_REASON: Final = (
    "ended the answer without a done_reason (the runner's connection closed)"
)

_PROVIDER: Final = "Ollama"


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


class OllamaTranslator(WireTranslator[Any]):
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
      ``load``/``unload`` are ``EMPTY_RESPONSE`` errors; another reason an
      error coded as the upper-cased reason (``UNKNOWN_FINISH_REASON`` when it
      is not a short identifier). A missing ``done_reason`` raises
      ``STREAM_CLOSED`` (never a success), blocks left open.
    - An ``{"error": ...}`` line raises its failure, blocks left open (Ollama
      reports no usage before ``done``).
    - Other fields (``model``, ``created_at``, ``remote_model``,
      ``remote_host``, ``logprobs``, durations) are ignored.

    Args:
        empty_response_as_stop: Report a blockless ``stop`` as a plain ``stop``.
        new_call_id: Makes the id of a call Ollama gave none, from the call's
            0-based ordinal.
    """

    end_marker = "its done line (the answer was cut short)"

    def __init__(
        self,
        *,
        empty_response_as_stop: bool = False,
        new_call_id: Callable[[int], str] = _new_call_id,
    ) -> None:
        super().__init__(
            provider=_PROVIDER, empty_response_as_stop=empty_response_as_stop
        )
        self._new_call_id = new_call_id
        # The text or reasoning item streaming now (``None`` after a call).
        self._block: Block | None = None

    def feed(self, value: Any) -> list[StreamChunk]:
        """Translate one decoded NDJSON line (see the class docstring).

        Raises:
            LlmError: the failure of an ``error`` line; ``STREAM_CLOSED`` for a
                ``done: true`` line without a reason; ``MALFORMED_RESPONSE`` for
                a line of the wrong shape.
        """
        writer = self.writer
        if writer.finished:
            return []
        if type(value) is not dict:
            raise writer.malformed("a line that is not a JSON object")
        error = value.get("error")
        if error is not None and error != "":
            raise LlmError.from_failure(ollama_stream_failure(error))
        message = value.get("message")
        if message is not None:
            if type(message) is not dict:
                raise writer.malformed("a message that is not an object")
            text = message.get("thinking")
            if text is not None:
                self._piece(REASONING, text, "thinking")
            text = message.get("content")
            if text is not None:
                self._piece(TEXT, text, "content")
            calls = message.get("tool_calls")
            if calls is not None:
                self._calls(calls)
        done = value.get("done", False)
        if done is not False:
            if done is not True:
                raise writer.malformed("a done flag that is not a boolean")
            self._done(value)
        return writer.take()

    # -- lines -------------------------------------------------------------------------

    def _piece(self, kind: BlockKind, text: object, field: str) -> None:
        """A piece of the message's ``field`` (the per-token path): appended to
        the block streaming now when that is of ``kind``, else a new block's."""
        if type(text) is not str:
            raise self.writer.malformed(f"a message {field} that is not a string")
        if text:
            block = self._block
            if block is not None and block.kind is kind:
                self.writer.append(block, text)
            else:
                self._switch(kind, text)

    def _switch(self, kind: BlockKind, text: str) -> None:
        """A change of kind: the block streaming now ends, a new one starts."""
        writer = self.writer
        if self._block is not None:
            writer.end(self._block)
        block = self._block = writer.open(kind)
        writer.append(block, text)

    def _calls(self, calls: object) -> None:
        for call in self.objects(calls, "a tool_calls field", "a tool call"):
            self._call(call)

    def _call(self, call: dict[str, Any]) -> None:
        writer = self.writer
        function = call.get("function")
        if type(function) is not dict:
            raise writer.malformed("a tool call without a function object")
        name = function.get("name")
        if type(name) is not str or not name:
            raise writer.malformed("a tool call without a name")
        arguments = function.get("arguments")
        if arguments is None or arguments == {}:
            text = "{}"
        elif type(arguments) is dict:
            try:
                text = compact_json(arguments)
            except ValueError:
                raise writer.malformed(
                    "tool call arguments with NaN or Infinity"
                ) from None
        elif type(arguments) is str:
            text = arguments if arguments.strip() else "{}"
        else:
            raise writer.malformed("tool call arguments that are not an object")
        wire_id = call.get("id")
        if wire_id is not None and type(wire_id) is not str:
            raise writer.malformed("a tool call id that is not a string")
        # Every call before this one was emitted: their count is its ordinal.
        call_id = wire_id or self._new_call_id(writer.tool_calls)
        # A whole call: its arguments are its one delta.
        if self._block is not None:
            writer.end(self._block)
            self._block = None
        block = writer.open(TOOL_CALL, call_id=call_id, name=name, text=text)
        writer.end(block)

    def _done(self, line: dict[str, Any]) -> None:
        writer = self.writer
        reason = line.get("done_reason")
        if reason is not None and type(reason) is not str:
            raise writer.malformed("a done_reason that is not a string")
        writer.report_usage(map_usage(line))
        if not reason:
            raise writer.stream_closed(_NO_DONE_REASON)
        writer.end_all()
        if reason == "stop":
            writer.finish(FinishReason.STOP)
        elif reason == "length":
            writer.finish(FinishReason.MAX_TOKENS)
        else:
            writer.finish_unsuccessfully(self._failure(reason))

    @staticmethod
    def _failure(reason: str) -> LlmFailure:
        if reason in ("load", "unload"):
            return LlmFailure(
                message=NOT_AN_ANSWER_MESSAGE.format(reason=reason),
                code=EMPTY_RESPONSE_CODE,
            )
        return stopped_failure(reason, who=_PROVIDER)
