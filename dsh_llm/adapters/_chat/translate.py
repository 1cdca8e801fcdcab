"""``ChatCompletionsTranslator``: chat-completions stream payloads in, protocol
chunks out.

A pure state machine: it does no I/O and knows nothing of HTTP, so it is tested
on recorded payloads and with hypothesis; ``dsh_llm.adapters._chat.base``
drives it from the transport. The request side and ``WireProfile`` are in
``dsh_llm.adapters._chat.request``; usage and finish-reason mapping in
``dsh_llm.adapters._chat.finish``.

Contracts callers may rely on:

- ``ChatCompletionsTranslator`` is an ``EventTranslator`` of
  ``dsh_llm.transport.read_loop``: fed one SSE event at a time (``feed``), or
  one decoded payload (``feed_payload``), the end marker (``done``) or an
  ``error:`` SSE field (``feed_error_field``); each call returns the chunks it
  produced, in the strict order of ``docs/protocol.md``, and nothing once
  ``finished``. Its docstring lists every quirk it absorbs.
- An error the provider reports inside the stream is classified by
  ``dsh_llm.transport.http_errors.in_band_failure``, the classifier HTTP errors
  use, and becomes one ``error`` finish; nothing is raised for it.
- ``decode_payload`` parses one SSE data payload and raises ``LlmError``
  ``MALFORMED_RESPONSE`` when it is not JSON; the translator raises the same code
  for a payload of the wrong shape (a field of the wrong type).
- It knows no secrets: the read loop redacts what it reports (an in-stream
  error's message, the start of a payload that is not JSON), and a decoding
  error's cause never keeps the payload itself.
- A blockless ``stop`` ends with the ``EMPTY_RESPONSE`` error finish
  (``EMPTY_RESPONSE_MESSAGE``) and a refusal with code
  ``REFUSAL_CODE``.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Mapping
from typing import Any, Final

from dsh_llm.adapters._chat.finish import map_finish_reason, map_usage
from dsh_llm.adapters._chat.request import WireProfile
from dsh_llm.adapters.wire_values import unchecked_delta
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
    StreamChunk,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
    UsageChunk,
)
from dsh_llm.protocol.text_buffer import TextBuffer
from dsh_llm.serde import compact_json
from dsh_llm.transport.http_errors import in_band_failure
from dsh_llm.transport.sse import DONE, SseEvent

__all__ = [
    "EMPTY_RESPONSE_MESSAGE",
    "REFUSAL_CODE",
    "STREAM_CLOSED_CODE",
    "ChatCompletionsTranslator",
    "decode_payload",
]

EMPTY_RESPONSE_MESSAGE: Final = "model returned a completed response with no content"
"""The message of the ``EMPTY_RESPONSE`` finish (the TypeScript harness's)."""
STREAM_CLOSED_CODE: Final = ErrorCode.STREAM_CLOSED.value
"""The code of the ``error`` finish of an answer the server cut short: the same
code as a body that ends without ``[DONE]``, since the caller can do nothing
different about either."""
REFUSAL_CODE: Final = "REFUSAL"
"""The code of the ``error`` finish after a ``delta.refusal`` (the upper-cased
finish-reason rule: Anthropic's ``refusal`` stop reason gives the same code)."""


_json_decode = json.JSONDecoder().decode


def decode_payload(data: str, *, provider: str) -> Any:
    """Parse one SSE data payload.

    Raises:
        LlmError: ``MALFORMED_RESPONSE`` when it is not JSON; the message quotes
            the start of the payload. The cause is a plain ``ValueError`` with the
            decoder's message (the decoder's own error keeps the whole payload as
            ``doc``, which may hold an echoed secret).
    """
    try:
        return _json_decode(data)
    except (ValueError, RecursionError) as exc:
        # RecursionError: nesting deeper than the decoder can follow.
        error = LlmError(
            f"malformed SSE payload from {provider}: {data[:120]}",
            ErrorCode.MALFORMED_RESPONSE,
            cause=ValueError(str(exc)),
        )
    raise error


_NOT_A_PAYLOAD: Final = frozenset({DONE, ""})
"""Event data that is not a JSON payload: the end marker, and empty data."""

_TEXT: Final = "text"
_REASONING: Final = "reasoning"
_TOOL: Final = "tool-call"
_REFUSAL: Final = "refusal"
"""A refusal streams as a text block of its own, never merged with content."""
_LEGACY_KEY: Final = "function_call"
"""The key of the one call a legacy ``function_call`` stream can hold."""


_HIGH_SURROGATE: Final = "\ud800"
_LOW_SURROGATE: Final = "\udc00"
_LAST_SURROGATE: Final = "\udfff"


def _joined_pair(high: str, low: str) -> str:
    """The character a UTF-16 surrogate pair encodes."""
    return chr(0x10000 + ((ord(high) - 0xD800) << 10) + (ord(low) - 0xDC00))


def _argument_piece(segment: _Segment, fragment: str) -> str:
    """``fragment`` of ``segment``'s arguments with a surrogate pair split across
    fragments joined: a trailing high surrogate is held back on the segment and
    put in front of its next fragment."""
    held = segment.held
    if held:
        segment.held = ""
        if fragment and _LOW_SURROGATE <= fragment[0] <= _LAST_SURROGATE:
            fragment = _joined_pair(held, fragment[0]) + fragment[1:]
        else:
            fragment = held + fragment
    if fragment and _HIGH_SURROGATE <= fragment[-1] < _LOW_SURROGATE:
        segment.held = fragment[-1]
        fragment = fragment[:-1]
    return fragment


def _tool_delta(segment: _Segment, fragment: str) -> ToolCallDelta:
    return ToolCallDelta(
        index=segment.index,
        id=CallId(segment.call_id or ""),
        name=segment.name,
        arguments_delta=fragment,
    )


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


class _Segment:
    """One block to be: text, refusal text, reasoning, or one tool call."""

    __slots__ = ("call_id", "held", "index", "key", "kind", "name", "parts")

    def __init__(self, kind: str, key: object = None) -> None:
        self.kind = kind
        # The block's text or arguments so far: a compact buffer, not one
        # object per fragment (a block may be a million fragments).
        self.parts = TextBuffer()
        # A tool call's argument fragment that ended in a high surrogate: held
        # back until the next fragment of the same call (see _argument_piece).
        self.held = ""
        self.index = -1
        self.key = key
        self.call_id: str | None = None
        self.name: str | None = None


class ChatCompletionsTranslator:
    """Chat-completions payloads in, protocol chunks out, in strict order.

    Feed decoded payloads with ``feed``, the end marker with ``done``, an
    ``error:`` SSE field with ``feed_error_field``; each returns the chunks it
    produces (often none). ``finished`` turns true once the terminal ``Finish`` was
    returned; later input is ignored.

    Order (the rules of ``docs/protocol.md``, stricter than the TypeScript
    harness):

    - Blocks never interleave. Reasoning, text and tool calls open in the order
      they first appear; when reasoning is followed by text (or text by
      reasoning) the open block ends and a new one starts, so text resuming after
      reasoning is a new block, never a reopened one. Empty fragments open
      nothing.
    - The first tool call streams live. Fragments of any other call, and text or
      reasoning arriving while a call is open, are buffered, because a call can
      still receive fragments until the provider ends the response: closing it
      early could lose them. A call is complete when its wire index is reused
      with a new id or at the end; the next buffered segment is then flushed (one
      delta holding what was buffered) and, if it can still grow, stays open and
      streams live.
    - At the end: block-ends in order, one ``usage`` (``TokenUsage.unknown()``
      when the provider reported none; reports are merged field by field, each
      count keeping its latest non-null value, whether they rode on a choice
      chunk, on a ``choices: []`` chunk, or on every chunk as running totals, so
      a trailing report of ``null`` counts never erases real ones), then the
      ``finish`` (``map_finish_reason``). A ``stop``
      with no block at all is the ``EMPTY_RESPONSE`` error finish unless
      ``empty_response_as_stop``; an end marker with no block and no finish
      reason at all is ``EMPTY_RESPONSE`` even then (vLLM swallows an early error
      into a bare ``[DONE]``).
    - An end marker after content without any finish reason is a cut answer
      (llama-cpp-python interrupting a running request): the ``usage`` (when one
      was reported), then an ``error`` finish ``STREAM_CLOSED``
      (``STREAM_CLOSED_CODE``), with nothing closed, so a cut tool call is never
      reported complete.
    - An error the provider reports inside the stream (a payload whose
      ``error`` is a non-empty object or string, not ``null``/``false``/``{}``;
      a flat ``{"object": "error", ...}`` (vLLM before 0.10.1),
      an ``error:`` field (llama.cpp before September 2025), or an ``event:
      error`` frame (its data: a report, or plain text); string or integer
      ``code``) is data: it ends the response with one ``error`` finish classified
      like an HTTP error (``dsh_llm.transport.http_errors.in_band_failure``),
      right after the usage chunk when a usage was reported (also with a block
      open), leaving the partial blocks open (their content must be discarded). Nothing
      is raised, so the runtime shows this one finish.

    Quirks absorbed, whichever server sends them (OpenAI, vLLM, llama.cpp,
    Ollama, OpenRouter, DeepSeek; ``docs/local-servers.md`` tabulates them):

    - Tool calls are keyed by ``tool_calls[].index``. A call's id is its first
      non-empty id and its name its first non-empty name: a server that repeats
      both on every fragment (llama.cpp) or sends ``id: ""`` on continuations
      (vLLM) does not start a new call or concatenate the name. A new non-empty id
      on an index already in use starts a new call (Ollama and vLLM parsers number
      parallel calls 0, 0, 0). A fragment without ``index`` continues the last
      call unless it brings a new id. A whole call in one delta (Ollama ``/v1``)
      is one call; arguments sent as a JSON object are re-serialised. A call that
      received no argument text ends with ``"{}"`` (one ``"{}"`` delta is
      emitted so block-end equals the deltas); deltas carry id and name once
      known.
    - The deprecated ``function_call`` delta is ignored once the response has
      used ``tool_calls`` (servers mirror one call in both); when a response
      uses only ``function_call``, it is the response's one tool call, with the
      id ``call_<response id>`` (``call_function_call`` without a response id),
      since the legacy field carries none. A ``finish_reason`` of
      ``function_call`` is a ``tool-calls`` finish.
    - Reasoning is read from each of ``profile.reasoning_fields``, first
      non-empty wins. ``<think>`` tags left in ``content`` (reasoning parser
      off) stay text: the translator never guesses at markup.
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
    - Unknown top-level fields (``obfuscation``, ``timings``, ``service_tier``,
      vLLM's ``token_ids``...) are ignored. llama.cpp's ``timings`` are
      performance statistics that duplicate ``usage``, with no place in the
      protocol and nothing a replay needs, so they are not kept.

    Raises (from ``feed``): ``LlmError`` ``MALFORMED_RESPONSE`` for a payload that
    is not a JSON object or has fields of the wrong type (falsy ones included:
    ``choices: 0``, ``delta: []``, a tool call ``index`` of ``"0"``, an integer
    ``id`` or ``name``), and for a tool call that never names its tool.

    Args:
        profile: The server's profile.
        empty_response_as_stop: Report a blockless ``stop`` as a plain ``stop``
            (rule 9 of ``docs/protocol.md``) instead of ``EMPTY_RESPONSE``.
    """

    def __init__(
        self,
        profile: WireProfile,
        *,
        empty_response_as_stop: bool = False,
    ) -> None:
        self._profile = profile
        self._empty_as_stop = empty_response_as_stop
        self._text_fields: tuple[tuple[str, str], ...] = (
            *((field, _REASONING) for field in profile.reasoning_fields),
            ("content", _TEXT),
            ("refusal", _REFUSAL),
        )
        self._next_index = 0
        # A high surrogate that ended the last text fragment: its low half may
        # start the next one (a server that slices UTF-16 strings).
        self._held: tuple[str, str] | None = None
        self._active: _Segment | None = None
        self._pending: deque[_Segment] = deque()
        self._calls: dict[object, _Segment] = {}
        self._last_call: _Segment | None = None
        self._auto_keys = 0
        self._tool_blocks = 0
        self._native_calls = False
        self._refused = False
        self._finish_reason: str | None = None
        self._usage: Mapping[str, Any] | None = None
        self.finished = False
        """Whether the terminal ``Finish`` has been produced."""

    # -- input ----------------------------------------------------------------------

    def before_failure(self) -> list[StreamChunk]:
        """The usage already reported, right before a raised failure."""
        usage = self.usage_so_far
        return [] if usage is None or self.finished else [UsageChunk(usage=usage)]

    @property
    def usage_so_far(self) -> TokenUsage | None:
        """The usage the provider reported so far (``None``: none yet)."""
        return None if self._usage is None else map_usage(self._usage)

    def is_keepalive(self, event: SseEvent) -> bool:
        """An event with empty data (a ``data:`` line alone) carries nothing: like
        a comment, it only keeps the connection alive."""
        return event.error is None and event.event != "error" and not event.data.strip()

    def feed(self, event: SseEvent) -> list[StreamChunk]:
        """Feed one SSE event (``[DONE]``, an ``error`` field, a JSON payload). An
        event with empty data is passed over."""
        if self.finished:
            return []
        if event.error is not None:
            return self.feed_error_field(event.error)
        data = event.data
        if event.event == "error":
            # An ``event: error`` frame (a gateway, an Anthropic-style proxy):
            # the provider's failure, whatever its data says.
            return self.feed_error_field(data or "error")
        if len(data) < 64 and data.strip() in _NOT_A_PAYLOAD:
            return self.done() if data.strip() == DONE else []
        out: list[StreamChunk] = []
        self._feed(decode_payload(data, provider=self._profile.provider), out)
        return out

    def feed_payload(self, payload: Any) -> list[StreamChunk]:
        """Translate one decoded chat-completion chunk."""
        out: list[StreamChunk] = []
        if not self.finished:
            self._feed(payload, out)
        return out

    def close(self) -> list[StreamChunk]:
        """The body ended before ``[DONE]``: the answer was cut short.

        Raises:
            LlmError: ``STREAM_CLOSED``, always.
        """
        raise LlmError(
            f"{self._profile.provider} SSE stream ended without [DONE]",
            ErrorCode.STREAM_CLOSED,
        )

    def _feed(self, payload: Any, out: list[StreamChunk]) -> None:
        if type(payload) is not dict:
            raise self._malformed("a payload that is not a JSON object")
        if _reports_error(payload.get("error")):
            self._fail_with(payload, out)
            return
        choices = payload.get("choices")
        if choices is not None:
            if type(choices) is not list:
                raise self._malformed("a choices field that is not a list")
            for choice in choices:
                if type(choice) is not dict:
                    raise self._malformed("a choice that is not an object")
                index = choice.get("index")
                if index is not None:
                    if type(index) is not int:
                        raise self._malformed("a choice index that is not an integer")
                    if index != 0:
                        continue
                delta = choice.get("delta")
                if delta is not None:
                    if type(delta) is not dict:
                        raise self._malformed("a delta that is not an object")
                    if delta:
                        self._delta(delta, payload, out)
                reason = choice.get("finish_reason")
                if reason is not None:
                    if type(reason) is not str:
                        raise self._malformed("a finish_reason that is not a string")
                    if reason:
                        self._finish_reason = reason
        if not choices and payload.get("object") == "error":
            self._fail_with(payload, out)
            return
        usage = payload.get("usage")
        if usage and type(usage) is dict:
            self._usage = usage if self._usage is None else _merged(self._usage, usage)

    def feed_error_field(self, value: str) -> list[StreamChunk]:
        """An ``error:`` SSE field (old llama.cpp): ends the response in error."""
        if self.finished:
            return []
        out: list[StreamChunk] = []
        self._fail_with(value, out)
        return out

    def done(self) -> list[StreamChunk]:
        """The end marker (``[DONE]``): close every block, then usage and finish."""
        if self.finished:
            return []
        out: list[StreamChunk] = []
        if self._finish_reason is None and (self._next_index or self._held):
            # Content, then the end marker without any finish reason: the server
            # cut the answer (llama-cpp-python interrupting a running request).
            # Nothing is closed: a cut tool call is never complete.
            self._fail(
                LlmFailure(message=self._cut_message(), code=STREAM_CLOSED_CODE), out
            )
            return out
        self._release_held(out)
        self._close_active(out)
        while self._pending:
            segment = self._pending.popleft()
            self._open(segment, out)
            self._close_active(out)
        usage = TokenUsage.unknown() if self._usage is None else map_usage(self._usage)
        out.append(UsageChunk(usage=usage))
        reason = map_finish_reason(
            self._finish_reason, tool_calls=self._tool_blocks > 0
        )
        if self._refused and reason.kind in ("stop", "tool-calls"):
            reason = FinishReason.error(
                LlmFailure(message="model stopped: refusal", code=REFUSAL_CODE)
            )
        if (
            reason.kind == "stop"
            and self._next_index == 0
            and (self._finish_reason is None or not self._empty_as_stop)
        ):
            reason = FinishReason.error(
                LlmFailure(message=EMPTY_RESPONSE_MESSAGE, code=EMPTY_RESPONSE_CODE)
            )
        out.append(Finish(reason=reason))
        self.finished = True
        return out

    # -- deltas -----------------------------------------------------------------------

    def _delta(
        self, delta: dict[str, Any], payload: dict[str, Any], out: list[StreamChunk]
    ) -> None:
        reasoned = False
        for field, kind in self._text_fields:
            text = delta.get(field)
            if not text:
                continue
            if type(text) is not str:
                raise self._malformed(f"a {field} that is not a string")
            if kind is _REASONING:
                if reasoned:
                    continue
                reasoned = True
            elif kind is _REFUSAL:
                self._refused = True
            self._text_fragment(kind, text, out)
        calls = delta.get("tool_calls")
        if calls:
            if type(calls) is not list:
                raise self._malformed("a tool_calls field that is not a list")
            self._native_calls = True
            for call in calls:
                if type(call) is not dict:
                    raise self._malformed("a tool call that is not an object")
                self._tool_fragment(call, out)
        elif not self._native_calls:
            legacy = delta.get("function_call")
            if legacy:
                self._legacy_call(legacy, payload.get("id"), out)

    def _text_fragment(self, kind: str, text: str, out: list[StreamChunk]) -> None:
        held = self._held
        if held is not None:
            self._held = None
            if held[0] is kind and _LOW_SURROGATE <= text[0] <= _LAST_SURROGATE:
                text = _joined_pair(held[1], text[0]) + text[1:]
            else:
                self._text_piece(held[0], held[1], out)
        if _HIGH_SURROGATE <= text[-1] < _LOW_SURROGATE:
            self._held = (kind, text[-1])
            text = text[:-1]
            if not text:
                return
        self._text_piece(kind, text, out)

    def _release_held(self, out: list[StreamChunk]) -> None:
        """Emit a held high surrogate as it came: no low half followed it."""
        held = self._held
        if held is not None:
            self._held = None
            self._text_piece(held[0], held[1], out)

    def _text_piece(self, kind: str, text: str, out: list[StreamChunk]) -> None:
        active = self._active
        if active is not None and active.kind == kind:
            active.parts.append(text)
            out.append(
                unchecked_delta(
                    ReasoningDelta if kind is _REASONING else TextDelta,
                    active.index,
                    text,
                )
            )
            return
        if active is not None and active.kind is _TOOL:
            # A call is open and may still grow: keep this behind it.
            last = self._pending[-1] if self._pending else None
            if last is None or last.kind != kind:
                last = _Segment(kind)
                self._pending.append(last)
            last.parts.append(text)
            return
        self._close_active(out)
        segment = _Segment(kind)
        segment.parts.append(text)
        self._open(segment, out)

    def _function_parts(self, function: object) -> tuple[object, str]:
        """A wire ``function`` object's name and argument text."""
        if function is None:
            return None, ""
        if type(function) is not dict:
            raise self._malformed("a tool call function that is not an object")
        name = function.get("name")
        if name is not None and type(name) is not str:
            raise self._malformed("a tool call name that is not a string")
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
            raise self._malformed("tool call arguments with NaN or Infinity") from None

    def _tool_fragment(self, call: dict[str, Any], out: list[StreamChunk]) -> None:
        self._release_held(out)
        key = call.get("index")
        if key is not None and type(key) is not int:
            raise self._malformed("a tool call index that is not an integer")
        new_id = call.get("id")
        if new_id is not None and type(new_id) is not str:
            raise self._malformed("a tool call id that is not a string")
        new_id = new_id or None
        name, fragment = self._function_parts(call.get("function"))
        if key is None:
            key = self._key_without_index(new_id)
        self._call_fragment(key, new_id, name, fragment, out)

    def _legacy_call(
        self, function: object, response_id: object, out: list[StreamChunk]
    ) -> None:
        if type(function) is not dict:
            raise self._malformed("a function_call that is not an object")
        self._release_held(out)
        name, fragment = self._function_parts(function)
        new_id = None
        if _LEGACY_KEY not in self._calls:
            new_id = (
                f"call_{response_id}"
                if type(response_id) is str and response_id
                else "call_function_call"
            )
        self._call_fragment(_LEGACY_KEY, new_id, name, fragment, out)

    def _call_fragment(
        self,
        key: object,
        new_id: str | None,
        name: object,
        fragment: str,
        out: list[StreamChunk],
    ) -> None:
        segment = self._calls.get(key)
        if (
            segment is not None
            and new_id is not None
            and segment.call_id not in (None, new_id)
        ):
            # The index is reused by a new call: the old one is complete.
            del self._calls[key]
            if segment is self._active:
                self._advance(out)
            segment = None
        if segment is None:
            segment = _Segment(_TOOL, key)
            self._calls[key] = segment
            self._last_call = segment
            self._identify(segment, new_id, name)
            segment.parts.append(_argument_piece(segment, fragment))
            active = self._active
            if active is not None and active.kind is _TOOL:
                self._pending.append(segment)
            else:
                self._close_active(out)
                self._open(segment, out)
            return
        self._identify(segment, new_id, name)
        fragment = _argument_piece(segment, fragment)
        segment.parts.append(fragment)
        if segment is self._active and (fragment or not segment.held):
            out.append(_tool_delta(segment, fragment))

    def _key_without_index(self, new_id: str | None) -> object:
        last = self._last_call
        if last is not None and (new_id is None or last.call_id in (None, new_id)):
            return last.key
        self._auto_keys += 1
        return ("no-index", self._auto_keys)

    @staticmethod
    def _identify(segment: _Segment, call_id: str | None, name: object) -> None:
        if segment.call_id is None and call_id is not None:
            segment.call_id = call_id
        if segment.name is None and type(name) is str and name:
            segment.name = name

    # -- blocks ------------------------------------------------------------------------

    def _open(self, segment: _Segment, out: list[StreamChunk]) -> None:
        """Start ``segment``'s block and emit what it holds as one delta."""
        segment.index = self._next_index
        self._next_index += 1
        self._active = segment
        kind = segment.kind
        text = segment.parts.value()
        if kind is _TOOL:
            self._tool_blocks += 1
            out.append(BlockStart(index=segment.index, block_type=_TOOL))
            out.append(_tool_delta(segment, text))
        elif kind is _REASONING:
            out.append(BlockStart(index=segment.index, block_type=_REASONING))
            out.append(ReasoningDelta(index=segment.index, text=text))
        else:
            out.append(BlockStart(index=segment.index, block_type=_TEXT))
            out.append(TextDelta(index=segment.index, text=text))

    def _close_active(self, out: list[StreamChunk]) -> None:
        segment = self._active
        if segment is None:
            return
        self._active = None
        if segment.held:
            # No low half came: the high surrogate goes out as it came.
            segment.parts.append(segment.held)
            out.append(_tool_delta(segment, segment.held))
            segment.held = ""
        text = segment.parts.value()
        # A closed call stays in _calls: its block-end owns the text now.
        segment.parts.clear()
        block: ContentBlock
        if segment.kind is _TOOL:
            if not segment.name:
                # A call that names no tool cannot be run or sent back.
                raise self._malformed("a tool call without a name")
            if text == "":
                text = "{}"
                out.append(_tool_delta(segment, text))
            block = ToolCallBlock(
                id=CallId(segment.call_id or ""),
                name=segment.name or "",
                arguments=text,
            )
        elif segment.kind is _REASONING:
            block = ReasoningBlock(text=text)
        else:
            block = TextBlock(text=text)
        out.append(BlockEnd(index=segment.index, block=block))

    def _advance(self, out: list[StreamChunk]) -> None:
        """The active call is complete: close it and open the next buffered
        segment; keep it open when it can still grow."""
        self._close_active(out)
        while self._pending:
            segment = self._pending.popleft()
            self._open(segment, out)
            if segment.kind is _TOOL:
                if self._calls.get(segment.key) is segment:
                    return
            elif not self._pending:
                return
            self._close_active(out)

    def _fail_with(self, report: Any, out: list[StreamChunk]) -> None:
        failure = in_band_failure(report, provider=self._profile.provider)
        self._fail(failure, out)

    def _fail(self, failure: LlmFailure, out: list[StreamChunk]) -> None:
        self._release_held(out)
        active = self._active
        if active is not None and active.held:
            # The open call ends here in error: its held half goes out as it came.
            out.append(_tool_delta(active, active.held))
            active.parts.append(active.held)
            active.held = ""
        if self._usage is not None:
            # Billed before the failure: it comes right before the error finish,
            # even with a block left open (the strict validator allows exactly this).
            out.append(UsageChunk(usage=map_usage(self._usage)))
        out.append(Finish(reason=FinishReason.error(failure)))
        self.finished = True

    def _cut_message(self) -> str:
        return (
            f"{self._profile.provider} ended its stream with [DONE] but no "
            "finish_reason: the answer was cut short"
        )

    def _malformed(self, what: str) -> LlmError:
        return LlmError(
            f"{self._profile.provider} sent {what} in its stream",
            ErrorCode.MALFORMED_RESPONSE,
        )
