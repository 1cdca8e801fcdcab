"""What the streaming benchmarks share around their clients: the arguments, the
server process, the timing, the interleaved rounds and the throughput table.

- ``server_process(replies, *args)`` serves ``replies(*args)`` (request path to
  ``Reply``, built in the child) from a ``LoopbackServer`` in a child process,
  so the server never competes with the clients for the GIL; it yields the port
  and stops the child when the block ends.
- ``timed(run, expected)`` times one run (wall clock and this process's CPU)
  and exits the benchmark when the run did not count ``expected`` deltas.
- ``best_of(clients, expected, repeat)`` runs the clients in interleaved rounds
  (a load change on the machine hits every client alike) and keeps the best
  wall and the best CPU time of each; a client given as ``None`` (an SDK that is
  not installed) is left out.
- ``throughput(...)`` does both for each body kind in ``KINDS``;
  ``print_throughput(...)`` prints the ``events/s``, ``µs/event`` and
  ``x floor`` table, each row measured against its group's ``raw floor``.
- Nothing here runs per event: the clients' own loops are all that is timed.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from collections.abc import Mapping
from collections.abc import Sequence
from contextlib import contextmanager
from multiprocessing.connection import Connection
from typing import Any
from typing import Final
from typing import Literal
from typing import NamedTuple

from dsh_llm.protocol import GenerateOptions
from dsh_llm.protocol import StreamChunk
from dsh_llm.protocol import TextDelta
from dsh_llm.testing import LoopbackServer
from dsh_llm.testing import RecordedRequest
from dsh_llm.testing import Reply

FLOOR: Final = "raw floor"
"""The client name every other row of a group is compared with."""
KINDS: Final[tuple[Literal["chunked", "close"], ...]] = ("chunked", "close")
"""The body kinds: one HTTP chunk per event, and close-delimited."""

Client = Callable[[], int]
"""One streamed request to its end; returns the text deltas it saw."""
Clients = Sequence[tuple[str, Client | None]]
"""Named clients in table order; ``None`` for an SDK that is not installed."""


def arguments(
    description: str, events: int, repeat: int, argv: list[str] | None
) -> argparse.Namespace:
    """``--events N`` and ``--repeat R``, with the benchmark's defaults."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--events", type=int, default=events)
    parser.add_argument("--repeat", type=int, default=repeat)
    return parser.parse_args(argv)


def version_line(events: int, repeat: int) -> None:
    """Print the heading every throughput benchmark starts with."""
    version = sys.version.split()[0]
    print(f"Python {version}, {events:,} events, best of {repeat} rounds")
    print()


# --- the server process -----------------------------------------------------------


def both_kinds(path: str, events: Sequence[bytes]) -> dict[str, Reply]:
    """``events`` served at ``/chunked{path}`` and ``/close{path}``."""
    body = tuple(events)
    return {f"/{kind}{path}": Reply(body=body, framing=kind) for kind in KINDS}


def _serve(
    pipe: Connection,
    replies: Callable[..., Mapping[str, Reply]],
    args: tuple[Any, ...],
) -> None:
    by_path = replies(*args)

    def handler(request: RecordedRequest) -> Reply:
        return by_path[request.path]

    with LoopbackServer(handler=handler) as server:
        pipe.send(server.port)
        pipe.recv()


@contextmanager
def server_process(
    replies: Callable[..., Mapping[str, Reply]], *args: Any, spawn: bool = False
) -> Iterator[int]:
    """The port of a child process serving ``replies(*args)`` by request path;
    the child is stopped when the block ends. ``spawn`` starts it in a fresh
    interpreter (``replies`` must then be a module-level function)."""
    context = multiprocessing.get_context("spawn" if spawn else None)
    parent, child = context.Pipe()
    process = context.Process(target=_serve, args=(child, replies, args), daemon=True)
    process.start()
    port: int = parent.recv()
    try:
        yield port
    finally:
        parent.send("stop")
        process.join(10)


