"""``dsh-llm batch REQUESTS.jsonl RESULTS.jsonl``: a batch run from the command line.

This module owns the ``batch`` subcommand. Contracts callers may rely on:

- Routes come from the composition file (``--config``, else ``./dsh.yml`` when
  present), else the built-in DeepSeek route, as for ``dsh-llm providers``
  (``dsh_llm.cli.targets.open_routes``); each request line names its route.
- A progress bar on stderr while it runs (only when stderr is a terminal), then
  one summary line on stderr either way.
- Exit status: 0 when every request line has a successful row; 1 when some
  failed (this run or an earlier one: the summary line says how many, and their
  rows hold the failures), or the run stopped on a rate limiter's failure; 2 for
  usage errors (an unreadable requests file, the same file twice, a composition
  that cannot be loaded, a results file another run holds: nothing is sent);
  130 on Ctrl-C (in-flight requests are aborted, rows already written are kept,
  a rerun resumes).
"""

from __future__ import annotations

import argparse
import os
import sys

from dsh_llm.cli.parser import Commands
from dsh_llm.cli.parser import add_command
from dsh_llm.cli.parser import positive_int
from dsh_llm.cli.parser import positive_number
from dsh_llm.cli.targets import DEFAULT_CONFIG
from dsh_llm.cli.targets import add_config_option
from dsh_llm.cli.usage import UsageError

_EXIT_OK = 0
_EXIT_FAILED = 1


def add_parser(commands: Commands) -> argparse.ArgumentParser:
    """Add the ``batch`` subcommand (its ``handler`` is ``run_batch``)."""
    command = add_command(
        commands,
        "batch",
        run_batch,
        help="run a JSON Lines file of requests into a results file (resumable)",
        description=(
            "Send every request line of REQUESTS.jsonl (one JSON object each: id, "
            "provider, model, prompt or messages, ...) and append one result line "
            "per request to RESULTS.jsonl. A rerun skips the ids RESULTS.jsonl "
            "already holds. Routes come from the composition file (--config, "
            f"default ./{DEFAULT_CONFIG} when present), else the built-in DeepSeek "
            "route. Exit 0 when all succeeded, 1 when some failed, 2 for usage "
            "errors, 130 on Ctrl-C (rows written so far are kept)."
        ),
    )
    command.add_argument("requests_file", metavar="REQUESTS.jsonl")
    command.add_argument("results_file", metavar="RESULTS.jsonl")
    add_config_option(command)
    command.add_argument(
        "--concurrency",
        metavar="N",
        type=positive_int,
        default=8,
        help="requests in flight at most (default 8)",
    )
    command.add_argument(
        "--rpm",
        metavar="N",
        type=positive_number,
        help="requests per minute per route (default: no limit)",
    )
    return command


def _check_paths(requests_file: str, results_file: str) -> None:
    try:
        with open(requests_file, "rb"):
            pass
    except OSError as exc:
        raise UsageError(
            f"cannot read {requests_file}: {exc.strerror or exc}"
        ) from None
    try:
        same = os.path.samefile(requests_file, results_file)
    except OSError:
        same = False
    if same:
        raise UsageError("REQUESTS.jsonl and RESULTS.jsonl must be different files")


def run_batch(args: argparse.Namespace) -> int:
    """Run ``dsh-llm batch``; returns the exit status (Ctrl-C raises
    ``KeyboardInterrupt``, which ``dsh_llm.cli.main`` turns into 130)."""
    from dsh_llm.batch import ProgressBar
    from dsh_llm.batch import run_jsonl
    from dsh_llm.batch.ratelimit import LimiterError
    from dsh_llm.batch.results import ResultsFileBusyError
    from dsh_llm.cli.interrupt import run_abortable
    from dsh_llm.cli.targets import open_routes
    from dsh_llm.signal import AbortController

    _check_paths(args.requests_file, args.results_file)
    controller = AbortController()
    with open_routes(config=args.config) as routes:
        runtime = routes.runtime
        try:
            summary = run_abortable(
                lambda: run_jsonl(
                    args.requests_file,
                    args.results_file,
                    runtime=runtime,
                    concurrency=args.concurrency,
                    requests_per_minute=args.rpm,
                    progress=ProgressBar(),
                    signal=controller.signal,
                ),
                controller,
            )
        except ResultsFileBusyError as exc:
            raise UsageError(str(exc)) from None
        except LimiterError as exc:
            sys.stderr.write(f"error: {exc}; a rerun sends what has no row\n")
            return _EXIT_FAILED
    return _EXIT_OK if summary.ok else _EXIT_FAILED
