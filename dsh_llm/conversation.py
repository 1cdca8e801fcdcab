"""``Conversation``: a multi-turn chat that keeps its messages.

Contracts callers may rely on:

- A conversation holds a request template (model, route, system prompt and any
  other ``GenerateOptions`` field, checked at construction) and the messages so
  far (``messages``, oldest first).
- ``send(text)`` returns the reply (an ``AssembledResponse``); ``stream(text)``
  yields the reply's chunks (a generator whose return value is the
  ``ToolLoopResult``). Each turn is a tool loop (``dsh_llm.tools.run_tools``):
  with ``tools``, the calls the model makes run and their results are kept.
- A turn is committed only when it completes: the user message, every
  assistant turn (with its replay state, so reasoning signatures go back to
  the provider) and tool result are appended. A failed or aborted turn, a
  stream left early, or an error leaves ``messages`` as they were, so the same
  text can be sent again. ``send`` raises the failure as ``LlmError``.
- ``signal`` (per call) aborts the current turn only, never the conversation.
"""

from __future__ import annotations

from collections.abc import Generator
from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

from dsh_llm.assembler import AssembledResponse
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import DIRECT_ROUTE
from dsh_llm.protocol import ContentBlock
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import Message
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import create_user_message
from dsh_llm.signal import AbortSignal
from dsh_llm.tools import DEFAULT_MAX_STEPS
from dsh_llm.tools import StreamTarget
from dsh_llm.tools import ToolFunction
from dsh_llm.tools import ToolLoopResult
from dsh_llm.tools import ToolRunner

__all__ = ["Conversation"]


class Conversation:
    """A chat with ``target`` (an ``LlmRuntime`` or an adapter) that keeps its
    messages (see the module docstring).

    Example::

        chat = Conversation(adapter, "qwen3-8b", system="Be brief.")
        print(chat.send("Name a colour.").text)
        print(chat.send("Another one?").text)

    Args:
        target: What streams each call.
        model: The model id.
        system: The system prompt, kept for every turn.
        provider: The route (``DIRECT_ROUTE`` for an adapter called directly).
        tools: Functions the model may call (a mapping of names or a list).
        max_steps: Model calls per turn at most (tool loop steps).
        messages: Earlier messages to start from.
        options: Any other ``GenerateOptions`` field (``temperature=0``).

    Raises:
        TypeError, ValueError: for a bad field, at construction.
    """

    def __init__(
        self,
        target: StreamTarget,
        model: str,
        *,
        system: str | None = None,
        provider: str = DIRECT_ROUTE,
        tools: Mapping[str, ToolFunction] | Iterable[ToolFunction] = (),
        max_steps: int = DEFAULT_MAX_STEPS,
        messages: Sequence[Message] = (),
        **options: Any,
    ) -> None:
        self.options: GenerateOptions = GenerateOptions(
            provider=provider,
            model=model,
            messages=tuple(messages),
            system=system,
            **options,
        )
        """The request template every turn starts from."""
        self.messages: list[Message] = list(self.options.messages)
        """The conversation so far, oldest first."""
        self.last: ToolLoopResult | None = None
        """The outcome of the last completed turn."""
        self._runner = ToolRunner(target, tools, max_steps=max_steps)

    def stream(
        self,
        content: str | Iterable[ContentBlock] | Message,
        *,
        signal: AbortSignal | None = None,
    ) -> Generator[StreamChunk, None, ToolLoopResult]:
        """Send ``content`` (text, blocks or a user message) and yield the
        reply's chunks (every step's, with tools); the return value is the
        turn's ``ToolLoopResult``. Committed only when it completes."""
        user = content if isinstance(content, Message) else create_user_message(content)
        options = self.options.evolve(
            messages=(*self.messages, user),
            signal=signal if signal is not None else self.options.signal,
        )
        # A ToolLoop's StopIteration carries its ToolLoopResult.
        result: ToolLoopResult = yield from self._runner.stream(options)
        if result.stop_reason in ("finished", "max-steps"):
            self.messages = list(result.messages)
            self.last = result
        return result

    def send(
        self,
        content: str | Iterable[ContentBlock] | Message,
        *,
        signal: AbortSignal | None = None,
    ) -> AssembledResponse:
        """Send ``content`` and return the reply once complete.

        Raises:
            LlmError: the failure of a failed or aborted turn (``messages`` are
                then unchanged), or what an adapter raised.
        """
        turn = self.stream(content, signal=signal)
        while True:
            try:
                next(turn)
            except StopIteration as stop:
                result: ToolLoopResult = stop.value
                break
        failure = result.response.finish.failure
        if failure is not None:
            raise LlmError.from_failure(failure)
        if result.stop_reason != "finished" and result.stop_reason != "max-steps":
            raise LlmError("the turn was aborted", ErrorCode.ABORTED)
        return result.response

    def __repr__(self) -> str:
        return (
            f"Conversation(model={self.options.model!r}, messages={len(self.messages)})"
        )
