"""The OpenAI chat-completions wire, shared by every adapter that speaks it.

DeepSeek and the OpenAI-compatible servers (OpenAI, vLLM, llama.cpp, Ollama
``/v1``, LM Studio, OpenRouter) send the same request and the same SSE stream with
small differences. Those differences are a ``WireProfile``; a provider adapter is
a profile plus its own config, not a copy of this code.

This module owns three pure pieces and one driver:

- ``build_messages``/``build_body``: ``GenerateOptions`` to the request body.
  Key order: ``model``, ``messages``, ``stream``, ``stream_options``, the
  provider's extra keys (DeepSeek: ``thinking``, ``reasoning_effort``), ``tools``,
  ``tool_choice``, ``temperature``, ``max_tokens``, ``stop``; an optional field is
  omitted, never ``null``. Messages follow SPEC 8.3: the system prompt first;
  assistant ``content`` is the joined text or ``""`` (never ``null``); the joined
  reasoning goes back in the profile's passback field whenever the turn had
  reasoning or tool calls (``""`` included: DeepSeek rejects tool turns without
  it); tool results become ``tool`` messages (``"(no output)"`` when empty) after
  the user text; blocks a chat message cannot carry are skipped as in TS; any
  image raises ``UNSUPPORTED_CONTENT``. ``tool_choice``: ``None`` omitted,
  ``"auto"``/``"none"``/``"required"`` as strings, a tool name as
  ``{"type": "function", "function": {"name": ...}}``; with no tools it is omitted
  (no tool can be called either way).
- ``ChatCompletionsTranslator``: a state machine fed one decoded payload at a time
  (``feed``), the end marker (``done``) or an ``error:`` SSE field
  (``feed_error_field``); it returns chunks in the strict order of DESIGN.md
  section 2 (see its docstring).
- ``map_usage``: wire usage to disjoint ``TokenUsage``.
- ``stream_chat_completions``: runs a ``StreamingCall`` through the SSE shim and
  the translator, pausing the watchdog while the consumer holds a chunk.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final

import attrs

from dsh_llm.errors import EMPTY_RESPONSE_CODE, ErrorCode, LlmError
from dsh_llm.protocol import (
    BlockEnd,
    BlockStart,
    CallId,
    ContentBlock,
    Finish,
    FinishReason,
    GenerateOptions,
    LlmFailure,
    Message,
    ReasoningBlock,
    ReasoningDelta,
    StreamChunk,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
    ToolResultBlock,
    UsageChunk,
    content_has_image,
)
from dsh_llm.transport.call import StreamingCall
from dsh_llm.transport.http_errors import in_band_failure
from dsh_llm.transport.sse import DONE, CommentCallback, SseDecoder, SseEvent

__all__ = [
    "EMPTY_RESPONSE_MESSAGE",
    "NO_OUTPUT",
    "ChatCompletionsTranslator",
    "WireProfile",
    "build_body",
    "build_messages",
    "decode_payload",
    "encode_body",
    "map_finish_reason",
    "map_usage",
    "stream_chat_completions",
    "tool_choice_wire",
]

NO_OUTPUT: Final = "(no output)"
"""The content sent for a tool result without text (the wire needs some)."""
EMPTY_RESPONSE_MESSAGE: Final = "model returned a completed response with no content"
"""The message of the ``EMPTY_RESPONSE`` finish (SPEC 3.7)."""


@attrs.frozen(kw_only=True)
class WireProfile:
    """What differs between servers that speak chat completions."""

    provider: str
    """Display name used in messages, e.g. ``"DeepSeek"``."""
    reasoning_fields: tuple[str, ...] = ("reasoning_content",)
    """Delta fields read as reasoning, in order; the first non-empty one wins
    (vLLM and Ollama ``/v1`` say ``reasoning``)."""
    reasoning_passback_field: str | None = "reasoning_content"
    """Assistant-message field that carries reasoning back, or ``None`` to never
    send it."""
    include_usage: bool = True
    """Send ``stream_options: {"include_usage": true}`` (some servers reject it)."""


# --- request ----------------------------------------------------------------------


def _text_of(blocks: Iterable[ContentBlock]) -> str:
    return "".join(block.text for block in blocks if isinstance(block, TextBlock))


def build_messages(
    options: GenerateOptions, *, profile: WireProfile
) -> list[dict[str, Any]]:
    """The ``messages`` array for ``options`` (see the module docstring).

    Raises:
        LlmError: ``UNSUPPORTED_CONTENT`` when a message holds an image.
    """
    wire: list[dict[str, Any]] = []
    if options.system is not None:
        wire.append({"role": "system", "content": options.system})
    for message in options.messages:
        if content_has_image(message.content):
            raise LlmError(
                f"The {profile.provider} chat-completions adapter does not support "
                "image content.",
                ErrorCode.UNSUPPORTED_CONTENT,
            )
        if message.role == "system":
            wire.append({"role": "system", "content": _text_of(message.content)})
        elif message.role == "assistant":
            wire.append(_assistant_message(message, profile))
        else:
            wire.extend(_user_messages(message))
    return wire


def _assistant_message(message: Message, profile: WireProfile) -> dict[str, Any]:
    reasoning = "".join(
        block.text for block in message.content if isinstance(block, ReasoningBlock)
    )
    had_reasoning = any(isinstance(block, ReasoningBlock) for block in message.content)
    calls = [
        {
            "id": block.id,
            "type": "function",
            "function": {"name": block.name, "arguments": block.arguments},
        }
        for block in message.content
        if isinstance(block, ToolCallBlock)
    ]
    wire: dict[str, Any] = {"role": "assistant", "content": _text_of(message.content)}
    if profile.reasoning_passback_field is not None and (had_reasoning or calls):
        wire[profile.reasoning_passback_field] = reasoning
    if calls:
        wire["tool_calls"] = calls
    return wire


def _user_messages(message: Message) -> list[dict[str, Any]]:
    results = [block for block in message.content if isinstance(block, ToolResultBlock)]
    text = _text_of(message.content)
    wire: list[dict[str, Any]] = []
    if text or not results:
        wire.append({"role": "user", "content": text})
    for result in results:
        wire.append(
            {
                "role": "tool",
                "tool_call_id": result.tool_call_id,
                "content": _text_of(result.content) or NO_OUTPUT,
            }
        )
    return wire


def tool_choice_wire(choice: str | None) -> str | dict[str, Any] | None:
    """The wire ``tool_choice`` for ``GenerateOptions.tool_choice``."""
    if choice is None or choice in ("auto", "none", "required"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def build_body(
    options: GenerateOptions,
    *,
    profile: WireProfile,
    max_tokens: int | None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The request body for ``options`` (key order in the module docstring).

    Args:
        options: The request.
        profile: The server's profile.
        max_tokens: The output cap to send (the request's, or the model default),
            or ``None`` to omit it.
        extra: Provider keys placed after ``stream_options`` (in their order).

    Raises:
        LlmError: ``UNSUPPORTED_CONTENT`` for an image.
    """
    body: dict[str, Any] = {
        "model": options.model,
        "messages": build_messages(options, profile=profile),
        "stream": True,
    }
    if profile.include_usage:
        body["stream_options"] = {"include_usage": True}
    if extra:
        body.update(extra)
    if options.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                },
            }
            for tool in options.tools
        ]
        choice = tool_choice_wire(options.tool_choice)
        if choice is not None:
            body["tool_choice"] = choice
    if options.temperature is not None:
        body["temperature"] = options.temperature
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    if options.stop is not None:
        body["stop"] = list(options.stop)
    return body


