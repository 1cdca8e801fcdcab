"""``dsh-llm record`` and ``dsh-llm replay``: cassettes from the command line.

``add_parsers(commands)`` adds both subcommands to the CLI's parser (each sets
``handler``, as the other subcommands do). Contracts callers may rely on:

- ``record`` sends PROMPT through a recording proxy (``dsh_llm.testing.recorder``)
  to ``--base-url`` (an ``OpenAICompatAdapter``; ``--model`` required, a key only
  when ``--api-key-env`` names one) or to the built-in ``deepseek-official``
  route (key from ``DEEPSEEK_API_KEY`` or ``--api-key-env``, ``DEEPSEEK_BASE_URL``
  honoured), streams the answer as ``chat`` does (text on stdout, reasoning on
  stderr, ``--json`` for JSON Lines), writes the cassette to ``-o`` (secrets
  redacted) and names it on stderr. Other routes are refused (usage error):
  record them from Python with ``dsh_llm.testing.record``.
- ``replay`` plays a cassette through a loopback server into the adapter
  (``--adapter module:Class``, else ``--provider deepseek-official`` or
  ``openai-compatible``, else the adapter the cassette names) and prints the
  strict trace as ``trace`` does (exit 1 with ``error[CODE]`` after it when the
  stream ends with an ``error``/``aborted`` finish). ``--speed 1`` keeps the
  recorded timing, ``0`` (the default) sends at once. The adapter is built as
  ``Class(base_url=URL)``, plus a placeholder ``api_key`` when it takes one.
- Exit status as for the other subcommands: 0 on success, 1 for an
  ``LlmError`` (a violation is ``INVARIANT``), 2 for usage errors and for a
  cassette that cannot be read (``error[INVALID_CASSETTE]: ...``), 130 on Ctrl-C.
- Importing this module is cheap: adapters and ``requests`` load when a
  command runs.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING
from typing import Any
from typing import Final

from dsh_llm.cli.console import chunk_sink
from dsh_llm.cli.parser import Commands
from dsh_llm.cli.parser import add_command
from dsh_llm.cli.parser import add_json_lines_option
from dsh_llm.cli.parser import add_max_tokens_option
from dsh_llm.cli.parser import add_system_option
from dsh_llm.cli.parser import number
from dsh_llm.cli.targets import BASE_URL_ROUTE
from dsh_llm.cli.targets import DEEPSEEK_ROUTE
from dsh_llm.cli.usage import UsageError

if TYPE_CHECKING:
    from dsh_llm.adapter import LlmAdapter
    from dsh_llm.testing.cassette import Cassette


REPLAY_PLACEHOLDER_KEY: Final = "replay-placeholder-key"
"""The ``api_key`` given to a replayed adapter that takes one (nothing checks it)."""

_EXIT_OK: Final = 0
_EXIT_LLM_ERROR: Final = 1
_EXIT_USAGE: Final = 2
_BUILT_IN: Final = {
    DEEPSEEK_ROUTE: "dsh_llm.adapters.deepseek:DeepSeekAdapter",
    BASE_URL_ROUTE: "dsh_llm.adapters.openai_compat:OpenAICompatAdapter",
}


def _say(line: str) -> None:
    """One line on stderr (messages and summaries, as the other commands do)."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def add_parsers(commands: Commands) -> None:
    """Add ``record`` and ``replay`` to the CLI's subcommands."""
    _add_record(commands)
    _add_replay(commands)


def _speed(text: str) -> float:
    value = number(text)
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text}")
    return value


# --- record -----------------------------------------------------------------------


def _add_record(commands: Commands) -> None:
    command = add_command(
        commands,
        "record",
        run_record,
        help="stream one answer and record the exchange as a cassette",
        description=(
            "Send PROMPT through a recording proxy to --base-url (with --model) "
            "or to the built-in deepseek-official route, stream the answer as "
            "chat does, and write the HTTP exchange, every body read with its "
            "arrival time and secrets redacted, to the cassette -o FILE "
            "(docs/cassettes.md). Exit 1 with error[CODE]: message when the call "
            "fails (the cassette is still written), 2 for usage errors."
        ),
    )
    command.add_argument("prompt", metavar="PROMPT", help="the prompt")
    command.add_argument(
        "-o",
        "--output",
        dest="file",
        metavar="FILE",
        required=True,
        help="the cassette file to write",
    )
    command.add_argument(
        "--provider",
        metavar="ROUTE",
        help=f"the route ({DEEPSEEK_ROUTE}, the default without --base-url)",
    )
    command.add_argument(
        "--base-url",
        metavar="URL",
        help="an OpenAI-compatible API root, e.g. http://127.0.0.1:8080/v1",
    )
    command.add_argument("--model", metavar="NAME", help="the model id")
    command.add_argument(
        "--api-key-env",
        metavar="VAR",
        help="environment variable holding the key (default DEEPSEEK_API_KEY "
        "for DeepSeek, none for --base-url)",
    )
    add_system_option(command)
    add_max_tokens_option(command)
    add_json_lines_option(command)


