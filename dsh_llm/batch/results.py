"""Batch result lines and the append-only results file.

This module owns the result line format and how the file is written and read
back. Contracts callers may rely on:

- A result line is compact JSON: ``{"id", "line", "ok", "message"?, "usage"?,
  "finish"?, "failure"?, "attempts", "durationMs"}``. ``message``, ``usage`` and
  ``finish`` are the protocol's own JSON (``dsh_llm.serde``); ``message`` is
  present only for a successful call, ``failure`` (``{"message", "code", ...}``)
  only for a failed one. ``id`` is ``null`` only for a request line without a
  usable id (or one repeating an earlier line's id); ``line`` is its line number.
- ``ResultsFile`` appends whole lines: ``append_many`` writes its rows with one
  ``write`` on a descriptor opened with ``O_APPEND``, under a lock, then one
  ``fsync`` unless disabled, so a killed process leaves at most one torn last
  line, and the rows are on disk when it returns (``append`` is one row).
- One ``ResultsFile`` per file at a time: opening takes an exclusive OS lock on
  the file (``flock``; where the platform has none, no lock), held until
  ``close``, and a second opening, in this process or another, raises
  ``ResultsFileBusyError`` instead of waiting. The kernel drops the lock when the
  process dies, so a run killed with SIGKILL leaves no stale lock.
- Opening a ``ResultsFile`` reads what is there first: a last line without its
  newline (a torn write) is cut off the file, and lines that are not result
  objects (however hostile: nested too deeply, a number too long) are skipped
  (counted in ``ResultsIndex.unreadable``), so the file stays readable and a
  rerun continues after the last whole line.
- ``read_results`` yields the readable rows of a file as ``BatchResult`` values.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Iterable
from collections.abc import Iterator
from typing import Any
from typing import Final

if sys.platform != "win32":
    import fcntl

import attrs

from dsh_llm.batch.requests import RequestId
from dsh_llm.batch.requests import id_key
from dsh_llm.protocol import FinishReason
from dsh_llm.protocol import LlmFailure
from dsh_llm.protocol import Message
from dsh_llm.protocol import TokenUsage
from dsh_llm.serde import compact_json
from dsh_llm.serde import converter
from dsh_llm.serde import message_from_dict
from dsh_llm.serde import message_to_dict

__all__ = [
    "BatchResult",
    "ResultsFile",
    "ResultsFileBusyError",
    "ResultsIndex",
    "read_results",
    "result_from_dict",
    "result_to_dict",
    "row_line",
]

_NEWLINE: Final = b"\n"


@attrs.frozen(kw_only=True)
class BatchResult:
    """The outcome of one request line."""

    id: RequestId | None
    """The request's id (``None`` for a line without a usable or unique id)."""
    line: int
    """The request's line number in the requests file (from 1)."""
    message: Message | None = None
    """The assembled assistant message of a successful call."""
    usage: TokenUsage | None = None
    """The last attempt's usage, when the provider reported any."""
    finish: FinishReason | None = None
    """How the last attempt ended (``None`` when no attempt was made)."""
    failure: LlmFailure | None = None
    """What went wrong, for a failed request; ``None`` exactly when ``ok``."""
    attempts: int = 0
    """Attempts made (0 for a line that could not be sent)."""
    duration_ms: float = 0.0
    """Wall time the request took, waits for the rate limit included."""

    @property
    def ok(self) -> bool:
        """Whether the request succeeded."""
        return self.failure is None


def result_to_dict(result: BatchResult) -> dict[str, Any]:
    """The JSON-ready dict of ``result`` (see the module docstring)."""
    row: dict[str, Any] = {"id": result.id, "line": result.line, "ok": result.ok}
    if result.message is not None:
        row["message"] = message_to_dict(result.message)
    if result.usage is not None:
        row["usage"] = converter.unstructure(result.usage, TokenUsage)
    if result.finish is not None:
        row["finish"] = converter.unstructure(result.finish, FinishReason)
    if result.failure is not None:
        row["failure"] = converter.unstructure(result.failure, LlmFailure)
    row["attempts"] = result.attempts
    row["durationMs"] = round(result.duration_ms, 3)
    return row


