"""Adapter factories for the kit's tests: ``factory(base_url, **options)``."""

from __future__ import annotations

from typing import Any

from dsh_llm.adapters.deepseek import DeepSeekAdapter
from dsh_llm.adapters.openai_compat import OpenAICompatAdapter

TEST_KEY = "sk-test-key-0123456789abcdef"
"""A key the tests give DeepSeekAdapter (no server here checks it)."""


def deepseek(base_url: str, **options: Any) -> DeepSeekAdapter:
    """A ``DeepSeekAdapter`` for ``base_url`` with a test key."""
    return DeepSeekAdapter(TEST_KEY, base_url=base_url, **options)


def openai_compat(base_url: str, **options: Any) -> OpenAICompatAdapter:
    """An ``OpenAICompatAdapter`` for ``base_url`` without a key."""
    return OpenAICompatAdapter(base_url, **options)


FACTORIES = {"deepseek": deepseek, "openai_compat": openai_compat}
"""The factory of each wire family's shipped adapter."""
