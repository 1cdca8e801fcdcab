"""The ``dsh-llm`` command line (also ``python -m dsh_llm``).

Commands: ``demo`` (a scripted DeepSeek stream on a loopback server, read by the
real adapter: no key, no network), ``chat`` (stream one answer, logged;
``-c`` continues the last conversation), ``count`` (a prompt's input tokens,
counted by the provider), ``providers`` (the routes and their
models), ``models`` and ``aliases`` (the default model, short names),
``keys`` (stored API keys), ``logs`` (the logged calls), ``validate`` and
``trace`` (recorded streams), ``batch``, ``record`` and ``replay``.
``-`` as ``chat``'s PROMPT or as the FILE of ``validate``/``trace`` reads stdin
(chunks are read as UTF-8 bytes, as from a file).
Streamed text goes to stdout as it arrives, reasoning to stderr, a summary line to
stderr.

Exit status: 0 on success; 1 when the library reports an ``LlmError`` or a stream
ends with an ``error``/``aborted`` finish (printed as ``error[CODE]: message`` on
stderr, no traceback); 2 for usage errors, for a model that cannot be chosen
(nothing configured, an unknown route, a route without its key:
``error[MISSING_CREDENTIAL]: ...`` saying how to give one) and for unreadable
input (a chunk file, a composition file: ``error[PLUGIN_LOAD]: ...``); a
misspelt subcommand or flag is a usage error suggesting the closest one; 130
when interrupted (Ctrl-C
aborts the request through its signal, so the connection is closed cleanly).
A reader that goes away (``dsh-llm chat ... | head``) ends the command quietly
with status 1. Commands that talk to a model import the adapters only when they run, so
``--version`` and ``--help`` stay fast.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
from collections.abc import Callable
from collections.abc import Generator
from collections.abc import Iterable
from collections.abc import Sequence
from typing import TYPE_CHECKING
from typing import Final
from typing import cast

from dsh_llm._version import __version__
from dsh_llm.cli.console import chunk_sink
from dsh_llm.cli.console import count_of
from dsh_llm.cli.models import add_choice_arguments
from dsh_llm.cli.parser import Commands
from dsh_llm.cli.parser import SuggestingParser
from dsh_llm.cli.parser import add_command
from dsh_llm.cli.parser import add_fields_option
from dsh_llm.cli.parser import add_json_lines_option
from dsh_llm.cli.parser import add_max_tokens_option
from dsh_llm.cli.parser import add_prompt_argument
from dsh_llm.cli.parser import add_reasoning_effort_option
from dsh_llm.cli.parser import add_system_option
from dsh_llm.cli.parser import add_timeout_option
from dsh_llm.cli.parser import number
from dsh_llm.cli.targets import DEFAULT_CONFIG
from dsh_llm.cli.targets import add_config_option
from dsh_llm.cli.targets import require_utf8
from dsh_llm.cli.usage import UsageError
from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError
from dsh_llm.protocol import BlockStart
from dsh_llm.protocol import Finish
from dsh_llm.protocol import StreamChunk
from dsh_llm.serde import chunks_from_jsonl
from dsh_llm.serde import read_jsonl
from dsh_llm.signal import AbortController
from dsh_llm.trace import trace_stream
from dsh_llm.validator import validate_stream

if TYPE_CHECKING:
    from dsh_llm.attachments import AttachmentStore
    from dsh_llm.cli.chat import ChatRequest
    from dsh_llm.cli.logs import CallLog
    from dsh_llm.cli.logs import Continued
    from dsh_llm.cli.targets import Target
    from dsh_llm.observe.cost import PriceTable
    from dsh_llm.protocol import ImageBlock
    from dsh_llm.protocol import Message


EXIT_OK = 0
"""The command did what was asked."""
EXIT_LLM_ERROR = 1
"""The library reported an ``LlmError``, or the stream failed or was aborted."""
EXIT_USAGE = 2
"""The command cannot run as invoked, or its input cannot be read."""
EXIT_INTERRUPTED = 130
"""Ctrl-C ended the command."""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand.

    Each subcommand sets ``handler`` (``Callable[[argparse.Namespace], int]``)
    with ``set_defaults``; ``main`` calls it and returns its exit status.
    """
    parser = SuggestingParser(
        prog="dsh-llm",
        description=(
            "Stream any language model into one strict chunk protocol: "
            "block-start, deltas, block-end per block, then usage, then finish."
        ),
    )
    parser.add_argument("--version", action="version", version=f"dsh-llm {__version__}")
    # The subcommands' parsers are SuggestingParsers too (argparse makes them of
    # the parent's class); the adders only need an ArgumentParser's methods.
    commands = cast(
        "Commands", parser.add_subparsers(dest="command", metavar="COMMAND")
    )
    _add_demo_command(commands)
    _add_chat_command(commands)
    from dsh_llm.cli.count import add_parser as _add_count_command

    _add_count_command(commands)
    _add_providers_command(commands)
    from dsh_llm.cli.models import add_parsers as _add_model_commands

    _add_model_commands(commands)  # models, aliases
    from dsh_llm.cli.keys import add_parser as _add_keys_command

    _add_keys_command(commands)
    from dsh_llm.cli.logs import add_parser as _add_logs_command

    _add_logs_command(commands)
    _add_validate_command(commands)
    _add_trace_command(commands)
    from dsh_llm.cli.batch import add_parser as _add_batch_command

    _add_batch_command(commands)

    from dsh_llm.cli.kit import add_parsers as add_cassette_commands

    add_cassette_commands(commands)  # record, replay
    return parser


