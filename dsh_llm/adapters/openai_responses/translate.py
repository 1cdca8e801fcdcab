"""``ResponsesTranslator``: Responses API stream events in, what the wire said
out, to a ``BlockWriter`` (which writes the protocol's chunks). A pure state
machine fed one ``SseEvent`` at a time by the read loop (which redacts).

- ``feed(event)`` returns the chunks one event completes, in the strict order
  of ``docs/protocol.md``; nothing once ``finished`` (a ``[DONE]``, anything a
  server sends after its terminal event). ``close()`` at EOF raises
  ``STREAM_CLOSED`` unless ``finished``: the wire ends with a terminal event.
- Items are told apart by ``output_index`` (parts by ``content_index``); an
  ``item_id`` the stream already gave an item names it (indexes may be reused
  or skipped), an id never seen is no new item (GitHub Copilot's change on
  every event). Items that overlap, finish out of order, reuse or skip indexes,
  change ids or never send ``output_item.done`` give blocks 0, 1, 2 in opening
  order, never interleaved, never twice, each ``block-end`` equal to its deltas.
- What ``*.done`` and the terminal output repeat is checked against what
  streamed: a missing tail is added, a contradiction is ``MALFORMED_RESPONSE``.
- ``response.completed`` / ``response.incomplete`` end what is open, then one
  ``usage`` and the ``finish``; a successful finish carries a ``ReplayEnvelope``
  (``REPLAY_WIRE``), one entry per block. ``response.failed`` and ``error``
  raise their failure, after the usage ``response.failed`` reported.
- A payload that is not JSON, not an object, or has fields of the wrong type
  raises ``MALFORMED_RESPONSE``; a ``[DONE]`` before the terminal event
  ``STREAM_CLOSED``. The event's JSON ``type`` decides, not the SSE ``event:``.
- ``sequence_number`` gaps and repeats are logged, never fatal.
"""

from __future__ import annotations

import json
import logging
from collections import deque
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Mapping
from typing import Any
from typing import Final
from typing import NoReturn

from dsh_llm.adapters._wire.translator import WireTranslator
from dsh_llm.adapters._wire.writer import REASONING
from dsh_llm.adapters._wire.writer import SERVER_TOOL_CALL
from dsh_llm.adapters._wire.writer import SERVER_TOOL_RESULT
from dsh_llm.adapters._wire.writer import TEXT
from dsh_llm.adapters._wire.writer import TOOL_CALL
from dsh_llm.adapters._wire.writer import Block
from dsh_llm.adapters._wire.writer import BlockKind
from dsh_llm.adapters.openai_responses.errors import stream_failure
from dsh_llm.adapters.openai_responses.finish import map_usage
from dsh_llm.adapters.openai_responses.finish import terminal_finish
from dsh_llm.adapters.openai_responses.hosted import HOSTED_TYPES
from dsh_llm.adapters.openai_responses.hosted import annotation_citation
from dsh_llm.adapters.openai_responses.hosted import hosted_blocks
from dsh_llm.adapters.openai_responses.profiles import OPENAI
from dsh_llm.adapters.openai_responses.profiles import ResponsesProfile
from dsh_llm.adapters.openai_responses.request import REPLAY_WIRE
from dsh_llm.errors import LlmError
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import LlmFailure
from dsh_llm.protocol import ReplayEnvelope
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol.text_buffer import TextBuffer
from dsh_llm.transport.sse import DONE
from dsh_llm.transport.sse import SseEvent
from dsh_llm.transport.sse import decode_json

logger = logging.getLogger(__name__)

REFUSAL_CODE: Final = "REFUSAL"
"""The code of the ``error`` finish after a ``refusal`` part (its text is kept)."""

_ITEM_KINDS: Final[dict[str, BlockKind]] = {
    "message": TEXT,
    "reasoning": REASONING,
    "function_call": TOOL_CALL,
}
_ITEM_TYPES: Final[dict[BlockKind, str]] = {
    kind: name for name, kind in _ITEM_KINDS.items()
}
_FINAL_TEXTS: Final[dict[BlockKind, str]] = {
    TEXT: "message text",
    REASONING: "reasoning text",
    TOOL_CALL: "function call arguments",
}
"""What a final text is called in messages, by block kind."""
_json_decode = json.JSONDecoder().decode
_NOT_JSON: Final = "{provider} sent a payload that is not JSON: {start} in its stream"

RAW_EVENT_BYTES: Final = 256 * 1024
"""Events longer than this come to ``feed`` as their bytes (``SseEvent.raw``:
the family's decoder keeps them; see ``_long_payload``)."""
_LONG_LITERAL: Final = 64 * 1024
"""Bytes of a JSON string in a long event above which it is checked against
the texts the stream holds before it is decoded."""
_WINDOW: Final = 16 * 1024
"""Bytes of a long JSON string decoded at a time."""


# --- state ---------------------------------------------------------------------------


class _Item:
    """One output item, as far as it has been seen."""

    __slots__ = (
        "added",
        "call_id",
        "final",
        "hosted",
        "key",
        "kind",
        "name",
        "segments",
        "summaries",
        "type",
    )

    def __init__(self, key: str, kind: BlockKind | None, type_name: str) -> None:
        self.key = key
        """The id it was first seen with (``#item-<n>`` when it had none)."""
        self.kind = kind
        """``TEXT``, ``REASONING``, ``TOOL_CALL``, or ``None`` for a kind without
        a block (hosted tools, MCP, unknown)."""
        self.type = type_name
        """The wire's item ``type`` (``message``, ``web_search_call``...)."""
        self.added: dict[str, Any] = {}
        self.final: dict[str, Any] | None = None
        """The item as ``output_item.done`` (else the terminal output) gave it."""
        self.call_id: str | None = None
        self.name: str | None = None
        self.segments: dict[int, _Segment] = {}
        """The current segment per content part (reasoning and calls use 0)."""
        self.summaries: set[int] = set()
        self.hosted: tuple[Block, Block] | None = None
        """A hosted-tool item's reserved call and result blocks."""


