"""Messages and where they came from.

A ``Message`` is immutable and has a stable ``id`` (a uuid4 string minted when the
message is created and kept by every copy). The ``create_*`` constructors mint a
fresh id each call; ``attrs.evolve`` keeps it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any
from typing import ClassVar
from typing import Final

import attrs

from dsh_llm.protocol import checks as c
from dsh_llm.protocol.caching import CacheBreakpoint
from dsh_llm.protocol.chunks import ReplayEnvelope
from dsh_llm.protocol.citations import Citation
from dsh_llm.protocol.content import BLOCK_TYPES
from dsh_llm.protocol.content import CallId
from dsh_llm.protocol.content import ContentBlock
from dsh_llm.protocol.content import ImageBlock
from dsh_llm.protocol.content import ServerToolCallBlock
from dsh_llm.protocol.content import ServerToolResultBlock
from dsh_llm.protocol.content import TextBlock
from dsh_llm.protocol.content import ToolCallBlock
from dsh_llm.protocol.content import ToolResultBlock
from dsh_llm.protocol.content import citations_of
from dsh_llm.protocol.content import reasoning_of
from dsh_llm.protocol.content import text_of
from dsh_llm.protocol.content import tool_calls_of
from dsh_llm.protocol.display import blocks_markdown
from dsh_llm.protocol.display import clip
from dsh_llm.protocol.display import escaped
from dsh_llm.protocol.display import image_label
from dsh_llm.protocol.display import server_tool_label

__all__ = [
    "CONTEXT_SUMMARY_MAX_CHARS",
    "ContextSnapshotSection",
    "Message",
    "MessageSource",
    "ModelSource",
    "PluginSource",
    "ToolSource",
    "UserSource",
    "bound_context_summary",
    "create_assistant_message",
    "create_message",
    "create_tool_result_message",
    "create_user_message",
    "source_label",
]

ROLES: Final = ("system", "user", "assistant")
"""The conversation roles; tool results travel in user-role messages."""

CONTEXT_FORMS: Final = (
    "instructions",
    "catalog",
    "snapshot",
    "notice",
    "relay",
    "recall",
)
"""What kind of context a plugin-produced message holds (``PluginSource.form``)."""

CONTEXT_SUMMARY_MAX_CHARS: Final = 120
"""The longest ``notice`` summary; longer ones are cut by ``bound_context_summary``."""


def bound_context_summary(summary: str) -> str:
    """Cut ``summary`` to ``CONTEXT_SUMMARY_MAX_CHARS``: the first 119 characters
    and an ellipsis when it is longer, unchanged otherwise."""
    if len(summary) <= CONTEXT_SUMMARY_MAX_CHARS:
        return summary
    return summary[: CONTEXT_SUMMARY_MAX_CHARS - 1] + "…"


def _bounded_summary(value: Any) -> Any:
    return bound_context_summary(value) if isinstance(value, str) else value


class _Sourced:
    """Base of the message sources: ``kind`` reads the class's ``KIND``."""

    __slots__ = ()

    KIND: ClassVar[str]

    @property
    def kind(self) -> str:
        """The JSON tag, e.g. ``"user"`` or ``"model"`` (the class's ``KIND``)."""
        return self.KIND


@attrs.frozen(kw_only=True)
class UserSource(_Sourced):
    """The message came from the user."""

    KIND: ClassVar[str] = "user"


@attrs.frozen(kw_only=True)
class ContextSnapshotSection:
    """One named contribution to a ``snapshot``-form context message."""

    name: str = attrs.field(validator=c.non_empty_str)
    """The contributing subsystem."""
    text: str = attrs.field(validator=c.is_str)
    """Its text, exactly as assembled."""