class _UnreadableInput(Exception):
    """A chunk file that cannot be opened, decoded or read as chunks."""


# The FILE argument that means standard input (``./-`` names a file ``-``).
_STDIN_PATH = "-"

_STDIN_NAME = "<stdin>"


def _input_name(path: str) -> str:
    """How messages and summaries name the input ``path``."""
    return _STDIN_NAME if path == _STDIN_PATH else path


def _recorded_chunks(path: str) -> Generator[StreamChunk, None, None]:
    """The chunks of JSON Lines file ``path`` (``-``: standard input, read as
    bytes so it is decoded as UTF-8 like a file); read problems become
    ``_UnreadableInput`` so they are told apart from protocol violations.

    Closing this generator closes the file (``yield from`` forwards the close);
    standard input stays open.
    """
    name = _input_name(path)
    try:
        if path == _STDIN_PATH:
            yield from chunks_from_jsonl(_stdin_lines())
        else:
            yield from read_jsonl(path)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise _UnreadableInput(f"error: cannot read {name}: {reason}") from exc
    except LlmError as exc:  # INVALID_CHUNK: the only code the readers raise
        raise _UnreadableInput(
            f"error[{exc.code}]: {name} is not JSON Lines of chunks: {exc.message}"
        ) from exc


def _stdin_lines() -> Iterable[bytes] | Iterable[str]:
    stdin = sys.stdin
    if stdin is None:
        raise OSError("there is no standard input")
    # The binary buffer, when there is one: the text layer would decode with the
    # locale's encoding instead of strict UTF-8.
    buffer: Iterable[bytes] | None = getattr(stdin, "buffer", None)
    return stdin if buffer is None else buffer


def _print_failure(code: str, message: str) -> int:
    print(f"error[{code}]: {message}", file=sys.stderr)
    return EXIT_LLM_ERROR


# --- demo ---------------------------------------------------------------------------


def _add_demo_command(commands: Commands) -> None:
    command = add_command(
        commands,
        "demo",
        _run_demo,
        help="stream a scripted DeepSeek answer through the real adapter "
        "(no key, no network)",
        description=(
            "Start a loopback server on 127.0.0.1 that speaks the DeepSeek wire "
            "format, stream its scripted answer (reasoning, text, a tool call, usage "
            "with cache hits) through the real DeepSeekAdapter over HTTP, and show "
            "the text live (reasoning on stderr), then the strict validation "
            "result, the assembled message and the usage. Needs no key and no "
            "network."
        ),
    )
    add_json_lines_option(command)


