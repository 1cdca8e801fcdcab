"""Shared pytest configuration and fixtures.

``server`` is the one loopback server fixture: a fresh ``LoopbackServer`` per
test that, at teardown, asserts every connection it accepted was closed (so a
leaked HTTP response fails the test that leaked it).

Hypothesis runs without per-example deadlines: CI machines have two cores and
loopback servers share them, so wall-clock deadlines would only add flakiness.
Set ``HYPOTHESIS_PROFILE=thorough`` for a longer local run.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck
from hypothesis import settings

from dsh_llm.testing import LoopbackServer

settings.register_profile(
    "default",
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "thorough",
    max_examples=2000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    """A loopback server; teardown asserts no connection was left open."""
    with LoopbackServer() as srv:
        yield srv
        assert srv.wait_until_idle(), "a connection was left open"


@pytest.fixture(autouse=True, scope="session")
def _user_dir_outside_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every test, and every ``dsh-llm`` process a test starts, keeps its logs,
    keys and aliases in a temporary directory, never in the real home
    (``DSH_LLM_USER_DIR``; the CLI tests get a fresh one per test)."""
    from dsh_llm.cli.userdirs import USER_DIR_ENV

    previous = os.environ.get(USER_DIR_ENV)
    os.environ[USER_DIR_ENV] = str(tmp_path_factory.mktemp("dsh-llm-user"))
    yield
    if previous is None:
        os.environ.pop(USER_DIR_ENV, None)
    else:
        os.environ[USER_DIR_ENV] = previous
