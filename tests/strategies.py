"""Hypothesis strategies for every protocol value.

Indexes come from a small pool (0-4) so that collisions happen often. Text is any
Unicode hypothesis draws (non-ASCII, emoji and control characters included, no
lone surrogates, which JSON cannot carry). Every strategy yields valid values:
the properties built on them check round trips and invariants, not validation.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from dsh_llm.protocol import CITATION_KINDS
from dsh_llm.protocol import CONTEXT_FORMS
from dsh_llm.protocol import IMAGE_MEDIA_TYPES
from dsh_llm.protocol import PURPOSES
from dsh_llm.protocol import ROLES
from dsh_llm.protocol import BlockEnd
from dsh_llm.protocol import BlockStart
from dsh_llm.protocol import CacheBreakpoint
from dsh_llm.protocol import CallId
from dsh_llm.protocol import Citation
from dsh_llm.protocol import ContentBlock
from dsh_llm.protocol import ContextSnapshotSection
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import ImageBlock
from dsh_llm.protocol import ImageDimensions
from dsh_llm.protocol import ImageRef
from dsh_llm.protocol import LlmFailure
from dsh_llm.protocol import Message
from dsh_llm.protocol import MessageSource
from dsh_llm.protocol import ModelSource
from dsh_llm.protocol import PluginSource
from dsh_llm.protocol import RateLimit
from dsh_llm.protocol import RateLimits
from dsh_llm.protocol import ReasoningBlock
from dsh_llm.protocol import ReasoningDelta
from dsh_llm.protocol import ReplayEnvelope
from dsh_llm.protocol import ServerToolCallBlock
from dsh_llm.protocol import ServerToolResultBlock
from dsh_llm.protocol import Source
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import TextDelta
from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.protocol import ToolCallDelta
from dsh_llm.protocol import ToolResultBlock
from dsh_llm.protocol import ToolSchema
from dsh_llm.protocol import ToolSource
from dsh_llm.protocol import UsageChunk
from dsh_llm.protocol import UserSource

__all__ = [
    "call_ids",
    "chunk_lists",
    "chunks",
    "content_blocks",
    "failure_finish_reasons",
    "finish_reasons",
    "finishes",
    "generate_options",
    "image_refs",
    "indexes",
    "json_values",
    "llm_failures",
    "message_sources",
    "messages",
    "replay_envelopes",
    "texts",
    "token_usages",
]

KNOWN_KINDS = ("stop", "tool-calls", "max-tokens")
"""Finish kinds that carry no failure."""

indexes = st.integers(min_value=0, max_value=4)
"""Block indexes from a small pool, so collisions happen often."""

texts = st.text(max_size=20)
"""Any text, empty included."""

non_empty_texts = st.text(min_size=1, max_size=20)
"""Any non-empty text."""

call_ids = st.text(max_size=12).map(CallId)
"""Call ids; translators may emit ``""`` when the provider sent none."""

counts = st.none() | st.integers(min_value=0, max_value=10**12)
"""Token counts: ``None`` means "not reported"."""

# JSON numbers: ints of any size and finite floats (JSON has no NaN/Infinity).
_json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts
)

json_values: st.SearchStrategy[Any] = st.recursive(
    _json_scalars,
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=8,
)
"""Any JSON value, as ``json.loads`` would return it (lists, never tuples)."""

image_dimensions = st.builds(
    ImageDimensions,
    width=st.integers(min_value=1, max_value=10_000),
    height=st.integers(min_value=1, max_value=10_000),
)

image_refs = st.builds(
    ImageRef,
    attachment_id=st.text(alphabet="0123456789abcdef", min_size=64, max_size=64).map(
        lambda digits: f"sha256:{digits}"
    ),
    media_type=st.sampled_from(IMAGE_MEDIA_TYPES),
    bytes=st.integers(min_value=1, max_value=2**40),
    width=st.integers(min_value=1, max_value=10_000),
    height=st.integers(min_value=1, max_value=10_000),
    name=st.none() | texts,
    original_dimensions=st.none() | image_dimensions,
)
"""Image references, with and without the optional fields."""

_counts = st.none() | st.integers(min_value=0, max_value=2**31)
_optional_texts = st.none() | texts

citations = st.builds(
    Citation,
    kind=st.sampled_from(CITATION_KINDS),
    cited_text=_optional_texts,
    url=_optional_texts,
    title=_optional_texts,
    source_index=_counts,
    file_id=_optional_texts,
    filename=_optional_texts,
    start=_counts,
    end=_counts,
    text_start=_counts,
    text_end=_counts,
    encrypted_index=_optional_texts,
)
"""Citations of every kind, with and without each optional field."""

_citation_lists = st.lists(citations, max_size=2).map(tuple)

sources = st.builds(
    Source,
    url=_optional_texts,
    title=_optional_texts,
    file_id=_optional_texts,
    filename=_optional_texts,
    snippet=_optional_texts,
    page_age=_optional_texts,
    score=st.none()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.integers(min_value=-100, max_value=100),
)
"""Search results, with and without each optional field."""

_leaf_blocks: st.SearchStrategy[ContentBlock] = st.one_of(
    st.builds(TextBlock, text=texts, citations=_citation_lists),
    st.builds(
        ServerToolCallBlock,
        id=call_ids,
        name=texts,
        input=texts,
        data=st.none() | json_values,
    ),
    st.builds(
        ServerToolResultBlock,
        tool_call_id=call_ids,
        name=texts,
        output=_optional_texts,
        sources=st.lists(sources, max_size=2).map(tuple),
        is_error=st.none() | st.booleans(),
        data=st.none() | json_values,
    ),
    st.builds(ReasoningBlock, text=texts),
    st.builds(ToolCallBlock, id=call_ids, name=texts, arguments=texts),
    st.builds(ImageBlock, attachment=image_refs),
)

content_blocks: st.SearchStrategy[ContentBlock] = st.recursive(
    _leaf_blocks,
    lambda children: st.builds(
        ToolResultBlock,
        tool_call_id=call_ids,
        content=st.lists(children, max_size=3).map(tuple),
        is_error=st.none() | st.booleans(),
    ),
    max_leaves=6,
)
"""Every block type, including tool results nesting further blocks and images."""

replay_envelopes = st.builds(
    ReplayEnvelope,
    response=json_values,
    blocks=st.none() | st.lists(json_values, max_size=4).map(tuple),
)
"""Replay envelopes with and without per-block entries."""

_plugin_sources = st.one_of(
    st.builds(PluginSource, plugin=non_empty_texts),
    st.builds(
        PluginSource,
        plugin=non_empty_texts,
        form=st.sampled_from(
            [f for f in CONTEXT_FORMS if f not in ("snapshot", "notice")]
        ),
    ),
    st.builds(
        PluginSource,
        plugin=non_empty_texts,
        form=st.just("snapshot"),
        sections=st.lists(
            st.builds(ContextSnapshotSection, name=non_empty_texts, text=texts),
            max_size=3,
        ).map(tuple),
    ),
    st.builds(
        PluginSource,
        plugin=non_empty_texts,
        form=st.just("notice"),
        summary=st.text(max_size=200),
    ),
)

message_sources: st.SearchStrategy[MessageSource] = st.one_of(
    st.builds(UserSource),
    _plugin_sources,
    st.builds(
        ModelSource,
        provider=non_empty_texts,
        model=texts,
        replay_state=st.none() | replay_envelopes,
    ),
    st.builds(ToolSource, call_id=call_ids),
)
"""Every source kind, every plugin form."""

cache_breakpoints = st.builds(CacheBreakpoint, ttl=st.none() | non_empty_texts)
"""Cache breakpoints with and without a lifetime."""

messages = st.builds(
    Message,
    id=non_empty_texts,
    role=st.sampled_from(ROLES),
    content=st.lists(content_blocks, max_size=4).map(tuple),
    source=message_sources,
    cache=st.none() | cache_breakpoints,
)
"""Messages with any role, blocks and source, with or without a cache
breakpoint."""

_status = st.none() | st.integers(min_value=100, max_value=599)
_retry_after = (
    st.none()
    | st.integers(min_value=1, max_value=10**9)
    | st.floats(min_value=0, exclude_min=True, allow_infinity=False, allow_nan=False)
)

_reset_ms = (
    st.none()
    | st.integers(min_value=0, max_value=10**9)
    | st.floats(min_value=0, allow_infinity=False, allow_nan=False)
)
_rate_limit = st.builds(RateLimit, limit=counts, remaining=counts, reset_ms=_reset_ms)
rate_limits = st.builds(
    RateLimits, requests=st.none() | _rate_limit, tokens=st.none() | _rate_limit
)
"""Rate limits with any mix of reported dimensions and values."""

llm_failures = st.builds(
    LlmFailure,
    message=non_empty_texts,
    code=non_empty_texts,
    status=_status,
    provider_retry_after_ms=_retry_after,
    request_id=st.none() | non_empty_texts,
    rate_limits=st.none() | rate_limits,
)
"""Failures with every combination of optional facts."""

failure_finish_reasons = st.builds(
    FinishReason, kind=st.sampled_from(["error", "aborted"]), failure=llm_failures
)
"""``error`` and ``aborted`` reasons, each with its failure."""

finish_reasons = st.one_of(
    st.sampled_from(KNOWN_KINDS).map(lambda kind: FinishReason(kind=kind)),
    # The set is open: providers may report kinds this library does not know.
    non_empty_texts.filter(lambda kind: kind not in ("error", "aborted")).map(
        lambda kind: FinishReason(kind=kind)
    ),
    failure_finish_reasons,
)
"""Known kinds, open kinds and failure kinds."""

token_usages = st.builds(
    TokenUsage,
    input_tokens=counts,
    output_tokens=counts,
    cache_read_tokens=counts,
    cache_write_tokens=counts,
    reasoning_tokens=counts,
)
"""Usage with any mix of reported and unreported (``None``) counts."""

finishes = st.builds(
    Finish, reason=finish_reasons, replay_state=st.none() | replay_envelopes
)
"""Finish chunks, with and without replay state."""

chunks: st.SearchStrategy[StreamChunk] = st.one_of(
    st.builds(
        BlockStart,
        index=indexes,
        block_type=st.sampled_from(
            ["text", "reasoning", "tool-call", "tool-result", "image"]
        )
        | non_empty_texts,
    ),
    st.builds(TextDelta, index=indexes, text=texts, citations=_citation_lists),
    st.builds(ReasoningDelta, index=indexes, text=texts),
    st.builds(
        ToolCallDelta,
        index=indexes,
        id=st.none() | call_ids,
        name=st.none() | texts,
        arguments_delta=texts,
    ),
    st.builds(BlockEnd, index=indexes, block=content_blocks),
    st.builds(UsageChunk, usage=token_usages),
    finishes,
)
"""All seven chunk types (not ordered into a valid stream)."""

chunk_lists = st.lists(chunks, max_size=8)
"""Chunk sequences for the JSON Lines helpers."""

_tool_schemas = st.builds(
    ToolSchema,
    name=non_empty_texts,
    description=texts,
    parameters=st.dictionaries(st.text(max_size=6), json_values, max_size=3),
)


@st.composite
def generate_options(draw: st.DrawFn) -> GenerateOptions:
    """Valid requests, ``tool_choice`` consistent with ``tools``."""
    tools = draw(st.none() | st.lists(_tool_schemas, max_size=3).map(tuple))
    names = [tool.name for tool in tools or ()]
    choices: list[str | None] = [None, "auto", "none"]
    if names:
        choices += ["required", *names]
    return GenerateOptions(
        provider=draw(non_empty_texts),
        model=draw(non_empty_texts),
        messages=draw(st.lists(messages, max_size=2).map(tuple)),
        system=draw(st.none() | texts),
        reasoning_effort=draw(st.none() | non_empty_texts),
        tools=tools,
        tool_choice=draw(st.sampled_from(choices)),
        temperature=draw(
            st.none()
            | st.floats(min_value=0, max_value=2, allow_nan=False)
            | st.integers(0, 2)
        ),
        max_tokens=draw(st.none() | st.integers(min_value=1, max_value=10**6)),
        stop=draw(st.none() | st.lists(non_empty_texts, max_size=3).map(tuple)),
        session_id=draw(st.none() | non_empty_texts),
        purpose=draw(st.none() | st.sampled_from(PURPOSES)),
        cache_key=draw(st.none() | non_empty_texts),
        cached_content=draw(st.none() | non_empty_texts),
    )
