"""The ``dsh_llm`` pytest plugin: fixtures for adapter authors and stream users.

Installing dsh-llm registers this module under the ``pytest11`` entry point, so
any project's tests get these fixtures without a ``conftest.py`` line (disable
with ``-p no:dsh_llm``). Contracts callers may rely on:

- Loading the plugin costs nothing beyond ``import dsh_llm``: it imports no
  other module of the library (no transport, adapter or test kit), defines no
  hook and no autouse fixture. Each fixture imports what it needs when a test
  asks for it (``tests/testing/test_pytest_plugin.py`` checks this).
- ``loopback_server``: a started ``LoopbackServer`` (stopped after the test).
- ``cassette_replay``: a function ``cassette_replay(cassette, adapter_factory,
  **options)`` returning the strictly validated chunks the adapter reads from
  the cassette (``dsh_llm.testing.replay.replay_chunks``).
- ``adapter_conformance``: ``assert_adapter_conforms`` itself, for symmetry
  with the other fixtures (a plain import works as well).
- ``fake_adapter``: the ``FakeAdapter`` class, to build scripted adapters.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Iterator
from typing import TYPE_CHECKING
from typing import Any

import pytest

if TYPE_CHECKING:
    from dsh_llm.protocol import StreamChunk
    from dsh_llm.testing.fake import FakeAdapter
    from dsh_llm.testing.loopback import LoopbackServer

__all__ = ["adapter_conformance", "cassette_replay", "fake_adapter", "loopback_server"]


@pytest.fixture
def loopback_server() -> Iterator[LoopbackServer]:
    """A started ``LoopbackServer`` on 127.0.0.1."""
    from dsh_llm.testing.loopback import LoopbackServer

    with LoopbackServer() as server:
        yield server


@pytest.fixture
def cassette_replay() -> Callable[..., list[StreamChunk]]:
    """``replay_chunks``: ``cassette_replay(cassette, adapter_factory, **options)``."""
    from dsh_llm.testing.replay import replay_chunks

    return replay_chunks


@pytest.fixture
def adapter_conformance() -> Callable[..., Any]:
    """``assert_adapter_conforms(adapter_factory, cassette, **knobs)``."""
    from dsh_llm.testing.conformance import assert_adapter_conforms

    return assert_adapter_conforms


@pytest.fixture
def fake_adapter() -> type[FakeAdapter]:
    """The ``FakeAdapter`` class."""
    from dsh_llm.testing.fake import FakeAdapter

    return FakeAdapter
