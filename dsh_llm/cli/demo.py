"""``dsh-llm demo``: the library's main job on an embedded default, with no key and
no network.

This module owns the demo's scripted DeepSeek stream and its runner. Contracts
callers may rely on:

- ``demo_wire_events()`` is a realistic DeepSeek chat-completions stream
  (as ``docs/deepseek.md`` describes it): a keep-alive comment, the role chunk,
  reasoning in ``reasoning_content``, text, one ``get_weather`` tool call whose
  arguments arrive in fragments, and ``finish_reason: "tool_calls"`` with usage
  that includes cache hits (1283 prompt tokens, 1024 of them cached; 96
  completion tokens, 41 of them reasoning), then ``[DONE]``. ``demo_reply(pace)``
  plays it as one chunked HTTP reply, pausing between events (about 1.3 s in all
  at ``pace=1``; ``pace=0`` sends it at once).
- ``run_demo`` starts a ``LoopbackServer`` on 127.0.0.1, registers the real
  ``DeepSeekAdapter`` (explicit demo key ``DEMO_API_KEY``, ``base_url`` = the
  server, an empty environment: no ``DEEPSEEK_*`` variable is read) in an
  ``LlmRuntime`` and streams ``demo_options()`` through it over HTTP as ``dsh-llm
  chat`` does (``dsh_llm.cli.chat.stream_chat``: every chunk passes ``validate_stream``,
  strict, and is handed to the sink as it arrives; it returns the assembled
  ``AssembledResponse``; ``announce`` is told the server's URL first). The demo
  never leaves the machine: the transport reaches loopback hosts directly, so a
  proxy configured in the environment is never used, and the process
  environment is left untouched. The server and the adapter's connections are
  closed before ``run_demo`` returns.
- ``print_report`` writes what happened: the strict validation result, the
  assembled message block by block, the usage and the finish.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from typing import Final
from typing import TextIO

import attrs

from dsh_llm.adapters.deepseek import PROVIDER_ROUTE
from dsh_llm.adapters.deepseek import DeepSeekAdapter
from dsh_llm.assembler import AssembledResponse
from dsh_llm.cli.chat import stream_chat
from dsh_llm.cli.console import ChunkSink
from dsh_llm.cli.console import count_of
from dsh_llm.cli.console import format_usage
from dsh_llm.protocol import BlockStart
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import ReasoningBlock
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.protocol import ToolSchema
from dsh_llm.protocol import create_user_message
from dsh_llm.runtime import LlmRuntime
from dsh_llm.signal import AbortSignal
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import Pause
from dsh_llm.testing import Reply
from dsh_llm.testing import sse_event

DEMO_API_KEY: Final = "sk-dsh-llm-demo"
"""The key the demo sends to its own loopback server (not a real key)."""
DEMO_MODEL: Final = "deepseek-v4-flash"
"""The model id the demo requests."""
DEMO_PROMPT: Final = "What's the weather in Paris right now? Do I need an umbrella?"
"""The user's question in the demo conversation."""

_SYSTEM: Final = "You are a concise assistant. Use get_weather for live weather."
_STREAM_ID: Final = "demo-5f1c2a"
_CREATED: Final = 1767225600
_FIRST_TOKEN_S: Final = 0.25
_EVENT_GAP_S: Final = 0.05

_REASONING: Final = (
    "The user wants the current weather ",
    "in Paris and whether to take an umbrella. ",
    "I can't know live weather myself, ",
    "but the get_weather tool can: ",
    "call it for Paris in celsius, ",
    "then answer from its result.",
)
_TEXT: Final = (
    "Let me check ",
    "the live forecast ",
    "for Paris ",
    "before I answer.",
)
_TOOL_ID: Final = "call_00_Dm0ParisWx"
_TOOL_NAME: Final = "get_weather"
_ARGUMENTS: Final = ('{"city":', ' "Paris",', ' "unit":', ' "celsius"}')
_USAGE: Final = {
    "prompt_tokens": 1283,
    "completion_tokens": 96,
    "total_tokens": 1379,
    "prompt_tokens_details": {"cached_tokens": 1024},
    "completion_tokens_details": {"reasoning_tokens": 41},
    "prompt_cache_hit_tokens": 1024,
    "prompt_cache_miss_tokens": 259,
}

WEATHER_TOOL: Final = ToolSchema(
    name=_TOOL_NAME,
    description="Current weather for a city.",
    parameters={
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city"],
    },
)
"""The tool the demo request offers."""


def _chunk(
    delta: dict[str, Any],
    *,
    finish_reason: str | None = None,
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "id": _STREAM_ID,
        "object": "chat.completion.chunk",
        "created": _CREATED,
        "model": DEMO_MODEL,
        "system_fingerprint": "fp_demo",
        "choices": [
            {
                "index": 0,
                "delta": delta,
                "logprobs": None,
                "finish_reason": finish_reason,
            }
        ],
        "usage": usage,
    }