@attrs.frozen(kw_only=True)
class PluginSource(_Sourced):
    """The message was produced by a plugin.

    ``form`` optionally says what kind of context it is; a ``snapshot`` needs
    ``sections`` and a ``notice`` needs a ``summary`` (cut to 120 characters).
    """

    KIND: ClassVar[str] = "plugin"

    plugin: str = attrs.field(validator=c.non_empty_str)
    """The producing plugin's name."""
    form: str | None = attrs.field(
        default=None, validator=c.optional(c.one_of(*CONTEXT_FORMS))
    )
    """One of ``CONTEXT_FORMS``, or ``None`` for undeclared context."""
    sections: tuple[ContextSnapshotSection, ...] | None = attrs.field(
        default=None,
        converter=c.to_optional_tuple,
        validator=c.optional(c.tuple_of(ContextSnapshotSection)),
    )
    """The sections of a ``snapshot``, in order."""
    summary: str | None = attrs.field(
        default=None,
        converter=_bounded_summary,
        validator=c.optional(c.is_str),
    )
    """The one-line account of a ``notice``."""

    def __attrs_post_init__(self) -> None:
        if (self.form == "snapshot") != (self.sections is not None):
            raise c.bad_value(
                self,
                "sections",
                "is required for form 'snapshot' and only allowed there",
            )
        if (self.form == "notice") != (self.summary is not None):
            raise c.bad_value(
                self, "summary", "is required for form 'notice' and only allowed there"
            )


@attrs.frozen(kw_only=True)
class ModelSource(_Sourced):
    """The message was produced by a model through a provider route."""

    KIND: ClassVar[str] = "model"

    provider: str = attrs.field(validator=c.non_empty_str)
    """The provider route that produced it."""
    model: str = attrs.field(validator=c.is_str)
    """The provider's model id."""
    replay_state: ReplayEnvelope | None = attrs.field(
        default=None, validator=c.optional(c.instance_of(ReplayEnvelope))
    )
    """Adapter-private replay state from the finish chunk, if any."""


@attrs.frozen(kw_only=True)
class ToolSource(_Sourced):
    """The message carries the result of tool call ``call_id``."""

    KIND: ClassVar[str] = "tool"

    call_id: CallId = attrs.field(validator=c.is_str)
    """The answered call's id."""


MessageSource = UserSource | PluginSource | ModelSource | ToolSource
"""Where a message came from."""

SOURCE_TYPES: Final[dict[str, type[MessageSource]]] = {
    cls.KIND: cls for cls in (UserSource, PluginSource, ModelSource, ToolSource)
}
"""The known source kinds and their classes."""

_BLOCKS = tuple(BLOCK_TYPES.values())
_SOURCES = tuple(SOURCE_TYPES.values())


def _new_id() -> str:
    return str(uuid.uuid4())


