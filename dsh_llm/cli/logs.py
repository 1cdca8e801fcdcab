"""``dsh-llm logs``, and what ``chat`` writes there and reads back (``-c``).

Contracts callers may rely on:

- The log is ``logs.db`` in the user's data directory
  (``dsh_llm.cli.userdirs``; ``DSH_LLM_USER_DIR`` moves it); ``dsh_llm.cli.logdb``
  owns its schema and its safety under concurrent processes.
- Logging is on unless ``dsh-llm logs off`` left the file ``logs-off`` in the
  config directory (``logs on`` removes it); ``chat --no-log`` and ``chat --log``
  decide for one command.
- ``CallLog.write`` never raises and never changes the command's outcome: a call
  that cannot be logged is one warning line on stderr
  (``dsh-llm: warning: the call was not logged: ...``).
- ``load_conversation`` reads what ``chat -c``/``--cid`` continues: the
  conversation's successful turns as messages (with each answer's replay state),
  its last route, model, server and system prompt. It raises ``UsageError`` when
  there is nothing to continue or the log cannot be read.
- ``dsh-llm logs`` prints the last calls (``-n``, default 3; ``0``: all),
  oldest first, as text or (``--json``) one JSON array; ``-q`` keeps the calls
  whose prompt, system prompt, answer or reasoning contains every word given;
  ``--cid`` one conversation's. ``logs status`` and ``logs path`` say where the
  log is and whether it is on.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any
from typing import Final
from typing import TextIO

import attrs

from dsh_llm.cli.console import ChunkSink
from dsh_llm.cli.console import summary_line
from dsh_llm.cli.logdb import LOGS_DB
from dsh_llm.cli.logdb import CallRecord
from dsh_llm.cli.logdb import LogError
from dsh_llm.cli.logdb import LoggedCall
from dsh_llm.cli.logdb import LogStore
from dsh_llm.cli.logdb import new_id
from dsh_llm.cli.logdb import utc_now
from dsh_llm.cli.parser import Commands
from dsh_llm.cli.parser import add_command
from dsh_llm.cli.parser import add_listing_command
from dsh_llm.cli.usage import UsageError
from dsh_llm.cli.userdirs import config_dir
from dsh_llm.cli.userdirs import data_dir
from dsh_llm.errors import LlmError
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import ImageBlock
from dsh_llm.protocol import Message
from dsh_llm.protocol import StreamChunk
from dsh_llm.serde import message_from_dict
from dsh_llm.serde import options_to_dict

if TYPE_CHECKING:
    from dsh_llm.assembler import AssembledResponse


LOGS_OFF_FILE: Final = "logs-off"
"""The file in the config directory whose presence turns logging off."""
DEFAULT_COUNT: Final = 3
"""How many calls ``dsh-llm logs`` shows without ``-n``."""

# Request fields the log leaves out: the messages and system prompt have columns
# of their own, and headers are where a caller could put a credential.
_NOT_LOGGED: Final = frozenset(
    {"messages", "system", "provider", "model", "extraHeaders"}
)


def logs_path() -> Path:
    """Where the log database is."""
    return data_dir() / LOGS_DB


def _off_marker() -> Path:
    return config_dir() / LOGS_OFF_FILE


def logging_on() -> bool:
    """Whether ``chat`` logs its calls by default (``dsh-llm logs on|off``)."""
    return not _off_marker().exists()


def logged_options(options: GenerateOptions) -> dict[str, Any]:
    """The request's options as the log keeps them (no messages, no headers)."""
    return {
        key: value
        for key, value in options_to_dict(options).items()
        if key not in _NOT_LOGGED
    }


class CallTimer:
    """A ``ChunkSink`` in front of ``inner`` that times the call: started when
    made, the first chunk when it passes."""

    def __init__(self, inner: ChunkSink) -> None:
        self._inner = inner
        self.started_at: str = utc_now()
        """When the call started (ISO 8601, UTC)."""
        self._start = time.monotonic()
        self._first: float | None = None

    def write(self, chunk: StreamChunk) -> None:
        """Note the first chunk's time, then pass ``chunk`` on."""
        if self._first is None:
            self._first = time.monotonic()
        self._inner.write(chunk)

    def end(self) -> None:
        """End ``inner``."""
        self._inner.end()

    @property
    def first_chunk_ms(self) -> float | None:
        """Milliseconds from the start to the first chunk (``None``: none yet)."""
        return None if self._first is None else (self._first - self._start) * 1000

    def elapsed_ms(self) -> float:
        """Milliseconds since the start."""
        return (time.monotonic() - self._start) * 1000


