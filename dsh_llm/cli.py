"""The ``dsh-llm`` command line (also ``python -m dsh_llm``).

Exit status: 0 on success, 1 when the library reports an ``LlmError`` (printed as
``error[CODE]: message`` on stderr, no traceback), 2 for usage errors and
unreadable input, 130 when interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Generator, Sequence
from typing import TypeAlias

from dsh_llm._version import __version__
from dsh_llm.errors import ErrorCode, LlmError
from dsh_llm.protocol import BlockStart, Finish, StreamChunk
from dsh_llm.serde import read_jsonl
from dsh_llm.trace import trace_stream
from dsh_llm.validator import validate_stream

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
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_validate_command(commands)
    _add_trace_command(commands)
    return parser


_Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


class _UnreadableInput(Exception):
    """A chunk file that cannot be opened, decoded or read as chunks."""


def _recorded_chunks(path: str) -> Generator[StreamChunk, None, None]:
    """The chunks of JSON Lines file ``path``; read problems become
    ``_UnreadableInput`` so they are told apart from protocol violations.

    Closing this generator closes the file (``yield from`` forwards the close).
    """
    try:
        yield from read_jsonl(path)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise _UnreadableInput(f"error: cannot read {path}: {reason}") from exc
    except LlmError as exc:
        if exc.code != ErrorCode.INVALID_CHUNK:
            raise
        raise _UnreadableInput(
            f"error[{exc.code}]: {path} is not JSON Lines of chunks: {exc.message}"
        ) from exc


def _add_validate_command(commands: _Commands) -> None:
    command = commands.add_parser(
        "validate",
        help="check a recorded chunk stream (JSON Lines) against the protocol",
        description=(
            "Check a recorded chunk stream, one JSON chunk per line, against the "
            "protocol's rules (DESIGN.md section 2; strict by default). Exit 0 "
            "and print a one-line summary when it is valid, 1 with the first "
            "violation (error[INVARIANT]: ...) when not, 2 when the file cannot "
            "be read as JSON Lines of chunks."
        ),
    )
    command.add_argument("file", metavar="FILE.jsonl", help="the recorded stream")
    command.add_argument(
        "--lenient",
        action="store_true",
        help="check the looser TypeScript rules (blocks may interleave)",
    )
    command.set_defaults(handler=_run_validate)


def _run_validate(args: argparse.Namespace) -> int:
    total = blocks = 0
    last: StreamChunk | None = None
    mode = "lenient" if args.lenient else "strict"
    try:
        with contextlib.closing(_recorded_chunks(args.file)) as chunks:
            for chunk in validate_stream(chunks, strict=not args.lenient):
                total += 1
                blocks += isinstance(chunk, BlockStart)
                last = chunk
    except _UnreadableInput as exc:
        print(exc, file=sys.stderr)
        return EXIT_USAGE
    finish = last.reason.kind if isinstance(last, Finish) else "none"
    print(
        f"{args.file}: valid ({mode}): {total} chunks, {blocks} blocks, finish {finish}"
    )
    return EXIT_OK


def _add_trace_command(commands: _Commands) -> None:
    command = commands.add_parser(
        "trace",
        help="print a recorded chunk stream line by line and check its order",
        description=(
            "Print each chunk of a recorded stream (JSON Lines) to stdout as "
            "'[label] #n <json>' (n from 1), then '[label] total chunks N, order "
            "check passed'. Exit codes as for validate: 1 with the violation on "
            "stderr after the offending chunk's line, 2 for an unreadable file."
        ),
    )
    command.add_argument("file", metavar="FILE.jsonl", help="the recorded stream")
    command.add_argument(
        "--label", help="the bracketed label of each line (default: the file name)"
    )
    command.add_argument(
        "--lenient",
        action="store_true",
        help="check the looser TypeScript rules (blocks may interleave)",
    )
    command.set_defaults(handler=_run_trace)


def _run_trace(args: argparse.Namespace) -> int:
    label = args.label if args.label is not None else os.path.basename(args.file)
    try:
        with contextlib.closing(_recorded_chunks(args.file)) as chunks:
            for _ in trace_stream(
                label, chunks, out=sys.stdout, strict=not args.lenient
            ):
                pass
    except _UnreadableInput as exc:
        print(exc, file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


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
