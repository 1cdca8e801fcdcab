"""The stream validator: checks a chunk stream against the protocol as it passes.

``validate_stream(chunks)`` is a lazy pass-through generator; this module owns the
checks of rules 1 to 8 of ``docs/protocol.md`` (strict mode, the default) and of
the TypeScript ``invariant.ts`` rules (``strict=False``). Contracts callers may
rely on:

- Every chunk is yielded unchanged; the first chunk that breaks a rule raises
  ``LlmError`` with code ``INVARIANT`` before it is yielded, and nothing after
  it is read. One rule needs the next chunk: a usage while a block is open is
  allowed right before an ``error``/``aborted`` finish (billed usage reported
  before a failure, rule 7), so it is reported at the chunk after it.
  ``assert_chunk_sequence(chunks)`` runs the same checks over a whole sequence.
- A message names the 1-based position (as ``trace_stream`` numbers lines), the
  chunk's type, the block index and the broken rule in plain words;
  docs/protocol.md ("The validator's messages") lists every message.
- An exception raised by the source propagates unchanged, with no
  missing-finish violation added. Closing the generator early skips the
  end-of-stream check.
- The source is closed (when it has ``close()``) whenever the check stops
  before the source is exhausted: at a violation, when the consumer closes the
  generator, after an exception from the source. A validator closed before its
  first ``next()`` leaves the source alone.
- A ``chunks`` that is not iterable raises ``TypeError`` naming the argument.
- Memory is bounded by the open block's content (``TextBuffer``: the text plus
  a constant, however many deltas): chunks are never kept.
- Both modes reject an object that is not one of the seven chunk classes and an
  index that is not an int in 0..2**53-1.
"""

from __future__ import annotations

import abc
from collections.abc import Generator
from collections.abc import Iterable
from collections.abc import Iterator
from typing import Final
from typing import NoReturn

from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import FAILURE_KINDS
from dsh_llm.protocol import BlockEnd
from dsh_llm.protocol import BlockStart
from dsh_llm.protocol import Finish
from dsh_llm.protocol import ReasoningDelta
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TextDelta
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.protocol import ToolCallDelta
from dsh_llm.protocol import UsageChunk
from dsh_llm.protocol.checks import MAX_SAFE_INTEGER
from dsh_llm.protocol.citations import Citation
from dsh_llm.protocol.content import ImageBlock
from dsh_llm.protocol.content import ReasoningBlock
from dsh_llm.protocol.content import ServerToolCallBlock
from dsh_llm.protocol.content import ServerToolResultBlock
from dsh_llm.protocol.content import TextBlock
from dsh_llm.protocol.text_buffer import TextBuffer
from dsh_llm.sources import chunk_source
from dsh_llm.sources import close_source

__all__ = ["assert_chunk_sequence", "validate_stream"]

MAX_INDEX: Final = MAX_SAFE_INTEGER
"""The largest block index: JSON readers of other languages keep it exact."""

_TOOL_CALL_EXEMPT: Final = frozenset({"max-tokens", *FAILURE_KINDS})
"""Finish kinds rule 8 does not constrain."""

_DELTA_BLOCK_TYPE: Final[dict[type, str]] = {
    TextDelta: TextBlock.TAG,
    ReasoningDelta: ReasoningBlock.TAG,
    ToolCallDelta: ToolCallBlock.TAG,
}

_STREAMED_BLOCK_TYPES: Final = frozenset(
    {
        *_DELTA_BLOCK_TYPE.values(),
        ImageBlock.TAG,
        ServerToolCallBlock.TAG,
        ServerToolResultBlock.TAG,
    }
)
"""The block types an assistant's stream may carry (strict mode); an image
block and the server tool blocks have no deltas, their ``block-end`` carries
them whole."""

_SHOWN_CHARS: Final = 40


def validate_stream(
    chunks: Iterable[StreamChunk], *, strict: bool = True
) -> Generator[StreamChunk, None, None]:
    """Yield every chunk of ``chunks`` unchanged, checking the protocol's rules.

    Lazy: nothing is read until the first ``next()``, and a violation is raised
    before the offending chunk is yielded, with nothing read past it. When the
    check stops before the source is exhausted (a violation, ``close()``, an
    exception from the source), the source's ``close()`` is called, if it has one.

    Args:
        chunks: The stream to check (any iterable; consumed once).
        strict: ``True`` for rules 1 to 8 of ``docs/protocol.md``, ``False`` for the
            lenient TypeScript rules (see the module docstring).

    Yields:
        Each chunk, as it comes.

    Raises:
        LlmError: code ``INVARIANT`` at the first violation; the message names the
            chunk's 1-based position, its index and the rule.
        TypeError: at the call, when ``chunks`` is not iterable.
    """
    source = chunk_source(chunks, "validate_stream")
    rules: _Rules = _StrictRules() if strict else _LenientRules()
    return _checked(source, rules)


