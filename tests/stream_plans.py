"""Hypothesis strategies for block plans, the valid streams they produce, and
single mutations that break them.

A ``StreamPlan`` is what a model "meant to say": text, reasoning and tool-call
blocks, each with its content split into deltas (empty deltas included), a usage
whose counts may be ``None``, and a finish consistent with rule 8 (``tool-calls``
or ``max-tokens`` after a tool call; ``stop``, ``max-tokens`` or an open kind
otherwise), or a failure (``error``/``aborted``) that may leave the last block
open and may come without usage. ``plan.chunks()`` is the one stream that plan
produces under the protocol's strict rules (``docs/protocol.md``);
``plan.expected_blocks()`` is what
``BlockAssembler`` must give back.

``broken_streams()`` applies ONE mutation to a valid stream and returns it with a
description. Each mutation is chosen so that the result is invalid under every
reading of the rules, which is what lets the property "any single mutation fails
strict mode" be exact rather than probabilistic:

- drop a chunk: not a delta with an empty payload (the concatenation stays the
  same) nor a delta of a block left open (open content is never compared); not
  the ``block-start`` of an open block without deltas (the stream is then simply
  one block shorter); not the ``block-end`` right before a failure finish (the
  block is then legitimately left open); not the usage before a failure finish
  (failures may omit it); not the one delta carrying a call's ``"{}"`` (a call
  with no argument text may end ``"{}"``). Every other drop breaks rule 1, 2, 5
  or 7.
- duplicate a chunk, the copy going anywhere after the original: not a delta with
  an empty payload nor one of a block left open, for the reasons above. A copied
  ``block-start``/``block-end`` reuses an index, a copied delta of a closed block
  lands after its end or doubles its payload, a copied usage or finish repeats.
- swap two chunks: not two deltas of the same block (``"a"`` and ``""``, or equal
  deltas, swap without changing the concatenation). Any other swap of two
  different chunks moves a chunk out of the region of the stream where its block
  is open, or moves usage/finish out of their place.
- retarget an index: a ``block-start``, delta or ``block-end`` gets another index
  (0 to blocks + 1). Strict streams have at most one open block and indexes in
  opening order, so any other index is closed, never started, or out of order.
- change a delta's payload to a different string, in a block that is closed: the
  concatenation then differs from the ``block-end`` (same prefix and suffix, a
  different middle); never to ``""`` for the one delta carrying a call's ``"{}"``.
"""

from __future__ import annotations

import itertools
import json
import string
from typing import Any
from typing import cast

import attrs
from hypothesis import strategies as st

from dsh_llm.protocol import BlockEnd
from dsh_llm.protocol import BlockStart
from dsh_llm.protocol import CallId
from dsh_llm.protocol import ContentBlock
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import ReasoningBlock
from dsh_llm.protocol import ReasoningDelta
from dsh_llm.protocol import ReplayEnvelope
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import TextDelta
from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.protocol import ToolCallDelta
from dsh_llm.protocol import UsageChunk
from tests.strategies import llm_failures
from tests.strategies import token_usages

__all__ = [
    "BlockPlan",
    "Mutation",
    "PlannedChunk",
    "StreamPlan",
    "block_plans",
    "broken_streams",
    "stream_plans",
]

BLOCK_KINDS = ("text", "reasoning", "tool-call")
OPEN_KINDS = ("content-filter", "pause-turn")
"""Finish kinds outside the known set, which strict mode accepts without tool calls."""