def _run_demo(args: argparse.Namespace) -> int:
    from dsh_llm.cli.demo import DEMO_PROMPT
    from dsh_llm.cli.demo import print_report
    from dsh_llm.cli.demo import run_demo
    from dsh_llm.cli.interrupt import run_abortable

    def announce(url: str) -> None:
        print(
            "dsh-llm demo: the real DeepSeekAdapter reads a scripted DeepSeek stream "
            f"from {url} (no key, no network)\nuser: {DEMO_PROMPT}\n",
            flush=True,
        )

    sink = chunk_sink(args.json)
    controller = AbortController()
    result = run_abortable(
        lambda: run_demo(
            sink,
            signal=controller.signal,
            announce=None if args.json else announce,
        ),
        controller,
    )
    failure = result.response.finish.failure
    if failure is not None:
        return _print_failure(failure.code, failure.message)
    if args.json:
        print(
            f"strict validation: passed ({count_of(result.chunks, 'chunk')}, "
            f"{count_of(result.blocks, 'block')})",
            file=sys.stderr,
        )
    else:
        print_report(result, sys.stdout)
    return EXIT_OK


# --- chat ---------------------------------------------------------------------------


def _add_chat_command(commands: Commands) -> None:
    command = add_command(
        commands,
        "chat",
        _run_chat,
        help="send one prompt and stream the answer",
        description=(
            "Send PROMPT (stdin when omitted or -) and stream the answer: text to "
            "stdout as it arrives, reasoning to stderr, tool calls as JSON lines on "
            "stdout, and "
            "a summary line (finish, usage) on stderr. The model is --base-url with "
            "--model (any OpenAI-compatible server; --wire responses speaks its "
            "Responses API), else a route of the "
            "composition file (--config, default ./dsh.yml when present; choose "
            "one with --provider), else DeepSeek with DEEPSEEK_API_KEY; --base-url "
            "without --model uses the server's only model. -i starts a session "
            "keeping the conversation (/exit or Ctrl-D ends it, Ctrl-C aborts the "
            "current answer). Exit 1 with "
            "error[CODE]: message when the call fails, 2 when no model can be "
            "chosen, 130 on Ctrl-C."
        ),
    )
    add_prompt_argument(command)
    add_choice_arguments(
        command,
        model="the model id (default: the route's first catalog model)",
        base_url="an OpenAI-compatible API root, e.g. http://127.0.0.1:8080/v1",
        wire="what the --base-url server is spoken to with: chat (POST "
        "/chat/completions, the default) or responses (POST /responses: OpenAI, "
        "vLLM, Ollama, LM Studio, OpenRouter)",
        api_key_env="environment variable holding the key (built-in DeepSeek "
        "route or --base-url; default DEEPSEEK_API_KEY for DeepSeek, none for "
        "--base-url)",
    )
    add_system_option(command)
    add_max_tokens_option(command)
    add_reasoning_effort_option(
        command, "reasoning effort the route offers (DeepSeek: off, low, high, max)"
    )
    command.add_argument(
        "--temperature", metavar="T", type=_temperature, help="sampling temperature"
    )
    command.add_argument(
        "--prices",
        metavar="FILE",
        help="a price table (YAML: prices per million tokens per model, "
        "docs/observability.md); the summary then shows the call's cost when "
        "its price is known",
    )
    add_timeout_option(command)
    add_fields_option(command)
    command.add_argument(
        "--schema",
        metavar="FILE",
        help="a JSON Schema file: ask for JSON following it, and check the answer",
    )
    command.add_argument(
        "-i",
        "--interactive",
        action="store_true",
        help="a session keeping the conversation (/exit or Ctrl-D ends it, "
        "Ctrl-C aborts the current answer)",
    )
    add_json_lines_option(command)
    command.add_argument(
        "-a",
        "--attach",
        metavar="FILE_OR_URL",
        action="append",
        dest="attachments",
        help="an image (PNG, JPEG, GIF, WebP; a file, or an http(s) URL fetched "
        "once, 20 MiB at most) sent with the prompt; repeatable",
    )
    command.add_argument(
        "-c",
        "--continue",
        action="store_true",
        dest="continue_conversation",
        help="continue the last logged conversation (its route, model and "
        "system prompt unless given)",
    )
    command.add_argument(
        "--cid",
        metavar="ID",
        help="continue the logged conversation ID (or a unique prefix of it)",
    )
    logging = command.add_mutually_exclusive_group()
    logging.add_argument("--no-log", action="store_true", help="do not log this call")
    logging.add_argument(
        "--log",
        action="store_true",
        help="log this call even when `dsh-llm logs off` turned logging off",
    )


def _temperature(text: str) -> float:
    value = number(text)
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text}")
    return value


