"""dsh_llm: stream any language model into one strict chunk protocol.

The root re-exports the vocabulary (protocol values, errors, cancellation,
serialisation) and the notebook helpers (``Conversation``, ``run_tools``,
``parse_json``, ``PartialJson``). Adapters live in ``dsh_llm.adapters.<provider>``.
"""

from __future__ import annotations

import logging

from dsh_llm._version import __version__
from dsh_llm.adapter import LlmAdapter
from dsh_llm.assembler import AssembledResponse, BlockAssembler, collect
from dsh_llm.conversation import Conversation
from dsh_llm.errors import ErrorCode, HarnessError, LlmError, normalize_llm_failure
from dsh_llm.protocol import (
    BlockEnd,
    BlockStart,
    CallId,
    Citation,
    ContentBlock,
    Finish,
    FinishReason,
    GenerateOptions,
    ImageBlock,
    LlmFailure,
    Message,
    ReasoningBlock,
    ReasoningDelta,
    ReplayEnvelope,
    ResponseFormat,
    ServerToolCallBlock,
    ServerToolResultBlock,
    Source,
    StreamChunk,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolCallBlock,
    ToolCallDelta,
    ToolResultBlock,
    ToolSchema,
    UsageChunk,
    create_assistant_message,
    create_tool_result_message,
    create_user_message,
)
from dsh_llm.runtime import LlmRuntime
from dsh_llm.serde import (
    chunk_from_dict,
    chunk_to_dict,
    message_from_dict,
    message_to_dict,
)
from dsh_llm.signal import AbortController, AbortSignal
from dsh_llm.structured import PartialJson, parse_json
from dsh_llm.tools import run_tools
from dsh_llm.trace import trace_stream
from dsh_llm.transport.attribution import AppIdentity, attribution_headers
from dsh_llm.validator import assert_chunk_sequence, validate_stream

__all__ = [
    "AbortController",
    "AbortSignal",
    "AppIdentity",
    "AssembledResponse",
    "BlockAssembler",
    "BlockEnd",
    "BlockStart",
    "CallId",
    "Citation",
    "ContentBlock",
    "Conversation",
    "ErrorCode",
    "Finish",
    "FinishReason",
    "GenerateOptions",
    "HarnessError",
    "ImageBlock",
    "LlmAdapter",
    "LlmError",
    "LlmFailure",
    "LlmRuntime",
    "Message",
    "PartialJson",
    "ReasoningBlock",
    "ReasoningDelta",
    "ReplayEnvelope",
    "ResponseFormat",
    "ServerToolCallBlock",
    "ServerToolResultBlock",
    "Source",
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
    "create_assistant_message",
    "create_tool_result_message",
    "create_user_message",
    "message_from_dict",
    "message_to_dict",
    "normalize_llm_failure",
    "parse_json",
    "run_tools",
    "trace_stream",
    "validate_stream",
]

logging.getLogger("dsh_llm").addHandler(logging.NullHandler())
