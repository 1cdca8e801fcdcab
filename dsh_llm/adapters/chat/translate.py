"""``ChatCompletionsTranslator``: chat-completions stream payloads in, what the
wire said out, to a ``BlockWriter`` (which writes the protocol's chunks).

A pure state machine fed one ``SseEvent`` at a time by the transport's read loop
(``WireAdapter`` drives it through the family hooks ``chat_translator`` and
``chat_decoder``); no I/O, no redaction (the read loop redacts what it raises).
The request side and ``WireProfile`` are in ``dsh_llm.adapters.chat.request``;
usage and finish-reason mapping in ``dsh_llm.adapters.chat.finish``.

Contracts callers may rely on:

- ``feed(event)`` (an SSE event), ``feed_payload(payload)`` (one decoded chunk)
  and ``done()`` (the end marker) return the chunks they complete, in the strict
  order of ``docs/protocol.md``; nothing once ``finished``. The class docstring
  lists every quirk absorbed.
- An error the provider reports inside the stream (an error payload, an
  ``error:`` SSE field, an ``event: error`` frame) raises its failure,
  classified by ``dsh_llm.transport.http_errors.in_band_failure`` (the
  classifier HTTP errors use); ``[DONE]`` after content without any finish
  reason raises ``STREAM_CLOSED``: a cut answer is never a success. A successful
  finish carries the kept ``reasoning_details`` as its replay state
  (``CHAT_REPLAY_WIRE``) when the profile keeps them.
- A finish reason other than ``stop``/``tool_calls``/``function_call``/
  ``length`` (``content_filter``...), and a refusal (code ``REFUSAL_CODE``), are
  the provider's own ``error`` finish, after the blocks and the usage.
- A payload that is not JSON raises ``LlmError`` ``MALFORMED_RESPONSE``
  (``dsh_llm.transport.sse.decode_json``: its cause never keeps the payload), as
  does a payload of the wrong shape (a field of the wrong type).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from typing import Final
from typing import NoReturn

from dsh_llm.adapters._wire.family import WireCall
from dsh_llm.adapters._wire.translator import WireTranslator
from dsh_llm.adapters._wire.writer import REASONING
from dsh_llm.adapters._wire.writer import SERVER_TOOL_CALL
from dsh_llm.adapters._wire.writer import TEXT
from dsh_llm.adapters._wire.writer import TOOL_CALL
from dsh_llm.adapters._wire.writer import Block
from dsh_llm.adapters._wire.writer import BlockWriter
from dsh_llm.adapters.chat.citations import CitationLog
from dsh_llm.adapters.chat.citations import annotation_citations
from dsh_llm.adapters.chat.citations import context_citations
from dsh_llm.adapters.chat.citations import listed_citations
from dsh_llm.adapters.chat.finish import map_finish_reason
from dsh_llm.adapters.chat.finish import map_usage
from dsh_llm.adapters.chat.request import CHAT_REPLAY_WIRE
from dsh_llm.adapters.chat.request import WireProfile
from dsh_llm.errors import LlmError
from dsh_llm.protocol import CallId
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import LlmFailure
from dsh_llm.protocol import ReplayEnvelope
from dsh_llm.protocol import ServerToolCallBlock
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TokenUsage
from dsh_llm.serde import compact_json
from dsh_llm.transport.http_errors import in_band_failure
from dsh_llm.transport.read_loop import EventDecoder
from dsh_llm.transport.sse import DONE
from dsh_llm.transport.sse import SseDecoder
from dsh_llm.transport.sse import SseEvent
from dsh_llm.transport.sse import decode_json

REFUSAL_CODE: Final = "REFUSAL"
"""The code of the ``error`` finish after a ``delta.refusal`` (the upper-cased
finish-reason rule: Anthropic's ``refusal`` stop reason gives the same code)."""


_NOT_A_PAYLOAD: Final = frozenset({DONE, ""})
"""Event data that is not a JSON payload: the end marker, and empty data."""

_REFUSAL: Final = "refusal"
"""A refusal streams as a text block of its own, never merged with content."""
_LEGACY_KEY: Final = "function_call"
"""The key of the one call a legacy ``function_call`` stream can hold."""
_CUT_AT_EOF: Final = "stream ended before any finish_reason: the answer was cut short"
_CUT: Final = (
    "ended its stream with [DONE] but no finish_reason: the answer was cut short"
)


_CITATION_PARTS: Final = frozenset({"reference", "tool_reference"})
"""Content parts that cite sources (Mistral): passed over until the protocol
types citations."""
_PART_TYPE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}")
_DETAIL_FIELDS: Final = ("type", "id", "format", "text", "summary", "data", "signature")
"""The ``reasoning_details`` fields kept for the replay (OpenRouter's)."""
_STREAMED_DETAIL_FIELDS: Final = frozenset({"text", "summary", "data"})


