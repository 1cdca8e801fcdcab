"""The command line's ``argparse`` parser, which suggests the closest name.

Contracts callers may rely on:

- ``SuggestingParser`` is an ``argparse.ArgumentParser`` (its subcommands' parsers
  are too) that adds ``did you mean ...?`` to argparse's own errors, using
  ``difflib``'s closest match: a misspelt subcommand or choice (``dsh-llm chta``,
  ``--wire respones``) through argparse's "invalid choice" path, and a misspelt
  flag (``--modle``) by the flags of the (sub)command it was given to.
- Nothing else changes: the same usage line, the same exit status 2.
- ``listing_actions`` gives a command ACTION subcommands whose default is
  ``list`` (``logs``, ``models``, ``aliases``).
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


def listing_actions(
    command: argparse.ArgumentParser,
    *,
    dest: str,
    list_help: str,
    options: Callable[[argparse.ArgumentParser], None],
    handler: Callable[[argparse.Namespace], int],
) -> argparse._SubParsersAction[argparse.ArgumentParser]:
    """Give ``command`` ACTION subcommands (named in ``dest``) of which ``list``
    is the default: ``options`` adds the listing's flags to the command and to
    ``list``, and both run ``handler``. Returns the actions, for the others."""
    options(command)
    command.set_defaults(handler=handler)
    actions = command.add_subparsers(dest=dest, metavar="ACTION")
    listing = actions.add_parser("list", help=list_help)
    options(listing)
    listing.set_defaults(handler=handler)
    return actions


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