def _run_chat(args: argparse.Namespace) -> int:
    from dsh_llm.cli.chat import ChatRequest
    from dsh_llm.cli.chat import provider_options
    from dsh_llm.cli.chat import read_schema
    from dsh_llm.cli.logs import CallLog
    from dsh_llm.cli.logs import load_conversation
    from dsh_llm.cli.logs import logging_on
    from dsh_llm.cli.models import choose_from
    from dsh_llm.cli.targets import open_target

    if args.interactive and (args.prompt is not None or args.json):
        raise UsageError("--interactive reads prompts itself: drop PROMPT and --json")
    continued: Continued | None = None
    if args.continue_conversation or args.cid is not None:
        continued = load_conversation(args.cid)
    log_calls = args.log or (not args.no_log and logging_on())
    if continued is not None and not log_calls:
        print(
            "dsh-llm: note: logging is off, so this turn will not be part of the "
            "conversation next time (dsh-llm logs on)",
            file=sys.stderr,
        )
    choice = choose_from(args, continued)
    call_log = CallLog(
        None if continued is None else continued.conversation_id,
        enabled=log_calls,
        base_url=choice.base_url,
    )
    extra_body = provider_options(args.options)
    response_format = read_schema(args.schema)
    prices = _read_prices(args.prices)
    history = () if continued is None else continued.messages
    store, images = _read_images(args.attachments or (), history, keep=log_calls)
    system = args.system
    if system is None and continued is not None:
        system = continued.system
    request = ChatRequest(
        history=history,
        images=images,
        system=system,
        max_tokens=args.max_tokens,
        reasoning_effort=args.reasoning_effort,
        temperature=args.temperature,
        response_format=response_format,
        extra_body=extra_body,
    )
    with open_target(args, choice) as target:
        if store is not None:
            _give_images(target, store)
        if args.interactive:
            from dsh_llm.cli.interactive import run_session

            return run_session(target, request, call_log)
        return _one_answer(args, target, request, prices, call_log)


def _read_images(
    sources: Sequence[str], history: Sequence[Message], *, keep: bool
) -> tuple[AttachmentStore | None, tuple[ImageBlock, ...]]:
    """The store the images are read from (``None`` when no message has one) and
    the blocks of ``-a``; the images of a logged call are kept on disk (so a
    continued conversation sends them again from there)."""
    from dsh_llm.cli.attach import image_store
    from dsh_llm.cli.attach import read_image
    from dsh_llm.protocol import ImageBlock

    earlier = any(
        isinstance(block, ImageBlock)
        for message in history
        for block in message.content
    )
    if not sources and not earlier:
        return None, ()
    store = image_store(keep or earlier)
    return store, tuple(read_image(source, store) for source in sources)


def _give_images(target: Target, store: AttachmentStore) -> None:
    """Let every adapter of the target's runtime read images from ``store``."""
    for route in target.runtime.registry.routes.values():
        if hasattr(type(route.adapter), "attachments"):
            route.adapter.attachments = store  # type: ignore[attr-defined]


def _one_answer(
    args: argparse.Namespace,
    target: Target,
    request: ChatRequest,
    prices: PriceTable | None,
    call_log: CallLog,
) -> int:
    from dsh_llm.cli.chat import read_prompt
    from dsh_llm.cli.chat import stream_chat
    from dsh_llm.cli.console import SilenceableSink
    from dsh_llm.cli.console import summary_line
    from dsh_llm.cli.hints import failure_message
    from dsh_llm.cli.hints import missing_key_message
    from dsh_llm.cli.interrupt import run_abortable
    from dsh_llm.cli.logs import CallTimer

    prompt = read_prompt(args.prompt, sys.stdin, sys.stderr)
    controller = AbortController()
    options = request.options(target, prompt, signal=controller.signal)
    sink = SilenceableSink(chunk_sink(args.json))
    timer = CallTimer(sink)
    outcome = run_abortable(
        lambda: stream_chat(target.runtime, options, timer),
        controller,
        # An adapter that ignores the abort is left running, silenced.
        on_abandon=sink.silence,
    )
    call_log.write(
        options=options, user=options.messages[-1], response=outcome, timer=timer
    )
    failure = outcome.finish.failure
    if failure is not None:
        if failure.code == ErrorCode.MISSING_CREDENTIAL:
            # The library's message is for Python callers ("pass api_key");
            # on the command line a key is exported or stored.
            message = missing_key_message(target) or failure.message
            print(f"error[{failure.code}]: {message}", file=sys.stderr)
            return EXIT_USAGE
        return _print_failure(failure.code, failure_message(failure, target.key_hint))
    if request.response_format is not None:
        from dsh_llm.structured import parse_json

        parse_json(outcome, request.response_format)  # INVALID_JSON_OUTPUT: exit 1
    if not args.json:
        line = summary_line(outcome.finish, outcome.usage)
        if prices is not None:
            from dsh_llm.observe.cost import format_cost

            cost = format_cost(
                prices.cost(outcome.usage, options.model, provider=options.provider)
            )
            if cost is not None:  # an unknown price says nothing, never a guess
                line += f"; cost: {cost}"
        print(line, file=sys.stderr)
    return EXIT_OK


