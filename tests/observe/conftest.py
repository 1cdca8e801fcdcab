"""Fixtures of the observability tests: a loopback server and a runtime serving
its route ``local`` with an ``OpenAICompatAdapter``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dsh_llm.adapters.openai_compat import OpenAICompatAdapter
from dsh_llm.runtime import LlmRuntime
from dsh_llm.testing import LoopbackServer

ROUTE = "local"


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:
        yield srv
        assert srv.wait_until_idle(), "a connection was left open"


@pytest.fixture
def runtime(server: LoopbackServer) -> Iterator[LlmRuntime]:
    runtime = LlmRuntime()
    with OpenAICompatAdapter(f"{server.url}/v1") as adapter:
        runtime.register_adapter([ROUTE], adapter)
        yield runtime
