"""Content blocks: the pieces a message and a stream are made of.

Every block is a frozen, slotted, keyword-only attrs value; sequences are tuples.
``TAG`` is the block's JSON ``type`` tag, identical to the TypeScript harness. The
vocabulary is open on the wire (a stream may announce a block type this library does
not know, and ``BlockStart.block_type`` carries it), but a *complete* block is always
one of the classes here.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable
from typing import Any, ClassVar, Final, NewType

import attrs

from dsh_llm.protocol import checks as c

__all__ = [
    "BLOCK_TYPES",
    "CallId",
    "ContentBlock",
    "ImageBlock",
    "ImageDimensions",
    "ImageRef",
    "ReasoningBlock",
    "TextBlock",
    "ToolCallBlock",
    "ToolResultBlock",
    "content_has_image",
    "reasoning_of",
    "text_of",
    "tool_calls_of",
]

CallId = NewType("CallId", str)
"""Correlates a model-issued tool call with its result. ``CallId("call-123")``."""

IMAGE_MEDIA_TYPES: Final = ("image/png", "image/jpeg", "image/webp", "image/gif")
"""The raster formats an ``ImageRef`` may name."""

_ATTACHMENT_ID = re.compile(r"sha256:[0-9a-f]{64}")


class Tagged:
    """Base of the values whose JSON object carries a ``type`` tag (blocks and
    chunks): ``type`` reads the class's ``TAG``."""

    __slots__ = ()

    TAG: ClassVar[str]

    @property
    def type(self) -> str:
        """The JSON tag, e.g. ``"text"`` or ``"block-start"`` (the class's ``TAG``)."""
        return self.TAG


@attrs.frozen(kw_only=True)
class TextBlock(Tagged):
    """Plain text visible to the end user."""

    TAG: ClassVar[str] = "text"

    text: str = attrs.field(validator=c.is_str)
    """The text, exactly as produced."""


@attrs.frozen(kw_only=True)
class ReasoningBlock(Tagged):
    """Reasoning (thinking) text, kept apart from the visible text."""

    TAG: ClassVar[str] = "reasoning"

    text: str = attrs.field(validator=c.is_str)
    """The reasoning text, exactly as produced."""


@attrs.frozen(kw_only=True)
class ToolCallBlock(Tagged):
    """A tool invocation requested by the model."""

    TAG: ClassVar[str] = "tool-call"

    id: CallId = attrs.field(validator=c.is_str)
    """Provider-issued call id; the matching ``ToolResultBlock`` carries it back."""
    name: str = attrs.field(validator=c.is_str)
    """The tool's name."""
    arguments: str = attrs.field(validator=c.is_str)
    """The arguments as the raw JSON text the model produced; never parsed here."""


@attrs.frozen(kw_only=True)
class ImageDimensions:
    """Width and height in pixels."""

    width: int = attrs.field(validator=c.positive_int)
    """Width in pixels."""
    height: int = attrs.field(validator=c.positive_int)
    """Height in pixels."""


@attrs.frozen(kw_only=True)
class ImageRef:
    """A durable reference to one stored image; the bytes live elsewhere."""

    attachment_id: str = attrs.field(validator=c.is_str)
    """``sha256:`` followed by 64 lowercase hex digits."""
    media_type: str = attrs.field(validator=c.one_of(*IMAGE_MEDIA_TYPES))
    """One of ``IMAGE_MEDIA_TYPES``."""
    bytes: int = attrs.field(validator=c.positive_int)
    """Exact encoded byte length."""
    width: int = attrs.field(validator=c.positive_int)
    """Intrinsic width in pixels."""
    height: int = attrs.field(validator=c.positive_int)
    """Intrinsic height in pixels."""
    name: str | None = attrs.field(default=None, validator=c.optional(c.is_str))
    """Display name without any path, when known."""
    original_dimensions: ImageDimensions | None = attrs.field(
        default=None, validator=c.optional(c.instance_of(ImageDimensions))
    )
    """Dimensions before normalisation scaled the image down, when it did."""

    @attachment_id.validator
    def _check_attachment_id(self, _: attrs.Attribute[str], value: str) -> None:
        if not _ATTACHMENT_ID.fullmatch(value):
            raise c.bad_value(
                self, "attachment_id", "must be 'sha256:' and 64 lowercase hex digits"
            )


@attrs.frozen(kw_only=True)
class ImageBlock(Tagged):
    """An image given to the model, by reference only."""

    TAG: ClassVar[str] = "image"

    attachment: ImageRef = attrs.field(validator=c.instance_of(ImageRef))
    """The stored image this block points at."""


def _content_items(inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    c.tuple_of(*_BLOCK_CLASSES)(inst, attribute, value)


@attrs.frozen(kw_only=True)
class ToolResultBlock(Tagged):
    """The result of a tool call, sent back to the model (in a user-role message)."""

    TAG: ClassVar[str] = "tool-result"

    tool_call_id: CallId = attrs.field(validator=c.is_str)
    """The ``ToolCallBlock.id`` this result answers."""
    content: tuple[ContentBlock, ...] = attrs.field(
        converter=c.to_tuple, validator=_content_items
    )
    """What the tool returned; may nest blocks (text, images, further results)."""
    is_error: bool | None = attrs.field(default=None, validator=c.optional(c.is_bool))
    """``True`` when the tool failed; ``None`` when the producer did not say."""


ContentBlock = TextBlock | ReasoningBlock | ToolCallBlock | ToolResultBlock | ImageBlock
"""Any complete content block."""

_BLOCK_CLASSES: Final = (
    TextBlock,
    ReasoningBlock,
    ToolCallBlock,
    ToolResultBlock,
    ImageBlock,
)

BLOCK_TYPES: Final[dict[str, type[ContentBlock]]] = {
    cls.TAG: cls for cls in _BLOCK_CLASSES
}
"""The known block tags and their classes, in declaration order."""


def content_has_image(blocks: tuple[ContentBlock, ...]) -> bool:
    """Whether any block, including blocks nested in tool results, is an image."""
    for block in blocks:
        if isinstance(block, ImageBlock):
            return True
        if isinstance(block, ToolResultBlock) and content_has_image(block.content):
            return True
    return False


def text_of(blocks: Iterable[ContentBlock]) -> str:
    """The text blocks of ``blocks`` (top level only) joined without a separator."""
    return "".join(block.text for block in blocks if isinstance(block, TextBlock))


def reasoning_of(blocks: Iterable[ContentBlock]) -> str:
    """The reasoning blocks of ``blocks`` joined without a separator."""
    return "".join(block.text for block in blocks if isinstance(block, ReasoningBlock))


def tool_calls_of(blocks: Iterable[ContentBlock]) -> tuple[ToolCallBlock, ...]:
    """The tool-call blocks of ``blocks``, in order."""
    return tuple(block for block in blocks if isinstance(block, ToolCallBlock))


def detached_json(value: Any) -> Any:
    """A deep copy of a JSON-like value, so later caller changes cannot leak in."""
    return copy.deepcopy(value)