def _at(payload: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    """The value at ``path`` (keys into nested objects), ``None`` when absent."""
    value: Any = payload
    for key in path:
        if type(value) is not dict:
            return None
        value = value.get(key)
    return value


_HIGH_SURROGATE: Final = "\ud800"
_LOW_SURROGATE: Final = "\udc00"
_LAST_SURROGATE: Final = "\udfff"


def _joined_pair(high: str, low: str) -> str:
    """The character a UTF-16 surrogate pair encodes."""
    return chr(0x10000 + ((ord(high) - 0xD800) << 10) + (ord(low) - 0xDC00))


def _reports_error(value: object) -> bool:
    """Whether a payload's ``error`` field reports an error: a non-empty object
    or list, a non-blank string, ``true``. ``null``, ``false``, ``0``, ``""``
    and ``{}`` (sent by some servers on every chunk) report none."""
    if isinstance(value, str):
        return bool(value.strip())
    return bool(value)


def _merged(earlier: Mapping[str, Any], later: Mapping[str, Any]) -> dict[str, Any]:
    """``later`` over ``earlier``, per field: a ``null`` in ``later`` keeps the
    earlier value, nested objects (``prompt_tokens_details``) merge the same way."""
    merged = dict(earlier)
    for key, value in later.items():
        if value is None:
            merged.setdefault(key, None)
            continue
        before = merged.get(key)
        if type(value) is dict and type(before) is dict:
            merged[key] = _merged(before, value)
        else:
            merged[key] = value
    return merged


class ChatCompletionsTranslator(WireTranslator[SseEvent]):
    """Chat-completions payloads in, protocol chunks out, in strict order.

    Feed SSE events with ``feed`` (or decoded payloads with ``feed_payload`` and
    the end marker with ``done``); each returns the chunks it completes (often
    none). ``finished`` turns true once the terminal ``Finish`` was returned;
    later input is ignored.

    What the wire says, told to the writer (which owns the order rules: one
    block at a time, later items buffered behind the live one and flushed as
    one delta):

    - Reasoning, text, refusal text and each tool call are items in the order
      they first appear. The wire never closes one: a text or reasoning item
      ends when any other item begins (text resuming after reasoning is a new
      block, never a reopened one); a tool call ends when its wire index is
      reused with a new id, or at the end marker, since until then it may still
      receive fragments. Empty fragments open nothing.
    - At the end marker every item ends, then one ``usage`` (reports merged
      field by field, each count keeping its latest non-null value, whether
      they rode on a choice chunk, on a ``choices: []`` chunk, or on every
      chunk as running totals, so a trailing report of ``null`` counts never
      erases real ones), then the ``finish`` (``map_finish_reason``). A
      blockless ``stop`` is ``EMPTY_RESPONSE`` unless
      ``empty_response_as_stop``; an end marker with no block and no finish
      reason at all is ``EMPTY_RESPONSE`` even then (vLLM swallows an early
      error into a bare ``[DONE]``).
    - An end marker after content without any finish reason is a cut answer
      (llama-cpp-python interrupting a running request): ``STREAM_CLOSED`` is
      raised, nothing closed, so a cut tool call is never reported complete.
    - An error the provider reports inside the stream (a payload whose
      ``error`` is a non-empty object or string, not ``null``/``false``/``{}``;
      a flat ``{"object": "error", ...}`` (vLLM before 0.10.1), an ``error:``
      field (llama.cpp before September 2025), or an ``event: error`` frame (its
      data: a report, or plain text); string or integer ``code``) is raised,
      classified like an HTTP error
      (``dsh_llm.transport.http_errors.in_band_failure``); the partial blocks
      stay open (their content must be discarded).

    Quirks absorbed, whichever server sends them (OpenAI, vLLM, llama.cpp,
    Ollama, OpenRouter, DeepSeek; ``docs/local-servers.md`` tabulates them):

    - Tool calls are keyed by ``tool_calls[].index``. A call's id is its first
      non-empty id; its name grows with each piece a fragment brings ("ba" then
      "sh" is ``bash``), but a piece equal to the whole name so far repeats it
      (llama.cpp repeats id and name on every fragment) unless only the doubled
      name is a tool of the request. While a streaming call has a name and no
      argument text, its first delta waits for its next fragment (or anything
      else written first), so it names the whole tool; a name piece after a
      delta carried the shorter name is ``MALFORMED_RESPONSE``. ``id: ""``
      continues a call (vLLM); a new non-empty id on an index already in use
      starts a new call (Ollama and vLLM parsers number parallel calls 0, 0,
      0). A fragment without ``index`` continues the last call unless it brings
      a new id. A whole call in one delta (Ollama ``/v1``) is one call;
      arguments sent as a JSON object are re-serialised. A call that received
      no argument text ends with ``"{}"``; an id or a name that arrives after
      the call's first delta fills the empty one (``docs/protocol.md`` rule 5).
      A call whose ``type`` is not ``function`` (xAI's ``web_search_call``)
      ran on the server: its fragments are gathered (by index, like a call's)
      into a whole ``server-tool-call`` block in its place (``_ServerCall``),
      given once another item begins, its index is reused by a new id, or the
      answer ends; a later piece of it is passed over. It is never a tool
      call: the finish is not ``tool-calls`` because of it.
    - The deprecated ``function_call`` delta is ignored once the response has
      used ``tool_calls`` (servers mirror one call in both); when a response
      uses only ``function_call``, it is the response's one tool call, with the
      id ``call_<response id>`` (``call_function_call`` without a response id),
      since the legacy field carries none. A ``finish_reason`` of
      ``function_call`` is a ``tool-calls`` finish.
    - Reasoning is read from each of ``profile.reasoning_fields``, first
      non-empty wins. ``<think>`` tags left in ``content`` (reasoning parser
      off) stay text: the translator never guesses at markup. ``content`` may
      be a list of typed parts (Mistral): ``text`` parts are text, the text
      parts of a ``thinking`` part reasoning, citation parts (``reference``,
      ``tool_reference``) are passed over; any other part is
      ``MALFORMED_RESPONSE``, never dropped.
    - The profile's stream quirks (``WireProfile``): a server's own finish
      reasons, usage and errors at further key paths (Groq's ``x_groq``), no
      ``[DONE]`` (Perplexity), ``reasoning_details`` kept in the replay state
      (OpenRouter), reasoning left out of ``completion_tokens`` (xAI;
      ``map_usage``). ``docs/hosted-services.md`` lists them per service.
    - ``delta.refusal`` (OpenAI, with structured outputs) streams as a text
      block of its own, and the finish becomes an ``error`` with code
      ``REFUSAL`` (``"model stopped: refusal"``) unless it already is
      ``max-tokens`` or an error: the text is kept and the caller can tell a
      refusal from an answer by code.
    - A UTF-16 surrogate pair split across two text or reasoning fragments, or
      across two argument fragments of one tool call (a server that slices
      JavaScript strings), is joined into its character: a fragment's trailing
      high surrogate is held back until the next fragment of the same kind (or
      call); with no low half to follow it, it is emitted as it came (before
      anything else for text, at the call's end for arguments), so nothing is
      lost.
    - Only choice 0 is read (a choice without ``index`` counts as 0): the
      protocol has one message, and ``n`` is never sent, so other choices
      (``n > 1`` from a proxy or a server default) are ignored, not mixed in.
    - Citations (``dsh_llm.adapters.chat.citations``): Perplexity's and xAI's
      top-level ``citations``/``search_results``, ``url_citation``
      ``annotations`` on a delta (OpenAI's search models, OpenRouter), Azure's
      ``context.citations``; each kept once (a service repeats them on every
      chunk) and given to the writer when the text block ends (``cite``),
      never on reasoning or refusal text; citations left when no text block
      follows end as a text block of their own (empty text), never dropped.
    - Unknown top-level fields (``obfuscation``, ``timings``, ``service_tier``,
      vLLM's ``token_ids``...) are ignored. llama.cpp's ``timings`` are
      performance statistics that duplicate ``usage``, with no place in the
      protocol and nothing a replay needs, so they are not kept.

    Raises (from ``feed``): ``LlmError`` ``MALFORMED_RESPONSE`` for a payload that
    is not a JSON object or has fields of the wrong type (falsy ones included:
    ``choices: 0``, ``delta: []``, a tool call ``index`` of ``"0"``, an integer
    ``id`` or ``name``), and for a tool call that never names its tool; the
    failures above.

    Args:
        profile: The server's profile.
        empty_response_as_stop: Report a blockless ``stop`` as a plain ``stop``
            (rule 9 of ``docs/protocol.md``) instead of ``EMPTY_RESPONSE``.
        tool_names: The request's tool names (they settle a doubled name).
    """

    end_marker = "[DONE]"

    def __init__(
        self,
        profile: WireProfile,
        *,
        empty_response_as_stop: bool = False,
        tool_names: frozenset[str] = frozenset(),
    ) -> None:
        super().__init__(
            provider=profile.provider, empty_response_as_stop=empty_response_as_stop
        )
        self._text_fields: tuple[tuple[str, str], ...] = (
            *((field, REASONING) for field in profile.reasoning_fields),
            ("content", TEXT),
            ("refusal", _REFUSAL),
        )
        # A high surrogate that ended the last text fragment: its low half may
        # start the next one (a server that slices UTF-16 strings).
        self._held: tuple[str, str] | None = None
        # The last item, when it is text, reasoning or refusal text (the key of
        # ``_text_fields``): a fragment of the same kind extends it.
        self._text: Block | None = None
        self._text_key = ""
        # The calls that may still grow, by wire key (index, legacy key...).
        self._calls: dict[object, Block] = {}
        self._last_call: Block | None = None
        self._last_key: object = None
        self._auto_keys = 0
        # A call's argument fragment that ended in a high surrogate: held back
        # until the next fragment of the same call (see _argument_piece).
        self._held_args: dict[Block, str] = {}
        # The streaming call whose delta waits while its name may grow.
        self._unannounced: Block | None = None
        self._tool_names = tool_names
        self._native_calls = False
        self._refused = False
        # Calls the server ran itself (a ``type`` other than ``function``), by
        # wire key: gathered, then whole server-tool-call blocks
        # (``_ServerCall``); the ones still open, and every key seen.
        self._server_open: dict[object, _ServerCall] = {}
        self._server_keys: set[object] = set()
        self._server_count = 0
        self._finish_reason: str | None = None
        self._usage: Mapping[str, Any] | None = None
        self._usage_asked = profile.include_usage
        self._append = self.writer.append
        self._reasoning_left_out = profile.reasoning_left_out
        self._finish_reasons = profile.finish_reasons
        self._usage_paths = profile.usage_paths
        self._error_paths = profile.error_paths
        self._end_at_eof = profile.end_at_eof
        # Citations waiting for the end of their text block, each kept once;
        # the characters of the text blocks that ended (an annotation's range
        # counts from the message's first character); the last top-level lists.
        self._citations = CitationLog()
        self._text_chars = 0
        self._listed: tuple[object, object] = (None, None)
        # The reasoning_details entries by their index, merged (OpenRouter).
        self._details: dict[object, dict[str, Any]] | None = (
            {} if profile.reasoning_details else None
        )

    def _mapped_usage(self) -> TokenUsage | None:
        if self._usage is None:
            return None
        return map_usage(self._usage, reasoning_left_out=self._reasoning_left_out)

    # -- input ----------------------------------------------------------------------

    def is_keepalive(self, event: SseEvent) -> bool:
        """An event with empty data (a ``data:`` line alone) carries nothing: like
        a comment, it only keeps the connection alive."""
        return event.error is None and event.event != "error" and not event.data.strip()

    def feed(self, event: SseEvent) -> list[StreamChunk]:
        """Feed one SSE event (``[DONE]``, an ``error`` field, a JSON payload). An
        event with empty data is passed over."""
        writer = self.writer
        if writer.finished:
            return []
        if event.error is not None:
            self._fail_with(event.error)
        data = event.data
        if event.event == "error":
            # An ``event: error`` frame (a gateway, an Anthropic-style proxy):
            # the provider's failure, whatever its data says.
            self._fail_with(data or "error")
        if len(data) < 64 and data.strip() in _NOT_A_PAYLOAD:
            if data.strip() == DONE:
                self._done()
            return writer.take()
        self._feed(decode_json(data, writer.provider))
        return writer.take()

    def feed_payload(self, payload: Any) -> list[StreamChunk]:
        """Translate one decoded chat-completion chunk."""
        if self.writer.finished:
            return []
        self._feed(payload)
        return self.writer.take()

    def settle(self) -> list[StreamChunk]:
        """The caller aborted before ``[DONE]``: when the provider's last word
        came (its finish reason, and its usage when it was asked for), the answer
        ends as ``[DONE]`` would end it; else ``[]`` (the abort stands)."""
        if self.finished or self._finish_reason is None:
            return []
        if self._usage_asked and self._usage is None:
            return []  # billed tokens still to come: not the last word yet
        return self.done()

    def close(self) -> list[StreamChunk]:
        """The body ended before ``[DONE]``: ``STREAM_CLOSED``, unless the
        profile's ``end_at_eof`` lets a body end after the finish reason (then
        the answer ends as ``[DONE]`` would end it)."""
        if self.finished:
            return []
        if self._end_at_eof and self._finish_reason is not None:
            # A server that never sends [DONE] (Perplexity): after its finish
            # reason, the end of the body is the end of the answer.
            return self.done()
        if self._unannounced is not None:
            self._announce()  # taken by before_failure, as it was written
        if self._end_at_eof:
            raise self.writer.stream_closed(_CUT_AT_EOF)
        return super().close()

    def before_failure(self) -> list[StreamChunk]:
        """Right before a raised failure (an abort included): what was written,
        the delta of a call that waited for its name first, then the usage."""
        if not self.finished and self._unannounced is not None:
            self._announce()
        return super().before_failure()

    def done(self) -> list[StreamChunk]:
        """The end marker (``[DONE]``): every item ends, then usage and finish."""
        if self.writer.finished:
            return []
        self._done()
        return self.writer.take()

    def _feed(self, payload: Any) -> None:
        if type(payload) is not dict:
            raise self.writer.malformed("a payload that is not a JSON object")
        error = payload.get("error")
        if error is not None and _reports_error(error):
            self._fail_with(payload)
        for path in self._error_paths:
            error = _at(payload, path)
            if error is not None and _reports_error(error):
                self._fail_with(error)
        choices = payload.get("choices")
        if choices is not None:
            if type(choices) is not list:
                raise self.writer.malformed("a choices field that is not a list")
            for choice in choices:
                if type(choice) is not dict:
                    raise self.writer.malformed("a choice that is not an object")
                index = choice.get("index")
                if index is not None:
                    if type(index) is not int:
                        raise self.writer.malformed(
                            "a choice index that is not an integer"
                        )
                    if index != 0:
                        continue
                delta = choice.get("delta")
                if delta is not None:
                    if type(delta) is not dict:
                        raise self.writer.malformed("a delta that is not an object")
                    if delta:
                        self._delta(delta, payload)
                reason = choice.get("finish_reason")
                if reason is not None:
                    if type(reason) is not str:
                        raise self.writer.malformed(
                            "a finish_reason that is not a string"
                        )
                    if reason:
                        self._finish_reason = reason
        if not choices and payload.get("object") == "error":
            self._fail_with(payload)
        if "citations" in payload or "search_results" in payload:
            self._listed_citations(payload)
        usage = payload.get("usage")
        if usage and type(usage) is dict:
            self._report_usage(usage)
        for path in self._usage_paths:
            usage = _at(payload, path)
            if usage and type(usage) is dict:
                self._report_usage(usage)

    def _report_usage(self, usage: dict[str, Any]) -> None:
        if self._usage is None:
            self.writer.report_usage(self._mapped_usage)
            self._usage = usage
        else:
            self._usage = _merged(self._usage, usage)

    def _done(self) -> None:
        writer = self.writer
        if self._finish_reason is None and (writer.emitted or self._held):
            # Content, then the end marker without any finish reason: the server
            # cut the answer (llama-cpp-python interrupting a running request).
            # Nothing is closed: a cut tool call is never complete.
            self._release_halves()
            raise writer.stream_closed(_CUT)
        self._release_halves()
        if self._server_open:
            self._complete_server_calls()
        self._close_text()
        if self._citations:
            # Citations that came after their text ended: a text block of
            # their own, never dropped.
            self._end_text(writer.open(TEXT), TEXT)
        # The wire closes no item: the end marker ends them all.
        writer.end_all()
        wire = self._finish_reason
        reason = map_finish_reason(
            self._finish_reasons.get(wire, wire) if wire else wire
        )
        if reason.failure is not None:
            writer.finish_unsuccessfully(reason.failure)
        elif self._refused and reason != FinishReason.MAX_TOKENS:
            writer.finish_unsuccessfully(
                LlmFailure(message="model stopped: refusal", code=REFUSAL_CODE)
            )
        else:
            # Without any finish reason a blockless answer is EMPTY_RESPONSE even
            # with empty_response_as_stop (vLLM's bare [DONE] after an error).
            writer.finish(
                reason,
                replay=self._replay if self._details else None,
                empty_as_stop=False if self._finish_reason is None else None,
            )

    def _fail_with(self, report: Any) -> NoReturn:
        """Raise the failure the provider reported in the stream."""
        self._release_halves()
        raise LlmError.from_failure(in_band_failure(report, provider=self.provider))

    # -- deltas -----------------------------------------------------------------------

    def _delta(self, delta: dict[str, Any], payload: dict[str, Any]) -> None:
        reasoned = False
        for field, key in self._text_fields:
            text = delta.get(field)
            if not text:
                continue
            if type(text) is not str:
                if key is TEXT and type(text) is list:
                    self._content_parts(text)
                    continue
                raise self.writer.malformed(f"a {field} that is not a string")
            if key is REASONING:
                if reasoned:
                    continue
                reasoned = True
            elif key is _REFUSAL:
                self._refused = True
            block = self._text
            if (
                block is not None
                and self._text_key is key
                and self._held is None
                and not _HIGH_SURROGATE <= text[-1] < _LOW_SURROGATE
            ):
                # The common case, inlined (the per-token path): more of the
                # item being written.
                self._append(block, text)
            else:
                self._text_fragment(key, text)
        kept = self._details
        if kept is not None:
            details = delta.get("reasoning_details")
            if details:
                self._reasoning_details(kept, details)
        if "annotations" in delta or "context" in delta:
            # Membership tests, not lookups: this runs for every delta.
            self._delta_citations(delta)
        calls = delta.get("tool_calls")
        if calls:
            calls = self.objects(calls, "a tool_calls field", "a tool call")
            self._native_calls = True
            for call in calls:
                self._tool_fragment(call)
        elif not self._native_calls:
            legacy = delta.get("function_call")
            if legacy:
                self._legacy_call(legacy, payload.get("id"))

    def _content_parts(self, parts: list[Any]) -> None:
        """``content`` as a list of typed parts (Mistral): ``text`` parts are
        text, the text parts of a ``thinking`` part are reasoning, citations
        (``reference``, ``tool_reference``) are passed over."""
        for part in parts:
            kind = self._part_type(part)
            if kind == "text":
                self._part_text(part, TEXT)
            elif kind == "thinking":
                thinking = part.get("thinking")
                if type(thinking) is str:
                    if thinking:
                        self._text_fragment(REASONING, thinking)
                elif type(thinking) is list:
                    for inner in thinking:
                        inner_kind = self._part_type(inner)
                        if inner_kind == "text":
                            self._part_text(inner, REASONING)
                        elif inner_kind not in _CITATION_PARTS:
                            raise self._unreadable_part(inner_kind)
                elif thinking is not None:
                    raise self.writer.malformed("a thinking part that is not a list")
            elif kind not in _CITATION_PARTS:
                raise self._unreadable_part(kind)

    def _part_type(self, part: object) -> str:
        if type(part) is not dict:
            raise self.writer.malformed("a content part that is not an object")
        kind = part.get("type")
        if type(kind) is not str:
            raise self.writer.malformed("a content part without a string type")
        return kind

    def _part_text(self, part: dict[str, Any], key: str) -> None:
        text = part.get("text")
        if text:
            if type(text) is not str:
                raise self.writer.malformed("a text part that is not a string")
            self._text_fragment(key, text)

    def _unreadable_part(self, kind: str) -> LlmError:
        shown = kind if _PART_TYPE.fullmatch(kind) else "(unprintable)"
        return self.writer.malformed(f"a {shown} content part this adapter cannot read")

    def _reasoning_details(
        self, kept: dict[object, dict[str, Any]], details: object
    ) -> None:
        """Merge one delta's ``reasoning_details`` entries (OpenRouter) into
        ``kept``, by ``index``: streamed ``text``, ``summary`` and ``data`` are
        joined, the other fields keep their latest value."""
        for detail in self.objects(
            details, "a reasoning_details field", "a reasoning detail"
        ):
            index = detail.get("index")
            key: object = index if type(index) is int else ("at", len(kept))
            entry = kept.setdefault(key, {})
            if type(index) is int:
                entry["index"] = index
            for field in _DETAIL_FIELDS:
                value = detail.get(field)
                if type(value) is not str or not value:
                    continue
                if field in _STREAMED_DETAIL_FIELDS:
                    entry[field] = entry.get(field, "") + value
                else:
                    entry[field] = value

    def _replay(self) -> ReplayEnvelope | None:
        """The replay state of a successful answer: its reasoning details."""
        if not self._details:
            return None
        return ReplayEnvelope(
            response={
                "wire": CHAT_REPLAY_WIRE,
                "reasoningDetails": list(self._details.values()),
            }
        )

    def _text_fragment(self, key: str, text: str) -> None:
        held = self._held
        if held is not None:
            self._held = None
            if held[0] is key and _LOW_SURROGATE <= text[0] <= _LAST_SURROGATE:
                text = _joined_pair(held[1], text[0]) + text[1:]
            else:
                self._text_piece(held[0], held[1])
        if _HIGH_SURROGATE <= text[-1] < _LOW_SURROGATE:
            self._held = (key, text[-1])
            text = text[:-1]
            if not text:
                return
        self._text_piece(key, text)

    def _text_piece(self, key: str, text: str) -> None:
        if self._unannounced is not None:
            self._announce()
        block = self._text
        if block is not None and self._text_key is key:
            self._append(block, text)
            return
        writer = self.writer
        if block is not None:
            self._end_text(block)
        if self._server_open:
            self._complete_server_calls()
        block = writer.open(REASONING if key is REASONING else TEXT)
        writer.append(block, text)
        self._text = block
        self._text_key = key

    def _listed_citations(self, payload: dict[str, Any]) -> None:
        """Top-level ``citations``/``search_results`` (Perplexity, xAI): the
        lists are read again only when they changed (Perplexity repeats the
        same lists on every chunk)."""
        listed = (payload.get("citations"), payload.get("search_results"))
        if listed != self._listed:
            self._listed = listed
            self._citations.add(listed_citations(*listed))

    def _delta_citations(self, delta: dict[str, Any]) -> None:
        """A delta's ``annotations`` and Azure's ``context`` citations."""
        annotations = delta.get("annotations")
        if annotations:
            self._citations.add(annotation_citations(annotations))
        context = delta.get("context")
        if context:
            self._citations.add(context_citations(context))

    def _close_text(self) -> None:
        """End the text or reasoning item streaming now, if any (another item
        opens, or the answer ends)."""
        text = self._text
        if text is not None:
            self._text = None
            self._end_text(text)

    def _end_text(self, block: Block, key: str | None = None) -> None:
        """End text or reasoning item ``block``; a text item first gets the
        citations waiting for it (``CitationLog``), once."""
        if (key or self._text_key) is TEXT:
            length = len(block.buffer)
            if self._citations:
                self.writer.cite(block, self._citations.take(self._text_chars, length))
            self._text_chars += length
        self.writer.end(block)

    def _release_halves(self) -> None:
        """Emit held high surrogates as they came: no low half followed them (and
        first the delta of a call that waited for its name)."""
        if self._unannounced is not None:
            self._announce()
        self._release_text_half()
        if self._held_args:
            for block, half in self._held_args.items():
                self.writer.append(block, half)
            self._held_args.clear()

    # -- tool calls -------------------------------------------------------------------

    def _function_parts(self, function: object) -> tuple[object, str]:
        """A wire ``function`` object's name and argument text."""
        if function is None:
            return None, ""
        if type(function) is not dict:
            raise self.writer.malformed("a tool call function that is not an object")
        name = function.get("name")
        if name is not None and type(name) is not str:
            raise self.writer.malformed("a tool call name that is not a string")
        arguments = function.get("arguments")
        if arguments is None:
            return name, ""
        if type(arguments) is str:
            return name, arguments
        # A server that sends arguments as an object: re-stringify, since
        # arguments stay raw JSON text.
        try:
            return name, compact_json(arguments)
        except ValueError:
            raise self.writer.malformed(
                "tool call arguments with NaN or Infinity"
            ) from None

    def _tool_fragment(self, call: dict[str, Any]) -> None:
        if self._held is not None:
            self._release_text_half()
        key = call.get("index")
        if key is not None and type(key) is not int:
            raise self.writer.malformed("a tool call index that is not an integer")
        new_id = call.get("id")
        if new_id is not None and type(new_id) is not str:
            raise self.writer.malformed("a tool call id that is not a string")
        kind = call.get("type")
        if (kind is not None and kind != "function" and type(kind) is str and kind) or (
            kind is None and self._server_keys and key in self._server_keys
        ):
            # A call the server ran itself (xAI's web_search_call...): the
            # caller has nothing to run; its later fragments share its index.
            self._server_fragment(key, new_id or "", kind, call)
            return
        if self._server_open:
            self._complete_server_calls()
        name, fragment = self._function_parts(call.get("function"))
        if key is None:
            key = self._key_without_index(new_id or "")
        self._call_fragment(key, new_id or "", name, fragment)

    def _server_fragment(
        self, key: object, new_id: str, kind: object, call: dict[str, Any]
    ) -> None:
        """A fragment of a call the server ran itself: the first one ends the
        text before it and reserves the call's place; the block comes whole
        once another item begins or the answer ends (``_ServerCall``)."""
        name, fragment = self._function_parts(call.get("function"))
        entry = self._server_open.get(key) if key is not None else None
        reused = False
        if entry is not None and new_id and entry.call_id not in ("", new_id):
            # The index is reused by a new call: the old one is complete.
            del self._server_open[key]
            entry.complete(self.writer)
            entry, reused = None, True
        if entry is None:
            if key is None:
                key = ("server", self._server_count)
            elif key in self._server_keys and not reused and not new_id:
                return  # a late fragment of a call already given whole
            if self._unannounced is not None:
                self._announce()
            self._close_text()
            block = self.writer.reserve(SERVER_TOOL_CALL)
            entry = self._server_open[key] = _ServerCall(block, self._server_count)
            self._server_count += 1
            self._server_keys.add(key)
        entry.add(new_id, kind, name, fragment)

    def _complete_server_calls(self) -> None:
        """Give every gathered server call its whole block (another item
        begins, or the answer ends)."""
        for entry in self._server_open.values():
            entry.complete(self.writer)
        self._server_open.clear()

    def _legacy_call(self, function: object, response_id: object) -> None:
        if type(function) is not dict:
            raise self.writer.malformed("a function_call that is not an object")
        self._release_text_half()
        name, fragment = self._function_parts(function)
        new_id = ""
        if _LEGACY_KEY not in self._calls:
            new_id = (
                f"call_{response_id}"
                if type(response_id) is str and response_id
                else "call_function_call"
            )
        self._call_fragment(_LEGACY_KEY, new_id, name, fragment)

    def _release_text_half(self) -> None:
        """Emit a held text high surrogate as it came (something else followed)."""
        held = self._held
        if held is not None:
            self._held = None
            self._text_piece(held[0], held[1])

    def _call_fragment(
        self, key: object, new_id: str, name: object, fragment: str
    ) -> None:
        block = self._calls.get(key)
        if block is not None and new_id and block.call_id not in ("", new_id):
            # The index is reused by a new call: the old one is complete.
            del self._calls[key]
            self._end_call(block)
            block = None
        if block is None:
            self._open_call(key, new_id, name, fragment)
            return
        if self._unannounced is not None and block is not self._unannounced:
            self._announce()
        writer = self.writer
        # A call's id is its first non-empty one; one that arrives after the
        # call began fills the empty one (rule 5 allows it).
        if new_id and not block.call_id:
            writer.set_call_id(block, new_id)
        if type(name) is str and name and (name != block.name or self._tool_names):
            longer = self._grown_name(block.name, name)
            if longer != block.name:
                # MALFORMED_RESPONSE once a delta carried the shorter name.
                writer.set_name(block, longer)
                if not fragment and block.started and not block.ended:
                    # A piece of the streaming call's name: its delta (no
                    # argument text) waits, the name may grow again.
                    self._unannounced = block
                    return
        if self._unannounced is not None:
            self._announce()
        piece = self._argument_piece(block, fragment)
        if piece or block not in self._held_args:
            self._append(block, piece)

    def _grown_name(self, name: str, piece: str) -> str:
        """A call's name after a fragment that carries ``piece``: the first
        non-empty one; a piece equal to the name so far repeats it (llama.cpp
        sends the whole name with every fragment) unless only the doubled name
        is a tool of the request; any other piece continues it."""
        if not name:
            return piece
        joined = name + piece
        if piece == name and not (
            joined in self._tool_names and name not in self._tool_names
        ):
            return name
        return joined

    def _open_call(
        self, key: object, call_id: str, name: object, fragment: str
    ) -> None:
        writer = self.writer
        if self._unannounced is not None:
            self._announce()
        self._close_text()
        # The call's first delta carries its first fragment (a trailing high
        # surrogate held back for the next one).
        held = ""
        if fragment and _HIGH_SURROGATE <= fragment[-1] < _LOW_SURROGATE:
            held, fragment = fragment[-1], fragment[:-1]
        named = name if type(name) is str else ""
        # Streaming at once with a name and no argument text, the call's first
        # delta waits: its name may still come in pieces.
        owed = bool(named) and not fragment and not writer.open_blocks
        block = writer.open(
            TOOL_CALL, call_id=call_id, name=named, text=fragment, announce=not owed
        )
        if owed:
            self._unannounced = block
        if held:
            self._held_args[block] = held
        self._calls[key] = block
        self._last_call = block
        self._last_key = key

    def _announce(self) -> None:
        """The delta a streaming call owes while its name may grow (its id and
        name, no argument text), written before anything else: the chunks come
        out as if it had been written when the fragment came."""
        block = self._unannounced
        if block is not None:
            self._unannounced = None
            self.writer.append(block, "")

    def _end_call(self, block: Block) -> None:
        if self._unannounced is not None:
            self._announce()
        half = self._held_args.pop(block, None) if self._held_args else None
        if half:
            self.writer.append(block, half)
        self.writer.end(block)

    def _argument_piece(self, block: Block, fragment: str) -> str:
        """``fragment`` of ``block``'s arguments with a surrogate pair split across
        fragments joined: a trailing high surrogate is held back and put in front
        of the call's next fragment."""
        if self._held_args:
            held = self._held_args.pop(block, "")
            if held:
                if fragment and _LOW_SURROGATE <= fragment[0] <= _LAST_SURROGATE:
                    fragment = _joined_pair(held, fragment[0]) + fragment[1:]
                else:
                    fragment = held + fragment
        if fragment and _HIGH_SURROGATE <= fragment[-1] < _LOW_SURROGATE:
            self._held_args[block] = fragment[-1]
            fragment = fragment[:-1]
        return fragment

    def _key_without_index(self, new_id: str) -> object:
        last = self._last_call
        if last is not None and (not new_id or last.call_id in ("", new_id)):
            return self._last_key
        self._auto_keys += 1
        return ("no-index", self._auto_keys)


class _ServerCall:
    """A call the server ran itself (xAI's ``web_search_call``), gathered
    fragment by fragment: its id (the first non-empty one; ``srv_<n>`` when it
    never had one), its type, its function name (the first non-empty one) and
    its argument text; completed as a ``ServerToolCallBlock`` named by the
    function (else the type), input the arguments (``{}`` when none), ``data``
    the call as the wire would hold it whole."""

    __slots__ = ("arguments", "block", "call_id", "kind", "name", "ordinal")

    def __init__(self, block: Block, ordinal: int) -> None:
        self.block = block
        self.ordinal = ordinal
        self.call_id = ""
        self.kind = ""
        self.name = ""
        self.arguments: list[str] = []

    def add(self, call_id: str, kind: object, name: object, fragment: str) -> None:
        if call_id and not self.call_id:
            self.call_id = call_id
        if type(kind) is str and kind and not self.kind:
            self.kind = kind
        if type(name) is str and name and not self.name:
            self.name = name
        if fragment:
            self.arguments.append(fragment)

    def complete(self, writer: BlockWriter) -> None:
        arguments = "".join(self.arguments) or "{}"
        call_id = self.call_id or f"srv_{self.ordinal}"
        data: dict[str, Any] = {"type": self.kind or "function"}
        if self.call_id:
            data["id"] = self.call_id
        data["function"] = {"name": self.name, "arguments": arguments}
        writer.complete(
            self.block,
            ServerToolCallBlock(
                id=CallId(call_id),
                name=self.name or self.kind or "server_tool",
                input=arguments,
                data=data,
            ),
        )


def chat_translator(call: WireCall[Any, WireProfile]) -> ChatCompletionsTranslator:
    """The family hook: a fresh translator for one call, with the endpoint's
    profile and the config's ``empty_response_as_stop``."""
    return ChatCompletionsTranslator(
        call.endpoint.profile,
        empty_response_as_stop=call.config.empty_response_as_stop,
        tool_names=frozenset(tool.name for tool in call.options.tools or ()),
    )


def chat_decoder(provider: str) -> EventDecoder[SseEvent]:
    """The family hook: an SSE decoder whose stream ends at ``data: [DONE]``."""
    return SseDecoder(terminal_data=DONE, provider=provider)