@attrs.frozen(kw_only=True)
class BlockPlan:
    """One block: its kind and its content split into delta payloads."""

    kind: str
    pieces: tuple[str, ...]
    """Each delta's payload (text, or a slice of the tool call's arguments)."""
    call_id: str = ""
    name: str = ""
    known_from: int = 0
    """Deltas from this position on carry ``call_id`` and ``name``."""
    unknown_id: str | None = None
    """What earlier deltas carry as id: ``None`` or ``""`` (both mean unknown)."""

    @property
    def content(self) -> str:
        return "".join(self.pieces)

    def block(self) -> ContentBlock:
        """The complete block its ``block-end`` carries."""
        if self.kind == "text":
            return TextBlock(text=self.content)
        if self.kind == "reasoning":
            return ReasoningBlock(text=self.content)
        return ToolCallBlock(
            id=CallId(self.call_id), name=self.name, arguments=self.content
        )

    def delta(self, index: int, position: int, payload: str) -> StreamChunk:
        if self.kind == "text":
            return TextDelta(index=index, text=payload)
        if self.kind == "reasoning":
            return ReasoningDelta(index=index, text=payload)
        known = position >= self.known_from
        return ToolCallDelta(
            index=index,
            id=CallId(self.call_id) if known else _call_id(self.unknown_id),
            name=self.name if known else None,
            arguments_delta=payload,
        )

    def open_block(self, index: int) -> ContentBlock:
        """What the assembler gives for this block left open after all its deltas
        (as the TypeScript assembler does: the last delta's id, else
        ``call-<index>``; the last non-empty name, else ``""``)."""
        if self.kind != "tool-call":
            return self.block()
        deltas = [self.delta(index, p, x) for p, x in enumerate(self.pieces)]
        last_id = deltas[-1].id if deltas else None  # type: ignore[union-attr]
        names = [d.name for d in deltas if d.name]  # type: ignore[union-attr]
        return ToolCallBlock(
            id=CallId(f"call-{index}") if last_id is None else last_id,
            name=names[-1] if names else "",
            arguments=self.content,
        )


@attrs.frozen(kw_only=True)
class PlannedChunk:
    """One chunk of a planned stream, with what the mutations need to know."""

    chunk: StreamChunk
    role: str
    """``start``, ``delta``, ``end``, ``usage`` or ``finish``."""
    block: int | None = None
    """The block's index, for ``start``/``delta``/``end``."""
    closed: bool = True
    """Whether that block gets its ``block-end``."""
    payload: str | None = None
    """A delta's text or ``arguments_delta``."""


@attrs.frozen(kw_only=True)
class StreamPlan:
    """A whole response: blocks, usage and finish."""

    blocks: tuple[BlockPlan, ...]
    last_open: bool
    """The last block gets no ``block-end`` (failure finishes only)."""
    usage: TokenUsage | None
    finish: FinishReason
    replay_state: ReplayEnvelope | None = None

    def annotated(self) -> tuple[PlannedChunk, ...]:
        out: list[PlannedChunk] = []
        for index, block in enumerate(self.blocks):
            closed = not (self.last_open and index == len(self.blocks) - 1)
            out.append(
                PlannedChunk(
                    chunk=BlockStart(index=index, block_type=block.kind),
                    role="start",
                    block=index,
                    closed=closed,
                )
            )
            for position, payload in enumerate(block.pieces):
                out.append(
                    PlannedChunk(
                        chunk=block.delta(index, position, payload),
                        role="delta",
                        block=index,
                        closed=closed,
                        payload=payload,
                    )
                )
            if closed:
                out.append(
                    PlannedChunk(
                        chunk=BlockEnd(index=index, block=block.block()),
                        role="end",
                        block=index,
                    )
                )
        if self.usage is not None:
            out.append(PlannedChunk(chunk=UsageChunk(usage=self.usage), role="usage"))
        out.append(
            PlannedChunk(
                chunk=Finish(reason=self.finish, replay_state=self.replay_state),
                role="finish",
            )
        )
        return tuple(out)

    def chunks(self) -> tuple[StreamChunk, ...]:
        return tuple(item.chunk for item in self.annotated())

    def all_blocks(self) -> tuple[ContentBlock, ...]:
        """Every block as assembled, before any max-tokens drop."""
        last = len(self.blocks) - 1
        return tuple(
            block.open_block(index)
            if self.last_open and index == last
            else block.block()
            for index, block in enumerate(self.blocks)
        )

    def expected_blocks(self) -> tuple[ContentBlock, ...]:
        blocks = self.all_blocks()
        if self.finish.kind == "max-tokens":
            return tuple(b for b in blocks if not isinstance(b, ToolCallBlock))
        return blocks

    def expected_replay_state(self) -> ReplayEnvelope | None:
        envelope = self.replay_state
        if envelope is None or envelope.blocks is None:
            return envelope
        if self.finish.kind != "max-tokens":
            return envelope
        kept = tuple(
            entry
            for entry, block in zip(envelope.blocks, self.all_blocks(), strict=True)
            if not isinstance(block, ToolCallBlock)
        )
        return ReplayEnvelope(response=envelope.response, blocks=kept)


