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
from dsh_llm.assembler import BlockAssembler
from dsh_llm.assembler import collect
from dsh_llm.conversation import Conversation
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import BlockEnd
from dsh_llm.protocol import BlockStart
from dsh_llm.protocol import CallId
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import LlmFailure
from dsh_llm.protocol import Message
from dsh_llm.protocol import ReasoningBlock
from dsh_llm.protocol import ReasoningDelta
from dsh_llm.protocol import ResponseFormat
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import TextDelta
from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.protocol import ToolCallDelta
from dsh_llm.protocol import ToolResultBlock
from dsh_llm.protocol import ToolSchema
from dsh_llm.protocol import UsageChunk
from dsh_llm.protocol import create_user_message
from dsh_llm.runtime import LlmRuntime
from dsh_llm.serde import chunk_from_dict
from dsh_llm.serde import chunk_to_dict
from dsh_llm.signal import AbortController
from dsh_llm.signal import AbortSignal
from dsh_llm.structured import PartialJson
from dsh_llm.structured import parse_json
from dsh_llm.tools import run_tools
from dsh_llm.trace import trace_stream
from dsh_llm.transport.attribution import attribution_headers
from dsh_llm.validator import assert_chunk_sequence
from dsh_llm.validator import validate_stream

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
