"""API keys: the one definition of a usable key, and a wrapper that hides it.

Contracts callers may rely on:

- ``normalize_api_key`` trims surrounding whitespace and accepts only printable
  ASCII without spaces (0x21..0x7E), the characters every HTTP header carries.
- ``assert_usable_api_key`` raises ``LlmError`` with code ``INVALID_CREDENTIAL``
  naming the package and where the key came from, never any part of the key.
- ``Secret`` keeps a key out of ``repr``, ``str``, logs and tracebacks; only
  ``reveal()`` gives the value back. A pickle of it carries the value (process
  pools need it), so a pickle is as secret as the key.
"""

from __future__ import annotations

import hmac
import re
from typing import Final
from typing import Literal

import attrs

from dsh_llm.errors import ErrorCode
from dsh_llm.errors import LlmError

__all__ = ["ApiKeyCheck", "Secret", "assert_usable_api_key", "normalize_api_key"]

_LEGAL_API_KEY: Final = re.compile(r"[\x21-\x7E]+")

ApiKeyRejection = Literal["empty", "illegalCharacters"]
"""Why ``normalize_api_key`` refused a key."""


@attrs.frozen(kw_only=True)
class ApiKeyCheck:
    """The verdict on one supplied key: ``ok`` with the trimmed ``value``, or not
    ``ok`` with a ``reason`` (``"empty"`` or ``"illegalCharacters"``)."""

    ok: bool
    """Whether the key can be used."""
    value: Secret | None = None
    """The trimmed key, when ``ok``."""
    reason: ApiKeyRejection | None = None
    """Why not, when not ``ok``."""


class Secret:
    """A string that never shows itself: ``repr`` and ``str`` print ``'***'``.

    Equality compares the hidden values in constant time; secrets are not hashable
    (so they cannot end up as dict keys in a log).

    Pickling carries the value: a config or an adapter holding a ``Secret`` must
    reach a process pool or a distributed engine (Dask, Ray) with its
    key. Treat a pickle holding one as the secret itself: never log it, write it
    to shared storage or send it anywhere the key may not go.
    """

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        if not isinstance(value, str):
            raise TypeError(f"Secret value must be a str, got {type(value).__name__}")
        self._value = value

    def reveal(self) -> str:
        """The hidden value. Put it in a header, nowhere else."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    def __str__(self) -> str:
        return "***"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Secret):
            return NotImplemented
        return hmac.compare_digest(self._value.encode(), other._value.encode())

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> tuple[type[Secret], tuple[str]]:
        return (Secret, (self._value,))


def normalize_api_key(raw: str) -> ApiKeyCheck:
    """Judge one supplied key after trimming surrounding whitespace.

    Returns ``ApiKeyCheck(ok=True, value=Secret(trimmed))``, or ``ok=False`` with
    reason ``"empty"`` (nothing left after trimming) or ``"illegalCharacters"``
    (anything outside printable ASCII without space: interior spaces, controls,
    Latin-1, CJK, emoji).

    Raises:
        TypeError: when ``raw`` is not a ``str`` (the message names only its type).
    """
    if not isinstance(raw, str):
        raise TypeError(f"an API key must be a str, got {type(raw).__name__}")
    value = raw.strip()
    if value == "":
        return ApiKeyCheck(ok=False, reason="empty")
    if not _LEGAL_API_KEY.fullmatch(value):
        return ApiKeyCheck(ok=False, reason="illegalCharacters")
    return ApiKeyCheck(ok=True, value=Secret(value))


def assert_usable_api_key(raw: str, pkg: str, ref: str) -> str:
    """Return the trimmed key, or raise ``LlmError`` (``INVALID_CREDENTIAL``).

    Args:
        raw: The key exactly as configured.
        pkg: The package or plugin asking, e.g. ``"llm-deepseek"``.
        ref: Where the key came from, e.g. ``"DEEPSEEK_API_KEY"``.

    Raises:
        LlmError: code ``INVALID_CREDENTIAL``; the message names ``pkg`` and
            ``ref`` and never any part of the key.
        TypeError: when ``raw`` is not a ``str``.
    """
    checked = normalize_api_key(raw)
    if checked.ok and checked.value is not None:
        return checked.value.reveal()
    if checked.reason == "empty":
        message = (
            f"{pkg}: the API key resolved from {ref} is blank; set {ref} to the raw "
            "key or export it in the launching environment"
        )
    else:
        message = (
            f"{pkg}: the API key resolved from {ref} contains characters no HTTP "
            f"header can carry; set {ref} to the raw key alone"
        )
    raise LlmError(message, ErrorCode.INVALID_CREDENTIAL)
