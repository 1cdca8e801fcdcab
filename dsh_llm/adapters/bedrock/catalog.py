"""Which Claude model a Bedrock model id names, for Claude's thinking rules.

Bedrock ids wrap the Anthropic API id: an optional geography prefix (``us.``,
``eu.``, ``apac.``, ``global.``...), ``anthropic.``, the Claude name, then an
optional date (``-20251001``) and version (``-v1:0``, ``-v1``). An inference
profile ARN ends with such an id (``.../inference-profile/us.anthropic...``).

- ``claude_model(model_id)``: the Claude name (``claude-haiku-4-5``) the id shows,
  else ``None`` (a model of another vendor, or an application inference
  profile's ARN, which shows nothing).
- ``thinking_profile(model_id)``: the Anthropic catalog's profile for a known
  Claude name, ``BUDGET_THINKING`` for another Claude, ``None`` for a model
  that is not Claude as far as its id shows.
- ``claude_entry(model_id)``: the Anthropic catalog's entry, if any (its context
  window and output cap).
"""

from __future__ import annotations

import re
from typing import Final

from dsh_llm.adapters.anthropic.catalog import BUDGET_THINKING
from dsh_llm.adapters.anthropic.catalog import ClaudeModel
from dsh_llm.adapters.anthropic.catalog import ThinkingProfile
from dsh_llm.adapters.anthropic.catalog import model_entry

_CLAUDE_ID: Final = re.compile(
    r"(?:[a-z]{2,8}\.)?anthropic\.(claude-[a-z0-9.-]*?)(?:-\d{8})?(?:-v\d+(?::\d+)?)?"
)


def claude_model(model_id: str) -> str | None:
    """The Claude name ``model_id`` shows (see the module docstring), else
    ``None``."""
    tail = model_id.rpartition("/")[2]
    match = _CLAUDE_ID.fullmatch(tail)
    return None if match is None else match.group(1)


def claude_entry(model_id: str) -> ClaudeModel | None:
    """The Anthropic catalog's entry for the Claude model ``model_id`` names."""
    name = claude_model(model_id)
    return None if name is None else model_entry(name)


def thinking_profile(model_id: str) -> ThinkingProfile | None:
    """How the model ``model_id`` names thinks (``None``: not a Claude model)."""
    name = claude_model(model_id)
    if name is None:
        return None
    entry = model_entry(name)
    return BUDGET_THINKING if entry is None else entry.thinking
