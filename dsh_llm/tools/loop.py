"""The tool loop: stream a step, run the tools it asked for, send the results.

``run_tools(target, options, tools={...})`` returns a ``ToolLoop``: an iterator
over the chunks of every step, whose outcome is a ``ToolLoopResult``.

- ``target`` is an ``LlmRuntime`` (a failed step ends with an ``error`` finish)
  or an adapter (its ``LlmError`` propagates); each step is one strict stream.
- Arguments are parsed once, at ``block-end``, and read into the tool's
  parameter types (``dsh_llm.tools.schema.bind_tool``); each call runs in
  order, and an exception, an unknown tool or arguments that do not fit (named
  by the path of the first mismatch) become an ``is_error`` result.
- The assistant turn (with its replay state) and the results are appended.
- It stops at a non-tool finish, after ``max_steps``, or on an abort.
- The outcome: ``StopIteration.value``, ``loop.result`` or ``loop.run()``;
  ``ToolRunner`` is the loop as a source for ``dsh_llm.aio.astream``.
- Point by point: ``docs/structured-output.md``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from collections.abc import Generator
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Mapping
from typing import Any
from typing import Final
from typing import Literal
from typing import Protocol

import attrs

from dsh_llm.assembler import AssembledResponse
from dsh_llm.assembler import BlockAssembler
from dsh_llm.assembler import PriceLookup
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import BlockEnd
from dsh_llm.protocol import Finish
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import LlmFailure
from dsh_llm.protocol import Message
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import ToolCallBlock
from dsh_llm.protocol import create_assistant_message
from dsh_llm.protocol import create_tool_result_message
from dsh_llm.protocol.display import blocks_markdown
from dsh_llm.protocol.display import clip
from dsh_llm.protocol.display import footer_markdown
from dsh_llm.protocol.pytypes import ValueMismatch
from dsh_llm.protocol.pytypes import to_json
from dsh_llm.sources import close_source
from dsh_llm.tools.schema import bind_tool
from dsh_llm.tools.schema import tool_schema

DEFAULT_MAX_STEPS: Final = 8
"""Model calls a loop makes at most unless told otherwise."""

ToolFunction = Callable[..., Any]
"""A tool: called with the call's arguments as keyword arguments."""

StopReason = Literal["finished", "failed", "aborted", "max-steps"]
"""Why a tool loop ended."""


class StreamTarget(Protocol):
    """What the loop streams from: an ``LlmRuntime`` or an ``LlmAdapter``."""

    def stream(self, options: GenerateOptions) -> Iterable[StreamChunk]:
        """The chunks of one call."""
        ...


@attrs.frozen(kw_only=True)
class ToolLoopResult:
    """The outcome of a tool loop."""

    response: AssembledResponse
    """The last step's response (its message carries the replay state; check
    ``ok`` after a ``failed`` or ``aborted`` stop)."""
    messages: tuple[Message, ...]
    """The request's messages, then every assistant turn and tool result."""
    steps: int
    """How many model calls were made."""
    stop_reason: StopReason
    """Why the loop ended (see the module docstring)."""

    @property
    def text(self) -> str:
        """The last response's text."""
        return self.response.text

    def parsed(self, into: Any = None) -> Any:
        """The last response's text read as JSON, or into the type ``into``
        (``AssembledResponse.parsed``).

        Raises:
            LlmError: ``INVALID_JSON_OUTPUT`` when it does not fit.
        """
        return self.response.parsed(into)

    def loop_messages(self) -> tuple[Message, ...]:
        """The messages this loop produced (every assistant turn and tool
        result after the request's own messages), then the last response's
        message when it was not kept (a failed step)."""
        kept = self.steps - 1 if self.response.finish.is_failure else self.steps
        start = len(self.messages)
        while kept > 0 and start > 0:
            start -= 1
            if self.messages[start].role == "assistant":
                kept -= 1
        produced = self.messages[start:]
        if all(m.id != self.response.message.id for m in produced):
            produced = (*produced, self.response.message)
        return produced

    def __repr__(self) -> str:
        """``ToolLoopResult(finished, steps=2, tool_calls=[get_weather],
        text='…')``."""
        calls = [c.name for m in self.loop_messages() for c in m.tool_calls]
        parts = [self.stop_reason, f"steps={self.steps}"]
        if calls:
            parts.append(f"tool_calls=[{', '.join(calls)}]")
        parts.append(f"text={clip(self.text)}")
        parts.append(f"messages={len(self.messages)}")
        return f"ToolLoopResult({', '.join(parts)})"

    def to_markdown(self, prices: PriceLookup | None = None) -> str:
        """The loop as Markdown: each of its turns (reasoning folded, tool
        calls with their arguments, tool results, the answer), then how it
        stopped and the last response's finish, usage, route and model, and its
        cost when ``prices`` (a ``dsh_llm.observe.cost.PriceTable``) knows it."""
        turns = [blocks_markdown(m.content) for m in self.loop_messages()]
        steps = f"{self.steps} step{'' if self.steps == 1 else 's'}"
        footer = [f"{self.stop_reason} after {steps}", *self.response.footer(prices)]
        footer[2] = f"{footer[2]} (last step)"
        body = "\n\n".join(turn for turn in turns if turn)
        line = footer_markdown(footer)
        return f"{body}\n\n---\n\n{line}" if body else line

    def _repr_markdown_(self) -> str:
        return self.to_markdown()


