"""``dsh-llm count PROMPT``: the input tokens a prompt would cost, counted by the
provider before any call.

This module owns the ``count`` subcommand. Contracts callers may rely on:

- The route and model are chosen as for ``chat`` (``--provider``, ``--model``
  or an alias, the default model, ``--config``, ``--base-url`` with ``--wire``;
  ``dsh_llm.cli.models.choose_from`` and ``dsh_llm.cli.targets.open_target``); the
  request is the one ``chat`` would send for PROMPT (``--system``,
  ``--reasoning-effort``, ``-o`` fields), counted through
  ``LlmRuntime.count_tokens`` (the provider's own endpoint: Anthropic, Gemini,
  OpenAI Responses, Bedrock). No answer is generated.
- stdout gets the count alone (``1234``), or with ``--json`` one object
  ``{"provider", "model", "inputTokens"}``; stderr a note naming the route and
  model.
- Exit status: 0 with a count; 1 when the library reports an ``LlmError``
  (``error[UNSUPPORTED_OPTION]: ...`` for a route that cannot count, the HTTP
  codes of the provider's answer); 2 for usage errors (no model to talk to, an
  empty prompt).
"""

from __future__ import annotations

import argparse
import json
import sys

from dsh_llm.cli.models import add_choice_arguments
from dsh_llm.cli.parser import Commands
from dsh_llm.cli.parser import add_command
from dsh_llm.cli.parser import add_fields_option
from dsh_llm.cli.parser import add_prompt_argument
from dsh_llm.cli.parser import add_reasoning_effort_option
from dsh_llm.cli.parser import add_system_option
from dsh_llm.cli.parser import add_timeout_option
from dsh_llm.cli.usage import UsageError

__all__ = ["add_parser", "run_count"]


def add_parser(commands: Commands) -> argparse.ArgumentParser:
    """Add the ``count`` subcommand (its ``handler`` is ``run_count``)."""
    command = add_command(
        commands,
        "count",
        run_count,
        help="count a prompt's input tokens without generating an answer",
        description=(
            "Count the input tokens PROMPT (stdin when omitted or -) would cost, "
            "through the provider's own counting endpoint (Anthropic, Gemini, "
            "OpenAI Responses, Bedrock): the request chat would send, no answer "
            "generated. The route and model are chosen as for chat. Prints the "
            "count on stdout (--json: an object). Exit 1 with error[CODE]: "
            "message when the route cannot count or the call fails, 2 when no "
            "model can be chosen."
        ),
    )
    add_prompt_argument(command)
    add_choice_arguments(
        command,
        model="the model id or alias (default: as for chat)",
        base_url="an OpenAI-compatible API root",
        wire="what the --base-url server is spoken to with (only responses "
        "can count, on OpenAI)",
        api_key_env="environment variable holding the key (built-in route or "
        "--base-url)",
    )
    add_system_option(command)
    add_reasoning_effort_option(
        command, "reasoning effort the route offers (part of what is counted)"
    )
    add_fields_option(command)
    add_timeout_option(command)
    command.add_argument("--json", action="store_true", help="print a JSON object")
    return command


def run_count(args: argparse.Namespace) -> int:
    """Count PROMPT's input tokens (see the module docstring).

    Raises:
        UsageError: for an empty prompt or no model to talk to.
        LlmError: what counting raises (``main`` prints it, exit status 1).
    """
    from dsh_llm.cli.chat import ChatRequest
    from dsh_llm.cli.chat import provider_options
    from dsh_llm.cli.chat import read_prompt
    from dsh_llm.cli.models import choose_from
    from dsh_llm.cli.targets import open_target

    if args.wire is not None and args.base_url is None:
        raise UsageError("--wire applies to --base-url")
    prompt = read_prompt(args.prompt, sys.stdin, sys.stderr)
    request = ChatRequest(
        system=args.system,
        reasoning_effort=args.reasoning_effort,
        extra_body=provider_options(args.options),
    )
    choice = choose_from(args)
    with open_target(args, choice) as target:
        count = target.runtime.count_tokens(request.options(target, prompt))
    if args.json:
        print(
            json.dumps(
                {"provider": target.route, "model": target.model, "inputTokens": count}
            )
        )
    else:
        print(count)
    print(
        f"input tokens of route {target.route}, model {target.model}",
        file=sys.stderr,
    )
    return 0