@st.composite
def _split(draw: st.DrawFn, content: str) -> tuple[str, ...]:
    """``content`` cut into delta payloads; cuts may repeat, giving empty deltas."""
    if content == "" and draw(st.booleans()):
        return ()
    cuts = sorted(draw(st.lists(st.integers(0, len(content)), max_size=4)))
    bounds = [0, *cuts, len(content)]
    return tuple(content[a:b] for a, b in itertools.pairwise(bounds))


_identifier = st.text(
    string.ascii_letters + string.digits + "_", min_size=1, max_size=8
)
_arguments = st.one_of(
    st.just("{}"),
    st.dictionaries(
        st.text(string.ascii_lowercase, min_size=1, max_size=5),
        st.integers() | st.text(max_size=6) | st.booleans(),
        min_size=1,
        max_size=3,
    ).map(lambda d: json.dumps(d, ensure_ascii=False)),
    # Raw text: the protocol never parses arguments.
    st.text(min_size=1, max_size=15),
)


@st.composite
def block_plans(draw: st.DrawFn, kind: str | None = None) -> BlockPlan:
    """One block of the given kind (any of the three when ``None``)."""
    kind = kind if kind is not None else draw(st.sampled_from(BLOCK_KINDS))
    if kind != "tool-call":
        pieces = draw(_split(draw(st.text(max_size=20))))
        if kind == "text" and not pieces:
            pieces = ("",)  # a text block has at least one delta (rule 1)
        return BlockPlan(kind=kind, pieces=pieces)
    pieces = draw(_split(draw(_arguments)))
    return BlockPlan(
        kind=kind,
        pieces=pieces,
        call_id="call_" + draw(_identifier),
        name=draw(_identifier),
        known_from=draw(st.integers(0, len(pieces))),
        unknown_id=draw(st.sampled_from([None, ""])),
    )


def _truncated(draw: st.DrawFn, block: BlockPlan) -> BlockPlan:
    """The block as far as a failed stream got: a prefix of its deltas."""
    keep = draw(st.integers(0, len(block.pieces)))
    return attrs.evolve(block, pieces=block.pieces[:keep])


@st.composite
def stream_plans(draw: st.DrawFn) -> StreamPlan:
    """Plans of valid streams: complete ones and failed ones."""
    blocks = tuple(draw(st.lists(block_plans(), max_size=5)))
    has_tool_call = any(b.kind == "tool-call" for b in blocks)
    if draw(st.booleans()):
        kinds = (
            ["tool-calls", "max-tokens"]
            if has_tool_call
            else [
                "stop",
                "max-tokens",
                *OPEN_KINDS,
            ]
        )
        finish = FinishReason(kind=draw(st.sampled_from(kinds)))
        replay_state = draw(
            st.none()
            | st.just(ReplayEnvelope(response={"id": "resp-1"}))
            | st.just(
                ReplayEnvelope(
                    response={"id": "resp-1"},
                    blocks=tuple(f"meta-{i}" for i in range(len(blocks))),
                )
            )
        )
        return StreamPlan(
            blocks=blocks,
            last_open=False,
            usage=draw(token_usages),
            finish=finish,
            replay_state=replay_state,
        )
    kind = draw(st.sampled_from(["error", "aborted"]))
    finish = FinishReason(kind=kind, failure=draw(llm_failures))
    last_open = bool(blocks) and draw(st.booleans())
    if last_open:
        blocks = (*blocks[:-1], _truncated(draw, blocks[-1]))
    usage = None if last_open else draw(st.none() | token_usages)
    return StreamPlan(blocks=blocks, last_open=last_open, usage=usage, finish=finish)


@attrs.frozen(kw_only=True)
class Mutation:
    """A valid plan, one mutation of its stream, and what was done."""

    plan: StreamPlan
    description: str
    chunks: tuple[StreamChunk, ...]


def _call_id(value: str | None) -> CallId | None:
    return None if value is None else CallId(value)


def _payload_matters(item: PlannedChunk) -> bool:
    """A delta whose removal or repetition changes a compared concatenation."""
    return item.closed and item.payload != ""


