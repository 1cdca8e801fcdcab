"""The results file: one whole line per row, rows read back as they were written,
and a torn last line cut off when the file is opened again."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from dsh_llm.batch.results import BatchResult
from dsh_llm.batch.results import ResultsFile
from dsh_llm.batch.results import ResultsFileBusyError
from dsh_llm.batch.results import read_results
from dsh_llm.batch.results import result_from_dict
from dsh_llm.batch.results import result_to_dict
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import LlmFailure
from dsh_llm.protocol import TokenUsage
from dsh_llm.protocol import create_assistant_message


def _ok(request_id: str | int, line: int) -> BatchResult:
    return BatchResult(
        id=request_id,
        line=line,
        message=create_assistant_message("hi", provider="p", model="m"),
        usage=TokenUsage(input_tokens=3, output_tokens=None, cache_read_tokens=2),
        finish=FinishReason.STOP,
        attempts=2,
        duration_ms=12.5,
    )


def _failed(request_id: str | None, line: int) -> BatchResult:
    failure = LlmFailure(message="slow down", code="RATE_LIMIT", status=429)
    return BatchResult(
        id=request_id,
        line=line,
        finish=FinishReason.error(failure),
        failure=failure,
        attempts=6,
    )


def test_a_row_is_protocol_json_and_reads_back_equal() -> None:
    result = _ok("a", 1)
    row = result_to_dict(result)
    assert row["ok"] is True
    assert row["message"]["content"] == [{"type": "text", "text": "hi"}]
    assert row["usage"] == {
        "inputTokens": 3,
        "outputTokens": None,
        "cacheReadTokens": 2,
    }
    assert row["finish"] == {"kind": "stop"}
    assert "failure" not in row
    assert result_from_dict(json.loads(json.dumps(row))) == result
    failed = result_to_dict(_failed(None, 4))
    assert failed["ok"] is False
    assert failed["failure"] == {
        "message": "slow down",
        "code": "RATE_LIMIT",
        "status": 429,
    }
    assert "message" not in failed


def test_rows_are_appended_one_line_each_and_indexed_on_reopen(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    with ResultsFile(path) as results:
        assert results.index.rows == 0
        results.append(_ok("a", 1))
        results.append(_failed(None, 2))
        results.append(_ok(3, 3))
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b""
    assert len(lines) == 4
    with ResultsFile(path) as again:
        index = again.index
    assert (index.rows, index.failed, index.unreadable, index.torn_bytes) == (
        3,
        1,
        0,
        0,
    )
    assert index.is_done("a", 99)
    assert index.is_done(3, 99)
    assert not index.is_done("3", 99)
    assert index.is_done(None, 2)
    assert not index.is_done(None, 1)
    assert [r.id for r in read_results(path)] == ["a", None, 3]


def test_a_torn_last_line_is_cut_off_and_the_next_row_starts_cleanly(
    tmp_path: Path,
) -> None:
    path = tmp_path / "results.jsonl"
    with ResultsFile(path) as results:
        results.append(_ok("a", 1))
    whole = path.read_bytes()
    torn = json.dumps(result_to_dict(_ok("b", 2))).encode()[:40]
    path.write_bytes(whole + torn)
    assert [r.id for r in read_results(path)] == ["a"]  # readable as it is
    with ResultsFile(path) as results:
        assert results.index.torn_bytes == len(torn)
        assert not results.index.is_done("b", 2)
        assert path.read_bytes() == whole
        results.append(_ok("b", 2))
    assert [r.id for r in read_results(path)] == ["a", "b"]
    assert all(json.loads(line) for line in path.read_text().splitlines())


def test_whole_lines_that_are_not_rows_are_skipped_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    row = json.dumps(result_to_dict(_ok("a", 1)))
    path.write_text(f'garbage\n{{"id": "x"}}\n{row}\n[1]\n')
    with ResultsFile(path) as results:
        assert (results.index.rows, results.index.unreadable) == (1, 3)
        assert results.index.is_done("a", 1)
        assert not results.index.is_done("x", 2)
    assert [r.id for r in read_results(path)] == ["a"]


def test_hostile_lines_are_skipped_on_resume_and_when_read(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    row = json.dumps(result_to_dict(_ok("a", 1)))
    deep = "[" * 100_000 + "]" * 100_000
    huge = '{"id": 1' + "0" * 5000 + ', "line": 2, "ok": true}'
    nested_row = json.dumps({"id": "n", "line": 3, "ok": True, "usage": {}})
    nested_row = nested_row[:-1] + ', "x": ' + "[" * 50_000 + "]" * 50_000 + "}"
    path.write_text(f"{deep}\n{huge}\n{row}\n{'{' * 100_000}\n")
    with ResultsFile(path) as results:
        assert (results.index.rows, results.index.unreadable) == (1, 3)
        assert results.index.is_done("a", 1)
    assert [r.id for r in read_results(path)] == ["a"]
    path.write_text(f"{row}\n{nested_row}\n")
    assert [r.id for r in read_results(path)] == ["a"]


def test_a_second_opening_of_a_file_in_use_is_refused_until_it_closes(
    tmp_path: Path,
) -> None:
    path = tmp_path / "results.jsonl"
    with ResultsFile(path) as results:
        results.append(_ok("a", 1))
        with pytest.raises(ResultsFileBusyError) as caught:
            ResultsFile(path)
        assert caught.value.path == str(path)
        assert "in use by another batch run" in str(caught.value)
        assert isinstance(caught.value, OSError)
        results.append(_ok("b", 2))  # the first opening is untouched
    with ResultsFile(path) as again:
        assert again.index.rows == 2


def test_append_many_writes_every_row_as_its_own_line(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    with ResultsFile(path) as results:
        results.append_many([_ok("a", 1), _failed(None, 2), _ok(3, 3)])
        results.append_many([])
    assert [r.id for r in read_results(path)] == ["a", None, 3]
    assert path.read_bytes().count(b"\n") == 3


def test_appends_from_many_threads_stay_whole_lines(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    with ResultsFile(path) as results:

        def write(worker: int) -> None:
            for n in range(100):
                results.append(_ok(f"w{worker}-{n}", n + 1))

        threads = [threading.Thread(target=write, args=(w,)) for w in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert sorted(row["id"] for row in rows) == sorted(
        f"w{w}-{n}" for w in range(8) for n in range(100)
    )
