"""Replaying cassettes through a ``LoopbackServer`` into an adapter's real parser.

Contracts callers may rely on:

- ``replay_reply(cassette, speed)`` is the ``Reply`` that plays the recorded
  response: its status, reason and headers, one write per recorded read (one HTTP
  chunk per read on a chunked body), in the recorded framing. ``speed=1`` keeps
  the recorded timing (the head at its offset, each read at its offset after the
  previous one), ``2`` plays twice as fast, ``0`` sends everything at once. A
  body recorded ``cut`` ends with an abrupt close (a reset when close-delimited,
  so it never looks like a clean end; a cut content-length body is replayed
  chunked, since its announced length was not recorded), one the client left
  (``client-closed``) with a stall until the client leaves again.
- ``replay_server(cassette, speed)`` is a context manager yielding a started
  ``LoopbackServer`` that answers every request with that reply;
  ``replay_base_url(server, cassette)`` is the URL to give the adapter (the
  server's URL plus the cassette's ``base_path``).
- ``replay_chunks(cassette, adapter_factory)`` builds the adapter with
  ``adapter_factory(base_url, **factory_options)``, streams ``options`` (default
  ``replay_options(cassette)``) and returns the chunks, each checked by
  ``validate_stream`` (strict unless told); the adapter's ``LlmError``
  propagates. The adapter is closed afterwards when it has ``close()``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from typing import Final

from dsh_llm.adapter import LlmAdapter
from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import create_user_message
from dsh_llm.testing.cassette import Cassette
from dsh_llm.testing.loopback import BodyStep
from dsh_llm.testing.loopback import Cut
from dsh_llm.testing.loopback import LoopbackServer
from dsh_llm.testing.loopback import Pause
from dsh_llm.testing.loopback import Reply
from dsh_llm.testing.loopback import Stall
from dsh_llm.validator import validate_stream

__all__ = [
    "REPLAY_ROUTE",
    "AdapterFactory",
    "replay_base_url",
    "replay_chunks",
    "replay_options",
    "replay_reply",
    "replay_server",
]

REPLAY_ROUTE: Final = "replay"
"""The ``provider`` of ``replay_options``' request."""

AdapterFactory = Callable[..., LlmAdapter]
"""Builds the adapter under test: ``factory(base_url, **options)``, where the
options are adapter constructor keywords such as ``stream_idle_timeout_ms``."""


def _as_cassette(cassette: Cassette | str | Path) -> Cassette:
    return cassette if isinstance(cassette, Cassette) else Cassette.load(cassette)


def replay_reply(cassette: Cassette, speed: float = 0.0) -> Reply:
    """The ``Reply`` that plays ``cassette``'s response (see the module docstring).

    Raises:
        ValueError: when ``speed`` is negative or not finite.
    """
    if not speed >= 0 or speed == float("inf"):
        raise ValueError(f"speed must be a finite number >= 0, got {speed!r}")
    response = cassette.response
    steps: list[BodyStep] = []
    last = response.at_ms
    for read in response.reads:
        if speed > 0 and read.at_ms > last:
            steps.append(Pause(seconds=(read.at_ms - last) / 1000 / speed))
        last = read.at_ms
        steps.append(read.data)
    framing = response.framing
    if response.ended == "cut":
        # A reset, so a close-delimited body does not end in a clean EOF; a cut
        # content-length body is replayed chunked (its length is not recorded).
        steps.append(Cut(reset=framing == "close"))
        if framing == "length":
            framing = "chunked"
    elif response.ended == "client-closed":
        steps.append(Stall())
    headers = response.headers
    if response.header("content-type") is None:
        # Without it LoopbackServer would claim an event stream.
        headers = (*headers, ("content-type", "application/octet-stream"))
    return Reply(
        status=response.status,
        reason=response.reason or "-",
        headers=headers,
        body=steps,
        framing=framing,
        header_delay=response.at_ms / 1000 / speed if speed > 0 else 0.0,
    )


@contextlib.contextmanager
def replay_server(
    cassette: Cassette | str | Path, speed: float = 0.0
) -> Iterator[LoopbackServer]:
    """A started ``LoopbackServer`` answering every request with ``cassette``'s
    response (a path is loaded with ``Cassette.load``)."""
    loaded = _as_cassette(cassette)
    reply = replay_reply(loaded, speed)
    with LoopbackServer(handler=lambda _request: reply) as server:
        yield server


def replay_base_url(server: LoopbackServer, cassette: Cassette) -> str:
    """The API root an adapter replaying ``cassette`` from ``server`` is given."""
    return server.url + cassette.base_path


def replay_options(cassette: Cassette, **fields: Any) -> GenerateOptions:
    """A request to replay ``cassette`` with: route ``replay``, the recorded
    request's ``model`` (else ``replay``), one user message; ``fields`` override."""
    body = cassette.request.json()
    model = body.get("model") if isinstance(body, dict) else None
    fields.setdefault("provider", REPLAY_ROUTE)
    fields.setdefault("model", model if isinstance(model, str) and model else "replay")
    fields.setdefault("messages", (create_user_message("replay"),))
    return GenerateOptions(**fields)


def replay_chunks(
    cassette: Cassette | str | Path,
    adapter_factory: AdapterFactory,
    *,
    options: GenerateOptions | None = None,
    speed: float = 0.0,
    strict: bool = True,
    **factory_options: Any,
) -> list[StreamChunk]:
    """The chunks ``adapter_factory``'s adapter yields for ``cassette``'s
    response, each validated (see the module docstring).

    Raises:
        LlmError: what the adapter raises, ``INVARIANT`` for a protocol
            violation, ``INVALID_CASSETTE`` for a path that is not a cassette.
    """
    loaded = _as_cassette(cassette)
    with replay_server(loaded, speed) as server:
        adapter = adapter_factory(replay_base_url(server, loaded), **factory_options)
        try:
            stream = adapter.stream(options or replay_options(loaded))
            try:
                return list(validate_stream(stream, strict=strict))
            finally:
                close_stream(stream)
        finally:
            close_adapter(adapter)


def close_stream(stream: object) -> None:
    """Call ``stream.close()`` when it has one (a generator does)."""
    close = getattr(stream, "close", None)
    if callable(close):
        close()


def close_adapter(adapter: object) -> None:
    """Call ``adapter.close()`` when it has one."""
    close = getattr(adapter, "close", None)
    if callable(close):
        close()
