"""The ``dsh-llm`` command line (also ``python -m dsh_llm``).

Exit status: 0 on success, 1 when the library reports an ``LlmError`` (printed as
``error[CODE]: message`` on stderr, no traceback), 2 for usage errors and
unreadable input, 130 when interrupted.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from dsh_llm._version import __version__
from dsh_llm.errors import LlmError

__all__ = ["build_parser", "main"]

EXIT_OK = 0
EXIT_LLM_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand.

    Each subcommand sets ``handler`` (``Callable[[argparse.Namespace], int]``)
    with ``set_defaults``; ``main`` calls it and returns its exit status.
    """
    parser = argparse.ArgumentParser(
        prog="dsh-llm",
        description=(
            "Stream any language model into one strict chunk protocol: "
            "block-start, deltas, block-end per block, then usage, then finish."
        ),
    )
    parser.add_argument("--version", action="version", version=f"dsh-llm {__version__}")
    parser.add_subparsers(dest="command", metavar="COMMAND")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return its exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Callable[[argparse.Namespace], int] | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return EXIT_OK
    try:
        return handler(args)
    except LlmError as exc:
        print(f"error[{exc.code}]: {exc.message}", file=sys.stderr)
        return EXIT_LLM_ERROR
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