class CallLog:
    """The calls of one ``chat`` command, logged in one conversation.

    Args:
        conversation_id: The conversation continued (``None``: a new one).
        enabled: Whether to write at all.
        base_url: The ``--base-url`` server the calls go to, if any (logged
            without credentials).
        stderr: Where a failure to log is reported (default ``sys.stderr``).
    """

    def __init__(
        self,
        conversation_id: str | None = None,
        *,
        enabled: bool = True,
        base_url: str | None = None,
        stderr: TextIO | None = None,
    ) -> None:
        self.conversation_id = new_id() if conversation_id is None else conversation_id
        """The conversation the calls join."""
        self.enabled = enabled
        """Whether calls are written."""
        self.base_url = base_url
        """The ``--base-url`` server, if any."""
        self._stderr = stderr

    def write(
        self,
        *,
        options: GenerateOptions,
        user: Message,
        response: AssembledResponse,
        timer: CallTimer,
    ) -> None:
        """Log one call (see the module docstring: never raises).

        Args:
            options: The request (its route, model, system prompt, options).
            user: The user message of this turn.
            response: The answer.
            timer: The call's timer.
        """
        if not self.enabled:
            return
        try:
            base_url = self.base_url
            if base_url is not None:
                from dsh_llm.transport.call import redact_url

                base_url = redact_url(base_url)
            record = CallRecord(
                conversation_id=self.conversation_id,
                provider=options.provider,
                model=options.model,
                prompt=user.text,
                system=options.system,
                options=logged_options(options),
                user_message=user,
                response=response,
                started_at=timer.started_at,
                duration_ms=timer.elapsed_ms(),
                first_chunk_ms=timer.first_chunk_ms,
                base_url=base_url,
            )
            with LogStore(logs_path()) as store:
                store.add(record)
        except (LogError, LlmError, OSError, ValueError, TypeError) as exc:
            stderr = sys.stderr if self._stderr is None else self._stderr
            print(f"dsh-llm: warning: the call was not logged: {exc}", file=stderr)


@attrs.frozen(kw_only=True)
class Continued:
    """A logged conversation to continue."""

    conversation_id: str
    """Its id."""
    messages: tuple[Message, ...]
    """Its successful turns, oldest first (user, then assistant, per turn)."""
    provider: str
    """The route of its last call."""
    model: str
    """The model of its last call."""
    base_url: str | None
    """The ``--base-url`` server of its last call, if any."""
    system: str | None
    """The system prompt of its last call."""


def load_conversation(cid: str | None) -> Continued:
    """The conversation ``cid`` (its id or a unique prefix), else (``None``) the
    conversation of the newest logged call.

    Raises:
        UsageError: when the log is missing or unreadable, or holds no such
            conversation.
    """
    path = logs_path()
    try:
        with LogStore(path, create=False) as store:
            found = (
                store.last_conversation_id()
                if cid is None
                else store.find_conversation(cid)
            )
            if found is None:
                if cid is None:
                    raise UsageError(f"no conversation to continue: {path} is empty")
                raise UsageError(f"no conversation {cid!r} in {path}")
            calls = store.calls(conversation_id=found)
            messages = store.conversation(found)
    except LogError as exc:
        raise UsageError(f"cannot continue a conversation: {exc}") from None
    last = calls[-1]
    return Continued(
        conversation_id=found,
        messages=messages,
        provider=last.provider,
        model=last.model,
        base_url=last.base_url,
        system=last.system,
    )


# --- the command ------------------------------------------------------------------


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def _add_list_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-n",
        "--count",
        metavar="N",
        type=_count,
        default=DEFAULT_COUNT,
        help=f"how many calls, newest last (default {DEFAULT_COUNT}; 0: all)",
    )
    parser.add_argument(
        "-q",
        "--query",
        metavar="WORDS",
        help="only calls whose prompt, system prompt, answer or reasoning "
        "contains every word",
    )
    parser.add_argument(
        "--cid", metavar="ID", help="only this conversation (its id or a prefix)"
    )
    parser.add_argument(
        "--json", action="store_true", help="print the calls as one JSON array"
    )


def add_parser(commands: Commands) -> None:
    """Add ``logs`` (with ``list``, ``on``, ``off``, ``status``, ``path``)."""
    actions = add_listing_command(
        commands,
        "logs",
        _run_list,
        help="show the logged calls; turn logging on or off",
        description=(
            "Every chat call is logged in a SQLite database in your data "
            "directory (`dsh-llm logs path`): prompt, system prompt, options, "
            "the answer's blocks, usage, finish, timings, route and model; never "
            "a key. Without ACTION, print the last calls (-n), oldest first."
        ),
        dest="logs_command",
        list_help="print the last calls (the default)",
        options=_add_list_options,
    )
    add_command(actions, "on", _run_on, help="log chat calls (the default)")
    add_command(actions, "off", _run_off, help="stop logging chat calls")
    add_command(
        actions,
        "status",
        _run_status,
        help="whether logging is on, where, and how many calls",
    )
    add_command(actions, "path", _run_path, help="print the database's path")


