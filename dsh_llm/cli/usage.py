"""``UsageError``: the command cannot run as invoked (exit status 2).

Every subcommand raises it for what the user must fix before anything is sent;
``dsh_llm.cli.main`` prints ``error: <message>`` and exits 2. It lives here, below
every subcommand module, so each can raise it without importing another.
"""

from __future__ import annotations


class UsageError(Exception):
    """The command cannot run as invoked; the message says what to set or pass."""
