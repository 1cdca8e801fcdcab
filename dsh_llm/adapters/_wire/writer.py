"""``BlockWriter``: the one writer of the protocol's rules (``docs/protocol.md``).

A translator says what the wire said ("a text item opened", "this piece arrived
for it", "the provider closed it", "the server reported usage", "the provider
finished with this reason"); the writer turns that into chunks. Every rule that
decides how a stream is shaped or ends lives here, once:

- block indexes 0, 1, 2... in opening order, one block open at a time: the
  first open item streams live, one opened before it ended is buffered and
  flushed (one delta) once every item before it ended; an empty text item is
  dropped; whole items (``open_whole``: a returned image, a server tool call or
  result) go out as ``block-start`` and ``block-end`` together, and a reserved
  one (``reserve``, ``complete``) keeps its place or is dropped;
- citations (``cite``) stream in order with their text item, and ``block-end``
  carries exactly what the deltas added up to (``"{}"`` for a call without
  argument text; a call without a name is ``MALFORMED_RESPONSE``);
- the finish: blocks ended, one ``usage`` (unknown counts when none came), one
  ``finish``, its kind ``tool-calls`` iff a client tool call was emitted, a
  blockless ``stop`` is ``EMPTY_RESPONSE``, an item never closed (unless the
  cap cut it) is ``STREAM_CLOSED``, never a success;
- failures are raised, never yielded: ``before_failure()`` is the usage already
  reported, which comes right before the raised failure (rule 7);
  ``stopped_failure`` is the failure of a provider's own finish reason that is
  no answer (``finish_unsuccessfully``).

It does no I/O and knows no secrets (the read loop redacts what it raises).
The whole contract, point by point: ``docs/writing-an-adapter.md``.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable
from collections.abc import Sequence
from typing import Final
from typing import Literal

from dsh_llm.adapters._wire.values import unchecked_delta
from dsh_llm.adapters._wire.values import unchecked_text_delta
from dsh_llm.adapters._wire.values import unchecked_tool_delta
from dsh_llm.errors import EMPTY_RESPONSE_CODE
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import BlockEnd
from dsh_llm.protocol import BlockStart
from dsh_llm.protocol import CallId
from dsh_llm.protocol import Citation
from dsh_llm.protocol import ContentBlock
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import ImageBlock
from dsh_llm.protocol import LlmFailure
from dsh_llm.protocol import ReasoningBlock
from dsh_llm.protocol import ReasoningDelta
from dsh_llm.protocol import ReplayEnvelope
from dsh_llm.protocol import ServerToolCallBlock
from dsh_llm.protocol import ServerToolResultBlock
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import TextDelta
from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.protocol import UsageChunk
from dsh_llm.protocol.text_buffer import TextBuffer

EMPTY_RESPONSE_MESSAGE: Final = "model returned a completed response with no content"
"""The message of the ``EMPTY_RESPONSE`` finish (the TypeScript harness's)."""

BlockKind = Literal[
    "text", "reasoning", "tool-call", "image", "server-tool-call", "server-tool-result"
]
"""The kinds of item a writer turns into blocks (the block tags); an image and
the server tool blocks are opened whole with ``open_whole``, the others with
``open``."""

TEXT: Final = "text"
"""A text item (``TextBlock.TAG``)."""
REASONING: Final = "reasoning"
"""A reasoning item (``ReasoningBlock.TAG``)."""
TOOL_CALL: Final = "tool-call"
"""A tool-call item (``ToolCallBlock.TAG``)."""
IMAGE: Final = "image"
"""An image item (``ImageBlock.TAG``), whole when opened."""
SERVER_TOOL_CALL: Final = "server-tool-call"
"""A tool the provider ran (``ServerToolCallBlock.TAG``), whole when opened."""
SERVER_TOOL_RESULT: Final = "server-tool-result"
"""Its result (``ServerToolResultBlock.TAG``), whole when opened."""

WholeBlock = ImageBlock | ServerToolCallBlock | ServerToolResultBlock
"""A block ``BlockWriter.open_whole`` takes: one with no deltas."""

_WHOLE_KINDS: Final[dict[type, BlockKind]] = {
    ImageBlock: IMAGE,
    ServerToolCallBlock: SERVER_TOOL_CALL,
    ServerToolResultBlock: SERVER_TOOL_RESULT,
}

_WHOLE_KIND_SET: Final = frozenset(_WHOLE_KINDS.values())

_SUCCESS_KINDS: Final = frozenset({"stop", "tool-calls"})
# A finish reason that may become an error code as it is.
_REASON: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}")
_KINDS: Final[dict[str, BlockKind]] = {
    TEXT: TEXT,
    REASONING: REASONING,
    TOOL_CALL: TOOL_CALL,
}
"""Each kind's one string object: the hot path compares kinds by identity."""


