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
from typing import Any
from typing import ClassVar
from typing import Final
from typing import NewType

import attrs

from dsh_llm.protocol import checks as c
from dsh_llm.protocol.citations import Citation
from dsh_llm.protocol.citations import Source

__all__ = [
    "BLOCK_TYPES",
    "CallId",
    "ContentBlock",
    "ImageBlock",
    "ImageDimensions",
    "ImageRef",
    "ReasoningBlock",
    "ServerToolCallBlock",
    "ServerToolResultBlock",
    "TextBlock",
    "ToolCallBlock",
    "ToolResultBlock",
    "citations_of",
    "content_has_image",
    "omit_empty",
    "reasoning_of",
    "text_of",
    "tool_calls_of",
]

CallId = NewType("CallId", str)
"""Correlates a model-issued tool call with its result. ``CallId("call-123")``."""

IMAGE_MEDIA_TYPES: Final = ("image/png", "image/jpeg", "image/webp", "image/gif")
"""The raster formats an ``ImageRef`` may name."""

_ATTACHMENT_ID = re.compile(r"sha256:[0-9a-f]{64}")

OMIT_EMPTY: Final = "dsh_llm.omit_empty"
"""attrs metadata key of a tuple field the JSON leaves out while it is empty."""


def omit_empty() -> dict[str, bool]:
    """The metadata of a tuple field left out of the JSON while empty
    (``dsh_llm.serde`` reads it): new optional lists keep older JSON identical."""
    return {OMIT_EMPTY: True}


def citations_field() -> Any:
    """The ``citations`` field of a text block or delta: a tuple of ``Citation``
    (a list is accepted), empty by default and omitted from the JSON while empty."""
    return attrs.field(
        default=(),
        converter=c.to_tuple,
        validator=c.tuple_of(Citation),
        metadata=omit_empty(),
    )


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
    citations: tuple[Citation, ...] = citations_field()
    """The locations supporting the text, in arrival order (omitted from the
    JSON when empty)."""


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


def _call_data(value: Any) -> Any:
    return c.json_copy(value, "ServerToolCallBlock", "data")


def _result_data(value: Any) -> Any:
    return c.json_copy(value, "ServerToolResultBlock", "data")


@attrs.frozen(kw_only=True)
class ServerToolCallBlock(Tagged):
    """A tool the provider ran itself (web search, code execution, an MCP
    server's tool): shown and replayed, never run by the caller.

    ``tool_calls_of``, ``run_tools`` and the ``tool-calls`` finish ignore it.
    """

    TAG: ClassVar[str] = "server-tool-call"

    id: CallId = attrs.field(validator=c.is_str)
    """The provider's id of the call; its ``ServerToolResultBlock`` names it."""
    name: str = attrs.field(validator=c.is_str)
    """The provider's tool name: ``web_search``, ``code_execution``,
    ``file_search``, ``google_search``, ``mcp:<server>/<tool>``..."""
    input: str = attrs.field(validator=c.is_str)
    """The input as raw JSON text (like ``ToolCallBlock.arguments``)."""
    data: Any = attrs.field(default=None, converter=_call_data, hash=False)
    """The provider's own item as received (a detached JSON value), what a
    replay to the same provider sends back; ``None`` (omitted) when none."""


@attrs.frozen(kw_only=True)
class ServerToolResultBlock(Tagged):
    """What a provider-run tool returned (``ServerToolCallBlock``)."""

    TAG: ClassVar[str] = "server-tool-result"

    tool_call_id: CallId = attrs.field(validator=c.is_str)
    """The ``ServerToolCallBlock.id`` this result answers."""
    name: str = attrs.field(validator=c.is_str)
    """The provider's tool name (as on the call)."""
    output: str | None = attrs.field(default=None, validator=c.optional(c.is_str))
    """Text output (code stdout, an MCP tool's output), when there is some."""
    sources: tuple[Source, ...] = attrs.field(
        default=(),
        converter=c.to_tuple,
        validator=c.tuple_of(Source),
        metadata=omit_empty(),
    )
    """The results found (web search, file search), in the provider's order."""
    is_error: bool | None = attrs.field(default=None, validator=c.optional(c.is_bool))
    """``True`` when the tool failed; ``None`` when the provider did not say."""
    data: Any = attrs.field(default=None, converter=_result_data, hash=False)
    """The provider's own result item (a detached JSON value, encrypted content
    included), what a replay sends back; ``None`` (omitted) when none."""


ContentBlock = (
    TextBlock
    | ReasoningBlock
    | ToolCallBlock
    | ToolResultBlock
    | ImageBlock
    | ServerToolCallBlock
    | ServerToolResultBlock
)
"""Any complete content block."""

_BLOCK_CLASSES: Final = (
    TextBlock,
    ReasoningBlock,
    ToolCallBlock,
    ToolResultBlock,
    ImageBlock,
    ServerToolCallBlock,
    ServerToolResultBlock,
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
    """The tool-call blocks of ``blocks``, in order (the caller's tools only:
    a ``ServerToolCallBlock`` is not one)."""
    return tuple(block for block in blocks if isinstance(block, ToolCallBlock))


def citations_of(blocks: Iterable[ContentBlock]) -> tuple[Citation, ...]:
    """The citations of the text blocks of ``blocks`` (top level), in order."""
    return tuple(
        citation
        for block in blocks
        if isinstance(block, TextBlock)
        for citation in block.citations
    )


def detached_json(value: Any) -> Any:
    """A deep copy of a JSON-like value, so later caller changes cannot leak in."""
    return copy.deepcopy(value)


def schema_field() -> Any:
    """A JSON Schema field: a ``dict``, stored as a private deep copy and left out
    of the hash (a dict is not hashable)."""
    return attrs.field(converter=detached_json, validator=c.schema_object, hash=False)
