"""``dsh-llm chat -i``: an interactive session that keeps the conversation.

This module owns ``run_session``. Contracts callers may rely on:

- Each line read is one turn of a ``dsh_llm.conversation.Conversation`` over
  the target's runtime and route (the ``ChatRequest``'s fields kept); the answer
  streams as ``chat`` shows it, with a summary line on stderr.
- The prompt (``you> ``) and notices go to stderr; with a terminal on stdin the
  line is read with ``input`` (readline editing and history, when the platform
  has readline), else line by line from stdin.
- ``/exit`` (or ``/quit``) or end of input (Ctrl-D) ends the session with
  status 0. An empty line is skipped.
- Ctrl-C while an answer streams aborts that answer only (``[aborted]``); the
  turn is not kept and the session goes on. Ctrl-C at the prompt drops the line.
- A failed turn prints ``error[CODE]: message`` (with the key hint for
  ``AUTH``) and the session goes on; its turn is not kept. A missing key
  (``MISSING_CREDENTIAL``) ends the session with status 2, saying how to give
  one: no turn could succeed without it.
- The request's history starts the session (a continued conversation); its
  images go with the first prompt; ``call_log`` logs every turn that got an
  answer, failed ones included (``dsh_llm.cli.logs``).
"""

from __future__ import annotations

import contextlib
import sys
from typing import Final
from typing import TextIO

from dsh_llm.cli.chat import ChatRequest
from dsh_llm.cli.console import ChunkPrinter
from dsh_llm.cli.console import summary_line
from dsh_llm.cli.hints import failure_message
from dsh_llm.cli.hints import missing_key_message
from dsh_llm.cli.interrupt import run_abortable
from dsh_llm.cli.logs import CallLog
from dsh_llm.cli.logs import CallTimer
from dsh_llm.cli.targets import Target
from dsh_llm.conversation import Conversation
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import Message
from dsh_llm.protocol import TextBlock
from dsh_llm.protocol import create_user_message
from dsh_llm.signal import AbortController
from dsh_llm.tools import ToolLoopResult

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


def run_session(target: Target, request: ChatRequest, call_log: CallLog) -> int:
    """Run the session on ``sys``'s streams until ``/exit`` or end of input;
    return the exit status.

    Args:
        target: The runtime, route and model.
        request: The conversation so far, the first prompt's images and the
            fields kept for every turn.
        call_log: Where each turn is logged.
    """
    stdin, stdout, stderr = sys.stdin, sys.stdout, sys.stderr
    messages = request.history
    conversation = Conversation(
        target.runtime,
        target.model,
        provider=target.route,
        messages=messages,
        **request.fields(),
    )
    continued = f", {len(messages)} messages so far" if messages else ""
    stderr.write(
        f"dsh-llm chat: {target.route} / {target.model}{continued}; /exit or "
        "Ctrl-D ends, Ctrl-C aborts an answer\n"
    )
    pending = request.images
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
        user = create_user_message((TextBlock(text=text), *pending))
        pending = ()
        status = _turn(conversation, user, target, stdout, stderr, call_log)
        if status is not None:
            return status


def _turn(
    conversation: Conversation,
    user: Message,
    target: Target,
    stdout: TextIO,
    stderr: TextIO,
    call_log: CallLog,
) -> int | None:
    """One turn; an exit status when the session must end."""
    controller = AbortController()
    timer = CallTimer(ChunkPrinter(stdout, stderr))

    def work() -> ToolLoopResult:
        stream = conversation.stream(user, signal=controller.signal)
        try:
            while True:
                try:
                    timer.write(next(stream))
                except StopIteration as stop:
                    result: ToolLoopResult = stop.value
                    return result
        finally:
            stream.close()
            timer.end()

    options = conversation.options
    try:
        result = run_abortable(work, controller)
    except KeyboardInterrupt:
        stderr.write("[aborted]\n")
        return None
    except LlmError as exc:
        stderr.write(f"error[{exc.code}]: {exc.message}\n")
        return None
    response = result.response
    call_log.write(options=options, user=user, response=response, timer=timer)
    finish = response.finish
    if finish.failure is not None:
        if finish.kind == "aborted":
            stderr.write("[aborted]\n")
            return None
        if finish.failure.code == ErrorCode.MISSING_CREDENTIAL:
            message = missing_key_message(target) or finish.failure.message
            stderr.write(f"error[{finish.failure.code}]: {message}\n")
            return 2
        message = failure_message(finish.failure, target.key_hint)
        stderr.write(f"error[{finish.failure.code}]: {message}\n")
        return None
    stderr.write(summary_line(finish, response.usage) + "\n")
    return None