def stopped_failure(
    reason: str, *, who: str = "model", code: str | None = None
) -> LlmFailure:
    """The failure of a finish reason of the provider's own that the protocol
    has no kind for (``content_filter``...): ``"<who> stopped: <reason>"``, the
    reason cut to 120 characters, coded ``code`` when the family maps the
    reason itself, else the reason upper-cased (``CONTENT_FILTER``), or
    ``UNKNOWN_FINISH_REASON`` when it is not a short identifier (letters,
    digits, ``_``, ``-``, ``.``; at most 64)."""
    if code is None:
        code = (
            reason.upper()
            if _REASON.fullmatch(reason)
            else ErrorCode.UNKNOWN_FINISH_REASON.value
        )
    return LlmFailure(message=f"{who} stopped: {reason[:120]}", code=code)


class Block:
    """One item of the answer, as a translator opened it (``BlockWriter.open``).

    A handle: the translator keeps it (keyed however its wire names items) and
    passes it back to ``append`` and ``end``. ``index`` is its protocol index once
    it was emitted (``-1`` before); ``replay`` is the translator's per-block replay
    entry (JSON values), read into the finish's ``ReplayEnvelope``.
    """

    __slots__ = (
        "announce",
        "buffer",
        "call_id",
        "citations",
        "ended",
        "index",
        "kind",
        "name",
        "replay",
        "shown_id",
        "shown_name",
        "started",
        "whole",
    )

    def __init__(
        self, kind: BlockKind, call_id: str, name: str, *, announce: bool = True
    ) -> None:
        self.kind: BlockKind = kind
        """``text``, ``reasoning``, ``tool-call``, or a whole block's tag."""
        # The text or arguments so far: a compact buffer, not one object per
        # fragment (a block may be a million fragments).
        self.buffer = TextBuffer()
        self.index = -1
        """The protocol index (``-1`` until the block is emitted)."""
        self.started = False
        """Whether its ``block-start`` went out."""
        self.ended = False
        """Whether the provider closed it (``BlockWriter.end``)."""
        self.call_id = call_id
        """A tool call's id."""
        self.name = name
        """A tool call's name (it may still grow until the block starts)."""
        self.replay: object = None
        """The translator's replay entry for this block (JSON values)."""
        self.announce = announce
        """Whether a tool call's ``block-start`` comes with a delta naming its id
        and name before any argument text."""
        self.whole: WholeBlock | None = None
        """A whole item's block (``BlockWriter.open_whole``)."""
        self.citations: list[Citation] | None = None
        """A text item's citations so far (``None`` while it has none)."""
        # The id and name a delta already carried: fixed from then on.
        self.shown_id = ""
        self.shown_name = ""

    def __repr__(self) -> str:
        return f"<Block {self.kind} index={self.index} ended={self.ended}>"


