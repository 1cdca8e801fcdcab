"""``GeminiTranslator``: ``streamGenerateContent?alt=sse`` events in, what the
wire said out, to a ``BlockWriter`` (which writes the protocol's chunks).

A pure state machine (no I/O, no redactor: the transport's read loop redacts
what it reports); the read loop feeds it one ``SseEvent`` at a time.
Contracts callers may rely on:

- ``feed(event)`` returns the chunks the event produced, in the strict order
  of ``docs/protocol.md``, and nothing once ``finished``. Gemini has no end
  marker and Vertex AI puts a ``finishReason`` on every chunk, so the answer
  ends with the body: ``close()`` finishes it with the last ``finishReason``
  seen (an error object before that fails the call), and raises ``LlmError``
  ``STREAM_CLOSED`` when no chunk carried one (the answer was cut).
- A payload that is not JSON, not an object, or has a field of the wrong type
  raises ``LlmError`` ``MALFORMED_RESPONSE``; an error object in the stream
  raises its failure (classified by ``dsh_llm.adapters.gemini.errors``).
- ``usage_so_far`` is the usage reported so far (``None`` before any); a count
  of 0 that the answer disproves is ``None`` (``_plausible_usage``).
- A ``finishReason`` other than ``STOP``/``MAX_TOKENS`` is the provider's
  unsuccessful finish: ``finish_failure`` (content filters are
  ``CONTENT_FILTER``, other reasons their own name, ``docs/gemini.md``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any
from typing import Final
from typing import cast

import attrs

from dsh_llm.adapters._wire.translator import WireTranslator
from dsh_llm.adapters._wire.values import wire_count
from dsh_llm.adapters._wire.writer import REASONING
from dsh_llm.adapters._wire.writer import TEXT
from dsh_llm.adapters._wire.writer import TOOL_CALL
from dsh_llm.adapters._wire.writer import Block
from dsh_llm.adapters._wire.writer import BlockKind
from dsh_llm.adapters.gemini.arguments import StreamedArguments
from dsh_llm.adapters.gemini.errors import gemini_stream_failure
from dsh_llm.adapters.gemini.errors import parse_gemini_error
from dsh_llm.adapters.gemini.grounding import GroundingState
from dsh_llm.adapters.gemini.grounding import code_call
from dsh_llm.adapters.gemini.grounding import code_result
from dsh_llm.adapters.gemini.grounding import server_part_id
from dsh_llm.adapters.gemini.images import returned_image
from dsh_llm.adapters.gemini.replay import REPLAY_WIRE
from dsh_llm.attachments import AttachmentStore
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import LlmFailure
from dsh_llm.protocol import Message
from dsh_llm.protocol import ReplayEnvelope
from dsh_llm.protocol import ServerToolCallBlock
from dsh_llm.protocol import ServerToolResultBlock
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol.checks import MAX_SAFE_INTEGER
from dsh_llm.serde import compact_json
from dsh_llm.transport.sse import SseEvent
from dsh_llm.transport.sse import decode_json

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


def _plausible_usage(usage: TokenUsage, emitted: Sequence[Block]) -> TokenUsage:
    """``usage`` with the counts of 0 that the answer disproves taken as unknown.

    A proxy may send ``usageMetadata`` of zeros whatever it generated (LiteLLM's
    Gemini route does), and the protocol never under-reports: beside a generated
    block, an output count of 0 is ``None``, and so is an input count of 0 (a
    model that generated anything read a prompt of at least one token); beside
    a reasoning block, a reasoning count of 0 is ``None`` and the output count
    with it (it would leave the reasoning out). Without any block a 0 may be
    true (the upstream may never have run the prompt) and stays.
    """
    if not emitted:
        return usage
    changes: dict[str, None] = {}
    if usage.output_tokens == 0:
        changes["output_tokens"] = None
    if usage.input_tokens == 0:
        changes["input_tokens"] = None
    if usage.reasoning_tokens == 0 and any(b.kind is REASONING for b in emitted):
        changes["reasoning_tokens"] = None
        changes["output_tokens"] = None
    return attrs.evolve(usage, **changes) if changes else usage


def finish_failure(
    reason: str, message: str | None, *, provider: str = _PROVIDER
) -> LlmFailure:
    """The failure of a ``finishReason`` that is not ``STOP``/``MAX_TOKENS``.

    Content filters (``CONTENT_FILTER_REASONS``) get ``CONTENT_FILTER``; another
    reason that is a short upper-case identifier is its own code
    (``MALFORMED_FUNCTION_CALL``, ``OTHER``); anything else
    ``UNKNOWN_FINISH_REASON``. The message is ``"<provider> stopped: <reason>"``,
    with the candidate's ``finishMessage`` after a colon when given (each cut
    to 120 characters).
    """
    if reason in CONTENT_FILTER_REASONS:
        code = CONTENT_FILTER_CODE
    elif _IDENTIFIER.fullmatch(reason):
        code = reason
    else:
        code = ErrorCode.UNKNOWN_FINISH_REASON.value
    text = f"{provider} stopped: {reason[:120]}"
    if message:
        text += f": {message[:120]}"
    return LlmFailure(message=text, code=code)


def _new_call_id(response_id: str | None, ordinal: int) -> str:
    if response_id:
        return f"call_{response_id}_{ordinal}"
    return f"call_{ordinal}"


class GeminiTranslator(WireTranslator[SseEvent]):
    """Gemini stream events in, protocol chunks out, in strict order.

    - Text parts stream as a text block and ``thought: true`` parts as a
      reasoning block; a change of kind ends the open block and starts a new
      one (never reopened). Empty text opens nothing.
    - Each ``functionCall`` part is one tool-call block, started, given one
      delta with the whole arguments as compact JSON text (``{}`` when absent;
      key order kept) and ended at once; its id is Gemini's, else
      ``call_<responseId>_<n>`` (``call_<n>`` without a response id), ``n`` the
      call's place in the response, moved on to the next free number while the
      id is one the request's ``history`` or this response already holds: the
      same request and bytes give the same ids, and each turn new ones.
    - A call whose arguments stream (Vertex AI's ``partialArgs``: a first part
      with the name and ``willContinue``, then parts without a name) opens its
      block at once and gets each piece of its JSON text as it arrives
      (``arguments.StreamedArguments``); the part without ``willContinue``
      ends it. Text meanwhile comes after it; another call meanwhile is
      ``MALFORMED_RESPONSE``; an empty ``functionCall`` with no call streaming
      is nothing.
    - ``thoughtSignature`` on any part is kept for replay
      (``dsh_llm.adapters.gemini.replay``): on the part's own block; a
      signature on a part that opens no block (an empty text part, often in a
      later chunk) goes to the open text or reasoning block, else to the first
      call of the trailing run of calls when that one has none (a parallel
      step signs only its first call), else to the last block, or to the next
      block when none came yet. A block that already has one keeps it, and
      the signature-only part is kept verbatim after it. Other server-side
      parts (``toolCall``, ``toolResponse``...) and interim ``thought`` images
      open no block: they end the open one and are kept verbatim for replay
      after the block they follow (text that resumes after them is a new
      block).
    - An ``executableCode`` part is a whole ``server-tool-call`` block
      (``code_execution``) and each ``codeExecutionResult`` part a whole
      ``server-tool-result`` block naming the last call (``grounding``): they
      end the open block, keep the part (signature included) as ``data`` for
      replay, and never make the finish ``tool-calls``.
    - ``groundingMetadata``: the citations of each new grounding support go to
      the text block streaming when it arrives (``writer.cite``; byte offsets
      count from the answer's first text byte); at the end of the body the
      searches it tells of (``google_search`` or ``retrieval``) and
      ``urlContextMetadata``'s retrievals (``url_context``) come as a
      server-tool-call and result pair each, after the answer's blocks.
    - An ``inlineData`` part that is no thought is an image the model returned:
      an image block (``images.returned_image``: the bytes put in
      ``attachments``), its part kept for replay; content no image block can
      carry (audio) raises ``UNSUPPORTED_CONTENT``, never silently dropped.
    - ``usageMetadata`` is a running total: each report is merged over the
      last, field by field (a chunk without it, or without a field, keeps
      the saved values).
    - Only candidate 0 is read. Its last ``finishReason`` ends the response at
      the end of the body (the writer's finish: ``STOP`` is ``stop``,
      ``tool-calls`` or ``EMPTY_RESPONSE``, ``MAX_TOKENS`` is ``max-tokens``);
      another reason is the provider's unsuccessful finish
      (``finish_failure``). Text after a ``finishReason`` is still the answer.
      A successful finish carries the replay envelope when anything needs
      replaying.
    - ``promptFeedback.blockReason`` (a blocked prompt: no candidate follows)
      ends the response at once, with the ``CONTENT_FILTER`` error
      (``"Gemini blocked the prompt: <reason>"``).
    - An error object in the stream (``{"error": {...}}``, or an SSE ``error``
      field) is a failure of the call: it is raised.

    Args:
        provider: The display name messages use.
        attachments: Where the images the model returns are put (``None``:
            nowhere; their blocks still come, the bytes stay in the replay
            state).
        empty_response_as_stop: Report a blockless ``STOP`` as a plain ``stop``.
        new_call_id: Makes the id of a call Gemini gave none, from the
            response id (or ``None``) and the call's 0-based ordinal.
        history: The request's messages: an id made for a call never repeats
            the id of a tool call in them.
    """

    def __init__(
        self,
        *,
        provider: str = _PROVIDER,
        attachments: AttachmentStore | None = None,
        empty_response_as_stop: bool = False,
        new_call_id: Callable[[str | None, int], str] = _new_call_id,
        history: Sequence[Message] = (),
    ) -> None:
        super().__init__(
            provider=provider, empty_response_as_stop=empty_response_as_stop
        )
        self._new_call_id = new_call_id
        self._history = history
        # Tool-call ids a made id may not repeat: this response's, and the
        # history's (read only when a call first needs an id).
        self._given: set[str] = set()
        self._earlier: set[str] | None = None
        self._calls = 0
        self._store = attachments
        # The call whose arguments stream (Vertex AI's partialArgs), if any.
        self._streaming: tuple[Block, StreamedArguments] | None = None
        self._open: Block | None = None
        """The text or reasoning block being streamed."""
        # Grounding and URL context metadata, read as they arrive.
        self._grounding = GroundingState()
        # UTF-8 bytes of the answer's text blocks that ended: grounding
        # segments count bytes from the answer's first text byte.
        self._text_bytes = 0
        self._server_calls = 0
        # The id of the last code execution call: its results name it.
        self._code_call: str | None = None
        self._before: list[dict[str, Any]] = []
        self._pending_signature: str | None = None
        self._response_id: str | None = None
        self._usage: dict[str, Any] | None = None
        # The last finishReason and finishMessage seen: Vertex AI sends one on
        # every chunk, so the answer ends only with the body.
        self._reason: tuple[str, str | None] | None = None
        # Bound once: they run for every event.
        self._append = self.writer.append
        self._take = self.writer.take

    def _mapped_usage(self) -> TokenUsage | None:
        if self._usage is None:
            return None
        return _plausible_usage(map_usage(self._usage), self.writer.emitted)

    # -- input -------------------------------------------------------------------------

    def is_keepalive(self, event: SseEvent) -> bool:
        """An event with empty data carries nothing: it only keeps the
        connection alive."""
        return event.error is None and not event.data.strip()

    def feed(self, event: SseEvent) -> list[StreamChunk]:
        """Translate one SSE event (see the class docstring).

        Raises:
            LlmError: ``MALFORMED_RESPONSE`` for a payload of the wrong shape;
                the classified failure of an error object in the stream.
        """
        writer = self.writer
        if writer.finished:
            return []
        if event.error is not None:
            report = parse_gemini_error({"error": event.error}) or {}
            raise LlmError.from_failure(
                gemini_stream_failure(report, provider=self.provider)
            )
        data = event.data
        if not data or data.isspace():
            return []
        payload = decode_json(data, writer.provider)
        if type(payload) is list:
            # Vertex and Code Assist wrap responses (and errors) in an array;
            # a blocked prompt ends it.
            for item in payload:
                if self.writer.finished:
                    break
                self._payload(item)
        else:
            self._payload(payload)
        return self._take()

    def close(self) -> list[StreamChunk]:
        """The body ended: the answer ends with the last ``finishReason`` seen.

        Raises:
            LlmError: ``STREAM_CLOSED`` when no chunk carried a ``finishReason``.
        """
        writer = self.writer
        if writer.finished:
            return []
        if self._reason is None:
            raise writer.stream_closed(
                "stream ended without a finishReason (the answer was cut short)"
            )
        reason, message = self._reason
        # The provider's finish ends every part of the answer; the searches it
        # ran come after it (the metadata telling them came last).
        self._close_open()
        try:
            searches = self._grounding.server_blocks(self._server_id)
        except ValueError as exc:
            raise writer.malformed(str(exc)) from None
        for whole in searches:
            writer.open_whole(whole)  # never replayed: no signature goes on it
        if reason == "STOP":
            writer.finish(FinishReason.STOP, replay=self._replay)
        elif reason == "MAX_TOKENS":
            writer.finish(FinishReason.MAX_TOKENS, replay=self._replay)
        else:
            writer.finish_unsuccessfully(
                finish_failure(reason, message, provider=self.provider)
            )
        return self._take()

    def _payload(self, payload: Any) -> None:
        writer = self.writer
        if type(payload) is not dict:
            raise writer.malformed("a payload that is not a JSON object")
        if "error" in payload:
            report = parse_gemini_error(payload)
            if report is not None:
                raise LlmError.from_failure(
                    gemini_stream_failure(report, provider=self.provider)
                )
        if self._response_id is None:
            response_id = payload.get("responseId")
            if type(response_id) is str and response_id:
                self._response_id = response_id
        usage = payload.get("usageMetadata")
        if usage is not None:
            if type(usage) is not dict:
                raise writer.malformed("a usageMetadata that is not an object")
            if None in usage.values():
                usage = {k: v for k, v in usage.items() if v is not None}
            saved = self._usage
            # Running totals usually repeat every earlier field: keep the new
            # report as is, and merge only when it lacks one.
            if saved is None:
                writer.report_usage(self._mapped_usage)
                self._usage = usage
            elif saved.keys() <= usage.keys():
                self._usage = usage
            else:
                self._usage = {**saved, **usage}
        candidates = payload.get("candidates")
        if candidates is not None and type(candidates) is not list:
            raise writer.malformed("a candidates field that is not a list")
        for candidate in candidates or ():
            if type(candidate) is not dict:
                raise writer.malformed("a candidate that is not an object")
            index = candidate.get("index", 0)
            if type(index) is not int:
                raise writer.malformed("a candidate index that is not an integer")
            if index == 0:
                # The parts are read here, not in a method of their own: this
                # is the per-token path.
                content = candidate.get("content")
                if content is not None:
                    if type(content) is not dict:
                        raise writer.malformed(
                            "a candidate content that is not an object"
                        )
                    parts = content.get("parts")
                    if parts is not None:
                        if type(parts) is not list:
                            raise writer.malformed("content parts that are not a list")
                        for part in parts:
                            if type(part) is not dict:
                                raise writer.malformed("a part that is not an object")
                            # The usual part, more text for the text block
                            # streaming now, is appended at once.
                            block = self._open
                            if (
                                block is not None
                                and block.kind is TEXT
                                and len(part) == 1
                            ):
                                text = part.get("text")
                                if type(text) is str and text:
                                    self._append(block, text)
                                    continue
                            self._part(part)
                if (
                    "groundingMetadata" in candidate
                    or "urlContextMetadata" in candidate
                ):
                    # Membership tests, not lookups: this runs for every event.
                    self._metadata(candidate)
                reason = candidate.get("finishReason")
                if reason is not None:
                    self._note_finish(reason, candidate.get("finishMessage"))
                return
        feedback = payload.get("promptFeedback")
        if feedback is not None:
            if type(feedback) is not dict:
                raise writer.malformed("a promptFeedback that is not an object")
            reason = feedback.get("blockReason")
            if reason is not None:
                if type(reason) is not str:
                    raise writer.malformed("a blockReason that is not a string")
                if not reason:
                    return
                self._close_open()
                writer.finish_unsuccessfully(
                    LlmFailure(
                        message=f"{self.provider} blocked the prompt: {reason[:120]}",
                        code=CONTENT_FILTER_CODE,
                    )
                )

    def _note_finish(self, reason: object, message: object) -> None:
        """Candidate 0's ``finishReason`` (and ``finishMessage``): kept, the last
        one wins at the end of the body (``close``)."""
        writer = self.writer
        if type(reason) is not str:
            raise writer.malformed("a finishReason that is not a string")
        if not reason:
            return
        if message is not None and type(message) is not str:
            raise writer.malformed("a finishMessage that is not a string")
        self._reason = (reason, message)

    # -- parts -------------------------------------------------------------------------

    def _part(self, part: dict[str, Any]) -> None:
        signature = part.get("thoughtSignature")
        if signature is not None and type(signature) is not str:
            raise self.writer.malformed("a thoughtSignature that is not a string")
        call = part.get("functionCall")
        if call is not None:
            self._call(call, signature)
            return
        text = part.get("text")
        if text is None:
            inline = part.get("inlineData")
            if inline is not None and part.get("thought") is not True:
                self._image(part, inline, signature)
                return
            if "executableCode" in part or "codeExecutionResult" in part:
                self._code_part(part)
                return
            # A server-side part (toolCall, executableCode...) or an interim
            # image the model drew while thinking: replay state, kept after
            # the block before it, so that block ends here.
            self._close_open()
            self._keep(part)
            return
        if type(text) is not str:
            raise self.writer.malformed("a text part that is not a string")
        thought = part.get("thought", False)
        if type(thought) is not bool:
            raise self.writer.malformed("a thought flag that is not a boolean")
        if not text:
            if signature:
                self._loose_signature(part, signature)
            return
        kind: BlockKind = REASONING if thought else TEXT
        block = self._open
        if block is None or block.kind is not kind:
            self._close_open()
            block = self._open = self.writer.open(kind)
            self._adopt_pending(block)
        self._append(block, text)
        if signature:
            self._sign(block, part, signature)

    def _image(
        self, part: dict[str, Any], inline: object, signature: str | None
    ) -> None:
        """An image the model returned: an image block, its part kept for
        replay (the bytes and the signature go back the way they came)."""
        image = returned_image(inline, store=self._store, provider=self.provider)
        self._close_open()
        block = self.writer.open_image(image)
        block.replay = {"inlineData": inline}
        self._adopt_pending(block)
        if signature:
            self._sign(block, part, signature)

    def _code_part(self, part: dict[str, Any]) -> None:
        """An ``executableCode`` or ``codeExecutionResult`` part: a whole server
        tool block (``grounding.code_call``/``code_result``), the part (its
        signature included) kept on it for replay; a result names the last
        call."""
        self._close_open()
        try:
            if "executableCode" in part:
                call_id = server_part_id(part, "executableCode") or self._server_id()
                self._code_call = call_id
                whole: ServerToolCallBlock | ServerToolResultBlock = code_call(
                    part, call_id
                )
            else:
                call_id = (
                    server_part_id(part, "codeExecutionResult")
                    or self._code_call
                    or self._server_id()
                )
                whole = code_result(part, call_id)
        except ValueError as exc:
            raise self.writer.malformed(str(exc)) from None
        self._adopt_pending(self.writer.open_whole(whole))

    def _server_id(self) -> str:
        """The id of a server tool call Gemini gave none: ``srv_<responseId>_<n>``
        (``srv_<n>`` without a response id), ``n`` counting them."""
        ordinal = self._server_calls
        self._server_calls += 1
        if self._response_id:
            return f"srv_{self._response_id}_{ordinal}"
        return f"srv_{ordinal}"

    def _metadata(self, candidate: dict[str, Any]) -> None:
        """Candidate 0's grounding and URL context metadata: the citations of
        new supports go to the text block streaming now."""
        try:
            if self._grounding.note(candidate):
                block = self._open
                if block is not None and block.kind is TEXT:
                    cited = self._grounding.new_citations(
                        block.buffer.value(), self._text_bytes
                    )
                    if cited:
                        self.writer.cite(block, cited)
        except ValueError as exc:
            raise self.writer.malformed(str(exc)) from None

    def _call(self, call: object, signature: str | None) -> None:
        writer = self.writer
        if type(call) is not dict:
            raise writer.malformed("a functionCall that is not an object")
        more = call.get("willContinue")
        if more is not None and type(more) is not bool:
            raise writer.malformed("a functionCall willContinue that is not a boolean")
        partial = call.get("partialArgs")
        if partial is not None and type(partial) is not list:
            raise writer.malformed("functionCall partialArgs that are not a list")
        args = call.get("args")
        if args is not None and type(args) is not dict:
            raise writer.malformed("functionCall args that are not an object")
        name = call.get("name")
        if name is None:
            if self._streaming is not None:
                self._continue_call(args, partial, more, signature)
                return
            if not call.keys() - {"willContinue"}:
                return  # the empty end marker of a streamed call that ended
        if type(name) is not str or not name:
            raise writer.malformed("a functionCall without a name")
        if self._streaming is not None:
            raise writer.malformed(
                "a function call that began while another one's arguments were "
                "still streaming"
            )
        wire_id = call.get("id")
        if wire_id is not None and type(wire_id) is not str:
            raise writer.malformed("a functionCall id that is not a string")
        streamed = more or partial
        arguments = ""
        if not streamed:
            try:
                arguments = "{}" if not args else compact_json(args)
            except ValueError:
                raise writer.malformed(
                    "functionCall args with NaN or Infinity"
                ) from None
        self._close_open()
        call_id = wire_id or self._made_call_id()
        self._calls += 1
        self._given.add(call_id)
        # A whole call's arguments are its one delta; streamed arguments
        # (Vertex AI's partialArgs) are appended as they arrive.
        block = writer.open(TOOL_CALL, call_id=call_id, name=name, text=arguments)
        entry: dict[str, Any] = {"callId": call_id}
        if wire_id:
            entry["id"] = wire_id
        block.replay = entry
        self._adopt_pending(block)
        if streamed:
            self._streaming = (block, StreamedArguments())
            self._continue_call(args, partial, more, signature)
            return
        writer.end(block)
        if signature:
            self._sign(
                block, {"functionCall": call, "thoughtSignature": signature}, signature
            )

    def _made_call_id(self) -> str:
        """The id of a call Gemini gave none (see the class docstring): a
        deterministic one, unique among the ids taken as long as ``new_call_id``
        gives distinct ids for distinct ordinals."""
        earlier = self._earlier
        if earlier is None:
            earlier = self._earlier = {
                call.id for message in self._history for call in message.tool_calls
            }
        given = self._given
        ordinal = self._calls
        call_id = self._new_call_id(self._response_id, ordinal)
        # One of len(earlier) + len(given) + 1 distinct ids is free.
        for step in range(1, len(earlier) + len(given) + 1):
            if call_id not in given and call_id not in earlier:
                break
            call_id = self._new_call_id(self._response_id, ordinal + step)
        return call_id

    def _continue_call(
        self,
        args: dict[str, Any] | None,
        partial: list[Any] | None,
        more: bool | None,
        signature: str | None,
    ) -> None:
        """A part of the call whose arguments stream: its ``args`` and
        ``partialArgs`` as JSON text; the call ends unless ``willContinue``."""
        assert self._streaming is not None  # the caller checked
        block, arguments = self._streaming
        pieces: list[str] = []
        try:
            if args:
                pieces.append(arguments.add_args(args))
            pieces.extend(arguments.add(item) for item in partial or ())
            if not more:
                pieces.append(arguments.close())
        except ValueError as exc:
            raise self.writer.malformed(str(exc)) from None
        for piece in pieces:
            if piece:
                self.writer.append(block, piece)
        if signature:
            # The call's parts are not kept: a signature goes back on the whole
            # call, or as the signature-only part Gemini itself sends.
            self._sign(block, {"text": "", "thoughtSignature": signature}, signature)
        if not more:
            self._streaming = None
            self.writer.end(block)

    def _close_open(self) -> None:
        block = self._open
        if block is not None:
            self._open = None
            if block.kind is TEXT:
                text = block.buffer.value()
                self._text_bytes += len(text.encode("utf-8", "surrogatepass"))
            self.writer.end(block)

    # -- replay state ---------------------------------------------------------------

    @staticmethod
    def _entry(block: Block) -> dict[str, Any]:
        if block.replay is None:
            block.replay = {}
        return cast(dict[str, Any], block.replay)

    def _sign(self, block: Block, part: dict[str, Any], signature: str) -> None:
        entry = self._entry(block)
        if "thoughtSignature" in entry:
            entry.setdefault("after", []).append(part)
        else:
            entry["thoughtSignature"] = signature

    def _loose_signature(self, part: dict[str, Any], signature: str) -> None:
        """A signature on a part that opens no block (see the class docstring)."""
        if self._open is not None:
            self._sign(self._open, part, signature)
            return
        emitted = self.writer.emitted
        if not emitted:
            if self._pending_signature is None:
                self._pending_signature = signature
            else:
                self._before.append(part)
            return
        first = len(emitted)
        while first > 0 and emitted[first - 1].kind is TOOL_CALL:
            first -= 1
        if first < len(emitted):
            entry = self._entry(emitted[first])
            if "thoughtSignature" not in entry:
                entry["thoughtSignature"] = signature
                return
        self._sign(emitted[-1], part, signature)

    def _keep(self, part: dict[str, Any]) -> None:
        emitted = self.writer.emitted
        if emitted:
            self._entry(emitted[-1]).setdefault("after", []).append(part)
        else:
            self._before.append(part)

    def _adopt_pending(self, block: Block) -> None:
        if self._pending_signature is not None:
            self._entry(block)["thoughtSignature"] = self._pending_signature
            self._pending_signature = None

    def _replay(self) -> ReplayEnvelope | None:
        entries = [
            entry if entry and set(entry) != {"callId"} else None
            for entry in (
                cast("dict[str, Any] | None", block.replay)
                for block in self.writer.emitted
            )
        ]
        if not self._before and all(entry is None for entry in entries):
            return None
        response: dict[str, Any] = {"wire": REPLAY_WIRE}
        if self._before:
            response["before"] = self._before
        return ReplayEnvelope(response=response, blocks=entries)