def _open_for_reading() -> LogStore | None:
    path = logs_path()
    if not path.is_file():
        return None
    try:
        return LogStore(path, create=False)
    except LogError as exc:
        raise UsageError(str(exc)) from None


def _run_list(args: argparse.Namespace) -> int:
    store = _open_for_reading()
    calls: tuple[LoggedCall, ...] = ()
    if store is not None:
        with store:
            conversation = None
            try:
                if args.cid is not None:
                    conversation = store.find_conversation(args.cid)
                    if conversation is None:
                        raise UsageError(
                            f"no conversation {args.cid!r} in {store.path}"
                        )
                calls = store.calls(
                    limit=args.count or None,
                    query=tuple((args.query or "").split()),
                    conversation_id=conversation,
                )
            except LogError as exc:
                raise UsageError(str(exc)) from None
    if args.json:
        print(json.dumps([call.to_json() for call in calls], indent=2))
        return 0
    if not calls:
        print("no calls logged" + (" match" if args.query else ""), file=sys.stderr)
        return 0
    for position, call in enumerate(calls):
        if position:
            print()
        _print_call(call, sys.stdout)
    return 0


def _seconds(ms: float | None) -> str:
    return "?" if ms is None else f"{ms / 1000:.2f} s"


def _images(call: LoggedCall) -> list[str]:
    try:
        message = message_from_dict(call.user_message)
    except LlmError:
        return []
    labels = []
    for block in message.content:
        if isinstance(block, ImageBlock):
            image = block.attachment
            name = f" {image.name}" if image.name else ""
            labels.append(
                f"[image{name}: {image.media_type} {image.width}x{image.height}]"
            )
    return labels


def _print_call(call: LoggedCall, out: TextIO) -> None:
    where = call.provider + (f" at {call.base_url}" if call.base_url else "")
    out.write(f"# {call.started_at}  {where} / {call.model}\n")
    out.write(f"conversation {call.conversation_id}, call {call.id}\n\n")
    out.write("## Prompt\n\n" + call.prompt.rstrip("\n") + "\n")
    for label in _images(call):
        out.write(label + "\n")
    if call.system:
        out.write("\n## System\n\n" + call.system.rstrip("\n") + "\n")
    if call.options:
        out.write("\n## Options\n\n" + json.dumps(call.options) + "\n")
    out.write("\n## Response\n\n")
    if call.reasoning:
        out.write("[reasoning] " + call.reasoning.rstrip("\n") + "\n")
    if call.response:
        out.write(call.response.rstrip("\n") + "\n")
    try:
        finish = call.finish_reason()
        line = summary_line(finish, call.token_usage())
    except LlmError:
        finish = None
        line = f"finish {call.finish.get('kind')}"
    if finish is not None and finish.failure is not None:
        line += f" ({finish.failure.code}: {finish.failure.message})"
    timing = _seconds(call.duration_ms)
    if call.first_chunk_ms is not None:
        timing += f", first chunk after {_seconds(call.first_chunk_ms)}"
    out.write(f"\n{line}; {timing}\n")


def _run_on(args: argparse.Namespace) -> int:
    marker = _off_marker()
    try:
        marker.unlink(missing_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot remove {marker}: {exc.strerror or exc}") from None
    print(f"logging is on: {logs_path()}", file=sys.stderr)
    return 0


def _run_off(args: argparse.Namespace) -> int:
    marker = _off_marker()
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
    except OSError as exc:
        raise UsageError(f"cannot write {marker}: {exc.strerror or exc}") from None
    print("logging is off (dsh-llm logs on turns it back on)", file=sys.stderr)
    return 0


def _run_status(args: argparse.Namespace) -> int:
    path = logs_path()
    print(f"logging is {'on' if logging_on() else 'off'}")
    store = _open_for_reading()
    if store is None:
        print(f"database: {path} (not created yet)")
        return 0
    with store:
        try:
            count = store.count()
            version = store.version
        except LogError as exc:
            raise UsageError(str(exc)) from None
    print(f"database: {path} (schema version {version})")
    print(f"calls: {count}")
    return 0


def _run_path(args: argparse.Namespace) -> int:
    print(logs_path())
    return 0
