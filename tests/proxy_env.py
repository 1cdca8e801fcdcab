"""Helpers for the proxy tests: point every proxy variable ``requests`` reads at
one URL, with no ``no_proxy`` exemption left to make a test pass by accident."""

from __future__ import annotations

import pytest

PROXY_VARIABLES = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
)
"""Every spelling ``urllib.request.getproxies`` reads (lower case wins)."""
NO_PROXY_VARIABLES = ("no_proxy", "NO_PROXY")
# A proxy that accepts no connection: a request sent through it fails at once.
DEAD_PROXY = "http://127.0.0.1:9"


def use_proxy(monkeypatch: pytest.MonkeyPatch, url: str = DEAD_PROXY) -> None:
    """Set every proxy variable to ``url`` and remove ``no_proxy``."""
    for name in PROXY_VARIABLES:
        monkeypatch.setenv(name, url)
    for name in NO_PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
