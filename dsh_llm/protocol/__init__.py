"""The protocol's values: content blocks, messages, requests and stream chunks.

Everything here is a frozen, slotted, keyword-only attrs value; sequences are
tuples. Attribute names are snake_case; ``dsh_llm.serde`` turns the values into
exactly the JSON the TypeScript harness writes (camelCase keys, ``type``/``kind``
tags).

The chunk grammar (explained with examples in ``docs/protocol.md``;
``dsh_llm.validator`` enforces rules 1 to 8)::

    stream  := block* usage finish            (a successful or ordinary end)
             | block* [open blocks] [usage] finish(error|aborted)
    block   := block-start(i, T) delta(i, T)* block-end(i, complete block)

1. Every ``block-start`` has its ``block-end``; a block is started once.
2. Indexes are 0, 1, 2... in opening order.
3. Blocks never interleave; text resuming after its block closed is a new block.
4. A delta carries its block's index and matches its block's type.
5. ``block-end`` carries the complete block, equal to its deltas (text or
   ``arguments``, a text block's ``citations`` in order; ``id`` and ``name``
   agree); an image and the server tool blocks come whole, without deltas.
6. ``arguments_delta`` is raw JSON text; a call without arguments ends with
   ``arguments == "{}"``.
7. After the last block: exactly one ``usage``, then exactly one ``finish``, last,
   also for an empty generation; unknown token counts are ``None``. Only an
   ``error``/``aborted`` finish may come without usage, with blocks open; usage
   billed before it comes right before it, even with a block open.
8. ``finish.reason.kind`` is ``tool-calls`` iff a tool-call block was emitted
   (``max-tokens``, ``error`` and ``aborted`` excepted).
"""

from __future__ import annotations

from dsh_llm.protocol.caching import CacheBreakpoint
from dsh_llm.protocol.chunks import CHUNK_TYPES
from dsh_llm.protocol.chunks import FAILURE_KINDS
from dsh_llm.protocol.chunks import BlockEnd
from dsh_llm.protocol.chunks import BlockStart
from dsh_llm.protocol.chunks import Finish
from dsh_llm.protocol.chunks import FinishReason
from dsh_llm.protocol.chunks import LlmFailure
from dsh_llm.protocol.chunks import ReasoningDelta
from dsh_llm.protocol.chunks import ReplayEnvelope
from dsh_llm.protocol.chunks import StreamChunk
from dsh_llm.protocol.chunks import TextDelta
from dsh_llm.protocol.chunks import TokenUsage
from dsh_llm.protocol.chunks import ToolCallDelta
from dsh_llm.protocol.chunks import UsageChunk
from dsh_llm.protocol.chunks import is_token_delta
from dsh_llm.protocol.citations import CITATION_KINDS
from dsh_llm.protocol.citations import Citation
from dsh_llm.protocol.citations import Source
from dsh_llm.protocol.content import BLOCK_TYPES
from dsh_llm.protocol.content import IMAGE_MEDIA_TYPES
from dsh_llm.protocol.content import CallId
from dsh_llm.protocol.content import ContentBlock
from dsh_llm.protocol.content import ImageBlock
from dsh_llm.protocol.content import ImageDimensions
from dsh_llm.protocol.content import ImageRef
from dsh_llm.protocol.content import ReasoningBlock
from dsh_llm.protocol.content import ServerToolCallBlock
from dsh_llm.protocol.content import ServerToolResultBlock
from dsh_llm.protocol.content import TextBlock
from dsh_llm.protocol.content import ToolCallBlock
from dsh_llm.protocol.content import ToolResultBlock
from dsh_llm.protocol.content import citations_of
from dsh_llm.protocol.content import content_has_image
from dsh_llm.protocol.content import reasoning_of
from dsh_llm.protocol.content import text_of
from dsh_llm.protocol.content import tool_calls_of
from dsh_llm.protocol.extras import ResponseFormat
from dsh_llm.protocol.message import CONTEXT_FORMS
from dsh_llm.protocol.message import CONTEXT_SUMMARY_MAX_CHARS
from dsh_llm.protocol.message import ROLES
from dsh_llm.protocol.message import SOURCE_TYPES
from dsh_llm.protocol.message import ContextSnapshotSection
from dsh_llm.protocol.message import Message
from dsh_llm.protocol.message import MessageSource
from dsh_llm.protocol.message import ModelSource
from dsh_llm.protocol.message import PluginSource
from dsh_llm.protocol.message import ToolSource
from dsh_llm.protocol.message import UserSource
from dsh_llm.protocol.message import bound_context_summary
from dsh_llm.protocol.message import create_assistant_message
from dsh_llm.protocol.message import create_message
from dsh_llm.protocol.message import create_tool_result_message
from dsh_llm.protocol.message import create_user_message
from dsh_llm.protocol.ratelimits import RateLimit
from dsh_llm.protocol.ratelimits import RateLimits
from dsh_llm.protocol.request import DIRECT_ROUTE
from dsh_llm.protocol.request import PURPOSES
from dsh_llm.protocol.request import TOOL_CHOICE_KEYWORDS
from dsh_llm.protocol.request import GenerateOptions
from dsh_llm.protocol.request import LlmCallConfig
from dsh_llm.protocol.request import ToolSchema
from dsh_llm.protocol.request import call_config_equals
from dsh_llm.protocol.stream import ChunkStream
from dsh_llm.protocol.stream import ResponseInfo
from dsh_llm.protocol.stream import StreamMetadata

__all__ = [
    "BLOCK_TYPES",
    "CHUNK_TYPES",
    "CITATION_KINDS",
    "CONTEXT_FORMS",
    "CONTEXT_SUMMARY_MAX_CHARS",
    "DIRECT_ROUTE",
    "FAILURE_KINDS",
    "IMAGE_MEDIA_TYPES",
    "PURPOSES",
    "ROLES",
    "SOURCE_TYPES",
    "TOOL_CHOICE_KEYWORDS",
    "BlockEnd",
    "BlockStart",
    "CacheBreakpoint",
    "CallId",
    "ChunkStream",
    "Citation",
    "ContentBlock",
    "ContextSnapshotSection",
    "Finish",
    "FinishReason",
    "GenerateOptions",
    "ImageBlock",
    "ImageDimensions",
    "ImageRef",
    "LlmCallConfig",
    "LlmFailure",
    "Message",
    "MessageSource",
    "ModelSource",
    "PluginSource",
    "RateLimit",
    "RateLimits",
    "ReasoningBlock",
    "ReasoningDelta",
    "ReplayEnvelope",
    "ResponseFormat",
    "ResponseInfo",
    "ServerToolCallBlock",
    "ServerToolResultBlock",
    "Source",
    "StreamChunk",
    "StreamMetadata",
    "TextBlock",
    "TextDelta",
    "TokenUsage",
    "ToolCallBlock",
    "ToolCallDelta",
    "ToolResultBlock",
    "ToolSchema",
    "ToolSource",
    "UsageChunk",
    "UserSource",
    "bound_context_summary",
    "call_config_equals",
    "citations_of",
    "content_has_image",
    "create_assistant_message",
    "create_message",
    "create_tool_result_message",
    "create_user_message",
    "is_token_delta",
    "reasoning_of",
    "text_of",
    "tool_calls_of",
]
