"""RowWriter: rows are written by its own thread, many per write and sync, and
counted only once they are on disk; a failed write stops it without losing count."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path

import pytest

from dsh_llm.batch.results import BatchResult
from dsh_llm.batch.results import ResultsFile
from dsh_llm.batch.results import read_results
from dsh_llm.batch.writer import RowWriter
from dsh_llm.protocol import LlmFailure
from dsh_llm.protocol import TokenUsage


def _row(n: int, *, ok: bool = True) -> BatchResult:
    failure = None if ok else LlmFailure(message="no", code="SERVER")
    return BatchResult(
        id=f"r{n}",
        line=n + 1,
        usage=TokenUsage(input_tokens=3, output_tokens=2, cache_read_tokens=1),
        failure=failure,
    )


class _GatedFile(ResultsFile):
    """A results file whose writes wait until the test opens the gate."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, fsync=False)
        self.gate = threading.Event()
        self.writing = threading.Event()
        self.batches: list[int] = []

    def append_lines(self, lines: Iterable[bytes]) -> None:
        rows = list(lines)
        self.writing.set()
        assert self.gate.wait(20), "the test never opened the gate"
        super().append_lines(rows)
        self.batches.append(len(rows))


class _FullDisk(ResultsFile):
    def append_lines(self, lines: Iterable[bytes]) -> None:
        raise OSError(28, "No space left on device")


def test_put_never_waits_for_the_disk_and_rows_count_once_written(
    tmp_path: Path,
) -> None:
    path = tmp_path / "results.jsonl"
    written: list[str | int | None] = []
    with _GatedFile(path) as results:
        writer = RowWriter(results, on_written=lambda r: written.append(r.id))
        writer.put(_row(0))
        assert results.writing.wait(20)
        for n in range(1, 50):  # the first write is stuck: these queue up
            writer.put(_row(n, ok=n % 10 != 0))
        assert written == []
        assert writer.tally.succeeded == 0
        results.gate.set()
        writer.close()
    assert written == [f"r{n}" for n in range(50)]
    assert [r.id for r in read_results(path)] == written
    # The rows that waited behind the stuck write shared one write.
    assert results.batches == [1, 49]
    tally = writer.tally
    assert (tally.succeeded, tally.failed) == (46, 4)
    assert (tally.input_tokens, tally.output_tokens) == (200, 100)


def test_a_full_queue_holds_put_until_the_writer_takes_it(tmp_path: Path) -> None:
    with _GatedFile(tmp_path / "results.jsonl") as results:
        writer = RowWriter(results, max_pending=2)
        writer.put(_row(0))
        assert results.writing.wait(20)
        writer.put(_row(1))
        writer.put(_row(2))
        third = threading.Thread(target=writer.put, args=(_row(3),))
        third.start()
        third.join(0.2)
        assert third.is_alive()  # held: two rows already wait
        results.gate.set()
        third.join(20)
        assert not third.is_alive()
        writer.close()
    assert writer.tally.succeeded == 4


def test_a_failed_write_stops_the_writer_and_counts_nothing(tmp_path: Path) -> None:
    errors: list[BaseException] = []
    with _FullDisk(tmp_path / "results.jsonl") as results:
        writer = RowWriter(results, on_error=errors.append)
        writer.put(_row(0))
        writer.close()
        writer.put(_row(1))  # dropped: the writer has stopped
    assert isinstance(writer.error, OSError)
    assert errors == [writer.error]
    assert writer.tally.succeeded == 0


def test_close_is_idempotent_and_writes_what_is_queued(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    with ResultsFile(path) as results:
        writer = RowWriter(results, window_s=1.0)
        for n in range(3):
            writer.put(_row(n))
        writer.close()  # does not wait for the window
        writer.close()
    assert [r.id for r in read_results(path)] == ["r0", "r1", "r2"]
    with pytest.raises(ValueError, match="max_pending"):
        RowWriter(results, max_pending=0)
