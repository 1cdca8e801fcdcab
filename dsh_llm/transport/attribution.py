"""Who is calling: the ``user-agent`` every provider request carries.

Contracts callers may rely on:

- ``attribution_headers()`` returns exactly ``{"user-agent": "dsh-llm/<version>
  (+<project url>)"}``; the version is the package's ``__version__``, which the
  installed package's metadata is built from (so no metadata is read at import).
- A deployment may pass its own ``AppIdentity`` (white-label), but attribution
  cannot be switched off. The identity holds static public facts only: no secret,
  path, session or user id.
"""

from __future__ import annotations

import re
from typing import Any
from typing import Final

import attrs

from dsh_llm._version import __version__
from dsh_llm.protocol import checks as c

__all__ = ["APP_IDENTITY", "AppIdentity", "attribution_headers", "user_agent"]

PROJECT_URL: Final = "https://github.com/deepseek-ai/deepseek-harness"
"""The project's home, used as the user-agent comment."""


# RFC 9110 token characters: what a user-agent product and version may use.
_TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# The url sits inside a "(+...)" comment: printable ASCII without space, parens
# or backslash, so it can neither end the comment nor break the header.
_COMMENT_URL: Final = re.compile(r"[\x21-\x27\x2A-\x5B\x5D-\x7E]+")


def _matching(pattern: re.Pattern[str], what: str) -> c.Check:
    def check(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
        c.non_empty_str(inst, attribute, value)
        assert isinstance(value, str)
        if not pattern.fullmatch(value):
            raise c.bad_value(inst, attribute.name, f"must be {what}, got {value!r}")

    return check


@attrs.frozen(kw_only=True)
class AppIdentity:
    """The static public identity sent to providers.

    Construction checks that the three facts fit a ``user-agent`` header:
    ``product`` and ``version`` are HTTP tokens (no spaces or separators), and
    ``url`` is printable ASCII without spaces, parentheses or backslashes. A bad
    value raises ``TypeError``/``ValueError`` naming the field.
    """

    product: str = attrs.field(validator=_matching(_TOKEN, "an HTTP token"))
    """The user-agent product token (lowercase, hyphenated)."""
    version: str = attrs.field(validator=_matching(_TOKEN, "an HTTP token"))
    """The product's version."""
    url: str = attrs.field(
        validator=_matching(
            _COMMENT_URL,
            "printable ASCII without spaces, parentheses or backslashes",
        )
    )
    """The product's home page."""


APP_IDENTITY: Final = AppIdentity(
    product="dsh-llm", version=__version__, url=PROJECT_URL
)
"""This library's own identity, the default for every request."""


def user_agent(identity: AppIdentity = APP_IDENTITY) -> str:
    """The user-agent value: ``<product>/<version> (+<url>)``."""
    return f"{identity.product}/{identity.version} (+{identity.url})"


def attribution_headers(identity: AppIdentity = APP_IDENTITY) -> dict[str, str]:
    """The headers every provider request must send: only ``user-agent``
    (lowercase name). Returns a new dict each call."""
    return {"user-agent": user_agent(identity)}
