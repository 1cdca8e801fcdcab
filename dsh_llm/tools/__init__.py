"""Tools: run the functions a model calls, step after step.

- ``run_tools(target, options, tools={...})``: the tool loop (``ToolLoop``,
  ``ToolLoopResult``); ``ToolRunner`` is the same loop as a ``stream(options)``
  source, for ``dsh_llm.aio.astream``.
- ``tool_schema(function)``: a ``ToolSchema`` from a function's signature and
  docstring (or from a pydantic model, dataclass or ``TypedDict`` class);
  ``bind_tool`` reads a call's arguments into the parameter types.
"""

from __future__ import annotations

from dsh_llm.tools.loop import DEFAULT_MAX_STEPS
from dsh_llm.tools.loop import StopReason
from dsh_llm.tools.loop import StreamTarget
from dsh_llm.tools.loop import ToolFunction
from dsh_llm.tools.loop import ToolLoop
from dsh_llm.tools.loop import ToolLoopResult
from dsh_llm.tools.loop import ToolRunner
from dsh_llm.tools.loop import run_tools
from dsh_llm.tools.schema import bind_tool
from dsh_llm.tools.schema import tool_schema

__all__ = [
    "DEFAULT_MAX_STEPS",
    "StopReason",
    "StreamTarget",
    "ToolFunction",
    "ToolLoop",
    "ToolLoopResult",
    "ToolRunner",
    "bind_tool",
    "run_tools",
    "tool_schema",
]