class _Segment:
    """One block of an item: a text part, a reasoning item, or a call; its
    writer ``block`` carries it back as ``block.replay`` for the finish."""

    __slots__ = (
        "annotations",
        "block",
        "closed",
        "complete",
        "first",
        "held",
        "item",
        "prior",
        "refusal",
        "text",
    )

    def __init__(
        self, item: _Item, block: Block, *, first: bool, prior: str = ""
    ) -> None:
        self.item = item
        self.block = block
        self.closed = False
        """Whether the block was ended (content that resumes opens a new one)."""
        self.text = TextBuffer()
        """The block's text once it was ended: the string its ``block-end``
        carries, kept for the final texts' checks."""
        self.prior = prior
        """What the part's earlier blocks held (a part resumed after its block
        was ended early), so a final text is checked against the whole part."""
        self.complete = False
        """Whether the provider said the part is done (it may still wait in line)."""
        self.first = first
        """Whether this is the item's (or part's) first block: it carries the
        replay entry; a block resumed after an early close does not."""
        self.refusal = False
        self.annotations: list[Any] = []
        """The part's annotations as received (each one cited once)."""
        self.held = ""
        """A trailing high surrogate held back until the next fragment (a
        server that slices UTF-16 strings splits a pair across two deltas)."""


_HIGH: Final = "\ud800"
_LOW: Final = "\udc00"
_LAST: Final = "\udfff"


def _held_back(segment: _Segment, text: str) -> str:
    """``text`` with a surrogate pair split across fragments joined: a held high
    half goes in front (joined into its character when ``text`` starts with the
    low half), and a new trailing high half is held back on ``segment``."""
    held = segment.held
    if held:
        segment.held = ""
        if text and _LOW <= text[0] <= _LAST:
            pair = 0x10000 + ((ord(held) - 0xD800) << 10) + (ord(text[0]) - 0xDC00)
            text = chr(pair) + text[1:]
        else:
            text = held + text
    if text and _HIGH <= text[-1] < _LOW:
        segment.held = text[-1]
        text = text[:-1]
    return text


def _code_units(text: str) -> bytes:
    return text.encode("utf-16-le", "surrogatepass")


def _own(segment: _Segment) -> TextBuffer:
    """The segment's block's text: the writer's buffer while it is open."""
    return segment.text if segment.closed else segment.block.buffer


def _part_text(segment: _Segment) -> str:
    """What the segment's part received so far, over all its blocks (its held
    half included)."""
    own = _own(segment).value() + segment.held
    return segment.prior + own if segment.prior else own


def _part_rest(segment: _Segment, final: str) -> str | None:
    """``_rest(_part_text(segment), final)``, without building the part's text
    when it is one block with nothing held (a final text repeats a whole
    answer: one more copy of it would be the stream's peak)."""
    if not segment.prior and not segment.held:
        own = _own(segment)
        if own.prefix_of(final):
            return final[len(own) :] if len(final) > len(own) else ""
    return _rest(_part_text(segment), final)


_BACKSLASH: Final = 0x5C
_WHITESPACE: Final = b" \t\n\r"


def _strings(raw: bytearray) -> Iterator[tuple[int, int, bool]]:
    """Where JSON payload ``raw``'s strings are, quotes included, and whether
    each is a key (a colon follows). Outside strings JSON has no quote, so
    they are found from the start one after the other; inside, a quote ends
    the string unless an odd run of backslashes is before it. Only quotes are
    looked at (``find``), never each character. For a payload that is not
    JSON, whatever is found is judged again when it is decoded."""
    size = len(raw)
    at = 0
    while (start := raw.find(b'"', at)) >= 0:
        end = start
        while True:
            end = raw.find(b'"', end + 1)
            if end < 0:
                return
            run = end
            while raw[run - 1] == _BACKSLASH:
                run -= 1
            if (end - run) % 2 == 0:
                break
        at = end + 1
        after = at
        while after < size and raw[after] in _WHITESPACE:
            after += 1
        yield start, at, raw[after : after + 1] == b":"