def _checked(
    source: Iterator[StreamChunk], rules: _Rules
) -> Generator[StreamChunk, None, None]:
    exhausted = False
    try:
        for chunk in source:
            rules.check(chunk)
            yield chunk
        exhausted = True
    finally:
        # A violation's traceback keeps this frame, hence the source, alive: close
        # the source now so an adapter's HTTP response does not stay open with it.
        if not exhausted:
            close_source(source)
    rules.end()


def assert_chunk_sequence(
    chunks: Iterable[StreamChunk], *, strict: bool = True
) -> None:
    """Check a whole chunk sequence (e.g. a list) against the protocol's rules.

    Args:
        chunks: The complete stream.
        strict: As for ``validate_stream``.

    Raises:
        LlmError: code ``INVARIANT`` at the first violation.
        TypeError: when ``chunks`` is not iterable.
    """
    source = chunk_source(chunks, "assert_chunk_sequence")
    rules: _Rules = _StrictRules() if strict else _LenientRules()
    for _ in _checked(source, rules):
        pass


def _show(text: str) -> str:
    """``text`` quoted for a message, cut to a readable length."""
    if len(text) <= _SHOWN_CHARS:
        return repr(text)
    return f"{text[:_SHOWN_CHARS]!r}... ({len(text)} chars)"


def _count(count: int, noun: str) -> str:
    """``1 chunk``, ``2 chunks``: a count with its noun in the right number."""
    return f"1 {noun}" if count == 1 else f"{count} {noun}s"


def _first_difference(a: str, b: str) -> int:
    for position, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return position
    return min(len(a), len(b))


class _Rules(abc.ABC):
    """Shared bookkeeping: the position counter and how violations are raised."""

    __slots__ = ("finish_position", "position")

    def __init__(self) -> None:
        self.position = 0
        self.finish_position = 0

    def check(self, chunk: object) -> None:
        """Check the next chunk; raise at a violation."""
        self.position += 1
        if not isinstance(chunk, StreamChunk):
            self.fail(
                f"chunk #{self.position}: not a stream chunk: "
                f"{type(chunk).__name__} {_show(repr(chunk))}"
            )
        if not isinstance(chunk, UsageChunk | Finish):
            self.check_index(chunk, chunk.index)
        self.check_chunk(chunk)

    def check_index(self, chunk: StreamChunk, index: object) -> None:
        if type(index) is not int or not 0 <= index <= MAX_INDEX:
            self.fail(
                f"{self.where(chunk)}: invalid index: a block index must be a "
                f"non-negative safe integer, got {index!r}"
            )

    @abc.abstractmethod
    def check_chunk(self, chunk: StreamChunk) -> None:
        """Check one chunk of a known type; raise at a violation."""

    @abc.abstractmethod
    def end(self) -> None:
        """Check the end of the stream; raise at a violation."""

    def where(self, chunk: StreamChunk) -> str:
        """``chunk #n (type, index i)``: where a violation happened."""
        index = getattr(chunk, "index", None)
        suffix = "" if index is None else f", index {index}"
        return f"chunk #{self.position} ({chunk.type}{suffix})"

    def fail(self, message: str) -> NoReturn:
        raise LlmError(message, ErrorCode.INVARIANT)


class _OpenBlock:
    """The one open block of a strict stream, with what its deltas added up to."""

    __slots__ = (
        "block_type",
        "call_id",
        "call_name",
        "citations",
        "content",
        "deltas",
        "index",
    )

    def __init__(self, index: int, block_type: str) -> None:
        self.index = index
        self.block_type = block_type
        self.content = TextBuffer()
        self.deltas = 0
        self.citations: list[Citation] | None = None
        """A text block's citations so far (``None`` while it has none)."""
        self.call_id: str | None = None
        self.call_name: str | None = None