def _read_prices(path: str | None) -> PriceTable | None:
    """``--prices FILE`` read (a usage error naming the problem when it cannot be)."""
    if path is None:
        return None
    from dsh_llm.observe.cost import PriceTable

    try:
        return PriceTable.from_file(path)
    except ValueError as exc:
        raise UsageError(f"--prices {path}: {exc}") from None


# --- providers ------------------------------------------------------------------------


def _add_providers_command(commands: Commands) -> None:
    command = add_command(
        commands,
        "providers",
        _run_providers,
        help="list the routes and their models",
        description=(
            "List the routes the composition file registers (--config, default "
            f"./{DEFAULT_CONFIG} when present), or the built-in routes, each with "
            "the models its catalog advertises, then the composition's failover "
            "aliases (llm-failover), each a route chat --provider takes."
        ),
    )
    add_config_option(command)


def _run_providers(args: argparse.Namespace) -> int:
    from dsh_llm.adapters import builtin_family
    from dsh_llm.cli.targets import open_routes

    status = EXIT_OK
    with open_routes(config=args.config) as routes:
        builtin = routes.origin == "built-in"
        if builtin:
            print(
                f"no {DEFAULT_CONFIG} here: the built-in routes (choose one with "
                "--provider ROUTE). Any OpenAI-compatible server works with: "
                "dsh-llm chat --base-url URL --model NAME (add --wire responses "
                "for its POST /responses API)",
                file=sys.stderr,
            )
        runtime = routes.runtime
        for info in runtime.list_providers():
            print(f"{info.id}  ({info.name}, {routes.origin})")
            row = builtin_family(info.id) if builtin else None
            if row is not None and row.server_catalog:
                # Listing would ask a server that need not be running.
                print("  (the server lists its models: pass --model to chat)")
                continue
            try:
                models = runtime.list_models(info.id)
            except LlmError as exc:
                status = _print_failure(exc.code, f'route "{info.id}": {exc.message}')
                continue
            width = max((len(model.id) for model in models), default=0)
            for model in models:
                line = f"  {model.id:<{width}}  {model.name}"
                modalities = model.input_modalities
                if modalities is not None and modalities != ("text",):
                    line += f"  [{', '.join(modalities)}]"
                print(line.rstrip())
            if not models:
                print("  (no models listed; pass --model to chat)")
        for route, why in routes.unavailable:
            row = builtin_family(route)
            name = route if row is None else row.display_name
            print(f"{route}  ({name}, {routes.origin})")
            print(f"  (not available here: {why})")
        for alias, members in routes.failover.items():
            tried = ", ".join(r if m is None else f"{r}/{m}" for r, m in members)
            print(f"{alias}  (failover over {tried}; {routes.origin})")
    return status


def _add_chunk_file_arguments(command: argparse.ArgumentParser) -> None:
    """FILE and ``--lenient``, of ``validate`` and ``trace``."""
    command.add_argument(
        "file", metavar="FILE.jsonl", help="the recorded stream (-: read stdin)"
    )
    command.add_argument(
        "--lenient",
        action="store_true",
        help="check the looser TypeScript rules (blocks may interleave)",
    )