def demo_wire_events() -> tuple[dict[str, Any], ...]:
    """The demo's DeepSeek stream, one decoded ``data:`` payload per event
    (``[DONE]`` and the keep-alive comment excluded)."""
    events = [_chunk({"role": "assistant", "content": None, "reasoning_content": ""})]
    events += [
        _chunk({"content": None, "reasoning_content": piece}) for piece in _REASONING
    ]
    events += [_chunk({"content": piece, "reasoning_content": None}) for piece in _TEXT]
    events.append(
        _chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": _TOOL_ID,
                        "type": "function",
                        "function": {"name": _TOOL_NAME, "arguments": ""},
                    }
                ]
            }
        )
    )
    events += [
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
        for piece in _ARGUMENTS
    ]
    events.append(_chunk({"content": ""}, finish_reason="tool_calls", usage=_USAGE))
    return tuple(events)


def demo_reply(pace: float = 1.0) -> Reply:
    """The demo stream as one chunked reply; ``pace`` scales every pause.

    Raises:
        ValueError: for a negative ``pace``.
    """
    if pace < 0:
        raise ValueError(f"pace must be >= 0, got {pace}")
    steps: list[bytes | Pause] = [b": keep-alive\n\n"]
    if pace:
        steps.append(Pause(seconds=_FIRST_TOKEN_S * pace))
    for event in demo_wire_events():
        steps.append(sse_event(event))
        if pace:
            steps.append(Pause(seconds=_EVENT_GAP_S * pace))
    steps.append(b"data: [DONE]\n\n")
    return Reply(body=tuple(steps))


def demo_options(signal: AbortSignal | None = None) -> GenerateOptions:
    """The request the demo sends: a user question, a system prompt, one tool."""
    return GenerateOptions(
        provider=PROVIDER_ROUTE,
        model=DEMO_MODEL,
        system=_SYSTEM,
        messages=(create_user_message(DEMO_PROMPT),),
        tools=(WEATHER_TOOL,),
        reasoning_effort="high",
        signal=signal,
    )


@attrs.frozen(kw_only=True)
class DemoResult:
    """What one demo run saw: the response, and the facts of the run around it.

    The response is the library's one outcome type; the server's address and
    the counts of what passed validation are the demo's own.
    """

    server_url: str
    """Where the scripted server listened."""
    chunks: int
    """How many chunks passed strict validation."""
    blocks: int
    """How many blocks the stream opened."""
    response: AssembledResponse
    """The assembled message, usage and finish."""


class _Counting:
    """A sink that counts each chunk and block-start, then passes it on."""

    def __init__(self, sink: ChunkSink) -> None:
        self.sink = sink
        self.chunks = 0
        self.blocks = 0

    def write(self, chunk: StreamChunk) -> None:
        self.chunks += 1
        self.blocks += isinstance(chunk, BlockStart)
        self.sink.write(chunk)

    def end(self) -> None:
        self.sink.end()


def run_demo(
    sink: ChunkSink,
    *,
    signal: AbortSignal | None = None,
    pace: float = 1.0,
    announce: Callable[[str], object] | None = None,
) -> DemoResult:
    """Serve the scripted stream and read it through ``DeepSeekAdapter``.

    Args:
        sink: Gets every chunk as it arrives (e.g. a ``ChunkPrinter``).
        signal: Aborts the request (the stream then ends ``aborted``).
        pace: Scales the pauses between events (``0``: none).
        announce: Called with the server's URL before the request is sent.

    Returns:
        The validation count, assembled message, usage and finish.

    Raises:
        LlmError: ``INVARIANT`` if the stream broke the protocol's rules.
    """
    recording = _Counting(sink)
    with LoopbackServer() as server:
        server.enqueue(demo_reply(pace))
        if announce is not None:
            announce(server.url)
        adapter = DeepSeekAdapter(DEMO_API_KEY, base_url=server.url, environ={})
        runtime = LlmRuntime()
        registration = runtime.register_adapter([PROVIDER_ROUTE], adapter)
        try:
            response = stream_chat(runtime, demo_options(signal), recording)
        finally:
            registration.dispose()
            adapter.close()
    return DemoResult(
        server_url=server.url,
        chunks=recording.chunks,
        blocks=recording.blocks,
        response=response,
    )


def _describe_block(position: int, block: object) -> str:
    if isinstance(block, ReasoningBlock):
        return f"  [{position}] reasoning  {json.dumps(block.text, ensure_ascii=False)}"
    if isinstance(block, TextBlock):
        return f"  [{position}] text       {json.dumps(block.text, ensure_ascii=False)}"
    if isinstance(block, ToolCallBlock):
        return (
            f"  [{position}] tool-call  {block.name}({block.arguments}) id {block.id}"
        )
    return f"  [{position}] {type(block).__name__}"


def print_report(result: DemoResult, out: TextIO) -> None:
    """Write the validation result, the assembled message, usage and finish."""
    message = result.response.message
    lines = [
        "",
        f"strict validation: passed ({count_of(result.chunks, 'chunk')}, "
        f"{count_of(result.blocks, 'block')}, "
        "each block-start -> deltas -> block-end, then usage, then finish)",
        f"assembled {message.role} message, {count_of(len(message.content), 'block')}:",
        *(
            _describe_block(position, block)
            for position, block in enumerate(message.content)
        ),
        f"usage: {format_usage(result.response.usage)}",
        f"finish: {result.response.finish.kind}",
    ]
    out.write("\n".join(lines) + "\n")
    out.flush()