def _utf8_windows(raw: bytearray, start: int, end: int) -> Iterator[bytes]:
    """The UTF-8 (``surrogatepass``) of the value of JSON string body
    ``raw[start:end]``, decoded a window at a time, each cut after a space or
    before the first byte of a character of several (text without spaces),
    so inside no escape, no UTF-8 sequence and no surrogate pair.

    Raises:
        ValueError: for a window that is not a JSON string's body, or that has
            nowhere to be cut.
    """
    while start < end:
        stop = end
        if end - start > _WINDOW:
            limit = start + _WINDOW
            stop = raw.rfind(b" ", start + _WINDOW // 2, limit) + 1
            if not stop:
                # A lead byte is within 4 bytes of any point of such text.
                stop = next(
                    (at for at in range(limit - 1, limit - 5, -1) if raw[at] >= 0xC0),
                    0,
                )
                if stop <= start:
                    raise ValueError("nowhere to cut a long string at")
        body = raw[start:stop].decode("utf-8", "replace")
        value = _json_decode(f'"{body}"')
        yield value.encode("utf-8", "surrogatepass")
        start = stop


def _stand_ins(value: Any, places: list[tuple[Any, Any, int]]) -> None:
    """Add where ``_known_strings``' stand-ins are in ``value`` to ``places``.

    Raises:
        ValueError: for a stand-in as a key, or the payload itself.
    """
    entries: Iterable[tuple[Any, Any]]
    if type(value) is dict:
        if any(key[:1] == "\x00" for key in value):
            raise ValueError("a long key")
        entries = value.items()
    elif type(value) is list:
        entries = enumerate(value)
    elif type(value) is str:
        raise ValueError("a long string as the payload")
    else:
        return
    for key, item in entries:
        if type(item) is str:
            if item[:1] == "\x00":
                places.append((value, key, int(item[1:])))
        elif type(item) is dict or type(item) is list:
            _stand_ins(item, places)


def _rest(streamed: str, final: str) -> str | None:
    """What ``final`` holds after ``streamed`` (``""`` when equal), or ``None``
    when ``streamed`` is not its prefix; compared in UTF-16 code units, so a
    pair split across the deltas still matches the final text."""
    if final.startswith(streamed):
        return final[len(streamed) :]
    head, whole = _code_units(streamed), _code_units(final)
    if not whole.startswith(head):
        return None
    return whole[len(head) :].decode("utf-16-le", "surrogatepass")


class ResponsesTranslator(WireTranslator[SseEvent]):
    """Responses API events in, protocol chunks out, in strict order.

    Each block to be is an item of the writer, opened in the wire's order:

    - A reasoning item opens at ``output_item.added`` (it carries the replay
      entry even with no summary); a ``message`` opens one text item per
      content part (``content_part.added`` or its first delta); a
      ``function_call`` opens at ``output_item.added``, with the call id and
      name of the item (never its ``arguments``: vLLM repeats them as the first
      delta).
    - While a call is still receiving arguments, everything else that starts
      waits behind it in the writer and is flushed in order when the call is
      done. A text or reasoning block that goes quiet while another item starts
      is ended at once, so the other streams live; content that later resumes
      for it opens a new block (no replay entry).
    - An event's content goes to the item its ``item_id`` already named, else
      to the item of its kind at its ``output_index``, else to a new item; an
      ``output_item.done`` whose id is new finishes the unfinished item of its
      type (and ``call_id``) at its index. The terminal ``output`` is matched
      by id, then by type and ``call_id``: at its position, else in stream
      order; what matches nothing never streamed.
    - A block ends at its provider end (``content_part.done``,
      ``function_call_arguments.done``, ``output_item.done``) or, when that
      never comes, at the terminal event, after the terminal ``output`` filled
      in what was never streamed (items missing from the stream included).
    - A final text (``content_part.done``, ``function_call_arguments.done``,
      ``output_item.done``, the terminal output) is checked against what its
      part streamed, never written twice: equal or empty, nothing; the deltas
      then more, the rest (a new block once the part's ended); a text that is
      part of what streamed, the streamed text stands (logged; arguments must
      be equal); anything else ``MALFORMED_RESPONSE``.
    - Several summary parts join with ``"\\n\\n"`` in one reasoning block;
      raw ``reasoning_text.delta`` (vLLM, LM Studio) is reasoning too.
    - A refusal part is a text block; the finish is then the ``REFUSAL`` error
      (text kept) unless it is ``max-tokens``.
    - A UTF-16 surrogate pair split across two fragments of one block (a
      server that slices JavaScript strings) is joined into its character; a
      high half with no low half after it goes out as it came, so nothing is
      lost. Final texts are compared with the deltas in UTF-16 code units.
    - An annotation (``output_text.annotation.added``, or on a final
      ``output_text`` part the events did not give) is a citation of its
      text block (``hosted.annotation_citation``), kept as received for the
      replay entry. A hosted-tool item (``web_search_call``,
      ``file_search_call``, ``code_interpreter_call``, ``mcp_call``,
      ``mcp_list_tools``) is a ``server-tool-call`` block and its
      ``server-tool-result``, both whole, in the item's place (reserved at
      ``output_item.added``, written at ``output_item.done`` or from the
      terminal output). Audio and unknown events or items give no chunk.
    - An event longer than ``RAW_EVENT_BYTES`` comes as its bytes from the
      family's decoder (``SseEvent.raw``) and translates exactly as its text
      would; a long string in it that equals a text the stream holds is that
      text, so a final text repeating the whole answer costs no second copy
      of it (``_long_payload``).

    - With ``unmarked_cap``, a ``completed`` response whose
      ``usage.output_tokens`` is at least that cap is a cut: ``max-tokens``
      (for a server that ends a cap cut like a natural end, llama-server).

    Args:
        profile: The server's profile (``zero_means_unknown``, messages).
        empty_response_as_stop: Report a blockless ``stop`` as ``stop``
            instead of the ``EMPTY_RESPONSE`` error finish.
        unmarked_cap: The ``max_output_tokens`` the request sent, when the
            server is known not to mark a cut at it (``None``: the terminal
            status alone decides).
    """

    end_marker = (
        "its terminal event (response.completed, response.incomplete or "
        "response.failed)"
    )

    def __init__(
        self,
        profile: ResponsesProfile = OPENAI,
        *,
        empty_response_as_stop: bool = False,
        unmarked_cap: int | None = None,
    ) -> None:
        super().__init__(
            provider=profile.provider, empty_response_as_stop=empty_response_as_stop
        )
        self._profile = profile
        self._unmarked_cap = unmarked_cap
        # An item by every id it was announced or finished with, by the
        # output_index it was last seen at, and in the order it was first seen.
        self._items: dict[str, _Item] = {}
        self._by_index: dict[int, _Item] = {}
        self._order: list[_Item] = []
        self._synthetic = 0
        # The segment at the head of the writer's line, and those waiting
        # behind it (only ever behind a call still receiving arguments).
        self._active: _Segment | None = None
        self._pending: deque[_Segment] = deque()
        self._refused = False
        self._response_id: str | None = None
        self._model: str | None = None
        self._sequence: int | None = None
        self._sequence_warned = False
        self._difference_warned = False

    # -- input --

    def is_keepalive(self, event: SseEvent) -> bool:
        """An event with empty data carries nothing: like a comment, it only
        keeps the connection alive (the read loop's keep-alive bound)."""
        raw = event.raw
        if raw is None:
            return not event.data.strip()
        return len(raw) < 16 and not raw.strip()

    def feed(self, event: SseEvent) -> list[StreamChunk]:
        """Translate one SSE event (see the class docstring).

        Raises:
            LlmError: ``MALFORMED_RESPONSE`` for a bad payload, ``STREAM_CLOSED``
                for a ``[DONE]`` before the terminal event, the server's failure
                for ``response.failed`` and ``error``.
        """
        writer = self.writer
        if writer.finished:
            return []
        data = event.data
        # Only short data can be the end marker or blank (the hot path skips
        # stripping every payload).
        stripped = data.strip() if len(data) < 16 else data
        if not stripped:
            raw = event.raw
            if raw is None:
                return []
            if len(raw) < 16:  # read as any data (never from the family's decoder)
                data = raw.decode("utf-8", "replace")
                return self.feed(event._replace(data=data, raw=None))
            return self._translate(self._long_payload(raw))
        if stripped == DONE:
            raise writer.stream_closed(
                "stream sent [DONE] before its terminal event (the answer was "
                "cut short)"
            )
        return self._translate(decode_json(data, writer.provider, _NOT_JSON))

    def _long_payload(self, raw: bytearray) -> Any:
        """The payload of a long event (its bytes, ``SseEvent.raw``), equal to
        what ``feed`` decodes from ``data``.

        A final text that repeats a whole answer (``output_text.done`` and the
        three events after it, from OpenAI) would cost its JSON's ``str`` and
        the decoded string, 2x a string one emoji makes 4 bytes a character.
        Each long JSON string here is first compared, a window at a time, with
        the texts the stream holds: one that equals a text is that text (its
        ``value()``: the same object the block-end carries), taken once the
        event's bytes are cleared; any other is decoded on its own, and the
        rest of the event with a stand-in for each. An event without long
        strings, or one whose strings cannot be judged apart, is decoded as a
        whole, as any other.
        """
        try:
            payload = self._known_strings(raw)
        except (ValueError, RecursionError):
            payload = None  # then the whole decode says what is wrong
        if payload is not None:
            return payload
        data = raw.decode("utf-8", "replace")
        return decode_json(data, self.writer.provider, _NOT_JSON)

    def _known_strings(self, raw: bytearray) -> Any:
        """``_long_payload``'s payload, its long strings taken apart, else
        ``None``; ``raw`` is cleared when it is not ``None``.

        Raises:
            ValueError: for what only the whole decode may judge.
        """
        if b"\\u0000" in raw:
            return None  # a NUL could pass for a stand-in below
        spans = [
            (start, end)
            for start, end, key in _strings(raw)
            if end - start > _LONG_LITERAL and not key
        ]
        if not spans:
            return None
        strings: list[TextBuffer | str] = []
        for start, end in spans:
            buffer = self._holding(raw, start + 1, end - 1)
            if buffer is None:
                # Not a text the stream holds (an encrypted reasoning item):
                # decoded on its own, as the whole decode would.
                literal = raw[start:end].decode("utf-8", "replace")
                strings.append(_json_decode(literal))
                del literal
            else:
                strings.append(buffer)
        # The rest decoded with a stand-in for each long string, "\x00<n>".
        skeleton = bytearray()
        at = 0
        for number, (start, end) in enumerate(spans):
            skeleton += raw[at:start]
            skeleton += b'"\\u0000%d"' % number
            at = end
        skeleton += raw[at:]
        payload = _json_decode(skeleton.decode("utf-8", "replace"))
        del skeleton
        places: list[tuple[Any, Any, int]] = []
        _stand_ins(payload, places)  # raises for a stand-in it cannot replace
        raw.clear()  # before a text is taken: never both at once
        for target, key, number in places:
            string = strings[number]
            target[key] = string if isinstance(string, str) else string.value()
        return payload

    def _holding(self, raw: bytearray, start: int, end: int) -> TextBuffer | None:
        """The buffer of a text the stream holds that JSON string body
        ``raw[start:end]`` equals, if any (compared a window at a time; none
        when the string cannot be cut into windows)."""
        try:
            for item in self._order:
                for segment in item.segments.values():
                    if segment.prior or segment.held:
                        continue
                    own = _own(segment)
                    if len(own) and own.matches_utf8(_utf8_windows(raw, start, end)):
                        return own
        except ValueError:
            pass  # decoded on its own, which judges it
        return None

    def feed_payload(self, payload: Any) -> list[StreamChunk]:
        """Translate one decoded event payload (``feed`` without the framing)."""
        if self.writer.finished:
            return []
        return self._translate(payload)

    def _translate(self, payload: Any) -> list[StreamChunk]:
        writer = self.writer
        if type(payload) is not dict:
            raise writer.malformed("an event that is not a JSON object")
        kind = payload.get("type")
        if type(kind) is not str:
            if "error" in payload:
                self._fail(stream_failure(payload, provider=writer.provider))
            raise writer.malformed("an event without a string type")
        number = payload.get("sequence_number")
        last = self._sequence
        if last is not None and type(number) is int and number == last + 1:
            self._sequence = number  # the next one, as nearly every event is
        else:
            self._check_sequence(number, kind)
        handler = _HANDLERS.get(kind)
        if handler is not None:
            handler(self, payload)
        return writer.take()

    def _check_sequence(self, number: object, kind: str) -> None:
        if type(number) is not int:
            return
        last = self._sequence
        self._sequence = number
        if last is None or number == last + 1:
            return
        level = logging.DEBUG if self._sequence_warned else logging.WARNING
        self._sequence_warned = True
        logger.log(
            level,
            "%s: sequence_number %d after %d on %s (gap, repeat or unset); ignored",
            self.writer.provider,
            number,
            last,
            kind,
        )

    # -- lifecycle --

    def _on_lifecycle(self, payload: dict[str, Any]) -> None:
        response = payload.get("response")
        if isinstance(response, dict):
            self._remember(response)

    def _remember(self, response: dict[str, Any]) -> None:
        rid = response.get("id")
        if isinstance(rid, str) and rid:
            self._response_id = rid
        model = response.get("model")
        if isinstance(model, str) and model:
            self._model = model

    # -- items --

    def _on_item_added(self, payload: dict[str, Any]) -> None:
        raw = self._item_payload(payload)
        rid = raw.get("id")
        item = self._items.get(rid) if isinstance(rid, str) and rid else None
        if item is None:
            item = self._new_item(raw, payload.get("output_index"))
        item.added = _slim(item, raw)
        self._identify(item, raw)
        if item.kind is REASONING or item.kind is TOOL_CALL:
            self._segment(item, 0)
        elif item.type in HOSTED_TYPES:
            self._hosted(item)

    def _on_item_done(self, payload: dict[str, Any]) -> None:
        raw = self._item_payload(payload)
        rid = raw.get("id") if _has_id(raw) else None
        item = self._items.get(rid) if rid is not None else None
        if item is None:
            # An id never seen (or none): the unfinished item of this type at
            # its output_index, else an item the stream never announced.
            index = payload.get("output_index")
            found = self._by_index.get(index) if type(index) is int else None
            if found is not None and found.final is None and _same(found, raw):
                item = found
                if rid is not None:
                    self._items[rid] = item
            else:
                item = self._new_item(raw, index)
                item.added = _slim(item, raw)
        item.final = _slim(item, raw)
        self._identify(item, raw)
        self._fill(item, raw)

    def _item_payload(self, payload: dict[str, Any]) -> dict[str, Any]:
        raw = payload.get("item")
        if type(raw) is not dict:
            raise self.writer.malformed("an output item that is not an object")
        return raw

    def _new_item(self, raw: dict[str, Any], output_index: object) -> _Item:
        """An item first seen whole (``added``, ``done`` or the terminal output)."""
        type_name = raw.get("type")
        type_name = type_name if isinstance(type_name, str) else ""
        rid = raw.get("id")
        return self._register(
            rid if isinstance(rid, str) else None,
            _ITEM_KINDS.get(type_name),
            type_name,
            output_index,
        )

    def _register(
        self,
        rid: str | None,
        kind: BlockKind | None,
        type_name: str,
        output_index: object,
    ) -> _Item:
        if rid:
            key = rid
        else:
            self._synthetic += 1
            key = f"#item-{self._synthetic}"
        item = self._items[key] = _Item(key, kind, type_name)
        self._order.append(item)
        if type(output_index) is int:
            self._by_index[output_index] = item
        return item

    def _item_of(self, payload: dict[str, Any], kind: BlockKind) -> _Item:
        """The item an event's content is for: the one its ``item_id`` already
        named (indexes may be reused or skipped), else the item of this kind at
        its ``output_index`` (an id never seen is no new item: some servers
        change ids on every event), else a new one (a server that skips
        ``added``)."""
        rid = payload.get("item_id")
        if rid is not None and type(rid) is not str:
            raise self.writer.malformed("an item_id that is not a string")
        if rid:
            item = self._items.get(rid)
            if item is not None:
                if item.kind is not None and item.kind is not kind:
                    # Content of one kind for an item of another would be lost.
                    raise self.writer.malformed(
                        f"{payload['type']} for a {item.kind} item"
                    )
                return item
        index = payload.get("output_index")
        if type(index) is int:
            found = self._by_index.get(index)
            if found is not None and found.kind is kind:
                return found
        elif not rid:
            raise self.writer.malformed(
                "an event naming no item (no item_id, no output_index)"
            )
        return self._register(rid, kind, _ITEM_TYPES[kind], index)

    def _identify(self, item: _Item, raw: Mapping[str, Any]) -> None:
        if item.kind is not TOOL_CALL:
            return
        call_id = raw.get("call_id")
        name = raw.get("name")
        learned = False
        if item.call_id is None and isinstance(call_id, str) and call_id:
            item.call_id = call_id
            learned = True
        if item.name is None and isinstance(name, str) and name:
            item.name = name
            learned = True
        if learned:
            for segment in item.segments.values():
                if not segment.closed:
                    self._label(segment)

    def _label(self, segment: _Segment) -> None:
        """Give a call's block the id and name its item has now."""
        block, item, writer = segment.block, segment.item, self.writer
        # A delta may leave out what is not known yet (docs/protocol.md): a
        # call that streamed before its id or name came takes it now.
        writer.set_call_id(block, self._call_id(item))
        writer.set_name(block, item.name or block.name)

    def _call_id(self, item: _Item) -> str:
        return item.call_id or ("" if item.key.startswith("#") else item.key)

    # -- content --

    def _part_index(self, payload: dict[str, Any], field: str) -> int:
        value = payload.get(field, 0)
        if type(value) is not int or value < 0:
            raise self.writer.malformed(f"a {field} that is not a non-negative integer")
        return value

    def _text_of(self, payload: dict[str, Any], field: str) -> str:
        value = payload.get(field)
        if type(value) is not str:
            raise self.writer.malformed(f"a {field} that is not a string")
        return value

    def _on_part_added(self, payload: dict[str, Any]) -> None:
        part = payload.get("part")
        if type(part) is not dict:
            raise self.writer.malformed("a content part that is not an object")
        part_type = part.get("type")
        if part_type in ("output_text", "refusal"):
            item = self._item_of(payload, TEXT)
            if item.kind is not TEXT:
                return
            segment = self._segment(item, self._part_index(payload, "content_index"))
            if part_type == "refusal":
                segment.refusal = True
                self._refused = True

    def _on_part_done(self, payload: dict[str, Any]) -> None:
        part = payload.get("part")
        if type(part) is not dict or part.get("type") not in ("output_text", "refusal"):
            return
        item = self._item_of(payload, TEXT)
        if item.kind is not TEXT:
            return
        index = self._part_index(payload, "content_index")
        refusal = part["type"] == "refusal"
        value = part.get("refusal" if refusal else "text")
        text = value if isinstance(value, str) else ""
        segment = item.segments.get(index)
        if segment is None and text:
            segment = self._segment(item, index)
        if segment is None:
            return
        if refusal and not segment.refusal:
            segment.refusal = True
            self._refused = True
        self._supply(segment, text)
        if not refusal:
            self._annotate(segment, part.get("annotations"))
        self._complete(segment)

    def _on_annotation(self, payload: dict[str, Any]) -> None:
        item = self._item_of(payload, TEXT)
        if item.kind is not TEXT:
            return
        segment = self._segment(item, self._part_index(payload, "content_index"))
        self._cite(segment, payload.get("annotation"))

    def _annotate(self, segment: _Segment, annotations: object) -> None:
        """A final part's annotations: those the events did not give are cited."""
        if type(annotations) is list:
            for annotation in annotations[len(segment.annotations) :]:
                self._cite(segment, annotation)

    def _cite(self, segment: _Segment, annotation: object) -> None:
        segment.annotations.append(annotation)
        if segment.closed:
            return  # its block ended early: the citation has no block to join
        citation = annotation_citation(annotation, len(segment.prior))
        if citation is not None:
            self.writer.cite(segment.block, (citation,))

    def _hosted(self, item: _Item) -> tuple[Block, Block]:
        """A hosted-tool item's two blocks, reserved in its place."""
        if item.hosted is None:
            writer = self.writer
            item.hosted = (
                writer.reserve(SERVER_TOOL_CALL),
                writer.reserve(SERVER_TOOL_RESULT),
            )
        return item.hosted

    def _hosted_done(self, item: _Item, raw: dict[str, Any]) -> None:
        call_block, result_block = self._hosted(item)
        if call_block.ended:
            return  # already written (output_item.done, then the terminal)
        call, result = hosted_blocks(raw)
        self.writer.complete(call_block, call)
        self.writer.complete(result_block, result)

    def _on_text_delta(self, payload: dict[str, Any]) -> None:
        text = payload.get("delta")
        if type(text) is not str:
            text = self._text_of(payload, "delta")
        # Hot path: the next piece of the live text block, with nothing held
        # back and no surrogate half at its end (what nearly every delta is).
        active = self._active
        if (
            active is not None
            and text
            and (block := active.block).kind is TEXT
            and not active.held
            and not active.refusal
            and active.item.key == payload.get("item_id")
            and payload["type"] == "response.output_text.delta"
            and type(part := payload.get("content_index", 0)) is int
            and active.item.segments.get(part) is active
            and not _HIGH <= text[-1] < _LOW
        ):
            self.writer.append(block, text)
            return
        item = self._item_of(payload, TEXT)
        if item.kind is not TEXT:
            return
        segment = self._segment(item, self._part_index(payload, "content_index"))
        if payload["type"] == "response.refusal.delta" and not segment.refusal:
            segment.refusal = True
            self._refused = True
        self._append(segment, text)

    def _on_summary_part(self, payload: dict[str, Any]) -> None:
        item = self._item_of(payload, REASONING)
        if item.kind is REASONING:
            self._summary(item, self._part_index(payload, "summary_index"))

    def _summary(self, item: _Item, index: int) -> _Segment:
        segment = self._segment(item, 0)
        if index not in item.summaries:
            if item.summaries:
                self._append(segment, "\n\n")
            item.summaries.add(index)
        return segment

    def _on_summary_delta(self, payload: dict[str, Any]) -> None:
        text = self._text_of(payload, "delta")
        item = self._item_of(payload, REASONING)
        if item.kind is REASONING:
            segment = self._summary(item, self._part_index(payload, "summary_index"))
            self._append(segment, text)

    def _on_reasoning_delta(self, payload: dict[str, Any]) -> None:
        text = self._text_of(payload, "delta")
        item = self._item_of(payload, REASONING)
        if item.kind is REASONING:
            self._append(self._segment(item, 0), text)

    def _on_arguments_delta(self, payload: dict[str, Any]) -> None:
        text = self._text_of(payload, "delta")
        item = self._item_of(payload, TOOL_CALL)
        if item.kind is TOOL_CALL:
            self._append(self._segment(item, 0), text)

    def _on_arguments_done(self, payload: dict[str, Any]) -> None:
        item = self._item_of(payload, TOOL_CALL)
        if item.kind is not TOOL_CALL:
            return
        self._identify(item, payload)
        segment = self._segment(item, 0)
        if "arguments" in payload:
            self._reconcile(segment, self._text_of(payload, "arguments"))
        self._complete(segment)

    def _reconcile(self, segment: _Segment, arguments: str) -> None:
        """Check a call's final arguments against its deltas: equal, nothing;
        the deltas a prefix of them while the call is open, the rest is one
        more delta; anything else ``MALFORMED_RESPONSE`` (a call runs with its
        arguments exactly)."""
        if segment.closed:
            # Its block-end carried the deltas, "{}" when there were none.
            kept = segment.text
            if kept.matches(arguments) if len(kept) else arguments in ("", "{}"):
                return
        else:
            rest = _part_rest(segment, arguments)
            if rest is not None:
                self._append(segment, rest)
                return
        raise self.writer.malformed(
            "function call arguments that contradict the streamed deltas"
        )

    def _fill(self, item: _Item, raw: dict[str, Any]) -> None:
        """Take a finished item (``output_item.done`` or the terminal output):
        supply what never streamed, then end the item's blocks."""
        if item.kind is TOOL_CALL:
            segment = self._segment(item, 0)
            arguments = raw.get("arguments")
            if arguments is not None:
                if type(arguments) is not str:
                    raise self.writer.malformed(
                        "function call arguments that are not a string"
                    )
                self._reconcile(segment, arguments)
            self._complete(segment)
        elif item.kind is REASONING:
            segment = self._segment(item, 0)
            text = "\n\n".join(_texts(raw.get("summary"), "summary_text"))
            text = text or "".join(_texts(raw.get("content"), "reasoning_text"))
            self._supply(segment, text)
            self._complete(segment)
        elif item.type in HOSTED_TYPES:
            self._hosted_done(item, raw)
        elif item.kind is TEXT:
            final = self._final_parts(item, raw.get("content"))
            for part, refusal, text, annotations in final:
                existing = item.segments.get(part)
                if existing is None and not text:
                    continue
                segment = self._segment(item, part)
                if refusal and not segment.refusal:
                    segment.refusal = True
                    self._refused = True
                self._supply(segment, text)
                self._annotate(segment, annotations)
            for segment in list(item.segments.values()):
                self._complete(segment)

    @staticmethod
    def _final_parts(
        item: _Item, content: object
    ) -> list[tuple[int, bool, str, object]]:
        """A finished message's text and refusal parts as ``(part, refusal,
        text, annotations)``, ``part`` the ``content_index`` it streamed under:
        its position in ``content``, or, when the stream numbered its parts
        otherwise (vLLM counts them across items), the streamed parts in
        order."""
        if not isinstance(content, list):
            return []
        parts: list[tuple[int, bool, str, object]] = []
        for position, part in enumerate(content):
            if not isinstance(part, dict):
                continue
            part_type = part.get("type")
            if part_type not in ("output_text", "refusal"):
                continue
            refusal = part_type == "refusal"
            value = part.get("refusal" if refusal else "text")
            text = value if isinstance(value, str) else ""
            annotations = None if refusal else part.get("annotations")
            parts.append((position, refusal, text, annotations))
        streamed = sorted(item.segments)
        if set(streamed) <= {part[0] for part in parts}:
            return parts
        extra = streamed[-1] + 1
        renumbered: list[tuple[int, bool, str, object]] = []
        for order, (_, refusal, text, annotations) in enumerate(parts):
            if order < len(streamed):
                renumbered.append((streamed[order], refusal, text, annotations))
            else:
                renumbered.append((extra, refusal, text, annotations))
                extra += 1
        return renumbered

    def _supply(self, segment: _Segment, final: str) -> None:
        """Check a final text (``content_part.done``, ``output_item.done``, the
        terminal output) against what the part streamed, over all its blocks:

        - empty or equal: nothing (a repeat is never new content);
        - what streamed is its prefix: the rest is added (a server that sent
          only the final item, or lost the last deltas), as a new block when
          the part's block already ended;
        - it is part of what streamed (a server that trimmed it): the streamed
          text stands, nothing of the final one is lost; logged;
        - else each holds text the other lacks: ``MALFORMED_RESPONSE``.
        """
        if not final:
            return
        if (
            segment is self._active
            and not segment.prior
            and not segment.held
            and segment.block.buffer.adopt(final)
        ):
            # Equal, and the block ends right after (``_complete``): it ends
            # with this very string, not a second copy of the text.
            return
        rest = _part_rest(segment, final)
        if rest is not None:
            self._append(segment, rest)
            return
        streamed = _part_text(segment)
        what = _FINAL_TEXTS[segment.block.kind]
        if final in streamed:
            level = logging.DEBUG if self._difference_warned else logging.WARNING
            self._difference_warned = True
            logger.log(
                level,
                "%s: a final %s of %d characters is part of the %d streamed; "
                "the streamed text stands",
                self.writer.provider,
                what,
                len(final),
                len(streamed),
            )
            return
        raise self.writer.malformed(f"a final {what} that contradicts its deltas")

    # -- blocks --

    def _segment(self, item: _Item, part: int) -> _Segment:
        """The current segment of ``item``'s part ``part``, opened when there is
        none yet."""
        segment = item.segments.get(part)
        if segment is not None:
            return segment
        assert item.kind is not None
        segment = self._open(item, item.kind, first=True)
        item.segments[part] = segment
        return segment

    def _open(
        self, item: _Item, kind: BlockKind, *, first: bool, prior: str = ""
    ) -> _Segment:
        """A new item of the writer for ``item``: live when nothing else is,
        else in line behind the live call (a quiet text or reasoning block
        ends so the new one streams live)."""
        active = self._active
        if (
            active is not None
            and not self._pending
            and active.block.kind is not TOOL_CALL
        ):
            self._close(active)
        if kind is TOOL_CALL:
            # The wire's call starts with its item; its first delta is its
            # first argument text.
            block = self.writer.open(
                kind, call_id=self._call_id(item), name=item.name, announce=False
            )
        else:
            block = self.writer.open(kind)
        segment = _Segment(item, block, first=first, prior=prior)
        block.replay = segment
        if self._active is None and not self._pending:
            self._active = segment
        else:
            self._pending.append(segment)
        return segment

    def _append(self, segment: _Segment, text: str) -> None:
        if not text:
            return
        if segment.closed:
            # Content resumed for a block already ended: a new block (rule 3),
            # the part's first when the ended one never showed (empty text).
            item = segment.item
            part = next(k for k, v in item.segments.items() if v is segment)
            resumed = self._open(
                item,
                segment.block.kind,
                first=segment.first and not segment.block.started,
                prior=segment.prior + segment.text.value(),
            )
            resumed.refusal = segment.refusal
            item.segments[part] = resumed
            segment = resumed
        text = _held_back(segment, text)
        if text:
            self.writer.append(segment.block, text)

    def _complete(self, segment: _Segment) -> None:
        segment.complete = True
        if segment is self._active:
            self._close(segment)
            self._advance()

    def _advance(self) -> None:
        """The live block ended: the blocks in line go out in order, the first
        one that can still grow staying live when it may stream live."""
        pending = self._pending
        while pending:
            segment = pending.popleft()
            self._active = segment
            if not segment.complete and (
                segment.block.kind is TOOL_CALL or not pending
            ):
                return
            self._close(segment)

    def _close(self, segment: _Segment) -> None:
        """End ``segment``'s block (it heads the writer's line)."""
        block = segment.block
        if segment.held:
            # No low half followed: the high surrogate goes out as it came.
            held, segment.held = segment.held, ""
            self.writer.append(block, held)
        segment.closed = True
        # Kept for the final texts' checks (the writer's buffer is cleared):
        # the very string the block-end carries, no copy of it.
        segment.text = TextBuffer.holding(block.buffer.value())
        if self._active is segment:
            self._active = None
        self.writer.end(block)

    def _close_all(self) -> None:
        for item in self._order:
            if item.hosted is not None:
                # A hosted item never finished: its reserved blocks are dropped.
                for block in item.hosted:
                    self.writer.end(block)
        if self._active is not None:
            self._close(self._active)
        pending = self._pending
        while pending:
            segment = pending.popleft()
            self._active = segment
            self._close(segment)

    # -- terminal --

    def _on_terminal(self, payload: dict[str, Any]) -> None:
        response = payload.get("response")
        writer = self.writer
        if type(response) is not dict:
            raise writer.malformed("a terminal event without a response object")
        self._remember(response)
        usage = response.get("usage")
        output_tokens = None
        if isinstance(usage, dict):
            # Reported first: whatever fails below, the billed tokens go out
            # (none reported: the finish's usage is unknown, never invented).
            mapped = map_usage(usage, profile=self._profile)
            writer.report_usage(mapped)
            output_tokens = mapped.output_tokens
        output = response.get("output")
        items = (
            []
            if output is None
            else self.objects(output, "a response output", "an output item")
        )
        incomplete = any(raw.get("status") == "incomplete" for raw in items)
        for raw, item in self._match_output(items):
            if item.final is None:
                item.final = _slim(item, raw)
            self._identify(item, raw)
            self._fill(item, raw)
        incomplete = incomplete or any(
            item.final is not None and item.final.get("status") == "incomplete"
            for item in self._items.values()
        )
        # The terminal response closes every item, streamed to the end or not.
        self._close_all()
        details = response.get("incomplete_details")
        status = response.get("status")
        if status not in ("incomplete", "cancelled", "failed"):
            # The event type decides unless the response says it was cut.
            status = (
                "completed" if payload["type"] == "response.completed" else "incomplete"
            )
        reason = terminal_finish(
            status,
            details.get("reason") if isinstance(details, dict) else None,
            item_incomplete=incomplete,
        )
        cap = self._unmarked_cap
        if (
            cap is not None
            and reason.kind == FinishReason.STOP.kind
            and output_tokens is not None
            and output_tokens >= cap
        ):
            reason = FinishReason.MAX_TOKENS
        if reason.failure is not None:
            writer.finish_unsuccessfully(reason.failure)
        elif self._refused and reason.kind != FinishReason.MAX_TOKENS.kind:
            writer.finish_unsuccessfully(
                LlmFailure(message="model stopped: refusal", code=REFUSAL_CODE)
            )
        else:
            writer.finish(reason, replay=self._replay)

    def _match_output(
        self, output: list[dict[str, Any]]
    ) -> list[tuple[dict[str, Any], _Item]]:
        """The terminal ``output``, each item with what streamed of it: the item
        its id names; else an unmatched streamed item of its type (and call id),
        the one at its position first, else the first in stream order; else a
        new item (it never streamed)."""
        found: list[_Item | None] = []
        taken: set[int] = set()
        for raw in output:
            rid = raw.get("id")
            item = self._items.get(rid) if isinstance(rid, str) and rid else None
            if item is not None:
                taken.add(id(item))
            found.append(item)
        loose = [position for position, item in enumerate(found) if item is None]

        def fits(item: _Item | None, raw: dict[str, Any]) -> bool:
            return item is not None and id(item) not in taken and _same(item, raw)

        for position in loose:
            item = self._by_index.get(position)
            if item is not None and fits(item, output[position]):
                taken.add(id(item))
                found[position] = item
        for position in loose:
            raw = output[position]
            if found[position] is None:
                item = next((item for item in self._order if fits(item, raw)), None)
                if item is not None:
                    taken.add(id(item))
                    found[position] = item
        pairs: list[tuple[dict[str, Any], _Item]] = []
        for raw, item in zip(output, found, strict=True):
            if item is None:
                item = self._new_item(raw, None)
                item.added = _slim(item, raw)
            pairs.append((raw, item))
        return pairs

    def _on_failed(self, payload: dict[str, Any]) -> None:
        response = payload.get("response")
        if type(response) is not dict:
            raise self.writer.malformed(
                "a response.failed event without a response object"
            )
        self._remember(response)
        usage = response.get("usage")
        if isinstance(usage, dict):
            self.writer.report_usage(map_usage(usage, profile=self._profile))
        error = response.get("error")
        self._fail(
            stream_failure(
                error if isinstance(error, dict) else {},
                provider=self.writer.provider,
            )
        )

    def _on_error(self, payload: dict[str, Any]) -> None:
        self._fail(stream_failure(payload, provider=self.writer.provider))

    def _fail(self, failure: LlmFailure) -> NoReturn:
        """Raise the server's failure; the live block's held half goes out
        first, as it came (the blocks stay open: the answer failed)."""
        active = self._active
        if active is not None and active.held:
            held, active.held = active.held, ""
            self.writer.append(active.block, held)
        raise LlmError.from_failure(failure)

    def _replay(self) -> ReplayEnvelope:
        entries: list[Any] = []
        for block in self.writer.emitted:
            segment = block.replay
            if not isinstance(segment, _Segment):
                entries.append(None)  # a hosted tool: its item is its data
                continue
            item = segment.item
            if not segment.first:
                entries.append(None)
            elif block.kind is REASONING:
                entries.append(_reasoning_entry(item))
            elif block.kind is TOOL_CALL:
                entries.append(
                    {
                        "type": "function_call",
                        "id": _wire_id(item),
                        "call_id": self._call_id(item),
                        "name": item.name or "",
                    }
                )
            else:
                entry: dict[str, Any] = {
                    "type": "message",
                    "id": _wire_id(item),
                    "part": "refusal" if segment.refusal else "output_text",
                }
                phase = (item.final or item.added).get("phase")
                if isinstance(phase, str):
                    entry["phase"] = phase
                if segment.annotations:
                    entry["annotations"] = segment.annotations
                entries.append(entry)
        return ReplayEnvelope(
            response={
                "wire": REPLAY_WIRE,
                "id": self._response_id,
                "model": self._model,
            },
            blocks=tuple(entries),
        )


def _texts(parts: object, part_type: str) -> list[str]:
    if not isinstance(parts, list):
        return []
    return [
        part["text"]
        for part in parts
        if isinstance(part, dict)
        and part.get("type") == part_type
        and isinstance(part.get("text"), str)
    ]


_CHECKED: Final = frozenset({"content", "arguments"})
"""What ``_slim`` leaves out of a finished message or call."""


def _slim(item: _Item, raw: dict[str, Any]) -> dict[str, Any]:
    """What an item keeps of a finished item's payload: a reasoning item's whole
    (it is sent back as it came), another's without its ``content`` and
    ``arguments`` (checked against the deltas at once, never read again: kept,
    they would be one more copy of the answer until the stream ends)."""
    if item.kind is REASONING or not ("content" in raw or "arguments" in raw):
        return raw
    return {key: value for key, value in raw.items() if key not in _CHECKED}


def _same(item: _Item, raw: Mapping[str, Any]) -> bool:
    """Whether finished item ``raw`` may be ``item`` though no id says so: the
    same type, and for a call the same ``call_id`` when both have one (the one
    id that stays put where item ids change on every event)."""
    if item.type != raw.get("type"):
        return False
    call_id = raw.get("call_id")
    return not (item.call_id and isinstance(call_id, str) and call_id) or (
        call_id == item.call_id
    )


def _has_id(raw: Mapping[str, Any]) -> bool:
    rid = raw.get("id")
    return isinstance(rid, str) and bool(rid)


def _wire_id(item: _Item) -> str | None:
    """The id to send ``item`` back with: the finished item's (``output_item.done``,
    else the terminal output's), else the one it was first seen with."""
    final = item.final
    if final is not None and _has_id(final):
        fid: str = final["id"]
        return fid
    return None if item.key.startswith("#") else item.key


def _reasoning_entry(item: _Item) -> dict[str, Any] | None:
    """The reasoning item to send back: from ``output_item.done`` (or the
    terminal output), never ``encrypted_content`` from ``added`` (it may be
    partial there)."""
    rid = _wire_id(item)
    if rid is None:
        return None
    source = item.final or {}
    entry: dict[str, Any] = {"type": "reasoning", "id": rid}
    summary = source.get("summary")
    entry["summary"] = summary if isinstance(summary, list) else []
    encrypted = source.get("encrypted_content")
    if isinstance(encrypted, str):
        entry["encrypted_content"] = encrypted
    else:
        content = source.get("content")
        if isinstance(content, list) and content:
            entry["content"] = content
    return entry


_Handler = Callable[[ResponsesTranslator, dict[str, Any]], None]
_HANDLERS: Final[dict[str, _Handler]] = {
    "response.created": ResponsesTranslator._on_lifecycle,
    "response.in_progress": ResponsesTranslator._on_lifecycle,
    "response.queued": ResponsesTranslator._on_lifecycle,
    "response.output_item.added": ResponsesTranslator._on_item_added,
    "response.output_item.done": ResponsesTranslator._on_item_done,
    "response.content_part.added": ResponsesTranslator._on_part_added,
    "response.content_part.done": ResponsesTranslator._on_part_done,
    "response.output_text.delta": ResponsesTranslator._on_text_delta,
    "response.refusal.delta": ResponsesTranslator._on_text_delta,
    "response.output_text.annotation.added": ResponsesTranslator._on_annotation,
    "response.reasoning_summary_part.added": ResponsesTranslator._on_summary_part,
    "response.reasoning_summary_text.delta": ResponsesTranslator._on_summary_delta,
    "response.reasoning_text.delta": ResponsesTranslator._on_reasoning_delta,
    "response.function_call_arguments.delta": ResponsesTranslator._on_arguments_delta,
    "response.function_call_arguments.done": ResponsesTranslator._on_arguments_done,
    "response.completed": ResponsesTranslator._on_terminal,
    "response.incomplete": ResponsesTranslator._on_terminal,
    "response.failed": ResponsesTranslator._on_failed,
    "error": ResponsesTranslator._on_error,
}
"""Event types that matter, by handler; every other type produces nothing."""