def encode_body(body: Mapping[str, Any], *, provider: str) -> bytes:
    """UTF-8 JSON for ``body``.

    Raises:
        LlmError: ``INVALID_REQUEST`` when a value (a tool schema) is not JSON
            (e.g. ``NaN`` or an object JSON cannot hold).
    """
    try:
        text = json.dumps(
            body, ensure_ascii=False, separators=(",", ":"), allow_nan=False
        )
    except (TypeError, ValueError) as exc:
        raise LlmError(
            f"{provider} request body is not valid JSON: {exc}",
            ErrorCode.INVALID_REQUEST,
            cause=exc,
        ) from exc
    return text.encode("utf-8")


# --- response -----------------------------------------------------------------------


_json_decode = json.JSONDecoder().decode


def decode_payload(data: str, *, provider: str) -> Any:
    """Parse one SSE data payload.

    Raises:
        LlmError: ``MALFORMED_RESPONSE`` when it is not JSON.
    """
    try:
        return _json_decode(data)
    except ValueError as exc:
        raise LlmError(
            f"malformed SSE payload from {provider}: {data[:120]}",
            ErrorCode.MALFORMED_RESPONSE,
            cause=exc,
        ) from exc


def _count(value: object) -> int | None:
    return value if type(value) is int and value >= 0 else None