def row_line(result: BatchResult | dict[str, Any]) -> bytes:
    """The line ``ResultsFile`` writes for ``result`` (a dict as it is): compact
    JSON, UTF-8, newline included."""
    row = result_to_dict(result) if isinstance(result, BatchResult) else result
    return compact_json(row).encode("utf-8") + _NEWLINE


def result_from_dict(row: Any) -> BatchResult:
    """Read a result row back.

    Raises:
        ValueError: when ``row`` is not a result row (the message says why).
    """
    if not isinstance(row, dict):
        raise ValueError("a result row must be an object")
    try:
        request_id = row["id"]
        line = row["line"]
        if not (request_id is None or isinstance(request_id, str | int)):
            raise ValueError("id must be a string, an integer or null")
        if type(line) is not int:
            raise ValueError("line must be an integer")
        message = row.get("message")
        usage = row.get("usage")
        finish = row.get("finish")
        failure = row.get("failure")
        return BatchResult(
            id=request_id,
            line=line,
            message=None if message is None else message_from_dict(message),
            usage=None if usage is None else converter.structure(usage, TokenUsage),
            finish=None
            if finish is None
            else converter.structure(finish, FinishReason),
            failure=None
            if failure is None
            else converter.structure(failure, LlmFailure),
            attempts=int(row.get("attempts", 0)),
            duration_ms=float(row.get("durationMs", 0.0)),
        )
    except ValueError:
        raise
    except Exception as exc:  # KeyError, LlmError, cattrs errors: not a row
        raise ValueError(f"not a result row: {type(exc).__name__}: {exc}") from None


@attrs.frozen(kw_only=True)
class ResultsIndex:
    """What an existing results file already holds."""

    done_ids: frozenset[str] = frozenset()
    """``id_key`` of every id with a row."""
    done_lines: frozenset[int] = frozenset()
    """Line numbers of rows without an id."""
    rows: int = 0
    """Readable rows."""
    failed: int = 0
    """Readable rows of failed requests."""
    unreadable: int = 0
    """Whole lines skipped because they are not result rows."""
    torn_bytes: int = 0
    """Bytes of a torn last line cut off the file (0 when there was none)."""

    def is_done(self, request_id: RequestId | None, line: int) -> bool:
        """Whether a request (or an id-less bad line) already has its row."""
        if request_id is None:
            return line in self.done_lines
        return id_key(request_id) in self.done_ids


def _scan(data: bytes) -> tuple[ResultsIndex, int]:
    """The index of the whole lines of ``data`` and where they end."""
    end = data.rfind(_NEWLINE) + 1
    ids: set[str] = set()
    lines: set[int] = set()
    rows = failed = unreadable = 0
    for raw in data[:end].splitlines():
        if not raw.strip():
            continue
        try:
            row = json.loads(raw.decode("utf-8"))
            request_id = row["id"]
            line = row["line"]
            ok = row["ok"]
            if (
                not (request_id is None or isinstance(request_id, str | int))
                or isinstance(request_id, bool)
                or type(line) is not int
                or not isinstance(ok, bool)
            ):
                raise ValueError
        except (ValueError, TypeError, KeyError, RecursionError):
            # RecursionError: a line nested too deeply for the JSON reader.
            unreadable += 1
            continue
        rows += 1
        failed += not ok
        if request_id is None:
            lines.add(line)
        else:
            ids.add(id_key(request_id))
    index = ResultsIndex(
        done_ids=frozenset(ids),
        done_lines=frozenset(lines),
        rows=rows,
        failed=failed,
        unreadable=unreadable,
        torn_bytes=len(data) - end,
    )
    return index, end


class ResultsFileBusyError(OSError):
    """The results file is already open for another run (this process or another
    one holds its lock).

    Args:
        path: The results file.
    """

    def __init__(self, path: str) -> None:
        super().__init__(
            f"{path} is in use by another batch run (it holds the file's lock); "
            "wait for that run to end, or write to another results file"
        )
        self.path = path
        """The results file."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.path,))


def _lock(fd: int, path: str) -> None:
    """Take the file's exclusive lock, or raise ``ResultsFileBusyError``."""
    if sys.platform == "win32":  # pragma: no cover - no flock there
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise ResultsFileBusyError(path) from None