def _result_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(to_json(value), ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def _parsed(block: ToolCallBlock) -> tuple[dict[str, Any] | None, str | None]:
    """The call's arguments object, or the problem that stops it running."""
    try:
        value = json.loads(block.arguments)
    except ValueError as exc:
        return None, f"the arguments of {block.name} are not valid JSON: {exc}"
    if not isinstance(value, dict):
        return None, f"the arguments of {block.name} must be a JSON object"
    return value, None


def _run_one(
    block: ToolCallBlock,
    arguments: tuple[dict[str, Any] | None, str | None],
    tools: Mapping[str, ToolFunction],
) -> Message:
    function = tools.get(block.name)
    values, problem = arguments
    if function is None:
        known = ", ".join(sorted(tools)) or "none"
        problem = f"there is no tool named {block.name!r} (tools: {known})"
    if function is None or problem is not None or values is None:
        return create_tool_result_message(block.id, problem or "", is_error=True)
    try:
        call = bind_tool(function, values)
    except ValueMismatch as mismatch:
        return create_tool_result_message(
            block.id,
            f"the arguments of {block.name} do not fit its parameters: {mismatch}",
            is_error=True,
        )
    except Exception as exc:
        return create_tool_result_message(
            block.id, f"{type(exc).__name__}: {exc}", is_error=True
        )
    try:
        output = call()
    except Exception as exc:
        return create_tool_result_message(
            block.id, f"{type(exc).__name__}: {exc}", is_error=True
        )
    return create_tool_result_message(block.id, _result_text(output))


def _aborted(options: GenerateOptions) -> bool:
    return options.signal is not None and options.signal.aborted


def _tool_map(
    tools: Mapping[str, ToolFunction] | Iterable[ToolFunction],
) -> dict[str, ToolFunction]:
    if isinstance(tools, Mapping):
        named = dict(tools)
    else:
        named = {getattr(fn, "__name__", ""): fn for fn in tools}
    for name, function in named.items():
        if not isinstance(name, str) or not name or not callable(function):
            raise TypeError(
                "tools must map tool names to functions (or be a list of named "
                f"functions), got {name!r}: {type(function).__name__}"
            )
    return named


def _steps(
    target: StreamTarget,
    options: GenerateOptions,
    tools: Mapping[str, ToolFunction],
    max_steps: int,
) -> Generator[StreamChunk, None, ToolLoopResult]:
    messages = list(options.messages)
    steps = 0
    while True:
        steps += 1
        step = options.evolve(messages=tuple(messages))
        assembler = BlockAssembler()
        arguments: dict[int, tuple[dict[str, Any] | None, str | None]] = {}
        finished = False
        iterator = iter(target.stream(step))
        try:
            for chunk in iterator:
                assembler.push(chunk)
                if isinstance(chunk, BlockEnd) and isinstance(
                    chunk.block, ToolCallBlock
                ):
                    arguments[len(arguments)] = _parsed(chunk.block)
                finished = finished or isinstance(chunk, Finish)
                yield chunk
        finally:
            close_source(iterator)
        reason = assembler.finish if finished else _cut_short()
        turn = create_assistant_message(
            assembler.blocks()
            if not reason.is_failure
            else assembler.interrupted_blocks(),
            provider=options.provider,
            model=options.model,
            replay_state=None if reason.is_failure else assembler.replay_state,
        )
        response = AssembledResponse(message=turn, usage=assembler.usage, finish=reason)
        if reason.is_failure:
            stop: StopReason = "aborted" if reason.kind == "aborted" else "failed"
            return ToolLoopResult(
                response=response,
                messages=tuple(messages),
                steps=steps,
                stop_reason=stop,
            )
        messages.append(turn)
        calls = turn.tool_calls
        if reason.kind != FinishReason.TOOL_CALLS.kind or not calls:
            return _done(response, messages, steps, "finished")
        for position, block in enumerate(calls):
            if _aborted(options):
                return _done(response, messages, steps, "aborted")
            parsed = arguments[position] if position in arguments else _parsed(block)
            messages.append(_run_one(block, parsed, tools))
        if _aborted(options):
            return _done(response, messages, steps, "aborted")
        if steps >= max_steps:
            return _done(response, messages, steps, "max-steps")


def _done(
    response: AssembledResponse, messages: list[Message], steps: int, stop: StopReason
) -> ToolLoopResult:
    return ToolLoopResult(
        response=response, messages=tuple(messages), steps=steps, stop_reason=stop
    )


def _cut_short() -> FinishReason:
    return FinishReason.error(
        LlmFailure(
            message="a tool-loop step ended without a finish chunk",
            code=ErrorCode.STREAM_CLOSED.value,
        )
    )


class ToolLoop(Iterator[StreamChunk]):
    """The chunks of every step of one tool loop; see the module docstring.

    Iterate it (or ``yield from`` it), then read ``result``; or call ``run()``.
    ``close()`` stops it early (closing the step being streamed).
    """

    __slots__ = ("_generator", "_result")

    def __init__(
        self,
        target: StreamTarget,
        options: GenerateOptions,
        tools: Mapping[str, ToolFunction],
        max_steps: int,
    ) -> None:
        self._generator = _steps(target, options, tools, max_steps)
        self._result: ToolLoopResult | None = None

    def __iter__(self) -> ToolLoop:
        return self

    def __next__(self) -> StreamChunk:
        try:
            return next(self._generator)
        except StopIteration as stop:
            self._result = stop.value
            raise StopIteration(stop.value) from None

    def close(self) -> None:
        """Stop the loop early; ``result`` stays unset."""
        self._generator.close()

    @property
    def result(self) -> ToolLoopResult:
        """The outcome, once the loop is exhausted.

        Raises:
            LlmError: ``INVALID_PREPARED_CALL`` before then.
        """
        if self._result is None:
            raise LlmError(
                "the tool loop has not finished: iterate it to its end (or call "
                "run()) before reading result",
                ErrorCode.INVALID_PREPARED_CALL,
            )
        return self._result

    def run(self) -> ToolLoopResult:
        """Consume the remaining chunks and return the outcome."""
        for _ in self:
            pass
        return self.result


class ToolRunner:
    """A tool loop as a ``stream(options)`` source (for ``dsh_llm.aio.astream``).

    ``result`` is the outcome of the last loop that ran to its end.
    """

    def __init__(
        self,
        target: StreamTarget,
        tools: Mapping[str, ToolFunction] | Iterable[ToolFunction],
        *,
        max_steps: int = DEFAULT_MAX_STEPS,
    ) -> None:
        if type(max_steps) is not int or max_steps <= 0:
            raise ValueError(f"max_steps must be a positive int, got {max_steps!r}")
        if not callable(getattr(target, "stream", None)):
            raise TypeError(
                "the tool loop needs an LlmRuntime, an adapter or another object "
                f"with stream(options), got {type(target).__name__}"
            )
        self._target = target
        self._tools = _tool_map(tools)
        self._max_steps = max_steps
        self._last: ToolLoop | None = None

    def stream(self, options: GenerateOptions) -> ToolLoop:
        """A new loop over ``options`` (the tools' schemas added when it has
        none)."""
        if not isinstance(options, GenerateOptions):
            raise TypeError(
                f"options must be GenerateOptions, got {type(options).__name__}"
            )
        if options.tools is None and self._tools:
            options = options.evolve(
                tools=tuple(
                    tool_schema(fn, name=name) for name, fn in self._tools.items()
                )
            )
        loop = ToolLoop(self._target, options, self._tools, self._max_steps)
        self._last = loop
        return loop

    @property
    def result(self) -> ToolLoopResult:
        """The last loop's outcome.

        Raises:
            LlmError: ``INVALID_PREPARED_CALL`` when no loop has finished.
        """
        if self._last is None:
            raise LlmError("no tool loop has run yet", ErrorCode.INVALID_PREPARED_CALL)
        return self._last.result


def run_tools(
    target: StreamTarget,
    options: GenerateOptions,
    tools: Mapping[str, ToolFunction] | Iterable[ToolFunction],
    *,
    max_steps: int = DEFAULT_MAX_STEPS,
) -> ToolLoop:
    """Run the tool loop (see the module docstring); nothing is sent before the
    first ``next()``.

    Example::

        loop = run_tools(runtime, options, tools={"get_weather": get_weather})
        for chunk in loop:
            ...
        print(loop.result.text)

    Raises:
        TypeError: for a target without ``stream`` or tools that are not
            functions.
        ValueError: for a ``max_steps`` that is not a positive int.
    """
    return ToolRunner(target, tools, max_steps=max_steps).stream(options)
