"""Who is calling: the ``user-agent`` every provider request carries.

Contracts callers may rely on:

- ``attribution_headers()`` returns exactly ``{"user-agent": "dsh-llm/<version>
  (+<project url>)"}``; the version comes from the installed package's metadata.
- A deployment may pass its own ``AppIdentity`` (white-label), but attribution
  cannot be switched off. The identity holds static public facts only: no secret,
  path, session or user id.
"""

from __future__ import annotations

from importlib import metadata
from typing import Final

import attrs

from dsh_llm._version import __version__ as _source_version

__all__ = ["APP_IDENTITY", "AppIdentity", "attribution_headers", "user_agent"]

PROJECT_URL: Final = "https://github.com/deepseek-ai/deepseek-harness"
"""The project's home, used as the user-agent comment."""


def _package_version() -> str:
    try:
        return metadata.version("dsh-llm")
    except metadata.PackageNotFoundError:
        # Running from a source tree that was never installed.
        return _source_version


@attrs.frozen(kw_only=True)
class AppIdentity:
    """The static public identity sent to providers."""

    product: str
    """The user-agent product token (lowercase, hyphenated)."""
    version: str
    """The product's version."""
    url: str
    """The product's home page."""


APP_IDENTITY: Final = AppIdentity(
    product="dsh-llm", version=_package_version(), url=PROJECT_URL
)
"""This library's own identity, the default for every request."""


def user_agent(identity: AppIdentity = APP_IDENTITY) -> str:
    """The user-agent value: ``<product>/<version> (+<url>)``."""
    return f"{identity.product}/{identity.version} (+{identity.url})"


def attribution_headers(identity: AppIdentity = APP_IDENTITY) -> dict[str, str]:
    """The headers every provider request must send: only ``user-agent``
    (lowercase name). Returns a new dict each call."""
    return {"user-agent": user_agent(identity)}
