"""dsh_llm: stream any language model into one strict chunk protocol.

The root re-exports the vocabulary (protocol values, errors, cancellation,
serialisation). Adapters live in ``dsh_llm.adapters.<provider>``.
"""

from __future__ import annotations

import logging

from dsh_llm._version import __version__
from dsh_llm.attribution import AppIdentity, attribution_headers
from dsh_llm.errors import ErrorCode, HarnessError, LlmError, normalize_llm_failure
from dsh_llm.protocol import (
    BlockEnd,
    BlockStart,
    CallId,
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
from dsh_llm.serde import (
    chunk_from_dict,
    chunk_to_dict,
    message_from_dict,
    message_to_dict,
)
from dsh_llm.signal import AbortController, AbortSignal

__all__ = [
    "AbortController",
    "AbortSignal",
    "AppIdentity",
    "BlockEnd",
    "BlockStart",
    "CallId",
    "ContentBlock",
    "ErrorCode",
    "Finish",
    "FinishReason",
    "GenerateOptions",
    "HarnessError",
    "ImageBlock",
    "LlmError",
    "LlmFailure",
    "Message",
    "ReasoningBlock",
    "ReasoningDelta",
    "ReplayEnvelope",
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
    "attribution_headers",
    "chunk_from_dict",
    "chunk_to_dict",
    "create_assistant_message",
    "create_tool_result_message",
    "create_user_message",
    "message_from_dict",
    "message_to_dict",
    "normalize_llm_failure",
]

logging.getLogger("dsh_llm").addHandler(logging.NullHandler())
