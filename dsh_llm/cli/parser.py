"""The command line's ``argparse`` parser, which suggests the closest name.

Contracts callers may rely on:

- ``SuggestingParser`` is an ``argparse.ArgumentParser`` (its subcommands' parsers
  are too) that adds ``did you mean ...?`` to argparse's own errors, using
  ``difflib``'s closest match: a misspelt subcommand or choice (``dsh-llm chta``,
  ``--wire respones``) through argparse's "invalid choice" path, and a misspelt
  flag (``--modle``) by the flags of the (sub)command it was given to.
- Nothing else changes: the same usage line, the same exit status 2.
- ``add_command`` adds a subcommand whose ``handler`` default is what it runs
  (``dsh_llm.cli.main`` calls it); ``add_listing_command`` one whose ACTION
  subcommands default to ``list`` (``logs``, ``models``, ``aliases``, ``keys``);
  ``add_json_lines_option`` the ``--json`` of the commands that stream, and the
  other ``add_..._option`` the flags of a request (``chat``, ``count``, ``record``).
- The argument types the subcommands share (``positive_int``, ``non_empty``,
  ``number``, ``positive_number``, ``positive_seconds``) raise
  ``argparse.ArgumentTypeError`` with the value in the message, so argparse
  reports it against its flag.
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Callable
from collections.abc import Sequence
from typing import Any
from typing import TypeAlias

Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
"""Where subcommands are added (what ``add_subparsers`` returns)."""

Handler: TypeAlias = Callable[[argparse.Namespace], int]
"""What a subcommand runs: its parsed arguments in, the exit status out."""


def closest(word: str, candidates: Sequence[str]) -> str | None:
    """The candidate most like ``word`` (``difflib``'s ratio, at least 0.6)."""
    found = difflib.get_close_matches(word, candidates, n=1)
    return found[0] if found else None


class SuggestingParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors suggest the closest name (see the module
    docstring)."""

    # argparse's "invalid choice" path: the one place a choice, a subcommand
    # included, is checked.
    def _check_value(self, action: argparse.Action, value: Any) -> None:
        choices = action.choices
        if choices is not None and value not in choices and isinstance(value, str):
            names = [str(choice) for choice in choices]
            near = closest(value, names)
            if near is not None:
                listed = ", ".join(repr(name) for name in names)
                raise argparse.ArgumentError(
                    action,
                    f"invalid choice: {value!r}; did you mean {near!r}? "
                    f"(choose from {listed})",
                )
        super()._check_value(action, value)

    def parse_args(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        namespace: argparse.Namespace | None = None,
    ) -> argparse.Namespace:
        """Parse like ``ArgumentParser.parse_args``; an unrecognised flag is
        reported by the (sub)command that got it, with the closest flag it has."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            parser = self._chosen(parsed)
            message = f"unrecognized arguments: {' '.join(extras)}"
            flags = parser._long_flags()
            for extra in extras:
                if extra.startswith("--"):
                    near = closest(extra.partition("=")[0], flags)
                    if near is not None:
                        message += f"; did you mean {near}?"
                        break
            parser.error(message)
        return parsed

    def _chosen(self, parsed: argparse.Namespace) -> SuggestingParser:
        """The innermost (sub)command ``parsed`` went to."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                name = getattr(parsed, action.dest, None)
                sub = action.choices.get(name) if isinstance(name, str) else None
                if isinstance(sub, SuggestingParser):
                    return sub._chosen(parsed)
        return self

    def _long_flags(self) -> list[str]:
        return [
            flag
            for action in self._actions
            for flag in action.option_strings
            if flag.startswith("--")
        ]


def add_command(
    commands: Commands,
    name: str,
    handler: Handler,
    *,
    help: str,
    description: str | None = None,
) -> argparse.ArgumentParser:
    """Add the subcommand ``name`` that runs ``handler``; returns its parser, for
    its arguments."""
    command = commands.add_parser(name, help=help, description=description)
    command.set_defaults(handler=handler)
    return command


def add_listing_command(
    commands: Commands,
    name: str,
    handler: Handler,
    *,
    help: str,
    description: str,
    dest: str,
    list_help: str,
    options: Callable[[argparse.ArgumentParser], None] | None = None,
) -> Commands:
    """Add the subcommand ``name`` with ACTION subcommands (named in ``dest``) of
    which ``list`` is the default: both run ``handler``, and ``options`` adds the
    listing's flags to both. Returns the actions, for the others."""
    command = add_command(commands, name, handler, help=help, description=description)
    if options is not None:
        options(command)
    actions = command.add_subparsers(dest=dest, metavar="ACTION")
    listing = add_command(actions, "list", handler, help=list_help)
    if options is not None:
        options(listing)
    return actions


def add_json_lines_option(command: argparse.ArgumentParser) -> None:
    """Add ``--json`` to a command that streams (``args.json``: show the chunks
    with ``dsh_llm.cli.console.chunk_sink(True)``)."""
    command.add_argument(
        "--json",
        action="store_true",
        help="write the chunks as JSON Lines to stdout instead",
    )


def add_prompt_argument(command: argparse.ArgumentParser) -> None:
    """Add the optional PROMPT of a command that reads stdin without it."""
    command.add_argument(
        "prompt",
        nargs="?",
        metavar="PROMPT",
        help="the prompt (omitted or -: read stdin)",
    )


def add_system_option(command: argparse.ArgumentParser) -> None:
    """Add ``--system TEXT``."""
    command.add_argument("--system", metavar="TEXT", help="the system prompt")


def add_max_tokens_option(command: argparse.ArgumentParser) -> None:
    """Add ``--max-tokens N``."""
    command.add_argument(
        "--max-tokens", metavar="N", type=positive_int, help="output cap in tokens"
    )


def add_reasoning_effort_option(command: argparse.ArgumentParser, help: str) -> None:
    """Add ``--reasoning-effort EFFORT``; ``help`` says what it does there."""
    command.add_argument(
        "--reasoning-effort", metavar="EFFORT", type=non_empty, help=help
    )


def add_timeout_option(command: argparse.ArgumentParser) -> None:
    """Add ``--timeout SECONDS`` (``args.timeout``)."""
    command.add_argument(
        "--timeout",
        metavar="SECONDS",
        type=positive_seconds,
        help="longest whole call (built-in route and --base-url)",
    )


def add_fields_option(command: argparse.ArgumentParser) -> None:
    """Add ``-o KEY=VALUE`` (``args.options``, a list; read it with
    ``dsh_llm.cli.chat.provider_options``)."""
    command.add_argument(
        "-o",
        "--option",
        metavar="KEY=VALUE",
        action="append",
        dest="options",
        help="a provider field sent as is in the request body (VALUE as JSON "
        "when it parses, else a string); repeatable",
    )


# --- argument types ------------------------------------------------------------------


def number(text: str) -> float:
    """``text`` as a float (``inf`` and ``nan`` included: the caller bounds it)."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def positive_int(text: str) -> int:
    """An integer >= 1 (a token cap, a concurrency)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def positive_number(text: str) -> float:
    """A finite number > 0."""
    value = number(text)
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def positive_seconds(text: str) -> float:
    """A finite number of seconds > 0 (a timeout)."""
    value = number(text)
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {text}")
    return value


def non_empty(text: str) -> str:
    """Any string but the empty one (a model id, a provider route)."""
    if not text:
        raise argparse.ArgumentTypeError("must not be empty")
    return text