@attrs.frozen(kw_only=True)
class Message:
    """One immutable conversation message."""

    id: str = attrs.field(factory=_new_id, validator=c.non_empty_str)
    """Stable identity, kept by every copy (``attrs.evolve`` keeps it)."""
    role: str = attrs.field(validator=c.one_of(*ROLES))
    """``system``, ``user`` or ``assistant``."""
    content: tuple[ContentBlock, ...] = attrs.field(
        converter=c.to_tuple, validator=c.tuple_of(*_BLOCKS)
    )
    """The model-facing blocks, in order."""
    source: MessageSource = attrs.field(validator=c.instance_of(*_SOURCES))
    """Who produced the message."""
    cache: CacheBreakpoint | None = attrs.field(
        default=None, validator=c.optional(c.instance_of(CacheBreakpoint))
    )
    """A prompt-cache breakpoint: the request up to and including this message
    is a prefix the provider may cache (``dsh_llm.protocol.caching``); ``None``
    (the default, omitted from the JSON) sets none."""

    @property
    def text(self) -> str:
        """The text blocks joined without a separator (``""`` when none)."""
        return text_of(self.content)

    @property
    def reasoning(self) -> str:
        """The reasoning blocks joined without a separator (``""`` when none)."""
        return reasoning_of(self.content)

    @property
    def tool_calls(self) -> tuple[ToolCallBlock, ...]:
        """The tool-call blocks, in order."""
        return tool_calls_of(self.content)

    @property
    def citations(self) -> tuple[Citation, ...]:
        """The citations of the text blocks, in order."""
        return citations_of(self.content)

    def __repr__(self) -> str:
        """``Message(assistant, 'The answer…', tool_calls=[get_weather], from
        route/model)``: role, text, what else it holds, its source; no id."""
        parts = [self.role]
        if self.text:
            parts.append(clip(self.text))
        if self.reasoning:
            parts.append(f"reasoning={len(self.reasoning)} chars")
        if self.tool_calls:
            parts.append(f"tool_calls=[{', '.join(c.name for c in self.tool_calls)}]")
        for block in self.content:
            if isinstance(block, ToolResultBlock):
                error = " (error)" if block.is_error else ""
                result = clip(text_of(block.content))
                parts.append(f"result{error} for {block.tool_call_id}: {result}")
            elif isinstance(block, ImageBlock):
                parts.append(image_label(block))
            elif isinstance(block, ServerToolCallBlock | ServerToolResultBlock):
                parts.append(server_tool_label(block))
        if self.citations:
            parts.append(f"citations={len(self.citations)}")
        parts.append(f"from {source_label(self.source)}")
        if self.cache is not None:
            ttl = "" if self.cache.ttl is None else f" {self.cache.ttl}"
            parts.append(f"cache breakpoint{ttl}")
        return f"Message({', '.join(parts)})"

    def _repr_markdown_(self) -> str:
        """The message for a notebook: role, source, then its blocks."""
        head = f"**{self.role}** ({escaped(source_label(self.source))})"
        body = blocks_markdown(self.content)
        return f"{head}\n\n{body}" if body else head


def source_label(source: MessageSource) -> str:
    """``route/model``, ``user``, ``plugin <name>`` or ``tool <call id>``."""
    if isinstance(source, ModelSource):
        return f"{source.provider}/{source.model}" if source.model else source.provider
    if isinstance(source, PluginSource):
        return f"plugin {source.plugin}"
    if isinstance(source, ToolSource):
        return f"tool {source.call_id}"
    return source.kind


def create_message(
    role: str, content: Iterable[ContentBlock], source: MessageSource
) -> Message:
    """A new message with a fresh id."""
    return Message(role=role, content=tuple(content), source=source)


def _as_blocks(text_or_blocks: str | Iterable[ContentBlock]) -> tuple[Any, ...]:
    if isinstance(text_or_blocks, str):
        return (TextBlock(text=text_or_blocks),)
    return tuple(text_or_blocks)


def create_user_message(
    text_or_blocks: str | Iterable[ContentBlock],
    source: MessageSource | None = None,
) -> Message:
    """A new user message; a string becomes one ``TextBlock``.

    ``source`` defaults to ``UserSource()``.
    """
    return Message(
        role="user",
        content=_as_blocks(text_or_blocks),
        source=UserSource() if source is None else source,
    )


def create_assistant_message(
    text_or_blocks: str | Iterable[ContentBlock],
    *,
    provider: str,
    model: str,
    replay_state: ReplayEnvelope | None = None,
) -> Message:
    """A new assistant message produced by ``provider``/``model``."""
    return Message(
        role="assistant",
        content=_as_blocks(text_or_blocks),
        source=ModelSource(provider=provider, model=model, replay_state=replay_state),
    )


def create_tool_result_message(
    call_id: str,
    content: str | Iterable[ContentBlock],
    *,
    is_error: bool | None = None,
) -> Message:
    """A new user-role message carrying one ``ToolResultBlock`` for ``call_id``.

    A string ``content`` becomes one ``TextBlock``. The source is
    ``ToolSource(call_id)``.
    """
    block = ToolResultBlock(
        tool_call_id=CallId(call_id), content=_as_blocks(content), is_error=is_error
    )
    return Message(
        role="user", content=(block,), source=ToolSource(call_id=CallId(call_id))
    )