def _key(env_name: str | None) -> str | None:
    if env_name is None:
        return None
    value = os.environ.get(env_name)
    if not value:
        raise UsageError(f"{env_name} is not set")
    return value


def _record_plan(
    args: argparse.Namespace,
) -> tuple[str, str, str, Callable[[str], LlmAdapter], str | None]:
    """``(route, upstream, model, factory, key)`` for ``record``'s options."""
    if args.base_url is not None:
        from dsh_llm.adapters.openai_compat import OpenAICompatAdapter

        if args.provider is not None:
            raise UsageError(
                f"--base-url serves the route {BASE_URL_ROUTE}; drop --provider"
            )
        if args.model is None:
            raise UsageError(
                "--base-url needs --model NAME (the id the server knows the model by)"
            )
        key = _key(args.api_key_env)
        try:
            # Checked now, so a bad URL is a usage error, not a proxy failure.
            OpenAICompatAdapter(args.base_url).close()
        except ValueError as exc:
            raise UsageError(str(exc)) from exc
        return (
            BASE_URL_ROUTE,
            args.base_url,
            args.model,
            lambda url: OpenAICompatAdapter(url, api_key=key),
            key,
        )
    route = args.provider or DEEPSEEK_ROUTE
    if route != DEEPSEEK_ROUTE:
        raise UsageError(
            f'record knows --base-url and the built-in route "{DEEPSEEK_ROUTE}", '
            f'not "{route}"; record other adapters from Python with '
            "dsh_llm.testing.record (docs/cassettes.md)"
        )
    from dsh_llm.adapters.deepseek import BASE_URL_ENV
    from dsh_llm.adapters.deepseek import DEFAULT_API_KEY_ENV
    from dsh_llm.adapters.deepseek import PUBLIC_BASE_URL
    from dsh_llm.adapters.deepseek import DeepSeekAdapter

    env_name = args.api_key_env or DEFAULT_API_KEY_ENV
    key = os.environ.get(env_name)
    if not key:
        raise UsageError(
            f"{env_name} is not set: record needs a key for {DEEPSEEK_ROUTE}, or "
            "--base-url URL --model NAME for an OpenAI-compatible server"
        )
    upstream = os.environ.get(BASE_URL_ENV) or PUBLIC_BASE_URL
    model = args.model or "deepseek-v4-flash"
    return (
        route,
        upstream,
        model,
        lambda url: DeepSeekAdapter(key, base_url=url),
        key,
    )


def run_record(args: argparse.Namespace) -> int:
    """The ``record`` handler."""
    from dsh_llm.cli.console import SilenceableSink
    from dsh_llm.cli.console import summary_line
    from dsh_llm.cli.interrupt import run_abortable
    from dsh_llm.protocol import Finish
    from dsh_llm.protocol import FinishReason
    from dsh_llm.protocol import GenerateOptions
    from dsh_llm.protocol import TokenUsage
    from dsh_llm.protocol import UsageChunk
    from dsh_llm.protocol import create_user_message
    from dsh_llm.signal import AbortController
    from dsh_llm.testing.recorder import record_call

    if not args.prompt.strip():
        raise UsageError("empty prompt: pass PROMPT")
    route, upstream, model, factory, key = _record_plan(args)
    controller = AbortController()
    options = GenerateOptions(
        provider=route,
        model=model,
        messages=(create_user_message(args.prompt),),
        system=args.system,
        max_tokens=args.max_tokens,
        signal=controller.signal,
    )
    sink = SilenceableSink(chunk_sink(args.json))

    def work() -> list[Any]:
        try:
            return record_call(
                factory,
                options,
                args.file,
                upstream=upstream,
                secrets=() if key is None else (key,),
                on_chunk=sink.write,
                adapter=_BUILT_IN[route],
            )
        finally:
            sink.end()
            _say(f"cassette: {args.file}")

    chunks = run_abortable(work, controller, on_abandon=sink.silence)
    finish: FinishReason | None = None
    usage: TokenUsage | None = None
    for chunk in chunks:
        if isinstance(chunk, UsageChunk):
            usage = chunk.usage
        elif isinstance(chunk, Finish):
            finish = chunk.reason
    assert finish is not None  # the stream passed strict validation
    if finish.failure is not None:
        _say(f"error[{finish.failure.code}]: {finish.failure.message}")
        return _EXIT_LLM_ERROR
    if not args.json:
        _say(summary_line(finish, usage))
    return _EXIT_OK


# --- replay -----------------------------------------------------------------------


