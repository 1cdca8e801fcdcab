"""What the command line adds to a failure so the user knows what to do next.

``failure_message(failure, key_hint)`` is the text after ``error[CODE]: ``.
Contracts callers may rely on:

- ``AUTH`` and ``MISSING_CREDENTIAL``: the message, then where the key comes
  from (``key_hint``: the variable or flag of the route in use).
- ``RATE_LIMIT``: the message, then ``retry after N s`` when the provider said
  how long to wait.
- Every other code: the message unchanged.
- ``missing_key_message(target)`` replaces the library's ``MISSING_CREDENTIAL``
  message (written for Python callers: "pass api_key or export VAR") with the
  command line's two ways to give a key: ``export VAR=...`` or
  ``dsh-llm keys set NAME``. It names the first route of the target (a failover
  alias's routes in order) whose variable has no value; ``None`` when none can
  be found (a key given some other way).
"""

from __future__ import annotations

from dsh_llm.cli.keys import key_name
from dsh_llm.cli.targets import Target
from dsh_llm.errors import ErrorCode
from dsh_llm.protocol import LlmFailure


def failure_message(failure: LlmFailure, key_hint: str | None) -> str:
    """The message to print for ``failure`` (see the module docstring)."""
    message = failure.message
    if failure.code in (ErrorCode.AUTH, ErrorCode.MISSING_CREDENTIAL) and key_hint:
        return f"{message} ({key_hint})"
    if failure.code == ErrorCode.RATE_LIMIT:
        wait = failure.provider_retry_after_ms
        if wait is not None:
            seconds = wait / 1000
            shown = f"{seconds:.0f}" if seconds >= 10 else f"{seconds:.1f}"
            return f"{message} (retry after {shown} s)"
        return f"{message} (rate limited; the provider gave no retry-after)"
    return message


def _key_variable(target: Target, route: str) -> str | None:
    entry = target.runtime.registry.routes.get(route)
    config = getattr(entry.adapter, "config", None) if entry is not None else None
    variable = getattr(config, "api_key_env", None)
    return variable if isinstance(variable, str) and variable else None


def missing_key_message(target: Target) -> str | None:
    """The command line's message for ``MISSING_CREDENTIAL`` (see the module
    docstring)."""
    for route in target.members:
        variable = _key_variable(target, route)
        if variable is not None and not target.environ.get(variable):
            return (
                f'no API key for route "{route}": export {variable}=... in the '
                f"environment, or store it with: dsh-llm keys set {key_name(variable)}"
            )
    return None