class _StrictRules(_Rules):
    """Rules 1 to 8 of ``docs/protocol.md``."""

    __slots__ = (
        "empty_call",
        "next_index",
        "open",
        "tool_call_emitted",
        "usage_open",
        "usage_position",
    )

    def __init__(self) -> None:
        super().__init__()
        self.next_index = 0
        self.open: _OpenBlock | None = None
        self.usage_position = 0
        self.tool_call_emitted = False
        self.empty_call: tuple[int, int] | None = None
        """(index, position) of the first tool call that ended with ``""``."""
        self.usage_open: tuple[int, int] | None = None
        """(block index, position) of a usage that came while that block was
        open: only a failure finish may follow it."""

    def violation(self, chunk: StreamChunk, name: str, rule: str) -> NoReturn:
        self.fail(f"{self.where(chunk)}: {name}: {rule}")

    def check_chunk(self, chunk: StreamChunk) -> None:
        if self.finish_position:
            name = (
                "finish repeated"
                if isinstance(chunk, Finish)
                else (f"{chunk.type} after finish")
            )
            self.violation(
                chunk,
                name,
                f"finish is not last: the finish at chunk #{self.finish_position} "
                "must end the stream (rule 7)",
            )
        if self.usage_open is not None and not (
            isinstance(chunk, Finish) and chunk.reason.kind in FAILURE_KINDS
        ):
            self.usage_while_open(f", before {self.where(chunk)}")
        match chunk:
            case BlockStart():
                self.block_start(chunk)
            case TextDelta() | ReasoningDelta() | ToolCallDelta():
                block = self.block_for_delta(chunk)
                if isinstance(chunk, ToolCallDelta):
                    self.tool_call_delta(chunk, block)
                else:
                    block.content.append(chunk.text)
                    if isinstance(chunk, TextDelta) and chunk.citations:
                        if block.citations is None:
                            block.citations = []
                        block.citations.extend(chunk.citations)
                block.deltas += 1
            case BlockEnd():
                self.block_end(chunk)
            case UsageChunk():
                self.usage(chunk)
            case Finish():
                self.finish(chunk)

    def block_start(self, chunk: BlockStart) -> None:
        index = chunk.index
        if self.open is not None:
            if self.open.index == index:
                self.violation(
                    chunk,
                    "duplicate block-start",
                    f"block {index} is already open; a block is started once (rule 1)",
                )
            self.violation(
                chunk,
                "blocks interleaved",
                f"block {index} starts while block {self.open.index} is still open; "
                "a block ends before the next one starts (rule 3)",
            )
        if self.usage_position:
            self.violation(
                chunk,
                "block after usage",
                f"block {index} starts after the usage at chunk "
                f"#{self.usage_position}; usage comes after the last block (rule 7)",
            )
        if index < self.next_index:
            self.violation(
                chunk,
                "duplicate block-start",
                f"block {index} was already started and closed; a closed block is "
                "never reopened and an index is used once (rules 1 and 3)",
            )
        if index > self.next_index:
            self.violation(
                chunk,
                "index out of order",
                f"expected block index {self.next_index}, got {index}; indexes are "
                "0, 1, 2... in opening order (rule 2)",
            )
        if chunk.block_type not in _STREAMED_BLOCK_TYPES:
            self.violation(
                chunk,
                "unknown block type",
                f'block {index} has the type "{chunk.block_type}"; a stream carries '
                "text, reasoning, tool-call, image, server-tool-call and "
                "server-tool-result blocks only (rule 1)",
            )
        self.open = _OpenBlock(index, chunk.block_type)
        self.next_index += 1
        if chunk.block_type == ToolCallBlock.TAG:
            self.tool_call_emitted = True

    def block_for_delta(
        self, chunk: TextDelta | ReasoningDelta | ToolCallDelta
    ) -> _OpenBlock:
        index = chunk.index
        block = self.open
        if block is None or block.index != index:
            self.not_open(chunk)
        expected = _DELTA_BLOCK_TYPE[type(chunk)]
        if block.block_type != expected:
            self.violation(
                chunk,
                "delta type mismatch",
                f"a {chunk.type} cannot extend block {index}, which is a "
                f"{block.block_type} block; a delta matches its block's type (rule 4)",
            )
        return block

    def tool_call_delta(self, chunk: ToolCallDelta, block: _OpenBlock) -> None:
        if chunk.id:
            if block.call_id is not None and block.call_id != chunk.id:
                self.call_changed(chunk, "id", chunk.id, block.call_id)
            block.call_id = chunk.id
        if chunk.name:
            if block.call_name is not None and block.call_name != chunk.name:
                self.call_changed(chunk, "name", chunk.name, block.call_name)
            block.call_name = chunk.name
        block.content.append(chunk.arguments_delta)

    def not_open(
        self, chunk: TextDelta | ReasoningDelta | ToolCallDelta | BlockEnd
    ) -> NoReturn:
        """The violation of a delta or block-end whose block is not the open one:
        never started, or already closed."""
        started = chunk.index < self.next_index
        if isinstance(chunk, BlockEnd):
            name, rule = (
                ("duplicate block-end", "a block ends once (rule 1)")
                if started
                else (
                    "block-end without block-start",
                    "every block-end closes a started block (rule 1)",
                )
            )
        else:
            name, rule = (
                (
                    "delta after block-end",
                    "deltas come between a block's block-start and its block-end "
                    "(rule 1)",
                )
                if started
                else (
                    "delta without block-start",
                    "a delta needs its block's block-start first (rules 1 and 4)",
                )
            )
        state = "is already closed" if started else "was never started"
        self.violation(chunk, name, f"block {chunk.index} {state}; {rule}")

    def call_changed(
        self, chunk: ToolCallDelta, part: str, said: str, earlier: str
    ) -> NoReturn:
        """The violation of a tool-call delta whose ``part`` (``id`` or
        ``name``) differs from an earlier delta's."""
        self.violation(
            chunk,
            f"tool-call {part} changed",
            f"this delta says {part} {_show(said)} but an earlier delta of block "
            f"{chunk.index} said {_show(earlier)}; a call keeps one {part} (rule 5)",
        )

    def block_end(self, chunk: BlockEnd) -> None:
        index = chunk.index
        block = self.open
        if block is None or block.index != index:
            self.not_open(chunk)
        ended = chunk.block
        if ended.type != block.block_type:
            self.violation(
                chunk,
                "block-end type mismatch",
                f"block {index} is a {block.block_type} block but its block-end "
                f"carries a {ended.type} block (rules 4 and 5)",
            )
        if isinstance(ended, TextBlock) and not block.deltas:
            self.violation(
                chunk,
                "text block without a delta",
                f"text block {index} ends without a text-delta; a text block is "
                "block-start, at least one delta, block-end (rule 1)",
            )
        if isinstance(ended, TextBlock | ReasoningBlock):
            self.compare(chunk, "text", ended.text, block.content)
        if isinstance(ended, TextBlock):
            streamed = tuple(block.citations or ())
            if ended.citations != streamed:
                self.violation(
                    chunk,
                    "block-end differs from deltas",
                    f"its {_count(len(ended.citations), 'citation')} are not the "
                    f"{_count(len(streamed), 'citation')} its deltas carried, in "
                    "order; block-end carries exactly what the deltas added up to "
                    "(rule 5)",
                )
        elif isinstance(ended, ToolCallBlock):
            if not (len(block.content) == 0 and ended.arguments == "{}"):
                self.compare(chunk, "arguments", ended.arguments, block.content)
            self.compare_known(chunk, "id", ended.id, block.call_id)
            self.compare_known(chunk, "name", ended.name, block.call_name)
            if not ended.name:
                self.violation(
                    chunk,
                    "tool call without a name",
                    f"tool-call block {index} ends with an empty name; a tool call "
                    "names the tool it calls (rule 5)",
                )
            if ended.arguments == "" and self.empty_call is None:
                self.empty_call = (index, self.position)
        self.open = None

    def compare(
        self, chunk: BlockEnd, field: str, ended: str, content: TextBuffer
    ) -> None:
        if content.matches(ended):
            return
        streamed = content.value()
        at = _first_difference(ended, streamed)
        self.violation(
            chunk,
            "block-end differs from deltas",
            f"its {field} {_show(ended)} ({_count(len(ended), 'char')}) is not the "
            f"concatenated deltas {_show(streamed)} ({_count(len(streamed), 'char')}), "
            f"first difference at offset {at}; block-end carries exactly what the "
            "deltas added up to (rule 5)",
        )

    def compare_known(
        self, chunk: BlockEnd, field: str, ended: str, streamed: str | None
    ) -> None:
        if streamed is None or ended == streamed:
            return
        self.violation(
            chunk,
            "block-end differs from deltas",
            f"its {field} {_show(ended)} is not the {field} {_show(streamed)} its "
            f"deltas carried; a tool call's id and name agree (rule 5)",
        )

    def usage(self, chunk: UsageChunk) -> None:
        if self.usage_position:
            self.violation(
                chunk,
                "usage repeated",
                f"usage already came at chunk #{self.usage_position}; a stream has "
                "exactly one usage (rule 7)",
            )
        if self.open is not None:
            # Allowed right before an error or aborted finish only: decided at
            # the next chunk (or the end), which names this one.
            self.usage_open = (self.open.index, self.position)
        self.usage_position = self.position

    def usage_while_open(self, context: str) -> NoReturn:
        assert self.usage_open is not None
        index, position = self.usage_open
        self.fail(
            f"chunk #{position} (usage): usage while a block is open: block "
            f"{index} has no block-end yet{context}; usage comes after the last "
            "block ends, or right before an error or aborted finish (rules 1 and 7)"
        )

    def finish(self, chunk: Finish) -> None:
        kind = chunk.reason.kind
        failed = kind in FAILURE_KINDS
        if self.open is not None and not failed:
            self.violation(
                chunk,
                "block left open",
                f"a {kind} finish came while block {self.open.index} is open; every "
                "block-start has its block-end, and only an error or aborted finish "
                "may leave a block open (rules 1 and 7)",
            )
        if not self.usage_position and not failed:
            self.violation(
                chunk,
                "usage missing",
                f"a {kind} finish came without a usage chunk; exactly one usage "
                "precedes the finish, and only an error or aborted finish may omit "
                "it (rule 7)",
            )
        if kind == "tool-calls" and not self.tool_call_emitted:
            self.violation(
                chunk,
                "tool-calls finish without a tool-call block",
                "the finish kind is tool-calls only when a tool-call block was "
                "emitted (rule 8)",
            )
        if (
            self.tool_call_emitted
            and kind != "tool-calls"
            and (kind not in _TOOL_CALL_EXEMPT)
        ):
            self.violation(
                chunk,
                f"tool-call block with a {kind} finish",
                "a response that emitted a tool-call block finishes with tool-calls "
                "(or max-tokens, error, aborted) (rule 8)",
            )
        if self.empty_call is not None and kind not in _TOOL_CALL_EXEMPT:
            index, position = self.empty_call
            self.violation(
                chunk,
                "tool call without arguments",
                f"tool-call block {index} ended at chunk #{position} with empty "
                'arguments; a call with no arguments ends with arguments == "{}" '
                "(rule 6)",
            )
        self.finish_position = self.position

    def end(self) -> None:
        if self.finish_position:
            return
        if self.usage_open is not None:
            self.usage_while_open(", at the end of the stream")
        open_note = (
            "" if self.open is None else f" (block {self.open.index} is still open)"
        )
        count = _count(self.position, "chunk")
        self.fail(
            f"end of stream after {count}: finish missing: the stream ended without "
            f"a finish chunk{open_note}; every stream ends with exactly one finish "
            "(rule 7)"
        )


