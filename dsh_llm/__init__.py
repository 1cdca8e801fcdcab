"""dsh_llm: stream any language model into one strict chunk protocol.

The root re-exports the names of DESIGN section 4 (the protocol's chunks and
blocks, errors, cancellation, chunk serialisation) and the notebook helpers
(``Conversation``, ``collect``, ``run_tools``, ``parse_json``, ``PartialJson``);
at most 40 names. Everything else public is imported from its module (listed in
``docs/api.md``); adapters live in ``dsh_llm.adapters.<provider>``.
"""

from __future__ import annotations

import logging

from dsh_llm._version import __version__
from dsh_llm.adapter import LlmAdapter
from dsh_llm.assembler import BlockAssembler, collect
from dsh_llm.conversation import Conversation
from dsh_llm.errors import ErrorCode, LlmError
from dsh_llm.protocol import (
    BlockEnd,
    BlockStart,
    CallId,
    Finish,
    FinishReason,
    GenerateOptions,
    LlmFailure,
    Message,
    ReasoningBlock,
    ReasoningDelta,
    ResponseFormat,
    StreamChunk,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
    ToolResultBlock,
    ToolSchema,
    UsageChunk,
    create_user_message,
)
from dsh_llm.runtime import LlmRuntime
from dsh_llm.serde import (
    chunk_from_dict,
    chunk_to_dict,
)
from dsh_llm.signal import AbortController, AbortSignal
from dsh_llm.structured import PartialJson, parse_json
from dsh_llm.tools import run_tools
from dsh_llm.trace import trace_stream
from dsh_llm.transport.attribution import attribution_headers
from dsh_llm.validator import assert_chunk_sequence, validate_stream

__all__ = [
    "AbortController",
    "AbortSignal",
    "BlockAssembler",
    "BlockEnd",
    "BlockStart",
    "CallId",
    "Conversation",
    "ErrorCode",
    "Finish",
    "FinishReason",
    "GenerateOptions",
    "LlmAdapter",
    "LlmError",
    "LlmFailure",
    "LlmRuntime",
    "Message",
    "PartialJson",
    "ReasoningBlock",
    "ReasoningDelta",
    "ResponseFormat",
    "StreamChunk",
    "TextBlock",
    "TextDelta",
    "TokenUsage",
    "ToolCallBlock",
    "ToolCallDelta",
    "ToolResultBlock",
    "ToolSchema",
    "UsageChunk",
    "__version__",
    "assert_chunk_sequence",
    "attribution_headers",
    "chunk_from_dict",
    "chunk_to_dict",
    "collect",
    "create_user_message",
    "parse_json",
    "run_tools",
    "trace_stream",
    "validate_stream",
]

logging.getLogger("dsh_llm").addHandler(logging.NullHandler())
