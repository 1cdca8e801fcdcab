"""Helpers for the command-line tests: run ``dsh-llm`` as a real process in a clean
environment, and scripted DeepSeek replies for the loopback server."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dsh_llm.testing import Reply
from dsh_llm.testing import sse_events

from .proxy_env import DEAD_PROXY
from .proxy_env import NO_PROXY_VARIABLES
from .proxy_env import PROXY_VARIABLES

# Variables that would let the machine's own setup leak into a test.
_SCRUBBED = (
    "DEEPSEEK_API_KEY",
    "DEEPSEEK_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "MY_API_KEY",
    "GEMINI_API_KEY",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_PROFILE",
    "AWS_BEARER_TOKEN_BEDROCK",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AZURE_OPENAI_ENDPOINT",
    "AZURE_OPENAI_API_KEY",
    *PROXY_VARIABLES,
    *NO_PROXY_VARIABLES,
    "NO_COLOR",
)


def clean_env(**extra: str) -> dict[str, str]:
    """``os.environ`` without keys, base URLs and proxies, plus ``extra``; the
    venv's ``bin`` directory leads ``PATH`` so ``dsh-llm`` is found."""
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([bin_dir, env.get("PATH", "")])
    # No AWS configuration of the machine's either (a region would make the
    # built-in Bedrock route available).
    env["AWS_CONFIG_FILE"] = env["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull
    env.update(extra)
    return env


def offline_env(**extra: str) -> dict[str, str]:
    """``clean_env`` with every proxy variable pointing at a dead proxy and no
    ``no_proxy`` exemption: anything that tries the network through a proxy
    fails, so a passing command proves it needed none."""
    return clean_env(**{name: DEAD_PROXY for name in PROXY_VARIABLES}, **extra)


def run_cli(
    *args: str,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    stdin: str | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m dsh_llm ARGS`` and capture its output (UTF-8)."""
    return subprocess.run(
        [sys.executable, "-m", "dsh_llm", *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        input="" if stdin is None else stdin,
        env=clean_env() if env is None else dict(env),
        cwd=cwd,
        timeout=timeout,
        check=False,
    )


def deepseek_event(
    delta: Mapping[str, Any],
    *,
    finish_reason: str | None = None,
    usage: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One DeepSeek ``chat.completion.chunk`` payload."""
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "model": "deepseek-v4-flash",
        "choices": [{"index": 0, "delta": dict(delta), "finish_reason": finish_reason}],
        "usage": None if usage is None else dict(usage),
    }


def deepseek_text_reply(
    pieces: Sequence[str],
    *,
    reasoning: Sequence[str] = (),
    usage: Mapping[str, Any] | None = None,
) -> Reply:
    """A DeepSeek stream of ``reasoning`` then ``pieces`` of text, ending ``stop``
    with ``usage`` (default: 12 prompt tokens, 3 cached, 7 completion)."""
    events = [deepseek_event({"role": "assistant", "content": None})]
    events += [
        deepseek_event({"content": None, "reasoning_content": piece})
        for piece in reasoning
    ]
    events += [deepseek_event({"content": piece}) for piece in pieces]
    events.append(
        deepseek_event(
            {"content": ""},
            finish_reason="stop",
            usage=usage
            or {
                "prompt_tokens": 12,
                "completion_tokens": 7,
                "total_tokens": 19,
                "prompt_cache_hit_tokens": 3,
                "prompt_cache_miss_tokens": 9,
            },
        )
    )
    return Reply(body=sse_events(events))