class ResultsFile:
    """An append-only results file, opened and locked for a run (see the module
    docstring).

    Args:
        path: The results file; created when missing.
        fsync: Whether each line is forced to disk before ``append`` returns.

    Raises:
        ResultsFileBusyError: when another ``ResultsFile`` holds the file open.
        OSError: when the file cannot be opened, read or repaired.
    """

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = True) -> None:
        self._path = os.fspath(path)
        self._fsync = fsync
        self._lock = threading.Lock()
        self._sync_lock = threading.Lock()
        self._written = 0
        self._synced = 0
        fd = os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            # Locked before anything is read, so a second run never sees (or
            # cuts) a line the first one is writing.
            _lock(fd, self._path)
            with open(fd, "rb", closefd=False) as reader:
                data = reader.read()
            index, end = _scan(data)
            if end < len(data):
                # A torn last line: cut it so the next row starts on its own line.
                os.ftruncate(fd, end)
                if fsync:
                    os.fsync(fd)
        except BaseException:
            os.close(fd)
            raise
        self._fd: int | None = fd
        self.index: ResultsIndex = index
        """What the file held when it was opened."""

    @property
    def path(self) -> str:
        """The file's path."""
        return self._path

    def append(self, result: BatchResult | dict[str, Any]) -> None:
        """Write one row as one whole line (a dict is written as it is).

        Raises:
            OSError: when the line cannot be written; ``ValueError`` once closed.
        """
        self.append_many((result,))

    def append_many(self, results: Iterable[BatchResult | dict[str, Any]]) -> None:
        """Write rows as whole lines with one ``write``, then force them to disk
        with one ``fsync`` (unless disabled); they are on disk when this returns.

        Raises:
            OSError: when the lines cannot be written; ``ValueError`` once closed.
        """
        self.append_lines(row_line(row) for row in results)

    def append_lines(self, lines: Iterable[bytes]) -> None:
        """Write lines ``row_line`` made, with one ``write``, then force them to
        disk with one ``fsync`` (unless disabled), as ``append_many`` does.

        Raises:
            OSError: when the lines cannot be written; ``ValueError`` once closed.
        """
        data = b"".join(lines)
        if not data:
            return
        with self._lock:
            fd = self._fd
            if fd is None:
                raise ValueError("the results file is closed")
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            self._written += 1
            mine = self._written
        if self._fsync:
            self._sync(fd, mine)

    def _sync(self, fd: int, mine: int) -> None:
        # Group commit: one fsync covers every line written before it started,
        # so concurrent appends share flushes instead of queueing one each.
        with self._sync_lock:
            if self._synced >= mine:
                return
            with self._lock:
                target = self._written
            os.fsync(fd)
            self._synced = target

    def close(self) -> None:
        """Close the file and release its lock; idempotent. No ``append`` may be
        running."""
        with self._lock:
            fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def __enter__(self) -> ResultsFile:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ResultsFile({self._path!r})"


def read_results(path: str | os.PathLike[str]) -> Iterator[BatchResult]:
    """The readable rows of a results file, in file order; a torn last line and
    lines that are not rows are skipped.

    Raises:
        OSError: when the file cannot be read.
    """
    with open(path, "rb") as lines:
        for raw in lines:
            if not raw.endswith(_NEWLINE) or not raw.strip():
                continue
            try:
                row = result_from_dict(json.loads(raw.decode("utf-8")))
            except (ValueError, RecursionError):
                continue
            yield row


@attrs.frozen(kw_only=True)
class BatchSummary:
    """What a run did."""

    results_path: str
    """The results file."""
    total: int
    """Request lines in the requests file (blank lines not counted)."""
    skipped: int
    """Lines skipped because the results file already had their row."""
    succeeded: int
    """Rows of successful requests written by this run."""
    failed: int
    """Rows of failed requests (and malformed lines) written by this run."""
    failed_before: int
    """Failed rows the results file held before this run."""
    input_tokens: int
    """Input tokens of this run's rows (uncached, cache read and cache write)."""
    output_tokens: int
    """Output tokens of this run's rows."""
    duration_s: float
    """Wall time of the run."""
    interrupted: bool
    """Whether the run was stopped before every line had a row."""

    @property
    def not_run(self) -> int:
        """Lines still without a row (a rerun sends them)."""
        return max(self.total - self.skipped - self.succeeded - self.failed, 0)

    @property
    def ok(self) -> bool:
        """Whether every line of the file has a successful row."""
        return (
            self.failed == 0
            and self.failed_before == 0
            and self.not_run == 0
            and not self.interrupted
        )