def map_usage(usage: Mapping[str, Any]) -> TokenUsage:
    """Wire usage to disjoint ``TokenUsage`` (SPEC 2.3, 8.5).

    ``cache_read`` is ``prompt_tokens_details.cached_tokens``, else
    ``prompt_cache_hit_tokens`` (DeepSeek); ``input = prompt_tokens - cache_read``;
    ``output = completion_tokens`` (reasoning included); ``reasoning`` from
    ``completion_tokens_details.reasoning_tokens``. A count not reported (or not
    a non-negative int) is ``None``; an impossible input (cache above the prompt
    total) is ``None`` rather than a negative number.
    """
    prompt = _count(usage.get("prompt_tokens"))
    details = usage.get("prompt_tokens_details")
    cached = _count(details.get("cached_tokens")) if isinstance(details, dict) else None
    if cached is None:
        cached = _count(usage.get("prompt_cache_hit_tokens"))
    completion_details = usage.get("completion_tokens_details")
    reasoning = (
        _count(completion_details.get("reasoning_tokens"))
        if isinstance(completion_details, dict)
        else None
    )
    uncached = None if prompt is None else prompt - (cached or 0)
    return TokenUsage(
        input_tokens=uncached if uncached is None or uncached >= 0 else None,
        output_tokens=_count(usage.get("completion_tokens")),
        cache_read_tokens=cached,
        reasoning_tokens=reasoning,
    )


def map_finish_reason(wire: str | None, *, tool_calls: bool) -> FinishReason:
    """The finish for a wire ``finish_reason`` (``None``: none was sent).

    ``stop``/none become ``tool-calls`` when a tool-call block was emitted (the
    provider said ``stop`` after a named ``tool_choice``), else ``stop``;
    ``tool_calls``/``function_call`` become ``tool-calls`` only with a tool-call
    block; ``length`` is ``max-tokens``; any other value is an ``error`` finish
    ``"model stopped: <wire>"`` with the upper-cased value as code
    (``CONTENT_FILTER``, ``INSUFFICIENT_SYSTEM_RESOURCE``).
    """
    if wire is None or wire in ("stop", "tool_calls", "function_call"):
        return FinishReason.TOOL_CALLS if tool_calls else FinishReason.STOP
    if wire == "length":
        return FinishReason.MAX_TOKENS
    return FinishReason.error(
        LlmFailure(message=f"model stopped: {wire}", code=wire.upper())
    )


_TEXT: Final = "text"
_REASONING: Final = "reasoning"
_TOOL: Final = "tool-call"


_new = object.__new__
_set = object.__setattr__


def _delta_chunk(
    cls: type[TextDelta] | type[ReasoningDelta], index: int, text: str
) -> TextDelta | ReasoningDelta:
    """``cls(index=index, text=text)`` without re-running the field validators.

    This is the per-token hot path; the translator already guarantees what the
    validators check (``index`` is its own non-negative counter, ``text`` a
    ``str`` it type-checked), and frozen attrs classes are filled the same way
    by their generated ``__init__``.
    """
    chunk = _new(cls)
    _set(chunk, "index", index)
    _set(chunk, "text", text)
    return chunk


def _tool_delta(segment: _Segment, fragment: str) -> ToolCallDelta:
    return ToolCallDelta(
        index=segment.index,
        id=CallId(segment.call_id or ""),
        name=segment.name,
        arguments_delta=fragment,
    )