def _with_index(chunk: StreamChunk, index: int) -> StreamChunk:
    changed: StreamChunk = attrs.evolve(cast(Any, chunk), index=index)
    return changed


def _with_payload(chunk: StreamChunk, payload: str) -> StreamChunk:
    if isinstance(chunk, ToolCallDelta):
        return attrs.evolve(chunk, arguments_delta=payload)
    changed: StreamChunk = attrs.evolve(cast(Any, chunk), text=payload)
    return changed


@st.composite
def broken_streams(draw: st.DrawFn) -> Mutation:
    """A valid stream with exactly one mutation that makes it invalid."""
    plan = draw(stream_plans())
    items = plan.annotated()
    chunks = [item.chunk for item in items]
    last = len(items) - 1
    failed = plan.finish.is_failure
    # Deltas that alone carry a closed call's "{}": without their payload the
    # call ends "{}" after no argument text, which rule 6 allows.
    normalised = {
        p
        for p, item in enumerate(items)
        if item.role == "delta"
        and item.closed
        and item.payload == "{}"
        and item.block is not None
        and plan.blocks[item.block].kind == "tool-call"
        and plan.blocks[item.block].content == "{}"
    }

    def droppable(p: int) -> bool:
        if p in normalised:
            return False
        item = items[p]
        if item.role == "start":
            has_more = p < last and items[p + 1].block == item.block
            return item.closed or has_more
        if item.role == "delta":
            return _payload_matters(item)
        if item.role == "end":
            # A failure's finish may follow an open block, also after the usage
            # reported before the failure (rule 7).
            after = items[p + 1].role
            if after == "usage":
                after = items[p + 2].role
            return not (after == "finish" and failed)
        if item.role == "usage":
            return not failed
        return True

    options: dict[str, list[Any]] = {
        "drop": [p for p in range(len(items)) if droppable(p)],
        "duplicate": [
            p
            for p, item in enumerate(items)
            if item.role != "delta" or _payload_matters(item)
        ],
        "swap": [
            (p, q)
            for p in range(len(items))
            for q in range(p + 1, len(items))
            if not (
                items[p].role == "delta"
                and items[q].role == "delta"
                and items[p].block == items[q].block
            )
        ],
        "retarget": [p for p, item in enumerate(items) if item.block is not None],
        "change": [
            p for p, item in enumerate(items) if item.role == "delta" and item.closed
        ],
    }
    kind = draw(st.sampled_from(sorted(k for k, v in options.items() if v)))
    if kind == "drop":
        p = draw(st.sampled_from(options["drop"]))
        del chunks[p]
        return Mutation(plan=plan, description=f"drop #{p + 1}", chunks=tuple(chunks))
    if kind == "duplicate":
        p = draw(st.sampled_from(options["duplicate"]))
        q = draw(st.integers(p + 1, len(chunks)))
        chunks.insert(q, chunks[p])
        return Mutation(
            plan=plan,
            description=f"copy #{p + 1} to #{q + 1}",
            chunks=tuple(chunks),
        )
    if kind == "swap":
        p, q = draw(st.sampled_from(options["swap"]))
        chunks[p], chunks[q] = chunks[q], chunks[p]
        return Mutation(
            plan=plan, description=f"swap #{p + 1} #{q + 1}", chunks=tuple(chunks)
        )
    if kind == "retarget":
        p = draw(st.sampled_from(options["retarget"]))
        old = items[p].block
        new = draw(st.integers(0, len(plan.blocks) + 1).filter(lambda i: i != old))
        chunks[p] = _with_index(chunks[p], new)
        return Mutation(
            plan=plan,
            description=f"retarget #{p + 1} from {old} to {new}",
            chunks=tuple(chunks),
        )
    p = draw(st.sampled_from(options["change"]))
    old_payload = items[p].payload
    new_payload = draw(
        st.text(max_size=6).filter(
            lambda t: t != old_payload and not (t == "" and p in normalised)
        )
    )
    chunks[p] = _with_payload(chunks[p], new_payload)
    return Mutation(
        plan=plan,
        description=f"change #{p + 1} from {old_payload!r} to {new_payload!r}",
        chunks=tuple(chunks),
    )