# --- clients and rounds -------------------------------------------------------------


def text_deltas(
    stream: Callable[[GenerateOptions], Iterable[StreamChunk]],
    options: GenerateOptions,
) -> Client:
    """A client that runs ``stream(options)`` to its last chunk, counting text
    deltas (``stream`` is an adapter's or a runtime's ``stream``)."""

    def run() -> int:
        return sum(1 for chunk in stream(options) if isinstance(chunk, TextDelta))

    return run


class Timing(NamedTuple):
    """Seconds of one run, or the best of several (each field on its own)."""

    wall: float
    """Wall-clock seconds (``time.perf_counter``)."""
    cpu: float
    """CPU seconds of this process, all threads (``time.process_time``)."""


def timed(run: Client, expected: int) -> Timing:
    """Time one ``run()``; exit the benchmark unless it returned ``expected``."""
    start = time.perf_counter()
    cpu = time.process_time()
    count = run()
    cpu = time.process_time() - cpu
    elapsed = time.perf_counter() - start
    if count != expected:
        raise SystemExit(f"client saw {count} deltas, expected {expected}")
    return Timing(elapsed, cpu)


def best_of(clients: Clients, expected: int, repeat: int) -> dict[str, Timing]:
    """The best of ``repeat`` interleaved rounds for each present client, in the
    order given."""
    present = [(name, client) for name, client in clients if client is not None]
    inf = float("inf")
    best = {name: Timing(inf, inf) for name, _ in present}
    for _ in range(repeat):
        for name, client in present:
            wall, cpu = timed(client, expected)
            old = best[name]
            best[name] = Timing(min(old.wall, wall), min(old.cpu, cpu))
    return best


# --- the table ----------------------------------------------------------------------


class Row(NamedTuple):
    """One line of a throughput table."""

    group: tuple[str, ...]
    """The leading labels (body kind, wire...); rows of a group share a floor."""
    client: str
    """The client's name; ``FLOOR`` for the group's floor."""
    timing: Timing
    """The client's best times."""


def throughput(
    count: int,
    repeat: int,
    replies: Callable[[int], Mapping[str, Reply]],
    clients: Callable[[int, str], Clients],
) -> list[Row]:
    """Serve ``replies(count)`` from a child process and time ``clients(port,
    kind)`` for each body kind in ``KINDS``: one row per kind and client."""
    rows = []
    with server_process(replies, count) as port:
        for kind in KINDS:
            best = best_of(clients(port, kind), count, repeat)
            rows += [Row((kind,), name, timing) for name, timing in best.items()]
    return rows


def print_throughput(
    events: int,
    rows: Sequence[Row],
    group_columns: Sequence[tuple[str, int]],
    extra: tuple[str, Callable[[Row, Row], str]] | None = None,
) -> None:
    """Print ``rows`` as ``<group labels> client events/s µs/event x floor``.

    ``group_columns`` names and widths the group labels; the client column is
    one wider than its longest name. ``extra`` adds columns on the right: their
    header and a function of ``(row, its floor row)`` that formats them.
    """
    floors = {row.group: row for row in rows if row.client == FLOOR}
    width = max(len("client"), *(len(row.client) for row in rows)) + 1
    labels = "".join(f"{name:<{size}} " for name, size in group_columns)
    header = f"{labels}{'client':<{width}} {'events/s':>10} {'µs/event':>9}"
    print(f"{header} {'x floor':>8}" + (extra[0] if extra else ""))
    for row in rows:
        seconds = row.timing.wall
        floor = floors[row.group]
        cells = "".join(
            f"{label:<{size}} "
            for label, (_, size) in zip(row.group, group_columns, strict=True)
        )
        line = (
            f"{cells}{row.client:<{width}} {events / seconds:>10,.0f}"
            f" {seconds / events * 1e6:>9.2f} {seconds / floor.timing.wall:>8.2f}"
        )
        print(line + (extra[1](row, floor) if extra else ""))