def _add_validate_command(commands: Commands) -> None:
    command = add_command(
        commands,
        "validate",
        _run_validate,
        help="check a recorded chunk stream (JSON Lines) against the protocol",
        description=(
            "Check a recorded chunk stream, one JSON chunk per line (UTF-8; FILE "
            "- reads stdin), against the "
            "protocol's rules (docs/protocol.md; strict by default). Exit 0 "
            "and print a one-line summary when it is valid, 1 with the first "
            "violation (error[INVARIANT]: ...) when not, 2 when the file cannot "
            "be read as JSON Lines of chunks."
        ),
    )
    _add_chunk_file_arguments(command)


def _run_validate(args: argparse.Namespace) -> int:
    total = blocks = 0
    last: StreamChunk | None = None
    mode = "lenient" if args.lenient else "strict"
    with contextlib.closing(_recorded_chunks(args.file)) as chunks:
        for chunk in validate_stream(chunks, strict=not args.lenient):
            total += 1
            blocks += isinstance(chunk, BlockStart)
            last = chunk
    finish = last.reason.kind if isinstance(last, Finish) else "none"
    print(
        f"{_input_name(args.file)}: valid ({mode}): {count_of(total, 'chunk')}, "
        f"{count_of(blocks, 'block')}, finish {finish}"
    )
    return EXIT_OK


def _add_trace_command(commands: Commands) -> None:
    command = add_command(
        commands,
        "trace",
        _run_trace,
        help="print a recorded chunk stream line by line and check its order",
        description=(
            "Print each chunk of a recorded stream (JSON Lines; FILE - reads "
            "stdin) to stdout as "
            "'[label] #n <json>' (n from 1), then '[label] total chunks N, order "
            "check passed'. Exit codes as for validate: 1 with the violation on "
            "stderr after the offending chunk's line, 2 for an unreadable file."
        ),
    )
    _add_chunk_file_arguments(command)
    command.add_argument(
        "--label",
        help="the bracketed label of each line (default: the file name, or stdin)",
    )


def _run_trace(args: argparse.Namespace) -> int:
    if args.label is not None:
        label = args.label
    elif args.file == _STDIN_PATH:
        label = "stdin"
    else:
        label = os.path.basename(args.file)
    with contextlib.closing(_recorded_chunks(args.file)) as chunks:
        for _ in trace_stream(label, chunks, out=sys.stdout, strict=not args.lenient):
            pass
    return EXIT_OK


def _tolerate_unencodable_output() -> None:
    """Let stdout and stderr write what their encoding cannot hold as escapes.

    A model's text may hold characters the console's encoding lacks (an emoji
    on a cp1252 or ASCII console) or half of a split surrogate pair; either
    would otherwise end the stream with a ``UnicodeEncodeError``.
    """
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return its exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Callable[[argparse.Namespace], int] | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return EXIT_OK
    if sys.stdout is None or sys.stderr is None:
        # Started with a closed descriptor: nothing could be shown. Report on
        # whichever stream is left.
        if sys.stderr is not None:
            print("error: there is no standard output", file=sys.stderr)
        return EXIT_USAGE
    _tolerate_unencodable_output()
    try:
        _require_utf8_arguments(args)
        return handler(args)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except _UnreadableInput as exc:
        print(exc, file=sys.stderr)
        return EXIT_USAGE
    except LlmError as exc:
        status = _print_failure(exc.code, exc.message)
        # A composition that cannot be loaded is unreadable input, not a failed call.
        return EXIT_USAGE if exc.code == ErrorCode.PLUGIN_LOAD else status
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (``dsh-llm chat ... | head``): stop quietly, and
        # keep the interpreter's final flush from failing on the closed pipe.
        _discard_stdout()
        return EXIT_LLM_ERROR
    except OSError as exc:
        # Output that cannot be written (a full disk, a device error): say so
        # without a traceback; what is still buffered cannot be written either.
        _discard_stdout()
        print(f"error: cannot write output: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_LLM_ERROR


def _discard_stdout() -> None:
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


# Paths may hold any bytes the file system allows; every other argument is
# text for a request or a message.
_PATH_ARGUMENTS: Final = frozenset(
    {"file", "config", "requests_file", "results_file", "prices"}
)


def _require_utf8_arguments(args: argparse.Namespace) -> None:
    for name, value in vars(args).items():
        if isinstance(value, str) and name not in _PATH_ARGUMENTS:
            what = "PROMPT" if name == "prompt" else f"--{name.replace('_', '-')}"
            require_utf8(value, what)