def _add_replay(commands: Commands) -> None:
    command = add_command(
        commands,
        "replay",
        run_replay,
        help="play a cassette into an adapter and print the strict trace",
        description=(
            "Play the recorded response of cassette FILE through a loopback "
            "server into the adapter's real parser (--adapter module:Class, "
            f"--provider {DEEPSEEK_ROUTE} or {BASE_URL_ROUTE}, else the adapter "
            "the cassette names) and print each chunk as trace does: "
            "'[label] #n <json>', then '[label] total chunks N, order check "
            "passed'. Exit 1 with error[CODE]: message when the adapter fails "
            "or the stream breaks the protocol, 2 for usage errors and a "
            "cassette that cannot be read."
        ),
    )
    command.add_argument("file", metavar="FILE", help="the cassette")
    choice = command.add_mutually_exclusive_group()
    choice.add_argument(
        "--adapter", metavar="MODULE:CLASS", help="the adapter class to replay into"
    )
    choice.add_argument(
        "--provider",
        metavar="ROUTE",
        help=f"a built-in route: {DEEPSEEK_ROUTE} or {BASE_URL_ROUTE}",
    )
    command.add_argument(
        "--speed",
        type=_speed,
        default=0.0,
        metavar="S",
        help="1 keeps the recorded timing, 2 plays twice as fast, 0 (default) "
        "sends at once",
    )
    command.add_argument(
        "--label", help="the bracketed label of each line (default: the file name)"
    )


def _adapter_class(spec: str) -> type[LlmAdapter]:
    from dsh_llm.adapter import LlmAdapter

    module_name, _, class_name = spec.partition(":")
    if not module_name or not class_name:
        raise UsageError(f"--adapter must be module:Class, got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UsageError(f"cannot import {module_name}: {exc}") from exc
    found = getattr(module, class_name, None)
    if not (isinstance(found, type) and issubclass(found, LlmAdapter)):
        raise UsageError(f"{spec} is not an LlmAdapter class")
    return found


def _replay_class(args: argparse.Namespace, cassette: Cassette) -> type[LlmAdapter]:
    if args.adapter is not None:
        return _adapter_class(args.adapter)
    if args.provider is not None:
        spec = _BUILT_IN.get(args.provider)
        if spec is None:
            known = ", ".join(_BUILT_IN)
            raise UsageError(
                f'replay knows the built-in routes {known}, not "{args.provider}"; '
                "pass --adapter module:Class"
            )
        return _adapter_class(spec)
    if cassette.adapter is not None:
        return _adapter_class(cassette.adapter)
    raise UsageError(
        "the cassette names no adapter: pass --adapter module:Class or --provider"
    )


def _build(cls: type[LlmAdapter], url: str) -> LlmAdapter:
    try:
        parameters = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        parameters = {}  # type: ignore[assignment]
    kwargs: dict[str, Any] = {}
    if "api_key" in parameters:
        kwargs["api_key"] = REPLAY_PLACEHOLDER_KEY
    takes_options = any(
        parameter.kind is inspect.Parameter.VAR_KEYWORD
        for parameter in parameters.values()
    )
    try:
        if "base_url" in parameters or takes_options:
            # A keyword whenever it can be one: ``DeepSeekAdapter(api_key=None,
            # **options)`` takes its base URL among its config options.
            return cls(base_url=url, **kwargs)  # type: ignore[call-arg]
        return cls(url, **kwargs)  # type: ignore[call-arg]
    except (TypeError, ValueError) as exc:
        raise UsageError(f"cannot build {cls.__qualname__}: {exc}") from exc


def run_replay(args: argparse.Namespace) -> int:
    """The ``replay`` handler."""
    from dsh_llm.errors import ErrorCode
    from dsh_llm.errors import LlmError
    from dsh_llm.protocol import Finish
    from dsh_llm.protocol import StreamChunk
    from dsh_llm.testing.cassette import Cassette
    from dsh_llm.testing.replay import close_adapter
    from dsh_llm.testing.replay import close_stream
    from dsh_llm.testing.replay import replay_base_url
    from dsh_llm.testing.replay import replay_options
    from dsh_llm.testing.replay import replay_server
    from dsh_llm.trace import trace_stream

    try:
        cassette = Cassette.load(args.file)
    except LlmError as exc:
        if exc.code != ErrorCode.INVALID_CASSETTE:
            raise
        _say(f"error[{exc.code}]: {exc.message}")
        return _EXIT_USAGE
    cls = _replay_class(args, cassette)
    label = args.label if args.label is not None else os.path.basename(args.file)
    last: StreamChunk | None = None
    with replay_server(cassette, args.speed) as server:
        adapter = _build(cls, replay_base_url(server, cassette))
        try:
            stream = adapter.stream(replay_options(cassette))
            try:
                for chunk in trace_stream(label, stream, out=sys.stdout, strict=True):
                    last = chunk
            finally:
                close_stream(stream)
        finally:
            close_adapter(adapter)
    failure = last.reason.failure if isinstance(last, Finish) else None
    if failure is not None:
        _say(f"error[{failure.code}]: {failure.message}")
        return _EXIT_LLM_ERROR
    return _EXIT_OK
