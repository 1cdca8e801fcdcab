"""``dsh-llm chat -i``: an interactive session that keeps the conversation.

This module owns ``run_session``. Contracts callers may rely on:

- Each line read is one turn of a ``dsh_llm.conversation.Conversation`` over
  the target's runtime and route (system prompt and options kept); the answer
  streams as ``chat`` shows it, with a summary line on stderr.
- The prompt (``you> ``) and notices go to stderr; with a terminal on stdin the
  line is read with ``input`` (readline editing and history, when the platform
  has readline), else line by line from stdin.
- ``/exit`` (or ``/quit``) or end of input (Ctrl-D) ends the session with
  status 0. An empty line is skipped.
- Ctrl-C while an answer streams aborts that answer only (``[aborted]``); the
  turn is not kept and the session goes on. Ctrl-C at the prompt drops the line.
- A failed turn prints ``error[CODE]: message`` (with the key hint for
  ``AUTH``) and the session goes on; its turn is not kept.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any, Final, TextIO

from dsh_llm.cli.console import ChunkPrinter, summary_line
from dsh_llm.cli.hints import failure_message
from dsh_llm.cli.interrupt import run_abortable
from dsh_llm.cli.targets import Target
from dsh_llm.conversation import Conversation
from dsh_llm.errors import LlmError
from dsh_llm.protocol import Finish, FinishReason, TokenUsage, UsageChunk
from dsh_llm.signal import AbortController

__all__ = ["EXIT_WORDS", "PROMPT", "run_session"]

PROMPT: Final = "you> "
"""What the session shows before each line."""
EXIT_WORDS: Final = frozenset({"/exit", "/quit"})
"""Lines that end the session."""


def _read_line(stdin: TextIO, stderr: TextIO) -> str | None:
    """The next line without its newline; ``None`` at end of input."""
    isatty = getattr(stdin, "isatty", None)
    if stdin is sys.stdin and isatty is not None and isatty():
        with contextlib.suppress(ImportError):
            import readline  # noqa: F401  (line editing and history for input())
        stderr.flush()
        try:
            return input(PROMPT)
        except EOFError:
            return None
    stderr.write(PROMPT)
    stderr.flush()
    line = stdin.readline()
    return None if line == "" else line.rstrip("\r\n")


def run_session(
    target: Target,
    *,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    **options: Any,
) -> int:
    """Run the session until ``/exit`` or end of input; return the exit status.

    Args:
        target: The runtime, route and model.
        stdin, stdout, stderr: The streams (default: ``sys``'s).
        options: ``GenerateOptions`` fields kept for every turn (``system``,
            ``temperature``, ``extra_body``...).
    """
    stdin = sys.stdin if stdin is None else stdin
    stdout = sys.stdout if stdout is None else stdout
    stderr = sys.stderr if stderr is None else stderr
    fields = {key: value for key, value in options.items() if value is not None}
    conversation = Conversation(
        target.runtime, target.model, provider=target.route, **fields
    )
    stderr.write(
        f"dsh-llm chat: {target.route} / {target.model}; /exit or Ctrl-D ends, "
        "Ctrl-C aborts an answer\n"
    )
    while True:
        try:
            line = _read_line(stdin, stderr)
        except KeyboardInterrupt:
            stderr.write("\n")
            continue
        if line is None:
            stderr.write("\n")
            return 0
        text = line.strip()
        if text in EXIT_WORDS:
            return 0
        if not text:
            continue
        _turn(conversation, text, target, stdout, stderr)


def _turn(
    conversation: Conversation,
    text: str,
    target: Target,
    stdout: TextIO,
    stderr: TextIO,
) -> None:
    controller = AbortController()
    printer = ChunkPrinter(stdout, stderr)
    seen: dict[str, Any] = {}

    def work() -> None:
        try:
            for chunk in conversation.stream(text, signal=controller.signal):
                printer.write(chunk)
                if isinstance(chunk, UsageChunk):
                    seen["usage"] = chunk.usage
                elif isinstance(chunk, Finish):
                    seen["finish"] = chunk.reason
        finally:
            printer.end()

    try:
        run_abortable(work, controller)
    except KeyboardInterrupt:
        stderr.write("[aborted]\n")
        return
    except LlmError as exc:
        stderr.write(f"error[{exc.code}]: {exc.message}\n")
        return
    finish: FinishReason | None = seen.get("finish")
    if finish is None:
        return
    if finish.failure is not None:
        if finish.kind == "aborted":
            stderr.write("[aborted]\n")
            return
        message = failure_message(finish.failure, target.key_hint)
        stderr.write(f"error[{finish.failure.code}]: {message}\n")
        return
    usage: TokenUsage | None = seen.get("usage")
    stderr.write(summary_line(finish, usage) + "\n")