class BlockWriter:
    """Turns what a translator says into protocol chunks (see the module docstring).

    Chunks accumulate until ``take()``; a translator returns them from each
    ``feed``. After ``finish`` the writer is ``finished`` and takes nothing more.

    Args:
        provider: Display name, named in the messages of the errors it raises.
        empty_response_as_stop: Report a blockless successful finish as a plain
            ``stop`` instead of ``EMPTY_RESPONSE`` (rule 10).
    """

    __slots__ = (
        "_emitted",
        "_empty_as_stop",
        "_live",
        "_out",
        "_queue",
        "_tool_blocks",
        "_usage",
        "_usage_given",
        "finished",
        "provider",
    )

    def __init__(self, *, provider: str, empty_response_as_stop: bool = False) -> None:
        self.provider = provider
        """The display name the writer's messages name."""
        self._empty_as_stop = empty_response_as_stop
        self._out: list[StreamChunk] = []
        # Items not yet ended or not yet emitted, in opening order; the head is
        # the one that streams live (once started).
        self._queue: deque[Block] = deque()
        self._live: Block | None = None
        self._emitted: list[Block] = []
        self._tool_blocks = 0
        self._usage: TokenUsage | Callable[[], TokenUsage | None] | None = None
        self._usage_given = False
        self.finished = False
        """Whether the terminal ``Finish`` was written."""

    # -- items -------------------------------------------------------------------------

    def open(
        self,
        kind: BlockKind,
        *,
        call_id: str | None = None,
        name: str | None = None,
        text: str = "",
        announce: bool = True,
    ) -> Block:
        """A new item of ``kind`` after every item opened so far, holding ``text``
        already (its first delta carries it: a whole tool call is one delta).

        A tool call carries ``call_id`` and ``name`` on each of its deltas, once
        known (``set_call_id``, ``set_name`` and ``extend_name`` may still give
        them until a delta carried them). With ``announce`` its ``block-start``
        comes with a delta naming them even before any argument text; without,
        the first delta is its first argument text.
        """
        if self.finished:
            raise ValueError("the writer already finished")
        canonical = _KINDS.get(kind)
        if canonical is None:
            if kind in _WHOLE_KINDS.values():
                raise ValueError(f"a {kind} item opens with open_whole")
            raise ValueError(f"unknown block kind {kind!r}")
        block = Block(canonical, call_id or "", name or "", announce=announce)
        if text:
            block.buffer.append(text)
        self._enqueue(block)
        return block

    def open_whole(self, whole: WholeBlock) -> Block:
        """A whole block after every item opened so far: an image the model
        returned, a tool the provider ran itself or its result. Already ended,
        it takes no ``append``; its ``block-start`` and its ``block-end``
        carrying ``whole`` go out together, with no delta, once every item
        before it ended."""
        if self.finished:
            raise ValueError("the writer already finished")
        kind = _WHOLE_KINDS.get(type(whole))
        if kind is None:
            raise TypeError(
                "open_whole takes an ImageBlock, ServerToolCallBlock or "
                f"ServerToolResultBlock, got {whole!r}"
            )
        block = Block(kind, "", "")
        block.whole = whole
        block.ended = True
        self._enqueue(block)
        return block

    def reserve(self, kind: BlockKind) -> Block:
        """A whole item of ``kind`` (``server-tool-call``, ...) whose block is
        not known yet (a server tool call whose input still streams), in its
        place after every item opened so far; ``complete`` gives the block.
        Items after it wait for it, as they wait for a live item."""
        if self.finished:
            raise ValueError("the writer already finished")
        if kind not in _WHOLE_KIND_SET:
            raise ValueError(f"only a whole item is reserved, not {kind!r}")
        block = Block(kind, "", "")
        self._enqueue(block)
        return block

    def complete(self, block: Block, whole: WholeBlock) -> None:
        """Give a reserved item (``reserve``) its block, which ends it.

        Raises:
            ValueError: for an item that was not reserved, or already completed.
            TypeError: for a block whose tag is not the item's kind.
        """
        if block.kind not in _WHOLE_KIND_SET or block.ended:
            raise ValueError(f"{block!r} is not a reserved item waiting for its block")
        if _WHOLE_KINDS.get(type(whole)) != block.kind:
            raise TypeError(f"a {block.kind} item takes no {whole!r}")
        block.whole = whole
        self.end(block)

    def open_image(self, image: ImageBlock) -> Block:
        """An image the model returned: ``open_whole`` for an ``ImageBlock``."""
        if not isinstance(image, ImageBlock):
            raise TypeError(f"open_image takes an ImageBlock, got {image!r}")
        return self.open_whole(image)

    def cite(self, block: Block, citations: Sequence[Citation]) -> None:
        """Citations for text item ``block``, after the text appended so far.

        Streams at once as a ``text-delta`` with ``text=""`` when ``block`` is
        live; otherwise they are kept and the item's first delta carries them.
        Nothing happens for no citations.

        Raises:
            ValueError: for an item that is not text, or that already ended.
            TypeError: for an item of ``citations`` that is not a ``Citation``.
        """
        if block.kind is not TEXT:
            raise ValueError(f"only a text item takes citations, not {block!r}")
        if not citations:
            return
        given = tuple(citations)
        for citation in given:
            if not isinstance(citation, Citation):
                raise TypeError(f"cite takes Citation values, got {citation!r}")
        if block is not self._live and block.ended:
            raise ValueError(f"{block!r} already ended")
        if block.citations is None:
            block.citations = []
        block.citations.extend(given)
        if block is self._live:
            self._out.append(unchecked_text_delta(block.index, "", given))
        elif not block.started and self._queue and block is self._queue[0]:
            self._pump()

    def _enqueue(self, block: Block) -> None:
        self._queue.append(block)
        if len(self._queue) == 1:
            self._pump()

    def append(self, block: Block, piece: str) -> None:
        """Content for ``block``: text, reasoning, or raw JSON argument text.

        Streams at once when ``block`` is live (an empty piece too: a tool call's
        delta that only repeats its id and name); buffered otherwise.
        """
        if block is self._live:
            block.buffer.append(piece)
            kind = block.kind
            if kind is TEXT:
                self._out.append(unchecked_text_delta(block.index, piece))
            elif kind is TOOL_CALL:
                self._out.append(self._tool_delta(block, piece))
            else:
                self._out.append(unchecked_delta(ReasoningDelta, block.index, piece))
            return
        if block.ended:
            raise ValueError(f"{block!r} already ended")
        block.buffer.append(piece)
        if not block.started and self._queue and block is self._queue[0]:
            self._pump()

    def extend_name(self, block: Block, piece: str) -> None:
        """Append ``piece`` to a tool call's name (a name sent in pieces).

        Raises:
            LlmError: ``MALFORMED_RESPONSE`` once a delta carried the name.
        """
        if piece:
            self.set_name(block, block.name + piece)

    def set_name(self, block: Block, name: str) -> None:
        """Give a tool call its name (no-op when equal).

        Raises:
            LlmError: ``MALFORMED_RESPONSE`` when a delta already carried another
                name (a call keeps one name).
        """
        if block.name == name:
            return
        if block.shown_name:
            raise self.malformed("a tool name that changed after its call began")
        block.name = name

    def set_call_id(self, block: Block, call_id: str) -> None:
        """Give a tool call its id (no-op when equal): ``set_name``'s rule, for the
        id (``MALFORMED_RESPONSE`` once a delta carried another id)."""
        if block.call_id == call_id:
            return
        if block.shown_id:
            raise self.malformed("a tool call id that changed after its call began")
        block.call_id = call_id

    def end(self, block: Block) -> None:
        """The provider closed ``block``: it ends as soon as every block before it
        has (at once when it is live)."""
        if block.ended:
            return
        block.ended = True
        if self._queue and block is self._queue[0]:
            self._pump()

    def end_all(self) -> None:
        """The provider closed every item (its finish ends them all)."""
        for block in self._queue:
            block.ended = True
        self._pump()

    @property
    def open_blocks(self) -> bool:
        """Whether an item is still open (not ended by the provider)."""
        return any(not block.ended for block in self._queue)

    @property
    def emitted(self) -> Sequence[Block]:
        """The blocks emitted so far, by protocol index."""
        return self._emitted

    @property
    def tool_calls(self) -> int:
        """How many tool-call blocks were emitted."""
        return self._tool_blocks

    # -- usage -------------------------------------------------------------------------

    def report_usage(self, usage: TokenUsage | Callable[[], TokenUsage | None]) -> None:
        """The usage the server reported (the latest report wins). A callable is
        read only when the usage is needed (the finish, or before a failure), so a
        server that repeats running totals on every event costs nothing per event.
        """
        self._usage = usage

    @property
    def usage_so_far(self) -> TokenUsage | None:
        """The usage reported so far, ``None`` when none was."""
        usage = self._usage
        if usage is None or isinstance(usage, TokenUsage):
            return usage
        return usage()

    def before_failure(self) -> list[StreamChunk]:
        """What comes right before a raised failure: the chunks written before it
        (the failing event's own, up to where it failed), then the usage the
        server already reported (one ``usage`` chunk, once), so no billed token
        is lost (rule 7)."""
        out = self.take()
        if self.finished or self._usage_given:
            return out
        self._usage_given = True
        usage = self.usage_so_far
        if usage is not None:
            out.append(UsageChunk(usage=usage))
        return out

    # -- the end -----------------------------------------------------------------------

    def finish(
        self,
        reason: FinishReason,
        *,
        replay: Callable[[], ReplayEnvelope | None] | None = None,
        empty_as_stop: bool | None = None,
    ) -> None:
        """The provider finished with ``reason`` (its own mapped reason).

        Ends every block (an item the provider never closed is a cut answer
        unless ``reason`` is ``max-tokens``), then writes the ``usage`` and the
        ``finish``: a ``stop``/``tool-calls`` corrected by whether a tool-call
        block was emitted, a blockless ``stop`` as ``EMPTY_RESPONSE``. ``replay``
        gives the ``ReplayEnvelope`` of a successful finish (called only then).

        Args:
            empty_as_stop: Overrides the writer's ``empty_response_as_stop`` for
                this finish (``False``: the wire gave no finish reason at all, so a
                blockless answer is never a success).

        Raises:
            LlmError: ``STREAM_CLOSED`` for an item never closed;
                ``MALFORMED_RESPONSE`` for a tool call without a name.
        """
        if self.finished:
            raise ValueError("the writer already finished")
        if reason.is_failure:
            raise ValueError("a failure is raised, never written as a finish")
        if reason.kind != FinishReason.MAX_TOKENS.kind and self.open_blocks:
            raise self.stream_closed("stream ended with a content block never closed")
        self.end_all()
        kind = reason.kind
        if kind in _SUCCESS_KINDS:
            reason = FinishReason.TOOL_CALLS if self._tool_blocks else FinishReason.STOP
            allow_empty = (
                self._empty_as_stop if empty_as_stop is None else empty_as_stop
            )
            if not self._emitted and not allow_empty:
                reason = FinishReason.error(
                    LlmFailure(message=EMPTY_RESPONSE_MESSAGE, code=EMPTY_RESPONSE_CODE)
                )
        self._write_end(reason, replay)

    def finish_unsuccessfully(self, failure: LlmFailure) -> None:
        """The provider finished on its own terms, but not with an answer (a
        refusal, a content filter, an unknown reason): every block ends, then
        the ``usage`` and an ``error`` finish carrying ``failure``. A failure of
        the call itself (an error event, a cut stream) is raised instead."""
        if self.finished:
            raise ValueError("the writer already finished")
        self.end_all()
        self._write_end(FinishReason.error(failure), None)

    def _write_end(
        self, reason: FinishReason, replay: Callable[[], ReplayEnvelope | None] | None
    ) -> None:
        out = self._out
        out.append(UsageChunk(usage=self.usage_so_far or TokenUsage.unknown()))
        state = None if replay is None or reason.is_failure else replay()
        out.append(Finish(reason=reason, replay_state=state))
        self._usage_given = True
        self.finished = True

    # -- errors ------------------------------------------------------------------------

    def stream_closed(self, what: str) -> LlmError:
        """The ``STREAM_CLOSED`` error of a cut answer: ``"<provider> <what>"``."""
        return LlmError(f"{self.provider} {what}", ErrorCode.STREAM_CLOSED)

    def malformed(self, what: str) -> LlmError:
        """The ``MALFORMED_RESPONSE`` error of a payload of the wrong shape:
        ``"<provider> sent <what> in its stream"``."""
        return LlmError(
            f"{self.provider} sent {what} in its stream", ErrorCode.MALFORMED_RESPONSE
        )

    # -- output ------------------------------------------------------------------------

    def take(self) -> list[StreamChunk]:
        """The chunks written since the last ``take``, in protocol order."""
        out = self._out
        if not out:
            return []
        self._out = []
        return out

    # -- the queue ---------------------------------------------------------------------

    def _pump(self) -> None:
        """Emit what the head of the queue allows: start it once it may show, end
        it once the provider closed it, then move on to the next item."""
        queue = self._queue
        while queue:
            block = queue[0]
            if not block.started:
                if (
                    block.kind is TEXT
                    and not len(block.buffer)
                    and block.citations is None
                ):
                    if not block.ended:
                        self._live = None
                        return  # an empty text item may still get text
                    queue.popleft()
                    continue
                if block.whole is None and block.kind in _WHOLE_KIND_SET:
                    # A reserved item waits for its block (``complete``); one
                    # never completed is a cut answer (``finish``).
                    if not block.ended:
                        self._live = None
                        return
                    queue.popleft()
                    continue
                self._start(block)
            if not block.ended:
                self._live = block
                return
            self._live = None
            self._end(block)
            queue.popleft()
        self._live = None

    def _start(self, block: Block) -> None:
        block.index = len(self._emitted)
        block.started = True
        self._emitted.append(block)
        out = self._out
        index = block.index
        text = block.buffer.value()
        out.append(BlockStart(index=index, block_type=block.kind))
        if block.kind is TOOL_CALL:
            self._tool_blocks += 1
            if text or block.announce:
                out.append(self._tool_delta(block, text))
        elif block.citations is not None:
            out.append(unchecked_text_delta(index, text, tuple(block.citations)))
        elif text:
            out.append(
                unchecked_delta(
                    TextDelta if block.kind is TEXT else ReasoningDelta, index, text
                )
            )

    @staticmethod
    def _tool_delta(block: Block, piece: str) -> StreamChunk:
        # What a delta carried is fixed: a later id or name may not differ.
        block.shown_id = block.call_id
        block.shown_name = block.name
        return unchecked_tool_delta(block.index, block.call_id, block.name, piece)

    def _end(self, block: Block) -> None:
        text = block.buffer.value()
        block.buffer.clear()
        ended: ContentBlock
        if block.kind is TOOL_CALL:
            if not block.name:
                # A call that names no tool can neither run nor be sent back.
                raise self.malformed("a tool call without a name")
            if text == "":
                text = "{}"
                self._out.append(self._tool_delta(block, text))
            ended = ToolCallBlock(
                id=CallId(block.call_id), name=block.name, arguments=text
            )
        elif block.kind is TEXT:
            citations = block.citations
            ended = (
                TextBlock(text=text)
                if citations is None
                else TextBlock(text=text, citations=tuple(citations))
            )
        elif block.kind is REASONING:
            ended = ReasoningBlock(text=text)
        else:
            assert block.whole is not None  # a whole item holds its block
            ended = block.whole
        self._out.append(BlockEnd(index=block.index, block=ended))