class _LenientRules(_Rules):
    """The TypeScript ``invariant.ts`` rules (``docs/protocol.md``, "Checking a
    stream")."""

    __slots__ = ("open", "usage_seen")

    def __init__(self) -> None:
        super().__init__()
        self.open: dict[int, str] = {}
        self.usage_seen = False

    def check_chunk(self, chunk: StreamChunk) -> None:
        where = self.where(chunk)
        if self.finish_position:
            self.fail(f"{where}: emitted {chunk.type} after terminal finish")
        match chunk:
            case BlockStart():
                if chunk.index in self.open:
                    self.fail(f"{where}: repeated block-start index {chunk.index}")
                self.open[chunk.index] = chunk.block_type
            case TextDelta() | ReasoningDelta() | ToolCallDelta():
                expected = _DELTA_BLOCK_TYPE[type(chunk)]
                actual = self.open.get(chunk.index)
                if actual != expected:
                    self.fail(
                        f"{where}: {expected} delta at index {chunk.index} requires "
                        f"an open {expected} block, got {actual}"
                    )
            case BlockEnd():
                block_type = self.open.get(chunk.index)
                if block_type is None:
                    self.fail(
                        f"{where}: block-end index {chunk.index} has no open block"
                    )
                if chunk.block.type != block_type:
                    self.fail(
                        f"{where}: block-end index {chunk.index} closes "
                        f"{chunk.block.type}, expected {block_type}"
                    )
                del self.open[chunk.index]
            case UsageChunk():
                if self.usage_seen:
                    self.fail(f"{where}: emitted usage more than once")
                self.usage_seen = True
            case Finish():
                if self.open and not chunk.reason.is_failure:
                    self.fail(f"{where}: finished with {len(self.open)} open block(s)")
                self.finish_position = self.position

    def end(self) -> None:
        if not self.finish_position:
            self.fail(
                f"end of stream after {_count(self.position, 'chunk')}: ended "
                "without a terminal finish chunk"
            )
