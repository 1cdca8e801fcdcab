"""The failure a translator finishes with after a stop reason that is not a
success.

- ``reason_code(reason)``: the reason upper-cased when it is a short identifier
  (a letter or digit, then up to 63 of letters, digits, ``_``, ``.``, ``-``),
  else ``UNKNOWN_FINISH_REASON`` (the code never carries arbitrary text).
- ``stopped(reason, code)``: the ``LlmFailure`` ``"model stopped: <reason>"``
  (the reason cut to 120 characters), coded ``code``, else
  ``reason_code(reason)``.
"""

from __future__ import annotations

import re
from typing import Final

from dsh_llm.errors import ErrorCode
from dsh_llm.protocol import LlmFailure

_IDENTIFIER: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}")


def reason_code(reason: str) -> str:
    """The code of an unsuccessful stop ``reason`` (see the module docstring)."""
    if _IDENTIFIER.fullmatch(reason):
        return reason.upper()
    return ErrorCode.UNKNOWN_FINISH_REASON.value


def stopped(reason: str, code: str | None = None) -> LlmFailure:
    """The failure of an unsuccessful stop ``reason`` (see the module
    docstring)."""
    return LlmFailure(
        message=f"model stopped: {reason[:120]}",
        code=reason_code(reason) if code is None else code,
    )