class _Segment:
    """One block to be: text, reasoning, or one tool call."""

    __slots__ = ("call_id", "index", "key", "kind", "name", "parts")

    def __init__(self, kind: str, key: object = None) -> None:
        self.kind = kind
        self.parts: list[str] = []
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

    Order (DESIGN.md section 2, stricter than TS):

    - Blocks never interleave. Reasoning, text and tool calls open in the order
      they first appear; when reasoning is followed by text (or text by
      reasoning) the open block ends and a new one starts, so text resuming after
      reasoning is a new block, never a reopened one. Empty fragments open
      nothing.
    - The first tool call streams live. Fragments of any other call, and text or
      reasoning arriving while a call is open, are buffered, because a call can
      still receive fragments until the provider ends the response: closing it
      early could lose them. A call is complete when its wire index is reused
      with a new id (llama.cpp numbers parallel calls 0, 0, 0) or at the end; the
      next buffered segment is then flushed (one delta holding what was buffered)
      and, if it can still grow, stays open and streams live.
    - A call that received no argument text ends with ``"{}"`` (one ``"{}"``
      delta is emitted so block-end equals the deltas). A call's name is its first
      non-empty name (servers that repeat it on every delta are not concatenated);
      its id the first non-empty id; deltas carry both once known.
    - At the end: block-ends in order, one ``usage`` (``TokenUsage.unknown()``
      when the provider reported none; the last non-null report wins), then the
      ``finish`` (``map_finish_reason``); a ``stop`` with no block at all is the
      ``EMPTY_RESPONSE`` error finish unless ``empty_response_as_stop``.
    - An error the provider reports inside the stream (a payload with an
      ``error`` key, or an ``error:`` field) is data: it ends the response with
      one ``error`` finish classified like an HTTP error
      (``dsh_llm.transport.http_errors.in_band_failure``), after the usage chunk
      when a usage was reported, leaving the partial blocks open (their content
      must be discarded). Nothing is raised, so the runtime shows this one finish.
    - Only choice 0 is read; other choices (``n > 1``) are ignored.

    Raises (from ``feed``): ``LlmError`` ``MALFORMED_RESPONSE`` for a payload that
    is not a JSON object or has fields of the wrong type.

    Args:
        profile: The server's profile.
        empty_response_as_stop: Report a blockless ``stop`` as a plain ``stop``
            (DESIGN.md rule 10's constructor flag) instead of ``EMPTY_RESPONSE``.
    """

    def __init__(
        self, profile: WireProfile, *, empty_response_as_stop: bool = False
    ) -> None:
        self._profile = profile
        self._empty_as_stop = empty_response_as_stop
        self._next_index = 0
        self._active: _Segment | None = None
        self._pending: deque[_Segment] = deque()
        self._calls: dict[object, _Segment] = {}
        self._last_call: _Segment | None = None
        self._auto_keys = 0
        self._tool_blocks = 0
        self._finish_reason: str | None = None
        self._usage: Mapping[str, Any] | None = None
        self.finished = False
        """Whether the terminal ``Finish`` has been produced."""

    # -- input ----------------------------------------------------------------------

    def feed_sse(self, events: Iterable[SseEvent]) -> list[StreamChunk]:
        """Feed SSE events in order (``[DONE]``, ``error`` fields, JSON payloads);
        stop at the terminal finish."""
        out: list[StreamChunk] = []
        provider = self._profile.provider
        for event in events:
            if self.finished:
                break
            if event.error is not None:
                out.extend(self.feed_error_field(event.error))
                continue
            data = event.data
            if len(data) < 64 and data.strip() == DONE:
                out.extend(self.done())
            else:
                self._feed(decode_payload(data, provider=provider), out)
        return out

    def feed(self, payload: Any) -> list[StreamChunk]:
        """Translate one decoded chat-completion chunk."""
        out: list[StreamChunk] = []
        if not self.finished:
            self._feed(payload, out)
        return out

    def _feed(self, payload: Any, out: list[StreamChunk]) -> None:
        if type(payload) is not dict:
            raise self._malformed("a payload that is not a JSON object")
        error = payload.get("error")
        if error is not None:
            self._fail(in_band_failure(payload, provider=self._profile.provider), out)
            return
        choices = payload.get("choices")
        if choices:
            if type(choices) is not list:
                raise self._malformed("a choices field that is not a list")
            for choice in choices:
                if type(choice) is not dict:
                    raise self._malformed("a choice that is not an object")
                if choice.get("index", 0) not in (0, None):
                    continue
                delta = choice.get("delta")
                if delta:
                    if type(delta) is not dict:
                        raise self._malformed("a delta that is not an object")
                    self._delta(delta, out)
                reason = choice.get("finish_reason")
                if reason and type(reason) is str:
                    self._finish_reason = reason
        usage = payload.get("usage")
        if usage and type(usage) is dict:
            self._usage = usage

    def feed_error_field(self, value: str) -> list[StreamChunk]:
        """An ``error:`` SSE field (old llama.cpp): ends the response in error."""
        if self.finished:
            return []
        out: list[StreamChunk] = []
        self._fail(in_band_failure(value, provider=self._profile.provider), out)
        return out

    def done(self) -> list[StreamChunk]:
        """The end marker (``[DONE]``): close every block, then usage and finish."""
        if self.finished:
            return []
        out: list[StreamChunk] = []
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
        if reason.kind == "stop" and self._next_index == 0 and not self._empty_as_stop:
            reason = FinishReason.error(
                LlmFailure(message=EMPTY_RESPONSE_MESSAGE, code=EMPTY_RESPONSE_CODE)
            )
        out.append(Finish(reason=reason))
        self.finished = True
        return out

    # -- deltas -----------------------------------------------------------------------

    def _delta(self, delta: dict[str, Any], out: list[StreamChunk]) -> None:
        for field in self._profile.reasoning_fields:
            reasoning = delta.get(field)
            if reasoning:
                if type(reasoning) is not str:
                    raise self._malformed(f"a {field} that is not a string")
                self._text_fragment(_REASONING, reasoning, out)
                break
        content = delta.get("content")
        if content:
            if type(content) is not str:
                raise self._malformed("a content that is not a string")
            self._text_fragment(_TEXT, content, out)
        calls = delta.get("tool_calls")
        if calls:
            if type(calls) is not list:
                raise self._malformed("a tool_calls field that is not a list")
            for call in calls:
                if type(call) is not dict:
                    raise self._malformed("a tool call that is not an object")
                self._tool_fragment(call, out)

    def _text_fragment(self, kind: str, text: str, out: list[StreamChunk]) -> None:
        active = self._active
        if active is not None and active.kind == kind:
            active.parts.append(text)
            out.append(
                _delta_chunk(
                    TextDelta if kind is _TEXT else ReasoningDelta, active.index, text
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

    def _tool_fragment(self, call: dict[str, Any], out: list[StreamChunk]) -> None:
        key = call.get("index")
        new_id = call.get("id")
        new_id = new_id if type(new_id) is str and new_id else None
        function = call.get("function")
        if function is not None and type(function) is not dict:
            raise self._malformed("a tool call function that is not an object")
        name = function.get("name") if function else None
        arguments = function.get("arguments") if function else None
        if arguments is None:
            fragment = ""
        elif type(arguments) is str:
            fragment = arguments
        else:
            # A server that sends arguments as an object (SPEC 3.3): re-stringify.
            fragment = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
        if type(key) is not int:
            key = self._key_without_index(new_id)
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
            segment.parts.append(fragment)
            active = self._active
            if active is not None and active.kind is _TOOL:
                self._pending.append(segment)
            else:
                self._close_active(out)
                self._open(segment, out)
            return
        self._identify(segment, new_id, name)
        segment.parts.append(fragment)
        if segment is self._active:
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
        out.append(BlockStart(index=segment.index, block_type=kind))
        text = "".join(segment.parts)
        segment.parts = [text]
        if kind is _TOOL:
            self._tool_blocks += 1
            out.append(_tool_delta(segment, text))
        elif kind is _TEXT:
            out.append(TextDelta(index=segment.index, text=text))
        else:
            out.append(ReasoningDelta(index=segment.index, text=text))

    def _close_active(self, out: list[StreamChunk]) -> None:
        segment = self._active
        if segment is None:
            return
        self._active = None
        text = "".join(segment.parts)
        block: ContentBlock
        if segment.kind is _TOOL:
            if text == "":
                text = "{}"
                out.append(_tool_delta(segment, text))
            block = ToolCallBlock(
                id=CallId(segment.call_id or ""),
                name=segment.name or "",
                arguments=text,
            )
        elif segment.kind is _TEXT:
            block = TextBlock(text=text)
        else:
            block = ReasoningBlock(text=text)
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

    def _fail(self, failure: LlmFailure, out: list[StreamChunk]) -> None:
        if self._usage is not None and self._active is None:
            out.append(UsageChunk(usage=map_usage(self._usage)))
        out.append(Finish(reason=FinishReason.error(failure)))
        self.finished = True

    def _malformed(self, what: str) -> LlmError:
        return LlmError(
            f"{self._profile.provider} sent {what} in its stream",
            ErrorCode.MALFORMED_RESPONSE,
        )


# --- driver ---------------------------------------------------------------------------


def stream_chat_completions(
    call: StreamingCall,
    translator: ChatCompletionsTranslator,
    *,
    on_comment: CommentCallback | None = None,
) -> Iterator[StreamChunk]:
    """Send ``call``, decode its SSE body and yield the translator's chunks.

    The response is closed when the generator ends, fails or is closed early.
    Failures while reading are classified by ``call.failure`` (SPEC 8.7).

    Raises:
        LlmError: from the request (status, transport, abort) or while streaming.
    """
    try:
        call.open()
        decoder = SseDecoder(
            on_comment=on_comment, terminal_data=DONE, provider=call.provider
        )
        reader = call.chunks()
        while not translator.finished:
            try:
                data = next(reader, None)
                if data is None:
                    events = decoder.close()
                    if not events:
                        raise LlmError(
                            f"{call.provider} SSE stream ended without [DONE]",
                            ErrorCode.STREAM_CLOSED,
                        )
                else:
                    events = decoder.feed(data)
                    if not events:
                        continue
                call.note_data()
                out = translator.feed_sse(events)
            except Exception as exc:
                error = call.failure(exc)
                if error is exc:
                    raise
                raise error from exc
            if out:
                call.pause()
                yield from out
                call.resume()
        call.finish()
    finally:
        call.close()
